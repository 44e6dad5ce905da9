// Copyright 2026 The Ember Authors.
//
// WatchSlots: the shard's WatchUpdates streams, bounded in all and per peer (issue 28
// item 1.5). Each open stream holds a producer thread and a change-log reader, so the
// shard serves at most `max_watches`; one peer (a client address) holds at most
// `max_per_peer` of them, so that a client that opens streams and never reads them
// cannot take the slots followers and exports need. A stream whose reader makes no
// progress for `stall_timeout` is closed by the service (ps_service_watch.cc).
//
//   WatchSlots slots(limits, shard_id);
//   absl::StatusOr<WatchSlots::Slot> slot = slots.Take(PeerAddress(context->peer()));
//   if (!slot.ok()) return slot.status();  // RESOURCE_EXHAUSTED, retry hint
//   ... the stream runs while *slot lives ...
//
// Thread-safety: all methods may be called concurrently; WatchSlots must outlive its
// slots.

#ifndef EMBER_SERVER_PS_WATCH_SLOTS_H_
#define EMBER_SERVER_PS_WATCH_SLOTS_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ember {

struct WatchLimits {
  // Streams in all. Default: 256 (--max_watches).
  int max_watches = 256;
  // Streams of one peer address. Default: 32 (--max_watches_per_peer).
  int max_per_peer = 32;
  // A stream whose pending message the reader has not taken for this long is closed
  // (CANCELLED for the client; the shard logs why and counts it). Default: 60 s
  // (--watch_stall_timeout_ms).
  absl::Duration stall_timeout = absl::Seconds(60);
};

// The address part of a gRPC peer string: "ipv4:127.0.0.1:5000" -> "127.0.0.1",
// "ipv6:[::1]:5000" -> "[::1]"; anything else whole.
std::string PeerAddress(absl::string_view peer);

class WatchSlots {
 public:
  // One stream's slot: released when destroyed. Movable.
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& other) noexcept;
    Slot& operator=(Slot&& other) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot();

   private:
    friend class WatchSlots;
    Slot(WatchSlots* slots, std::string peer) : slots_(slots), peer_(std::move(peer)) {}
    void Release();
    WatchSlots* slots_ = nullptr;
    std::string peer_;
  };

  WatchSlots(WatchLimits limits, uint32_t shard_id) : limits_(limits), shard_id_(shard_id) {}
  WatchSlots(const WatchSlots&) = delete;
  WatchSlots& operator=(const WatchSlots&) = delete;

  // A slot for a stream of `peer`, or RESOURCE_EXHAUSTED (with a retry hint) naming
  // the limit: every slot taken, or `peer`'s share.
  absl::StatusOr<Slot> Take(absl::string_view peer);

  int open() const;
  int open_for(absl::string_view peer) const;
  const WatchLimits& limits() const { return limits_; }

 private:
  void Release(const std::string& peer);

  const WatchLimits limits_;
  const uint32_t shard_id_;
  mutable absl::Mutex mu_;
  int open_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, int> per_peer_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ember

#endif  // EMBER_SERVER_PS_WATCH_SLOTS_H_
