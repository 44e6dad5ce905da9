// Copyright 2026 The Ember Authors.
//
// RocksDbBackend's reopen after a write error (issue 28 section 4), on a real RocksDB
// over FaultInjectionFileSystem: Debian's librocksdb 7.8 aborts on a WAL append after a
// WAL write error if the database is resumed (facebook/rocksdb#12448), so the backend
// closes and opens it again instead. These tests run thousands of writes at a 2% fault
// rate (the process must not abort), check that every acknowledged write is there after
// a clean reopen, that reads during the faults fail only with UNAVAILABLE, and the same
// for an EmbeddingStore whose rows live in RocksDB.

#include <map>
#include <random>
#include <set>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "server/store/embedding_store.h"
#include "server/store/initializer.h"
#include "server/store/table_config.h"
#include "tests/server/store/row_backend_test_util.h"

namespace ember {
namespace {

using namespace ::ember::testutil;  // NOLINT: test helpers
using ::testing::ElementsAre;

// OK, or the retryable error the backend promises under disk faults.
bool OkOrRetryable(const absl::Status& s) {
  return s.ok() || s.code() == absl::StatusCode::kUnavailable;
}

class RocksDbReopenTest : public testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir(); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Small memtables, so flushes (SST writes, which fault too) happen during the run.
  RocksDbOptions Options(std::shared_ptr<rocksdb::FileSystem> fs) const {
    RocksDbOptions options = SmallRocksDbOptions(dir_ + "/db");
    options.write_buffer_bytes = 256 << 10;
    options.file_system = std::move(fs);
    // Every call may retry a failed reopen at once (the back-off has its own test).
    options.reopen_retry_interval = absl::ZeroDuration();
    return options;
  }

