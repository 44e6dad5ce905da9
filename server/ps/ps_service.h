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
// Hot keys (hotkeys.proto; ps_service_replicas.cc): the service counts the keys of
// every owned Pull and every key it answers from replicas in per-table HeavyHitters
// (HotKeyReport, for the shard agent's heartbeats and GetShardInfo). ApplyHotSet
// installs the coordinator's hot set: the shard then serves replica reads
// (PullRequest.replica_read) from the copies other owners put here (PutReplicas), and
// as an owner copies its hot rows to their holders (ReplicaOwner, replica_owner.h): in
// synchronous mode a Push answers only after every holder acknowledged the new rows.
//
// Jobs (job_store.h): the store passed to the constructor is the default store (job
// ""). With EnableJobStores, a call naming a job (PullRequest.job, ...) is served by
// that job's own store on this shard, opened by CreateTable or RestoreShard naming the
// job: its tables, attempt fence, dedup window, checkpoints and update stream are its
// own. Slot moves carry every store (each migration call names its store; FenceSlots
// drains them all and answers each one's version; a restore of any store counts in
// restores_, which a move's calls check). Hot-key replicas cover the default store only
// for now (docs/ARCHITECTURE.md "Several jobs per PS cluster").
//
// Thread-safety: all methods may be called concurrently. `store` must outlive the
// service and must not be Closed while a call can still arrive.

#ifndef EMBER_SERVER_PS_PS_SERVICE_H_
#define EMBER_SERVER_PS_PS_SERVICE_H_

#include <array>
#include <atomic>
#include <bitset>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/admin_auth.h"
#include "common/hot_set.h"
#include "common/slot.h"
#include "common/slot_map.h"
#include "ember/v1/hotkeys.pb.h"
#include "ember/v1/ps.grpc.pb.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/byte_buffer.h"
#include "server/ps/heavy_hitters.h"
#include "server/ps/inflight_limiter.h"
#include "server/ps/job_store.h"
#include "server/ps/ps_metrics.h"
#include "server/ps/push_dedup.h"
#include "server/ps/replica_owner.h"
#include "server/ps/replica_store.h"
#include "server/ps/watch_slots.h"
#include "server/shared/background_lane.h"
#include "server/shared/shard_storage.h"
#include "server/store/embedding_store.h"

