// Copyright 2026 The Ember Authors.
//
// The ember-bench suite registry.
//
// A suite is a function from BenchOptions to Figures, defined in its own file
// (storage_bench.cc, later cluster_bench.cc, ...) and registered there at static
// initialization; `ember-bench SUITE` looks it up by name. Adding a suite is adding a
// file to tools/bench/CMakeLists.txt:
//
//   absl::StatusOr<Figures> RunClusterSuite(const BenchOptions& options) { ... }
//   EMBER_BENCH_SUITE(cluster, "RPC pull/push against N in-process shards",
//                     RunClusterSuite);
//
// Suites log progress to stderr only: stdout carries the result (one JSON object
// with --json).

#ifndef EMBER_TOOLS_BENCH_SUITE_H_
#define EMBER_TOOLS_BENCH_SUITE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/bench/figures.h"

namespace ember::bench {

// Parameters shared by the suites, parsed and validated once in main.cc.
struct BenchOptions {
  // Print one JSON object instead of a table.
  bool json = false;
  // Rows of the all-in-memory table (and of the raw gather array). Default: 1M.
  int64_t rows_small = 1'000'000;
  // Rows of the tiered (RocksDB-backed) table. Default: 10M.
  int64_t rows_large = 10'000'000;
  // Share of the large table's rows that the memory budget holds. Default: 0.1.
  double budget_fraction = 0.1;
  // storage: the tiered store's admission of pulled rows (StoreOptions).
  bool frequency_admission = false;
  // rebalance: the shards' default priorities (ember-ps --compaction_priority,
  // --migration_copy_priority); false: both normal.
  bool background_priorities = true;
  // rebalance: ember-ps --compaction_priority for the shards; empty: the default.
  std::string compaction_priority;
  // rebalance: ember-ps --migration_copy_priority for the shards; empty: the default.
  std::string migration_copy_priority;
  // Zipf exponent of skewed key streams. Default: 1.1.
  double zipf = 1.1;
  // Directory of the suite's database. Empty: a fresh directory under /tmp, removed at
  // the end. Otherwise created if missing and kept, and a database it holds from an
  // earlier run with the same parameters is reused instead of populated again.
  // Default: "".
  std::string dir;
  // Minimum measured time of each benchmark repetition, seconds. Default: 1.
  double min_time_s = 1.0;
  // Time each benchmark runs before it is measured, seconds. Default: 2.
  double warmup_s = 2.0;
  // Repetitions of each benchmark; figures are medians. Default: 5.
  int repetitions = 5;
  // Training examples of the `training` suite's generated dataset (the quickstart
  // data has 1M). Default: 1M.
  int64_t train_examples = 1'000'000;
  // Seed of every random key and gradient stream. Default: 1.
  uint64_t seed = 1;
};

struct Suite {
  std::string name;
  std::string description;
  std::function<absl::StatusOr<Figures>(const BenchOptions&)> run;
};

// Registers `suite`; returns true (for use in a static initializer). A duplicate
// name aborts at startup: it is a build error, not a runtime one.
bool RegisterSuite(Suite suite);

// The suite called `name`, or nullptr.
const Suite* FindSuite(std::string_view name);

// Every registered suite, sorted by name.
std::vector<const Suite*> AllSuites();

}  // namespace ember::bench

#define EMBER_BENCH_SUITE(name, description, fn)                           \
  static const bool ember_bench_suite_registered_##name [[maybe_unused]] = \
      ::ember::bench::RegisterSuite({#name, description, fn})

#endif  // EMBER_TOOLS_BENCH_SUITE_H_
