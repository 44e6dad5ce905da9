// Copyright 2026 The Ember Authors.
//
// The Trainer's progress (trainer_internal.h): the evaluations during and at the end of
// the run, rank 0's progress lines, its reports to the coordinator (ReportProgress:
// `emberctl jobs`, the ember_job_* metrics) and the warning when more steps overfit.

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "worker/training/trainer_internal.h"

namespace ember::worker {
namespace trainer_internal {
namespace {

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int s = static_cast<int>(seconds + 0.5);
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, s / 60 % 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%ds", s);
}

}  // namespace

void Trainer::MaybeLog(bool force) {
  if (interval_examples_ == 0 || (!force && step_ % training_.log_every_steps() != 0)) return;
  CurvePoint point;
  point.step = step_;
  point.examples = examples_;
  point.loss = interval_loss_ / interval_examples_;
  curve_.push_back(point);
  result_.final_loss = point.loss;
  interval_loss_ = 0;
  interval_examples_ = 0;
  if (!rank0()) return;
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - start_);
  const double rate = static_cast<double>(examples_ - start_examples_) / std::max(elapsed, 1e-9);
  const uint64_t steps_run = step_ - start_step_;
  const std::string eta = estimated_steps_ > step_ && steps_run > 0
                              ? FormatDuration(elapsed / static_cast<double>(steps_run) *
                                               static_cast<double>(estimated_steps_ - step_))
                              : std::string(estimated_steps_ > 0 ? "0s" : "?");
  log_ << absl::StrFormat("step %6d  examples %9d  %8.0f ex/s  loss %.5f  ETA %s", step_, examples_,
                          rate, point.loss, eta)
       << std::endl;
  ReportProgress(rate, point.loss, /*last=*/false);
}

void Trainer::ReportProgress(double examples_per_sec, double loss, bool last) {
  if (jobs_ == nullptr) return;
  v1::ReportProgressRequest request;
  request.set_job(config_.name());
  request.set_generation(options_.generation);
  request.set_attempt(join_.attempt());
  request.set_rank(0);
  v1::JobProgress& p = *request.mutable_progress();
  p.set_step(step_);
  p.set_examples(examples_);
  p.set_estimated_steps(estimated_steps_);
  p.set_examples_per_sec(std::isfinite(examples_per_sec) ? examples_per_sec : 0);
  p.set_train_loss(std::isfinite(loss) && loss >= 0 ? loss : 0);
  if (last_eval_.has_value() && std::isfinite(last_eval_->auc)) {
    p.set_has_test_auc(true);
    p.set_test_auc(last_eval_->auc);
  }
  // Skipped while the previous report is in flight; the answer is advisory. The run's
  // last report waits a little for the one before it and for its own answer, so that it
  // lands before FinishJob ends the attempt.
  if (!last) {
    jobs_->ReportProgressAsync(request);
    return;
  }
  if (jobs_->ReportProgressAsync(request, absl::Seconds(2), absl::Seconds(2))) {
    jobs_->AwaitProgressReport(absl::Seconds(2)).IgnoreError();
  }
}

void Trainer::WarnIfWorseThanBest(double auc) {
  // More passes over a small dataset overfit the embeddings: the test AUC falls while
  // the training loss still drops, and nothing else would say so.
  constexpr double kMargin = 0.005;
  const CurvePoint* best = nullptr;
  for (size_t i = 0; i + 1 < curve_.size(); ++i) {
    if (curve_[i].test_auc.has_value() &&
        (best == nullptr || *curve_[i].test_auc > *best->test_auc)) {
      best = &curve_[i];
    }
  }
  if (best == nullptr || auc >= *best->test_auc - kMargin || warned_auc_step_ == step_) return;
  warned_auc_step_ = step_;  // the final evaluation may repeat the last step's
  log_ << absl::StrFormat(
              "warning: test AUC %.4f is below the best of this run, %.4f at step %d: further "
              "steps overfit (fewer training.epochs, or a smaller learning rate, keep the "
              "better model)",
              auc, *best->test_auc, best->step)
       << std::endl;
}

bool Trainer::EvaluationWanted() const {
  return !options_.skip_eval && !config_.data().test_path().empty();
}