namespace ember {

// Hot-key settings of a shard (ember-ps flags). Plain values; see each default.
struct HotKeyOptions {
  // Per-table heavy hitters (--heavy_hitters_capacity, --heavy_hitters_half_life_s,
  // --heavy_hitters_sample). Default: HeavyHittersOptions' (256 counters, 10 s, 1 key
  // in 16 sampled).
  HeavyHittersOptions heavy_hitters;
  // Keys per table in GetShardInfoResponse.hot_keys. Default: 16 (ember-ps sets
  // --heavy_hitters_report, default 32).
  size_t shard_info_top_n = 16;
  // Owner side: copies to replica holders.
  ReplicaOwnerOptions owner;
  // Synchronous copies: the longest a Push waits for its holders when the client's
  // deadline is later (or unset). Default: 10 s.
  absl::Duration max_copy_wait = absl::Seconds(10);
};

// Pull is a raw method (ByteBuffer in and out): its response is written without
// protobuf copies (common/pull_wire.h); every other method is typed.
class PsServiceImpl final
    : public v1::PsService::WithRawCallbackMethod_Pull<v1::PsService::CallbackService>,
      private ReplicaHost {
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

  // Installs a newer slot map (from the coordinator); an older or equal epoch is
  // ignored. Calls routed with the old epoch are rejected from now on, and migration
  // fences of slots the shard no longer owns are lifted.
  void SetSlotMap(SlotMap slot_map);
  uint32_t shard_id() const { return shard_id_; }
  // Stop(s) replication (the owner's background copies).
  ~PsServiceImpl() override;

  // Bounds the Pull calls and answer bytes in flight (inflight_limiter.h): beyond them a
  // Pull fails RESOURCE_EXHAUSTED with a retry hint. Default: no bound. Call before the
  // server starts.
  void SetInflightLimits(const InflightLimits& limits);
  // Bounds the replica copies' bytes (ReplicaStore::SetMaxBytes): PutReplicas beyond it
  // stores what fits and fails RESOURCE_EXHAUSTED. Default: no bound.
  void SetReplicaBytesLimit(int64_t bytes) { replicas_.SetMaxBytes(bytes); }
  // What the replica copies and the answers in flight hold now (memory_limit.h's
  // metrics); the answers are 0 without SetInflightLimits.
  int64_t replica_bytes() const { return replicas_.bytes(); }
  int64_t inflight_bytes() const { return inflight_ == nullptr ? 0 : inflight_->bytes_in_flight(); }
  // Bounds the WatchUpdates streams (watch_slots.h): in all, per peer, and how long a
  // stream's reader may make no progress. Default: WatchLimits's. Call before the
  // server starts.
  void SetWatchLimits(const WatchLimits& limits);

  // Runs the migration's bulk copy (ExportRows and ImportRows marked `background`) on a
  // thread of its own at `priority` (background_lane.h), so that under contention the
  // training calls get the CPU first. kNormal: on gRPC's threads (the default).
  // ember-ps: --migration_copy_priority. Call before the server starts.
  void SetMigrationCopyPriority(BackgroundPriority priority);

  // Replaces the hot-key settings (HotKeyOptions). Call before the server starts.
  void SetHotKeyOptions(const HotKeyOptions& options);
  // This shard's heavy hitters: per table (ascending name) its top `top_n` keys by
  // descending rate, and total_rate over all tables. For the shard agent's heartbeat.
  v1::HotKeyReport HotKeyReport(size_t top_n) const;
  // Installs a newer hot set from the coordinator (an older or equal version is
  // ignored): replica reads are answered by it from now on, and the owner side fills
  // and drops the copies of this shard's hot keys in the background.
  void ApplyHotSet(const v1::HotSet& hot_set);
  // The hot set applied now (version 0: none). Never null.
  std::shared_ptr<const HotSetView> hot_set() const { return owner_->view(); }
  // Waits until the owner side's background copies (fills, drops, periodic refresh)
  // are all acknowledged, or `timeout` passed; returns whether they are (tests).
  bool WaitForReplicasSettled(absl::Duration timeout) { return owner_->WaitSettled(timeout); }
  // Ends the owner side's copies (pending ones fail); synchronous pushes of hot keys
  // then fail UNAVAILABLE. Call before the store closes. Idempotent.
  void StopReplication() { owner_->Stop(); }

  // Serves CheckpointShard and RestoreShard with `storage` (not owned; it must own the
  // store passed to the constructor and outlive the service). Without it both fail
  // with FAILED_PRECONDITION. Call before the server starts.
  void EnableCheckpoints(ShardStorage* storage);
  // Opens jobs' own stores: `open(job)` opens (creating it when absent) the storage of
  // a valid job name (ember-ps: <data_dir>.jobs/<job>/db, with the shard's options).
  // Without it, a call naming a job fails FAILED_PRECONDITION. Call before the server
  // starts.
  using JobStorageOpener =
      std::function<absl::StatusOr<std::unique_ptr<ShardStorage>>(const std::string& job)>;
  void EnableJobStores(JobStorageOpener open);
  // Opens `job`'s store now (ember-ps: every job store found at start). OK when open.
  absl::Status OpenJobStore(const std::string& job);
  // The jobs with a store of their own here, ascending.
  std::vector<std::string> JobStoreNames() const;
  // The job attempt `job`'s store serves (RestoreShardRequest); 0 until restored, and
  // for a job without a store here.
  uint64_t attempt(const std::string& job = "") const;
  // Random per service object (per process): tells the coordinator it restarted.
  uint64_t incarnation() const { return incarnation_; }
  // The store's version, for the shard agent's heartbeat. Never waits: while a
  // checkpoint or a restore holds the store lock exclusively it returns the version
  // read last (a heartbeat blocked behind a long snapshot would miss the coordinator's
  // heartbeat timeout and fail the running job's attempt).
  uint64_t version() const;
  // Calls `visit` with the default store and its RocksDB (null without checkpoint
  // storage) under the store lock (metrics scrapes: a restore replaces both).
  void WithStore(const PsStoreCollector::Visitor& visit) const;
  // The same for every store, the default's first (memory use).
  void WithEachStore(const PsStoreCollector::Visitor& visit) const;
  // The same for every job's own store, with its job (ascending; metrics scrapes).
  void WithEachJobStore(const PsJobStoresCollector::Visitor& visit) const;

  // `request` holds a PullRequest; `response` gets a PullResponse (pull_wire.h).
  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* context,
                                 const v1::PushRequest* request,
                                 v1::PushResponse* response) override;
  grpc::ServerUnaryReactor* PutReplicas(grpc::CallbackServerContext* context,
                                        const v1::PutReplicasRequest* request,
                                        v1::PutReplicasResponse* response) override;
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
  // Slot migration (ps_service_migrate.cc).
  grpc::ServerUnaryReactor* ExportRows(grpc::CallbackServerContext* context,
                                       const v1::ExportRowsRequest* request,
                                       v1::ExportRowsResponse* response) override;
  grpc::ServerUnaryReactor* ExportChanges(grpc::CallbackServerContext* context,
                                          const v1::ExportChangesRequest* request,
                                          v1::ExportChangesResponse* response) override;
  grpc::ServerUnaryReactor* ImportRows(grpc::CallbackServerContext* context,
                                       const v1::ImportRowsRequest* request,
                                       v1::ImportRowsResponse* response) override;
  grpc::ServerUnaryReactor* FenceSlots(grpc::CallbackServerContext* context,
                                       const v1::FenceSlotsRequest* request,
                                       v1::FenceSlotsResponse* response) override;
  grpc::ServerUnaryReactor* DropSlots(grpc::CallbackServerContext* context,
                                      const v1::DropSlotsRequest* request,
                                      v1::DropSlotsResponse* response) override;
  grpc::ServerUnaryReactor* InstallSlotMap(grpc::CallbackServerContext* context,
                                           const v1::InstallSlotMapRequest* request,
                                           v1::InstallSlotMapResponse* response) override;
  grpc::ServerUnaryReactor* GetSlotStats(grpc::CallbackServerContext* context,
                                         const v1::GetSlotStatsRequest* request,
                                         v1::GetSlotStatsResponse* response) override;

