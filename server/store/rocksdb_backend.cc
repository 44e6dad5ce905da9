// Copyright 2026 The Ember Authors.

#include "server/store/rocksdb_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <filesystem>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/clip.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "rocksdb/cache.h"
#include "rocksdb/convenience.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/statistics.h"
#include "rocksdb/table.h"
#include "rocksdb/transaction_log.h"
#include "rocksdb/utilities/checkpoint.h"
#include "rocksdb/write_batch.h"
#include "rocksdb/write_buffer_manager.h"
#include "server/store/internal/rocksdb_status.h"

namespace ember {
namespace {

constexpr char kMetaColumnFamily[] = "__ember_meta";

// Rows (or bytes) Scan copies per chunk before calling its callback without the lock.
constexpr size_t kScanChunkRows = 1024;
constexpr size_t kScanChunkBytes = size_t{1} << 20;

rocksdb::Slice ToSlice(std::string_view s) { return rocksdb::Slice(s.data(), s.size()); }

// Returns the codec for `c`, or INVALID_ARGUMENT if the linked librocksdb lacks it.
absl::StatusOr<rocksdb::CompressionType> ToCompressionType(RocksDbCompression c) {
  rocksdb::CompressionType type = rocksdb::kNoCompression;
  const char* name = "none";
  switch (c) {
    case RocksDbCompression::kNone:
      return rocksdb::kNoCompression;
    case RocksDbCompression::kLz4:
      type = rocksdb::kLZ4Compression;
      name = "lz4";
      break;
    case RocksDbCompression::kZstd:
      type = rocksdb::kZSTD;
      name = "zstd";
      break;
    case RocksDbCompression::kSnappy:
      type = rocksdb::kSnappyCompression;
      name = "snappy";
      break;
  }
  const std::vector<rocksdb::CompressionType> supported = rocksdb::GetSupportedCompressions();
  if (std::find(supported.begin(), supported.end(), type) == supported.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("compression ", name, " is not supported by the linked librocksdb"));
  }
  return type;
}

// Drops RocksDB's informational log. Read-only opens use it: otherwise RocksDB creates
// (and rotates) a LOG file inside the database directory, which for a checkpoint would
// change the files its manifest digests.
class DiscardLogger final : public rocksdb::Logger {
 public:
  using rocksdb::Logger::Logv;
  void Logv(const char* /*format*/, va_list /*ap*/) override {}
};

absl::Status ReadOnlyError(const std::string& what, const std::string& path) {
  return absl::FailedPreconditionError(absl::StrCat(what, " on the read-only database at ", path));
}

// `cf` is the column families' options (MakeCfOptions): the write buffer manager
// charges the memtables to their block cache.
rocksdb::DBOptions MakeDbOptions(const RocksDbOptions& options, rocksdb::Env* env,
                                 const rocksdb::ColumnFamilyOptions& cf) {
  rocksdb::DBOptions db;
  const auto* table = cf.table_factory->GetOptions<rocksdb::BlockBasedTableOptions>();
  if (options.shared_write_buffer_manager != nullptr) {
    db.write_buffer_manager = options.shared_write_buffer_manager;
  } else if (options.write_buffer_manager_bytes > 0 && table != nullptr &&
             table->block_cache != nullptr) {
    db.write_buffer_manager = std::make_shared<rocksdb::WriteBufferManager>(
        static_cast<size_t>(options.write_buffer_manager_bytes), table->block_cache);
  }
  if (env != nullptr) db.env = env;
  db.create_if_missing = options.create_if_missing && !options.read_only;
  // The meta column family on first open.
  db.create_missing_column_families = !options.read_only;
  if (options.read_only) db.info_log = std::make_shared<DiscardLogger>();
  db.max_background_jobs = options.max_background_jobs;
  db.max_open_files = options.max_open_files;
  if (options.enable_statistics) db.statistics = rocksdb::CreateDBStatistics();
  // Without a WAL only an atomic flush keeps a batch that spans column families whole
  // across a crash.
  db.atomic_flush = !options.enable_wal;
  // The backend recovers on the next write (PrepareWrite: a reopen, or DB::Resume()
  // with the WAL off); RocksDB's own retry thread would race with it.
  db.max_bgerror_resume_count = 0;
  return db;
}

absl::StatusOr<rocksdb::ColumnFamilyOptions> MakeCfOptions(const RocksDbOptions& options) {
  rocksdb::BlockBasedTableOptions table;
  if (options.shared_block_cache != nullptr) {
    table.block_cache = options.shared_block_cache;
  } else if (options.block_cache_bytes > 0) {
    table.block_cache = rocksdb::NewLRUCache(static_cast<size_t>(options.block_cache_bytes));
  } else {
    table.no_block_cache = true;
  }
  table.cache_index_and_filter_blocks = options.cache_index_and_filter_blocks;
  table.pin_l0_filter_and_index_blocks_in_cache = options.cache_index_and_filter_blocks;
  if (options.bloom_bits_per_key > 0) {
    // Full (not block-based) filter: required for MultiGet's batched filter probes.
    table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(options.bloom_bits_per_key,
                                                            /*use_block_based_builder=*/false));
    table.whole_key_filtering = true;
  }
  rocksdb::ColumnFamilyOptions cf;
  // One factory for all column families, so they share the block cache.
  cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  cf.write_buffer_size = static_cast<size_t>(options.write_buffer_bytes);
  cf.max_write_buffer_number = options.max_write_buffer_number;
  EMBER_ASSIGN_OR_RETURN(cf.compression, ToCompressionType(options.compression));
  return cf;
}

}  // namespace

