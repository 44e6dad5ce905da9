// Copyright 2026 The Ember Authors.
//
// Train: one worker's side of a training job (docs/ARCHITECTURE.md "Training loop").
//
//   read -> parse -> unique IDs per table          (BatchPipeline, a loader thread)
//   -> pull rows, grouped per shard, in parallel   (PsClient; prefetched one batch
//                                                   ahead in SSP/ASP)
//   -> pool -> dense forward/backward              (SparseBatch, model::DenseTower)
//   -> all-reduce dense gradients, optimizer step  (Collective, DenseOptimizer)
//   -> push sparse gradients per unique ID         (BSP: summed across workers first)
//
// Every worker of a job runs Train with the same config and its own rank. Workers are
// stateless: the model lives on the PS cluster (sparse) and is replicated across
// workers (dense; every rank applies the same all-reduced gradient to the same
// initial weights, so all ranks hold the same dense weights at every step).
//
// Every worker evaluates its share of the test set (every eval_every_steps and at the
// end; worker/eval/evaluator.h) and rank 0 combines the shares exactly. Rank 0 also
// prints progress lines and writes the run directory: result.json (test AUC and
// logloss, AUC by item-frequency bucket and for cold-start users, the oracle AUC when
// the data has the true probability, examples/s, steps, model checksum),
// metrics.tsv (the curves) and training.svg (their plot).

#ifndef EMBER_WORKER_TRAINING_TRAINER_H_
#define EMBER_WORKER_TRAINING_TRAINER_H_

#include <atomic>
#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ember/v1/coordinator.pb.h"
#include "ember/v1/model.pb.h"
#include "grpcpp/security/credentials.h"
#include "worker/dense/dense_device.h"
#include "worker/eval/evaluator.h"

