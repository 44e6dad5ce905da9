// Copyright 2026 The Ember Authors.

#include "server/ps/push_dedup.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ember {

PushDedup::PushDedup(const PushDedupOptions& options)
    : window_(options.window),
      idle_ttl_micros_(absl::ToInt64Microseconds(options.idle_ttl)),
      clock_(options.clock) {}

absl::StatusOr<PushDedup::Ticket> PushDedup::Begin(uint64_t worker_id, uint64_t sequence,
                                                   uint64_t digest) {
  if (sequence == 0) return absl::InvalidArgumentError("push sequence must be >= 1");
  if (sequence > kMaxSequence) {
    return absl::InvalidArgumentError(absl::StrCat("push sequence ", sequence, " of worker ",
                                                   worker_id, " is out of range [1, 2^63)"));
  }
  const int64_t now = clock_->NowMicros();
  absl::MutexLock lock(&mu_);
  MaybeExpire(now);
  WorkerState& state = workers_[worker_id];
  state.last_used_micros = now;
  auto other_payload = [&](absl::string_view what) {
    return absl::FailedPreconditionError(absl::StrCat(
        "push sequence ", sequence, " of worker ", worker_id, " was ", what,
        " with another payload (table, ids, gradients, encoding or step differ): a retry must "
        "resend the same push, a new push needs a new sequence"));
  };
  auto it = state.applied.find(sequence);
  if (it != state.applied.end()) {
    if (it->second.digest != digest) return other_payload("applied");
    return Ticket{/*duplicate=*/true, it->second.version};
  }
  if (state.highest >= window_ && sequence <= state.highest - window_) {
    return absl::AbortedError(absl::StrCat("push sequence ", sequence, " of worker ", worker_id,
                                           " is older than the dedup window (highest ",
                                           state.highest, ")"));
  }
  auto [flight, inserted] = state.in_flight.try_emplace(sequence, digest);
  if (!inserted) {
    if (flight->second != digest) return other_payload("begun");
    return absl::UnavailableError(
        absl::StrCat("push sequence ", sequence, " of worker ", worker_id, " is in flight; retry"));
  }
  return Ticket{};
}

void PushDedup::Finish(uint64_t worker_id, uint64_t sequence, bool applied, uint64_t version) {
  absl::MutexLock lock(&mu_);
  WorkerState& state = workers_[worker_id];
  auto flight = state.in_flight.find(sequence);
  const uint64_t digest = flight == state.in_flight.end() ? 0 : flight->second;
  if (flight != state.in_flight.end()) state.in_flight.erase(flight);
  if (!applied) return;
  state.applied[sequence] = Applied{version, digest};
  if (sequence > state.highest) state.highest = sequence;
  if (state.highest > window_) {
    // Forget sequences that fell out of the window; Begin rejects them with ABORTED.
    state.applied.erase(state.applied.begin(), state.applied.upper_bound(state.highest - window_));
  }
}

void PushDedup::MaybeExpire(int64_t now_micros) {
  if (now_micros - last_sweep_micros_ < std::max<int64_t>(1, idle_ttl_micros_ / 4)) return;
  last_sweep_micros_ = now_micros;
  absl::erase_if(workers_, [&](const auto& entry) {
    const WorkerState& state = entry.second;
    return state.in_flight.empty() && now_micros - state.last_used_micros >= idle_ttl_micros_;
  });
}

void PushDedup::Clear() {
  absl::MutexLock lock(&mu_);
  workers_.clear();
}

size_t PushDedup::workers() const {
  absl::MutexLock lock(&mu_);
  return workers_.size();
}

}  // namespace ember