  std::string dir_;
};

// 10,000 writes at 2% write faults (and 0.5% read faults), with a reader thread beside
// them: no abort; writes and reads answer OK or UNAVAILABLE; after a clean reopen every
// acknowledged write reads back, and a key's value is its last acknowledged one or one
// of the failed writes after it (a failed write's outcome is unknown to its caller).
TEST_F(RocksDbReopenTest, TenThousandWritesAtTwoPercentFaultsLoseNoAcknowledgedRow) {
  auto fs = std::make_shared<FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  absl::StatusOr<std::unique_ptr<RocksDbBackend>> opened = RocksDbBackend::Open(Options(fs));
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::unique_ptr<RocksDbBackend> backend = std::move(*opened);
  const BackendTable t = backend->OpenTable("t").value();
  fs->SetFailureSeed(28);
  fs->SetWriteFailureRate(0.02);
  fs->SetReadFailureRate(0.005);

  constexpr int kWrites = 10000;
  constexpr int kHotKeys = 500;  // overwritten again and again
  // Per written key: the last acknowledged value, and failed values written after it.
  std::map<std::string, std::string> acked;
  std::map<std::string, std::set<std::string>> maybe;
  absl::Mutex mu;
  std::vector<std::string> acked_unique;  // under mu: the keys the reader thread reads
  std::atomic<bool> stop{false};
  std::atomic<int64_t> reads{0}, read_errors{0}, bad_reads{0};

  std::thread reader([&] {
    std::mt19937_64 rng(7);
    std::vector<std::string> keys, values;
    std::vector<bool> found;
    while (!stop.load()) {
      keys.clear();
      {
        absl::MutexLock lock(&mu);
        for (int i = 0; i < 16 && !acked_unique.empty(); ++i) {
          keys.push_back(acked_unique[rng() % acked_unique.size()]);
        }
      }
      absl::Status s = backend->MultiGet(t, keys, &values, &found);
      if (s.ok()) {
        for (size_t i = 0; i < keys.size(); ++i) {
          if (!found[i] || values[i] != keys[i]) bad_reads.fetch_add(1);
        }
      }
      if (rng() % 8 == 0) {
        s = backend->Scan(t, "u", "v", [](std::string_view, std::string_view) { return true; });
      }
      reads.fetch_add(1);
      if (!s.ok()) {
        read_errors.fetch_add(1);
        if (!OkOrRetryable(s)) {
          ADD_FAILURE() << "read failed with a non-retryable status: " << s;
          bad_reads.fetch_add(1);
        }
      }
    }
  });

  int ok = 0;
  int failed = 0;
  for (int i = 0; i < kWrites; ++i) {
    BackendWriteBatch batch;
    // Two keys only this write writes (value = key), two hot keys (value = write index).
    std::vector<std::string> unique = {absl::StrCat("u", i, "-a"), absl::StrCat("u", i, "-b")};
    for (const std::string& key : unique) batch.push_back(Put(t, key, key));
    const std::string hot[2] = {absl::StrCat("h", i % kHotKeys),
                                absl::StrCat("h", (i * 7 + 3) % kHotKeys)};
    for (const std::string& key : hot) batch.push_back(Put(t, key, absl::StrCat(i)));
    if (i % 1000 == 999) {
      (void)backend->Flush();  // syncs the WAL: another write-path call that can fail
    }
    const absl::Status s = backend->Write(batch);
    ASSERT_TRUE(OkOrRetryable(s)) << "write " << i << ": " << s;
    for (const BackendWrite& w : batch) {
      if (s.ok()) {
        acked[w.key] = w.value;
        maybe.erase(w.key);
      } else {
        maybe[w.key].insert(w.value);
      }
    }
    if (s.ok()) {
      ++ok;
      absl::MutexLock lock(&mu);
      acked_unique.insert(acked_unique.end(), unique.begin(), unique.end());
    } else {
      ++failed;
    }
  }
  stop.store(true);
  reader.join();

  EXPECT_GT(fs->injected_write_failures(), 0);
  EXPECT_GT(failed, 0);
  EXPECT_GT(backend->reopens(), 0);
  EXPECT_EQ(bad_reads.load(), 0);
  std::cout << "writes: " << ok << " acknowledged, " << failed << " failed; "
            << fs->injected_write_failures() << " write and " << fs->injected_read_failures()
            << " read faults injected; " << backend->reopens() << " reopens; " << reads.load()
            << " reads, " << read_errors.load() << " answered UNAVAILABLE\n";

  // A clean reopen: close, then open without the faulting file system.
  backend.reset();
  opened = RocksDbBackend::Open(Options(nullptr));
  ASSERT_TRUE(opened.ok()) << opened.status();
  backend = std::move(*opened);
  const BackendTable t2 = backend->OpenTable("t").value();
  int lost = 0;
  for (const auto& [key, value] : acked) {
    const std::optional<std::string> got = Get(*backend, t2, key);
    const auto it = maybe.find(key);
    const bool allowed =
        got == value || (got.has_value() && it != maybe.end() && it->second.count(*got) > 0);
    if (!allowed) {
      if (++lost <= 10) ADD_FAILURE() << key << ": want " << value << ", got " << got.value_or("-");
    }
  }
  EXPECT_EQ(lost, 0) << "of " << acked.size() << " acknowledged keys";
}

// Four writers at once under 2% write faults: while one reopens the database the others
// answer UNAVAILABLE (or wait for the lock); none aborts, none gets another code, and
// every acknowledged row is there after a clean reopen.
TEST_F(RocksDbReopenTest, ConcurrentWritersAtTwoPercentFaultsLoseNoAcknowledgedRow) {
  auto fs = std::make_shared<FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  std::unique_ptr<RocksDbBackend> backend = RocksDbBackend::Open(Options(fs)).value();
  const BackendTable t = backend->OpenTable("t").value();
  fs->SetFailureSeed(5);
  fs->SetWriteFailureRate(0.02);
  constexpr int kThreads = 4;
  constexpr int kWritesPerThread = 500;
  std::vector<std::vector<std::string>> acked(kThreads);
  std::atomic<int> failed{0}, reopening{0}, bad{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < kThreads; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < kWritesPerThread; ++i) {
        const std::string key = absl::StrCat("w", w, "-", i);
        const absl::Status s = backend->Write({Put(t, key, key)});
        if (s.ok()) {
          acked[w].push_back(key);
          continue;
        }
        failed.fetch_add(1);
        if (absl::StrContains(s.message(), "being reopened")) reopening.fetch_add(1);
        if (!OkOrRetryable(s)) {
          bad.fetch_add(1);
          ADD_FAILURE() << key << ": " << s;
        }
      }
    });
  }
  for (std::thread& writer : writers) writer.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(failed.load(), 0);
  std::cout << kThreads * kWritesPerThread << " writes from " << kThreads
            << " threads: " << failed.load() << " failed (" << reopening.load()
            << " while another reopened); " << backend->reopens() << " reopens\n";

  backend.reset();
  backend = RocksDbBackend::Open(Options(nullptr)).value();
  const BackendTable t2 = backend->OpenTable("t").value();
  int lost = 0;
  for (const std::vector<std::string>& keys : acked) {
    for (const std::string& key : keys) {
      if (Get(*backend, t2, key) != key && ++lost <= 10) ADD_FAILURE() << key << " lost";
    }
  }
  EXPECT_EQ(lost, 0);
}

