// Copyright 2026 The Ember Authors.
//
// JobManager: the coordinator's side of training jobs: attempts, checkpoints and
// recovery without a person (coordinator.proto JoinJob; docs/ARCHITECTURE.md invariant 5).
//
// A job run goes through attempts. An attempt starts when every slot-owning PS shard
// has been restored (RestoreShard) to one checkpoint, or told to keep its rows for a
// fresh run, and fenced to the attempt number; workers then join it and resume from
// that checkpoint's step and reader positions. An attempt ends when
//   * a worker reports it failed in it (JoinJob with after_attempt >= it),
//   * a worker process restarts (a rank joins an attempt it already joined),
//   * a shard restarts (its incarnation changes) or stops heartbeating (DEAD).
// The manager's thread then picks the newest valid checkpoint of the run (falling back
// to older ones when a shard finds one corrupt), waits until every slot-owning shard
// is alive, and restores it into a new attempt. Attempt numbers only grow, across
// runs and coordinator restarts, so a shard never accepts a request of an attempt
// that was rolled back.
//
// Checkpoint runs a checkpoint for the running attempt: every slot-owning shard
// writes its snapshot (a delta against the previous checkpoint when it can), the
// worker state is written, and the manifest last. Retention keeps the newest
// `keep_checkpoints` (and the checkpoints their delta chains need).
//
// Job records (generation, attempt, phase, the run's checkpoints, joined ranks) are
// persisted in the coordinator's RocksDB (CoordinatorState KV), so a restarted
// coordinator continues where it stopped; the data plane does not need it meanwhile.
//
// Thread-safety: all methods may be called concurrently.

#ifndef EMBER_SERVER_COORDINATOR_JOB_MANAGER_H_
#define EMBER_SERVER_COORDINATOR_JOB_MANAGER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ember/v1/admin.pb.h"
#include "ember/v1/coordinator.pb.h"
#include "ember/v1/ps.grpc.pb.h"
#include "server/checkpoint/checkpoint_catalog.h"
#include "server/coordinator/coordinator_state.h"

namespace ember {

struct JobManagerOptions {
  // Root of every job's checkpoints; empty disables checkpoints (and with them
  // recovery: a failed attempt then fails the job).
  std::string checkpoint_dir;
  // Checkpoints kept per job (plus the chain links they need). Default: 3
  size_t keep_checkpoints = 3;
  // Every this many checkpoints of a run one is full; the others are deltas against
  // the previous one. 1: all full. Default: 4
  uint32_t full_every = 4;
  // Deadline of one shard's CheckpointShard / RestoreShard. Default: 10 min
  absl::Duration shard_timeout = absl::Minutes(10);
  // Period of the failure detector and recovery loop. Default: 100 ms
  absl::Duration tick = absl::Milliseconds(100);
  // Held while checkpoints are cut and shards restored, so that no slot migration
  // switches owners meanwhile (slot_migrator.h). Not owned; null: none.
  absl::Mutex* topology_mu = nullptr;
  // Elastic runs: once at least min_workers wait, an attempt's world is formed when
  // max_workers wait, when every member the formation expects is back, or when no
  // worker arrived for this long (counted from the attempt's start at the earliest).
  // Default: 5 s
  absl::Duration elastic_settle = absl::Seconds(5);
  // A worker waiting for a place that has not called JoinJob for this long has gone.
  // Default: 20 s (a waiting JoinJob returns every 5 s)
  absl::Duration waiting_expiry = absl::Seconds(20);
};

class JobManager {
 public:
  using StubFactory = std::function<std::shared_ptr<v1::PsService::Stub>(const std::string&)>;

  // `state` (not owned) must outlive the manager. `stubs` returns the PsService stub
  // for a shard address.
  JobManager(CoordinatorState* state, JobManagerOptions options, StubFactory stubs);
  // Stops the thread; waiting JoinJobs return UNAVAILABLE.
  ~JobManager();

  // Loads the persisted job records and starts the recovery thread.
  absl::Status Start();
  void Stop();

