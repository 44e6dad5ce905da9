// Copyright 2026 The Ember Authors.
//
// ReplicaOwner: the owner side of hot-key replication (hotkeys.proto, steps 4-5) for
// one PS shard. It holds the shard's current hot set and copies the rows of the hot
// keys this shard owns to their replica holders (PsService.PutReplicas):
//
//  * Synchronous mode (HotSet.refresh_interval_ms == 0): AfterPush copies the pushed
//    hot rows to every holder and reports when all acknowledged, so the Push can
//    answer only then (replica reads after a push are exact). It never blocks: the
//    copies are async calls (ReplicaSender) and `done` runs on a gRPC thread.
//  * Periodic mode (> 0): AfterPush only marks the rows; a background thread copies
//    the marked rows every refresh_interval_ms (failed ones are retried next pass).
//  * A new hot set (SetHotSet): the background thread copies the current rows of
//    newly hot keys (or of every hot key, when the holders changed) to the holders
//    ("fill"), and sends `drop` for keys that stopped being hot (or holders that
//    stopped holding them). A key is copied to a former holder, too, until that
//    holder acknowledged the drop, so no holder keeps serving a copy nobody refreshes.
//  * Rows that change without a push (restore, eviction, slots gained by a move):
//    RefillAll re-copies every hot key the shard owns; MapChanged also drops copies of
//    keys the shard no longer owns.
//
// Which holders may hold a copy of each key is remembered ("records") from the first
// copy sent until its drop is acknowledged; that is what drops are computed from.
// Failed fills and drops are retried with backoff (100 ms doubling to 5 s); drops to a
// shard that left the hot set's holders are abandoned after drop_give_up.
//
// Thread-safety: all methods may be called concurrently. The host's methods are
// called from the background thread and from AfterPush's caller, never with a lock
// of this class held.

#ifndef EMBER_SERVER_PS_REPLICA_OWNER_H_
#define EMBER_SERVER_PS_REPLICA_OWNER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/hot_set.h"
#include "ember/v1/ps.pb.h"
#include "server/ps/replica_sender.h"

namespace ember {

class PsMetrics;

// What ReplicaOwner needs from the shard (PsServiceImpl implements it).
class ReplicaHost {
 public:
  virtual ~ReplicaHost() = default;
  // Keeps in *ids only the ids of `table` this shard owns now (order kept) and sets
  // request->ids/values/versions to their current rows (PutReplicasRequest's format:
  // the embedding, or the init vector of an unstored row). Errors: NOT_FOUND (table),
  // storage errors.
  virtual absl::Status ReadOwnedRows(const std::string& table, std::vector<uint64_t>* ids,
                                     v1::PutReplicasRequest* request) = 0;
  // Keeps in *ids only the ids of `table` this shard owns now.
  virtual void KeepOwned(const std::string& table, std::vector<uint64_t>* ids) = 0;
  // The job attempt the shard serves (PutReplicasRequest.owner_attempt).
  virtual uint64_t ReplicaAttempt() const = 0;
};

struct ReplicaOwnerOptions {
  ReplicaSenderOptions sender;
  // Deadline of one background copy round (fills, drops, periodic copies).
  // Default: 5 s.
  absl::Duration round_timeout = absl::Seconds(5);
  // Retry backoff of failed fills and drops: starts here, doubles up to max.
  // Default: 100 ms, 5 s.
  absl::Duration initial_retry = absl::Milliseconds(100);
  absl::Duration max_retry = absl::Seconds(5);
  // Most rows in one PutReplicas. Default: 4096.
  size_t max_rows_per_copy = 4096;
  // Drops to a shard that is no longer among the hot set's holders are abandoned after
  // failing for this long (it is most likely gone). Default: 1 min.
  absl::Duration drop_give_up = absl::Minutes(1);
};

class ReplicaOwner {
 public:
  using Done = std::function<void(absl::Status)>;