// A Scan's callback may write to the backend, and that write may reopen the database:
// no deadlock, the write succeeds, and the scan ends with UNAVAILABLE (its snapshot went
// with the old database) instead of reading a different database half way.
TEST_F(RocksDbReopenTest, AWriteInsideAScanMayReopen) {
  auto fs = std::make_shared<FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  std::unique_ptr<RocksDbBackend> backend = RocksDbBackend::Open(Options(fs)).value();
  const BackendTable t = backend->OpenTable("t").value();
  BackendWriteBatch batch;
  for (int i = 0; i < 5000; ++i) batch.push_back(Put(t, absl::StrCat("k", 10000 + i), "v"));
  EMBER_ASSERT_OK(backend->Write(batch));

  fs->SetWriteFailure(true);
  EXPECT_EQ(backend->Write({Put(t, "x", "failed")}).code(), absl::StatusCode::kUnavailable);
  fs->SetWriteFailure(false);
  int seen = 0;
  absl::Status inner;
  const absl::Status scan = backend->Scan(t, "", "", [&](std::string_view, std::string_view) {
    if (seen++ == 0) inner = backend->Write({Put(t, "y", "after-reopen")});
    return true;
  });
  EMBER_EXPECT_OK(inner);
  EXPECT_EQ(backend->reopens(), 1);
  EXPECT_EQ(scan.code(), absl::StatusCode::kUnavailable) << scan;
  EXPECT_LT(seen, 5000);
  EXPECT_EQ(Get(*backend, t, "y"), "after-reopen");
  EXPECT_EQ(Get(*backend, t, "x"), std::nullopt);
  // A new scan sees everything.
  absl::StatusOr<KeyValues> all = ScanRange(*backend, t, "", "");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), 5001u);
}

