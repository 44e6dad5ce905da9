// Copyright 2026 The Ember Authors.
//
// PsServiceImpl: the gRPC service of one PS shard (proto/ember/v1/ps.proto) over its
// EmbeddingStore.
//
// Every Pull and Push is validated (byte lengths, encoding), fenced (the request's
// epoch must equal the shard's slot-map epoch and every id's slot must be owned by
// this shard, else FAILED_PRECONDITION with a WrongShard detail, see grpc_status.h),
// deduplicated (pushes, see push_dedup.h) and then applied to the store.
//
// Threading: handlers use the callback API's DefaultReactor and finish inline on the
// gRPC callback thread. Store calls are in-memory work, except that pulls/pushes of
// rows not in the memory tier read RocksDB inline; acceptable for this slice (a miss
// is a bloom-filtered point read), to be moved to an executor if it shows in tails.
//
//   EmbeddingStore* store = ...;
//   PsServiceImpl service(store, /*shard_id=*/0, SlotMap::Even({0}, /*epoch=*/1));
//   grpc::ServerBuilder builder;
//   builder.RegisterService(&service);
//
// Metrics: with a PsMetrics (ps_metrics.h), every call records its latency, status code
// and message bytes, pulls and pushes their rows per table, and the slot-map epoch is
// kept in ember_slot_map_epoch. Without one (null), nothing is recorded.
//
// Thread-safety: all methods may be called concurrently. `store` must outlive the
// service and must not be Closed while a call can still arrive.

#ifndef EMBER_SERVER_PS_PS_SERVICE_H_
#define EMBER_SERVER_PS_PS_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/slot_map.h"
#include "ember/v1/ps.grpc.pb.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "server/embedding_store.h"
#include "server/ps/ps_metrics.h"
#include "server/ps/push_dedup.h"
#include "server/ps/shard_storage.h"

namespace ember {

class PsServiceImpl final : public v1::PsService::CallbackService {
 public:
  static constexpr uint64_t kDefaultDedupWindow = 4096;

  // `store` is not owned. `slot_map` is this shard's view of the cluster map.
  // `metrics` (not owned, may be null) must outlive the service. Pulls and pushes of
  // more than `max_batch_keys` ids fail with INVALID_ARGUMENT (as the store's own
  // StoreOptions.max_batch_keys check does) before anything is allocated for them;
  // pass the store's value. Default: StoreOptions's default.
  PsServiceImpl(EmbeddingStore* store, uint32_t shard_id, SlotMap slot_map,
                uint64_t dedup_window = kDefaultDedupWindow, PsMetrics* metrics = nullptr,
                uint32_t max_batch_keys = StoreOptions().max_batch_keys);

  // Installs a new slot map (from the coordinator). Calls routed with the old epoch
  // are rejected from now on.
  void SetSlotMap(SlotMap slot_map);
  uint32_t shard_id() const { return shard_id_; }

