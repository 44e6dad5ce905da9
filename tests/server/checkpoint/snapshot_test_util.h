// Copyright 2026 The Ember Authors.
//
// Fixtures shared by the shard snapshot tests: stores over real RocksDB in a fresh
// temporary directory, deterministic pushes, and per-table checksums.

#ifndef EMBER_TESTS_SERVER_CHECKPOINT_SNAPSHOT_TEST_UTIL_H_
#define EMBER_TESTS_SERVER_CHECKPOINT_SNAPSHOT_TEST_UTIL_H_

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/checkpoint/shard_snapshot.h"
#include "server/store/embedding_store.h"
#include "server/store/rocksdb_backend.h"

namespace ember::testutil {

// A fresh directory per test, removed when the test ends.
class SnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    root_ = (std::filesystem::path(::testing::TempDir()) /
             ("ember_snapshot_" + std::to_string(getpid()) + "_" + std::to_string(counter++)))
                .string();
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  std::string Path(const std::string& name) const { return root_ + "/" + name; }

  std::string root_;
};

// "item": dim 4, Adagrad, admitted after 3 pushes, rows expire 5 steps after their last
// push. "user": dim 8, SGD, every ID admitted.
inline v1::TableConfig ItemTable() {
  v1::TableConfig t;
  t.set_name("item");
  t.set_dim(4);
  t.mutable_optimizer()->set_kind(v1::OptimizerConfig::ADAGRAD);
  t.mutable_optimizer()->set_learning_rate(0.1f);
  t.mutable_admission()->set_min_count(3);
  // Wide enough that the test IDs never collide in every row (no false admission).
  t.mutable_admission()->set_sketch_width(1 << 16);
  t.mutable_admission()->set_sketch_depth(4);
  t.mutable_eviction()->set_ttl_steps(5);
  return t;
}

inline v1::TableConfig UserTable() {
  v1::TableConfig t;
  t.set_name("user");
  t.set_dim(8);
  t.mutable_optimizer()->set_kind(v1::OptimizerConfig::SGD);
  t.mutable_optimizer()->set_learning_rate(0.5f);
  return t;
}

inline std::vector<v1::TableConfig> Tables() { return {ItemTable(), UserTable()}; }

inline std::unique_ptr<RocksDbBackend> OpenBackend(const std::string& path) {
  RocksDbOptions options;
  options.path = path;
  options.block_cache_bytes = 4 << 20;
  options.write_buffer_bytes = 1 << 20;
  options.enable_statistics = false;
  auto backend = RocksDbBackend::Open(options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  return backend.ok() ? *std::move(backend) : nullptr;
}

// A store over a RocksDbBackend; `backend` stays owned by the store.
struct Shard {
  RocksDbBackend* backend = nullptr;
  std::unique_ptr<EmbeddingStore> store;
};

// Opens a store over `backend` (an imported one, say) and creates Tables().
inline Shard StoreOver(std::unique_ptr<RocksDbBackend> backend, const StoreOptions& options = {}) {
  Shard shard;
  shard.backend = backend.get();
  auto store = EmbeddingStore::Open(options, std::move(backend));
  EXPECT_TRUE(store.ok()) << store.status();
  if (!store.ok()) return shard;
  shard.store = *std::move(store);
  for (const v1::TableConfig& t : Tables()) EXPECT_TRUE(shard.store->CreateTable(t).ok());
  return shard;
}

inline Shard OpenShard(const std::string& path, const StoreOptions& options = {}) {
  return StoreOver(OpenBackend(path), options);
}

// Pushes a gradient that depends only on (id, step), one batch per call.
inline void Push(EmbeddingStore& store, const std::string& table, const std::vector<uint64_t>& ids,
                 int64_t step) {
  const uint32_t dim = store.GetTableConfig(table)->dim();
  std::vector<float> grads(ids.size() * dim);
  for (size_t i = 0; i < ids.size(); ++i) {
    for (uint32_t j = 0; j < dim; ++j) {
      grads[i * dim + j] = 0.01f * static_cast<float>((ids[i] * 31 + step * 7 + j) % 13) - 0.06f;
    }
  }
  const absl::Status status = store.Push(table, ids, grads, step);
  ASSERT_TRUE(status.ok()) << status;
}

inline std::vector<uint64_t> Range(uint64_t first, uint64_t end) {
  std::vector<uint64_t> ids;
  for (uint64_t id = first; id < end; ++id) ids.push_back(id);
  return ids;
}

// Checksum per table name.
inline std::map<std::string, TableChecksum> Checksums(EmbeddingStore& store) {
  std::map<std::string, TableChecksum> out;
  for (const v1::TableConfig& t : Tables()) {
    auto sum = store.Checksum(t.name());
    EXPECT_TRUE(sum.ok()) << sum.status();
    if (sum.ok()) out[t.name()] = *sum;
  }
  return out;
}

inline bool OwnsAll(uint32_t) { return true; }

struct FullAndDelta {
  v1::ShardSnapshot full;
  v1::ShardSnapshot delta;
};

// A FULL snapshot of `source` into <full_dir>/shard-0, then `change()`, then a DELTA
// of what it changed into <delta_dir>/shard-0. Failures are test failures.
inline FullAndDelta SnapshotAround(Shard& source, const std::string& full_dir,
                                   const std::function<void()>& change,
                                   const std::string& delta_dir) {
  FullAndDelta out;
  auto full = WriteFullSnapshot(*source.store, *source.backend, full_dir, "shard-0");
  EXPECT_TRUE(full.ok()) << full.status();
  if (!full.ok()) return out;
  out.full = *full;
  change();
  auto delta =
      WriteDeltaSnapshot(*source.store, *source.backend, full->version(), delta_dir, "shard-0");
  EXPECT_TRUE(delta.ok()) << delta.status();
  if (delta.ok()) out.delta = *delta;
  return out;
}

}  // namespace ember::testutil

#endif  // EMBER_TESTS_SERVER_CHECKPOINT_SNAPSHOT_TEST_UTIL_H_
