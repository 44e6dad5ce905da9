// Copyright 2026 The Ember Authors.
//
// Storage suite, phase 1: raw gather and the all-in-memory store (storage_bench.h).

#include <cstring>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "benchmark/benchmark.h"
#include "common/status_macros.h"
#include "server/store/embedding_store.h"
#include "server/store/in_memory_backend.h"
#include "tools/bench/storage_bench.h"

namespace ember::bench::storage {

v1::TableConfig BenchTable() {
  v1::TableConfig config;
  config.set_name(kTable);
  config.set_dim(kDim);
  config.set_seed(kTableSeed);
  config.mutable_optimizer()->set_kind(v1::OptimizerConfig::ADAGRAD);
  config.mutable_optimizer()->set_learning_rate(0.01f);
  return config;
}

RunConfig MeasureConfig(const BenchOptions& options, double warmup_s) {
  return RunConfig{options.min_time_s, warmup_s, options.repetitions};
}

absl::StatusOr<double> RunInMemory(const BenchOptions& options, Figures& figures) {
  const uint64_t rows = static_cast<uint64_t>(options.rows_small);
  Log("storage", absl::StrFormat("generating key streams over %d rows", rows));
  const std::vector<uint64_t> uniform_rows = UniformRows(rows, kPoolKeys, options.seed);
  const std::vector<uint64_t> uniform_ids = IdsOfRows(uniform_rows);
  EMBER_ASSIGN_OR_RETURN(const std::vector<uint64_t> zipf_ids,
                         ZipfIds(rows, options.zipf, kPoolKeys, options.seed + 1));
  const std::vector<float> grads = RandomGradients(kBatch * kDim, options.seed + 2);

  // Every page written, so the gather never reads the shared zero page.
  std::vector<float> flat(rows * kDim);
  for (size_t i = 0; i < flat.size(); ++i) flat[i] = static_cast<float>(i & 1023) * 1e-3f;

  StoreOptions store_options;
  store_options.memory_budget_bytes = 0;  // unlimited: every row stays resident
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<EmbeddingStore> store,
                         EmbeddingStore::Open(store_options, std::make_unique<InMemoryBackend>()));
  EMBER_RETURN_IF_ERROR(store->CreateTable(BenchTable()));
  const int64_t rss_before = ResidentBytes();
  EMBER_RETURN_IF_ERROR(
      Populate(*store, kTable, options.rows_small, kBatch, kDim, grads, "populate small"));
  const int64_t rss_after = ResidentBytes();
  const StoreStats stats = store->Stats();
  if (stats.rows_in_memory != options.rows_small) {
    return absl::InternalError(absl::StrFormat("%d of %d rows resident after population",
                                               stats.rows_in_memory, options.rows_small));
  }

  std::vector<float> out(kBatch * kDim);
  KeyStream gather_rows(&uniform_rows, kBatch);
  KeyStream pull_ids(&uniform_ids, kBatch);
  KeyStream push_ids(&uniform_ids, kBatch);
  KeyStream zipf_pull_ids(&zipf_ids, kBatch);
  int64_t step = options.rows_small;
  const std::vector<BenchCase> cases = {
      {"gather", kBatch,
       [&] {
         absl::Span<const uint64_t> batch = gather_rows.Next();
         float* dst = out.data();
         for (uint64_t row : batch) {
           std::memcpy(dst, flat.data() + row * kDim, kDim * sizeof(float));
           dst += kDim;
         }
         benchmark::DoNotOptimize(out.data());
         benchmark::ClobberMemory();
         return absl::OkStatus();
       }},
      {"pull_1m", kBatch,
       [&] { return store->Pull(kTable, pull_ids.Next(), absl::MakeSpan(out)); }},
      {"push_adagrad_1m", kBatch,
       [&] { return store->Push(kTable, push_ids.Next(), grads, ++step); }},
      {"pull_zipf_1m", kBatch,
       [&] { return store->Pull(kTable, zipf_pull_ids.Next(), absl::MakeSpan(out)); }},
  };
  EMBER_ASSIGN_OR_RETURN(auto results, RunCases(cases, MeasureConfig(options, options.warmup_s)));

  const double memory_per_row =
      static_cast<double>(stats.memory_bytes) / static_cast<double>(stats.rows_in_memory);
  const double raw_per_row = (kDim + kAdagradStateFloats) * sizeof(float);
  figures.AddNumber("gather_keys_per_sec", results["gather"].keys_per_sec);
  figures.AddNumber("pull_1m_keys_per_sec", results["pull_1m"].keys_per_sec);
  figures.AddNumber("push_adagrad_1m_keys_per_sec", results["push_adagrad_1m"].keys_per_sec);
  figures.AddNumber("pull_zipf_1m_keys_per_sec", results["pull_zipf_1m"].keys_per_sec);
  figures.AddNumber("memory_bytes_per_row", memory_per_row);
  figures.AddNumber("raw_bytes_per_row", raw_per_row);
  figures.AddNumber("rss_bytes_per_row",
                    static_cast<double>(rss_after - rss_before) / options.rows_small);
  figures.AddNumber("gather_cv", results["gather"].cv);
  figures.AddNumber("pull_1m_cv", results["pull_1m"].cv);
  figures.AddNumber("push_adagrad_1m_cv", results["push_adagrad_1m"].cv);
  figures.AddNumber("pull_zipf_1m_cv", results["pull_zipf_1m"].cv);
  Log("storage", "closing the in-memory store");
  return memory_per_row;
}

}  // namespace ember::bench::storage
