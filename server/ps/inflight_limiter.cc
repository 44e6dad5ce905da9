// Copyright 2026 The Ember Authors.

#include "server/ps/inflight_limiter.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace ember {

int64_t InflightBytesFor(int64_t memory_budget_bytes) {
  constexpr int64_t kMin = int64_t{64} << 20;
  constexpr int64_t kMax = int64_t{1024} << 20;
  if (memory_budget_bytes <= 0) return kMax;
  return std::clamp(memory_budget_bytes / 4, kMin, kMax);
}

InflightLimiter::Ticket::Ticket(Ticket&& other) noexcept
    : limiter_(std::exchange(other.limiter_, nullptr)), bytes_(other.bytes_) {}

InflightLimiter::Ticket& InflightLimiter::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    if (limiter_ != nullptr) limiter_->Release(bytes_);
    limiter_ = std::exchange(other.limiter_, nullptr);
    bytes_ = other.bytes_;
  }
  return *this;
}

InflightLimiter::Ticket::~Ticket() {
  if (limiter_ != nullptr) limiter_->Release(bytes_);
}

InflightLimiter::InflightLimiter(InflightLimits limits) : limits_(limits) {}

absl::StatusOr<InflightLimiter::Ticket> InflightLimiter::Admit(int64_t bytes) {
  bytes = std::max<int64_t>(bytes, 0);
  absl::MutexLock lock(&mu_);
  const bool idle = calls_ == 0;
  const bool calls_full = calls_ >= limits_.max_calls;
  const bool bytes_full = !idle && bytes_ + bytes > limits_.max_bytes;
  if (calls_full || bytes_full) {
    ++refused_;
    const std::string what =
        calls_full ? absl::StrCat(calls_,
                                  " calls in flight (--max_inflight_calls=", limits_.max_calls, ")")
                   : absl::StrCat(bytes_ >> 20, " MiB of answers in flight and this one needs ",
                                  (bytes + (1 << 20) - 1) >> 20,
                                  " MiB more (--max_inflight_mb=", limits_.max_bytes >> 20, ")");
    return OverloadedError(
        absl::StrCat("shard ", limits_.shard_id, " is overloaded: ", what, "; retry after ",
                     absl::ToInt64Milliseconds(limits_.retry_after), " ms"),
        limits_.retry_after);
  }
  ++calls_;
  bytes_ += bytes;
  return Ticket(this, bytes);
}

void InflightLimiter::Release(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  --calls_;
  bytes_ -= bytes;
}

int64_t InflightLimiter::calls_in_flight() const {
  absl::MutexLock lock(&mu_);
  return calls_;
}

int64_t InflightLimiter::bytes_in_flight() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

int64_t InflightLimiter::refused() const {
  absl::MutexLock lock(&mu_);
  return refused_;
}

}  // namespace ember
