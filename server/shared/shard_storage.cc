// Copyright 2026 The Ember Authors.

#include "server/shared/shard_storage.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "server/checkpoint/shard_snapshot.h"
#include "server/shared/slot_owners.h"

namespace ember {
namespace {

namespace fs = std::filesystem;

absl::Status FsError(const std::error_code& ec, absl::string_view what, const fs::path& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path.string(), ": ", ec.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShardStorage>> ShardStorage::Open(
    const ShardStorageOptions& options) {
  if (options.rocksdb.path.empty()) return absl::InvalidArgumentError("data directory is empty");
  std::unique_ptr<ShardStorage> storage(new ShardStorage(options));
  // Finish a restore interrupted between closing the old database and renaming the
  // staging one into place.
  const fs::path live(options.rocksdb.path);
  const fs::path staged(options.rocksdb.path + ".restore");
  std::error_code ec;
  if (!fs::exists(live, ec) && fs::exists(staged, ec)) {
    fs::rename(staged, live, ec);
    if (ec) return FsError(ec, "cannot finish the interrupted restore of", live);
  }
  EMBER_RETURN_IF_ERROR(storage->OpenStore());
  return storage;
}

ShardStorage::~ShardStorage() = default;

absl::Status ShardStorage::OpenStore() {
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<RocksDbBackend> backend,
                         RocksDbBackend::Open(options_.rocksdb));
  RocksDbBackend* raw = backend.get();
  EMBER_ASSIGN_OR_RETURN(store_, EmbeddingStore::Open(options_.store, std::move(backend)));
  rocksdb_ = raw;
  return absl::OkStatus();
}

absl::StatusOr<v1::ShardSnapshot> ShardStorage::Checkpoint(
    uint32_t shard_id, const std::string& checkpoint_dir, const std::string& name,
    const std::string& base_name, uint64_t base_version, int64_t evict_step,
    EvictionReport* evicted) {
  if (evict_step > 0) {
    EMBER_ASSIGN_OR_RETURN(EvictionReport report, store_->Evict(evict_step));
    if (evicted != nullptr) *evicted = report;
  }
  const std::string subdir = absl::StrCat("shard-", shard_id);
  std::error_code ec;
  fs::remove_all(fs::path(checkpoint_dir) / subdir, ec);  // a leftover of an earlier try
  if (ec) return FsError(ec, "cannot clear", fs::path(checkpoint_dir) / subdir);
  fs::create_directories(checkpoint_dir, ec);
  if (ec) return FsError(ec, "cannot create", fs::path(checkpoint_dir));

  absl::StatusOr<v1::ShardSnapshot> snapshot = absl::OutOfRangeError("no base");
  if (!base_name.empty() && base_name == last_checkpoint_ &&
      base_version == last_checkpoint_version_) {
    // A failed write removes what it created, so a full one can follow.
    snapshot = WriteDeltaSnapshot(*store_, *rocksdb_, base_version, checkpoint_dir, subdir);
  }
  if (!snapshot.ok() && absl::IsOutOfRange(snapshot.status())) {
    snapshot = WriteFullSnapshot(*store_, *rocksdb_, checkpoint_dir, subdir);
  }
  if (!snapshot.ok()) return snapshot.status();
  snapshot->set_shard_id(shard_id);
  if (++checkpoints_written_ == options_.crash_after_checkpoints) kill(getpid(), SIGKILL);
  last_checkpoint_ = name;
  last_checkpoint_version_ = snapshot->version();
  return snapshot;
}

absl::StatusOr<ShardRestoreReport> ShardStorage::Restore(
    const std::vector<v1::CheckpointManifest>& chain, const std::vector<std::string>& chain_dirs,
    const std::function<bool(uint32_t slot)>& owns) {
  EMBER_ASSIGN_OR_RETURN(StagedRestore staged, StageRestore(chain, chain_dirs, owns));
  return CommitRestore(staged);
}

absl::StatusOr<StagedRestore> ShardStorage::StageRestore(
    const std::vector<v1::CheckpointManifest>& chain, const std::vector<std::string>& chain_dirs,
    const std::function<bool(uint32_t slot)>& owns) {
  if (chain.empty() || chain.size() != chain_dirs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("restore chain of ", chain.size(),
                                                   " checkpoint(s) with ", chain_dirs.size(),
                                                   " directories"));
  }
  const absl::Time start = absl::Now();
  // Every table the shard serves now or the checkpoint holds is served after it.
  std::vector<v1::TableConfig> tables;
  std::set<std::string> names;
  for (const std::string& t : store_->ListTables()) {
    EMBER_ASSIGN_OR_RETURN(v1::TableConfig config, store_->GetTableConfig(t));
    if (names.insert(config.name()).second) tables.push_back(std::move(config));
  }
  for (const v1::TableConfig& config : chain.back().tables()) {
    if (names.insert(config.name()).second) tables.push_back(config);
  }

  std::vector<SnapshotChainLink> links;
  for (size_t i = 0; i < chain.size(); ++i) {
    SnapshotChainLink link;
    link.checkpoint_dir = chain_dirs[i];
    link.shards.assign(chain[i].shards().begin(), chain[i].shards().end());
    if (!chain[i].slot_owners().empty()) {
      EMBER_ASSIGN_OR_RETURN(const SlotMap map,
                             UnpackSlotOwners(chain[i].slot_owners(), chain[i].epoch()));
      link.owners = map.owners();
    }
    links.push_back(std::move(link));
  }

