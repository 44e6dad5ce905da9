// Copyright 2026 The Ember Authors.
//
// RocksDbBackend: the production RowBackend, one RocksDB database per shard.
//
// Each table is a column family named after the table; the meta space (kMetaTable) is
// the column family "__ember_meta". All column families share one LRU block cache and
// use full-key bloom filters, so a MultiGet of absent IDs rarely touches the disk.
//
//   RocksDbOptions options;
//   options.path = "/data/ember/shard-3";
//   EMBER_ASSIGN_OR_RETURN(std::unique_ptr<RocksDbBackend> backend,
//                          RocksDbBackend::Open(options));
//   EMBER_ASSIGN_OR_RETURN(BackendTable t, backend->OpenTable("user_id"));
//   EMBER_RETURN_IF_ERROR(backend->Write({{t, RowKey(slot, id), row_bytes}}));
//
// Errors: every rocksdb::Status is translated by FromRocksDb (rocksdb_status.h). After a
// failed write RocksDB stops accepting writes (a "background error"). With the WAL on,
// the next write-path call (Write, DeleteRange, Flush, CreateCheckpoint, OpenTable of a
// new table) closes the database and opens it again (same path, column families, options
// and file system) instead of calling DB::Resume(): Debian's librocksdb 7.8 keeps its
// assertions, and Resume() after a failed WAL append can leave the next write appending
// to the WAL writer that saw the error, which aborts the process (facebook/rocksdb#12448).
// The reopen replays the WAL, so every acknowledged write survives it. With the WAL off,
// DB::Resume() is used as before (a reopen would drop the unflushed memtables, which
// readers still expect to see). The measurements are in docs/RELIABILITY.md ("Disk
// faults under a training job").
//
// While the database is being reopened: reads wait for it (a reopen is a close and an
// open, well under a second; up to kReopenAttempts opens with short pauses when the
// disk keeps failing); writes answer UNAVAILABLE ("... is being reopened after a write
// error; retry"). If every attempt fails, the backend opens the database read-only
// (which writes nothing): reads go on, writes answer UNAVAILABLE, and the first write
// after reopen_retry_interval (1 s) tries the reopen again. Only when that open fails too is the
// backend closed (every call answers UNAVAILABLE and the next call tries again).
//
// Thread-safety: every method may be called concurrently (see row_backend.h). Every use
// of the database and its column-family handles holds db_mu_ shared; a reopen holds it
// exclusively. Scan does not hold it while calling its callback (which may write to
// this backend): it reads in chunks from one RocksDB snapshot, and a reopen between two
// chunks ends the scan with UNAVAILABLE.

#ifndef EMBER_SERVER_STORE_ROCKSDB_BACKEND_H_
#define EMBER_SERVER_STORE_ROCKSDB_BACKEND_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "rocksdb/options.h"
#include "server/store/row_backend.h"

namespace ember {

enum class RocksDbCompression { kNone, kLz4, kZstd, kSnappy };

// Options of RocksDbBackend::Open. None can be changed after Open.
struct RocksDbOptions {
  // Directory of the database. Required.
  std::string path;

  // Creates the database if `path` holds none; otherwise Open fails on a missing one.
  // Ignored when read_only.
  // Default: true
  bool create_if_missing = true;

  // Opens an existing database (e.g. a checkpoint) without ever writing to its
  // directory: no lock file, no info log, no recovery writes. Write, Flush and
  // OpenTable of a table the database lacks return FAILED_PRECONDITION.
  // Default: false
  bool read_only = false;

  // Logs every write to the write-ahead log. When false, writes skip the WAL (faster)
  // and are durable only after Flush(), which then flushes all memtables atomically;
  // a crash loses writes since the last Flush() but never splits a batch.
  // Default: true
  bool enable_wal = true;

  // fsyncs the WAL on every write (survives machine crashes, not only process crashes).
  // Ignored when enable_wal is false.
  // Default: false
  bool sync_writes = false;

  // Capacity of the LRU block cache shared by all column families; 0 disables it.
  // Default: 256 MiB
  int64_t block_cache_bytes = int64_t{256} << 20;

  // Memtable size per column family before it is flushed to an SST file.
  // Default: 64 MiB
  int64_t write_buffer_bytes = int64_t{64} << 20;

  // Memtables per column family (one active, the rest waiting to be flushed) before
  // writes stall.
  // Default: 3
  int max_write_buffer_number = 3;