  // Serves CheckpointShard and RestoreShard with `storage` (not owned; it must own the
  // store passed to the constructor and outlive the service). Without it both fail
  // with FAILED_PRECONDITION. Call before the server starts.
  void EnableCheckpoints(ShardStorage* storage);
  // The job attempt the shard serves (RestoreShardRequest); 0 until restored.
  uint64_t attempt() const { return attempt_.load(std::memory_order_acquire); }
  // Random per service object (per process): tells the coordinator it restarted.
  uint64_t incarnation() const { return incarnation_; }
  // The store's version (under the store lock: a restore may be swapping it).
  uint64_t version() const;
  // Calls `visit` with the current store and RocksDB (null without checkpoint storage)
  // under the store lock (metrics scrapes: a restore replaces both).
  void WithStore(const PsStoreCollector::Visitor& visit) const;

  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* context,
                                 const v1::PullRequest* request,
                                 v1::PullResponse* response) override;
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* context,
                                 const v1::PushRequest* request,
                                 v1::PushResponse* response) override;
  grpc::ServerUnaryReactor* CreateTable(grpc::CallbackServerContext* context,
                                        const v1::CreateTableRequest* request,
                                        v1::CreateTableResponse* response) override;
  grpc::ServerUnaryReactor* GetShardInfo(grpc::CallbackServerContext* context,
                                         const v1::GetShardInfoRequest* request,
                                         v1::GetShardInfoResponse* response) override;
  grpc::ServerUnaryReactor* Checksum(grpc::CallbackServerContext* context,
                                     const v1::ChecksumRequest* request,
                                     v1::ChecksumResponse* response) override;
  grpc::ServerUnaryReactor* CheckpointShard(grpc::CallbackServerContext* context,
                                            const v1::CheckpointShardRequest* request,
                                            v1::CheckpointShardResponse* response) override;
  grpc::ServerUnaryReactor* RestoreShard(grpc::CallbackServerContext* context,
                                         const v1::RestoreShardRequest* request,
                                         v1::RestoreShardResponse* response) override;

  // The handlers' bodies, without gRPC (also used by in-process tests).
  absl::Status DoPull(const v1::PullRequest& request, v1::PullResponse* response);
  absl::Status DoPush(const v1::PushRequest& request, v1::PushResponse* response);
  absl::Status DoCreateTable(const v1::CreateTableRequest& request,
                             v1::CreateTableResponse* response);
  absl::Status DoGetShardInfo(v1::GetShardInfoResponse* response);
  absl::Status DoChecksum(const v1::ChecksumRequest& request, v1::ChecksumResponse* response);
  absl::Status DoCheckpointShard(const v1::CheckpointShardRequest& request,
                                 v1::CheckpointShardResponse* response);
  absl::Status DoRestoreShard(const v1::RestoreShardRequest& request,
                              v1::RestoreShardResponse* response);

 private:
  std::shared_ptr<const SlotMap> slot_map() const;

  // OK if `epoch` is the current one and every id's slot is owned by this shard;
  // UNAVAILABLE if `epoch` is newer than the shard's (its map lags: retry);
  // otherwise FAILED_PRECONDITION with a WrongShard payload.
  absl::Status CheckRouting(uint64_t table_seed, absl::Span<const uint64_t> ids,
                            uint64_t epoch) const;

  // OK for attempt 0 and the shard's attempt; ABORTED for an older one (the job rolled
  // back), UNAVAILABLE for a newer one (this shard is not restored for it yet).
  absl::Status CheckAttempt(uint64_t attempt) const;

  // Starts timing a call: the metrics clock's now, or 0 without metrics.
  int64_t CallStart() const;
  // Records a call of `method` (`rpc` its metrics) that began at `start_micros` and
  // ended with `status`, then finishes it. Without metrics only finishes it.
  grpc::ServerUnaryReactor* FinishCall(grpc::CallbackServerContext* context,
                                       RpcMethodMetrics& (PsMetrics::*rpc)(),
                                       absl::string_view method, int64_t start_micros,
                                       const absl::Status& status,
                                       const google::protobuf::Message& request,
                                       const google::protobuf::Message& response);

  // Data calls hold store_mu_ shared; CheckpointShard and RestoreShard hold it
  // exclusively (no push runs during a snapshot; a restore replaces store_).
  mutable absl::Mutex store_mu_;
  EmbeddingStore* store_;  // guarded by store_mu_ (written only under it exclusively)
  ShardStorage* storage_ = nullptr;
  // Serializes CheckpointShard/RestoreShard with each other (held across their IO).
  absl::Mutex admin_mu_;
  std::atomic<uint64_t> attempt_{0};
  const uint64_t incarnation_;
  const uint32_t shard_id_;
  const uint32_t max_batch_keys_;
  PsMetrics* const metrics_;  // null: not recorded
  PushDedup dedup_;

  mutable absl::Mutex map_mu_;
  // Replaced whole, never mutated: readers copy the pointer and drop the lock.
  std::shared_ptr<const SlotMap> slot_map_ ABSL_GUARDED_BY(map_mu_);
};

}  // namespace ember

#endif  // EMBER_SERVER_PS_PS_SERVICE_H_