RocksDbBackend::RocksDbBackend(const RocksDbOptions& options, std::unique_ptr<rocksdb::Env> env)
    : options_(options),
      env_(std::move(env)),
      handles_(new std::atomic<rocksdb::ColumnFamilyHandle*>[kMaxTables]) {
  for (int i = 0; i < kMaxTables; ++i) handles_[i].store(nullptr, std::memory_order_relaxed);
  write_options_.disableWAL = !options.enable_wal;
  write_options_.sync = options.enable_wal && options.sync_writes;
}

absl::StatusOr<std::unique_ptr<RocksDbBackend>> RocksDbBackend::Open(
    const RocksDbOptions& options) {
  if (options.path.empty()) return absl::InvalidArgumentError("RocksDbOptions.path is empty");
  if (options.create_if_missing && !options.read_only) {
    // RocksDB creates only the last path component; operators expect `mkdir -p`.
    std::error_code error;
    std::filesystem::create_directories(options.path, error);
    if (error) {
      return absl::UnavailableError(
          absl::StrCat("cannot create directory ", options.path, ": ", error.message()));
    }
  }
  EMBER_ASSIGN_OR_RETURN(rocksdb::ColumnFamilyOptions cf_options, MakeCfOptions(options));
  std::unique_ptr<rocksdb::Env> env;
  if (options.file_system != nullptr) env = rocksdb::NewCompositeEnv(options.file_system);
  std::unique_ptr<RocksDbBackend> backend(new RocksDbBackend(options, std::move(env)));
  backend->cf_options_ = cf_options;
  backend->db_options_ = MakeDbOptions(options, backend->env_.get(), cf_options);

  std::vector<std::string> names;
  rocksdb::Status s = rocksdb::DB::ListColumnFamilies(backend->db_options_, options.path, &names);
  if (s.IsPathNotFound()) {
    names.clear();  // no database yet; DB::Open creates it or reports it missing
  } else if (!s.ok()) {
    return FromRocksDb(s, absl::StrCat("list column families of ", options.path));
  }
  // Fixed order (default, meta, then tables by name) so handles are reproducible.
  std::sort(names.begin(), names.end());
  names.erase(std::remove_if(names.begin(), names.end(),
                             [](const std::string& n) {
                               return n == rocksdb::kDefaultColumnFamilyName ||
                                      n == kMetaColumnFamily;
                             }),
              names.end());
  if (static_cast<int>(names.size()) > kMaxTables) {
    return absl::ResourceExhaustedError(
        absl::StrCat(options.path, " holds ", names.size(), " tables; at most ", kMaxTables));
  }
  absl::WriterMutexLock lock(&backend->db_mu_);
  EMBER_RETURN_IF_ERROR(backend->OpenDb(names, options.read_only));
  return backend;
}

