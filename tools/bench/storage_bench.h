// Copyright 2026 The Ember Authors.
//
// The storage suite's phases and shared parameters (internal to tools/bench/).
//
//   storage_bench.cc      the suite: parameters, ratios and targets
//   storage_in_memory.cc  phase 1: raw gather and the all-in-memory store
//   storage_tiered.cc     phase 2: the RocksDB-backed store against plain MultiGet
//
// Every phase runs on one thread with 1000-key batches of dim-64 float32 rows under
// Adagrad, adds its figures (names in docs/PERFORMANCE.md) and logs to stderr.

#ifndef EMBER_TOOLS_BENCH_STORAGE_BENCH_H_
#define EMBER_TOOLS_BENCH_STORAGE_BENCH_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ember/v1/table.pb.h"
#include "tools/bench/bench_runner.h"
#include "tools/bench/figures.h"
#include "tools/bench/storage_fixtures.h"
#include "tools/bench/suite.h"

namespace ember::bench::storage {

inline constexpr size_t kDim = 64;
inline constexpr size_t kBatch = 1000;
inline constexpr size_t kAdagradStateFloats = kDim;   // one accumulator per weight
inline constexpr size_t kPoolKeys = size_t{1} << 23;  // keys per measured stream (8M)
inline constexpr char kTable[] = "bench";
inline constexpr uint64_t kTableSeed = 0xe3be7;

// The benchmark table: dim 64, Adagrad, admission.min_count 0 (every pushed ID gets
// a row), a fixed seed (so a kept database can be reused).
v1::TableConfig BenchTable();

// Google Benchmark settings of a phase's measurements.
RunConfig MeasureConfig(const BenchOptions& options, double warmup_s);

// Phase 1. Adds gather_*, pull_1m_*, push_adagrad_1m_*, pull_zipf_1m_*, memory_* and
// rss_* figures; returns the store's charged bytes per resident row (phase 2 sizes its
// budget with it).
absl::StatusOr<double> RunInMemory(const BenchOptions& options, Figures& figures);

// Phase 2 on the database in `dir`: populates it with rows_large rows unless `reuse`
// (then writes `marker` if the directory is kept), and adds the tiered_*,
// pull_zipf_10m_tiered_* and rocksdb_multiget_zipf_10m_* figures.
absl::Status RunTiered(const BenchOptions& options, const BenchDir& dir, bool reuse,
                       const std::string& marker, double memory_per_row, Figures& figures);

}  // namespace ember::bench::storage

#endif  // EMBER_TOOLS_BENCH_STORAGE_BENCH_H_