// While the disk refuses writes, every reopen fails: the backend serves reads from a
// read-only open and answers writes UNAVAILABLE. When reads fail too, it is closed and
// every call answers UNAVAILABLE. Once the disk heals, the next call reopens it with
// every acknowledged row and the tables under the same handles.
TEST_F(RocksDbReopenTest, AFailedReopenServesReadsOnlyUntilTheDiskHeals) {
  auto fs = std::make_shared<FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  std::unique_ptr<RocksDbBackend> backend = RocksDbBackend::Open(Options(fs)).value();
  const BackendTable a = backend->OpenTable("a").value();
  const BackendTable b = backend->OpenTable("b").value();
  EMBER_ASSERT_OK(backend->Write({Put(a, "ka", "va"), Put(b, "kb", "vb")}));

  fs->SetWriteFailure(true);
  EXPECT_EQ(backend->Write({Put(a, "lost", "x")}).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Get(*backend, a, "ka"), "va");  // reads go on before the reopen
  const absl::Status reopen = backend->Write({Put(a, "lost", "x")});  // the reopen fails
  EXPECT_EQ(reopen.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(reopen.message()), testing::HasSubstr("reopen"));
  EXPECT_EQ(Get(*backend, a, "ka"), "va");  // from the read-only open
  EXPECT_EQ(Get(*backend, b, "kb"), "vb");
  EXPECT_EQ(backend->Flush().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(backend->OpenTable("new").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(backend->Property("rocksdb.stats"), "");

  fs->SetReadFailure(true);  // now the read-only open fails too
  EXPECT_EQ(backend->Write({Put(a, "lost", "x")}).code(), absl::StatusCode::kUnavailable);
  std::vector<std::string> values;
  std::vector<bool> found;
  const absl::Status closed = backend->MultiGet(a, {"ka"}, &values, &found);
  EXPECT_EQ(closed.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(closed.message()), testing::HasSubstr("closed"));
  EXPECT_EQ(backend->Property("rocksdb.stats"), "");
  EXPECT_EQ(backend->DiskBytes(), 0);
  EXPECT_EQ(backend->reopens(), 0);

  fs->SetWriteFailure(false);
  fs->SetReadFailure(false);
  EXPECT_EQ(Get(*backend, a, "ka"), "va");  // the read reopens it
  EXPECT_EQ(Get(*backend, b, "kb"), "vb");
  EXPECT_EQ(backend->reopens(), 1);
  EMBER_EXPECT_OK(backend->Write({Put(b, "kb2", "vb2")}));
  EXPECT_EQ(backend->OpenTable("b").value(), b);
  EXPECT_THAT(backend->ListTables(), ElementsAre("a", "b"));
  const BackendTable c = backend->OpenTable("c").value();
  EMBER_EXPECT_OK(backend->Write({Put(c, "kc", "vc")}));
  backend.reset();
  backend = RocksDbBackend::Open(Options(nullptr)).value();
  EXPECT_THAT(backend->ListTables(), ElementsAre("a", "b", "c"));
  EXPECT_EQ(Get(*backend, backend->OpenTable("b").value(), "kb2"), "vb2");
  EXPECT_EQ(Get(*backend, backend->OpenTable("a").value(), "lost"), std::nullopt);
}

// After a reopen whose every attempt failed, writes answer UNAVAILABLE at once, without
// another round of opens, until reopen_retry_interval has passed; reads go on from the
// read-only open meanwhile.
TEST_F(RocksDbReopenTest, AFailedReopenIsNotRetriedBeforeTheInterval) {
  auto fs = std::make_shared<FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  RocksDbOptions options = Options(fs);
  options.reopen_retry_interval = absl::Hours(1);
  std::unique_ptr<RocksDbBackend> backend = RocksDbBackend::Open(options).value();
  const BackendTable a = backend->OpenTable("a").value();
  EMBER_ASSERT_OK(backend->Write({Put(a, "ka", "va")}));

  fs->SetWriteFailure(true);
  EXPECT_EQ(backend->Write({Put(a, "lost", "x")}).code(), absl::StatusCode::kUnavailable);
  const absl::Status first = backend->Write({Put(a, "lost", "x")});  // the reopen fails
  EXPECT_THAT(std::string(first.message()), testing::HasSubstr("failed 8 times"));
  EXPECT_EQ(backend->failed_reopens(), 1);
  const int opens_failed = fs->injected_write_failures();
  fs->SetWriteFailure(false);  // healed, but the next try is an hour away
  for (int i = 0; i < 5; ++i) {
    const absl::Status later = backend->Write({Put(a, "lost", "x")});
    EXPECT_EQ(later.code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(std::string(later.message()), testing::HasSubstr("the next try is in"));
  }
  EXPECT_EQ(backend->failed_reopens(), 1);
  EXPECT_EQ(backend->reopens(), 0);
  EXPECT_EQ(fs->injected_write_failures(), opens_failed);  // no open was tried
  EXPECT_EQ(Get(*backend, a, "ka"), "va");                 // reads from the read-only open
}

// ------------------------------------------------------------------ the store above it

v1::TableConfig SgdTable(const std::string& name, uint32_t dim) {
  v1::TableConfig t;
  t.set_name(name);
  t.set_dim(dim);
  t.mutable_optimizer()->set_kind(v1::OptimizerConfig::SGD);
  t.mutable_optimizer()->set_learning_rate(0.5f);
  return t;
}

// An EmbeddingStore with a 1 MiB memory tier (most rows live in RocksDB) under 2% write
// faults and 0.5% read faults: pushes answer OK, UNAVAILABLE (a row could not be read)
// or RESOURCE_EXHAUSTED (write-backs failed and the tier is full), all-or-nothing; after
// the faults stop and a clean reopen, every row has exactly its acknowledged pushes.
TEST_F(RocksDbReopenTest, StoreUnderTwoPercentFaultsLosesNoAcknowledgedPush) {
  auto fs = std::make_shared<FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  const v1::TableConfig config = SgdTable("t", 16);
  auto open_store = [&](std::shared_ptr<rocksdb::FileSystem> file_system) {
    return EmbeddingStore::Open(StoreOptions{.memory_budget_bytes = 1 << 20, .num_stripes = 8},
                                RocksDbBackend::Open(Options(std::move(file_system))).value())
        .value();
  };
  constexpr uint64_t kIds = 40000;  // about 5 MiB of rows: 5x the memory tier
  constexpr int kPushes = 6000;
  constexpr int kIdsPerPush = 32;
  std::vector<int> acked(kIds, 0);
  int ok = 0, unavailable = 0, exhausted = 0;
  {
    std::unique_ptr<EmbeddingStore> store = open_store(fs);
    ASSERT_TRUE(store->CreateTable(config).ok());
    fs->SetFailureSeed(4);
    fs->SetWriteFailureRate(0.02);
    fs->SetReadFailureRate(0.005);
    std::mt19937_64 rng(11);
    for (int p = 0; p < kPushes; ++p) {
      std::set<uint64_t> unique;
      while (unique.size() < kIdsPerPush) unique.insert(rng() % kIds);
      const std::vector<uint64_t> ids(unique.begin(), unique.end());
      const absl::Status s =
          store->Push("t", ids, std::vector<float>(ids.size() * 16, 0.125f), p + 1);
      if (s.ok()) {
        ++ok;
        for (uint64_t id : ids) ++acked[id];
      } else if (s.code() == absl::StatusCode::kUnavailable) {
        ++unavailable;
      } else {
        ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
        ++exhausted;
      }
    }
    fs->SetWriteFailureRate(0);
    fs->SetReadFailureRate(0);
    std::cout << "pushes: " << ok << " OK, " << unavailable << " UNAVAILABLE, " << exhausted
              << " RESOURCE_EXHAUSTED; " << store->Stats().writeback_errors
              << " failed write-backs; " << fs->injected_write_failures() << " write and "
              << fs->injected_read_failures() << " read faults injected\n";
    EXPECT_GT(ok, kPushes / 2);
    EXPECT_GT(store->Stats().writeback_errors, 0u);
    // The first write-path call after the faults may still meet a failed reopen.
    absl::Status flushed = store->Flush();
    for (int i = 0; i < 5 && !flushed.ok(); ++i) flushed = store->Flush();
    ASSERT_TRUE(flushed.ok()) << flushed;
    ASSERT_TRUE(store->Close().ok());
  }
  std::unique_ptr<EmbeddingStore> store = open_store(nullptr);
  ASSERT_TRUE(store->CreateTable(config).ok());
  int wrong = 0;
  for (uint64_t id = 0; id < kIds; ++id) {
    const RowSnapshot row = store->ReadRow("t", id).value();
    const float want = static_cast<float>(acked[id]);
    if (row.meta.count != want || (acked[id] > 0 && !row.stored)) {
      if (++wrong <= 10) {
        ADD_FAILURE() << "id " << id << ": " << acked[id] << " acknowledged pushes, count "
                      << row.meta.count << (row.stored ? "" : " (not stored)");
      }
    }
  }
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace ember