absl::Status RocksDbBackend::OpenDb(const std::vector<std::string>& tables, bool read_only) {
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  descriptors.reserve(tables.size() + 2);
  descriptors.emplace_back(rocksdb::kDefaultColumnFamilyName, cf_options_);
  descriptors.emplace_back(kMetaColumnFamily, cf_options_);
  for (const std::string& name : tables) descriptors.emplace_back(name, cf_options_);
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  // A read-only open must name every column family the database holds; the list does
  // (and includes the meta family, which every Ember database has).
  const rocksdb::Status s =
      read_only
          ? rocksdb::DB::OpenForReadOnly(db_options_, options_.path, descriptors, &handles, &db)
          : rocksdb::DB::Open(db_options_, options_.path, descriptors, &handles, &db);
  if (!s.ok()) return FromRocksDb(s, absl::StrCat("open rocksdb at ", options_.path));
  db_.reset(db);
  read_only_fallback_ = read_only && !options_.read_only;
  default_cf_ = handles[0];
  meta_cf_ = handles[1];
  ++generation_;
  absl::MutexLock lock(&mu_);
  const int published = num_tables_.load(std::memory_order_relaxed);
  for (size_t i = 2; i < handles.size(); ++i) {
    const int id = static_cast<int>(i - 2);
    if (id < published) {
      handles_[id].store(handles[i], std::memory_order_relaxed);  // a reopen: same id
    } else {
      Publish(tables[id], handles[i]);
    }
  }
  return absl::OkStatus();
}

void RocksDbBackend::CloseDb() {
  if (db_ == nullptr) return;
  {
    absl::MutexLock lock(&mu_);
    for (const rocksdb::Snapshot* snapshot : snapshots_) db_->ReleaseSnapshot(snapshot);
    snapshots_.clear();
  }
  for (rocksdb::ColumnFamilyHandle* handle : AllHandles()) {
    db_->DestroyColumnFamilyHandle(handle).PermitUncheckedError();
  }
  // A close error cannot be acted on here; acknowledged writes are already in the WAL
  // or in SST files.
  db_->Close().PermitUncheckedError();
  db_.reset();
  default_cf_ = nullptr;
  meta_cf_ = nullptr;
  const int n = num_tables_.load(std::memory_order_relaxed);
  for (int i = 0; i < n; ++i) handles_[i].store(nullptr, std::memory_order_relaxed);
}

RocksDbBackend::~RocksDbBackend() {
  absl::WriterMutexLock lock(&db_mu_);
  CloseDb();
}

absl::Status RocksDbBackend::ClosedError(absl::string_view what) const {
  return absl::UnavailableError(absl::StrCat(what, ": the database at ", options_.path,
                                             " is closed after a write error (its reopen "
                                             "failed; the next call tries again); retry"));
}

absl::Status RocksDbBackend::CheckWritable(absl::string_view what) const {
  if (db_ == nullptr) return ClosedError(what);
  if (read_only_fallback_) {
    return absl::UnavailableError(absl::StrCat(
        what, ": the database at ", options_.path,
        " serves reads only after a write error (its reopen failed; the next write tries "
        "again); retry"));
  }
  return absl::OkStatus();
}

