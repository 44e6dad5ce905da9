// Copyright 2026 The Ember Authors.
//
// Writing shard snapshots (shard_snapshot.h): FULL as a RocksDB checkpoint, DELTA as
// delta.bin built from the store's change log.

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/slot.h"
#include "common/status_macros.h"
#include "server/checkpoint/delta_file.h"
#include "server/checkpoint/shard_snapshot.h"
#include "server/store/row_layout.h"

namespace ember {
namespace {

// Change-log entries per ReadChanges call.
constexpr size_t kChangeBatch = size_t{1} << 16;
// Row keys per backend MultiGet when reading changed rows.
constexpr size_t kLookupBatch = 4096;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// ALREADY_EXISTS if <checkpoint_dir>/<subdir> exists.
absl::Status CheckAbsent(const std::string& checkpoint_dir, const std::string& subdir) {
  const std::filesystem::path path = std::filesystem::path(checkpoint_dir) / subdir;
  std::error_code error;
  if (std::filesystem::exists(path, error)) {
    return absl::AlreadyExistsError(absl::StrCat("snapshot directory ", path.string(), " exists"));
  }
  return absl::OkStatus();
}

// Creates the snapshot directory, which must not exist yet, and removes it again
// unless Keep() is called: a failed snapshot leaves nothing that blocks a retry.
class SnapshotDir {
 public:
  static absl::StatusOr<std::unique_ptr<SnapshotDir>> Create(const std::string& checkpoint_dir,
                                                             const std::string& subdir) {
    EMBER_RETURN_IF_ERROR(CheckAbsent(checkpoint_dir, subdir));
    const std::filesystem::path path = std::filesystem::path(checkpoint_dir) / subdir;
    std::error_code error;
    std::filesystem::create_directories(path, error);
    if (error) {
      return absl::UnavailableError(
          absl::StrCat("create snapshot directory ", path.string(), ": ", error.message()));
    }
    return std::unique_ptr<SnapshotDir>(new SnapshotDir(path));
  }

  ~SnapshotDir() {
    std::error_code ignored;
    if (!keep_) std::filesystem::remove_all(path_, ignored);
  }

  const std::filesystem::path& path() const { return path_; }
  void Keep() { keep_ = true; }

 private:
  explicit SnapshotDir(std::filesystem::path path) : path_(std::move(path)) {}
  const std::filesystem::path path_;
  bool keep_ = false;
};

// Fills dir, files, bytes and seconds of `snap` from what lies under `subdir`.
absl::Status Describe(const std::string& checkpoint_dir, const std::string& subdir,
                      std::chrono::steady_clock::time_point start, v1::ShardSnapshot* snap) {
  EMBER_ASSIGN_OR_RETURN(std::vector<v1::CheckpointFile> files,
                         DigestFiles(checkpoint_dir, subdir));
  uint64_t bytes = 0;
  for (v1::CheckpointFile& file : files) {
    bytes += file.size();
    *snap->add_files() = std::move(file);
  }
  snap->set_dir(subdir);
  snap->set_bytes(bytes);
  snap->set_seconds(SecondsSince(start));
  return absl::OkStatus();
}

// Rows of `table` that changed, as (slot, id): sorted, that is in row-key order.
using ChangedRows = std::vector<std::pair<uint32_t, uint64_t>>;

// Reads the change log from base_version to the store's version; returns the changed
// rows per table name. OUT_OF_RANGE if the log no longer reaches base_version.
absl::StatusOr<std::vector<std::pair<std::string, ChangedRows>>> ChangedRowsAfter(
    EmbeddingStore& store, uint64_t base_version, uint64_t version) {
  std::vector<std::string> names;
  std::vector<std::vector<uint64_t>> ids;  // by the change log's table index
  for (uint64_t after = base_version; after < version;) {
    EMBER_ASSIGN_OR_RETURN(ChangeBatch batch, store.ReadChanges(after, kChangeBatch));
    if (batch.changes.empty()) break;
    names = std::move(batch.table_names);
    ids.resize(names.size());
    for (const Change& change : batch.changes) {
      if (change.table < ids.size()) ids[change.table].push_back(change.id);  // not a marker
    }
    after = batch.changes.back().version;
  }
  std::vector<std::pair<std::string, ChangedRows>> out;
  for (size_t t = 0; t < names.size(); ++t) {
    if (ids[t].empty()) continue;
    EMBER_ASSIGN_OR_RETURN(const v1::TableConfig config, store.GetTableConfig(names[t]));
    ChangedRows rows;
    rows.reserve(ids[t].size());
    for (uint64_t id : ids[t]) rows.emplace_back(SlotOf(config.seed(), id), id);
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    out.emplace_back(names[t], std::move(rows));
  }
  // Records are sorted by space: tables by name.
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

// Writes every meta key of `backend` as a put in the meta space ("").
absl::Status WriteMetaRecords(RowBackend& backend, DeltaWriter& writer) {
  absl::Status write_status;
  EMBER_RETURN_IF_ERROR(
      backend.Scan(kMetaTable, "", "", [&](std::string_view key, std::string_view value) {
        write_status = writer.Put("", key, value);
        return write_status.ok();
      }));
  return write_status;
}

// Writes the current bytes of each of `rows` of `table` (an erase if it has none).
// Returns the number of records written.
absl::StatusOr<uint64_t> WriteRowRecords(RowBackend& backend, const std::string& table,
                                         const ChangedRows& rows, DeltaWriter& writer) {
  EMBER_ASSIGN_OR_RETURN(const BackendTable handle, backend.OpenTable(table));
  std::vector<std::string> keys;
  std::vector<std::string> values;
  std::vector<bool> found;
  for (size_t begin = 0; begin < rows.size(); begin += kLookupBatch) {
    const size_t end = std::min(rows.size(), begin + kLookupBatch);
    keys.clear();
    for (size_t i = begin; i < end; ++i) keys.push_back(RowKey(rows[i].first, rows[i].second));
    EMBER_RETURN_IF_ERROR(backend.MultiGet(handle, keys, &values, &found));
    for (size_t i = 0; i < keys.size(); ++i) {
      EMBER_RETURN_IF_ERROR(found[i] ? writer.Put(table, keys[i], values[i])
                                     : writer.Erase(table, keys[i]));
    }
  }
  return rows.size();
}

}  // namespace

absl::StatusOr<v1::ShardSnapshot> WriteFullSnapshot(EmbeddingStore& store, RocksDbBackend& backend,
                                                    const std::string& checkpoint_dir,
                                                    const std::string& subdir) {
  const auto start = std::chrono::steady_clock::now();
  EMBER_RETURN_IF_ERROR(CheckAbsent(checkpoint_dir, subdir));
  // Rows, version and sketches reach RocksDB before the checkpoint links its files.
  EMBER_RETURN_IF_ERROR(store.Flush());
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<SnapshotDir> dir,
                         SnapshotDir::Create(checkpoint_dir, subdir));
  EMBER_RETURN_IF_ERROR(backend.CreateCheckpoint((dir->path() / "db").string()));