absl::Status Trainer::MaybeEvaluate() {
  if (!evaluate_next_) return absl::OkStatus();
  evaluate_next_ = false;
  // Every worker's pushes so far are applied before anyone evaluates.
  EMBER_RETURN_IF_ERROR(DrainPushes(0));
  EMBER_RETURN_IF_ERROR(InStage(collective_->Barrier(), "evaluation barrier"));
  return RunEvaluation(/*final=*/false);
}

absl::Status Trainer::FinalEvaluate() {
  // Rank 0 decides (0: none, 1: evaluate, 2: the evaluation at this step saw the final
  // model: reuse it) and tells every worker; this all-reduce follows the final barrier.
  const bool reuse = last_eval_step_.has_value() && *last_eval_step_ == step_ &&
                     last_eval_checkpoint_ == checkpoint_step_;
  std::array<float, 1> decision = {rank0() && EvaluationWanted() ? (reuse ? 2.0f : 1.0f) : 0.0f};
  EMBER_RETURN_IF_ERROR(
      InStage(collective_->AllReduceSum(absl::MakeSpan(decision)), "final evaluation decision"));
  const long what = std::lround(decision[0]);
  if (what == 0) return absl::OkStatus();
  if (what == 1) EMBER_RETURN_IF_ERROR(RunEvaluation(/*final=*/true));
  if (!rank0()) return absl::OkStatus();
  if (last_eval_.has_value()) result_.eval = *last_eval_;
  if (!options_.eval_scores_file.empty()) {
    EMBER_RETURN_IF_ERROR(InStage(WriteScoresFile(options_.eval_scores_file, last_eval_scores_),
                                  "--eval_scores_file"));
  }
  return absl::OkStatus();
}

absl::Status Trainer::RunEvaluation(bool final) {
  // Every rank scores its share; rank 0 gets the metrics (worker/eval/evaluator.h).
  std::vector<float>* scores = options_.eval_scores_file.empty() ? nullptr : &last_eval_scores_;
  absl::StatusOr<TestSetResult> eval =
      Evaluate(config_, layout_, *client_, *tower_, *collective_, scores);
  if (!eval.ok()) return InStage(eval.status(), final ? "final evaluation" : "evaluation");
  // Recorded on every rank alike (the outcome is the same everywhere), so that every
  // rank takes the same decision about the final evaluation.
  last_eval_step_ = step_;
  last_eval_checkpoint_ = checkpoint_step_;
  if (!rank0()) return absl::OkStatus();
  last_eval_ = *eval;
  if (curve_.empty() || curve_.back().step != step_) {
    CurvePoint point;
    point.step = step_;
    point.examples = examples_;
    point.loss = 0;  // an evaluation between progress points: no training loss here
    curve_.push_back(point);
  }
  curve_.back().test_auc = eval->auc;
  curve_.back().test_logloss = eval->logloss;
  log_ << absl::StrFormat("eval at step %d: test AUC %.4f  logloss %.4f", step_, eval->auc,
                          eval->logloss);
  if (eval->oracle_auc.has_value())
    log_ << absl::StrFormat("  (oracle AUC %.4f)", *eval->oracle_auc);
  // Multi-task: each extra task's AUC (rank 0's; nothing printed without tasks).
  for (size_t t = 0; t < eval->tasks.size(); ++t) {
    log_ << absl::StrFormat("  %s AUC %.4f", config_.dense().tasks(static_cast<int>(t)).name(),
                            eval->tasks[t].auc);
    if (eval->tasks[t].oracle_auc.has_value()) {
      log_ << absl::StrFormat(" (oracle %.4f)", *eval->tasks[t].oracle_auc);
    }
  }
  log_ << absl::StrFormat("  [%d examples, %d scored by rank 0 of %d, %.2fs, reading %.2fs]",
                          eval->examples, eval->scored_examples, collective_->world_size(),
                          eval->seconds, eval->read_seconds)
       << std::endl;
  WarnIfWorseThanBest(eval->auc);
  return absl::OkStatus();
}

}  // namespace trainer_internal
}  // namespace ember::worker
