// Copyright 2026 The Ember Authors.
//
// The cost of heavy-hitter recording on the Pull path (not a test; run by hand):
//
//   build/bin/heavy_hitters_bench
//
// BM_Record: HeavyHitters::Record of one pull batch of 4096 Zipf(1.1) ids over 1M
// distinct ids, per sampling rate (1 = every key). BM_StorePull: the store's own Pull
// of the same batch (dim 16, every row in memory), the work the recording adds to.
// BM_RecordContended: 4 threads recording into one table's summary. Times are per
// batch; items/s counts keys.

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "absl/time/clock.h"
#include "benchmark/benchmark.h"
#include "server/ps/heavy_hitters.h"
#include "server/store/embedding_store.h"
#include "server/store/in_memory_backend.h"

namespace ember {
namespace {

constexpr size_t kBatch = 4096;
constexpr uint64_t kIds = 1 << 20;

// Batches of Zipf(1.1) ids (inverse-CDF sampling over kIds ranks, ranks hashed).
const std::vector<std::vector<uint64_t>>& Batches() {
  static const std::vector<std::vector<uint64_t>> batches = [] {
    std::vector<double> cdf(kIds);
    double sum = 0;
    for (uint64_t k = 0; k < kIds; ++k) {
      sum += 1.0 / std::pow(static_cast<double>(k + 1), 1.1);
      cdf[k] = sum;
    }
    std::mt19937_64 rng(1);
    std::uniform_real_distribution<double> u(0, sum);
    std::vector<std::vector<uint64_t>> out(64, std::vector<uint64_t>(kBatch));
    for (auto& batch : out) {
      for (uint64_t& id : batch) {
        const uint64_t rank = std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin();
        id = rank * 0x9E3779B97F4A7C15ULL + 1;
      }
    }
    return out;
  }();
  return batches;
}

void BM_Record(benchmark::State& state) {
  HeavyHitters hh({.capacity = 256,
                   .half_life = absl::Seconds(10),
                   .sample_every = static_cast<uint32_t>(state.range(0))});
  const auto& batches = Batches();
  size_t i = 0;
  for (auto _ : state) {
    hh.Record(batches[i++ % batches.size()], absl::Now());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kBatch));
}
BENCHMARK(BM_Record)->Arg(1)->Arg(4)->Arg(16);

void BM_RecordContended(benchmark::State& state) {
  static HeavyHitters* hh = nullptr;
  if (state.thread_index() == 0) {
    hh = new HeavyHitters({.capacity = 256,
                           .half_life = absl::Seconds(10),
                           .sample_every = static_cast<uint32_t>(state.range(0))});
  }
  const auto& batches = Batches();
  size_t i = static_cast<size_t>(state.thread_index());
  for (auto _ : state) {
    hh->Record(batches[i++ % batches.size()], absl::Now());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kBatch));
  if (state.thread_index() == 0) {
    delete hh;
    hh = nullptr;
  }
}
BENCHMARK(BM_RecordContended)->Arg(1)->Arg(16)->Threads(4)->UseRealTime();

void BM_StorePull(benchmark::State& state) {
  auto store = EmbeddingStore::Open(StoreOptions(), std::make_unique<InMemoryBackend>());
  if (!store.ok()) {
    state.SkipWithError("open failed");
    return;
  }
  v1::TableConfig config;
  config.set_name("item");
  config.set_dim(16);
  config.mutable_optimizer()->set_kind(v1::OptimizerConfig::SGD);
  config.mutable_optimizer()->set_learning_rate(0.1f);
  if (!(*store)->CreateTable(config).ok()) {
    state.SkipWithError("create failed");
    return;
  }
  const auto& batches = Batches();
  // Store every row of the batches, so pulls read the memory tier.
  std::vector<float> grads(kBatch * 16, 0.001f);
  for (const auto& batch : batches) (void)(*store)->Push("item", batch, grads, 1);
  std::vector<float> out(kBatch * 16);
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        (*store)->Pull("item", batches[i++ % batches.size()], absl::MakeSpan(out)));
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kBatch));
}
BENCHMARK(BM_StorePull);

}  // namespace
}  // namespace ember

BENCHMARK_MAIN();
