// Copyright 2026 The Ember Authors.
//
// Follower: the state of one `ember-serving` process. It bootstraps its rows from the
// newest checkpoint of a training job, then follows every PS shard's update stream
// (ps.proto WatchUpdates) and applies each message to its own store (the PS storage
// code: an EmbeddingStore, memory tier over RocksDB), so Lookup reads fresh rows.
//
// Positions. For each shard the follower holds a position (stream_id, version): every
// change of that shard up to `version` is applied. A message is applied only if it
// starts exactly at the position (no gap, no overlap); the position then moves to its
// end. Every persist_interval the positions are copied, the store is flushed (applies
// go on meanwhile) and then the positions are written and flushed, so a restarted
// follower resumes at its last persisted position: later messages are fetched again
// and overwrite rows with their current values, which changes nothing.
//
// Bootstrap. At the first start, and whenever a shard answers OUT_OF_RANGE (its
// change log no longer reaches the position, or it restarted or restored), the
// follower imports a checkpoint chain into a staging database while it keeps serving,
// swaps it in, and takes every position from the checkpoint's manifest. The checkpoint
// is the newest whose cut every shard's current stream continues (GetShardInfo says
// where each stream began): after an operator restored an older checkpoint, newer ones
// describe a history the shards no longer have, and the follower imports the restored
// one and follows each stream from where the restore began it. Without any checkpoint
// it starts empty at (stream 0, version 0), which a shard accepts only if its history
// began empty.
//
// Model version: the dense parameters of one checkpoint (the newest, or a pinned one)
// plus the sparse rows; Predict scores with that checkpoint's model (ServedModel),
// loaded together with its dense parameters in one step, so no call sees half of it; with
// max_staleness_steps > 0, a message whose rows were trained more than that many steps after the
// dense tower's step is held until a newer dense tower is loaded (see serving.proto).
//
// Slot moves. A shard leaves out rows of slots it does not own when it reads them and
// holds rows of fenced slots until the move resolves. The shard that gains slots
// resyncs them in its stream at the switch (every row it holds there, then a sweep of
// the follower's rows of those slots that the resync did not name), and the follower
// keeps, per slot, the epoch of the newest resync: rows an older owner read at an
// older epoch never overwrite them, not even a message already past that check when
// the resync arrives (the resync waits for its import, epoch_mu_).
//
// Thread-safety: all public methods may be called concurrently.

#ifndef EMBER_SERVER_SERVING_FOLLOWER_H_
#define EMBER_SERVER_SERVING_FOLLOWER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "ember/v1/ps.grpc.pb.h"
#include "ember/v1/serving.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/security/credentials.h"
#include "server/checkpoint/checkpoint_catalog.h"
#include "server/serving/served_model.h"
#include "server/shared/shard_storage.h"
#include "server/store/embedding_store.h"

namespace ember {

struct FollowerOptions {
  std::string coordinator;      // host:port of the coordinator. Required.
  std::string checkpoint_root;  // the coordinator's --checkpoint_dir. Required.
  // The training job whose checkpoints bootstrap the follower. Empty: the only job
  // directory under checkpoint_root (none yet: start empty and look again later).
  std::string job;
  std::string data_dir;  // the follower's own RocksDB. Required.
  int64_t memory_budget_bytes = int64_t{1} << 30;
  // Ids without a stored row read as zeros instead of the deterministic init vector.
  bool unknown_as_zeros = false;
  uint64_t max_staleness_steps = 0;  // 0: unbounded
  uint32_t max_batch_keys = 100000;
  uint32_t max_predict_rows = 10000;  // rows of one Predict call
  absl::Duration persist_interval = absl::Seconds(5);
  absl::Duration refresh_interval = absl::Seconds(1);  // cluster map and checkpoints
  uint32_t progress_interval_ms = 100;                 // asked of every shard
  uint32_t max_rows_per_message = 4096;
  // Credentials of the channels to the coordinator and the shards (common/tls.h);
  // null: insecure.
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials;
};

class Follower {
 public:
  // Opens data_dir, resumes from its persisted positions or bootstraps, and starts
  // following. Errors: INVALID_ARGUMENT for bad options; storage errors; errors of the
  // first bootstrap (a corrupt checkpoint: DATA_LOSS naming the file).
  static absl::StatusOr<std::unique_ptr<Follower>> Start(const FollowerOptions& options);