  // The update stream for serving followers and exports (ps_service_watch.cc).
  grpc::ServerWriteReactor<v1::UpdateBatch>* WatchUpdates(
      grpc::CallbackServerContext* context, const v1::WatchUpdatesRequest* request) override;

  // Ends every WatchUpdates stream (UNAVAILABLE) and refuses new ones: call before
  // shutting the server down, so open streams do not hold the shutdown's grace period.
  void StopWatches();

  // The handlers' bodies, without gRPC (also used by in-process tests). DoPush only
  // applies: the copies of hot rows to replica holders are made by the Push handler
  // (with `copy`, DoPush returns the ids the handler must copy: the request's ids
  // after an applied push or a duplicate).
  absl::Status DoPull(const v1::PullRequest& request, v1::PullResponse* response);
  // DoPull with the owner's values written where `allocate(bytes)` says (the Pull
  // handler: an uninitialized slice, once the in-flight bound admits it); its error is
  // the call's. A replica read answers in *replica_response.
  absl::Status DoPullInto(const v1::PullRequest& request, v1::PullResponse* replica_response,
                          absl::FunctionRef<absl::StatusOr<char*>(size_t bytes)> allocate);
  absl::Status DoPush(const v1::PushRequest& request, v1::PushResponse* response,
                      bool* copy = nullptr);
  absl::Status DoPutReplicas(const v1::PutReplicasRequest& request,
                             v1::PutReplicasResponse* response);
  absl::Status DoCreateTable(const v1::CreateTableRequest& request,
                             v1::CreateTableResponse* response);
  absl::Status DoGetShardInfo(const v1::GetShardInfoRequest& request,
                              v1::GetShardInfoResponse* response);
  absl::Status DoChecksum(const v1::ChecksumRequest& request, v1::ChecksumResponse* response);
  absl::Status DoCheckpointShard(const v1::CheckpointShardRequest& request,
                                 v1::CheckpointShardResponse* response);
  absl::Status DoRestoreShard(const v1::RestoreShardRequest& request,
                              v1::RestoreShardResponse* response);
  absl::Status DoExportRows(const v1::ExportRowsRequest& request, v1::ExportRowsResponse* response);
  absl::Status DoExportChanges(const v1::ExportChangesRequest& request,
                               v1::ExportChangesResponse* response);
  absl::Status DoImportRows(const v1::ImportRowsRequest& request, v1::ImportRowsResponse* response);
  absl::Status DoFenceSlots(const v1::FenceSlotsRequest& request, v1::FenceSlotsResponse* response);
  absl::Status DoDropSlots(const v1::DropSlotsRequest& request, v1::DropSlotsResponse* response);
  absl::Status DoInstallSlotMap(const v1::InstallSlotMapRequest& request,
                                v1::InstallSlotMapResponse* response);
  absl::Status DoGetSlotStats(v1::GetSlotStatsResponse* response);

