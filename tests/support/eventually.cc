// Copyright 2026 The Ember Authors.

#include "tests/support/eventually.h"

#include "absl/time/clock.h"

namespace ember {

bool Eventually(const std::function<bool()>& condition, absl::Duration timeout,
                absl::Duration poll) {
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    if (condition()) return true;
    absl::SleepFor(poll);  // polling pace, not event ordering
  }
  return condition();
}

absl::Status EventuallyOk(const std::function<absl::Status()>& attempt, absl::Duration timeout,
                          absl::Duration poll) {
  const absl::Time end = absl::Now() + timeout;
  while (true) {
    absl::Status status = attempt();
    if (status.ok() || absl::Now() >= end) return status;
    absl::SleepFor(poll);  // polling pace, not event ordering
  }
}

}  // namespace ember
