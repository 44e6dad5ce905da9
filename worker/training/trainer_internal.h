// Copyright 2026 The Ember Authors.
//
// The Trainer behind Train (worker/training/trainer.h): one attempt of one worker. Split by
// concern over trainer.cc (setup, the step loop, evaluation, the result),
// trainer_checkpoint.cc (checkpoints and restoring from one) and trainer_data.cc (the
// data position a checkpoint keeps and a resume continues, at any world size; the epoch's
// examples). Internal to worker/.
//
// Thread-safety: a Trainer runs on one thread (its batch pipeline has its own loader).

#ifndef EMBER_WORKER_TRAINING_TRAINER_INTERNAL_H_
#define EMBER_WORKER_TRAINING_TRAINER_INTERNAL_H_

#include <array>
#include <cstdint>
#include <deque>
#include <iostream>
#include <memory>
#include <optional>
#include <ostream>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/hot_set.h"
#include "common/model/dense_tower.h"
#include "common/ps_client.h"
#include "ember/v1/coordinator.pb.h"
#include "ember/v1/model.pb.h"
#include "worker/collective/collective.h"
#include "worker/collective/device_collective.h"
#include "worker/dense/dense_optimizer.h"
#include "worker/job/job_client.h"
#include "worker/job/run_report.h"
#include "worker/job/worker_metrics.h"
#include "worker/skew/skew_handler.h"
#include "worker/training/batch_pipeline.h"
#include "worker/training/sparse_exchange.h"
#include "worker/training/sparse_features.h"
#include "worker/training/trainer.h"

namespace ember::worker::trainer_internal {

using v1::TrainingConfig;

// Adds the stage to an error's message, keeping its code.
inline absl::Status InStage(const absl::Status& s, absl::string_view stage) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(stage, ": ", s.message()));
}

// A push in flight (SSP/ASP): the batch stays alive until its pushes complete.
struct InFlight {
  uint64_t step = 0;
  std::unique_ptr<PreparedBatch> batch;
  std::vector<PsHandle> handles;
};

class Trainer {
 public:
  // `recoveries`: attempts this worker rejoined before this one.
  Trainer(const TrainerOptions& options, JobClient* jobs, const v1::JoinJobResponse& join,
          uint64_t recoveries)
      : options_(options),
        jobs_(jobs),
        join_(join),
        config_(options.config),
        training_(options.config.training()),
        log_(options.log != nullptr ? *options.log : std::cout),
        layout_(SparseLayout::FromConfig(options.config)) {
    result_.attempt = join.attempt();
    result_.recoveries = recoveries;
    result_.resumed_from = join.checkpoint();
  }

  absl::StatusOr<TrainResult> Run();
  // Elastic runs: the resizes this worker took part in before this attempt.
  void set_resizes(uint64_t resizes) { result_.resizes = resizes; }
  // Whether this attempt's worker rendezvous failed, and whether the attempt got past
  // the final barrier (into the final checkpoint, evaluation and checksum).
  bool rendezvous_failed() const { return rendezvous_failed_; }
  bool passed_final_barrier() const { return passed_final_barrier_; }
  // Elastic runs: whether the attempt ended at a resize checkpoint (Run then returns the
  // result so far, unfinished), and whether this worker leaves the run there.
  bool resized() const { return resized_; }
  bool leaves() const { return leave_next_; }