  // Requires an admin credential of `policy` (common/admin_auth.h: the token, or an
  // admin certificate identity) on the calls only the coordinator makes: slot
  // migration (all but GetSlotStats), CheckpointShard and RestoreShard; others get
  // UNAUTHENTICATED or PERMISSION_DENIED. A policy that is not enabled (the default):
  // not required. PutReplicas (shard to shard) requires it too, and this shard's copies
  // carry the token. Call before the server starts.
  void RequireAdmin(AdminPolicy policy);
  // CreateTable needs the cluster token (common/cluster_token.h) or the admin credential
  // (a plaintext shard started with --cluster_token_file). Call before the server starts.
  void RequireClusterToken(std::string token) { cluster_token_ = std::move(token); }
  // The credentials of this shard's channels to other shards (replica copies);
  // default insecure. Call before the server starts.
  void SetPeerCredentials(std::shared_ptr<grpc::ChannelCredentials> credentials);

  // Test hook (fault tests): the process SIGKILLs itself when it receives its
  // `count`th call of `method` (a slot-migration RPC name, e.g. "ExportChanges"),
  // before doing anything. Call before the server starts.
  void CrashOnMigrationCall(std::string method, int count);

 private:
  using SlotSet = std::bitset<kNumSlots>;
  using SlotRanges = std::vector<std::pair<uint32_t, uint32_t>>;
  // Installs a newer map (map_mu_ only); returns the slot ranges it gives this shard
  // from other shards (none at the first assignment).
  SlotRanges InstallMap(SlotMap slot_map);
  // Records a kSlotsGainedMarker entry per range in `job`'s store (its stream resyncs
  // them there).
  static void RecordGained(JobStore& job, const SlotRanges& gained)
      ABSL_SHARED_LOCKS_REQUIRED(job.mu);
  // The same in every store but `held` (whose lock the caller holds), each under its
  // lock in turn.
  void RecordGainedInOthers(const JobStore* held, const SlotRanges& gained);

  // The store of `job` ("": the default one). NOT_FOUND for a job without a store here.
  absl::StatusOr<JobStore*> FindJob(const std::string& job) const;
  // FindJob, opening the job's store when it has none yet (CreateTable, RestoreShard).
  absl::StatusOr<JobStore*> FindOrOpenJob(const std::string& job);
  // Every store, the default's first, then the jobs' ascending.
  std::vector<JobStore*> AllJobs() const;

  std::shared_ptr<const SlotMap> slot_map() const;

