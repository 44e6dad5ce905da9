// Copyright 2026 The Ember Authors.
//
// Free loopback ports, for the ports a server's ready line does not name (metrics,
// health, a Prometheus web port) and for an address nothing listens on. Servers whose
// ready line names the port take --port=0 instead.
//
//   absl::StatusOr<int> port = FreeLoopbackPort();
//   ASSERT_TRUE(port.ok()) << port.status();
//   const int health_port = FreePort();  // -1 and a test failure if none

#ifndef EMBER_TESTS_SUPPORT_PORTS_H_
#define EMBER_TESTS_SUPPORT_PORTS_H_

#include "absl/status/statusor.h"

namespace ember {

// A loopback port that was free a moment ago (bind to 0, read it, close). Another
// process may take it before it is used: callers retry on a failed start. INTERNAL if
// no socket could be bound.
absl::StatusOr<int> FreeLoopbackPort();

// FreeLoopbackPort() for callers that cannot return a status: on error, records a
// non-fatal gtest failure and returns -1.
int FreePort();

}  // namespace ember

#endif  // EMBER_TESTS_SUPPORT_PORTS_H_
