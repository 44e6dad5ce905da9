// Copyright 2026 The Ember Authors.
//
// The RowBackend contract test: one body run against every backend (RocksDbBackend on a
// real temporary directory, InMemoryBackend), plus InMemoryBackend's injected failures.
// RocksDB-only tests are in rocksdb_backend_test.cc.

#include "tests/server/store/row_backend_test_util.h"

namespace ember {
namespace {

using namespace ::ember::testutil;  // NOLINT: test helpers
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

// ------------------------------------------------------------- backends under contract

struct RocksDbTraits {
  static constexpr bool kPersistent = true;
  static std::unique_ptr<RowBackend> Open(const std::string& dir) {
    auto backend = RocksDbBackend::Open(SmallRocksDbOptions(dir + "/db"));
    EXPECT_TRUE(backend.ok()) << backend.status();
    if (!backend.ok()) return nullptr;
    return std::move(*backend);
  }
};

struct InMemoryTraits {
  static constexpr bool kPersistent = false;
  static std::unique_ptr<RowBackend> Open(const std::string&) {
    return std::make_unique<InMemoryBackend>();
  }
};

template <typename Traits>
class RowBackendTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    backend_ = Traits::Open(dir_);
    ASSERT_NE(backend_, nullptr);
  }
  void TearDown() override {
    backend_.reset();
    std::filesystem::remove_all(dir_);
  }

  // A restart: a persistent backend is closed and reopened on the same directory; a
  // memory backend stays as it is.
  void Reopen() {
    if (!Traits::kPersistent) return;
    backend_.reset();
    backend_ = Traits::Open(dir_);
    ASSERT_NE(backend_, nullptr);
  }

  BackendTable MustOpenTable(const std::string& name) {
    absl::StatusOr<BackendTable> t = backend_->OpenTable(name);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.value_or(kMetaTable);
  }

  std::string dir_;
  std::unique_ptr<RowBackend> backend_;
};

class BackendNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    return std::is_same_v<T, RocksDbTraits> ? "RocksDb" : "InMemory";
  }
};

using BackendTypes = testing::Types<RocksDbTraits, InMemoryTraits>;
TYPED_TEST_SUITE(RowBackendTest, BackendTypes, BackendNames);

TYPED_TEST(RowBackendTest, OpenTableIsIdempotent) {
  absl::StatusOr<BackendTable> a1 = this->backend_->OpenTable("a");
  absl::StatusOr<BackendTable> b = this->backend_->OpenTable("b");
  absl::StatusOr<BackendTable> a2 = this->backend_->OpenTable("a");
  ASSERT_TRUE(a1.ok() && b.ok() && a2.ok());
  EXPECT_EQ(*a1, *a2);
  EXPECT_NE(*a1, *b);
  EXPECT_NE(*a1, kMetaTable);
  EXPECT_THAT(this->backend_->ListTables(), ElementsAre("a", "b"));
}

