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
// failed write RocksDB stops accepting writes (a "background error"); the next Write or
// Flush calls DB::Resume() first, so the backend recovers by itself once the disk does.
// An error RocksDB classes as fatal (e.g. a non-retryable IO error on the WAL) cannot be
// resumed: Write and Flush keep failing until the backend is reopened, and the reopen
// recovers every acknowledged write.
//
// Thread-safety: every method may be called concurrently (see row_backend.h). Table
// handle lookups on the read/write paths take no lock.

#ifndef EMBER_SERVER_STORE_ROCKSDB_BACKEND_H_
#define EMBER_SERVER_STORE_ROCKSDB_BACKEND_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
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
};

class RocksDbBackend final : public RowBackend {
 public:
  // Most tables (column families) one backend can hold.
  static constexpr int kMaxTables = 4096;

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
  // DeleteRange writes one range tombstone (reads skip the range at once), then
  // compacts the range so that its space is reclaimed now (best effort).
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

  // The database, for benchmarks and metrics. Owned by the backend; valid until it is
  // destroyed.
  rocksdb::DB* db() const { return db_.get(); }

  // The value of DB-wide property `name` (e.g. "rocksdb.stats"), or "" if unknown.
  std::string Property(std::string_view name) const;

 private:
  RocksDbBackend(const RocksDbOptions& options, std::unique_ptr<rocksdb::Env> env);

  // The handle of `table`, or null if it is not an open table. Lock-free.
  rocksdb::ColumnFamilyHandle* Handle(BackendTable table) const;
  // Every open column family handle: default, meta and the tables.
  std::vector<rocksdb::ColumnFamilyHandle*> AllHandles() const;
  // Publishes `handle` as a new table handle; returns its id. REQUIRES: mu_ held.
  BackendTable Publish(const std::string& name, rocksdb::ColumnFamilyHandle* handle)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Calls DB::Resume() if the last write or flush failed. Returns its error, if any.
  absl::Status MaybeResume();

  const RocksDbOptions options_;
  // Composite env over options_.file_system (null: Env::Default()). Outlives db_.
  const std::unique_ptr<rocksdb::Env> env_;
  rocksdb::ColumnFamilyOptions cf_options_;  // for column families created later
  rocksdb::WriteOptions write_options_;
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle* default_cf_ = nullptr;
  rocksdb::ColumnFamilyHandle* meta_cf_ = nullptr;

  // handles_[t] is the handle of table t for t < num_tables_. A slot is written once,
  // before num_tables_ is raised past it (release), and never changes until the
  // destructor, so readers need no lock.
  std::unique_ptr<std::atomic<rocksdb::ColumnFamilyHandle*>[]> handles_;
  std::atomic<int> num_tables_{0};

  // Set when a write or flush failed: the DB may be stopped by a background error.
  std::atomic<bool> needs_resume_{false};

  // Serializes column family creation (held across that IO; the data path never takes
  // it). Acquired before mu_.
  absl::Mutex create_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, BackendTable> tables_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ember

#endif  // EMBER_SERVER_STORE_ROCKSDB_BACKEND_H_