absl::Status RocksDbBackend::Reopen() {
  if (reopening_.exchange(true, std::memory_order_acq_rel)) {
    return absl::UnavailableError(absl::StrCat("the database at ", options_.path,
                                               " is being reopened after a write error; retry"));
  }
  const int64_t now_ns = absl::ToUnixNanos(absl::Now());
  const int64_t next_ns = next_reopen_unix_ns_.load(std::memory_order_acquire);
  if (now_ns < next_ns) {
    reopening_.store(false, std::memory_order_release);
    return absl::UnavailableError(absl::StrCat(
        "the database at ", options_.path, " failed its last reopen after a write error; the next ",
        "try is in ", (next_ns - now_ns) / 1000000 + 1, " ms; retry"));
  }
  absl::Status status;
  {
    absl::WriterMutexLock lock(&db_mu_);
    // Another thread may have reopened it between our check and the lock.
    if (needs_recovery_.load(std::memory_order_acquire)) {
      std::vector<std::string> tables;
      {
        absl::MutexLock names_lock(&mu_);
        tables = names_;
      }
      CloseDb();
      auto pause = std::chrono::milliseconds(5);
      for (int attempt = 1; attempt <= kReopenAttempts; ++attempt) {
        status = OpenDb(tables, /*read_only=*/false);
        if (status.ok()) break;
        if (attempt < kReopenAttempts) std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::milliseconds(40));
      }
      if (status.ok()) {
        needs_recovery_.store(false, std::memory_order_release);
        closed_.store(false, std::memory_order_release);
        const int64_t n = reopens_.fetch_add(1, std::memory_order_relaxed) + 1;
        EMBER_LOG(WARNING) << "rocksdb: reopened " << options_.path
                           << " after a write error (reopen " << n << " since start)";
      } else {
        // Reads go on from a read-only open, which writes nothing (the disk may be
        // refusing writes); needs_recovery_ stays set, so a write tries again once
        // reopen_retry_interval has passed.
        failed_reopens_.fetch_add(1, std::memory_order_relaxed);
        next_reopen_unix_ns_.store(absl::ToUnixNanos(absl::Now() + options_.reopen_retry_interval),
                                   std::memory_order_release);
        const absl::Status read_only = OpenDb(tables, /*read_only=*/true);
        closed_.store(!read_only.ok(), std::memory_order_release);
        EMBER_LOG(ERROR) << "rocksdb: reopen of " << options_.path << " after a write error failed "
                         << kReopenAttempts << " times (" << status << "); "
                         << (read_only.ok() ? "serving reads from a read-only open"
                                            : "the read-only open failed too: closed")
                         << " until the next try";
        status = absl::UnavailableError(absl::StrCat(
            "reopen of ", options_.path, " after a write error failed ", kReopenAttempts,
            " times (a write tries again in ", absl::FormatDuration(options_.reopen_retry_interval),
            "): ", status.message()));
      }
    }
  }
  reopening_.store(false, std::memory_order_release);
  return status;
}

absl::Status RocksDbBackend::PrepareWrite() {
  if (!needs_recovery_.load(std::memory_order_acquire)) return absl::OkStatus();
  if (options_.enable_wal) return Reopen();
  // Without a WAL a reopen would lose the memtables; no WAL writer can have seen the
  // error either, so DB::Resume() is safe here.
  absl::ReaderMutexLock lock(&db_mu_);
  EMBER_RETURN_IF_ERROR(CheckWritable("resume"));
  rocksdb::Status s = db_->Resume();
  // Busy: another thread is resuming right now; the caller's own IO tells the outcome.
  if (s.IsBusy()) return absl::OkStatus();
  if (!s.ok()) return FromRocksDb(s, "resume after background error");
  needs_recovery_.store(false, std::memory_order_release);
  return absl::OkStatus();
}

void RocksDbBackend::PrepareRead() {
  // Reads keep working on a database that a write error stopped; only a closed one (a
  // failed reopen) needs another try. While a reopen runs, the read waits for it on
  // db_mu_ instead.
  if (closed_.load(std::memory_order_acquire) && !reopening_.load(std::memory_order_acquire)) {
    Reopen().IgnoreError();  // the read reports the outcome
  }
}

void RocksDbBackend::WriteFailed() { needs_recovery_.store(true, std::memory_order_release); }

BackendTable RocksDbBackend::Publish(const std::string& name, rocksdb::ColumnFamilyHandle* handle) {
  const int id = num_tables_.load(std::memory_order_relaxed);
  handles_[id].store(handle, std::memory_order_relaxed);
  num_tables_.store(id + 1, std::memory_order_release);
  tables_.emplace(name, id);
  names_.push_back(name);
  return id;
}