  // The memtables of all column families together, charged to the block cache: a
  // rocksdb::WriteBufferManager with the block cache as its cache, so that memtables
  // and blocks share block_cache_bytes (blocks are evicted to make room) and a flush
  // starts once the memtables reach this size. 0: no manager, each column family's
  // memtables are bounded only by write_buffer_bytes x max_write_buffer_number,
  // outside the cache. Ignored without a block cache. ember-ps's --memory_limit_mb
  // sets it (server/ps/memory_limit.h).
  // Default: 0
  int64_t write_buffer_manager_bytes = 0;

  // A block cache shared with other databases (ember-ps: the default store's and every
  // job's), used instead of one of block_cache_bytes; with write_buffer_manager_bytes,
  // `shared_write_buffer_manager` (charging that cache) likewise bounds the memtables
  // of them all. Default: null (the database's own).
  std::shared_ptr<rocksdb::Cache> shared_block_cache;
  std::shared_ptr<rocksdb::WriteBufferManager> shared_write_buffer_manager;

  // Keeps SST index and filter blocks in the block cache (charged to it, evicted with
  // it; L0 files' ones pinned there) instead of on the heap for as long as a table file
  // is open. ember-ps sets it with --memory_limit_mb, so that they count against the
  // cap.
  // Default: false
  bool cache_index_and_filter_blocks = false;

  // Threads for flushes and compactions together.
  // Default: 2
  int max_background_jobs = 2;

  // Block compression of SST files. Open fails with INVALID_ARGUMENT when the linked
  // librocksdb lacks the codec (Debian 12's has all four).
  // Default: kLz4
  RocksDbCompression compression = RocksDbCompression::kLz4;

  // Bits per key of the full-key bloom filter of each SST file; <= 0 disables filters.
  // Default: 10 (about 1% false positives)
  double bloom_bits_per_key = 10;

  // Table files kept open; -1 keeps all open (index and filter blocks stay in memory).
  // Default: -1
  int max_open_files = -1;

  // Collect RocksDB tickers (block cache hits/misses, ...) for metrics; costs a few
  // percent of throughput.
  // Default: true
  bool enable_statistics = true;

  // File system for all database IO; null means the default (POSIX) one. Tests pass a
  // FaultInjectionFileSystem here.
  // Default: nullptr
  std::shared_ptr<rocksdb::FileSystem> file_system;

  // After a reopen whose every attempt failed (the disk still refuses writes), the next
  // reopen waits this long: meanwhile writes answer UNAVAILABLE at once and reads go on
  // from the read-only open, instead of every write running kReopenAttempts opens while
  // reads wait behind them. 0: every call tries again.
  // Default: 1 s
  absl::Duration reopen_retry_interval = absl::Seconds(1);
};

class RocksDbBackend final : public RowBackend {
 public:
  // Most tables (column families) one backend can hold.
  static constexpr int kMaxTables = 4096;
  // Opens tried by one reopen after a write error before it gives up (and opens the
  // database read-only until the next write tries again); the pauses between them
  // grow from 5 ms to 40 ms (at most about 0.2 s of pauses in all).
  static constexpr int kReopenAttempts = 8;

  // Opens the database at options.path, creating it if allowed, with every column family
  // it holds. Errors: INVALID_ARGUMENT for an empty path, an unsupported compression or
  // a missing database with create_if_missing false; DATA_LOSS for corruption;
  // UNAVAILABLE / RESOURCE_EXHAUSTED for IO errors (including a held lock).
  static absl::StatusOr<std::unique_ptr<RocksDbBackend>> Open(const RocksDbOptions& options);

  // Closes every column family and the database. Close errors are dropped: everything
  // acknowledged is already in the WAL or in SST files.
  ~RocksDbBackend() override;

  RocksDbBackend(const RocksDbBackend&) = delete;
  RocksDbBackend& operator=(const RocksDbBackend&) = delete;