 private:
  absl::Status Setup();
  // Setup's phases, in order. StartMetrics: serves the metrics (when a port is set).
  absl::Status StartMetrics();
  // Connects to the PS cluster (waits, bounded, for the coordinator's slot map) and
  // creates the model's tables.
  absl::Status ConnectPs();
  // The dense tower and its optimizer.
  absl::Status CreateDense();
  // The worker rendezvous (and NCCL's, for a CUDA tower).
  absl::Status ConnectWorkers();
  // Every rank trains with bitwise the same config, the feature statistics included
  // (FAILED_PRECONDITION naming the rank that differs; one all-to-all of the digests).
  absl::Status CheckSameConfig();
  // Opens this rank's share of the training data, estimates the steps and starts the
  // batch pipeline (at the restored checkpoint's cursor, if any).
  absl::Status OpenTrainingData();
  absl::Status Loop();
  // One training step on `batch`; `global_examples` is the step's batch size summed
  // over workers. Takes ownership of the batch (kept alive by in-flight pushes).
  absl::Status Step(std::unique_ptr<PreparedBatch> batch, double global_examples);
  // Step's phases. PullStep: the batch's pulls (or the prefetched ones), then the
  // prefetch of the next batch's (SSP/ASP).
  absl::Status PullStep(PreparedBatch* batch);
  // Forward and backward through the dense tower and the pooled embeddings; returns
  // this worker's loss sum.
  absl::StatusOr<float> ComputeStep(PreparedBatch* batch, double global_examples);
  // All-reduces the dense gradients with the step's loss sum, the next step's
  // agreement, the checkpoint decision and the skew counts, then steps the dense
  // optimizer. Returns the loss sum over all workers.
  absl::StatusOr<float> ReduceDense(float loss_sum);
  absl::Status PushSparse(std::unique_ptr<PreparedBatch> batch);
  absl::Status DrainPushes(size_t keep);
  absl::Status Finish();
  // Loads the dense model, step and counters of the checkpoint the attempt restored.
  absl::Status Restore(const v1::WorkerState& state);
  // trainer_data.cc. ListTrainingFiles: the names of the training files (data_files_).
  absl::Status ListTrainingFiles();
  // Where this rank's reading continues after the restored checkpoint `state` (at its
  // own or another world size); sets data_progress_. FAILED_PRECONDITION when the
  // training files changed since the checkpoint (naming what changed).
  absl::StatusOr<ResumePoint> DataResumePoint(const v1::WorkerState& state);
  // Rank 0, at a checkpoint: the data files, the epoch's progress and the examples per
  // epoch into `state`.
  void SaveDataPosition(v1::WorkerState* state) const;
  // The batch of a worker whose share of the epoch ran out while others' did not
  // (training.epoch_end LAST_OUT): no example.
  std::unique_ptr<PreparedBatch> EmptyBatch() const;
  // Whether the step agreement `workers_with_data` (of `world`) ends the epoch.
  bool EpochOver(float workers_with_data, int world) const;
  // Adds a step's data examples (its examples less its replays) to its epoch.
  void CountEpochExamples(double global_examples, uint64_t resampled_before);
  // A checkpoint at the current step barrier (every worker calls it at the same step).
  absl::Status TakeCheckpoint();
  // Rank 0: whether a checkpoint is due by time or was requested by an operator.
  bool CheckpointWanted();
  // Elastic runs (trainer_elastic.cc). ElasticVotes: this rank's votes for the step's
  // decisions sum (ReduceDense): 8 to leave, and rank 0's 4 for a waiting worker's join.
  float ElasticVotes();
  // Every rank, from the step's decisions sum: whether the next checkpoint resizes the
  // run and whether this rank leaves at it.
  void ElasticDecision(long decisions);
  // Rank 0: notes the workers waiting to join from the coordinator's view of the job.
  void NotePending(const v1::GetJobResponse& job);
  bool elastic() const { return options_.max_workers > 0; }
  void MaybeLog(bool force);
  // Rank 0: sends the run's progress to the coordinator (JobClient::ReportProgressAsync;
  // `emberctl jobs`, the ember_job_* metrics) without waiting (`last`: the run's
  // final report, which waits up to 2 s for the one before it and for its answer).
  void ReportProgress(double examples_per_sec, double loss, bool last);
  // Rank 0's call: evaluations are wanted (no --skip_eval, a test path).
  bool EvaluationWanted() const;
  // After a step: the periodic evaluation, when the step's all-reduce agreed on one.
  absl::Status MaybeEvaluate();
  // After the final barrier: the final evaluation (or the reuse of the one at this step)
  // as rank 0 decides, and rank 0's --eval_scores_file.
  absl::Status FinalEvaluate();
  // One evaluation, every rank its share (worker/eval/evaluator.h); rank 0 records it.
  absl::Status RunEvaluation(bool final);
  // Rank 0, after an evaluation: warns when `auc` fell clearly below the run's best.
  void WarnIfWorseThanBest(double auc);
  bool rank0() const { return options_.rank == 0; }