namespace ember::worker {

struct TrainerOptions {
  v1::ModelConfig config;           // normalized (model::LoadModelConfig)
  std::string coordinator_address;  // required: tables, cluster map, rendezvous
  // Credentials of every channel to the coordinator and the shards (common/tls.h);
  // null: insecure.
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials;
  // The cluster token (--cluster_token_file), sent to the coordinator and the shards.
  std::string cluster_token;
  // The address other workers reach this one at for the all-reduce (Gloo TCP): a
  // name or numeric address of this machine (a pod's IP). Default: loopback.
  std::string collective_host = "127.0.0.1";
  int rank = 0;
  int world_size = 1;
  // Elastic runs (docs/ARCHITECTURE.md "Elastic runs"): max_workers > 0 runs this worker
  // in a run of min_workers..max_workers workers whose world size changes at checkpoints;
  // the coordinator assigns rank and world_size to each attempt (leave them 0 and 1).
  // Default: 0, 0 (a fixed world of world_size workers).
  uint32_t min_workers = 0;
  uint32_t max_workers = 0;
  // Elastic: this process's id in the run, 1..128 bytes, unique per process (required).
  std::string member;
  // Elastic: join a running attempt at a resize at or after this step (0: the next one).
  uint64_t join_at_step = 0;
  // Elastic: leave the run at the checkpoint after this step (0: never), as SIGTERM does.
  uint64_t leave_at_step = 0;
  // Elastic: set when the worker should leave the run at the next step's checkpoint
  // (ember-worker's SIGTERM handler). Not owned; null: none.
  const std::atomic<bool>* leave_requested = nullptr;
  // Rendezvous generation (a restarted job uses a new one). Default: 0.
  uint64_t generation = 0;
  // Instead of `generation` (then 0): the run's id, shared by its workers (a Kubernetes
  // Job's UID); the coordinator allocates the generation (JoinJobRequest.run_id).
  // Default: none.
  std::string run_id;
  // Where rank 0 writes result.json, metrics.tsv and training.svg. Empty: nowhere.
  std::string run_dir;
  // Budget of one pull/push (retries included). Default: 30 s.
  absl::Duration ps_deadline = absl::Seconds(30);
  // Deadline of rendezvous and of every collective operation. A dead peer fails the
  // job within about this long. Default: 60 s.
  absl::Duration collective_timeout = absl::Seconds(60);
  // Prometheus metrics port (0 = ephemeral, -1 = none). Default: -1.
  int metrics_port = -1;
  std::string metrics_host = "127.0.0.1";
  // Where the dense tower runs (worker/dense/dense_device.h). On CUDA the dense
  // gradients are all-reduced with NCCL (DeviceCollective) and the optimizer steps on
  // the device; Gloo still carries the step's small host sums. Default: the CPU.
  DenseTowerOptions dense_device;
  // Skip the test-set evaluation (also at the end). Rank 0's choice counts: it tells
  // every worker when to evaluate. Default: false.
  bool skip_eval = false;
  // Rank 0, at the final evaluation: writes every test example's click probability
  // there, one "%.9g" per line in test-file order (worker/eval/evaluator.h
  // WriteScoresFile). Empty: none. Default: "".
  std::string eval_scores_file;
  // Progress lines go here (rank 0 only). Default: stdout.
  std::ostream* log = nullptr;
  // A new run of the job starts from: "" the PS shards' current rows, "latest" the
  // job's newest checkpoint, or a checkpoint name. Default: "".
  std::string resume_from;
  // A new run without resume_from: train on from the rows the shards hold (CONTINUE) or
  // empty every table first (FRESH). Unspecified: refused by the coordinator once any
  // run trained on the cluster (coordinator.proto JoinJobRequest.rows).
  v1::JoinJobRequest::StartRows start_rows = v1::JoinJobRequest::START_ROWS_UNSPECIFIED;
  // The job's tables are its own (coordinator.proto JoinJobRequest.own_tables): a store
  // of the job's on every shard, so that it trains beside other jobs on the cluster.
  // Default: false (the cluster's shared tables).
  bool own_tables = false;
  // Recoveries (rejoining a restored attempt after a failure) before the worker gives
  // up. Default: 100.
  int max_recoveries = 100;
  // How long a worker waits for a recovery (or a checkpoint) before giving up.
  // Default: 10 min.
  absl::Duration recovery_timeout = absl::Minutes(10);
};

struct TrainResult {
  uint64_t steps = 0;
  uint64_t examples = 0;  // training examples over all workers
  // Per epoch (index), the examples read from the data (replays excluded) summed over
  // workers, across every run and world size the checkpoints carried it through.
  std::vector<uint64_t> examples_per_epoch;
  double train_seconds = 0;     // wall time of the training loop (no final eval)
  double examples_per_sec = 0;  // examples / train_seconds
  double final_loss = 0;        // mean training loss over the last log interval
  TestSetResult eval;           // rank 0, unless skip_eval
  // Digests (rank 0): the sparse model over every shard (PsClient::Checksum, summed
  // over tables), the dense weights, and both combined.
  uint64_t sparse_rows = 0;
  uint64_t sparse_checksum = 0;
  uint64_t dense_checksum = 0;
  uint64_t model_checksum = 0;
  uint64_t malformed_lines = 0;  // this worker's reader
  uint64_t attempt = 0;          // the job attempt that finished the run
  uint64_t recoveries = 0;       // attempts this worker rejoined after a failure
  std::string resumed_from;      // the checkpoint that attempt started from ("" none)
  uint64_t checkpoints = 0;      // checkpoints taken in that attempt
  // Elastic runs: this worker left the run at a resize (it did not finish it; the other
  // fields describe its last attempt up to that checkpoint), and the resizes it took
  // part in.
  bool left = false;
  uint64_t resizes = 0;
  int rank = 0;  // this worker's rank in the attempt that finished the run (or that it left)
  // Skew handling (ModelConfig.skew), over all workers: read examples judged cold,
  // replayed examples trained (included in `examples`), and the hot-row cache's hot-key
  // lookups and hits (`hot_cache`: whether the cache was on).
  uint64_t cold_examples = 0;
  uint64_t resampled_examples = 0;
  bool hot_cache = false;
  uint64_t hot_cache_hits = 0;
  uint64_t hot_cache_lookups = 0;
  // This worker's mean milliseconds per step in each stage of the step: the pull of
  // the batch's rows, the dense tower's forward and backward, the sparse-gradient
  // exchange between workers (0 with one), the push (with the BSP wait for every
  // shard's answer) and the dense all-reduce (with the step barrier).
  double step_pull_ms = 0;
  double step_compute_ms = 0;
  double step_exchange_ms = 0;
  double step_push_ms = 0;
  double step_allreduce_ms = 0;
};

// Runs the job to the end (epochs or max_steps), in attempts (coordinator.proto
// JoinJob): after a failure that a rollback can repair (UNAVAILABLE, DEADLINE_EXCEEDED,
// ABORTED from the PS cluster, the collective or a checkpoint) the worker rejoins the
// job, which the coordinator restores to its newest valid checkpoint, and resumes
// from that checkpoint's step and reader position. In BSP the model is then bitwise
// the one of a run without the failure (docs/ARCHITECTURE.md invariant 5).
// The end: every rank takes part in the final evaluation; rank 0 then checksums the
// model, writes the run directory and records the run's end (FinishJob); the other
// ranks return only once it is recorded (JobClient::AwaitFinished, up to
// recovery_timeout), and rejoin when the attempt was rolled back before. A rejoin after
// the final barrier whose rendezvous times out is not retried (the peers have ended).
// Errors: bad options
// (INVALID_ARGUMENT), the data (reader errors, too many malformed lines), the PS
// cluster (after the client's retries), a peer's failure (the collective's
// DEADLINE_EXCEEDED / UNAVAILABLE), IO errors writing the run directory, rank 0 not
// finishing the run in time (DEADLINE_EXCEEDED, ranks above 0). Each error
// message says which stage failed.
// Elastic runs: an attempt that ends at a resize checkpoint (a worker joins or leaves)
// is not a failure: the staying workers rejoin the next attempt at once, which starts
// from that checkpoint at the new world size, and a leaving worker returns (`left`).
absl::StatusOr<TrainResult> Train(const TrainerOptions& options);

}  // namespace ember::worker

#endif  // EMBER_WORKER_TRAINING_TRAINER_H_