  // RowBackend. OpenTable also fails with INVALID_ARGUMENT for the reserved names
  // "default" and "__ember_meta", and with RESOURCE_EXHAUSTED past kMaxTables. An
  // unknown table handle is INVALID_ARGUMENT everywhere. On a read-only backend,
  // Write, Flush and OpenTable of a new table fail with FAILED_PRECONDITION.
  absl::StatusOr<BackendTable> OpenTable(const std::string& table) override;
  std::vector<std::string> ListTables() const override;
  absl::Status MultiGet(BackendTable table, absl::Span<const std::string> keys,
                        std::vector<std::string>* values, std::vector<bool>* found) override;
  absl::Status Write(const BackendWriteBatch& batch) override;
  absl::Status Scan(
      BackendTable table, std::string_view begin, std::string_view end,
      const std::function<bool(std::string_view key, std::string_view value)>& fn) override;
  // DeleteRange writes one range tombstone (reads skip the range at once) and makes it
  // durable (a synced WAL write; with the WAL off a flush of the table), then drops the
  // SST files wholly inside the range without reading them (their space is reclaimed
  // now; best effort). The rest of the range goes with the compactions of the files it
  // shares: no compaction runs for the delete itself.
  absl::Status DeleteRange(BackendTable table, std::string_view begin,
                           std::string_view end) override;
  // The column family's "rocksdb.estimate-num-keys".
  uint64_t EstimateKeys(BackendTable table) const override;
  // With the WAL on, syncs it; with the WAL off, flushes every memtable to SST files.
  absl::Status Flush() override;
  // SST bytes of all column families plus live WAL bytes. Lists the WAL directory: for
  // metrics, not for hot paths.
  int64_t DiskBytes() const override;

  // Writes a RocksDB checkpoint of the whole database into `dir`, which must not exist
  // (its parent must): memtables are flushed first, then SST files are hard-linked
  // (copied across file systems) and the small metadata files copied. The result opens
  // as a database of its own (e.g. with read_only). Errors: ALREADY_EXISTS if `dir`
  // exists; FAILED_PRECONDITION on a read-only backend; IO errors as for Flush.
  absl::Status CreateCheckpoint(const std::string& dir);

  // The database, for benchmarks only: a reopen after a write error destroys it, so the
  // pointer must not be used where writes can fail. Null while the backend is closed.
  rocksdb::DB* db() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return db_.get(); }

  // Calls fn with the open database, holding it open for the call; does nothing while
  // the backend is closed (a reopen failed). For metrics.
  void VisitDb(const std::function<void(rocksdb::DB& db)>& fn) const ABSL_LOCKS_EXCLUDED(db_mu_);

  // The value of DB-wide property `name` (e.g. "rocksdb.stats"), or "" if unknown.
  std::string Property(std::string_view name) const ABSL_LOCKS_EXCLUDED(db_mu_);

  // Successful reopens after a write error since Open (ember_rocksdb_reopens_total).
  int64_t reopens() const { return reopens_.load(std::memory_order_relaxed); }
  // Reopens whose every attempt failed, since Open.
  int64_t failed_reopens() const { return failed_reopens_.load(std::memory_order_relaxed); }

 private:
  RocksDbBackend(const RocksDbOptions& options, std::unique_ptr<rocksdb::Env> env);

