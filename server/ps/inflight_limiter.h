// Copyright 2026 The Ember Authors.
//
// InflightLimiter: the bound on what a shard's Pull calls hold in memory at once
// (issue 28 item 1.3). A pull's answer stays in the server's memory from the moment the
// store writes it until gRPC has handed the last byte to the socket, which for a client
// that does not read is never: 1,000 concurrent pulls of 65,536 ids once took a shard
// to 5.9 GB against a 1 GiB memory budget. The limiter admits a call while fewer than
// `max_calls` are in flight and the answers in flight plus this one stay within
// `max_bytes`; otherwise the call fails RESOURCE_EXHAUSTED with a retry hint
// (OverloadedError, common/grpc_status.h), which PsClient honours.
//
//   InflightLimiter limiter({.max_calls = 1024, .max_bytes = 256 << 20});
//   absl::StatusOr<InflightLimiter::Ticket> ticket = limiter.Admit(response_bytes);
//   if (!ticket.ok()) return ticket.status();  // RESOURCE_EXHAUSTED, retry hint
//   ... keep *ticket until the answer is sent (the reactor's OnDone) ...
//
// One call is always admitted when nothing is in flight, however large, so that a
// pull bigger than `max_bytes` is slow rather than impossible.
//
// Thread-safety: all methods may be called concurrently; a Ticket may be destroyed on
// any thread. The limiter must outlive its tickets.

#ifndef EMBER_SERVER_PS_INFLIGHT_LIMITER_H_
#define EMBER_SERVER_PS_INFLIGHT_LIMITER_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ember {

struct InflightLimits {
  // Calls admitted and not yet done. Default: 1024 (--max_inflight_calls).
  int64_t max_calls = 1024;
  // Bytes of answers admitted and not yet sent. Default: 256 MiB (--max_inflight_mb;
  // ember-ps derives its default from the memory budget, InflightBytesFor).
  int64_t max_bytes = int64_t{256} << 20;
  // The retry hint of a refusal. Default: 50 ms.
  absl::Duration retry_after = absl::Milliseconds(50);
  // Named in the refusal's message. Default: 0.
  uint32_t shard_id = 0;
};

// ember-ps's default byte bound: a quarter of the memory budget, clamped to
// 64..1024 MiB (an unlimited budget, 0, gets 1024 MiB).
int64_t InflightBytesFor(int64_t memory_budget_bytes);

class InflightLimiter {
 public:
  // Releases its call and bytes when destroyed. Movable; an empty (moved-from or
  // default) ticket releases nothing.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept;
    Ticket& operator=(Ticket&& other) noexcept;
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket();

   private:
    friend class InflightLimiter;
    Ticket(InflightLimiter* limiter, int64_t bytes) : limiter_(limiter), bytes_(bytes) {}
    InflightLimiter* limiter_ = nullptr;
    int64_t bytes_ = 0;
  };

  explicit InflightLimiter(InflightLimits limits);
  InflightLimiter(const InflightLimiter&) = delete;
  InflightLimiter& operator=(const InflightLimiter&) = delete;

  // Admits one call whose answer holds `bytes`, or returns RESOURCE_EXHAUSTED naming
  // the limit reached, with the retry hint attached (OverloadedError).
  absl::StatusOr<Ticket> Admit(int64_t bytes);

  int64_t calls_in_flight() const;
  int64_t bytes_in_flight() const;
  // Calls refused so far.
  int64_t refused() const;
  const InflightLimits& limits() const { return limits_; }

 private:
  void Release(int64_t bytes);

  const InflightLimits limits_;
  mutable absl::Mutex mu_;
  int64_t calls_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ember

#endif  // EMBER_SERVER_PS_INFLIGHT_LIMITER_H_
