// Copyright 2026 The Ember Authors.
//
// EmbeddingStore's slot migration API (ExportSlotRows, ReadEncodedRows, ImportRows,
// DropSlots, RowsPerSlot, EstimatedStoredRows), run over both backends: rows copied
// between two stores must read back bit for bit, whether they sat in memory (dirty),
// were written back, or were evicted to the backend.

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "common/slot.h"
#include "gtest/gtest.h"
#include "server/store/embedding_store.h"
#include "server/store/in_memory_backend.h"
#include "server/store/initializer.h"
#include "server/store/rocksdb_backend.h"
#include "server/store/row_layout.h"
#include "server/store/table_config.h"

namespace ember {
namespace {

enum class BackendKind { kMemory, kRocksDb };

constexpr uint32_t kDim = 8;
constexpr uint64_t kIdSpace = 2000;
// A quarter of the slots: about a quarter of the ids.
constexpr uint32_t kFirst = kNumSlots / 4;
constexpr uint32_t kLast = kNumSlots / 2 - 1;
// About 150 resident rows of kDim with Adagrad: the rest is evicted to the backend.
constexpr int64_t kSmallBudget = 150 * 120;

v1::TableConfig Table(const std::string& name) {
  v1::TableConfig t;
  t.set_name(name);
  t.set_dim(kDim);
  t.mutable_optimizer()->set_kind(v1::OptimizerConfig::ADAGRAD);
  t.mutable_optimizer()->set_learning_rate(0.1f);
  return NormalizeTableConfig(t).value();
}

bool InRange(const v1::TableConfig& config, uint64_t id) {
  const uint32_t slot = SlotOf(config.seed(), id);
  return slot >= kFirst && slot <= kLast;
}

// Pushes `rounds` batches of random ids of [0, kIdSpace) accepted by `keep`, with
// gradients drawn from `seed`: the same arguments give the same pushes on any store.
template <typename Keep>
void Train(EmbeddingStore& store, const std::string& table, uint64_t seed, int rounds,
           int64_t first_step, Keep keep) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> g(-1, 1);
  for (int r = 0; r < rounds; ++r) {
    std::vector<uint64_t> ids;
    std::vector<float> grads;
    for (int k = 0; k < 64; ++k) {
      const uint64_t id = rng() % kIdSpace;
      std::vector<float> grad(kDim);
      for (float& x : grad) x = g(rng);
      if (!keep(id)) continue;
      ids.push_back(id);
      grads.insert(grads.end(), grad.begin(), grad.end());
    }
    if (ids.empty()) continue;
    ASSERT_TRUE(store.Push(table, ids, grads, first_step + r).ok());
  }
}

void Train(EmbeddingStore& store, const std::string& table, uint64_t seed, int rounds,
           int64_t first_step) {
  Train(store, table, seed, rounds, first_step, [](uint64_t) { return true; });
}

// Every row of the range, page by page.
std::vector<EncodedRow> ExportAll(EmbeddingStore& store, const std::string& table, size_t max_rows,
                                  int* pages = nullptr) {
  std::vector<EncodedRow> all;
  std::string cursor;
  int n = 0;
  do {
    absl::StatusOr<RowPage> page = store.ExportSlotRows(table, kFirst, kLast, cursor, max_rows);
    EXPECT_TRUE(page.ok()) << page.status();
    if (!page.ok()) break;
    EXPECT_LE(page->rows.size(), max_rows);
    all.insert(all.end(), page->rows.begin(), page->rows.end());
    cursor = page->next_cursor;
    ++n;
  } while (!cursor.empty());
  if (pages != nullptr) *pages = n;
  return all;
}

// Rows equal in everything but the shard-local version.
void ExpectSameRow(EmbeddingStore& got_store, EmbeddingStore& want_store, const std::string& table,
                   uint64_t id) {
  RowSnapshot got = got_store.ReadRow(table, id).value();
  RowSnapshot want = want_store.ReadRow(table, id).value();
  ASSERT_EQ(got.stored, want.stored) << id;
  ASSERT_EQ(got.embedding, want.embedding) << id;
  ASSERT_EQ(got.state, want.state) << id;
  ASSERT_EQ(got.meta.count, want.meta.count) << id;
  ASSERT_EQ(got.meta.last_seen_step, want.meta.last_seen_step) << id;
}

std::vector<float> InitOf(const v1::TableConfig& config, uint64_t id) {
  std::vector<float> v(config.dim());
  InitEmbedding(config.initializer(), config.seed(), id, v.data(), config.dim());
  return v;
}

class MigrateTest : public testing::TestWithParam<BackendKind> {
 protected:
  void TearDown() override {
    stores_.clear();
    for (const auto& [name, dir] : dirs_) std::filesystem::remove_all(dir);
  }

