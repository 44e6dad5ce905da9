// Copyright 2026 The Ember Authors.
//
// RocksDbBackend beyond the shared contract: option checks, compression, durability with
// the WAL off, and fault injection (write, read and fatal WAL faults), plus the
// rocksdb::Status -> absl::Status mapping.

#include "tests/server/store/row_backend_test_util.h"

namespace ember {
namespace {

using namespace ::ember::testutil;  // NOLINT: test helpers
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

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

  // A "crash": a copy of the database directory taken while the backend is still open,
  // with no clean close, opened as a database of its own.
  std::unique_ptr<RocksDbBackend> OpenCrashCopy(const RocksDbOptions& options) {
    const std::string crashed = dir_ + "/crashed";
    std::error_code ec;
    std::filesystem::copy(options.path, crashed, std::filesystem::copy_options::recursive, ec);
    EXPECT_FALSE(ec) << ec.message();
    RocksDbOptions crashed_options = options;
    crashed_options.path = crashed;
    return MustOpen(crashed_options);
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

  std::unique_ptr<RocksDbBackend> recovered = OpenCrashCopy(options);
  EMBER_ASSERT_OK(WriteRows(*backend, a, "unflushed", 10));
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

// DeleteRange drops the files wholly inside the range at once, so its tombstone must be
// durable before it returns: with the WAL off, a crash right after it (no Flush) must
// not bring back rows of the range that sit in files it kept.
TEST_F(RocksDbBackendTest, WalDisabledDeleteRangeIsDurableWithoutAFlush) {
  RocksDbOptions options = Options();
  options.enable_wal = false;
  std::unique_ptr<RocksDbBackend> backend = MustOpen(options);
  ASSERT_NE(backend, nullptr);
  const BackendTable a = backend->OpenTable("a").value();
  // "k..." straddles the range's start ("m"), "m..." lies inside it, "z..." after it.
  EMBER_ASSERT_OK(WriteRows(*backend, a, "k", 50));
  EMBER_ASSERT_OK(WriteRows(*backend, a, "m", 50));
  EMBER_ASSERT_OK(backend->Flush());
  EMBER_ASSERT_OK(WriteRows(*backend, a, "m-late", 20));  // in the memtable
  EMBER_ASSERT_OK(WriteRows(*backend, a, "z", 50));
  EMBER_ASSERT_OK(backend->Flush());
  EMBER_ASSERT_OK(backend->DeleteRange(a, "m", "n"));

  std::unique_ptr<RocksDbBackend> recovered = OpenCrashCopy(options);
  ASSERT_NE(recovered, nullptr);
  const BackendTable ra = recovered->OpenTable("a").value();
  EXPECT_EQ(CountRows(*recovered, ra, "k", 50), 50);
  EXPECT_EQ(CountRows(*recovered, ra, "m", 50), 0);
  EXPECT_EQ(CountRows(*recovered, ra, "m-late", 20), 0);
  EXPECT_EQ(CountRows(*recovered, ra, "z", 50), 50);
}

TEST_F(RocksDbBackendTest, WriteFaultsFailCleanlyAndRecover) {
  auto fs = std::make_shared<FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  RocksDbOptions options = Options();
  options.file_system = fs;
  // The first write after the disk heals reopens at once: without this, one within
  // reopen_retry_interval of the failed reopen below is refused (rocksdb_reopen_test
  // pins that back-off).
  options.reopen_retry_interval = absl::ZeroDuration();
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
  EMBER_ASSERT_OK(WriteRows(*backend, a, "after", 20));  // reopens first
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

// A non-retryable error on the WAL is fatal for RocksDB: no Resume() clears it. The
// backend reopens the database on the next write instead, which recovers every acked
// write (rocksdb_reopen_test.cc covers the reopen under a fault rate).
TEST_F(RocksDbBackendTest, FatalWriteFaultIsClearedByAReopen) {
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
  EXPECT_EQ(CountRows(*backend, t, "acked", 30), 30);  // reads go on meanwhile
  fs->SetWriteFailure(false);
  EMBER_EXPECT_OK(WriteRows(*backend, t, "after-reopen", 30));
  EXPECT_EQ(backend->reopens(), 1);
  EXPECT_EQ(CountRows(*backend, t, "acked", 30), 30);
  EXPECT_EQ(CountRows(*backend, t, "failed", 30), 0);

  backend.reset();
  backend = MustOpen(options);
  ASSERT_NE(backend, nullptr);
  const BackendTable t2 = backend->OpenTable("t").value();
  EXPECT_EQ(CountRows(*backend, t2, "acked", 30), 30);
  EXPECT_EQ(CountRows(*backend, t2, "failed", 30), 0);
  EXPECT_EQ(CountRows(*backend, t2, "after-reopen", 30), 30);
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

// --memory_limit_mb's RocksDB share: with a write buffer manager the memtables are
// charged to the block cache (its usage grows with unflushed writes, before any read).
TEST_F(RocksDbBackendTest, WriteBufferManagerChargesMemtablesToTheBlockCache) {
  RocksDbOptions options = Options();
  options.enable_wal = false;
  options.block_cache_bytes = int64_t{16} << 20;
  options.write_buffer_bytes = int64_t{4} << 20;
  options.write_buffer_manager_bytes = int64_t{8} << 20;
  options.cache_index_and_filter_blocks = true;
  std::unique_ptr<RocksDbBackend> backend = MustOpen(options);
  ASSERT_NE(backend, nullptr);
  const BackendTable t = backend->OpenTable("t").value();
  BackendWriteBatch batch;
  for (uint64_t id = 0; id < 10000; ++id) batch.push_back(Put(t, RowKey(1, id), RowValue(id)));
  EMBER_ASSERT_OK(backend->Write(batch));
  uint64_t usage = 0;
  ASSERT_TRUE(backend->db()->GetIntProperty(rocksdb::DB::Properties::kBlockCacheUsage, &usage));
  // The write buffer manager reserves cache in 1 MiB dummy entries.
  EXPECT_GE(usage, uint64_t{1} << 20);
  std::vector<std::string> values;
  std::vector<bool> found;
  EMBER_ASSERT_OK(backend->MultiGet(t, {RowKey(1, 5)}, &values, &found));
  EXPECT_TRUE(found[0]);
}

}  // namespace
}  // namespace ember
