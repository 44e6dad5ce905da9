// Copyright 2026 The Ember Authors.
//
// One contract test body for EmbeddingStore, run over both backends (in-memory and
// real RocksDB in a temporary directory), plus RocksDB-only reopen and fault tests.

#include "server/store/embedding_store.h"

#include <filesystem>
#include <memory>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "rocksdb/file_system.h"
#include "server/store/fault_injection_fs.h"
#include "server/store/in_memory_backend.h"
#include "server/store/initializer.h"
#include "server/store/rocksdb_backend.h"
#include "server/store/table_config.h"
#include "tests/support/eventually.h"

namespace ember {
namespace {

enum class BackendKind { kMemory, kRocksDb };

std::string UniqueDir(const std::string& tag) {
  static std::atomic<int> counter{0};
  auto dir =
      std::filesystem::path(testing::TempDir()) /
      ("ember_store_" + tag + "_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
  std::filesystem::remove_all(dir);
  return dir.string();
}

v1::TableConfig Table(const std::string& name, uint32_t dim,
                      v1::OptimizerConfig::Kind kind = v1::OptimizerConfig::SGD, float lr = 0.5f) {
  v1::TableConfig t;
  t.set_name(name);
  t.set_dim(dim);
  t.mutable_optimizer()->set_kind(kind);
  t.mutable_optimizer()->set_learning_rate(lr);
  return t;
}

std::vector<float> InitOf(const v1::TableConfig& config, uint64_t id) {
  v1::TableConfig n = NormalizeTableConfig(config).value();
  std::vector<float> v(n.dim());
  InitEmbedding(n.initializer(), n.seed(), id, v.data(), n.dim());
  return v;
}

class StoreTest : public testing::TestWithParam<BackendKind> {
 protected:
  void TearDown() override {
    store_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // Opens (or reopens, keeping the directory) a store with `options`.
  EmbeddingStore& Open(StoreOptions options = {}) {
    store_.reset();
    std::unique_ptr<RowBackend> backend;
    if (GetParam() == BackendKind::kMemory) {
      auto mem = std::make_unique<InMemoryBackend>();
      memory_backend_ = mem.get();
      backend = std::move(mem);
    } else {
      if (dir_.empty()) dir_ = UniqueDir("contract");
      RocksDbOptions ro;
      ro.path = dir_;
      ro.block_cache_bytes = 8 << 20;
      ro.write_buffer_bytes = 4 << 20;
      backend = RocksDbBackend::Open(ro).value();
    }
    store_ = EmbeddingStore::Open(options, std::move(backend)).value();
    return *store_;
  }

  std::vector<float> PullOne(const std::string& table, uint64_t id, uint32_t dim) {
    std::vector<float> out(dim);
    EXPECT_TRUE(store_->Pull(table, {id}, absl::MakeSpan(out)).ok());
    return out;
  }

  std::unique_ptr<EmbeddingStore> store_;
  InMemoryBackend* memory_backend_ = nullptr;
  std::string dir_;
};

TEST_P(StoreTest, UnknownIdsReadAsDeterministicInitAndCostNoRow) {
  EmbeddingStore& store = Open();
  auto config = Table("item", 16);
  ASSERT_TRUE(store.CreateTable(config).ok());
  std::vector<uint64_t> ids = {1, 2, 0xffffffffffffffffULL, 1};
  std::vector<float> out(ids.size() * 16);
  ASSERT_TRUE(store.Pull("item", ids, absl::MakeSpan(out)).ok());
  for (size_t i = 0; i < ids.size(); ++i) {
    std::vector<float> expected = InitOf(config, ids[i]);
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), out.begin() + i * 16)) << i;
  }
  EXPECT_NE(InitOf(config, 1), InitOf(config, 2));
  EXPECT_EQ(store.Stats().rows_in_memory, 0);
  EXPECT_EQ(store.version(), 0u);
  auto row = store.ReadRow("item", 1).value();
  EXPECT_FALSE(row.stored);
  EXPECT_EQ(row.embedding, InitOf(config, 1));
}

TEST_P(StoreTest, PushAppliesSgdAndSumsDuplicates) {
  EmbeddingStore& store = Open();
  auto config = Table("item", 4, v1::OptimizerConfig::SGD, 0.5f);
  ASSERT_TRUE(store.CreateTable(config).ok());
  std::vector<uint64_t> ids = {7, 9, 7};
  std::vector<float> grads = {1, 2, 3, 4, /*9*/ 1, 1, 1, 1, /*7 again*/ 1, 0, -1, 0};
  ASSERT_TRUE(store.Push("item", ids, grads, /*step=*/3).ok());
  auto init7 = InitOf(config, 7);
  auto got7 = PullOne("item", 7, 4);
  const float sum7[4] = {2, 2, 2, 4};
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(got7[i], init7[i] - 0.5f * sum7[i]);
  auto row = store.ReadRow("item", 7).value();
  EXPECT_TRUE(row.stored);
  EXPECT_EQ(row.meta.count, 2.0f);
  EXPECT_EQ(row.meta.last_seen_step, 3);
  EXPECT_EQ(store.version(), 2u);  // two unique IDs, one version each
  EXPECT_EQ(store.Stats().admitted, 2u);
}

TEST_P(StoreTest, BadInputIsRejectedAndChangesNothing) {
  EmbeddingStore& store = Open(StoreOptions{.max_batch_keys = 8});
  ASSERT_TRUE(store.CreateTable(Table("t", 2)).ok());
  ASSERT_TRUE(store.Push("t", {1, 2}, {1, 1, 1, 1}, 1).ok());
  const uint64_t version = store.version();
  auto before1 = PullOne("t", 1, 2);
  std::vector<float> out(2);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();

  EXPECT_EQ(store.Pull("nope", {1}, absl::MakeSpan(out)).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store.Push("nope", {1}, {1, 1}, 1).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store.Pull("t", {}, absl::MakeSpan(out).subspan(0, 0)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Push("t", {}, {}, 1).code(), absl::StatusCode::kInvalidArgument);
  std::vector<uint64_t> nine(9, 1);
  std::vector<float> nine_grads(18, 0.1f), nine_out(18);
  EXPECT_EQ(store.Push("t", nine, nine_grads, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Pull("t", nine, absl::MakeSpan(nine_out)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Push("t", {1}, {1, 1, 1}, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Pull("t", {1, 2}, absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Push("t", {1, 2}, {1, 1, 1, nan}, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Push("t", {3, 1}, {inf, 1, 1, 1}, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Push("t", {3}, {-inf, 0}, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.CreateTable(Table("t", 3)).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store.CreateTable(Table("bad name", 3)).code(), absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(store.version(), version);
  EXPECT_EQ(PullOne("t", 1, 2), before1);
  EXPECT_FALSE(store.ReadRow("t", 3).value().stored);
  EXPECT_TRUE(store.CreateTable(Table("t", 2)).ok());  // same config: idempotent
}

TEST_P(StoreTest, ChangeLogIsOrderedWithoutGaps) {
  EmbeddingStore& store = Open();
  ASSERT_TRUE(store.CreateTable(Table("a", 2)).ok());
  ASSERT_TRUE(store.CreateTable(Table("b", 2)).ok());
  ASSERT_TRUE(store.Push("a", {1, 2, 3}, std::vector<float>(6, 0.5f), 1).ok());
  ASSERT_TRUE(store.Push("b", {1}, {1, 1}, 1).ok());
  ASSERT_TRUE(store.Push("a", {2}, {1, 1}, 2).ok());
  auto batch = store.ReadChanges(0, 100).value();
  ASSERT_EQ(batch.changes.size(), 5u);
  for (size_t i = 0; i < batch.changes.size(); ++i) {
    EXPECT_EQ(batch.changes[i].version, i + 1);
    EXPECT_FALSE(batch.changes[i].tombstone);
  }
  EXPECT_EQ(batch.table_names[batch.changes[3].table], "b");
  EXPECT_EQ(batch.changes[4].id, 2u);
  EXPECT_EQ(batch.watermark, 5u);
  auto tail = store.ReadChanges(3, 1).value();
  ASSERT_EQ(tail.changes.size(), 1u);
  EXPECT_EQ(tail.changes[0].version, 4u);
  EXPECT_TRUE(store.ReadChanges(5, 10).value().changes.empty());
  EXPECT_EQ(store.ReadRow("a", 2).value().meta.version, 5u);
}

TEST_P(StoreTest, ChangeLogReportsEntriesDroppedFromMemory) {
  EmbeddingStore& store = Open(StoreOptions{.change_log_capacity = 4});
  ASSERT_TRUE(store.CreateTable(Table("a", 1)).ok());
  for (uint64_t id = 1; id <= 10; ++id) ASSERT_TRUE(store.Push("a", {id}, {1}, 1).ok());
  EXPECT_EQ(store.ReadChanges(0, 10).status().code(), absl::StatusCode::kOutOfRange);
  auto recent = store.ReadChanges(6, 10).value();
  EXPECT_EQ(recent.changes.size(), 4u);
}

// Pushes the same random stream into a store with a tiny memory budget and one
// without; every row must read back bit-identical (embedding, optimizer state, meta).
TEST_P(StoreTest, EvictedRowsReadBackBitIdentical) {
  constexpr uint32_t kDim = 8;
  auto config = Table("item", kDim, v1::OptimizerConfig::ADAGRAD, 0.1f);
  std::vector<std::vector<uint64_t>> batches;
  std::vector<std::vector<float>> grads;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> g(-1, 1);
  for (int b = 0; b < 60; ++b) {
    std::vector<uint64_t> ids(100);
    for (auto& id : ids) id = rng() % 3000;
    std::vector<float> gr(ids.size() * kDim);
    for (auto& x : gr) x = g(rng);
    batches.push_back(ids);
    grads.push_back(gr);
  }
  auto reference = [&] {
    auto b = std::make_unique<InMemoryBackend>();
    // Same stripe count, so versions are assigned in the same order.
    return EmbeddingStore::Open(StoreOptions{.memory_budget_bytes = 0, .num_stripes = 4},
                                std::move(b))
        .value();
  }();
  ASSERT_TRUE(reference->CreateTable(config).ok());
  // ~200 rows fit in memory out of ~2900.
  EmbeddingStore& store = Open(StoreOptions{.memory_budget_bytes = 200 * 200, .num_stripes = 4});
  ASSERT_TRUE(store.CreateTable(config).ok());
  for (size_t b = 0; b < batches.size(); ++b) {
    ASSERT_TRUE(store.Push("item", batches[b], grads[b], b).ok());
    ASSERT_TRUE(reference->Push("item", batches[b], grads[b], b).ok());
  }
  StoreStats stats = store.Stats();
  EXPECT_GT(stats.evicted_to_backend, 1000u);
  EXPECT_LT(stats.rows_in_memory, 400);
  EXPECT_LE(stats.memory_bytes, 200 * 200 + 4 * 200);
  for (uint64_t id = 0; id < 3000; ++id) {
    auto got = store.ReadRow("item", id).value();
    auto want = reference->ReadRow("item", id).value();
    ASSERT_EQ(got.stored, want.stored) << id;
    ASSERT_EQ(got.embedding, want.embedding) << id;
    ASSERT_EQ(got.state, want.state) << id;
    ASSERT_EQ(got.meta.version, want.meta.version) << id;
    ASSERT_EQ(got.meta.count, want.meta.count) << id;
    ASSERT_EQ(got.meta.last_seen_step, want.meta.last_seen_step) << id;
  }
  // Pulls through the tier agree too (they load evicted rows back).
  std::vector<uint64_t> all(3000);
  std::iota(all.begin(), all.end(), 0);
  std::vector<float> a(all.size() * kDim), b(all.size() * kDim);
  ASSERT_TRUE(store.Pull("item", all, absl::MakeSpan(a)).ok());
  ASSERT_TRUE(reference->Pull("item", all, absl::MakeSpan(b)).ok());
  EXPECT_EQ(a, b);
}

TEST_P(StoreTest, AdmissionAfterNSightings) {
  EmbeddingStore& store = Open();
  auto config = Table("user", 4);
  config.mutable_admission()->set_min_count(3);
  config.mutable_admission()->set_sketch_width(1 << 12);
  ASSERT_TRUE(store.CreateTable(config).ok());
  ASSERT_TRUE(store.Push("user", {42}, {1, 1, 1, 1}, 1).ok());
  ASSERT_TRUE(store.Push("user", {42}, {1, 1, 1, 1}, 2).ok());
  EXPECT_FALSE(store.ReadRow("user", 42).value().stored);
  EXPECT_EQ(PullOne("user", 42, 4), InitOf(config, 42));
  EXPECT_EQ(store.Stats().rows_in_memory, 0);
  EXPECT_EQ(store.version(), 0u);
  ASSERT_TRUE(store.Push("user", {42}, {1, 1, 1, 1}, 3).ok());  // third sighting: admitted
  auto row = store.ReadRow("user", 42).value();
  EXPECT_TRUE(row.stored);
  auto init = InitOf(config, 42);
  EXPECT_FLOAT_EQ(row.embedding[0], init[0] - 0.5f);  // only the admitting push applies
  EXPECT_EQ(store.Stats().admitted, 1u);
  EXPECT_EQ(store.Stats().rejected_unadmitted, 2u);
  // Duplicates count as sightings: two in one push reach a threshold of 2.
  auto config2 = Table("shop", 4);
  config2.mutable_admission()->set_min_count(2);
  ASSERT_TRUE(store.CreateTable(config2).ok());
  ASSERT_TRUE(store.Push("shop", {5, 5}, std::vector<float>(8, 1), 1).ok());
  EXPECT_TRUE(store.ReadRow("shop", 5).value().stored);
}

TEST_P(StoreTest, PolicyEvictionRemovesRowsEverywhereWithTombstones) {
  // Budget of ~10 rows: most rows live only in the backend, so both paths run.
  EmbeddingStore& store = Open(StoreOptions{.memory_budget_bytes = 10 * 100, .num_stripes = 2});
  auto config = Table("item", 4);
  config.mutable_eviction()->set_ttl_steps(10);
  config.mutable_eviction()->set_min_count(2);
  ASSERT_TRUE(store.CreateTable(config).ok());
  // ids 0..49: pushed once at step 1 (stale and rare) -> evicted.
  // ids 50..99: pushed twice at step 20 (fresh, count 2) -> kept.
  for (uint64_t id = 0; id < 50; ++id) ASSERT_TRUE(store.Push("item", {id}, {1, 1, 1, 1}, 1).ok());
  for (uint64_t id = 50; id < 100; ++id) {
    ASSERT_TRUE(store.Push("item", {id, id}, std::vector<float>(8, 1), 20).ok());
  }
  const uint64_t before = store.version();
  auto report = store.Evict(/*current_step=*/25).value();
  EXPECT_EQ(report.rows_removed, 50u);
  EXPECT_EQ(report.rows_scanned, 100u);
  EXPECT_EQ(store.version(), before + 50);
  auto changes = store.ReadChanges(before, 1000).value();
  ASSERT_EQ(changes.changes.size(), 50u);
  std::vector<uint64_t> tombstoned;
  for (const Change& c : changes.changes) {
    EXPECT_TRUE(c.tombstone);
    tombstoned.push_back(c.id);
  }
  std::sort(tombstoned.begin(), tombstoned.end());
  for (uint64_t id = 0; id < 50; ++id) EXPECT_EQ(tombstoned[id], id);
  for (uint64_t id = 0; id < 100; ++id) {
    EXPECT_EQ(store.ReadRow("item", id).value().stored, id >= 50) << id;
  }
  EXPECT_EQ(PullOne("item", 3, 4), InitOf(config, 3));  // evicted: back to its init vector
  EXPECT_EQ(store.Evict(25).value().rows_removed, 0u);
}

TEST_P(StoreTest, CountDecayLowersCountsEverywhere) {
  EmbeddingStore& store = Open(StoreOptions{.memory_budget_bytes = 5 * 100, .num_stripes = 2});
  auto config = Table("item", 2);
  config.mutable_eviction()->set_count_decay(0.5f);
  config.mutable_eviction()->set_min_count(1.5f);
  ASSERT_TRUE(store.CreateTable(config).ok());
  for (uint64_t id = 0; id < 20; ++id) {
    std::vector<uint64_t> ids(id < 10 ? 4 : 2, id);
    ASSERT_TRUE(store.Push("item", ids, std::vector<float>(ids.size() * 2, 1), 1).ok());
  }
  // counts: 4 -> 2 (kept), 2 -> 1 (< 1.5: removed)
  const uint64_t before = store.version();
  const EvictionReport report = store.Evict(1).value();
  EXPECT_EQ(report.rows_removed, 10u);
  EXPECT_EQ(report.rows_decayed, 10u);
  for (uint64_t id = 0; id < 10; ++id)
    EXPECT_EQ(store.ReadRow("item", id).value().meta.count, 2.0f);
  // Every kept row changed (its count): it is in the change log, as every removed row
  // is, so delta checkpoints and update streams carry the decayed counts.
  auto changes = store.ReadChanges(before, 1000).value();
  ASSERT_EQ(changes.changes.size(), 20u);
  std::vector<uint64_t> decayed, removed;
  for (const Change& c : changes.changes) (c.tombstone ? removed : decayed).push_back(c.id);
  std::sort(decayed.begin(), decayed.end());
  std::sort(removed.begin(), removed.end());
  ASSERT_EQ(decayed.size(), 10u);
  ASSERT_EQ(removed.size(), 10u);
  for (uint64_t i = 0; i < 10; ++i) {
    EXPECT_EQ(decayed[i], i);
    EXPECT_EQ(removed[i], 10 + i);
  }
}

// SGD is commutative: concurrent pushes must end where sequential ones do. Gradients
// are multiples of 1/8 with lr = 1/2, so float sums are exact in any order. Every
// push writes the same value to all components of a row, so a torn row shows up as
// unequal components.
TEST_P(StoreTest, ConcurrentPushesEqualSequentialResult) {
  EmbeddingStore& store = Open(StoreOptions{.memory_budget_bytes = 300 * 100, .num_stripes = 8});
  constexpr uint32_t kDim = 8;
  auto config = Table("item", kDim, v1::OptimizerConfig::SGD, 0.5f);
  config.mutable_initializer()->set_kind(v1::InitializerConfig::ZEROS);
  ASSERT_TRUE(store.CreateTable(config).ok());
  constexpr int kThreads = 4, kRounds = 300, kKeys = 64;
  std::vector<std::vector<double>> expected(kThreads, std::vector<double>(2000, 0));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::vector<uint64_t> ids(kKeys);
      std::vector<float> grads(kKeys * kDim);
      std::vector<float> pulled(kKeys * kDim);
      for (int r = 0; r < kRounds; ++r) {
        for (int k = 0; k < kKeys; ++k) {
          // Half disjoint per thread, half shared by all threads.
          ids[k] = k % 2 ? 1000 + t * 200 + rng() % 200 : rng() % 1000;
          const float g = static_cast<float>(static_cast<int>(rng() % 17) - 8) / 8.0f;
          for (uint32_t i = 0; i < kDim; ++i) grads[k * kDim + i] = g;
          expected[t][ids[k]] += g;
        }
        if (!store.Push("item", ids, grads, r).ok()) ++failures;
        if (!store.Pull("item", ids, absl::MakeSpan(pulled)).ok()) ++failures;
        for (int k = 0; k < kKeys; ++k) {
          for (uint32_t i = 1; i < kDim; ++i) {
            if (pulled[k * kDim + i] != pulled[k * kDim]) ++failures;  // torn row
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  std::vector<uint64_t> all(2000);
  std::iota(all.begin(), all.end(), 0);
  std::vector<float> out(all.size() * kDim);
  ASSERT_TRUE(store.Pull("item", all, absl::MakeSpan(out)).ok());
  for (uint64_t id = 0; id < 2000; ++id) {
    double sum = 0;
    for (int t = 0; t < kThreads; ++t) sum += expected[t][id];
    for (uint32_t i = 0; i < kDim; ++i) {
      ASSERT_EQ(out[id * kDim + i], static_cast<float>(-0.5 * sum)) << id;
    }
  }
  EXPECT_GT(store.Stats().evicted_to_backend, 0u);
}

TEST_P(StoreTest, ReopenKeepsFlushedRowsVersionAndSketch) {
  if (GetParam() == BackendKind::kMemory) GTEST_SKIP() << "in-memory backend does not persist";
  auto config = Table("item", 4, v1::OptimizerConfig::ADAM, 0.1f);
  config.mutable_admission()->set_min_count(2);
  config.mutable_admission()->set_sketch_width(1 << 10);
  RowSnapshot before;
  {
    EmbeddingStore& store = Open();
    ASSERT_TRUE(store.CreateTable(config).ok());
    ASSERT_TRUE(store.Push("item", {1, 1, 2}, std::vector<float>(12, 0.25f), 4).ok());
    ASSERT_TRUE(store.Push("item", {3}, std::vector<float>(4, 0.25f), 4).ok());  // 1 sighting
    before = store.ReadRow("item", 1).value();
    ASSERT_TRUE(store.Close().ok());
  }
  EmbeddingStore& store = Open();
  EXPECT_EQ(store.CreateTable(Table("item", 8)).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(store.CreateTable(config).ok());
  auto after = store.ReadRow("item", 1).value();
  EXPECT_TRUE(after.stored);
  EXPECT_EQ(after.embedding, before.embedding);
  EXPECT_EQ(after.state, before.state);
  EXPECT_EQ(after.meta.version, before.meta.version);
  EXPECT_FALSE(store.ReadRow("item", 2).value().stored);  // one sighting only
  // The sketch survived: one more sighting of 3 admits it.
  ASSERT_TRUE(store.Push("item", {3}, std::vector<float>(4, 0.25f), 5).ok());
  EXPECT_TRUE(store.ReadRow("item", 3).value().stored);
  EXPECT_GT(store.version(), before.meta.version);  // versions keep growing after reopen
}

TEST_P(StoreTest, ClosedStoreRefusesCalls) {
  EmbeddingStore& store = Open();
  ASSERT_TRUE(store.CreateTable(Table("t", 2)).ok());
  ASSERT_TRUE(store.Close().ok());
  std::vector<float> out(2);
  EXPECT_EQ(store.Pull("t", {1}, absl::MakeSpan(out)).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.Close().code(), absl::StatusCode::kFailedPrecondition);
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreTest,
                         testing::Values(BackendKind::kMemory, BackendKind::kRocksDb),
                         [](const auto& info) {
                           return info.param == BackendKind::kMemory ? "Memory" : "RocksDb";
                         });

// ---------------------------------------------------------------------------------
// Faults

TEST(StoreFaultTest, FailedWriteBackKeepsRowsAndRecovers) {
  auto backend = std::make_unique<InMemoryBackend>();
  InMemoryBackend* mem = backend.get();
  auto store = EmbeddingStore::Open(StoreOptions{.memory_budget_bytes = 20 * 100, .num_stripes = 2},
                                    std::move(backend))
                   .value();
  auto config = Table("t", 4);
  ASSERT_TRUE(store->CreateTable(config).ok());
  mem->FailWrites(true);
  // Push new rows until write-backs fail, then until the hard limit refuses them.
  uint64_t next = 0;
  while (store->Stats().writeback_errors == 0 && next < 1000) {
    ASSERT_TRUE(store->Push("t", {next++}, {1, 1, 1, 1}, 1).ok());
  }
  EXPECT_GT(store->Stats().writeback_errors, 0u);
  EXPECT_EQ(store->Stats().evicted_to_backend, 0u);
  EXPECT_FALSE(store->Flush().ok());
  absl::Status refused;
  while (refused.ok() && next < 1000) refused = store->Push("t", {next++}, {1, 1, 1, 1}, 1);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  const uint64_t accepted = next - 1;  // the last push was refused
  EXPECT_LE(store->Stats().memory_bytes, 20 * 100 * 1.1 + 100);
  EXPECT_FALSE(store->ReadRow("t", accepted).value().stored);  // refused: nothing applied
  mem->FailWrites(false);
  ASSERT_TRUE(store->Flush().ok());
  for (uint64_t id = 0; id < accepted; ++id) {
    auto init = InitOf(config, id);
    auto row = store->ReadRow("t", id).value();
    ASSERT_TRUE(row.stored) << id;
    EXPECT_FLOAT_EQ(row.embedding[0], init[0] - 0.5f) << id;
  }
  // Pushes work again and the tier shrinks back under its hard limit.
  ASSERT_TRUE(store->Push("t", {1000}, {1, 1, 1, 1}, 2).ok());
  EXPECT_LE(store->Stats().memory_bytes, 20 * 100 + 100);
}

TEST(StoreFaultTest, FailedReadChangesNothing) {
  auto backend = std::make_unique<InMemoryBackend>();
  InMemoryBackend* mem = backend.get();
  auto store = EmbeddingStore::Open(StoreOptions{.memory_budget_bytes = 5 * 100, .num_stripes = 1},
                                    std::move(backend))
                   .value();
  ASSERT_TRUE(store->CreateTable(Table("t", 4)).ok());
  for (uint64_t id = 0; id < 50; ++id) ASSERT_TRUE(store->Push("t", {id}, {1, 1, 1, 1}, 1).ok());
  const uint64_t version = store->version();
  auto row0 = store->ReadRow("t", 0).value();
  mem->FailReads(true);
  std::vector<float> out(8);
  // ID 0 was evicted long ago; reading it needs the backend.
  EXPECT_EQ(store->Pull("t", {0, 1}, absl::MakeSpan(out)).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store->Push("t", {49, 0}, std::vector<float>(8, 1), 2).code(),
            absl::StatusCode::kUnavailable);
  mem->FailReads(false);
  EXPECT_EQ(store->version(), version);  // 49 was resident, but the push was all-or-nothing
  EXPECT_EQ(store->ReadRow("t", 0).value().embedding, row0.embedding);
}

TEST(StoreFaultTest, RocksDbWriteFaultsSurfaceAndAcknowledgedRowsSurviveReopen) {
  const std::string dir = UniqueDir("fault");
  auto fs = std::make_shared<FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  auto open = [&] {
    RocksDbOptions ro;
    ro.path = dir;
    ro.file_system = fs;
    ro.write_buffer_bytes = 1 << 20;
    // A failed reopen is retried after 50 ms: the flush below succeeds once one has.
    ro.reopen_retry_interval = absl::Milliseconds(50);
    return EmbeddingStore::Open(StoreOptions{.memory_budget_bytes = 50 * 200},
                                RocksDbBackend::Open(ro).value())
        .value();
  };
  auto config = Table("t", 8, v1::OptimizerConfig::ADAGRAD, 0.1f);
  std::vector<RowSnapshot> acknowledged;
  {
    auto store = open();
    ASSERT_TRUE(store->CreateTable(config).ok());
    for (uint64_t id = 0; id < 200; ++id) {
      ASSERT_TRUE(store->Push("t", {id}, std::vector<float>(8, 0.5f), 1).ok());
    }
    ASSERT_TRUE(store->Flush().ok());  // acknowledged: durable from here on
    for (uint64_t id = 0; id < 200; ++id) acknowledged.push_back(store->ReadRow("t", id).value());

    fs->SetWriteFailure(true);
    // Second round: write-backs fail, dirty rows pile up in memory until the hard
    // limit refuses pushes (RESOURCE_EXHAUSTED, nothing applied).
    uint64_t accepted = 0;
    absl::Status status;
    for (; accepted < 200; ++accepted) {
      status = store->Push("t", {accepted}, std::vector<float>(8, 0.25f), 2);
      if (!status.ok()) break;
    }
    EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_GT(accepted, 10u);
    EXPECT_FALSE(store->Flush().ok());
    EXPECT_GT(store->Stats().writeback_errors, 0u);
    EXPECT_GT(fs->injected_write_failures(), 0);
    fs->SetWriteFailure(false);
    for (uint64_t id = 0; id < 200; ++id) {
      auto row = store->ReadRow("t", id).value();
      ASSERT_EQ(row.meta.count, id < accepted ? 2.0f : 1.0f) << id;  // no update lost
    }
    // Recovered once faults stop (and the reopen back-off has passed).
    const absl::Status flushed = EventuallyOk([&] { return store->Flush(); });
    ASSERT_TRUE(flushed.ok()) << flushed;
    acknowledged.clear();
    for (uint64_t id = 0; id < 200; ++id) acknowledged.push_back(store->ReadRow("t", id).value());
    ASSERT_TRUE(store->Close().ok());
  }
  auto store = open();
  ASSERT_TRUE(store->CreateTable(config).ok());
  for (uint64_t id = 0; id < 200; ++id) {
    auto row = store->ReadRow("t", id).value();
    ASSERT_TRUE(row.stored);
    EXPECT_EQ(row.embedding, acknowledged[id].embedding) << id;
    EXPECT_EQ(row.state, acknowledged[id].state) << id;
  }
  store.reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ember