  // Opens store `name`, or reopens it on the same directory (RocksDB only).
  EmbeddingStore& Open(const std::string& name, StoreOptions options = {}) {
    stores_.erase(name);
    std::unique_ptr<RowBackend> backend;
    if (GetParam() == BackendKind::kMemory) {
      backend = std::make_unique<InMemoryBackend>();
    } else {
      std::string& dir = dirs_[name];
      if (dir.empty()) {
        static std::atomic<int> counter{0};
        dir = (std::filesystem::path(testing::TempDir()) /
               ("ember_migrate_" + name + "_" + std::to_string(getpid()) + "_" +
                std::to_string(counter++)))
                  .string();
        std::filesystem::remove_all(dir);
      }
      RocksDbOptions ro;
      ro.path = dir;
      ro.block_cache_bytes = 8 << 20;
      ro.write_buffer_bytes = 4 << 20;
      backend = RocksDbBackend::Open(ro).value();
    }
    auto store = EmbeddingStore::Open(options, std::move(backend));
    EXPECT_TRUE(store.ok()) << store.status();
    return *(stores_[name] = std::move(store).value());
  }

  bool persistent() const { return GetParam() == BackendKind::kRocksDb; }

  // A trained source: rows evicted to the backend, rows written back by a flush and
  // then changed again (dirty), rows only in memory.
  EmbeddingStore& TrainedSource(const v1::TableConfig& config) {
    EmbeddingStore& a =
        Open("a", StoreOptions{.memory_budget_bytes = kSmallBudget, .num_stripes = 4});
    EXPECT_TRUE(a.CreateTable(config).ok());
    Train(a, config.name(), 1, 60, 0);
    EXPECT_TRUE(a.Flush().ok());
    Train(a, config.name(), 2, 20, 100);
    EXPECT_GT(a.Stats().evicted_to_backend, 500u);
    EXPECT_GT(a.Stats().rows_in_memory, 50);
    return a;
  }

  std::map<std::string, std::unique_ptr<EmbeddingStore>> stores_;
  std::map<std::string, std::string> dirs_;
};

TEST_P(MigrateTest, ExportedRangeImportsBitIdenticalAndPagesListEachRowOnce) {
  const v1::TableConfig config = Table("item");
  EmbeddingStore& a = TrainedSource(config);
  // The destination already holds older copies of some rows of the range, some dirty
  // in memory, some only in its backend: the import must replace all of them.
  EmbeddingStore& b =
      Open("b", StoreOptions{.memory_budget_bytes = kSmallBudget, .num_stripes = 4});
  ASSERT_TRUE(b.CreateTable(config).ok());
  std::vector<uint64_t> in_range_stored;
  for (uint64_t id = 0; id < kIdSpace; ++id) {
    if (InRange(config, id) && a.ReadRow("item", id).value().stored) in_range_stored.push_back(id);
  }
  Train(b, "item", 9, 30, 0, [&](uint64_t id) {
    return std::binary_search(in_range_stored.begin(), in_range_stored.end(), id);
  });
  ASSERT_GT(b.Stats().rows_in_memory, 0);

  int pages = 0;
  const std::vector<EncodedRow> rows = ExportAll(a, "item", 37, &pages);
  ASSERT_EQ(rows.size(), in_range_stored.size());
  EXPECT_GT(pages, 5);
  // Key order (slot, then id), every row once, every one in the range.
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_TRUE(InRange(config, rows[i].id)) << rows[i].id;
    ASSERT_EQ(rows[i].value.size(), RowBytes(2 * kDim));
    if (i > 0) {
      EXPECT_LT(RowKey(SlotOf(config.seed(), rows[i - 1].id), rows[i - 1].id),
                RowKey(SlotOf(config.seed(), rows[i].id), rows[i].id));
    }
  }
  // One big page lists the same rows.
  const std::vector<EncodedRow> one_page = ExportAll(a, "item", 1 << 20, &pages);
  EXPECT_EQ(pages, 1);
  ASSERT_EQ(one_page.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(one_page[i].id, rows[i].id);
    EXPECT_EQ(one_page[i].value, rows[i].value);
  }

