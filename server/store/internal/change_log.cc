// Copyright 2026 The Ember Authors.

#include "server/store/internal/change_log.h"

#include <algorithm>
#include <cassert>

#include "absl/strings/str_cat.h"

namespace ember {

ChangeLog::ChangeLog(size_t capacity) : capacity_(capacity), ring_(capacity) {
  assert(capacity >= 1);
}

void ChangeLog::Reset(uint64_t version) {
  absl::MutexLock lock(&mu_);
  next_ = version + 1;
  watermark_ = version;
  highest_written_ = version;
  base_ = version;
  pending_.clear();
}

uint64_t ChangeLog::Reserve(uint32_t n) {
  absl::MutexLock lock(&mu_);
  const uint64_t first = next_;
  next_ += n;
  return first;
}

void ChangeLog::Commit(absl::Span<const Change> entries) {
  if (entries.empty()) return;
  const int64_t now_micros = absl::ToUnixMicros(absl::Now());
  absl::MutexLock lock(&mu_);
  size_t i = 0;
  while (i < entries.size()) {
    // One run of consecutive versions (one Reserve call).
    const uint64_t first = entries[i].version;
    size_t j = i;
    while (j < entries.size() && entries[j].version == first + (j - i)) ++j;
    const uint64_t end = first + (j - i);
    highest_written_ = std::max(highest_written_, end - 1);
    // A run committed after newer runs wrapped the ring must not overwrite their
    // entries: write only the versions the ring still retains.
    for (; i < j; ++i) {
      if (entries[i].version + capacity_ <= highest_written_) continue;
      Change& slot = ring_[entries[i].version % capacity_];
      slot = entries[i];
      slot.commit_micros = now_micros;
    }
    pending_[first] = end;
  }
  // Advance the watermark over every contiguous committed range.
  while (!pending_.empty() && pending_.begin()->first == watermark_ + 1) {
    watermark_ = pending_.begin()->second - 1;
    pending_.erase(pending_.begin());
  }
}

absl::StatusOr<std::vector<Change>> ChangeLog::Read(uint64_t after, size_t max) const {
  absl::MutexLock lock(&mu_);
  std::vector<Change> out;
  if (after >= watermark_) return out;
  const uint64_t oldest = OldestLocked();
  if (after + 1 < oldest) {
    return absl::OutOfRangeError(absl::StrCat("change log no longer holds version ", after + 1,
                                              "; oldest retained is ", oldest,
                                              ": re-bootstrap from a checkpoint"));
  }
  const uint64_t last = std::min<uint64_t>(watermark_, after + max);
  out.reserve(last - after);
  for (uint64_t v = after + 1; v <= last; ++v) out.push_back(ring_[v % capacity_]);
  return out;
}

uint64_t ChangeLog::watermark() const {
  absl::MutexLock lock(&mu_);
  return watermark_;
}

uint64_t ChangeLog::OldestLocked() const {
  // Oldest version still guaranteed in the ring, and never one from before Reset.
  const uint64_t in_ring = highest_written_ >= capacity_ ? highest_written_ - capacity_ + 1 : 1;
  return std::max(in_ring, base_ + 1);
}

uint64_t ChangeLog::oldest_retained() const {
  absl::MutexLock lock(&mu_);
  return OldestLocked();
}

uint64_t ChangeLog::WaitAbove(uint64_t version, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto above = [this, version]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return watermark_ > version; };
  mu_.AwaitWithTimeout(absl::Condition(&above), timeout);
  return watermark_;
}

uint64_t ChangeLog::reserved() const {
  absl::MutexLock lock(&mu_);
  return next_ - 1;
}

}  // namespace ember