rocksdb::ColumnFamilyHandle* RocksDbBackend::Handle(BackendTable table) const {
  if (table == kMetaTable) return meta_cf_;
  if (table < 0 || table >= num_tables_.load(std::memory_order_acquire)) return nullptr;
  return handles_[table].load(std::memory_order_relaxed);
}

std::vector<rocksdb::ColumnFamilyHandle*> RocksDbBackend::AllHandles() const {
  std::vector<rocksdb::ColumnFamilyHandle*> all = {default_cf_, meta_cf_};
  const int n = num_tables_.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) all.push_back(handles_[i].load(std::memory_order_relaxed));
  return all;
}

absl::StatusOr<BackendTable> RocksDbBackend::OpenTable(const std::string& table) {
  if (table.empty()) return absl::InvalidArgumentError("empty table name");
  if (table == rocksdb::kDefaultColumnFamilyName || table == kMetaColumnFamily) {
    return absl::InvalidArgumentError(
        absl::StrCat("table name '", ClipForMessage(table), "' is reserved"));
  }
  {
    absl::MutexLock lock(&mu_);
    auto it = tables_.find(table);
    if (it != tables_.end()) return it->second;
  }
  if (options_.read_only) return ReadOnlyError(absl::StrCat("create table ", table), options_.path);
  EMBER_RETURN_IF_ERROR(PrepareWrite());
  absl::MutexLock create_lock(&create_mu_);
  absl::ReaderMutexLock db_lock(&db_mu_);
  {
    absl::MutexLock lock(&mu_);
    auto it = tables_.find(table);
    if (it != tables_.end()) return it->second;  // created while we waited
    if (num_tables_.load(std::memory_order_relaxed) >= kMaxTables) {
      return absl::ResourceExhaustedError(absl::StrCat("more than ", kMaxTables, " tables"));
    }
  }
  EMBER_RETURN_IF_ERROR(CheckWritable(absl::StrCat("create table ", table)));
  rocksdb::ColumnFamilyHandle* handle = nullptr;
  rocksdb::Status s = db_->CreateColumnFamily(cf_options_, table, &handle);
  if (!s.ok()) {
    WriteFailed();
    return FromRocksDb(s, absl::StrCat("create column family ", table));
  }
  absl::MutexLock lock(&mu_);
  return Publish(table, handle);
}

std::vector<std::string> RocksDbBackend::ListTables() const {
  std::vector<std::string> names;
  {
    absl::MutexLock lock(&mu_);
    names = names_;
  }
  std::sort(names.begin(), names.end());
  return names;
}

absl::Status RocksDbBackend::MultiGet(BackendTable table, absl::Span<const std::string> keys,
                                      std::vector<std::string>* values, std::vector<bool>* found) {
  PrepareRead();
  absl::ReaderMutexLock lock(&db_mu_);
  rocksdb::ColumnFamilyHandle* cf = Handle(table);
  if (cf == nullptr && db_ != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown table ", table));
  }
  const size_t n = keys.size();
  values->resize(n);
  found->assign(n, false);
  if (n == 0) return absl::OkStatus();
  if (db_ == nullptr) return ClosedError(absl::StrCat("multiget in table ", table));

  std::vector<rocksdb::Slice> slices;
  slices.reserve(n);
  for (const std::string& key : keys) slices.emplace_back(key.data(), key.size());
  // Values not pinned in the block cache are copied straight into the caller's strings,
  // which keep their capacity across calls.
  std::vector<rocksdb::PinnableSlice> pinned;
  pinned.reserve(n);
  for (size_t i = 0; i < n; ++i) pinned.emplace_back(&(*values)[i]);
  std::vector<rocksdb::Status> statuses(n);
  db_->MultiGet(rocksdb::ReadOptions(), cf, n, slices.data(), pinned.data(), statuses.data());

  for (size_t i = 0; i < n; ++i) {
    std::string& value = (*values)[i];
    if (statuses[i].ok()) {
      (*found)[i] = true;
      const rocksdb::PinnableSlice& p = pinned[i];
      if (p.data() != value.data() || p.size() != value.size()) value.assign(p.data(), p.size());
    } else if (statuses[i].IsNotFound()) {
      value.clear();
    } else {
      return FromRocksDb(statuses[i], absl::StrCat("multiget in table ", table));
    }
  }
  return absl::OkStatus();
}