  // OK if incarnation/attempt are 0 or this process's and `store`'s (the store the call
  // names; FenceSlots: the default store) and, with an incarnation, `restores` is the
  // count of restores of any store (restores_); ABORTED otherwise.
  absl::Status CheckExpected(const JobStore& store, uint64_t incarnation, uint64_t attempt,
                             uint64_t restores) const;
  // Raises `job`'s attempt to `to` for a shard taking over slots of a running job
  // (InstallSlotMapRequest.attempt, .job_attempts); see the .cc for the one refusal.
  void RaiseAttempt(JobStore& job, uint64_t to);
  // FAILED_PRECONDITION unless every slot of `slots` is owned (`owned`) or not owned
  // (!owned) by this shard in its current map.
  absl::Status CheckOwnership(const SlotSet& slots, bool owned) const;
  // OK when no admin policy is set, else ember::AuthorizeAdmin of the call.
  absl::Status AuthorizeAdmin(const grpc::CallbackServerContext* context) const;
  // Records a Pull/Push call's latency for GetShardInfo.
  void RecordDataCall(int64_t micros);
  // The test hook above; called first by every migration handler.
  void MaybeCrash(absl::string_view method);
  // Finishes a call recorded under the metrics method `method`.
  grpc::ServerUnaryReactor* FinishNamed(grpc::CallbackServerContext* context,
                                        absl::string_view method, int64_t start_micros,
                                        const absl::Status& status,
                                        const google::protobuf::Message& request,
                                        const google::protobuf::Message& response);
  // Runs `run` on the copy lane, which finishes the call (`method` must be a literal);
  // returns the reactor at once.
  template <typename Request, typename Response>
  grpc::ServerUnaryReactor* OnCopyLane(grpc::CallbackServerContext* context,
                                       absl::string_view method, int64_t start_micros,
                                       const Request* request, Response* response,
                                       absl::Status (PsServiceImpl::*run)(const Request&,
                                                                          Response*));
  // The same on a reactor taken already (a call finished on another thread).
  void FinishOn(grpc::ServerUnaryReactor* reactor, grpc::CallbackServerContext* context,
                absl::string_view method, int64_t start_micros, const absl::Status& status,
                const google::protobuf::Message& request,
                const google::protobuf::Message& response);

  // OK if `epoch` is the current one and every id's slot is owned by this shard;
  // UNAVAILABLE if `epoch` is newer than the shard's (its map lags: retry) or an id's
  // slot is fenced by a migration; otherwise FAILED_PRECONDITION with a WrongShard
  // payload. Counts the ids in the slots' load (GetSlotStats).
  absl::Status CheckRouting(uint64_t table_seed, absl::Span<const uint64_t> ids,
                            uint64_t epoch) const;

  // OK for attempt 0 and the shard's attempt; ABORTED for an older one (the job rolled
  // back), UNAVAILABLE for a newer one (this shard is not restored for it yet), except
  // OK when the shard's map (epoch > 0) gives it no slot: routing then redirects.
  absl::Status CheckAttempt(const JobStore& job, uint64_t attempt) const;

  // Starts timing a call: the metrics clock's now, or 0 without metrics.
  int64_t CallStart() const;
  // Records a call of `method` (`rpc` its metrics) that began at `start_micros` and
  // ended with `status` (nothing without metrics).
  void RecordCall(RpcMethodMetrics& (PsMetrics::*rpc)(), absl::string_view method,
                  int64_t start_micros, const absl::Status& status,
                  const google::protobuf::Message& request,
                  const google::protobuf::Message& response);
  // The same with the message sizes (raw methods).
  void RecordCall(RpcMethodMetrics& (PsMetrics::*rpc)(), absl::string_view method,
                  int64_t start_micros, const absl::Status& status, size_t request_bytes,
                  size_t response_bytes);
  // RecordCall, then finishes the call.
  grpc::ServerUnaryReactor* FinishCall(grpc::CallbackServerContext* context,
                                       RpcMethodMetrics& (PsMetrics::*rpc)(),
                                       absl::string_view method, int64_t start_micros,
                                       const absl::Status& status,
                                       const google::protobuf::Message& request,
                                       const google::protobuf::Message& response);

  class WatchReactor;  // ps_service_watch.cc