  absl::StatusOr<v1::JoinJobResponse> JoinJob(const v1::JoinJobRequest& request,
                                              const std::string& who);
  absl::Status FinishJob(const v1::FinishJobRequest& request);
  absl::StatusOr<v1::CheckpointResponse> Checkpoint(const v1::CheckpointRequest& request);
  absl::StatusOr<v1::GetJobResponse> GetJob(const std::string& job) const;
  // GetJob's answer for `name`. REQUIRES: mu_ held, the job exists.
  v1::GetJobResponse DescribeLocked(const std::string& name) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Marks an on-demand checkpoint for the job's next step barrier. FAILED_PRECONDITION
  // for a FINISHED or FAILED job.
  absl::Status RequestCheckpoint(const std::string& job);
  // Ends the job's RUNNING or RECOVERING run: FAILED with "stopped by an operator:
  // `reason`" (admin.proto StopJob). NOT_FOUND; FAILED_PRECONDITION when not running.
  absl::StatusOr<v1::GetJobResponse> StopJob(const std::string& job, const std::string& reason);

  // Records rank 0's progress of the running attempt (job_manager_progress.cc;
  // coordinator.proto ReportProgress for the errors). GetJob and ListJobs answer it.
  absl::Status ReportProgress(const v1::ReportProgressRequest& request);

  // A shard registered or heartbeated with `incarnation` (0: unknown).
  void OnShardSeen(uint32_t shard_id, uint64_t incarnation);
  // A shard took slots of running jobs (a migration switched them to it): its restart
  // now fails their attempts, as for the shards restored for them.
  void AdoptShard(uint32_t shard_id, uint64_t incarnation);

  // Operator views and actions (job_manager_admin.cc).
  // Every job, ascending by name.
  std::vector<v1::GetJobResponse> ListJobs() const;
  // The job's checkpoints, oldest first (invalid ones with their error).
  // FAILED_PRECONDITION without a checkpoint dir; NOT_FOUND for a job without any.
  absl::StatusOr<std::vector<v1::CheckpointSummary>> ListCheckpoints(const std::string& job) const;
  // Restores every slot-owning shard to `name` (empty: the newest valid checkpoint)
  // under a new attempt. FAILED_PRECONDITION while the job runs or recovers, or
  // without a checkpoint dir; NOT_FOUND; DATA_LOSS for a corrupt checkpoint.
  absl::StatusOr<v1::RestoreCheckpointResponse> RestoreCheckpoint(const std::string& job,
                                                                  const std::string& name);

 private:
  struct Job {
    v1::JobRecord record;
    std::map<uint32_t, uint64_t> incarnations;  // shard -> incarnation restored
    std::set<std::string> bad_checkpoints;      // refused by a shard's restore
    bool checkpoint_requested = false;
    bool checkpointing = false;
    v1::WorkerState restored_state;  // of record.restored_from
    std::string waiting_for;         // what the recovery waits for (JoinJobResponse)
    // Rank 0's last report (not persisted: the next report refills it), of run
    // `progress_generation`.
    std::optional<v1::JobProgress> progress;
    uint64_t progress_generation = 0;
    absl::Time progress_at;  // when it arrived
    // Elastic runs: workers waiting for a place in the attempt's world (not persisted:
    // they call JoinJob again), by member id.
    struct Waiting {
      uint64_t join_at_step = 0;
      absl::Time last_seen;
    };
    std::map<std::string, Waiting> waiting;
    absl::Time last_arrival;  // of a waiting worker
  };