absl::Status RocksDbBackend::Write(const BackendWriteBatch& batch) {
  if (options_.read_only) return ReadOnlyError("write", options_.path);
  if (batch.empty()) return absl::OkStatus();
  EMBER_RETURN_IF_ERROR(PrepareWrite());
  size_t bytes = 16;
  for (const BackendWrite& w : batch) bytes += w.key.size() + w.value.size() + 16;
  rocksdb::WriteBatch wb(bytes);
  absl::ReaderMutexLock lock(&db_mu_);
  EMBER_RETURN_IF_ERROR(CheckWritable("write batch"));
  for (const BackendWrite& w : batch) {
    rocksdb::ColumnFamilyHandle* cf = Handle(w.table);
    if (cf == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("write to unknown table ", w.table));
    }
    rocksdb::Status s = w.erase ? wb.Delete(cf, w.key) : wb.Put(cf, w.key, w.value);
    if (!s.ok()) return FromRocksDb(s, "build write batch");
  }
  rocksdb::Status s = db_->Write(write_options_, &wb);
  if (!s.ok()) {
    WriteFailed();
    return FromRocksDb(s, "write batch");
  }
  return absl::OkStatus();
}

const rocksdb::Snapshot* RocksDbBackend::TakeSnapshot(uint64_t* generation) {
  absl::ReaderMutexLock lock(&db_mu_);
  if (db_ == nullptr) return nullptr;
  const rocksdb::Snapshot* snapshot = db_->GetSnapshot();
  *generation = generation_;
  absl::MutexLock snapshots_lock(&mu_);
  snapshots_.insert(snapshot);
  return snapshot;
}

void RocksDbBackend::ReleaseSnapshot(const rocksdb::Snapshot* snapshot, uint64_t generation) {
  absl::ReaderMutexLock lock(&db_mu_);
  if (db_ == nullptr || generation != generation_) return;  // released by the reopen
  {
    absl::MutexLock snapshots_lock(&mu_);
    snapshots_.erase(snapshot);
  }
  db_->ReleaseSnapshot(snapshot);
}

absl::Status RocksDbBackend::ScanChunk(BackendTable table, uint64_t generation,
                                       const rocksdb::Snapshot* snapshot, std::string* next,
                                       std::string_view end,
                                       std::vector<std::pair<std::string, std::string>>* rows,
                                       bool* done) {
  rows->clear();
  absl::ReaderMutexLock lock(&db_mu_);
  if (db_ == nullptr) return ClosedError(absl::StrCat("scan table ", table));
  if (generation != generation_) {
    return absl::UnavailableError(
        absl::StrCat("scan table ", table, ": the database at ", options_.path,
                     " was reopened after a write error during the scan; retry"));
  }
  rocksdb::ColumnFamilyHandle* cf = Handle(table);
  if (cf == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown table ", table));
  rocksdb::ReadOptions read_options;
  read_options.snapshot = snapshot;
  // Scans copy whole slots; keep them from evicting the hot rows' blocks.
  read_options.fill_cache = false;
  const rocksdb::Slice upper = ToSlice(end);
  if (!end.empty()) read_options.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read_options, cf));
  size_t bytes = 0;
  for (it->Seek(ToSlice(*next)); it->Valid(); it->Next()) {
    if (rows->size() >= kScanChunkRows || bytes >= kScanChunkBytes) {
      next->assign(it->key().data(), it->key().size());
      return absl::OkStatus();
    }
    rows->emplace_back(it->key().ToString(), it->value().ToString());
    bytes += rows->back().first.size() + rows->back().second.size();
  }
  *done = true;
  return FromRocksDb(it->status(), absl::StrCat("scan table ", table));
}

