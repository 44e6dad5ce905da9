// Copyright 2026 The Ember Authors.
//
// JobStore: the rows one training job keeps on a PS shard, with everything that
// fences, checkpoints and restores them (docs/ARCHITECTURE.md "Several jobs per PS
// cluster"). A shard hosts the default store (job "": tables created outside any job,
// in --data_dir) and one store per job that named itself (in <data_dir>.jobs/<job>/db),
// each with its own RocksDB, attempt fence, push dedup window and update stream, so
// that a job's restore, fresh start or checkpoint touches only its own rows.
//
// What stays shard-wide (PsServiceImpl): the slot map and the migration fences, the
// hot-key replicas, the call metrics.
//
// Locking: data calls hold `mu` shared; CheckpointShard, RestoreShard and a drain hold
// it exclusively (a restore replaces `store`). `admin_mu` serializes checkpoints and
// restores of the store with each other across their IO. `store` and the stream fields
// are written only under `mu` held exclusively and read under it (shared or more).
//
// Thread-safety: see Locking; `attempt` and `last_version` are atomics.

#ifndef EMBER_SERVER_PS_JOB_STORE_H_
#define EMBER_SERVER_PS_JOB_STORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/slot_map.h"
#include "ember/v1/ps.pb.h"
#include "server/ps/push_dedup.h"
#include "server/shared/shard_storage.h"
#include "server/store/embedding_store.h"

namespace ember {

// Where a WatchUpdates stream starts: the stream id and the version after which it
// is served.
struct StreamStart {
  uint64_t stream_id = 0;
  uint64_t after = 0;
};

// OUT_OF_RANGE: the position (stream, version) is not on shard `shard`'s current
// stream of the store; the follower re-bootstraps.
absl::Status StreamGoneError(uint32_t shard, uint64_t stream, uint64_t version);

struct JobStore {
  // `store` is not owned (the default store: ember-ps's or a test's); `storage`, when
  // given, owns it. A job's own store passes its storage in `owned_storage`.
  JobStore(std::string job, EmbeddingStore* store, uint64_t dedup_window);
  JobStore(std::string job, std::unique_ptr<ShardStorage> owned_storage, uint64_t dedup_window);

  // "job 'NAME'" for messages ("the default store" for job "").
  std::string Describe() const;

  // The store's version without waiting: while `mu` is held exclusively (a checkpoint
  // or a restore), the version read last.
  uint64_t Version() const;

  // Resolves a WatchUpdates position against the current stream: OUT_OF_RANGE
  // (re-bootstrap) when it is not on this store's history. `shard_id` names the shard.
  absl::StatusOr<StreamStart> ResolveStreamPosition(const v1::WatchUpdatesRequest& request,
                                                    uint32_t shard_id) const
      ABSL_SHARED_LOCKS_REQUIRED(mu);
  // Makes the store's backend durable without writing back the memory tier's dirty
  // rows (a migration's imports and drops go straight to the backend; flushing the whole
  // store would also write back every row training dirtied since the last checkpoint).
  absl::Status SyncBackend() ABSL_SHARED_LOCKS_REQUIRED(mu);
  // Starts a new stream, continuing none.
  void StartNewStream() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Starts a new stream after a restore of request's chain for `map`: it continues
  // the checkpoint's stream when the rows are exactly this shard's state at the cut.
  void BeginStreamAfterRestore(const v1::RestoreShardRequest& request, const SlotMap& map,
                               uint32_t shard_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  const std::string job;

  mutable absl::Mutex mu;
  EmbeddingStore* store;  // see Locking
  // Checkpoints and restores; null: a memory-only store (both fail).
  ShardStorage* storage = nullptr;
  std::unique_ptr<ShardStorage> owned_storage;  // a job's own store
  absl::Mutex admin_mu;
  // The job attempt the store serves (RestoreShardRequest); 0 until restored.
  std::atomic<uint64_t> attempt{0};
  mutable std::atomic<uint64_t> last_version{0};  // Version()'s last read
  PushDedup dedup;

  // The update stream (WatchUpdates); see Locking.
  uint64_t stream_id = 0;
  bool stream_origin_empty = false;    // the stream began at version 0 (an empty store)
  uint64_t stream_parent_id = 0;       // restored from (parent id, parent version): a
  uint64_t stream_parent_version = 0;  // position there continues this stream
  uint64_t stream_start_version = 0;   // the store's version when the stream began
  std::string stream_restored_from;    // the checkpoint whose restore began it
};

}  // namespace ember

#endif  // EMBER_SERVER_PS_JOB_STORE_H_
