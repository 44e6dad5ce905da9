// Copyright 2026 The Ember Authors.
//
// JobManager, part 3: the progress rank 0 reports (ReportProgress) and what GetJob,
// ListJobs and the ember_job_* metrics make of it: the share of the run done and the
// time left, counted down between reports.

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/coordinator/job_manager.h"

namespace ember {
namespace {

// INVALID_ARGUMENT naming the first field that is negative or not finite.
absl::Status CheckNumbers(const v1::JobProgress& p) {
  const std::pair<const char*, double> fields[] = {{"examples_per_sec", p.examples_per_sec()},
                                                   {"train_loss", p.train_loss()},
                                                   {"test_auc", p.test_auc()}};
  for (const auto& [name, value] : fields) {
    if (!std::isfinite(value) || value < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("progress.", name, " must be a finite number >= 0, got ", value));
    }
  }
  if (p.has_test_auc() && p.test_auc() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("progress.test_auc must be within [0, 1], got ", p.test_auc()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status JobManager::ReportProgress(const v1::ReportProgressRequest& request) {
  if (request.rank() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("only rank 0 reports a job's progress, not rank ", request.rank()));
  }
  EMBER_RETURN_IF_ERROR(CheckNumbers(request.progress()));
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(request.job());
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown job '", request.job(), "'"));
  }
  Job& job = it->second;
  if (job.record.generation() != request.generation() ||
      job.record.attempt() != request.attempt() ||
      job.record.phase() != v1::GetJobResponse::RUNNING) {
    return absl::AbortedError(absl::StrCat("attempt ", request.attempt(), " of job '",
                                           request.job(), "' generation ", request.generation(),
                                           " is not running"));
  }
  v1::JobProgress progress = request.progress();
  progress.set_attempt(request.attempt());
  progress.set_reported_unix_ms(absl::ToUnixMillis(now));
  progress.set_workers(job.record.world_size());
  // The ratio and the ETA are the coordinator's (ProgressLocked), from step, speed and
  // the estimate: a worker's own figures would not count down between reports.
  progress.clear_progress_ratio();
  progress.clear_eta_seconds();
  job.progress = std::move(progress);
  job.progress_generation = request.generation();
  job.progress_at = now;
  return absl::OkStatus();
}

std::optional<v1::JobProgress> JobManager::ProgressLocked(const Job& job, absl::Time now) const {
  if (!job.progress.has_value() || job.progress_generation != job.record.generation()) {
    return std::nullopt;
  }
  v1::JobProgress p = *job.progress;
  const bool finished = job.record.phase() == v1::GetJobResponse::FINISHED;
  const double estimated = static_cast<double>(p.estimated_steps());
  double ratio = 0;
  double eta = -1;
  if (finished) {
    ratio = 1;
    eta = 0;
  } else if (estimated > 0) {
    ratio = std::min(1.0, static_cast<double>(p.step()) / estimated);
    // Steps per second from the examples' rate and the mean examples per step so far.
    const double per_step = p.step() > 0 ? static_cast<double>(p.examples()) / p.step() : 0;
    if (per_step > 0 && p.examples_per_sec() > 0) {
      const double left = std::max(0.0, estimated - static_cast<double>(p.step()));
      eta = std::max(0.0, left * per_step / p.examples_per_sec() -
                              absl::ToDoubleSeconds(now - job.progress_at));
    }
  }
  p.set_progress_ratio(ratio);
  p.set_eta_seconds(eta);
  return p;
}

}  // namespace ember