  // An exact count: RocksDB's estimate-num-keys is approximate.
  uint64_t records = 0;
  for (const std::string& table : backend.ListTables()) {
    EMBER_ASSIGN_OR_RETURN(const BackendTable handle, backend.OpenTable(table));
    EMBER_RETURN_IF_ERROR(backend.Scan(handle, "", "", [&](std::string_view, std::string_view) {
      ++records;
      return true;
    }));
  }
  v1::ShardSnapshot snap;
  snap.set_kind(v1::ShardSnapshot::FULL);
  snap.set_version(store.version());
  snap.set_records(records);
  EMBER_RETURN_IF_ERROR(Describe(checkpoint_dir, subdir, start, &snap));
  dir->Keep();
  return snap;
}

absl::StatusOr<v1::ShardSnapshot> WriteDeltaSnapshot(EmbeddingStore& store, RowBackend& backend,
                                                     uint64_t base_version,
                                                     const std::string& checkpoint_dir,
                                                     const std::string& subdir) {
  const auto start = std::chrono::steady_clock::now();
  if (base_version > store.version()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "delta base version ", base_version, " is above the store's version ", store.version()));
  }
  EMBER_RETURN_IF_ERROR(CheckAbsent(checkpoint_dir, subdir));
  // After the flush the backend holds every row's current bytes (and every removal).
  EMBER_RETURN_IF_ERROR(store.Flush());
  const uint64_t version = store.version();
  EMBER_ASSIGN_OR_RETURN(const auto changed, ChangedRowsAfter(store, base_version, version));

  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<SnapshotDir> dir,
                         SnapshotDir::Create(checkpoint_dir, subdir));
  EMBER_ASSIGN_OR_RETURN(
      std::unique_ptr<DeltaWriter> writer,
      DeltaWriter::Create((dir->path() / kDeltaFileName).string(), base_version, version));
  // The meta space "" sorts before every table name.
  EMBER_RETURN_IF_ERROR(WriteMetaRecords(backend, *writer));
  uint64_t records = 0;
  for (const auto& [table, rows] : changed) {
    EMBER_ASSIGN_OR_RETURN(const uint64_t n, WriteRowRecords(backend, table, rows, *writer));
    records += n;
  }
  EMBER_RETURN_IF_ERROR(writer->Finish());

  v1::ShardSnapshot snap;
  snap.set_kind(v1::ShardSnapshot::DELTA);
  snap.set_version(version);
  snap.set_base_version(base_version);
  snap.set_records(records);
  EMBER_RETURN_IF_ERROR(Describe(checkpoint_dir, subdir, start, &snap));
  dir->Keep();
  return snap;
}

}  // namespace ember
