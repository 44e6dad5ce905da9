// Copyright 2026 The Ember Authors.
//
// KvWaiters: KvGet calls waiting for a key to appear, without blocking a gRPC
// handler thread. A waiter is a callback plus a deadline; it is completed exactly once:
// with the value (Notify), NOT_FOUND at its deadline (by the timer thread),
// CANCELLED (Cancel) or UNAVAILABLE (Shutdown). Callbacks run without the lock held,
// on the calling thread (Notify, Cancel, Shutdown) or on the timer thread (deadline).
//
//   uint64_t id = waiters.Add(key, absl::Now() + absl::Seconds(5),
//                             [reactor](absl::StatusOr<std::string> v) { ... });
//   if (auto value = state.KvGet(key)) waiters.Complete(id, *value);  // closes the race
//
// Waiters are expected to be few (worker rendezvous), so Notify scans them all.
//
// Thread-safety: all methods may be called concurrently.

#ifndef EMBER_SERVER_COORDINATOR_KV_WAITERS_H_
#define EMBER_SERVER_COORDINATOR_KV_WAITERS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ember {

class KvWaiters {
 public:
  using Callback = std::function<void(absl::StatusOr<std::string>)>;

  // Starts the timer thread.
  KvWaiters();
  // Shutdown().
  ~KvWaiters();

  KvWaiters(const KvWaiters&) = delete;
  KvWaiters& operator=(const KvWaiters&) = delete;

  // Registers a waiter for `key` until `deadline`; returns its id. After Shutdown the
  // callback runs at once with UNAVAILABLE.
  uint64_t Add(std::string key, absl::Time deadline, Callback done);
  // Completes every waiter of `key` with `value`.
  void Notify(const std::string& key, const std::string& value);
  // Completes waiter `id` with `result` if it still waits; otherwise does nothing.
  void Complete(uint64_t id, absl::StatusOr<std::string> result);
  // Completes waiter `id` with CANCELLED if it still waits.
  void Cancel(uint64_t id);
  // Completes every waiter with UNAVAILABLE and joins the timer thread. Idempotent.
  void Shutdown();

 private:
  struct Waiter {
    std::string key;
    absl::Time deadline;
    Callback done;
  };

  void TimerLoop();

  absl::Mutex mu_;
  absl::CondVar changed_;  // a waiter was added or shutdown began
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  std::thread timer_;
};

}  // namespace ember

#endif  // EMBER_SERVER_COORDINATOR_KV_WAITERS_H_
