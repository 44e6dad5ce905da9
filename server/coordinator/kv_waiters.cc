// Copyright 2026 The Ember Authors.

#include "server/coordinator/kv_waiters.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/clip.h"

namespace ember {

KvWaiters::KvWaiters() : timer_([this] { TimerLoop(); }) {}

KvWaiters::~KvWaiters() { Shutdown(); }

uint64_t KvWaiters::Add(std::string key, absl::Time deadline, Callback done) {
  {
    absl::MutexLock lock(&mu_);
    if (!shutdown_) {
      const uint64_t id = next_id_++;
      waiters_.emplace(id, Waiter{std::move(key), deadline, std::move(done)});
      changed_.Signal();
      return id;
    }
  }
  done(absl::UnavailableError("coordinator is shutting down"));
  return 0;
}

void KvWaiters::Notify(const std::string& key, const std::string& value) {
  std::vector<Callback> ready;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->second.key == key) {
        ready.push_back(std::move(it->second.done));
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (Callback& done : ready) done(value);
}

void KvWaiters::Complete(uint64_t id, absl::StatusOr<std::string> result) {
  Callback done;
  {
    absl::MutexLock lock(&mu_);
    auto it = waiters_.find(id);
    if (it == waiters_.end()) return;
    done = std::move(it->second.done);
    waiters_.erase(it);
  }
  done(std::move(result));
}

void KvWaiters::Cancel(uint64_t id) { Complete(id, absl::CancelledError("kv get cancelled")); }

void KvWaiters::Shutdown() {
  std::map<uint64_t, Waiter> left;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return;
    shutdown_ = true;
    left.swap(waiters_);
    changed_.SignalAll();
  }
  for (auto& [id, waiter] : left)
    waiter.done(absl::UnavailableError("coordinator is shutting down"));
  timer_.join();
}

void KvWaiters::TimerLoop() {
  absl::MutexLock lock(&mu_);
  while (!shutdown_) {
    absl::Time next = absl::InfiniteFuture();
    for (const auto& [id, waiter] : waiters_) next = std::min(next, waiter.deadline);
    if (next > absl::Now()) {
      changed_.WaitWithDeadline(&mu_, next);
      continue;
    }
    std::vector<std::pair<std::string, Callback>> expired;
    const absl::Time now = absl::Now();
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->second.deadline <= now) {
        expired.emplace_back(std::move(it->second.key), std::move(it->second.done));
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
    mu_.Unlock();
    for (auto& [key, done] : expired) {
      done(absl::NotFoundError(
          absl::StrCat("key '", ClipForMessage(key), "' did not appear in time")));
    }
    mu_.Lock();
  }
}

}  // namespace ember