  // `host` must outlive this object; `metrics` may be null.
  ReplicaOwner(ReplicaHost* host, uint32_t shard_id, uint64_t incarnation,
               const ReplicaOwnerOptions& options, PsMetrics* metrics);
  // Stop().
  ~ReplicaOwner();

  ReplicaOwner(const ReplicaOwner&) = delete;
  ReplicaOwner& operator=(const ReplicaOwner&) = delete;

  // Applies a newer hot set (an older or equal version is ignored: returns false).
  bool SetHotSet(std::shared_ptr<const HotSetView> view);
  // The hot set applied now (never null; version 0 before the first).
  std::shared_ptr<const HotSetView> view() const;

  // After a push of `ids` to `table` was applied (or answered as a duplicate): see
  // the modes above. `done` is called exactly once: at once (in this call) when there
  // is nothing to wait for, else when every holder acknowledged or the copy to a
  // current holder failed for good (UNAVAILABLE naming the holder; the rows were
  // applied). Copies end by `deadline`.
  void AfterPush(const std::string& table, absl::Span<const uint64_t> ids, int64_t step,
                 absl::Time deadline, Done done);

  // Re-copy every hot key this shard owns (its rows changed without a push).
  void RefillAll();
  // The slot map changed: re-copy the hot keys this shard owns and drop the copies of
  // keys it no longer owns.
  void MapChanged();

  // Waits until no background work is pending (every fill, drop and periodic copy
  // acknowledged) or `timeout` passed. Returns whether it is settled.
  bool WaitSettled(absl::Duration timeout);

  // Ends the background thread and the sender (pending copies fail CANCELLED). After
  // it, AfterPush answers OK at once. Idempotent.
  void Stop();

 private:
  using Holders = absl::InlinedVector<uint32_t, 4>;
  using IdSets = absl::flat_hash_map<std::string, absl::flat_hash_set<uint64_t>>;

  void EnsureThread() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // AfterPush's first phase: the distinct ids of the push that are in `hot` go to
  // *hot_ids; with `with_former` (synchronous mode), the others that still have a
  // recorded copy go to *former_ids and their holders to *former_holders.
  void SplitPushed(const std::string& table, absl::Span<const uint64_t> ids,
                   const absl::flat_hash_set<uint64_t>* hot, bool with_former,
                   std::vector<uint64_t>* hot_ids, std::vector<uint64_t>* former_ids,
                   Holders* former_holders) ABSL_LOCKS_EXCLUDED(mu_);
  // AfterPush in synchronous mode: reads the rows of `hot_ids` and `former_ids` after
  // the push, sends them to the holders (required, extra and former) and calls `done`
  // once when all acknowledged (AfterPush's contract).
  void CopyPushed(const std::string& table, const HotSetView& view, std::vector<uint64_t> hot_ids,
                  std::vector<uint64_t> former_ids, Holders former_holders, absl::Time deadline,
                  Done done) ABSL_LOCKS_EXCLUDED(mu_);
  void Loop();
  // One round of background work; returns whether everything it tried succeeded.
  // Its phases are the helpers below: take the work, collect fills and drops, copy,
  // drop.
  bool Round();
  // What one round works on, taken from the shared state by TakeRoundWork.
  struct RoundWork {
    std::shared_ptr<const HotSetView> view;      // the hot set now
    std::shared_ptr<const HotSetView> previous;  // the one the last round went to
    bool refill = false;                         // re-copy every hot key (RefillAll, MapChanged)
    bool reconcile = false;                      // recompute the drops (new view, MapChanged)
    bool refresh = false;  // periodic mode: the pass is due (dirty holds its keys)
    bool retry = false;    // fills and drops hold the retries that were due
    IdSets fills, dirty;
    absl::flat_hash_map<uint32_t, IdSets> drops;
  };
  struct DropCall;
  // Takes the round's work: advances processed_view_, clears the flags and moves out
  // the periodic keys and the retries that are due.
  RoundWork TakeRoundWork() ABSL_LOCKS_EXCLUDED(mu_);
  // Fills: adds to *fills the owned hot keys of `view` that were not hot in `previous`
  // (every owned hot key when `refill` or the holders' processes changed).
  void CollectFills(const HotSetView& view, const HotSetView& previous, bool refill, IdSets* fills)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Drops: adds to *drops (holder -> table -> ids) every recorded copy that is not of
  // an owned key hot in `view` at one of `holders`.
  void CollectDrops(const HotSetView& view, bool replicated, const Holders& holders,
                    absl::flat_hash_map<uint32_t, IdSets>* drops) ABSL_LOCKS_EXCLUDED(mu_);
  // Copies `sets` to `holders` in chunks of max_rows_per_copy and waits; the ids that
  // failed go back to *retry_into (fills_ or dirty_, under mu_). Returns false if
  // anything failed.
  bool CopySets(const IdSets& sets, const HotSetView& view, const Holders& holders,
                IdSets* retry_into) ABSL_LOCKS_EXCLUDED(mu_);
  // Sends every drop at once (chunks of max_rows_per_copy), waits for all, then
  // SettleDrops. Returns false if a drop is to be retried.
  bool SendDrops(const absl::flat_hash_map<uint32_t, IdSets>& drops, const HotSetView& view)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets the holder of each acknowledged (or given-up) drop in records_; a failed
  // drop goes back to drops_. Returns false if one did.
  bool SettleDrops(absl::Span<const std::shared_ptr<DropCall>> calls)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends the rows of `ids` (owned ones) to `targets` and waits; the ids that failed
  // for a holder in `required` go to *failed. Returns false if anything failed.
  bool CopyAndWait(const std::string& table, std::vector<uint64_t> ids, const HotSetView& view,
                   const Holders& required, bool add_recorded,
                   absl::flat_hash_set<uint64_t>* failed);
  // The holders recorded for `ids` that `required` lacks (former holders, pending a
  // drop); records `required` for the ids.
  Holders RecordAndExtra(const std::string& table, absl::Span<const uint64_t> ids,
                         const Holders& required);
  std::shared_ptr<v1::PutReplicasRequest> NewRequest(const std::string& table,
                                                     const HotSetView& view) const;
  std::string AddressOf(uint32_t holder) const;