TYPED_TEST(RowBackendTest, EmptyTableNameIsInvalid) {
  EXPECT_EQ(this->backend_->OpenTable("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(this->backend_->ListTables(), IsEmpty());
}

TYPED_TEST(RowBackendTest, TablesAndDataSurviveReopen) {
  const BackendTable users = this->MustOpenTable("users");
  const BackendTable items = this->MustOpenTable("items");
  EMBER_ASSERT_OK(
      this->backend_->Write({Put(users, RowKey(1, 1), "u1"), Put(items, RowKey(2, 2), "i2"),
                             Put(kMetaTable, "version", "7")}));
  this->Reopen();
  EXPECT_THAT(this->backend_->ListTables(), ElementsAre("items", "users"));
  const BackendTable users2 = this->MustOpenTable("users");
  const BackendTable items2 = this->MustOpenTable("items");
  EXPECT_EQ(Get(*this->backend_, users2, RowKey(1, 1)), "u1");
  EXPECT_EQ(Get(*this->backend_, items2, RowKey(2, 2)), "i2");
  EXPECT_EQ(Get(*this->backend_, items2, RowKey(1, 1)), std::nullopt);
  EXPECT_EQ(Get(*this->backend_, kMetaTable, "version"), "7");
  // Reopening a table after the restart does not create a second one.
  EXPECT_THAT(this->backend_->ListTables(), ElementsAre("items", "users"));
}

TYPED_TEST(RowBackendTest, MultiGetMixesFoundAndMissing) {
  const BackendTable t = this->MustOpenTable("t");
  EMBER_ASSERT_OK(this->backend_->Write(
      {Put(t, RowKey(5, 1), "one"), Put(t, RowKey(5, 3), "three"), Put(t, RowKey(9, 1), "")}));
  const std::vector<std::string> keys = {RowKey(5, 1), RowKey(5, 2), RowKey(5, 3),
                                         RowKey(9, 1), RowKey(5, 1), "not-a-row-key"};
  // Stale contents in the outputs must be overwritten.
  std::vector<std::string> values = {"junk", "junk"};
  std::vector<bool> found(10, true);
  EMBER_ASSERT_OK(this->backend_->MultiGet(t, keys, &values, &found));
  EXPECT_THAT(found, ElementsAre(true, false, true, true, true, false));
  ASSERT_EQ(values.size(), keys.size());
  EXPECT_EQ(values[0], "one");
  EXPECT_EQ(values[2], "three");
  EXPECT_EQ(values[3], "");
  EXPECT_EQ(values[4], "one");
}

TYPED_TEST(RowBackendTest, MultiGetOfNoKeys) {
  const BackendTable t = this->MustOpenTable("t");
  std::vector<std::string> values = {"x"};
  std::vector<bool> found = {true};
  EMBER_ASSERT_OK(this->backend_->MultiGet(t, {}, &values, &found));
  EXPECT_THAT(values, IsEmpty());
  EXPECT_THAT(found, IsEmpty());
}

TYPED_TEST(RowBackendTest, UnknownTableIsInvalidArgument) {
  const BackendTable t = this->MustOpenTable("t");
  const BackendTable bogus = t + 100;
  std::vector<std::string> values;
  std::vector<bool> found;
  EXPECT_EQ(this->backend_->MultiGet(bogus, {RowKey(0, 0)}, &values, &found).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(this->backend_->MultiGet(-7, {RowKey(0, 0)}, &values, &found).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ScanRange(*this->backend_, bogus, "", "").status().code(),
            absl::StatusCode::kInvalidArgument);
  // A batch with one bad handle is rejected whole.
  EXPECT_EQ(this->backend_->Write({Put(t, "k", "v"), Put(bogus, "k", "v")}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Get(*this->backend_, t, "k"), std::nullopt);
}

TYPED_TEST(RowBackendTest, WriteAppliesBatchAcrossTablesAndMeta) {
  const BackendTable a = this->MustOpenTable("a");
  const BackendTable b = this->MustOpenTable("b");
  EMBER_ASSERT_OK(
      this->backend_->Write({Put(a, "old", "1"), Put(b, "old", "2"), Put(kMetaTable, "old", "3")}));
  EMBER_ASSERT_OK(this->backend_->Write({
      Put(a, "new", "a-new"),
      Erase(a, "old"),
      Put(b, "new", "b-first"),
      Put(b, "new", "b-second"),  // later writes in a batch win
      Erase(b, "never-written"),  // erasing an absent key is fine
      Put(kMetaTable, "new", "m-new"),
      Erase(kMetaTable, "old"),
  }));
  EXPECT_EQ(Get(*this->backend_, a, "new"), "a-new");
  EXPECT_EQ(Get(*this->backend_, a, "old"), std::nullopt);
  EXPECT_EQ(Get(*this->backend_, b, "new"), "b-second");
  EXPECT_EQ(Get(*this->backend_, b, "old"), "2");
  EXPECT_EQ(Get(*this->backend_, kMetaTable, "new"), "m-new");
  EXPECT_EQ(Get(*this->backend_, kMetaTable, "old"), std::nullopt);
  // Tables are separate keyspaces.
  EXPECT_EQ(Get(*this->backend_, a, "never-written"), std::nullopt);
  EMBER_EXPECT_OK(this->backend_->Write({}));

  this->Reopen();
  const BackendTable a2 = this->MustOpenTable("a");
  const BackendTable b2 = this->MustOpenTable("b");
  EXPECT_THAT(*ScanRange(*this->backend_, a2, "", ""), ElementsAre(Pair("new", "a-new")));
  EXPECT_THAT(*ScanRange(*this->backend_, b2, "", ""),
              ElementsAre(Pair("new", "b-second"), Pair("old", "2")));
  EXPECT_THAT(*ScanRange(*this->backend_, kMetaTable, "", ""), ElementsAre(Pair("new", "m-new")));
}

TYPED_TEST(RowBackendTest, ScanHonorsBoundsAndSlotRanges) {
  const BackendTable t = this->MustOpenTable("t");
  const BackendTable other = this->MustOpenTable("other");
  const uint32_t last = kNumSlots - 1;
  BackendWriteBatch batch;
  for (uint32_t slot : {0u, 1u, 2u, 300u, last}) {
    for (uint64_t id : {uint64_t{0}, uint64_t{5}, ~uint64_t{0}}) {
      batch.push_back(Put(t, RowKey(slot, id), absl::StrCat(slot, ":", id)));
    }
  }
  batch.push_back(Put(other, RowKey(1, 1), "other table"));
  EMBER_ASSERT_OK(this->backend_->Write(batch));

  // One slot: every id, in key order, nothing from the neighbours or other tables.
  absl::StatusOr<KeyValues> slot1 = ScanRange(*this->backend_, t, SlotBeginKey(1), SlotEndKey(1));
  ASSERT_TRUE(slot1.ok()) << slot1.status();
  EXPECT_THAT(*slot1, ElementsAre(Pair(RowKey(1, 0), "1:0"), Pair(RowKey(1, 5), "1:5"),
                                  Pair(RowKey(1, ~uint64_t{0}), "1:18446744073709551615")));

  // The last slot's end key sorts after every row key.
  absl::StatusOr<KeyValues> last_slot =
      ScanRange(*this->backend_, t, SlotBeginKey(last), SlotEndKey(last));
  ASSERT_TRUE(last_slot.ok());
  EXPECT_EQ(last_slot->size(), 3u);

  // An empty slot and an empty range.
  EXPECT_THAT(*ScanRange(*this->backend_, t, SlotBeginKey(3), SlotEndKey(3)), IsEmpty());
  EXPECT_THAT(*ScanRange(*this->backend_, t, RowKey(2, 1), RowKey(2, 1)), IsEmpty());

  // begin is inclusive, end exclusive.
  EXPECT_THAT(*ScanRange(*this->backend_, t, RowKey(0, 5), RowKey(1, 5)),
              ElementsAre(Pair(RowKey(0, 5), "0:5"), Pair(RowKey(0, ~uint64_t{0}), testing::_),
                          Pair(RowKey(1, 0), "1:0")));

  // Empty end: to the end of the table; empty begin: from its start.
  absl::StatusOr<KeyValues> tail = ScanRange(*this->backend_, t, SlotBeginKey(300), "");
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(tail->size(), 6u);
  absl::StatusOr<KeyValues> all = ScanRange(*this->backend_, t, "", "");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 15u);
  EXPECT_TRUE(std::is_sorted(all->begin(), all->end()));
}

TYPED_TEST(RowBackendTest, DeleteRangeRemovesExactlyTheRangeDurably) {
  const BackendTable t = this->MustOpenTable("t");
  const BackendTable other = this->MustOpenTable("other");
  const uint32_t last = kNumSlots - 1;
  BackendWriteBatch batch;
  for (uint32_t slot : {0u, 1u, 2u, 3u, 300u, last}) {
    for (uint64_t id : {uint64_t{0}, uint64_t{5}, ~uint64_t{0}}) {
      batch.push_back(Put(t, RowKey(slot, id), "v"));
      batch.push_back(Put(other, RowKey(slot, id), "o"));
    }
  }
  EMBER_ASSERT_OK(this->backend_->Write(batch));
  EXPECT_GT(this->backend_->EstimateKeys(t), 0u);

  // Slots [1, 2]: begin inclusive, end exclusive; other tables untouched.
  EMBER_ASSERT_OK(this->backend_->DeleteRange(t, SlotBeginKey(1), SlotEndKey(2)));
  EXPECT_THAT(*ScanRange(*this->backend_, t, SlotBeginKey(1), SlotEndKey(2)), IsEmpty());
  EXPECT_EQ(ScanRange(*this->backend_, t, SlotBeginKey(0), SlotEndKey(0))->size(), 3u);
  EXPECT_EQ(ScanRange(*this->backend_, t, SlotBeginKey(3), SlotEndKey(3))->size(), 3u);
  EXPECT_EQ(ScanRange(*this->backend_, other, "", "")->size(), 18u);
  EXPECT_EQ(Get(*this->backend_, t, RowKey(2, ~uint64_t{0})), std::nullopt);
  // The last slot's end key; an empty range; an empty end: to the end of the table.
  EMBER_ASSERT_OK(this->backend_->DeleteRange(t, SlotBeginKey(last), SlotEndKey(last)));
  EMBER_ASSERT_OK(this->backend_->DeleteRange(t, RowKey(0, 5), RowKey(0, 5)));
  EXPECT_EQ(Get(*this->backend_, t, RowKey(0, 5)), "v");
  EMBER_ASSERT_OK(this->backend_->DeleteRange(t, SlotBeginKey(300), ""));
  EMBER_ASSERT_OK(this->backend_->DeleteRange(t, RowKey(3, 1), ""));
  // Bad arguments change nothing.
  EXPECT_EQ(this->backend_->DeleteRange(t, RowKey(0, 5), RowKey(0, 1)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(this->backend_->DeleteRange(t + 100, "", "").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(this->backend_->EstimateKeys(t + 100), 0u);

  EMBER_ASSERT_OK(this->backend_->Flush());
  this->Reopen();
  const BackendTable t2 = this->MustOpenTable("t");
  const BackendTable other2 = this->MustOpenTable("other");
  absl::StatusOr<KeyValues> left = ScanRange(*this->backend_, t2, "", "");
  ASSERT_TRUE(left.ok());
  EXPECT_THAT(*left, ElementsAre(Pair(RowKey(0, 0), "v"), Pair(RowKey(0, 5), "v"),
                                 Pair(RowKey(0, ~uint64_t{0}), "v"), Pair(RowKey(3, 0), "v")));
  EXPECT_EQ(ScanRange(*this->backend_, other2, "", "")->size(), 18u);
  EXPECT_GT(this->backend_->EstimateKeys(other2), 0u);
  if (!TypeParam::kPersistent) {  // exact for memory backends
    EXPECT_EQ(this->backend_->EstimateKeys(t2), 4u);
    EXPECT_EQ(this->backend_->EstimateKeys(other2), 18u);
  }
}

TYPED_TEST(RowBackendTest, ScanStopsWhenCallbackReturnsFalse) {
  const BackendTable t = this->MustOpenTable("t");
  BackendWriteBatch batch;
  for (uint64_t id = 0; id < 3000; ++id) batch.push_back(Put(t, RowKey(7, id), "v"));
  EMBER_ASSERT_OK(this->backend_->Write(batch));
  int calls = 0;
  EMBER_ASSERT_OK(
      this->backend_->Scan(t, SlotBeginKey(7), SlotEndKey(7),
                           [&](std::string_view, std::string_view) { return ++calls < 2; }));
  EXPECT_EQ(calls, 2);
  // Also past the in-memory backend's internal chunk size.
  absl::StatusOr<KeyValues> first = ScanRange(*this->backend_, t, "", "", 2500);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 2500u);
  EXPECT_EQ(first->back().first, RowKey(7, 2499));
}

TYPED_TEST(RowBackendTest, BinaryKeysAndValuesRoundTripBitExact) {
  const BackendTable t = this->MustOpenTable("t");
  const std::string nul_value("\0a\0\0b\xff\0", 7);
  const std::string nul_key("\0\0key\0", 6);
  std::string all_bytes;
  for (int c = 0; c < 256; ++c) all_bytes.push_back(static_cast<char>(c));
  std::string nan_row = RowValue(42);
  const uint32_t quiet_nan_payload = 0x7fc00123;
  std::memcpy(nan_row.data() + sizeof(RowMeta), &quiet_nan_payload, sizeof(quiet_nan_payload));

  EMBER_ASSERT_OK(this->backend_->Write(
      {Put(t, nul_key, nul_value), Put(t, RowKey(0, 0), all_bytes), Put(t, RowKey(1, 0), nan_row),
       Put(t, RowKey(2, 0), ""), Put(kMetaTable, std::string("m\0", 2), nul_value)}));
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "before flush" : "after flush and reopen");
    const BackendTable tt = this->MustOpenTable("t");
    EXPECT_EQ(Get(*this->backend_, tt, nul_key), nul_value);
    EXPECT_EQ(Get(*this->backend_, tt, std::string("\0\0key", 5)), std::nullopt);
    EXPECT_EQ(Get(*this->backend_, tt, RowKey(0, 0)), all_bytes);
    EXPECT_EQ(Get(*this->backend_, tt, RowKey(1, 0)), nan_row);
    EXPECT_EQ(Get(*this->backend_, tt, RowKey(2, 0)), "");
    EXPECT_EQ(Get(*this->backend_, kMetaTable, std::string("m\0", 2)), nul_value);
    EXPECT_EQ(Get(*this->backend_, kMetaTable, "m"), std::nullopt);
    absl::StatusOr<KeyValues> scanned = ScanRange(*this->backend_, tt, "", "");
    ASSERT_TRUE(scanned.ok());
    // Bytewise order: "\0\0\0..." < "\0\0key" < "\0\x01...".
    EXPECT_THAT(*scanned, ElementsAre(Pair(RowKey(0, 0), all_bytes), Pair(nul_key, nul_value),
                                      Pair(RowKey(1, 0), nan_row), Pair(RowKey(2, 0), "")));
    EMBER_ASSERT_OK(this->backend_->Flush());
    this->Reopen();
  }
}

TYPED_TEST(RowBackendTest, TenThousandKeyBatchRoundTrips) {
  constexpr int kKeys = 10000;
  const BackendTable t = this->MustOpenTable("big");
  BackendWriteBatch batch;
  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) {
    const uint64_t id = static_cast<uint64_t>(i) * 2654435761u;
    keys.push_back(RowKey(SlotOf(17, id), id));
    batch.push_back(Put(t, keys.back(), RowValue(id)));
  }
  EMBER_ASSERT_OK(this->backend_->Write(batch));

  auto check = [&](BackendTable table) {
    std::vector<std::string> values;
    std::vector<bool> found;
    EMBER_ASSERT_OK(this->backend_->MultiGet(table, keys, &values, &found));
    ASSERT_EQ(values.size(), keys.size());
    int mismatches = 0;
    for (int i = 0; i < kKeys; ++i) {
      if (!found[i] || values[i] != batch[i].value) ++mismatches;
    }
    EXPECT_EQ(mismatches, 0);
    int64_t scanned = 0;
    EMBER_ASSERT_OK(this->backend_->Scan(table, "", "", [&](std::string_view, std::string_view) {
      ++scanned;
      return true;
    }));
    EXPECT_EQ(scanned, kKeys);
  };
  check(t);
  EMBER_ASSERT_OK(this->backend_->Flush());
  this->Reopen();
  check(this->MustOpenTable("big"));
}

TYPED_TEST(RowBackendTest, ConcurrentOpenWriteAndRead) {
  constexpr int kThreads = 4;
  constexpr int kBatches = 100;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      absl::StatusOr<BackendTable> own = this->backend_->OpenTable(absl::StrCat("own", w));
      absl::StatusOr<BackendTable> shared = this->backend_->OpenTable("shared");
      if (!own.ok() || !shared.ok()) {
        ++failures;
        return;
      }
      for (int b = 0; b < kBatches; ++b) {
        const std::string key = RowKey(static_cast<uint32_t>(w), static_cast<uint64_t>(b));
        if (!this->backend_->Write({Put(*own, key, "o"), Put(*shared, key, "s")}).ok()) ++failures;
        std::vector<std::string> values;
        std::vector<bool> found;
        if (!this->backend_->MultiGet(*shared, {key}, &values, &found).ok() || !found[0] ||
            values[0] != "s") {
          ++failures;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_THAT(this->backend_->ListTables(), ElementsAre("own0", "own1", "own2", "own3", "shared"));
  absl::StatusOr<KeyValues> shared =
      ScanRange(*this->backend_, this->MustOpenTable("shared"), "", "");
  ASSERT_TRUE(shared.ok());
  EXPECT_EQ(shared->size(), static_cast<size_t>(kThreads * kBatches));
}

// ------------------------------------------------------------------ InMemoryBackend only

TEST(InMemoryBackendTest, InjectedFailuresChangeNothing) {
  InMemoryBackend backend;
  const BackendTable t = backend.OpenTable("t").value();
  EMBER_ASSERT_OK(backend.Write({Put(t, "k", "v1")}));
  EXPECT_EQ(backend.DiskBytes(), 0);

  backend.FailWrites(true);
  EXPECT_EQ(backend.Write({Put(t, "k", "v2"), Put(t, "k2", "x")}).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(Get(backend, t, "k"), "v1");
  EXPECT_EQ(Get(backend, t, "k2"), std::nullopt);
  backend.FailWrites(false);

  backend.FailReads(true);
  std::vector<std::string> values;
  std::vector<bool> found;
  EXPECT_EQ(backend.MultiGet(t, {"k"}, &values, &found).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ScanRange(backend, t, "", "").status().code(), absl::StatusCode::kUnavailable);
  backend.FailReads(false);

  backend.FailWrites(true);
  EXPECT_EQ(backend.DeleteRange(t, "", "").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Get(backend, t, "k"), "v1");
  backend.FailWrites(false);

  EMBER_ASSERT_OK(backend.Write({Put(t, "k", "v3")}));
  EXPECT_EQ(Get(backend, t, "k"), "v3");
  EMBER_EXPECT_OK(backend.Flush());
}

TEST(InMemoryBackendTest, ScanCallbackMayCallBackIntoTheBackend) {
  InMemoryBackend backend;
  const BackendTable t = backend.OpenTable("t").value();
  EMBER_ASSERT_OK(backend.Write({Put(t, "a", "1"), Put(t, "b", "2")}));
  int seen = 0;
  EMBER_ASSERT_OK(backend.Scan(t, "", "", [&](std::string_view k, std::string_view) {
    ++seen;
    return Get(backend, t, std::string(k)).has_value();
  }));
  EXPECT_EQ(seen, 2);
}

}  // namespace
}  // namespace ember
