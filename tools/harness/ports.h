// Copyright 2026 The Ember Authors.
//
// Free loopback ports, for the ports a server's ready line does not name (metrics,
// health, a Prometheus or Redis port) and for an address nothing listens on. Servers
// whose ready line names the port take --port=0 instead.
//
//   EMBER_ASSIGN_OR_RETURN(int port, FreeLoopbackPort());

#ifndef EMBER_TOOLS_HARNESS_PORTS_H_
#define EMBER_TOOLS_HARNESS_PORTS_H_

#include "absl/status/statusor.h"

namespace ember {

// A loopback port that was free a moment ago (bind to 0, read it, close). Another
// process may take it before it is used: callers retry on a failed start. INTERNAL if
// no socket could be bound.
absl::StatusOr<int> FreeLoopbackPort();

}  // namespace ember

#endif  // EMBER_TOOLS_HARNESS_PORTS_H_