  ReplicaHost* const host_;
  const uint32_t shard_id_;
  const uint64_t incarnation_;
  const ReplicaOwnerOptions options_;
  PsMetrics* const metrics_;
  std::unique_ptr<ReplicaSender> sender_;  // null after Stop
  std::atomic<int64_t> step_{0};           // newest pushed step seen

  mutable absl::Mutex mu_;
  std::shared_ptr<const HotSetView> view_ ABSL_GUARDED_BY(mu_);
  // The view the last processed transition went to (fills are computed against it).
  std::shared_ptr<const HotSetView> processed_view_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint32_t, std::string> addresses_ ABSL_GUARDED_BY(mu_);  // every view seen
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // a round is running
  int sending_ ABSL_GUARDED_BY(mu_) = 0;    // AfterPush calls using sender_ now
  bool refill_all_ ABSL_GUARDED_BY(mu_) = false;
  bool reconcile_ ABSL_GUARDED_BY(mu_) = false;
  IdSets fills_ ABSL_GUARDED_BY(mu_);  // to copy to the current holders
  IdSets dirty_ ABSL_GUARDED_BY(mu_);  // periodic mode: pushed since the last pass
  // holder -> table -> ids to drop there.
  absl::flat_hash_map<uint32_t, IdSets> drops_ ABSL_GUARDED_BY(mu_);
  // table -> id -> holders that may hold a copy.
  absl::flat_hash_map<std::string, absl::flat_hash_map<uint64_t, Holders>> records_
      ABSL_GUARDED_BY(mu_);
  absl::Time next_retry_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Duration retry_backoff_ ABSL_GUARDED_BY(mu_);
  absl::Time next_refresh_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // Holders whose drops fail, since when.
  absl::flat_hash_map<uint32_t, absl::Time> drop_failing_since_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace ember

#endif  // EMBER_SERVER_PS_REPLICA_OWNER_H_
