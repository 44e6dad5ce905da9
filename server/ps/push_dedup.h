// Copyright 2026 The Ember Authors.
//
// PushDedup: exactly-once pushes (docs/ARCHITECTURE.md invariant 2) on one shard.
//
// Each worker numbers its pushes with a sequence (in [1, 2^63), unique per worker,
// roughly increasing; pipelined pushes may arrive out of order). For every worker the
// shard remembers the highest applied sequence and, for the applied sequences in the
// window (highest - window, highest], their versions and a digest of their payload. A
// push goes through Begin, then the caller applies it and calls Finish:
//
//   EMBER_ASSIGN_OR_RETURN(PushDedup::Ticket t, dedup.Begin(worker, seq, digest));
//   if (t.duplicate) return t.version;            // applied before: do not re-apply
//   absl::Status s = store->Push(...);
//   dedup.Finish(worker, seq, s.ok(), store->version());
//
// The digest (PushDigest in ps_service.cc: table, ids, gradients, encoding, step) tells
// a retry from another push that reuses the (worker, sequence) by mistake: the second
// gets FAILED_PRECONDITION instead of OK with its payload dropped.
//
// Sequences at or above 2^63 are refused (INVALID_ARGUMENT): a jump to the top of the
// range would leave the worker no sequence above its highest, so every later push of
// it would be too old (ABORTED) for as long as the shard lives. Below 2^63 a worker
// whose highest jumped can always go on above it (PsClientOptions.first_sequence).
//
// Expiry. A worker's state is dropped once it has no push in flight and no Begin named
// it for `idle_ttl` (default 1 hour). Dropping it is safe for exactly-once when no
// retry of one of its pushes can arrive after that long: every try of a push calls
// Begin (refreshing the worker), and PsClient retries a push only within the call's
// deadline (PsClientOptions.deadline, default 5 s), so a retry comes at most one call
// budget after the worker's previous try. A client whose call budget exceeds idle_ttl
// could see a retry applied twice. Without expiry the state of every worker id ever
// seen (about 150 bytes each, plus its window) would stay until the shard restarts.
//
// Limits: the state is in memory only (a restarted shard forgets it; jobs survive
// restarts through attempts, invariant 11) and is not moved with slots.
//
// Thread-safety: all methods may be called concurrently (one mutex; O(log window)
// work under it, plus a sweep over all workers at most every idle_ttl / 4).

#ifndef EMBER_SERVER_PS_PUSH_DEDUP_H_
#define EMBER_SERVER_PS_PUSH_DEDUP_H_

#include <cstdint>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace ember {

struct PushDedupOptions {
  // Applied sequences remembered per worker below its highest one. REQUIRES: >= 1.
  // Default: 4096.
  uint64_t window = 4096;
  // A worker with no push in flight and no Begin for this long is forgotten (see
  // "Expiry" above). REQUIRES: > 0. Default: 1 hour.
  absl::Duration idle_ttl = absl::Hours(1);
  // Time source for expiry. Default: the real clock.
  Clock* clock = Clock::Real();
};

class PushDedup {
 public:
  // The largest sequence Begin accepts: 2^63 - 1.
  static constexpr uint64_t kMaxSequence = (uint64_t{1} << 63) - 1;

  explicit PushDedup(const PushDedupOptions& options = {});

  PushDedup(const PushDedup&) = delete;
  PushDedup& operator=(const PushDedup&) = delete;

  struct Ticket {
    bool duplicate = false;  // true: already applied; `version` is its version
    uint64_t version = 0;
  };

  // Starts a push whose payload has `digest`. Returns a duplicate ticket for an applied
  // (worker, sequence) with the same digest; otherwise marks it in flight and returns a
  // fresh ticket: the caller MUST call Finish for it. Errors: INVALID_ARGUMENT for
  // sequence 0 or above kMaxSequence; FAILED_PRECONDITION for an applied or in-flight
  // (worker, sequence) with another digest (naming both); ABORTED for a sequence at or
  // below highest - window (unknown whether it was applied); UNAVAILABLE while the same
  // (worker, sequence, digest) is in flight.
  absl::StatusOr<Ticket> Begin(uint64_t worker_id, uint64_t sequence, uint64_t digest);

  // Ends a push started by a fresh ticket. `applied`: the push took effect, and
  // `version` is what retries will get; otherwise a retry may apply it again.
  void Finish(uint64_t worker_id, uint64_t sequence, bool applied, uint64_t version);

  // Forgets every worker (after a rollback the remembered pushes are not in the rows).
  // REQUIRES: no push in flight.
  void Clear();

  // Workers remembered now (expired ones may linger until the next sweep).
  size_t workers() const;

 private:
  struct Applied {
    uint64_t version;
    uint64_t digest;
  };
  struct WorkerState {
    uint64_t highest = 0;                 // highest applied sequence
    std::map<uint64_t, Applied> applied;  // sequence -> its first application, in the window
    absl::flat_hash_map<uint64_t, uint64_t> in_flight;  // sequence -> digest
    int64_t last_used_micros = 0;                       // the last Begin naming it
  };

  // Drops workers idle for idle_ttl, at most once per idle_ttl / 4.
  void MaybeExpire(int64_t now_micros) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint64_t window_;
  const int64_t idle_ttl_micros_;
  Clock* const clock_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, WorkerState> workers_ ABSL_GUARDED_BY(mu_);
  int64_t last_sweep_micros_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ember

#endif  // EMBER_SERVER_PS_PUSH_DEDUP_H_
