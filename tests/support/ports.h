// Copyright 2026 The Ember Authors.
//
// Free loopback ports in tests: FreeLoopbackPort (tools/harness/ports.h, shared with the
// benchmarks) and FreePort, for the ports a server's ready line does not name (metrics,
// health, a Prometheus web port) and for an address nothing listens on. Servers whose
// ready line names the port take --port=0 instead.
//
//   absl::StatusOr<int> port = FreeLoopbackPort();
//   ASSERT_TRUE(port.ok()) << port.status();
//   const int health_port = FreePort();  // -1 and a test failure if none

#ifndef EMBER_TESTS_SUPPORT_PORTS_H_
#define EMBER_TESTS_SUPPORT_PORTS_H_

#include "tools/harness/ports.h"  // FreeLoopbackPort

namespace ember {

// FreeLoopbackPort() for callers that cannot return a status: on error, records a
// non-fatal gtest failure and returns -1.
int FreePort();

}  // namespace ember

#endif  // EMBER_TESTS_SUPPORT_PORTS_H_
