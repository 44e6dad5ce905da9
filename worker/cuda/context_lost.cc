// Copyright 2026 The Ember Authors.

#include "worker/cuda/context_lost.h"

#include <atomic>

#include "absl/synchronization/mutex.h"

namespace ember::worker {
namespace {

std::atomic<bool> lost{false};

struct Reason {
  absl::Mutex mu;
  std::string message ABSL_GUARDED_BY(mu);
};

Reason& TheReason() {
  static Reason* const reason = new Reason;  // never destroyed: read at exit
  return *reason;
}

}  // namespace

bool CudaContextLost() { return lost.load(std::memory_order_acquire); }

std::string CudaContextLostReason() {
  Reason& r = TheReason();
  absl::MutexLock lock(&r.mu);
  return r.message;
}

namespace cuda_internal {

void MarkCudaContextLost(const std::string& message) {
  Reason& r = TheReason();
  {
    absl::MutexLock lock(&r.mu);
    if (r.message.empty()) r.message = message;
  }
  lost.store(true, std::memory_order_release);
}

}  // namespace cuda_internal
}  // namespace ember::worker