absl::Status RocksDbBackend::Scan(
    BackendTable table, std::string_view begin, std::string_view end,
    const std::function<bool(std::string_view key, std::string_view value)>& fn) {
  PrepareRead();
  uint64_t generation = 0;
  const rocksdb::Snapshot* snapshot = TakeSnapshot(&generation);
  if (snapshot == nullptr) return ClosedError(absl::StrCat("scan table ", table));
  // The callback runs without db_mu_ (it may write to this backend, which can reopen
  // the database); the snapshot keeps the chunks one consistent view.
  std::string next(begin);
  std::vector<std::pair<std::string, std::string>> rows;
  absl::Status status;
  bool done = false;
  bool stopped = false;
  while (status.ok() && !done && !stopped) {
    status = ScanChunk(table, generation, snapshot, &next, end, &rows, &done);
    for (const auto& [key, value] : rows) {
      if (!fn(key, value)) {
        stopped = true;
        break;
      }
    }
  }
  ReleaseSnapshot(snapshot, generation);
  return stopped ? absl::OkStatus() : status;
}

absl::Status RocksDbBackend::DeleteRange(BackendTable table, std::string_view begin,
                                         std::string_view end) {
  if (options_.read_only) return ReadOnlyError("delete range", options_.path);
  if (!end.empty() && end < begin) {
    return absl::InvalidArgumentError("delete range: end sorts before begin");
  }
  EMBER_RETURN_IF_ERROR(PrepareWrite());
  absl::ReaderMutexLock lock(&db_mu_);
  EMBER_RETURN_IF_ERROR(CheckWritable(absl::StrCat("delete range in table ", table)));
  rocksdb::ColumnFamilyHandle* cf = Handle(table);
  if (cf == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown table ", table));
  std::string last_key;
  if (end.empty()) {
    // A range tombstone needs an end: the successor of the table's last key.
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cf));
    it->SeekToLast();
    EMBER_RETURN_IF_ERROR(FromRocksDb(it->status(), absl::StrCat("seek in table ", table)));
    if (!it->Valid() || it->key().compare(ToSlice(begin)) < 0) return absl::OkStatus();
    last_key.assign(it->key().data(), it->key().size());
    last_key.push_back('\0');
    end = last_key;
  }
  if (begin == end) return absl::OkStatus();
  rocksdb::WriteBatch wb;
  rocksdb::Status s = wb.DeleteRange(cf, ToSlice(begin), ToSlice(end));
  if (!s.ok()) return FromRocksDb(s, "build delete range batch");
  // The tombstone is made durable before any file goes (below), so that a crash never
  // leaves the range half deleted: a synced WAL write, or with the WAL off a flush.
  rocksdb::WriteOptions durable = write_options_;
  durable.sync = options_.enable_wal;
  s = db_->Write(durable, &wb);
  if (s.ok() && !options_.enable_wal) {
    rocksdb::FlushOptions flush_options;
    flush_options.wait = true;
    s = db_->Flush(flush_options, cf);
  }
  if (!s.ok()) {
    WriteFailed();
    return FromRocksDb(s, absl::StrCat("delete range in table ", table));
  }
  // The range's files that hold nothing else go now, unread (a drained shard's disk
  // shrinks at once); the tombstone hides the rest of the range until compaction drops
  // it with the files it shares. Compacting the range here instead read and rewrote
  // every file it touches, at normal priority, inside each migration's cleanup
  // (docs/PERFORMANCE.md). Best effort: the delete itself is done.
  const rocksdb::Slice from = ToSlice(begin);
  const rocksdb::Slice to = ToSlice(end);
  rocksdb::DeleteFilesInRange(db_.get(), cf, &from, &to, /*include_end=*/false)
      .PermitUncheckedError();
  return absl::OkStatus();
}