  // Stop()s.
  ~Follower();
  Follower(const Follower&) = delete;
  Follower& operator=(const Follower&) = delete;

  // Stops following, persists the positions and closes the store. Idempotent.
  absl::Status Stop();

  // Embeddings of `ids`: ids.size() * dim floats into *out (resized). Returns the
  // number of ids without a stored row. NOT_FOUND (table), INVALID_ARGUMENT (empty or
  // oversized batch), UNAVAILABLE while stopping.
  absl::StatusOr<uint32_t> Lookup(const std::string& table, absl::Span<const uint64_t> ids,
                                  std::vector<float>* out, v1::ModelVersion* version);

  v1::ServingStatus Status() const;
  absl::StatusOr<v1::ListModelVersionsResponse> ListVersions() const;
  absl::StatusOr<v1::ModelVersion> Pin(const std::string& checkpoint);
  absl::StatusOr<v1::GetDenseParametersResponse> DenseParameters() const;
  absl::StatusOr<v1::ChecksumResponse> Checksum(const std::string& table);

  // Scores request.rows with the current model version (serving.proto Predict; the
  // caller checked the deadline) into *response: a probability per row, the refused
  // rows in errors. INVALID_ARGUMENT (no rows, too many, columns that do not fit),
  // UNAVAILABLE (no model version loaded yet, or stopping), FAILED_PRECONDITION (the
  // served checkpoint cannot be scored: ServedModel::Create), storage errors.
  // follower_predict.cc.
  absl::Status Predict(const v1::PredictRequest& request, v1::PredictResponse* response);

  const FollowerOptions& options() const { return options_; }

 private:
  // One followed shard; guarded by mu_.
  struct ShardState {
    uint32_t id = 0;
    std::string address;
    uint64_t stream_id = 0;  // position: every change up to `version` is applied
    uint64_t version = 0;
    uint64_t watermark = 0;  // the shard's newest version in the last message
    double lag_seconds = 0;
    bool connected = false;
    bool held = false;
    bool received = false;  // a message arrived since the last bootstrap
    uint64_t batches = 0, rows = 0, tombstones = 0, reconnects = 0, resyncs = 0;
    std::string last_error;
    grpc::ClientContext* active = nullptr;  // the open stream, cancelled by Stop/Bootstrap
    bool thread_started = false;
    // A slot resync in progress (ps.proto UpdateBatch.resync): its range, the epoch it
    // was read at and the rows it named so far, per table.
    bool resync_active = false;
    uint32_t resync_first = 0, resync_last = 0;
    uint64_t resync_epoch = 0;
    std::map<std::string, absl::flat_hash_set<uint64_t>> resync_seen;
  };
  struct Dense {
    std::string checkpoint;
    uint64_t step = 0;
    std::string parameters;
    uint64_t config_digest = 0;
    // What Predict scores with: the model of the same checkpoint, or why there is none.
    absl::StatusOr<std::shared_ptr<const ServedModel>> model =
        absl::UnavailableError("no model version loaded yet");
  };

  // tests/support/follower_test_peer.h opens a follower without its control loop and
  // feeds Apply stream messages directly (tests/fuzz/serving_fuzz.cc,
  // tests/server/serving/follower_apply_test.cc).
  friend class FollowerTestPeer;

  explicit Follower(const FollowerOptions& options);

