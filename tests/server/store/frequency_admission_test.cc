// Copyright 2026 The Ember Authors.
//
// Admission of pulled rows by frequency (StoreOptions::frequency_admission,
// server/store/internal/memory_tier.h): a one-pass scan of cold IDs through a full
// memory tier leaves the hot rows resident, where plain CLOCK lets the scan push them
// out; rows left out are still answered with their stored values. Over both backends.

#include <algorithm>
#include <filesystem>
#include <memory>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "server/store/embedding_store.h"
#include "server/store/in_memory_backend.h"
#include "server/store/rocksdb_backend.h"
#include "tests/server/store/row_backend_test_util.h"

namespace ember {
namespace {

enum class BackendKind { kMemory, kRocksDb };

constexpr uint32_t kDim = 8;
constexpr uint64_t kRows = 6000;

class FrequencyAdmissionTest : public testing::TestWithParam<BackendKind> {
 protected:
  void TearDown() override {
    store_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // A store whose memory tier holds a few hundred of the table's kRows rows, every
  // row stored in the backend.
  EmbeddingStore& Open(bool frequency_admission) {
    std::unique_ptr<RowBackend> backend;
    if (GetParam() == BackendKind::kMemory) {
      backend = std::make_unique<InMemoryBackend>();
    } else {
      dir_ = testutil::MakeTempDir();
      backend = RocksDbBackend::Open(testutil::SmallRocksDbOptions(dir_)).value();
    }
    StoreOptions options{.memory_budget_bytes = 128 << 10, .num_stripes = 4};
    options.frequency_admission = frequency_admission;
    store_ = EmbeddingStore::Open(options, std::move(backend)).value();
    v1::TableConfig t;
    t.set_name("item");
    t.set_dim(kDim);
    t.mutable_optimizer()->set_kind(v1::OptimizerConfig::SGD);
    t.mutable_optimizer()->set_learning_rate(0.5f);
    EXPECT_TRUE(store_->CreateTable(t).ok());
    // Every row once, with a value of its own (gradient = id / 8).
    for (uint64_t first = 0; first < kRows; first += 500) {
      std::vector<uint64_t> ids(500);
      std::iota(ids.begin(), ids.end(), first);
      std::vector<float> grads(ids.size() * kDim);
      for (size_t i = 0; i < grads.size(); ++i) grads[i] = static_cast<float>(ids[i / kDim]) / 8;
      EXPECT_TRUE(store_->Push("item", ids, grads, 1).ok());
    }
    EXPECT_TRUE(store_->Flush().ok());
    return *store_;
  }

  void Pull(const std::vector<uint64_t>& ids) {
    std::vector<float> out(ids.size() * kDim);
    ASSERT_TRUE(store_->Pull("item", ids, absl::MakeSpan(out)).ok());
    for (size_t i = 0; i < ids.size(); ++i) {
      const std::vector<float> stored = store_->ReadRow("item", ids[i]).value().embedding;
      ASSERT_EQ(std::vector<float>(out.begin() + i * kDim, out.begin() + (i + 1) * kDim), stored)
          << "id " << ids[i];
    }
  }

  // Warms a hot set (pulled 20 times), scans every other row once, then pulls the hot
  // set again. Returns the misses of that last pull; `capacity` gets the tier's rows.
  uint64_t HotMissesAfterAScan(EmbeddingStore& store, int64_t* capacity, uint64_t* not_admitted) {
    *capacity = store.Stats().rows_in_memory;
    EXPECT_GT(*capacity, 100);
    EXPECT_LT(*capacity, static_cast<int64_t>(kRows) / 4);
    const uint64_t hot = static_cast<uint64_t>(*capacity) / 2;
    std::vector<uint64_t> hot_ids(hot);
    std::iota(hot_ids.begin(), hot_ids.end(), 0);
    for (int pass = 0; pass < 20; ++pass) Pull(hot_ids);
    for (uint64_t first = hot; first < kRows; first += 250) {
      std::vector<uint64_t> scan(std::min<uint64_t>(250, kRows - first));
      std::iota(scan.begin(), scan.end(), first);
      Pull(scan);
    }
    const StoreStats before = store.Stats();
    Pull(hot_ids);
    const StoreStats after = store.Stats();
    *not_admitted = after.memory_not_admitted;
    EXPECT_EQ(after.memory_bytes, [&] {
      int64_t held = 0;
      for (const TableStats& t : after.tables) held += t.held_bytes;
      return held;
    }()) << "the budget is charged what the tier holds, its sketch included";
    return after.memory_misses - before.memory_misses;
  }

  std::unique_ptr<EmbeddingStore> store_;
  std::string dir_;
};

TEST_P(FrequencyAdmissionTest, AScanOfColdIdsLeavesTheHotRowsResident) {
  int64_t capacity = 0;
  uint64_t not_admitted = 0;
  const uint64_t misses = HotMissesAfterAScan(Open(true), &capacity, &not_admitted);
  const uint64_t hot = static_cast<uint64_t>(capacity) / 2;
  // Plain CLOCK loses every hot row (the next test); frequency admission keeps most.
  // (18% are lost here: rows admitted while the budget still had room push some out.)
  EXPECT_LE(misses, hot / 4) << "of " << hot << " hot rows, tier of " << capacity;
  EXPECT_GT(not_admitted, kRows / 2) << "the scan's rows were answered, not kept";
}

TEST_P(FrequencyAdmissionTest, WithoutItTheScanPushesTheHotRowsOut) {
  int64_t capacity = 0;
  uint64_t not_admitted = 0;
  const uint64_t misses = HotMissesAfterAScan(Open(false), &capacity, &not_admitted);
  const uint64_t hot = static_cast<uint64_t>(capacity) / 2;
  EXPECT_GE(misses, hot * 3 / 4) << "of " << hot << " hot rows, tier of " << capacity;
  EXPECT_EQ(not_admitted, 0u);
}

// A hot set that moves: once the old hot rows are no longer pulled and new ones are,
// the sketch's halving lets the new ones in.
TEST_P(FrequencyAdmissionTest, ANewHotSetTakesOverTheTier) {
  EmbeddingStore& store = Open(true);
  const int64_t capacity = store.Stats().rows_in_memory;
  const uint64_t hot = static_cast<uint64_t>(capacity) / 2;
  std::vector<uint64_t> old_ids(hot), new_ids(hot);
  std::iota(old_ids.begin(), old_ids.end(), 0);
  std::iota(new_ids.begin(), new_ids.end(), kRows - hot);
  for (int pass = 0; pass < 20; ++pass) Pull(old_ids);
  for (int pass = 0; pass < 60; ++pass) Pull(new_ids);
  const StoreStats before = store.Stats();
  Pull(new_ids);
  const StoreStats after = store.Stats();
  EXPECT_LE(after.memory_misses - before.memory_misses, hot / 20) << "of " << hot;
}

INSTANTIATE_TEST_SUITE_P(Backends, FrequencyAdmissionTest,
                         testing::Values(BackendKind::kMemory, BackendKind::kRocksDb),
                         [](const testing::TestParamInfo<BackendKind>& info) {
                           return info.param == BackendKind::kMemory ? "Memory" : "RocksDb";
                         });

}  // namespace
}  // namespace ember