  // Hot keys (ps_service_replicas.cc).
  // Replaces the owner side with one made from hot_options_, admin_policy_ and
  // peer_credentials_ (before
  // serving only).
  void RebuildReplicaOwner();
  // Replica reads: answers what the replica store may serve (see hotkeys.proto).
  absl::Status DoReplicaPull(const v1::PullRequest& request, v1::PullResponse* response)
      ABSL_SHARED_LOCKS_REQUIRED(default_job_->mu);
  // Counts served keys of `table` in its heavy hitters.
  void RecordServed(const std::string& table, absl::Span<const uint64_t> ids);
  // After a map change: drops held copies whose owner is no longer their slot's owner,
  // and tells the owner side.
  void ReplicasAfterMapChange() ABSL_SHARED_LOCKS_REQUIRED(default_job_->mu);
  // ReplicaHost.
  absl::Status ReadOwnedRows(const std::string& table, std::vector<uint64_t>* ids,
                             v1::PutReplicasRequest* request) override;
  void KeepOwned(const std::string& table, std::vector<uint64_t>* ids) override;
  uint64_t ReplicaAttempt() const override { return attempt(); }

  const uint64_t incarnation_;
  const uint32_t shard_id_;
  const uint32_t max_batch_keys_;
  const uint64_t dedup_window_;
  PsMetrics* const metrics_;  // null: not recorded

  // The stores (job_store.h), by job; "" is the default store. Entries are never
  // removed while the service lives, so a JobStore* stays valid once found.
  mutable absl::Mutex jobs_mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<JobStore>> jobs_ ABSL_GUARDED_BY(jobs_mu_);
  JobStore* const default_job_;  // jobs_[""]
  JobStorageOpener open_job_;    // set before serving; empty: no job stores

  mutable absl::Mutex map_mu_;
  // Replaced whole, never mutated: readers copy the pointer and drop the lock.
  std::shared_ptr<const SlotMap> slot_map_ ABSL_GUARDED_BY(map_mu_);
  // Slots fenced by a migration (FenceSlots): calls touching them get UNAVAILABLE.
  SlotSet fenced_ ABSL_GUARDED_BY(map_mu_);
  std::atomic<bool> any_fenced_{false};

  // Keys pulled + pushed per slot (GetSlotStats), and Pull/Push call counts and
  // latencies (GetShardInfo).
  std::unique_ptr<std::atomic<uint64_t>[]> slot_load_;
  std::atomic<uint64_t> data_calls_{0};
  // Restores of any store that replaced its rows (a chain or `clear`): a slot move
  // that read or wrote rows before one starts over (GetShardInfoResponse.restores).
  std::atomic<uint64_t> restores_{0};
  static constexpr std::array<double, 14> kLatencyBoundsMs = {0.1, 0.25, 0.5, 1,   2.5, 5,    10,
                                                              25,  50,   100, 250, 500, 1000, 5000};
  std::array<std::atomic<uint64_t>, kLatencyBoundsMs.size() + 1> latency_counts_{};

  AdminPolicy admin_policy_;   // set before serving, then read-only
  std::string cluster_token_;  // likewise; empty: CreateTable is open
  std::shared_ptr<grpc::ChannelCredentials> peer_credentials_;  // likewise

  // The update streams (WatchUpdates): each store has its own (JobStore).
  std::atomic<bool> watches_stopped_{false};
  std::atomic<int> active_watches_{0};
  std::unique_ptr<WatchSlots> watch_slots_;  // set before serving
  // Null: no bound on the Pulls in flight. Set before serving.
  std::unique_ptr<InflightLimiter> inflight_;
  absl::Mutex crash_mu_;
  std::string crash_method_ ABSL_GUARDED_BY(crash_mu_);
  int crash_countdown_ ABSL_GUARDED_BY(crash_mu_) = 0;

  // Hot keys. Options are set before serving, then read-only.
  HotKeyOptions hot_options_;
  mutable absl::Mutex hitters_mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<HeavyHitters>> hitters_
      ABSL_GUARDED_BY(hitters_mu_);
  ReplicaStore replicas_;
  std::unique_ptr<ReplicaOwner> owner_;
  // Load since the process started (GetShardInfo).
  std::atomic<uint64_t> pulled_keys_{0};
  std::atomic<uint64_t> pushed_keys_{0};
  std::atomic<uint64_t> replica_pulled_keys_{0};
  // The migration copy's low-priority thread (SetMigrationCopyPriority); null: none. Last,
  // so that it is joined before anything its tasks use goes.
  std::unique_ptr<BackgroundLane> copy_lane_;
};

}  // namespace ember

#endif  // EMBER_SERVER_PS_PS_SERVICE_H_
