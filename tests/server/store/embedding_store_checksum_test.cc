// Copyright 2026 The Ember Authors.
//
// EmbeddingStore::Checksum: the digest that compares a model across shard counts,
// restores and followers. It must add up across shards (split the same pushes over two
// stores: the digests sum to the one store's), ignore the shard-local version, cover
// rows evicted from memory, and change when any row's values change.

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "server/store/embedding_store.h"
#include "server/store/in_memory_backend.h"

namespace ember {
namespace {

v1::TableConfig Table() {
  v1::TableConfig config;
  config.set_name("item");
  config.set_dim(4);
  config.mutable_optimizer()->set_kind(v1::OptimizerConfig::ADAGRAD);
  return config;
}

std::unique_ptr<EmbeddingStore> NewStore(int64_t budget_bytes = int64_t{1} << 30) {
  StoreOptions options;
  options.memory_budget_bytes = budget_bytes;
  auto store = EmbeddingStore::Open(options, std::make_unique<InMemoryBackend>()).value();
  EXPECT_TRUE(store->CreateTable(Table()).ok());
  return store;
}

void PushIds(EmbeddingStore& store, const std::vector<uint64_t>& ids, int64_t step) {
  std::vector<float> grads(ids.size() * 4);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = 0.01f * static_cast<float>(i % 7 + 1);
  ASSERT_TRUE(store.Push("item", ids, grads, step).ok());
}

TEST(EmbeddingStoreChecksumTest, DigestsOfShardsAddUpToTheWholeModel) {
  auto whole = NewStore();
  auto even = NewStore();
  auto odd = NewStore();
  // The odd store saw unrelated earlier traffic on another table: its versions differ.
  v1::TableConfig other = Table();
  other.set_name("other");
  ASSERT_TRUE(odd->CreateTable(other).ok());
  std::vector<float> g(4 * 3, 0.5f);
  ASSERT_TRUE(odd->Push("other", std::vector<uint64_t>{1, 2, 3}, g, 1).ok());

  for (int64_t step = 1; step <= 3; ++step) {
    std::vector<uint64_t> ids, even_ids, odd_ids;
    for (uint64_t id = step; id < 200; id += step) {
      ids.push_back(id);
      (id % 2 == 0 ? even_ids : odd_ids).push_back(id);
    }
    // Same per-id gradients in both layouts: the gradient depends on the id's position
    // in its own list, so push id by id.
    for (uint64_t id : ids) {
      std::vector<float> grad = {0.1f * (id % 5), -0.2f, 0.3f * step, 0.05f};
      ASSERT_TRUE(whole->Push("item", std::vector<uint64_t>{id}, grad, step).ok());
      EmbeddingStore& shard = id % 2 == 0 ? *even : *odd;
      ASSERT_TRUE(shard.Push("item", std::vector<uint64_t>{id}, grad, step).ok());
    }
  }
  const TableChecksum w = whole->Checksum("item").value();
  const TableChecksum e = even->Checksum("item").value();
  const TableChecksum o = odd->Checksum("item").value();
  EXPECT_EQ(w.rows, 199u);
  EXPECT_EQ(e.rows + o.rows, w.rows);
  EXPECT_EQ(e.digest + o.digest, w.digest);
}

// A slot filter (a shard passes the slots it owns) splits the digest: the filter and
// its complement add up to the whole, and an accept-nothing filter counts nothing.
TEST(EmbeddingStoreChecksumTest, ASlotFilterCountsOnlyItsSlots) {
  auto store = NewStore();
  std::vector<uint64_t> ids;
  for (uint64_t id = 1; id <= 300; ++id) ids.push_back(id);
  PushIds(*store, ids, 1);
  const TableChecksum all = store->Checksum("item").value();
  const TableChecksum low =
      store->Checksum("item", [](uint32_t slot) { return slot < 8192; }).value();
  const TableChecksum high =
      store->Checksum("item", [](uint32_t slot) { return slot >= 8192; }).value();
  EXPECT_EQ(all.rows, 300u);
  EXPECT_GT(low.rows, 0u);
  EXPECT_GT(high.rows, 0u);
  EXPECT_EQ(low.rows + high.rows, all.rows);
  EXPECT_EQ(low.digest + high.digest, all.digest);
  EXPECT_EQ(store->Checksum("item", [](uint32_t) { return false; }).value().rows, 0u);
}

TEST(EmbeddingStoreChecksumTest, ChangesWithAnyRowAndCoversEvictedRows) {
  auto a = NewStore();
  auto b = NewStore(/*budget_bytes=*/4096);  // most rows live only in the backend
  std::vector<uint64_t> ids;
  for (uint64_t id = 1; id <= 500; ++id) ids.push_back(id);
  PushIds(*a, ids, 1);
  PushIds(*b, ids, 1);
  const TableChecksum before = a->Checksum("item").value();
  EXPECT_EQ(before.rows, 500u);
  EXPECT_EQ(b->Checksum("item").value().digest, before.digest);

  PushIds(*a, {77}, 2);  // one more update of one row
  const TableChecksum after = a->Checksum("item").value();
  EXPECT_EQ(after.rows, 500u);
  EXPECT_NE(after.digest, before.digest);
}

TEST(EmbeddingStoreChecksumTest, UnknownTableIsNotFound) {
  auto store = NewStore();
  EXPECT_EQ(store->Checksum("nope").status().code(), absl::StatusCode::kNotFound);
  const TableChecksum empty = store->Checksum("item").value();
  EXPECT_EQ(empty.rows, 0u);
  EXPECT_EQ(empty.digest, 0u);
}

}  // namespace
}  // namespace ember
