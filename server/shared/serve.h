// Copyright 2026 The Ember Authors.
//
// Serve until stopped: the one serve-and-shut-down sequence of ember-ps,
// ember-coordinator and ember-serving. It builds the gRPC server (with the health
// service and the call tracker of graceful_shutdown.h), starts it, lets the binary
// start what answers through it, reports ready, prints the lines scripts and tests
// wait for on stdout:
//
//   listening on HOST:PORT
//   metrics on HOST:PORT      (with a metrics server)
//   health on HOST:PORT       (with --health_port)
//
// then waits for SIGTERM or SIGINT and shuts down in order: the health service goes
// NOT_SERVING (probes and load balancers stop sending first), the binary stops what
// feeds the server, calls in flight get the grace period (idle client connections do
// not hold it), and the binary flushes.
//
//   BlockStopSignals();  // first in Run, before any thread starts
//   ...
//   ServeOptions serve;
//   serve.host = o.server.host; serve.port = o.server.port; serve.credentials = tls.Server();
//   serve.services = {&service};
//   serve.health_service = v1::ServingService::service_full_name();
//   ServeHooks hooks;
//   hooks.stopped = [&] { return follower->Stop(); };
//   return ServeUntilStopped(serve, hooks);

#ifndef EMBER_SERVER_SHARED_SERVE_H_
#define EMBER_SERVER_SHARED_SERVE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/flags.h"
#include "common/metrics.h"
#include "grpcpp/impl/service_type.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "server/shared/connection_gate.h"

namespace ember {

// The flags every server declares alike: where it listens, how many connections it
// takes, its metrics server and the grace calls in flight get at shutdown. Declared in
// two groups so that each binary's --help keeps them where its readers look:
// DeclareListenFlags (--host, --port, --max_connections, --max_connections_per_peer) near
// the top, DeclareMetricsAndShutdownFlags (--shutdown_grace_ms, --metrics_port,
// --metrics_host) with the operational flags.
struct ServerFlags {
  std::string host = "127.0.0.1";
  uint32_t port = 0;                       // 0: the kernel picks a free one
  int64_t max_connections = -1;            // -1: half the open-file limit (connection_gate.h)
  int64_t max_connections_per_peer = 256;  // 0: no bound
  int64_t shutdown_grace_ms = 5000;        // for calls in flight
  int32_t metrics_port = -1;               // -1: no metrics server; 0: a free one
  std::string metrics_host;                // empty: `host` (FinishServerFlags)
};
void DeclareListenFlags(FlagSet& flags, ServerFlags* server);
void DeclareMetricsAndShutdownFlags(FlagSet& flags, ServerFlags* server);
// After parsing: an empty --metrics_host becomes --host.
void FinishServerFlags(ServerFlags* server);

struct ServeOptions {
  std::string host = "127.0.0.1";
  uint32_t port = 0;  // 0: the kernel picks a free one
  // The listener's bounds, as the flags say them (ConnectionLimitsFor, resolved after
  // the open-file limit was raised). Default: none.
  int64_t max_connections = 0;
  int64_t max_connections_per_peer = 0;
  std::shared_ptr<grpc::ServerCredentials> credentials;
  std::vector<grpc::Service*> services;  // not owned; registered in this order
  std::string health_service;            // the readiness service name of the health service
  int health_port = -1;                  // the plaintext probe port; -1: none, 0: a free one
  int max_receive_message_bytes = -1;    // -1: gRPC's default (4 MiB)
  int max_send_message_bytes = -1;       // -1: gRPC's default (unlimited)
  // Announced on stdout and given the listener's metrics when set; not owned.
  MetricsServer* metrics = nullptr;
  absl::Duration shutdown_grace = absl::Seconds(5);  // for calls in flight
  // Called on the builder before the server starts: the binary's own server arguments
  // (ember-ps's connection bounds, server/ps/shard_bounds.h). May be empty.
  std::function<void(grpc::ServerBuilder*)> configure;
};

// ServeOptions with the flags' host, port and shutdown grace; the binary sets the rest.
ServeOptions ServeOptionsFrom(const ServerFlags& server);

// The binary's steps around the sequence; each may be empty.
struct ServeHooks {
  // The server listens on `port` but is not ready yet: start what answers through it
  // (a shard agent, a migration resumed). An error stops the server and is returned.
  std::function<absl::Status(int port)> started;
  // Ready and announced on stdout: log what is served, start test fault windows.
  std::function<void(int port)> ready;
  // The stop signal arrived; the server still serves and reports ready: hand the
  // process's work to others first (ember-ps --drain_on_sigterm moves its slots away).
  // Its error is ServeUntilStopped's, after the shutdown below has run all the same.
  std::function<absl::Status()> draining;
  // The stop signal arrived and the health service is NOT_SERVING; the server still
  // runs: stop what feeds it or waits in it (agents, watches, waiting calls).
  std::function<void()> stopping;
  // The server has stopped: flush and close. Its error is ServeUntilStopped's.
  std::function<absl::Status()> stopped;
};

// Serves until SIGTERM or SIGINT (first raising the open-file limit and listening through
// a ConnectionGate), then shuts down as above and returns OK (or the
// `draining` hook's error, else the `stopped` hook's). UNAVAILABLE when the server or
// its probe port cannot listen; `started`'s error. REQUIRES: BlockStopSignals()
// (graceful_shutdown.h) was called before any thread started.
absl::Status ServeUntilStopped(const ServeOptions& options, const ServeHooks& hooks);

// Ends the process right after ServeUntilStopped, with RunMain's exit code (0, or 1
// after printing "PROGRAM: STATUS" to stderr), skipping the destructors. For a binary
// whose `stopped` hook ran and made everything durable (ember-ps, ember-serving; when
// it did not run, return the status and let the destructors close): tearing gRPC
// down afterwards waits for the transport's writes of answers that clients do not read
// (10 s with 8 MiB answers unread: a supervisor's stop timeout SIGKILLed the shard).
[[noreturn]] void ExitAfterServing(absl::string_view program, const absl::Status& served);

}  // namespace ember

#endif  // EMBER_SERVER_SHARED_SERVE_H_