  const TrainerOptions& options_;
  JobClient* const jobs_;
  const v1::JoinJobResponse& join_;
  const v1::ModelConfig& config_;
  const TrainingConfig& training_;
  std::ostream& log_;
  SparseLayout layout_;

  std::unique_ptr<PsClient> client_;
  std::unique_ptr<model::DenseTower> tower_;
  std::unique_ptr<DenseOptimizer> optimizer_;
  std::unique_ptr<Collective> collective_;
  std::unique_ptr<DeviceCollective> device_collective_;  // CUDA towers only
  std::unique_ptr<BatchPipeline> pipeline_;
  std::unique_ptr<SkewHandler> skew_;
  std::unique_ptr<WorkerMetrics> metrics_;

  std::vector<float> pooled_, d_pooled_, logits_, reduce_;
  std::vector<float> task_labels_;       // multi-task: [num_tasks x batch] labels of the step
  std::vector<PsHandle> prefetch_;       // pulls of the batch at the pipeline's head
  PreparedBatch* prefetched_ = nullptr;  // that batch
  std::deque<InFlight> in_flight_;
  std::vector<OwnedGradients> owned_;

  uint64_t step_ = 0;
  int epoch_ = 0;
  absl::Time last_checkpoint_ = absl::Now();
  absl::Time next_poll_ = absl::Now() + absl::Seconds(1);
  bool checkpoint_next_ = false;             // agreed by the last step's all-reduce
  // Elastic runs: the next checkpoint resizes the run (agreed by the last step's
  // all-reduce), this rank leaves at it, this rank voted to leave, the attempt ended at
  // a resize; rank 0: the earliest step a waiting worker joins at, and whether it said
  // that leaving ranks must wait for the minimum.
  bool resize_next_ = false;
  bool leave_next_ = false;
  bool voted_leave_ = false;
  bool resized_ = false;
  std::optional<uint64_t> pending_join_step_;
  bool said_min_ = false;
  std::optional<uint64_t> checkpoint_step_;  // step of the last checkpoint taken
  // The last evaluation's step and the last checkpoint before it (every rank), and its
  // metrics and scores (rank 0; the scores only with --eval_scores_file): the final
  // evaluation reuses it when nothing changed since (no step, no checkpoint's eviction).
  std::optional<uint64_t> last_eval_step_;
  std::optional<uint64_t> last_eval_checkpoint_;
  std::optional<TestSetResult> last_eval_;
  std::vector<float> last_eval_scores_;
  bool evaluate_next_ = false;  // agreed by the last step's all-reduce
  bool passed_final_barrier_ = false;
  bool rendezvous_failed_ = false;
  std::optional<uint64_t> warned_auc_step_;  // WarnIfWorseThanBest warned at this step
  uint64_t examples_ = 0;
  // Data examples per epoch, over workers (result.json examples_per_epoch).
  std::vector<uint64_t> epoch_examples_;
  // The training files' names (in the data path) and what world sizes before this
  // attempt's consumed of the epoch data_progress_.epoch (trainer_data.cc).
  std::vector<std::string> data_files_;
  EpochProgress data_progress_;
  // The agreement on the next step (workers with a batch, their examples), carried by
  // the previous step's all-reduce; empty at the start of an epoch.
  std::optional<std::array<float, 2>> next_agreement_;
  uint64_t estimated_steps_ = 0;
  absl::Time start_;
  // examples_ and step_ when this attempt's loop started (after a restore): rates and
  // the ETA count what this attempt trained, not what its checkpoint had.
  uint64_t start_examples_ = 0;
  uint64_t start_step_ = 0;
  // Progress since the last line.
  double interval_loss_ = 0;
  double interval_examples_ = 0;
  std::vector<CurvePoint> curve_;
  // This worker's seconds in pull, compute, all-reduce, push (incl. BSP barrier) and
  // the sparse exchange (inside the push stage's time; subtracted when reported).
  double stage_seconds_[5] = {0, 0, 0, 0, 0};
  TrainResult result_;
};

}  // namespace ember::worker::trainer_internal

#endif  // EMBER_WORKER_TRAINING_TRAINER_INTERNAL_H_