  for (size_t i = 0; i < rows.size(); i += 100) {
    const size_t end = std::min(rows.size(), i + 100);
    ASSERT_TRUE(b.ImportRows("item", absl::MakeConstSpan(rows).subspan(i, end - i)).ok());
  }
  EmbeddingStore* store = &b;
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "after import" : "after flush and reopen");
    for (uint64_t id = 0; id < kIdSpace; ++id) {
      if (InRange(config, id)) {
        ExpectSameRow(*store, a, "item", id);
      } else {
        ASSERT_FALSE(store->ReadRow("item", id).value().stored) << id;
      }
    }
    if (!persistent()) break;
    ASSERT_TRUE(store->Flush().ok());
    store = &Open("b");
    ASSERT_TRUE(store->CreateTable(config).ok());
  }
}

TEST_P(MigrateTest, PullAndPushAfterImportMatchTheSource) {
  const v1::TableConfig config = Table("item");
  EmbeddingStore& a = TrainedSource(config);
  EmbeddingStore& b =
      Open("b", StoreOptions{.memory_budget_bytes = kSmallBudget, .num_stripes = 2});
  ASSERT_TRUE(b.CreateTable(config).ok());
  const std::vector<EncodedRow> rows = ExportAll(a, "item", 500);
  ASSERT_TRUE(b.ImportRows("item", rows).ok());

  auto in_range = [&](uint64_t id) { return InRange(config, id); };
  Train(a, "item", 5, 40, 200, in_range);
  Train(b, "item", 5, 40, 200, in_range);
  std::vector<uint64_t> ids;
  for (uint64_t id = 0; id < kIdSpace; ++id) {
    if (in_range(id)) ids.push_back(id);
  }
  std::vector<float> pa(ids.size() * kDim), pb(ids.size() * kDim);
  ASSERT_TRUE(a.Pull("item", ids, absl::MakeSpan(pa)).ok());
  ASSERT_TRUE(b.Pull("item", ids, absl::MakeSpan(pb)).ok());
  EXPECT_EQ(pa, pb);
  for (uint64_t id : ids) ExpectSameRow(b, a, "item", id);
}

TEST_P(MigrateTest, ReadEncodedRowsMatchExportAndMarkMissingIds) {
  const v1::TableConfig config = Table("item");
  EmbeddingStore& a = TrainedSource(config);
  const std::vector<EncodedRow> exported = ExportAll(a, "item", 1000);
  ASSERT_GT(exported.size(), 10u);
  std::vector<uint64_t> ids;
  for (const EncodedRow& row : exported) ids.push_back(row.id);
  ids.push_back(kIdSpace + 7);  // never stored
  absl::StatusOr<std::vector<EncodedRow>> read = a.ReadEncodedRows("item", ids);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), ids.size());
  for (size_t i = 0; i < exported.size(); ++i) {
    EXPECT_EQ((*read)[i].id, exported[i].id);
    EXPECT_EQ((*read)[i].value, exported[i].value) << exported[i].id;
  }
  EXPECT_EQ(read->back().id, kIdSpace + 7);
  EXPECT_TRUE(read->back().value.empty());
  EXPECT_FALSE(a.ReadRow("item", kIdSpace + 7).value().stored);  // reads load nothing
}