  // Elastic runs (job_manager_elastic.cc).
  // INVALID_ARGUMENT for a bad worker range or member, or a worker whose range or
  // mode differs from the run's; FAILED_PRECONDITION without checkpoints.
  absl::Status CheckElasticRequest(const v1::JoinJobRequest& request) const;
  absl::Status CheckSameMode(const Job& job, const v1::JoinJobRequest& request) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Whether the request's member joined the running attempt from another process (both
  // ids known and different): it restarted, and the attempt ends.
  static bool RestartedLocked(const Job& job, const v1::JoinJobRequest& request);
  // Records `member` as waiting (or seen again) and tries to form the world.
  void WaitForPlaceLocked(Job& job, const v1::JoinJobRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forms the running attempt's world from the waiting workers when the rule allows
  // (JobManagerOptions::elastic_settle): members and world size set, persisted.
  void FormLocked(Job& job, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The rank of `member` in the attempt's world; -1 when it has none.
  static int RankOf(const Job& job, const std::string& member);
  // The alive shards that own slots, or UNAVAILABLE naming a slot owner that is not alive.
  static absl::StatusOr<std::vector<v1::ShardInfo>> SlotOwners(const CoordinatorState& state);
  // Checkpoints a job record lists (the newest; older ones drop off the list).
  static constexpr int kMaxRecordedCheckpoints = 64;
  // What a waiting worker waits for (JoinJobResponse.waiting_for).
  std::string WaitingForLocked(const Job& job, const std::string& member) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Ends the attempt after a resize checkpoint: the next formation expects the
  // members less `leaving_ranks`. REQUIRES: mu_ held, the attempt running.
  void ResizeLocked(Job& job, const v1::CheckpointRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forms the world of every running elastic job that waits for one (Loop).
  void FormWorlds();

  // The job's progress as GetJob answers it (ratio, ETA counted down to `now`; a
  // FINISHED run complete). REQUIRES: mu_ held.
  std::optional<v1::JobProgress> ProgressLocked(const Job& job, absl::Time now) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  // Ends the running attempt of `job`. REQUIRES: mu_ held.
  void FailLocked(Job& job, const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Persists the record. REQUIRES: mu_ held.
  absl::Status PersistLocked(const Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<uint64_t> NextAttemptLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The generation of request.run_id: its run's, or the job's next for an id not seen.
  // FAILED_PRECONDITION for a run superseded since. REQUIRES: mu_ held.
  absl::StatusOr<uint64_t> GenerationOfRunLocked(const v1::JoinJobRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts a new run of request.job (resolving resume_from). REQUIRES: mu_ held.
  absl::Status StartRunLocked(const v1::JoinJobRequest& request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Snapshots every slot-owning shard (deltas against `parent` when possible), then
  // writes the worker state and the manifest.
  absl::StatusOr<v1::CheckpointManifest> WriteCheckpoint(const v1::CheckpointRequest& request,
                                                         const std::string& name,
                                                         const std::string& parent,
                                                         const std::string& tables_job);
  // The store a run's tables live in on the shards (ps.proto PullRequest.job): the
  // job's own with JobRecord.own_tables, else the shared one ("").
  static std::string TablesJob(const v1::JobRecord& record) {
    return record.own_tables() ? record.job() : std::string();
  }
  // WriteCheckpoint's phases. DeltaBases: each shard's version in `parent` when a
  // delta may build on it (the chain is shorter than full_every and of the current
  // epoch); empty for a full checkpoint.
  std::map<uint32_t, uint64_t> DeltaBases(const std::string& job, const std::string& parent);
  // One shard's CheckpointShard call (shard_timeout); errors name the shard.
  absl::StatusOr<v1::ShardSnapshot> SnapshotShard(const v1::ShardInfo& owner,
                                                  const v1::CheckpointShardRequest& request);

  void Loop();
  // Detects failures of running attempts (dead shards).
  void DetectFailures();
  // Tries to restore one recovering job into a new attempt.
  void Recover(const std::string& job);
  // Restores every slot-owning shard's store of `tables_job` (TablesJob; "" the shared
  // one) to `checkpoint` ("" keeps rows; with `clear`, empties every table) for
  // `attempt`. Fills shard incarnations.
  absl::Status RestoreShards(const std::string& job, const std::string& tables_job,
                             const std::string& checkpoint, uint64_t attempt,
                             std::map<uint32_t, uint64_t>* incarnations, bool clear = false);
  // FAILED_PRECONDITION naming the other job when a new run of `request.job()` on the
  // shared tables would meet another job's RUNNING or RECOVERING run on them: the
  // shared store's attempt fence serves one training job at a time. Runs with tables
  // of their own (own_tables) run beside any other.
  absl::Status CheckNoOtherRunLocked(const v1::JoinJobRequest& request) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A new run's JoinJobRequest.rows against the runs this coordinator knows: refuses an
  // unspecified choice once any run trained on the cluster. REQUIRES:
  // CheckNoOtherRunLocked passed (no other job's rows are in use).
  absl::Status CheckStartRowsLocked(const v1::JoinJobRequest& request, bool resumes) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  CoordinatorState* const state_;
  const JobManagerOptions options_;
  const StubFactory stubs_;
  CheckpointCatalog catalog_;

  mutable absl::Mutex mu_;
  std::map<std::string, Job> jobs_ ABSL_GUARDED_BY(mu_);
  uint64_t last_attempt_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ember

#endif  // EMBER_SERVER_COORDINATOR_JOB_MANAGER_H_
