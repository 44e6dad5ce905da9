// Copyright 2026 The Ember Authors.
//
// PushDedup: exactly-once pushes (docs/ARCHITECTURE.md invariant 2) on one shard.
//
// Each worker numbers its pushes with a sequence (>= 1, unique per worker, roughly
// increasing; pipelined pushes may arrive out of order). For every worker the shard
// remembers the highest applied sequence and the versions of the applied sequences in
// the window (highest - window, highest]. A push goes through Begin, then the caller
// applies it and calls Finish:
//
//   EMBER_ASSIGN_OR_RETURN(PushDedup::Ticket t, dedup.Begin(worker, seq));
//   if (t.duplicate) return t.version;            // applied before: do not re-apply
//   absl::Status s = store->Push(...);
//   dedup.Finish(worker, seq, s.ok(), store->version());
//
// Limits of this slice: the state is in memory only (a restarted shard forgets it),
// is not moved with slots, and the number of workers is unbounded.
//
// Thread-safety: all methods may be called concurrently (one mutex; O(log window)
// work under it).

#ifndef EMBER_SERVER_PS_PUSH_DEDUP_H_
#define EMBER_SERVER_PS_PUSH_DEDUP_H_

#include <cstdint>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace ember {

class PushDedup {
 public:
  // `window`: applied sequences remembered per worker below its highest one.
  // REQUIRES: window >= 1. Default: 4096.
  explicit PushDedup(uint64_t window = 4096) : window_(window) {}

  PushDedup(const PushDedup&) = delete;
  PushDedup& operator=(const PushDedup&) = delete;

  struct Ticket {
    bool duplicate = false;  // true: already applied; `version` is its version
    uint64_t version = 0;
  };

  // Starts a push. Returns a duplicate ticket for an applied (worker, sequence);
  // otherwise marks it in flight and returns a fresh ticket: the caller MUST call
  // Finish for it. Errors: INVALID_ARGUMENT for sequence 0; ABORTED for a sequence at
  // or below highest - window (unknown whether it was applied); UNAVAILABLE while the
  // same (worker, sequence) is in flight.
  absl::StatusOr<Ticket> Begin(uint64_t worker_id, uint64_t sequence);

  // Ends a push started by a fresh ticket. `applied`: the push took effect, and
  // `version` is what retries will get; otherwise a retry may apply it again.
  void Finish(uint64_t worker_id, uint64_t sequence, bool applied, uint64_t version);

  // Forgets every worker (after a rollback the remembered pushes are not in the rows).
  // REQUIRES: no push in flight.
  void Clear();

 private:
  struct WorkerState {
    uint64_t highest = 0;                  // highest applied sequence
    std::map<uint64_t, uint64_t> applied;  // sequence -> version, within the window
    absl::flat_hash_set<uint64_t> in_flight;
  };

  const uint64_t window_;
  absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, WorkerState> workers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ember

#endif  // EMBER_SERVER_PS_PUSH_DEDUP_H_