TEST_P(MigrateTest, ImportRecordsVersionsTombstonesAndRejectsBadRows) {
  const v1::TableConfig config = Table("item");
  EmbeddingStore& a = TrainedSource(config);
  EmbeddingStore& b =
      Open("b", StoreOptions{.memory_budget_bytes = kSmallBudget, .num_stripes = 4});
  ASSERT_TRUE(b.CreateTable(config).ok());
  Train(b, "item", 3, 60, 0);  // rows everywhere, some dirty in memory
  ASSERT_TRUE(b.Flush().ok());
  Train(b, "item", 4, 10, 50);

  // 100 rows of A; tombstones for 90 rows B stores (resident or not) and 10 it lacks.
  std::vector<uint64_t> all(kIdSpace);
  std::iota(all.begin(), all.end(), 0);
  std::vector<EncodedRow> rows;
  std::map<uint64_t, bool> tombstone;
  const std::vector<EncodedRow> in_a = a.ReadEncodedRows("item", all).value();
  for (const EncodedRow& row : in_a) {
    if (row.value.empty() || rows.size() == 100) continue;
    rows.push_back(row);
    tombstone[row.id] = false;
  }
  for (uint64_t id = 0; id < kIdSpace && tombstone.size() < 190; ++id) {
    if (tombstone.contains(id) || !b.ReadRow("item", id).value().stored) continue;
    rows.push_back({id, ""});
    tombstone[id] = true;
  }
  for (uint64_t id = kIdSpace + 100; id < kIdSpace + 110; ++id) {
    rows.push_back({id, ""});
    tombstone[id] = true;
  }
  ASSERT_EQ(tombstone.size(), 200u);
  const uint64_t dup = rows[0].id;
  rows.push_back({dup, rows[1].value});  // a duplicate id: the last row wins

  const uint64_t before = b.version();
  std::vector<uint64_t> touched;
  for (const auto& [id, ts] : tombstone) touched.push_back(id);
  const std::vector<EncodedRow> original = b.ReadEncodedRows("item", touched).value();
  std::vector<EncodedRow> bad = rows;
  bad[99].value.pop_back();  // a bad row after good ones
  EXPECT_EQ(b.ImportRows("item", bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b.ImportRows("nope", rows).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(b.version(), before);
  const std::vector<EncodedRow> unchanged = b.ReadEncodedRows("item", touched).value();
  for (size_t i = 0; i < touched.size(); ++i) {
    EXPECT_EQ(unchanged[i].value, original[i].value) << touched[i];
  }

  ASSERT_TRUE(b.ImportRows("item", rows).ok());
  EXPECT_EQ(b.version(), before + 200);
  absl::StatusOr<ChangeBatch> changes = b.ReadChanges(before, 1000);
  ASSERT_TRUE(changes.ok());
  ASSERT_EQ(changes->changes.size(), 200u);
  std::map<uint64_t, Change> by_id;
  for (const Change& c : changes->changes) {
    EXPECT_EQ(changes->table_names[c.table], "item");
    by_id[c.id] = c;
  }
  ASSERT_EQ(by_id.size(), 200u);
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "after import" : "after flush and reopen");
    EmbeddingStore& store = round == 0 ? b : Open("b");
    if (round == 1) {
      ASSERT_TRUE(store.CreateTable(config).ok());
      // Versions keep growing above the imported ones after a reopen.
      ASSERT_TRUE(store.Push("item", {kIdSpace}, std::vector<float>(kDim, 0.5f), 500).ok());
      EXPECT_GT(store.ReadRow("item", kIdSpace).value().meta.version, before + 200);
    }
    for (const auto& [id, ts] : tombstone) {
      RowSnapshot row = store.ReadRow("item", id).value();
      ASSERT_EQ(by_id.count(id), 1u) << id;
      EXPECT_EQ(by_id[id].tombstone, ts) << id;
      if (ts) {
        ASSERT_FALSE(row.stored) << id;
        std::vector<float> pulled(kDim);
        ASSERT_TRUE(store.Pull("item", {id}, absl::MakeSpan(pulled)).ok());
        EXPECT_EQ(pulled, InitOf(config, id)) << id;
        continue;
      }
      EXPECT_EQ(row.meta.version, by_id[id].version) << id;  // re-stamped
      if (id == dup) {
        const RowSnapshot second = a.ReadRow("item", rows[1].id).value();
        EXPECT_EQ(row.embedding, second.embedding);
        EXPECT_EQ(row.state, second.state);
      } else {
        ExpectSameRow(store, a, "item", id);
      }
    }
    if (!persistent()) break;
    ASSERT_TRUE(store.Flush().ok());
  }
}