  // Import into a staging database: the live rows stay intact until it is complete.
  const fs::path staged(options_.rocksdb.path + ".restore");
  std::error_code ec;
  fs::remove_all(staged, ec);
  if (ec) return FsError(ec, "cannot clear", staged);
  ImportReport report;
  {
    RocksDbOptions staging_options = options_.rocksdb;
    staging_options.path = staged.string();
    staging_options.enable_wal = false;  // made durable by the import's final flush
    EMBER_ASSIGN_OR_RETURN(std::unique_ptr<RocksDbBackend> staging,
                           RocksDbBackend::Open(staging_options));
    absl::StatusOr<ImportReport> imported = ImportSnapshots(links, owns, *staging);
    if (!imported.ok()) {
      staging.reset();
      fs::remove_all(staged, ec);
      return imported.status();
    }
    report = *imported;
  }
  StagedRestore out;
  out.tables = std::move(tables);
  out.rows = report.rows;
  out.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return out;
}

absl::StatusOr<ShardRestoreReport> ShardStorage::CommitRestore(const StagedRestore& staged) {
  const absl::Time start = absl::Now();
  const fs::path live(options_.rocksdb.path);
  const fs::path staged_path(options_.rocksdb.path + ".restore");
  std::error_code ec;
  if (!fs::exists(staged_path, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("no staged restore at ", staged_path.string()));
  }
  // Swap: close the live store, move the staging database into its place. From here
  // on the shard must end with an open store, the restored one or (when a rename fails)
  // the old one: callers keep serving from store().
  EMBER_ASSIGN_OR_RETURN(const std::vector<v1::TableConfig> live_tables, TableConfigs());
  EMBER_RETURN_IF_ERROR(CloseAndMoveAside(live_tables));
  const fs::path old(options_.rocksdb.path + ".old");
  fs::rename(staged_path, live, ec);
  if (ec) {
    const absl::Status failed = FsError(ec, "cannot move the restored database to", live);
    fs::rename(old, live, ec);
    ReopenOrDie(live_tables);
    return failed;
  }
  fs::remove_all(old, ec);
  ReopenOrDie(staged.tables);
  // The change log restarted: no delta can build on a checkpoint written before.
  last_checkpoint_.clear();
  last_checkpoint_version_ = 0;

  ShardRestoreReport out;
  out.rows = staged.rows;
  out.version = store_->version();
  out.seconds = staged.seconds + absl::ToDoubleSeconds(absl::Now() - start);
  return out;
}

absl::Status ShardStorage::Clear() {
  EMBER_ASSIGN_OR_RETURN(const std::vector<v1::TableConfig> tables, TableConfigs());
  EMBER_RETURN_IF_ERROR(CloseAndMoveAside(tables));
  std::error_code ec;
  fs::remove_all(options_.rocksdb.path + ".old", ec);  // else the next Clear or restore does
  ReopenOrDie(tables);
  last_checkpoint_.clear();
  last_checkpoint_version_ = 0;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::TableConfig>> ShardStorage::TableConfigs() const {
  std::vector<v1::TableConfig> tables;
  for (const std::string& t : store_->ListTables()) {
    EMBER_ASSIGN_OR_RETURN(v1::TableConfig config, store_->GetTableConfig(t));
    tables.push_back(std::move(config));
  }
  return tables;
}

absl::Status ShardStorage::CloseAndMoveAside(const std::vector<v1::TableConfig>& tables) {
  const fs::path live(options_.rocksdb.path);
  const fs::path old(options_.rocksdb.path + ".old");
  store_.reset();
  rocksdb_ = nullptr;
  std::error_code ec;
  fs::remove_all(old, ec);
  fs::rename(live, old, ec);
  if (ec) {
    const absl::Status failed = FsError(ec, "cannot move aside", live);
    ReopenOrDie(tables);
    return failed;
  }
  return absl::OkStatus();
}

void ShardStorage::ReopenOrDie(const std::vector<v1::TableConfig>& tables) {
  absl::Status reopened;
  for (int attempt = 0; attempt < kReopenAttempts; ++attempt) {
    if (attempt > 0) absl::SleepFor(absl::Milliseconds(100) * attempt);
    store_.reset();
    rocksdb_ = nullptr;
    reopened = OpenStore();
    for (size_t i = 0; reopened.ok() && i < tables.size(); ++i) {
      reopened = store_->CreateTable(tables[i]);
    }
    if (reopened.ok()) return;
    EMBER_LOG(WARNING) << "reopening " << options_.rocksdb.path
                       << " after a restore swap: " << reopened;
  }
  // No store at all: nothing this process could serve. Its supervisor restarts it on
  // the same directory, and the coordinator restores it again.
  EMBER_LOG(ERROR) << "FATAL: no store after a restore swap (" << reopened << ")";
  std::abort();
}

absl::Status ShardStorage::Close() {
  if (store_ == nullptr) return absl::FailedPreconditionError("store is closed");
  return store_->Close();
}

}  // namespace ember