  // follower.cc
  absl::Status Open();
  // The job to follow: --job, else the only job directory under checkpoint_root ("" when
  // none yet). FAILED_PRECONDITION naming them when there are several.
  absl::StatusOr<std::string> ResolveJob() const;
  std::string Job() const;  // ResolveJob(), "" on error
  absl::StatusOr<std::vector<v1::CheckpointManifest>> ValidCheckpoints() const;
  // Imports a checkpoint (or starts empty) and resets every position.
  absl::Status Bootstrap();
  // What a shard says of its update stream (ps.proto GetShardInfoResponse.stream_*).
  struct ShardStream {
    uint64_t id = 0;
    uint64_t start_version = 0;
    std::string restored_from;
    uint64_t parent_id = 0, parent_version = 0;
  };
  // Every known shard's stream of the store of `tables_job` (ps.proto
  // GetShardInfoRequest.job). UNAVAILABLE when a shard cannot be asked.
  absl::StatusOr<std::map<uint32_t, ShardStream>> ShardStreams(const std::string& tables_job) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The store the followed job's tables live in, as the coordinator says
  // (GetJobResponse.tables_job); unset when it does not know the job (yet).
  std::optional<std::string> CoordinatorTablesJob() const ABSL_LOCKS_EXCLUDED(mu_);
  // The checkpoint a bootstrap imports and the position it takes on each shard.
  struct BootstrapPlan {
    std::string checkpoint;
    std::map<uint32_t, std::pair<uint64_t, uint64_t>> from;  // shard -> (stream, version)
  };
  // Of the `valid` checkpoints (oldest first, not empty): the newest whose cut every
  // shard's stream continues, else the one every shard's stream began with a restore of
  // (followed from each stream's start), else FAILED_PRECONDITION naming each stream's
  // beginning. When a shard cannot be asked: the newest.
  absl::StatusOr<BootstrapPlan> PlanBootstrap(
      const std::vector<v1::CheckpointManifest>& valid) const ABSL_LOCKS_EXCLUDED(mu_);
  // Writes the positions after flushing the rows they cover; the flush's write-back
  // takes about `spread` (EmbeddingStore::Flush).
  absl::Status PersistState(absl::Duration spread = absl::ZeroDuration())
      ABSL_LOCKS_EXCLUDED(apply_mu_, persist_mu_);
  absl::Status LoadDense(const v1::CheckpointManifest& manifest);
  void ControlLoop();
  void RefreshMap();
  void MaybeAdvanceDense();
  // Logs once per dense checkpoint when the served tower is step 0's (untrained) while
  // the rows applied were trained later.
  void WarnIfUntrainedDense() ABSL_LOCKS_EXCLUDED(mu_);
  v1::ModelVersion VersionLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  // follower_stream.cc
  // The shard's thread: follows its update stream, call after call, until Stop.
  void RunShard(uint32_t shard_id);
  // RunShard's phases. NextRequest: the request from the shard's position, the
  // generation and the shard's address; false once stopping.
  bool NextRequest(uint32_t shard_id, v1::WatchUpdatesRequest* request, uint64_t* generation,
                   std::string* address) ABSL_LOCKS_EXCLUDED(mu_);
  // Applies the call's messages until one fails (then cancels the call) or the stream
  // ends; resets *backoff once a message arrived. Returns the failed Apply's status.
  absl::Status ApplyStream(uint32_t shard_id, uint64_t generation,
                           grpc::ClientReader<v1::UpdateBatch>& reader,
                           grpc::ClientContext& context, absl::Duration* backoff)
      ABSL_LOCKS_EXCLUDED(mu_);
  // What RunShard does after a call ended.
  enum class AfterCall { kStop, kRetryNow, kBackoff };
  // Records how the call ended (last_error, reconnects), asks for a bootstrap on
  // OUT_OF_RANGE (waiting for it a while), else waits `backoff`.
  AfterCall EndCall(uint32_t shard_id, uint64_t generation, const absl::Status& applied,
                    const grpc::Status& finished, absl::Duration backoff) ABSL_LOCKS_EXCLUDED(mu_);
  // Applies one stream message at the shard's position. ABORTED when a bootstrap
  // replaced the store since `generation`; DATA_LOSS for a gap, an overlap or a
  // message of another stream than the call's first (*call_stream; 0 at its start).
  absl::Status Apply(uint32_t shard_id, uint64_t generation, const v1::UpdateBatch& batch,
                     uint64_t* call_stream);
  // Apply's phases. CheckPosition: DATA_LOSS unless `batch` starts exactly at the
  // shard's position, in the call's stream (which it sets when 0).
  absl::Status CheckPosition(uint32_t shard_id, const ShardState& shard,
                             const v1::UpdateBatch& batch, uint64_t* call_stream)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A message of a resync: starts it unless the same range is under way (raising the
  // slots' epochs). DATA_LOSS for a bad slot range.
  absl::Status BeginResync(uint32_t shard_id, ShardState& shard, const v1::UpdateBatch& batch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Advances the shard's position and counters past the applied `batch`.
  void RecordApplied(ShardState& shard, const v1::UpdateBatch& batch, uint64_t rows,
                     uint64_t tombstones, int64_t step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True once `batch` may be applied under the staleness bound (waits otherwise).
  bool WaitForStaleness(ShardState& shard, uint64_t generation, int64_t batch_step);
  absl::Status EnsureTable(const std::string& table) ABSL_SHARED_LOCKS_REQUIRED(store_mu_);
  // Ends a resync with a sweep: removes the follower's rows of the range that the
  // resync did not name (slots a newer owner resynced since are left alone).
  // Returns the number of rows removed.
  absl::StatusOr<uint64_t> SweepResync(const ShardState& shard)
      ABSL_SHARED_LOCKS_REQUIRED(store_mu_);

  const FollowerOptions options_;
  std::unique_ptr<ShardStorage> storage_;
  std::unique_ptr<v1::CoordinatorService::Stub> coordinator_;

  // Lookups and applies hold store_mu_ shared; a bootstrap's swap holds it exclusively.
  mutable absl::Mutex store_mu_;
  // Applies hold apply_mu_ shared; persisting positions holds it exclusively while it
  // copies them, so they cover every row applied before its flush.
  absl::Mutex apply_mu_;
  // The stale-row filter and the import it decides are one step for resyncs: an apply
  // holds epoch_mu_ shared from the filter (slot_epoch_) through its import, a resync
  // message holds it exclusively from raising its slots' epochs through its import and
  // sweep. Without it, another shard's message filtered against the older epochs could
  // land after the resync's rows and bring back values read before the move (soak
  // round 1 of 2026-12-07). Order: apply_mu_, store_mu_, epoch_mu_, mu_.
  absl::Mutex epoch_mu_;
  absl::Mutex persist_mu_;  // one PersistState at a time

  mutable absl::Mutex mu_;
  std::map<uint32_t, std::unique_ptr<ShardState>> shards_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumped by every bootstrap
  std::string bootstrap_checkpoint_ ABSL_GUARDED_BY(mu_);
  uint64_t bootstraps_ ABSL_GUARDED_BY(mu_) = 0;
  bool bootstrap_requested_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, v1::TableConfig> map_tables_ ABSL_GUARDED_BY(mu_);
  // The shards' store followed (ps.proto WatchUpdatesRequest.job): the job's name for a
  // job with tables of its own, "" for the shared tables. A change (the coordinator's
  // run says otherwise) bootstraps again.
  std::string tables_job_ ABSL_GUARDED_BY(mu_);
  Dense dense_ ABSL_GUARDED_BY(mu_);
  std::string pinned_ ABSL_GUARDED_BY(mu_);
  std::string warned_dense_ ABSL_GUARDED_BY(mu_);     // WarnIfUntrainedDense's last warning
  std::string bootstrap_error_ ABSL_GUARDED_BY(mu_);  // the last bootstrap's, "" when it worked
  int64_t sparse_step_ ABSL_GUARDED_BY(mu_) = 0;
  // Per slot, the slot-map epoch of the newest resync applied to it: a message read by
  // a shard at an older epoch (an owner the slot has since moved away from) does not
  // overwrite its rows. Reset by a bootstrap.
  std::vector<uint64_t> slot_epoch_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> lookups_{0};
  std::atomic<uint64_t> predict_rows_scored_{0};
  std::atomic<uint64_t> predict_rows_refused_{0};

  std::thread control_;
  std::vector<std::thread> shard_threads_ ABSL_GUARDED_BY(mu_);
  bool following_ ABSL_GUARDED_BY(mu_) = false;  // shard threads may start
  std::atomic<bool> stopped_{false};
  // Open() succeeded (set before any thread starts): only then does Stop() persist.
  bool opened_ = false;
  // Tests only (FollowerTestPeer; set before any apply runs): called at named points of
  // Apply so that a test can order two shards' applies without sleeping:
  //   "Apply:Filtered"     the stale rows are left out, the import comes next (epoch_mu_
  //                        held shared, or exclusively for a resync);
  //   "Apply:ResyncWaits"  a resync message waits for applies in flight (epoch_mu_).
  std::function<void(const char* point, uint32_t shard_id)> sync_point_;
};

}  // namespace ember

#endif  // EMBER_SERVER_SERVING_FOLLOWER_H_
