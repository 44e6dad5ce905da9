// Copyright 2026 The Ember Authors.

#include "server/ps/push_dedup.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ember {

absl::StatusOr<PushDedup::Ticket> PushDedup::Begin(uint64_t worker_id, uint64_t sequence) {
  if (sequence == 0) return absl::InvalidArgumentError("push sequence must be >= 1");
  absl::MutexLock lock(&mu_);
  WorkerState& state = workers_[worker_id];
  auto it = state.applied.find(sequence);
  if (it != state.applied.end()) return Ticket{/*duplicate=*/true, it->second};
  if (state.highest >= window_ && sequence <= state.highest - window_) {
    return absl::AbortedError(absl::StrCat("push sequence ", sequence, " of worker ", worker_id,
                                           " is older than the dedup window (highest ",
                                           state.highest, ")"));
  }
  if (!state.in_flight.insert(sequence).second) {
    return absl::UnavailableError(
        absl::StrCat("push sequence ", sequence, " of worker ", worker_id, " is in flight; retry"));
  }
  return Ticket{};
}

void PushDedup::Finish(uint64_t worker_id, uint64_t sequence, bool applied, uint64_t version) {
  absl::MutexLock lock(&mu_);
  WorkerState& state = workers_[worker_id];
  state.in_flight.erase(sequence);
  if (!applied) return;
  state.applied[sequence] = version;
  if (sequence > state.highest) state.highest = sequence;
  if (state.highest > window_) {
    // Forget sequences that fell out of the window; Begin rejects them with ABORTED.
    state.applied.erase(state.applied.begin(), state.applied.upper_bound(state.highest - window_));
  }
}

void PushDedup::Clear() {
  absl::MutexLock lock(&mu_);
  workers_.clear();
}

}  // namespace ember