TEST_P(MigrateTest, DropSlotsRemovesTheRangeEverywhereAndNothingElse) {
  const v1::TableConfig item = Table("item");
  const v1::TableConfig user = Table("user");
  const StoreOptions options{.memory_budget_bytes = kSmallBudget, .num_stripes = 4};
  EmbeddingStore& a = Open("a", options);
  ASSERT_TRUE(a.CreateTable(item).ok());
  ASSERT_TRUE(a.CreateTable(user).ok());
  for (const v1::TableConfig* t : {&item, &user}) {
    Train(a, t->name(), 1, 60, 0);
    ASSERT_TRUE(a.Flush().ok());
    Train(a, t->name(), 2, 20, 100);  // dirty rows, some about to be evicted
  }
  // The rest: the same training without the range.
  EmbeddingStore& rest = Open("rest", StoreOptions{.memory_budget_bytes = 0});
  uint64_t expected_dropped = 0;
  for (const v1::TableConfig* t : {&item, &user}) {
    ASSERT_TRUE(rest.CreateTable(*t).ok());
    auto outside = [&](uint64_t id) { return !InRange(*t, id); };
    Train(rest, t->name(), 1, 60, 0, outside);
    Train(rest, t->name(), 2, 20, 100, outside);
    for (uint64_t id = 0; id < kIdSpace; ++id) {
      if (InRange(*t, id) && a.ReadRow(t->name(), id).value().stored) ++expected_dropped;
    }
  }
  ASSERT_GT(expected_dropped, 100u);

  absl::StatusOr<uint64_t> dropped = a.DropSlots(kFirst, kLast);
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_EQ(*dropped, expected_dropped);
  const uint64_t version = a.version();
  // Force write-backs and CLOCK evictions of everything left in memory.
  auto upper_outside = [&](uint64_t id) { return id >= kIdSpace / 2 && !InRange(item, id); };
  Train(a, "item", 7, 40, 300, upper_outside);
  Train(rest, "item", 7, 40, 300, upper_outside);
  EXPECT_GT(a.version(), version);

  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "after drop" : "after flush and reopen");
    EmbeddingStore& store = round == 0 ? a : Open("a", options);
    if (round == 1) {
      ASSERT_TRUE(store.CreateTable(item).ok());
      ASSERT_TRUE(store.CreateTable(user).ok());
    }
    for (const v1::TableConfig* t : {&item, &user}) {
      for (uint64_t id = 0; id < kIdSpace; ++id) {
        if (InRange(*t, id)) {
          ASSERT_FALSE(store.ReadRow(t->name(), id).value().stored) << id;
        } else {
          ExpectSameRow(store, rest, t->name(), id);
        }
      }
      absl::StatusOr<TableChecksum> got = store.Checksum(t->name());
      absl::StatusOr<TableChecksum> want = rest.Checksum(t->name());
      ASSERT_TRUE(got.ok() && want.ok());
      EXPECT_EQ(got->rows, want->rows);
      EXPECT_EQ(got->digest, want->digest);
    }
    std::vector<uint64_t> per_slot = store.RowsPerSlot().value();
    for (uint32_t s = kFirst; s <= kLast; ++s) ASSERT_EQ(per_slot[s], 0u) << s;
    if (!persistent()) break;
    ASSERT_TRUE(store.Flush().ok());
  }
  // Dropping again finds nothing.
  EXPECT_EQ(stores_["a"]->DropSlots(kFirst, kLast).value(), 0u);
}

