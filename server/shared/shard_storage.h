// Copyright 2026 The Ember Authors.
//
// ShardStorage: the RocksDB database and EmbeddingStore of one ember-ps process, with
// what checkpoints need on top: writing this shard's part of a checkpoint (full, or a
// delta against the last checkpoint this process wrote) and rolling the whole store
// back to a checkpoint chain taken on any number of shards.
//
// A restore never damages the current rows when it fails: it imports into a staging
// database next to the live one (<data_dir>.restore), and only once that import is
// complete closes the live store and renames the staging database into its place. A
// process that crashes between the two renames finds <data_dir>.restore at the next
// Open and finishes the swap.
//
//   ShardStorageOptions options;
//   options.rocksdb.path = "/data/ember/shard-0";
//   EMBER_ASSIGN_OR_RETURN(std::unique_ptr<ShardStorage> storage, ShardStorage::Open(options));
//   EmbeddingStore* store = storage->store();
//
// Thread-safety: none of its own. The PS service calls Checkpoint and Restore with
// every other store call excluded (its store lock), and re-reads store() after
// Restore (the old store is destroyed).

#ifndef EMBER_SERVER_SHARED_SHARD_STORAGE_H_
#define EMBER_SERVER_SHARED_SHARD_STORAGE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ember/v1/checkpoint.pb.h"
#include "server/store/embedding_store.h"
#include "server/store/rocksdb_backend.h"

namespace ember {

struct ShardStorageOptions {
  RocksDbOptions rocksdb;  // rocksdb.path is the shard's data directory. Required.
  StoreOptions store;
  // Test hook (fault tests): the process SIGKILLs itself right after writing its Nth
  // checkpoint snapshot, before answering: a crash in the middle of a checkpoint.
  // 0 (default): never.
  int crash_after_checkpoints = 0;
};

struct ShardRestoreReport {
  uint64_t rows = 0;
  uint64_t version = 0;
  double seconds = 0;
};

// A restore imported into the staging database, not yet swapped in.
struct StagedRestore {
  std::vector<v1::TableConfig> tables;  // served after the swap
  uint64_t rows = 0;
  double seconds = 0;
};

class ShardStorage {
 public:
  static absl::StatusOr<std::unique_ptr<ShardStorage>> Open(const ShardStorageOptions& options);
  ~ShardStorage();

  EmbeddingStore* store() const { return store_.get(); }
  RocksDbBackend* rocksdb() const { return rocksdb_; }

  // Writes <checkpoint_dir>/shard-<shard_id>/ (replacing a leftover of an interrupted
  // try): a DELTA against `base_name` when this process wrote that checkpoint (with
  // version base_version) and its change log still reaches back, else FULL.
  //
  // With `evict_step` > 0 (the job's step at this cut), first runs every table's
  // eviction policy (TTL relative to evict_step, minimum count, count decay;
  // EmbeddingStore::Evict): evictions happen at checkpoints, so they are part of the
  // cut, of the update stream (tombstones) and of a restored run alike, and a run
  // that never crashed evicts the same rows at the same steps. `evicted` (optional)
  // receives what it did.
  absl::StatusOr<v1::ShardSnapshot> Checkpoint(uint32_t shard_id, const std::string& checkpoint_dir,
                                               const std::string& name,
                                               const std::string& base_name, uint64_t base_version,
                                               int64_t evict_step = 0,
                                               EvictionReport* evicted = nullptr);

  // Replaces every row with the rows of the slots `owns` accepts from `chain` (full
  // first; chain_dirs[i] is chain[i]'s directory), keeping every table. DATA_LOSS for
  // a corrupt checkpoint and INVALID_ARGUMENT for a malformed chain, with the current
  // rows untouched; IO errors. store() may change even when it fails (a failed swap
  // reopens the old database); it is always an open store afterwards, or the process
  // aborts (ReopenOrDie).
  absl::StatusOr<ShardRestoreReport> Restore(const std::vector<v1::CheckpointManifest>& chain,
                                             const std::vector<std::string>& chain_dirs,
                                             const std::function<bool(uint32_t slot)>& owns);

  // Restore in two steps, for callers that keep serving the live store while the
  // import runs (ember-serving): StageRestore imports into the staging database and
  // touches nothing live (the live store may be used meanwhile); CommitRestore then
  // swaps it in (the caller excludes every other store call, as for Restore).
  absl::StatusOr<StagedRestore> StageRestore(const std::vector<v1::CheckpointManifest>& chain,
                                             const std::vector<std::string>& chain_dirs,
                                             const std::function<bool(uint32_t slot)>& owns);
  absl::StatusOr<ShardRestoreReport> CommitRestore(const StagedRestore& staged);

  // Empties every table, as on a new shard (a run started with rows=fresh): the tables
  // stay with their configs, their rows, admission sketches and version go, and the
  // next checkpoint is full. store() changes; IO errors leave the rows as they were.
  // The caller excludes every other store call, as for Restore.
  absl::Status Clear();

  // Flushes and closes the store.
  absl::Status Close();

 private:
  explicit ShardStorage(const ShardStorageOptions& options) : options_(options) {}
  // Opens the database at options_.rocksdb.path and a store over it.
  absl::Status OpenStore();
  // OpenStore and CreateTable(tables), retried kReopenAttempts times (a disk that
  // fails now and then); aborts the process when the store still does not open, since
  // the live store is closed by then and nothing could be served.
  void ReopenOrDie(const std::vector<v1::TableConfig>& tables);
  // The live store's table configs.
  absl::StatusOr<std::vector<v1::TableConfig>> TableConfigs() const;
  // Closes the store and renames its database to PATH.old; when the rename fails,
  // reopens it in place (ReopenOrDie) and returns the error.
  absl::Status CloseAndMoveAside(const std::vector<v1::TableConfig>& tables);
  static constexpr int kReopenAttempts = 10;

  const ShardStorageOptions options_;
  RocksDbBackend* rocksdb_ = nullptr;  // owned by store_
  std::unique_ptr<EmbeddingStore> store_;
  // The last checkpoint this process wrote, the base of the next delta.
  std::string last_checkpoint_;
  uint64_t last_checkpoint_version_ = 0;
  int checkpoints_written_ = 0;
};

}  // namespace ember

#endif  // EMBER_SERVER_SHARED_SHARD_STORAGE_H_
