// Copyright 2026 The Ember Authors.
//
// The RowBackend contract test: one body run against every backend (RocksDbBackend on a
// real temporary directory, InMemoryBackend), then backend-specific tests: RocksDB
// durability and fault injection, InMemoryBackend's injected failures.

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/slot.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rocksdb/file_system.h"
#include "rocksdb/io_status.h"
#include "server/fault_injection_fs.h"
#include "server/in_memory_backend.h"
#include "server/rocksdb_backend.h"
#include "server/rocksdb_status.h"
#include "server/row_backend.h"
#include "server/row_layout.h"

namespace ember {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;
using KeyValues = std::vector<std::pair<std::string, std::string>>;

#define EMBER_ASSERT_OK(expr)                    \
  do {                                           \
    const ::absl::Status s_ = (expr);            \
    ASSERT_TRUE(s_.ok()) << #expr << ": " << s_; \
  } while (0)
#define EMBER_EXPECT_OK(expr)                    \
  do {                                           \
    const ::absl::Status s_ = (expr);            \
    EXPECT_TRUE(s_.ok()) << #expr << ": " << s_; \
  } while (0)

// ----------------------------------------------------------------------------- helpers

// A fresh directory under testing::TempDir(), unique per process and test.
std::string MakeTempDir() {
  static std::atomic<int> counter{0};
  const testing::TestInfo* info = testing::UnitTest::GetInstance()->current_test_info();
  std::string name = absl::StrCat(info->test_suite_name(), "_", info->name());
  std::replace(name.begin(), name.end(), '/', '_');
  const std::filesystem::path dir =
      std::filesystem::path(testing::TempDir()) /
      absl::StrCat("ember_row_backend_", getpid(), "_", counter.fetch_add(1), "_", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

BackendWrite Put(BackendTable table, std::string key, std::string value) {
  return BackendWrite{table, std::move(key), std::move(value), /*erase=*/false};
}

BackendWrite Erase(BackendTable table, std::string key) {
  return BackendWrite{table, std::move(key), "", /*erase=*/true};
}

// The value of `key`, nullopt if absent; fails the test on a lookup error.
std::optional<std::string> Get(RowBackend& backend, BackendTable table, const std::string& key) {
  std::vector<std::string> values;
  std::vector<bool> found;
  const absl::Status s = backend.MultiGet(table, {key}, &values, &found);
  EXPECT_TRUE(s.ok()) << s;
  if (!s.ok() || !found[0]) return std::nullopt;
  return values[0];
}

absl::StatusOr<KeyValues> ScanRange(RowBackend& backend, BackendTable table, std::string_view begin,
                                    std::string_view end, size_t limit = SIZE_MAX) {
  KeyValues out;
  absl::Status s = backend.Scan(table, begin, end, [&](std::string_view k, std::string_view v) {
    out.emplace_back(std::string(k), std::string(v));
    return out.size() < limit;
  });
  if (!s.ok()) return s;
  return out;
}

// A full embedding row (meta + 8 floats + 8 state floats) whose bytes depend on `seed`.
std::string RowValue(uint64_t seed) {
  std::string row(RowBytes(16), '\0');
  RowMeta meta;
  meta.version = seed;
  meta.last_seen_step = static_cast<int64_t>(seed * 7);
  meta.count = static_cast<float>(seed % 1000);
  std::memcpy(row.data(), &meta, sizeof(meta));
  for (size_t i = 0; i < 16; ++i) {
    const float f = static_cast<float>(seed) * 0.001f + static_cast<float>(i);
    std::memcpy(row.data() + sizeof(meta) + i * sizeof(float), &f, sizeof(f));
  }
  return row;
}

RocksDbOptions SmallRocksDbOptions(const std::string& path) {
  RocksDbOptions options;
  options.path = path;
  options.block_cache_bytes = 8 << 20;
  options.write_buffer_bytes = 8 << 20;
  return options;
}

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

// -------------------------------------------------------------------- FromRocksDb mapping

TEST(RocksDbStatusTest, MapsEveryDocumentedCode) {
  EXPECT_TRUE(FromRocksDb(rocksdb::Status::OK(), "ctx").ok());
  const std::pair<rocksdb::Status, absl::StatusCode> cases[] = {
      {rocksdb::Status::NotFound("x"), absl::StatusCode::kNotFound},
      {rocksdb::Status::Corruption("x"), absl::StatusCode::kDataLoss},
      {rocksdb::Status::InvalidArgument("x"), absl::StatusCode::kInvalidArgument},
      {rocksdb::Status::IOError("x"), absl::StatusCode::kUnavailable},
      {rocksdb::Status::Incomplete("x"), absl::StatusCode::kUnavailable},
      {rocksdb::Status::TimedOut("x"), absl::StatusCode::kUnavailable},
      {rocksdb::Status::Busy("x"), absl::StatusCode::kUnavailable},
      {rocksdb::Status::TryAgain("x"), absl::StatusCode::kUnavailable},
      {rocksdb::Status::NoSpace("x"), absl::StatusCode::kResourceExhausted},
      {rocksdb::Status::SpaceLimit("x"), absl::StatusCode::kResourceExhausted},
      {rocksdb::Status::NotSupported("x"), absl::StatusCode::kInternal},
      {rocksdb::Status::Aborted("x"), absl::StatusCode::kInternal},
      {rocksdb::IOStatus::IOError("x"), absl::StatusCode::kUnavailable},
  };
  for (const auto& [in, code] : cases) {
    const absl::Status out = FromRocksDb(in, "while testing");
    EXPECT_EQ(out.code(), code) << in.ToString();
    EXPECT_THAT(std::string(out.message()), testing::HasSubstr("while testing"));
    EXPECT_THAT(std::string(out.message()), testing::HasSubstr(in.ToString()));
  }
}

// -------------------------------------------------------------------- RocksDbBackend only

class RocksDbBackendTest : public testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir(); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  RocksDbOptions Options() const { return SmallRocksDbOptions(dir_ + "/db"); }

  static std::unique_ptr<RocksDbBackend> MustOpen(const RocksDbOptions& options) {
    absl::StatusOr<std::unique_ptr<RocksDbBackend>> backend = RocksDbBackend::Open(options);
    EXPECT_TRUE(backend.ok()) << backend.status();
    return backend.ok() ? std::move(*backend) : nullptr;
  }

  // Writes rows `prefix`0 .. `prefix`(n-1) to `table` in one batch.
  static absl::Status WriteRows(RowBackend& backend, BackendTable table, const std::string& prefix,
                                int n) {
    BackendWriteBatch batch;
    for (int i = 0; i < n; ++i) batch.push_back(Put(table, absl::StrCat(prefix, i), prefix));
    return backend.Write(batch);
  }

  // Number of rows `prefix`0 .. `prefix`(n-1) present in `table`.
  static int CountRows(RowBackend& backend, BackendTable table, const std::string& prefix, int n) {
    std::vector<std::string> keys;
    for (int i = 0; i < n; ++i) keys.push_back(absl::StrCat(prefix, i));
    std::vector<std::string> values;
    std::vector<bool> found;
    const absl::Status s = backend.MultiGet(table, keys, &values, &found);
    EXPECT_TRUE(s.ok()) << s;
    return static_cast<int>(std::count(found.begin(), found.end(), true));
  }

  std::string dir_;
};

TEST_F(RocksDbBackendTest, OpenValidatesOptions) {
  RocksDbOptions options = Options();
  options.path = "";
  EXPECT_EQ(RocksDbBackend::Open(options).status().code(), absl::StatusCode::kInvalidArgument);

  options = Options();
  options.create_if_missing = false;
  EXPECT_EQ(RocksDbBackend::Open(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RocksDbBackendTest, SecondOpenOfALockedDatabaseFails) {
  std::unique_ptr<RocksDbBackend> first = MustOpen(Options());
  ASSERT_NE(first, nullptr);
  absl::StatusOr<std::unique_ptr<RocksDbBackend>> second = RocksDbBackend::Open(Options());
  EXPECT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
}

TEST_F(RocksDbBackendTest, ReservedColumnFamilyNamesAreNotTables) {
  std::unique_ptr<RocksDbBackend> backend = MustOpen(Options());
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(backend->OpenTable("default").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend->OpenTable("__ember_meta").status().code(), absl::StatusCode::kInvalidArgument);
  EMBER_ASSERT_OK(backend->Write({Put(kMetaTable, "k", "v")}));
  backend.reset();
  backend = MustOpen(Options());
  EXPECT_THAT(backend->ListTables(), IsEmpty());
  EXPECT_EQ(Get(*backend, kMetaTable, "k"), "v");
}

TEST_F(RocksDbBackendTest, EveryCompressionRoundTrips) {
  for (RocksDbCompression c : {RocksDbCompression::kNone, RocksDbCompression::kLz4,
                               RocksDbCompression::kZstd, RocksDbCompression::kSnappy}) {
    SCOPED_TRACE(static_cast<int>(c));
    RocksDbOptions options = Options();
    options.path = absl::StrCat(dir_, "/db", static_cast<int>(c));
    options.compression = c;
    options.enable_wal = false;
    std::unique_ptr<RocksDbBackend> backend = MustOpen(options);
    ASSERT_NE(backend, nullptr);
    const BackendTable t = backend->OpenTable("t").value();
    EMBER_ASSERT_OK(backend->Write({Put(t, RowKey(3, 3), RowValue(3))}));
    EMBER_ASSERT_OK(backend->Flush());
    backend.reset();
    backend = MustOpen(options);
    EXPECT_EQ(Get(*backend, backend->OpenTable("t").value(), RowKey(3, 3)), RowValue(3));
  }
}

TEST_F(RocksDbBackendTest, DiskBytesAndProperties) {
  RocksDbOptions options = Options();
  options.enable_wal = false;
  std::unique_ptr<RocksDbBackend> backend = MustOpen(options);
  ASSERT_NE(backend, nullptr);
  ASSERT_NE(backend->db(), nullptr);
  const BackendTable t = backend->OpenTable("t").value();
  BackendWriteBatch batch;
  for (uint64_t id = 0; id < 1000; ++id) batch.push_back(Put(t, RowKey(1, id), RowValue(id)));
  EMBER_ASSERT_OK(backend->Write(batch));
  EMBER_ASSERT_OK(backend->Flush());
  EXPECT_GT(backend->DiskBytes(), 0);
  EXPECT_THAT(backend->Property("rocksdb.stats"), testing::HasSubstr("Compaction Stats"));
  EXPECT_EQ(backend->Property("rocksdb.no-such-property"), "");
}

// With the WAL off, Flush() alone must make writes survive a crash. The "crash" is a copy
// of the database directory taken while the backend is still open, with no clean close.
TEST_F(RocksDbBackendTest, WalDisabledFlushSurvivesCrash) {
  RocksDbOptions options = Options();
  options.enable_wal = false;
  std::unique_ptr<RocksDbBackend> backend = MustOpen(options);
  ASSERT_NE(backend, nullptr);
  const BackendTable a = backend->OpenTable("a").value();
  const BackendTable b = backend->OpenTable("b").value();
  EMBER_ASSERT_OK(WriteRows(*backend, a, "flushed", 100));
  EMBER_ASSERT_OK(backend->Write({Put(b, "x", "1"), Put(kMetaTable, "version", "1")}));
  EMBER_ASSERT_OK(backend->Flush());

  const std::string crashed = dir_ + "/crashed";
  std::error_code ec;
  std::filesystem::copy(options.path, crashed, std::filesystem::copy_options::recursive, ec);
  ASSERT_FALSE(ec) << ec.message();
  EMBER_ASSERT_OK(WriteRows(*backend, a, "unflushed", 10));

  RocksDbOptions crashed_options = options;
  crashed_options.path = crashed;
  std::unique_ptr<RocksDbBackend> recovered = MustOpen(crashed_options);
  ASSERT_NE(recovered, nullptr);
  EXPECT_THAT(recovered->ListTables(), ElementsAre("a", "b"));
  const BackendTable ra = recovered->OpenTable("a").value();
  EXPECT_EQ(CountRows(*recovered, ra, "flushed", 100), 100);
  EXPECT_EQ(CountRows(*recovered, ra, "unflushed", 10), 0);
  EXPECT_EQ(Get(*recovered, recovered->OpenTable("b").value(), "x"), "1");
  EXPECT_EQ(Get(*recovered, kMetaTable, "version"), "1");

  // A clean close keeps everything, flushed or not.
  backend.reset();
  backend = MustOpen(options);
  const BackendTable a2 = backend->OpenTable("a").value();
  EXPECT_EQ(CountRows(*backend, a2, "flushed", 100), 100);
  EXPECT_EQ(CountRows(*backend, a2, "unflushed", 10), 10);
}

TEST_F(RocksDbBackendTest, WriteFaultsFailCleanlyAndRecover) {
  auto fs = std::make_shared<FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  RocksDbOptions options = Options();
  options.file_system = fs;
  std::unique_ptr<RocksDbBackend> backend = MustOpen(options);
  ASSERT_NE(backend, nullptr);
  const BackendTable a = backend->OpenTable("a").value();
  const BackendTable b = backend->OpenTable("b").value();
  EMBER_ASSERT_OK(WriteRows(*backend, a, "acked", 50));

  fs->SetWriteFailure(true);
  BackendWriteBatch failed = {Put(a, "failed0", "x"), Put(b, "failed1", "x"),
                              Put(kMetaTable, "failed2", "x"), Erase(a, "acked0")};
  const absl::Status first = backend->Write(failed);
  EXPECT_FALSE(first.ok());
  EXPECT_EQ(first.code(), absl::StatusCode::kUnavailable) << first;
  EXPECT_GT(fs->injected_write_failures(), 0);
  // The database is read-only now, but still serves what it acknowledged.
  EXPECT_FALSE(WriteRows(*backend, a, "failed-again", 5).ok());
  EXPECT_FALSE(backend->Flush().ok());
  EXPECT_EQ(CountRows(*backend, a, "acked", 50), 50);
  EXPECT_EQ(Get(*backend, a, "failed0"), std::nullopt);
  EXPECT_EQ(Get(*backend, b, "failed1"), std::nullopt);

  fs->SetWriteFailure(false);
  EMBER_ASSERT_OK(WriteRows(*backend, a, "after", 20));  // resumes first
  EMBER_ASSERT_OK(backend->Write({Put(b, "after-b", "y")}));
  EMBER_ASSERT_OK(backend->Flush());

  backend.reset();
  backend = MustOpen(options);
  ASSERT_NE(backend, nullptr);
  const BackendTable a2 = backend->OpenTable("a").value();
  const BackendTable b2 = backend->OpenTable("b").value();
  EXPECT_EQ(CountRows(*backend, a2, "acked", 50), 50);
  EXPECT_EQ(CountRows(*backend, a2, "after", 20), 20);
  EXPECT_EQ(CountRows(*backend, a2, "failed-again", 5), 0);
  EXPECT_EQ(Get(*backend, a2, "failed0"), std::nullopt);
  EXPECT_EQ(Get(*backend, b2, "failed1"), std::nullopt);
  EXPECT_EQ(Get(*backend, kMetaTable, "failed2"), std::nullopt);
  EXPECT_EQ(Get(*backend, b2, "after-b"), "y");
}

// With the WAL off, a fault hits the memtable flush instead of the write.
TEST_F(RocksDbBackendTest, WalDisabledFlushFaultRecovers) {
  auto fs = std::make_shared<FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  RocksDbOptions options = Options();
  options.file_system = fs;
  options.enable_wal = false;
  std::unique_ptr<RocksDbBackend> backend = MustOpen(options);
  ASSERT_NE(backend, nullptr);
  const BackendTable t = backend->OpenTable("t").value();
  EMBER_ASSERT_OK(WriteRows(*backend, t, "acked", 40));

  fs->SetWriteFailure(true);
  EXPECT_FALSE(backend->Flush().ok());
  // The failed flush stopped the database; writes are refused until it resumes.
  EXPECT_FALSE(WriteRows(*backend, t, "refused", 40).ok());
  EXPECT_EQ(CountRows(*backend, t, "acked", 40), 40);

  fs->SetWriteFailure(false);
  EMBER_ASSERT_OK(backend->Flush());
  EMBER_ASSERT_OK(WriteRows(*backend, t, "after", 40));
  EMBER_ASSERT_OK(backend->Flush());

  backend.reset();
  backend = MustOpen(options);
  ASSERT_NE(backend, nullptr);
  const BackendTable t2 = backend->OpenTable("t").value();
  EXPECT_EQ(CountRows(*backend, t2, "acked", 40), 40);
  EXPECT_EQ(CountRows(*backend, t2, "refused", 40), 0);
  EXPECT_EQ(CountRows(*backend, t2, "after", 40), 40);
}

// A non-retryable error on the WAL is fatal for RocksDB: no Resume() clears it. Writes
// keep failing (without crashing) until a reopen, which recovers every acked write.
TEST_F(RocksDbBackendTest, FatalWriteFaultNeedsReopen) {
  auto fs = std::make_shared<FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  fs->SetRetryableErrors(false);
  RocksDbOptions options = Options();
  options.file_system = fs;
  std::unique_ptr<RocksDbBackend> backend = MustOpen(options);
  ASSERT_NE(backend, nullptr);
  const BackendTable t = backend->OpenTable("t").value();
  EMBER_ASSERT_OK(WriteRows(*backend, t, "acked", 30));

  fs->SetWriteFailure(true);
  EXPECT_FALSE(WriteRows(*backend, t, "failed", 30).ok());
  fs->SetWriteFailure(false);
  EXPECT_FALSE(WriteRows(*backend, t, "still-failing", 30).ok());
  EXPECT_EQ(CountRows(*backend, t, "acked", 30), 30);

  backend.reset();
  backend = MustOpen(options);
  ASSERT_NE(backend, nullptr);
  const BackendTable t2 = backend->OpenTable("t").value();
  EXPECT_EQ(CountRows(*backend, t2, "acked", 30), 30);
  EXPECT_EQ(CountRows(*backend, t2, "failed", 30), 0);
  EXPECT_EQ(CountRows(*backend, t2, "still-failing", 30), 0);
  EMBER_EXPECT_OK(WriteRows(*backend, t2, "after-reopen", 30));
}

// Destroying the backend while the disk still fails must not abort, with the WAL on or
// off; a later open on a healthy disk recovers what was durable.
TEST_F(RocksDbBackendTest, CloseWhileDiskFailsDoesNotAbort) {
  for (bool wal : {true, false}) {
    SCOPED_TRACE(wal ? "wal on" : "wal off");
    auto fs = std::make_shared<FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
    RocksDbOptions options = Options();
    options.path = absl::StrCat(dir_, "/db_wal", wal);
    options.file_system = fs;
    options.enable_wal = wal;
    std::unique_ptr<RocksDbBackend> backend = MustOpen(options);
    ASSERT_NE(backend, nullptr);
    const BackendTable t = backend->OpenTable("t").value();
    EMBER_ASSERT_OK(WriteRows(*backend, t, "durable", 20));
    EMBER_ASSERT_OK(backend->Flush());
    fs->SetWriteFailure(true);
    (void)WriteRows(*backend, t, "maybe", 20);  // fails with the WAL on, not without it
    (void)backend->Flush();
    backend.reset();  // closes with the disk still failing
    fs->SetWriteFailure(false);

    backend = MustOpen(options);
    ASSERT_NE(backend, nullptr);
    const BackendTable t2 = backend->OpenTable("t").value();
    EXPECT_EQ(CountRows(*backend, t2, "durable", 20), 20);
    const int maybe = CountRows(*backend, t2, "maybe", 20);
    EXPECT_TRUE(maybe == 0 || maybe == 20) << maybe;  // never half a batch
  }
}

TEST_F(RocksDbBackendTest, ReadFaultsSurfaceAsErrors) {
  auto fs = std::make_shared<FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  RocksDbOptions options = Options();
  options.file_system = fs;
  options.enable_wal = false;  // so Flush() writes SST files
  std::unique_ptr<RocksDbBackend> backend = MustOpen(options);
  ASSERT_NE(backend, nullptr);
  BackendTable t = backend->OpenTable("t").value();
  BackendWriteBatch batch;
  for (uint64_t id = 0; id < 2000; ++id) batch.push_back(Put(t, RowKey(4, id), RowValue(id)));
  EMBER_ASSERT_OK(backend->Write(batch));
  EMBER_ASSERT_OK(backend->Flush());
  backend.reset();
  backend = MustOpen(options);  // cold block cache, empty memtables
  ASSERT_NE(backend, nullptr);
  t = backend->OpenTable("t").value();

  fs->SetReadFailure(true);
  std::vector<std::string> keys = {RowKey(4, 1), RowKey(4, 1500)};
  std::vector<std::string> values;
  std::vector<bool> found;
  const absl::Status get = backend->MultiGet(t, keys, &values, &found);
  EXPECT_FALSE(get.ok());
  EXPECT_EQ(get.code(), absl::StatusCode::kUnavailable) << get;
  EXPECT_FALSE(ScanRange(*backend, t, SlotBeginKey(4), SlotEndKey(4)).ok());
  EXPECT_GT(fs->injected_read_failures(), 0);

  fs->SetReadFailure(false);
  EMBER_ASSERT_OK(backend->MultiGet(t, keys, &values, &found));
  EXPECT_THAT(found, ElementsAre(true, true));
  EXPECT_EQ(values[1], RowValue(1500));
  absl::StatusOr<KeyValues> scanned = ScanRange(*backend, t, SlotBeginKey(4), SlotEndKey(4));
  ASSERT_TRUE(scanned.ok()) << scanned.status();
  EXPECT_EQ(scanned->size(), 2000u);
}

}  // namespace
}  // namespace ember
