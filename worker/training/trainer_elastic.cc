// Copyright 2026 The Ember Authors.
//
// The Trainer's part of elastic runs (docs/ARCHITECTURE.md "Elastic runs"): the votes
// that end an attempt at a resize checkpoint when a worker waits to join or asks to
// leave. Every rank decides the same from one all-reduced sum (ReduceDense), so that
// every rank takes the same checkpoint at the same step and a schedule of joins and
// leaves at given steps gives the same model in every run.

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "worker/training/trainer_internal.h"

namespace ember::worker::trainer_internal {

float Trainer::ElasticVotes() {
  if (!elastic()) return 0.0f;
  // The step being taken is step_ + 1; the checkpoint after it carries the change.
  const uint64_t step = step_ + 1;
  voted_leave_ = (options_.leave_requested != nullptr && options_.leave_requested->load()) ||
                 (options_.leave_at_step > 0 && step >= options_.leave_at_step);
  float votes = voted_leave_ ? 8.0f : 0.0f;
  if (rank0() && pending_join_step_.has_value() && *pending_join_step_ <= step &&
      static_cast<uint32_t>(options_.world_size) < options_.max_workers) {
    votes += 4.0f;
  }
  return votes;
}

void Trainer::ElasticDecision(long decisions) {
  if (!elastic()) return;
  const long leavers = decisions >> 3;
  const bool join = ((decisions >> 2) & 1) != 0;
  // Leaving ranks wait while the rest would be fewer than the run's minimum (a worker
  // that joins first makes room); SIGTERM'd workers keep training meanwhile.
  const bool may_leave = leavers > 0 && options_.world_size - leavers >=
                                            static_cast<long>(options_.min_workers);
  if (leavers > 0 && !may_leave && rank0() && !said_min_) {
    said_min_ = true;
    log_ << "elastic: " << leavers << " worker(s) asked to leave at step " << step_
         << ", but the run needs at least " << options_.min_workers << " of its "
         << options_.world_size << "; they train on until workers join" << std::endl;
  }
  resize_next_ = join || may_leave;
  leave_next_ = may_leave && voted_leave_;
  checkpoint_next_ = checkpoint_next_ || resize_next_;
}

void Trainer::NotePending(const v1::GetJobResponse& job) {
  if (!elastic()) return;
  pending_join_step_.reset();
  for (const v1::PendingWorker& p : job.pending()) {
    pending_join_step_ = std::min(pending_join_step_.value_or(p.join_at_step()), p.join_at_step());
  }
}

}  // namespace ember::worker::trainer_internal
