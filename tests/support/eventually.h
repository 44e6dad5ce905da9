// Copyright 2026 The Ember Authors.
//
// Polling with a deadline, for conditions that change in another process or thread
// (registration, heartbeats, a follower's position, a published hot set) where no
// event can be awaited. The poll interval sets the pace; the timeout bounds the wait.
// Neither orders events: a test asserts the outcome, never that it came in time.
//
//   ASSERT_TRUE(Eventually([&] { return Map().shards_size() == 2; }));
//   ASSERT_TRUE(Eventually([&] { return f.position() >= 7; }, absl::Seconds(15),
//                          absl::Milliseconds(2)));
//   absl::Status s = EventuallyOk([&] { return client->Pull(...); }, absl::Seconds(60));
//   ASSERT_TRUE(s.ok()) << s;  // the last attempt's error

#ifndef EMBER_TESTS_SUPPORT_EVENTUALLY_H_
#define EMBER_TESTS_SUPPORT_EVENTUALLY_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace ember {

// The defaults: how long to wait for a condition and how often to look.
inline constexpr absl::Duration kDefaultWaitBound = absl::Seconds(30);
inline constexpr absl::Duration kDefaultPollInterval = absl::Milliseconds(20);

// Calls `condition` every `poll` until it returns true or `timeout` passes, and once more
// at the deadline. Returns whether it held. Thread-safety: `condition` runs on the
// calling thread only.
bool Eventually(const std::function<bool()>& condition, absl::Duration timeout = kDefaultWaitBound,
                absl::Duration poll = kDefaultPollInterval);

// Calls `attempt` every `poll` until it returns OK or `timeout` passes (at least once).
// Returns OK, or the status of the last attempt.
absl::Status EventuallyOk(const std::function<absl::Status()>& attempt,
                          absl::Duration timeout = kDefaultWaitBound,
                          absl::Duration poll = kDefaultPollInterval);

}  // namespace ember

#endif  // EMBER_TESTS_SUPPORT_EVENTUALLY_H_
