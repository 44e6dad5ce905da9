// Copyright 2026 The Ember Authors.
//
// `ember-bench storage`: the embedding store against raw memory and plain RocksDB.
//
// All figures come from one run on one thread, 1000-key batches, dim 64, float32,
// Adagrad (64 state floats per row). Items 1-2 (phase 1) live in
// storage_in_memory.cc, item 3 (phase 2) in storage_tiered.cc; this file holds the
// parameters, ratios and targets.
//  1. gather: 1000 uniform rows copied (256 B each) out of a flat float array of
//     rows_small x 64 floats: the memory-system limit the in-memory store is held to.
//  2. An EmbeddingStore over an InMemoryBackend with an unlimited budget, populated
//     with rows_small rows (one push per ID): pull and Adagrad push of uniform IDs,
//     pull of Zipf IDs, and its bytes per resident row.
//  3. An EmbeddingStore over a RocksDbBackend (WAL off) whose memory budget holds
//     budget_fraction of rows_large rows: pull of Zipf IDs through the store, and
//     RocksDbBackend::MultiGet of the same IDs' row keys on the same database, each
//     after the same warm-up.
// Figure names and targets are documented in docs/PERFORMANCE.md.

#include <cmath>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "tools/bench/figures.h"
#include "tools/bench/storage_bench.h"
#include "tools/bench/storage_fixtures.h"
#include "tools/bench/suite.h"

namespace ember::bench::storage {
namespace {

// Targets (issue text); pull_10m_vs_1m is reported without one.
constexpr double kPullVsGatherTarget = 0.5;
constexpr double kPushVsPullTarget = 0.5;
constexpr double kTieredVsRocksDbTarget = 5.0;
constexpr double kMemoryOverheadTarget = 1.3;

// The population marker of the tiered database: a named --dir holding a database with
// the same marker is reused instead of populated again.
std::string PopulationMarker(const BenchOptions& options) {
  return absl::StrFormat("storage rows=%d dim=%d optimizer=adagrad table_seed=%d format=1",
                         options.rows_large, kDim, kTableSeed);
}

// Adds `name` = numerator / denominator with its target and whether it is met.
void AddRatio(Figures& figures, const std::string& name, const std::string& numerator,
              const std::string& denominator, double target, bool at_most) {
  const double num = figures.Number(numerator).value_or(NAN);
  const double den = figures.Number(denominator).value_or(NAN);
  const double ratio = den > 0 ? num / den : NAN;
  figures.AddNumber(name, ratio);
  if (std::isnan(target)) return;
  figures.AddNumber(name + "_target", target);
  figures.AddBool(name + "_met", at_most ? ratio <= target : ratio >= target);
}

absl::StatusOr<Figures> RunStorageSuite(const BenchOptions& options) {
  Figures figures;
  figures.AddString("suite", "storage");
  figures.AddInt("rows_small", options.rows_small);
  figures.AddInt("rows_large", options.rows_large);
  figures.AddInt("dim", kDim);
  figures.AddInt("batch_keys", kBatch);
  figures.AddString("optimizer", "adagrad");
  figures.AddNumber("zipf_s", options.zipf);
  figures.AddNumber("budget_fraction", options.budget_fraction);
  figures.AddNumber("min_time_s", options.min_time_s);
  figures.AddNumber("warmup_s", options.warmup_s);
  figures.AddInt("repetitions", options.repetitions);
  figures.AddInt("hardware_threads", std::thread::hardware_concurrency());
  figures.AddInt("bench_threads", 1);

  // Checked first: a --dir that cannot be used fails before minutes of work.
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<BenchDir> dir, BenchDir::Open(options.dir));
  const std::string marker = PopulationMarker(options);
  const bool reuse = !dir->scratch() && dir->ReadMarker() == marker;
  if (!reuse && !dir->Empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--dir=", dir->path(), " is not empty and holds no database of this run's rows_large (",
        options.rows_large, "); remove it or name another"));
  }

  EMBER_ASSIGN_OR_RETURN(const double memory_per_row, RunInMemory(options, figures));
  EMBER_RETURN_IF_ERROR(RunTiered(options, *dir, reuse, marker, memory_per_row, figures));

  AddRatio(figures, "pull_vs_gather", "pull_1m_keys_per_sec", "gather_keys_per_sec",
           kPullVsGatherTarget, false);
  AddRatio(figures, "push_vs_pull", "push_adagrad_1m_keys_per_sec", "pull_1m_keys_per_sec",
           kPushVsPullTarget, false);
  AddRatio(figures, "tiered_vs_rocksdb", "pull_zipf_10m_tiered_keys_per_sec",
           "rocksdb_multiget_zipf_10m_keys_per_sec", kTieredVsRocksDbTarget, false);
  AddRatio(figures, "memory_overhead", "memory_bytes_per_row", "raw_bytes_per_row",
           kMemoryOverheadTarget, true);
  AddRatio(figures, "rss_overhead", "rss_bytes_per_row", "raw_bytes_per_row", NAN, true);
  AddRatio(figures, "pull_10m_vs_1m", "pull_zipf_10m_tiered_keys_per_sec",
           "pull_zipf_1m_keys_per_sec", NAN, false);
  return figures;
}

}  // namespace

EMBER_BENCH_SUITE(storage,
                  "memory tier vs raw gather, Adagrad push, memory per row, RocksDB tier vs "
                  "plain MultiGet",
                  RunStorageSuite);

}  // namespace ember::bench::storage
