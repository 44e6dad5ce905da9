// Copyright 2026 The Ember Authors.
//
// Loopback helpers for tests that talk to the HTTP side of real processes (Prometheus
// /metrics endpoints, a Prometheus server's API): an HTTP/1.0 GET over a raw socket, so
// no HTTP library is needed (free ports: tests/support/ports.h).
//
//   absl::StatusOr<std::string> body = HttpGet(metrics_port, "/metrics");

#ifndef EMBER_TESTS_SUPPORT_HTTP_GET_H_
#define EMBER_TESTS_SUPPORT_HTTP_GET_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ember {

// GET http://127.0.0.1:`port``path`; returns the body of a 200 response. UNAVAILABLE if
// nothing listens or the connection fails, DEADLINE_EXCEEDED if a send or receive
// stalls for `timeout`, INTERNAL for a non-200 status.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path,
                                    absl::Duration timeout = absl::Seconds(5));

}  // namespace ember

#endif  // EMBER_TESTS_SUPPORT_HTTP_GET_H_