TEST_P(MigrateTest, RowsPerSlotCountsEveryStoredRowAndEstimateSeesThem) {
  const v1::TableConfig item = Table("item");
  const v1::TableConfig user = Table("user");
  EmbeddingStore& a =
      Open("a", StoreOptions{.memory_budget_bytes = kSmallBudget, .num_stripes = 4});
  EXPECT_EQ(a.EstimatedStoredRows(), 0u);
  ASSERT_TRUE(a.CreateTable(item).ok());
  ASSERT_TRUE(a.CreateTable(user).ok());
  Train(a, "item", 1, 40, 0);
  Train(a, "user", 2, 10, 0);  // few rows: most only in memory, dirty
  std::vector<uint64_t> expected(kNumSlots, 0);
  uint64_t total = 0;
  for (const v1::TableConfig* t : {&item, &user}) {
    for (uint64_t id = 0; id < kIdSpace; ++id) {
      if (!a.ReadRow(t->name(), id).value().stored) continue;
      ++expected[SlotOf(t->seed(), id)];
      ++total;
    }
  }
  absl::StatusOr<std::vector<uint64_t>> per_slot = a.RowsPerSlot();
  ASSERT_TRUE(per_slot.ok()) << per_slot.status();
  EXPECT_EQ(*per_slot, expected);
  EXPECT_EQ(std::accumulate(per_slot->begin(), per_slot->end(), uint64_t{0}), total);
  ASSERT_TRUE(a.Flush().ok());
  EXPECT_GT(a.EstimatedStoredRows(), 0u);
  if (!persistent()) {
    EXPECT_EQ(a.EstimatedStoredRows(), total);  // exact in memory
  }
}

TEST_P(MigrateTest, ExportWhileTrainingThenCatchUpIsExact) {
  // The migration protocol: remember the version, page the range out while the source
  // keeps training (evicting and writing back), stop, then catch up on the change log.
  const v1::TableConfig config = Table("item");
  EmbeddingStore& a = TrainedSource(config);
  EmbeddingStore& b = Open("b");
  ASSERT_TRUE(b.CreateTable(config).ok());
  const uint64_t from = a.version();
  std::atomic<bool> done{false};
  std::thread trainer([&] {
    Train(a, "item", 11, 150, 1000);
    done = true;
  });
  std::string cursor;
  int pages = 0;
  do {
    absl::StatusOr<RowPage> page = a.ExportSlotRows("item", kFirst, kLast, cursor, 16);
    ASSERT_TRUE(page.ok()) << page.status();
    ASSERT_TRUE(b.ImportRows("item", page->rows).ok());
    cursor = page->next_cursor;
    ++pages;
  } while (!cursor.empty());
  trainer.join();
  absl::StatusOr<ChangeBatch> changes = a.ReadChanges(from, 1 << 20);
  ASSERT_TRUE(changes.ok());
  absl::flat_hash_set<uint64_t> changed;
  for (const Change& c : changes->changes) {
    if (InRange(config, c.id)) changed.insert(c.id);
  }
  std::vector<uint64_t> ids(changed.begin(), changed.end());
  ASSERT_FALSE(ids.empty());
  ASSERT_TRUE(b.ImportRows("item", a.ReadEncodedRows("item", ids).value()).ok());
  for (uint64_t id = 0; id < kIdSpace; ++id) {
    if (InRange(config, id)) ExpectSameRow(b, a, "item", id);
  }
  EXPECT_GT(pages, 10);
}