  // Opens the database with the column families default, meta and `tables` (table id i
  // is tables[i]): publishes new table ids on the first open, replaces the handles of
  // the same ids on a reopen.
  absl::Status OpenDb(const std::vector<std::string>& tables, bool read_only)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_);
  // Releases the scans' snapshots, destroys every handle and closes the database.
  void CloseDb() ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_);
  // Closes and opens the database again, up to kReopenAttempts times. UNAVAILABLE when
  // every open failed (the backend stays closed) or when another thread is reopening it.
  absl::Status Reopen() ABSL_LOCKS_EXCLUDED(db_mu_);
  // Before a write: reopens (WAL on) or resumes (WAL off) a database that a failed write
  // left stopped. Returns that step's error.
  absl::Status PrepareWrite() ABSL_LOCKS_EXCLUDED(db_mu_);
  // Before a read: tries a reopen if the last one failed (the backend is closed).
  void PrepareRead() ABSL_LOCKS_EXCLUDED(db_mu_);
  // Records a failed write-path call on the open database: the next write recovers it.
  void WriteFailed() ABSL_SHARED_LOCKS_REQUIRED(db_mu_);
  // UNAVAILABLE naming `what`: the backend is closed because a reopen failed.
  absl::Status ClosedError(absl::string_view what) const;
  // OK when the open database takes writes; UNAVAILABLE naming `what` when it is closed
  // or the read-only open that a failed reopen left.
  absl::Status CheckWritable(absl::string_view what) const ABSL_SHARED_LOCKS_REQUIRED(db_mu_);

  // The handle of `table`, or null if it is not an open table.
  rocksdb::ColumnFamilyHandle* Handle(BackendTable table) const ABSL_SHARED_LOCKS_REQUIRED(db_mu_);
  // Every open column family handle: default, meta and the tables.
  std::vector<rocksdb::ColumnFamilyHandle*> AllHandles() const ABSL_SHARED_LOCKS_REQUIRED(db_mu_);
  // Publishes `handle` as a new table handle; returns its id. REQUIRES: mu_ held.
  BackendTable Publish(const std::string& name, rocksdb::ColumnFamilyHandle* handle)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One chunk of Scan: copies up to a chunk of rows from *next on into `rows`, and moves
  // *next past them. Sets *done at the end of the range.
  absl::Status ScanChunk(BackendTable table, uint64_t generation, const rocksdb::Snapshot* snapshot,
                         std::string* next, std::string_view end,
                         std::vector<std::pair<std::string, std::string>>* rows, bool* done)
      ABSL_LOCKS_EXCLUDED(db_mu_);
  // Takes / releases a scan's snapshot; a snapshot of an earlier generation (the
  // database was reopened since) is already released.
  const rocksdb::Snapshot* TakeSnapshot(uint64_t* generation) ABSL_LOCKS_EXCLUDED(db_mu_);
  void ReleaseSnapshot(const rocksdb::Snapshot* snapshot, uint64_t generation)
      ABSL_LOCKS_EXCLUDED(db_mu_);

  const RocksDbOptions options_;
  // Composite env over options_.file_system (null: Env::Default()). Outlives db_.
  const std::unique_ptr<rocksdb::Env> env_;
  // Built once by Open and reused by every reopen (one block cache, one statistics
  // object, so the RocksDB counters keep counting across reopens).
  rocksdb::DBOptions db_options_;
  rocksdb::ColumnFamilyOptions cf_options_;
  rocksdb::WriteOptions write_options_;

  // Held shared by every use of db_ and the handles, exclusively by open and close.
  // Acquired after create_mu_, before mu_.
  mutable absl::Mutex db_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::unique_ptr<rocksdb::DB> db_ ABSL_GUARDED_BY(db_mu_);
  rocksdb::ColumnFamilyHandle* default_cf_ ABSL_GUARDED_BY(db_mu_) = nullptr;
  rocksdb::ColumnFamilyHandle* meta_cf_ ABSL_GUARDED_BY(db_mu_) = nullptr;
  // Set while db_ is the read-only open of a failed reopen (reads only).
  bool read_only_fallback_ ABSL_GUARDED_BY(db_mu_) = false;
  // Raised by every open; a scan's snapshot belongs to one generation.
  uint64_t generation_ ABSL_GUARDED_BY(db_mu_) = 0;

  // handles_[t] is the handle of table t for t < num_tables_. A slot is written before
  // num_tables_ is raised past it (release); read and written under db_mu_ (shared
  // for publishing a new table, exclusive for a reopen's replacement).
  std::unique_ptr<std::atomic<rocksdb::ColumnFamilyHandle*>[]> handles_;
  std::atomic<int> num_tables_{0};

  // Set when a write-path call failed on the open database: the next write reopens
  // (WAL on) or resumes (WAL off) it.
  std::atomic<bool> needs_recovery_{false};
  // Set while a thread reopens the database (writes answer UNAVAILABLE meanwhile).
  std::atomic<bool> reopening_{false};
  // Set while the database is closed because every open of a reopen failed.
  std::atomic<bool> closed_{false};
  std::atomic<int64_t> reopens_{0};
  std::atomic<int64_t> failed_reopens_{0};
  // Before this time no reopen is tried (reopen_retry_interval after a failed one);
  // written by the thread that holds reopening_.
  std::atomic<int64_t> next_reopen_unix_ns_{0};

  // Serializes column family creation (held across that IO; the data path never takes
  // it). Acquired before db_mu_ and mu_.
  absl::Mutex create_mu_ ABSL_ACQUIRED_BEFORE(db_mu_);
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, BackendTable> tables_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> names_ ABSL_GUARDED_BY(mu_);  // names_[t]: table t's name
  // Snapshots of scans in progress; a reopen releases them.
  absl::flat_hash_set<const rocksdb::Snapshot*> snapshots_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ember

#endif  // EMBER_SERVER_STORE_ROCKSDB_BACKEND_H_