uint64_t RocksDbBackend::EstimateKeys(BackendTable table) const {
  absl::ReaderMutexLock lock(&db_mu_);
  rocksdb::ColumnFamilyHandle* cf = Handle(table);
  uint64_t keys = 0;
  if (db_ == nullptr || cf == nullptr ||
      !db_->GetIntProperty(cf, rocksdb::DB::Properties::kEstimateNumKeys, &keys)) {
    return 0;
  }
  return keys;
}

absl::Status RocksDbBackend::Flush() {
  if (options_.read_only) return ReadOnlyError("flush", options_.path);
  EMBER_RETURN_IF_ERROR(PrepareWrite());
  absl::ReaderMutexLock lock(&db_mu_);
  EMBER_RETURN_IF_ERROR(CheckWritable("flush"));
  rocksdb::Status s;
  if (options_.enable_wal) {
    // An empty synced write syncs every live WAL. Unlike DB::SyncWAL() it goes through the
    // write path, which refuses to run while a background error stops the database;
    // SyncWAL() on a WAL writer that has seen an IO error trips an assertion (abort) in
    // Debian's librocksdb, which is built with assertions on.
    rocksdb::WriteOptions sync_options;
    sync_options.sync = true;
    rocksdb::WriteBatch empty;
    s = db_->Write(sync_options, &empty);
  } else {
    rocksdb::FlushOptions flush_options;
    flush_options.wait = true;
    s = db_->Flush(flush_options, AllHandles());
  }
  if (!s.ok()) {
    WriteFailed();
    return FromRocksDb(s, "flush");
  }
  return absl::OkStatus();
}

int64_t RocksDbBackend::DiskBytes() const {
  absl::ReaderMutexLock lock(&db_mu_);
  if (db_ == nullptr) return 0;
  uint64_t total = 0;
  for (rocksdb::ColumnFamilyHandle* cf : AllHandles()) {
    uint64_t sst = 0;
    if (db_->GetIntProperty(cf, rocksdb::DB::Properties::kTotalSstFilesSize, &sst)) total += sst;
  }
  rocksdb::VectorLogPtr wal_files;
  if (db_->GetSortedWalFiles(wal_files).ok()) {
    for (const auto& wal : wal_files) {
      if (wal->Type() == rocksdb::kAliveLogFile) total += wal->SizeFileBytes();
    }
  }
  return static_cast<int64_t>(total);
}

absl::Status RocksDbBackend::CreateCheckpoint(const std::string& dir) {
  if (options_.read_only) return ReadOnlyError("checkpoint", options_.path);
  std::error_code error;
  if (std::filesystem::exists(dir, error)) {
    return absl::AlreadyExistsError(absl::StrCat("checkpoint directory ", dir, " exists"));
  }
  EMBER_RETURN_IF_ERROR(PrepareWrite());
  absl::ReaderMutexLock lock(&db_mu_);
  EMBER_RETURN_IF_ERROR(CheckWritable(absl::StrCat("checkpoint into ", dir)));
  rocksdb::Checkpoint* raw = nullptr;
  rocksdb::Status s = rocksdb::Checkpoint::Create(db_.get(), &raw);
  if (!s.ok()) return FromRocksDb(s, "create checkpoint object");
  const std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  // log_size_for_flush 0: always flush the memtables first, so the checkpoint is SST
  // files (hard links) rather than a WAL to replay, and is complete with the WAL off.
  s = checkpoint->CreateCheckpoint(dir, /*log_size_for_flush=*/0);
  if (!s.ok()) {
    WriteFailed();
    return FromRocksDb(s, absl::StrCat("checkpoint into ", dir));
  }
  return absl::OkStatus();
}

void RocksDbBackend::VisitDb(const std::function<void(rocksdb::DB& db)>& fn) const {
  absl::ReaderMutexLock lock(&db_mu_);
  if (db_ != nullptr) fn(*db_);
}

std::string RocksDbBackend::Property(std::string_view name) const {
  absl::ReaderMutexLock lock(&db_mu_);
  std::string value;
  if (db_ == nullptr || !db_->GetProperty(ToSlice(name), &value)) return "";
  return value;
}

}  // namespace ember