TEST_P(MigrateTest, ImportWhileEvictingKeepsTheImportedValues) {
  // Old dirty copies of the imported rows sit in B's memory while other pushes force
  // CLOCK evictions (and their write-backs) concurrently with the import.
  const v1::TableConfig config = Table("item");
  EmbeddingStore& a = TrainedSource(config);
  EmbeddingStore& b =
      Open("b", StoreOptions{.memory_budget_bytes = kSmallBudget, .num_stripes = 2});
  ASSERT_TRUE(b.CreateTable(config).ok());
  auto in_range = [&](uint64_t id) { return InRange(config, id); };
  Train(b, "item", 21, 40, 0, in_range);
  const std::vector<EncodedRow> rows = ExportAll(a, "item", 1000);
  std::thread other(
      [&] { Train(b, "item", 22, 100, 100, [&](uint64_t id) { return !in_range(id); }); });
  for (size_t i = 0; i < rows.size(); i += 20) {
    const size_t end = std::min(rows.size(), i + 20);
    ASSERT_TRUE(b.ImportRows("item", absl::MakeConstSpan(rows).subspan(i, end - i)).ok());
  }
  other.join();
  ASSERT_TRUE(b.Flush().ok());
  Train(b, "item", 23, 40, 400, [&](uint64_t id) { return !in_range(id); });  // evict again
  absl::flat_hash_set<uint64_t> imported;
  for (const EncodedRow& row : rows) imported.insert(row.id);
  for (uint64_t id = 0; id < kIdSpace; ++id) {
    if (imported.contains(id)) ExpectSameRow(b, a, "item", id);
  }
}

TEST_P(MigrateTest, BadArgumentsAreRejected) {
  EmbeddingStore& a = Open("a");
  ASSERT_TRUE(a.CreateTable(Table("item")).ok());
  ASSERT_TRUE(a.Push("item", {1, 2, 3}, std::vector<float>(3 * kDim, 0.5f), 1).ok());
  const auto invalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(a.ExportSlotRows("item", 5, 4, "", 10).status().code(), invalid);
  EXPECT_EQ(a.ExportSlotRows("item", 0, kNumSlots, "", 10).status().code(), invalid);
  EXPECT_EQ(a.ExportSlotRows("item", 0, 10, "", 0).status().code(), invalid);
  EXPECT_EQ(a.ExportSlotRows("item", 0, 10, "junk", 10).status().code(), invalid);
  EXPECT_EQ(a.ExportSlotRows("item", 0, 10, RowKey(11, 5), 10).status().code(), invalid);
  EXPECT_EQ(a.ExportSlotRows("item", 0, 10, RowKey(3, 5) + "x", 10).status().code(), invalid);
  EXPECT_TRUE(a.ExportSlotRows("item", 0, 10, RowKey(3, 5), 10).ok());
  EXPECT_EQ(a.ExportSlotRows("nope", 0, 10, "", 10).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(a.ReadEncodedRows("nope", {1}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(a.DropSlots(5, 4).status().code(), invalid);
  EXPECT_EQ(a.DropSlots(0, kNumSlots).status().code(), invalid);
  // The whole slot space is one valid range.
  EXPECT_EQ(a.ExportSlotRows("item", 0, kNumSlots - 1, "", 10).value().rows.size(), 3u);
  EXPECT_EQ(a.DropSlots(0, kNumSlots - 1).value(), 3u);
  EXPECT_FALSE(a.ReadRow("item", 1).value().stored);
  ASSERT_TRUE(a.Close().ok());
  EXPECT_EQ(a.DropSlots(0, 1).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(a.RowsPerSlot().status().code(), absl::StatusCode::kFailedPrecondition);
}

INSTANTIATE_TEST_SUITE_P(Backends, MigrateTest,
                         testing::Values(BackendKind::kMemory, BackendKind::kRocksDb),
                         [](const auto& info) {
                           return info.param == BackendKind::kMemory ? "Memory" : "RocksDb";
                         });

}  // namespace
}  // namespace ember
