// Copyright 2026 The Ember Authors.
//
// ReplicaStore (server/ps/replica_store.h): newest copy per owner process, replacement
// by another owner or incarnation, drops and their marks against late copies,
// filtered reads, DropIf and Clear, and concurrent readers and writers.

#include "server/ps/replica_store.h"

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace ember {
namespace {

constexpr uint32_t kDim = 4;
const absl::Time kNow = absl::FromUnixSeconds(2'000'000);

ReplicaSource Source(uint32_t owner, uint64_t incarnation, uint64_t hot_set_version = 1,
                     uint64_t attempt = 0) {
  ReplicaSource s;
  s.owner_shard = owner;
  s.owner_incarnation = incarnation;
  s.owner_attempt = attempt;
  s.step = 7;
  s.hot_set_version = hot_set_version;
  return s;
}

std::vector<float> Row(float v) { return std::vector<float>(kDim, v); }

// Puts one copy of `id` whose embedding is all `value`.
size_t PutOne(ReplicaStore& store, uint64_t id, float value, uint64_t version,
              const ReplicaSource& source, absl::Time now = kNow) {
  const uint64_t ids[] = {id};
  const uint64_t versions[] = {version};
  const std::vector<float> values = Row(value);
  return store.Put("item", kDim, source, ids, values, versions, now);
}

// The embedding's first value held for `id`, or -1 if none.
float Held(const ReplicaStore& store, uint64_t id) {
  std::vector<float> embedding;
  if (!store.Lookup("item", id, nullptr, &embedding)) return -1;
  return embedding[0];
}

TEST(ReplicaStoreTest, KeepsTheNewestCopyOfOneOwnerProcess) {
  ReplicaStore store;
  EXPECT_EQ(PutOne(store, 1, 1.0f, /*version=*/5, Source(0, 100)), 1u);
  EXPECT_EQ(PutOne(store, 1, 2.0f, 4, Source(0, 100)), 0u) << "older version arrives late";
  EXPECT_EQ(PutOne(store, 1, 3.0f, 5, Source(0, 100)), 0u) << "same version";
  EXPECT_EQ(Held(store, 1), 1.0f);
  EXPECT_EQ(PutOne(store, 1, 4.0f, 9, Source(0, 100)), 1u);
  EXPECT_EQ(Held(store, 1), 4.0f);
  // A newer job attempt of the same process wins even with a lower version.
  EXPECT_EQ(PutOne(store, 1, 5.0f, 2, Source(0, 100, 1, /*attempt=*/2)), 1u);
  EXPECT_EQ(PutOne(store, 1, 6.0f, 50, Source(0, 100, 1, /*attempt=*/1)), 0u);
  EXPECT_EQ(Held(store, 1), 5.0f);
  // Another incarnation (a restarted owner) or another owner (a slot move) replaces.
  EXPECT_EQ(PutOne(store, 1, 7.0f, 1, Source(0, 101)), 1u);
  EXPECT_EQ(Held(store, 1), 7.0f);
  EXPECT_EQ(PutOne(store, 1, 8.0f, 1, Source(3, 300)), 1u);
  ReplicaMeta meta;
  ASSERT_TRUE(store.Lookup("item", 1, &meta));
  EXPECT_EQ(meta.source.owner_shard, 3u);
  EXPECT_EQ(meta.source.owner_incarnation, 300u);
  EXPECT_EQ(meta.version, 1u);
  EXPECT_EQ(meta.source.step, 7);
  EXPECT_EQ(meta.copied, kNow);
  EXPECT_EQ(store.size(), 1u);
}

TEST(ReplicaStoreTest, GetServesAcceptedCopiesAndListsTheRest) {
  ReplicaStore store;
  const uint64_t ids[] = {10, 11, 12};
  const uint64_t versions[] = {1, 1, 1};
  std::vector<float> values;
  for (float v : {1.0f, 2.0f, 3.0f}) {
    const std::vector<float> row = Row(v);
    values.insert(values.end(), row.begin(), row.end());
  }
  ASSERT_EQ(store.Put("item", kDim, Source(0, 100), ids, values, versions, kNow), 3u);
  const uint64_t want[] = {12, 99, 10, 11};
  std::vector<float> out(4 * kDim, -5.0f);
  std::vector<uint32_t> missing;
  // Refuse id 11: answered 12 and 10, missing 99 (unknown) and 11 (refused).
  const size_t answered = store.Get(
      "item", want,
      [&](size_t i, const ReplicaMeta& meta) { return want[i] != 11 && meta.version == 1; },
      absl::MakeSpan(out), &missing);
  EXPECT_EQ(answered, 2u);
  EXPECT_EQ(missing, (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(out[0], 3.0f);
  EXPECT_EQ(out[kDim], 0.0f) << "missing positions are zeros";
  EXPECT_EQ(out[2 * kDim], 1.0f);
  EXPECT_EQ(out[3 * kDim], 0.0f);

  // An unknown table, and a read of another dim: all missing.
  missing.clear();
  EXPECT_EQ(store.Get(
                "user", want, [](size_t, const ReplicaMeta&) { return true; }, absl::MakeSpan(out),
                &missing),
            0u);
  EXPECT_EQ(missing.size(), 4u);
  missing.clear();
  std::vector<float> wide(4 * 8);
  EXPECT_EQ(store.Get(
                "item", want, [](size_t, const ReplicaMeta&) { return true; }, absl::MakeSpan(wide),
                &missing),
            0u);
}

TEST(ReplicaStoreTest, DropRefusesLateCopiesOfThatOwnerProcess) {
  ReplicaStore store;
  ASSERT_EQ(PutOne(store, 1, 1.0f, 5, Source(0, 100, /*hot_set_version=*/3)), 1u);
  const uint64_t ids[] = {1, 2};
  // Only the owner's own copies go.
  EXPECT_EQ(store.Drop("item", Source(4, 400, 4), ids, kNow), 0u);
  EXPECT_EQ(Held(store, 1), 1.0f);
  EXPECT_EQ(store.Drop("item", Source(0, 100, 4), ids, kNow), 1u);
  EXPECT_EQ(Held(store, 1), -1);
  EXPECT_EQ(store.size(), 0u);
  // A copy made under hot set 4 or before (sent before the drop) is refused, also for
  // id 2 which was never held.
  EXPECT_EQ(PutOne(store, 1, 2.0f, 6, Source(0, 100, 4)), 0u);
  EXPECT_EQ(PutOne(store, 2, 2.0f, 6, Source(0, 100, 3)), 0u);
  // Another owner process is not affected; a later hot set of the same one is.
  EXPECT_EQ(PutOne(store, 2, 3.0f, 1, Source(0, 101, 1)), 1u);
  EXPECT_EQ(PutOne(store, 1, 4.0f, 7, Source(0, 100, 5)), 1u);
  EXPECT_EQ(Held(store, 1), 4.0f);
  // Drop marks expire (drop_memory): then even an old copy is taken.
  ReplicaStore brief({.num_stripes = 1, .drop_memory = absl::Seconds(1)});
  ASSERT_EQ(brief.Drop("item", Source(0, 100, 4), ids, kNow), 0u);
  EXPECT_EQ(PutOne(brief, 1, 1.0f, 1, Source(0, 100, 2), kNow + absl::Seconds(2)), 1u);
}

TEST(ReplicaStoreTest, DropIfAndClear) {
  ReplicaStore store;
  for (uint64_t id = 0; id < 100; ++id) {
    ASSERT_EQ(PutOne(store, id, static_cast<float>(id), 1, Source(id % 2 == 0 ? 0 : 1, 100)), 1u);
  }
  EXPECT_EQ(store.size(), 100u);
  const size_t removed =
      store.DropIf([](absl::string_view table, uint64_t, const ReplicaMeta& meta) {
        return table == "item" && meta.source.owner_shard == 1;
      });
  EXPECT_EQ(removed, 50u);
  EXPECT_EQ(store.size(), 50u);
  EXPECT_EQ(Held(store, 3), -1);
  EXPECT_EQ(Held(store, 4), 4.0f);
  store.Clear();
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(Held(store, 4), -1);
}

// The byte bound (ember-ps --memory_limit_mb's replicas share): new ids beyond it are
// refused, held ones still refreshed; removals give their bytes back.
TEST(ReplicaStoreTest, NewCopiesBeyondTheByteBoundAreRefused) {
  ReplicaStore store;
  ASSERT_EQ(PutOne(store, 1, 1.0f, 1, Source(0, 100)), 1u);
  const int64_t one = store.bytes();
  EXPECT_GT(one, static_cast<int64_t>(kDim * sizeof(float)));
  store.SetMaxBytes(3 * one);
  const uint64_t ids[] = {2, 3, 4, 5};
  const uint64_t versions[] = {1, 1, 1, 1};
  const std::vector<float> values(4 * kDim, 2.0f);
  size_t refused = 0;
  EXPECT_EQ(store.Put("item", kDim, Source(0, 100), ids, values, versions, kNow, &refused), 2u);
  EXPECT_EQ(refused, 2u);
  EXPECT_EQ(store.size(), 3u);
  EXPECT_EQ(store.bytes(), 3 * one);
  // A held copy is refreshed at the bound.
  EXPECT_EQ(PutOne(store, 1, 9.0f, 2, Source(0, 100)), 1u);
  EXPECT_EQ(Held(store, 1), 9.0f);
  EXPECT_EQ(store.bytes(), 3 * one);
  // Drops, DropIf and Clear give the bytes back.
  const uint64_t drop[] = {1};
  EXPECT_EQ(store.Drop("item", Source(0, 100), drop, kNow), 1u);
  EXPECT_EQ(store.bytes(), 2 * one);
  EXPECT_EQ(
      store.DropIf([](absl::string_view, uint64_t id, const ReplicaMeta&) { return id == 2; }), 1u);
  EXPECT_EQ(store.bytes(), one);
  store.Clear();
  EXPECT_EQ(store.bytes(), 0);
}

TEST(ReplicaStoreTest, ConcurrentReadersSeeWholeRows) {
  ReplicaStore store;
  const uint64_t ids[] = {1, 2, 3, 4, 5, 6, 7, 8};
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      std::vector<float> out(8 * kDim);
      while (!stop.load()) {
        std::vector<uint32_t> missing;
        store.Get(
            "item", ids, [](size_t, const ReplicaMeta&) { return true; }, absl::MakeSpan(out),
            &missing);
        for (size_t i = 0; i < 8; ++i) {
          for (uint32_t d = 1; d < kDim; ++d) {
            if (out[i * kDim + d] != out[i * kDim]) torn.fetch_add(1);
          }
        }
      }
    });
  }
  for (uint64_t version = 1; version <= 2000; ++version) {
    std::vector<float> values(8 * kDim, static_cast<float>(version));
    std::vector<uint64_t> versions(8, version);
    store.Put("item", kDim, Source(0, 100), ids, values, versions, kNow);
  }
  stop.store(true);
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(Held(store, 8), 2000.0f);
}

}  // namespace
}  // namespace ember
