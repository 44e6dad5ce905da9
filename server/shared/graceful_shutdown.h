// Copyright 2026 The Ember Authors.
//
// Graceful shutdown of a gRPC server (ember-ps, ember-coordinator) that lets calls in
// flight finish but does not wait for idle clients.
//

#ifndef EMBER_SERVER_SHARED_GRACEFUL_SHUTDOWN_H_
#define EMBER_SERVER_SHARED_GRACEFUL_SHUTDOWN_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"

namespace ember {

// Why not just Server::Shutdown(deadline): gRPC's graceful shutdown sends every
// connection a GOAWAY plus a PING and completes only once every connection is closed,
// which for an idle client happens when the client answers the PING. A C++ client
// channel with no call in progress does not read its socket until its backup poller
// runs (every 5 s by default), so one idle client holds Shutdown for up to 5 s, and for
// the whole grace period when that is shorter. Calls in flight are what the grace
// period is for; idle connections need none of it.
//
// ServerCallTracker counts the calls in progress (a server interceptor, so it covers
// every service on the server) and ShutdownServer stops accepting calls, waits until
// none is in progress (at most until the deadline), then closes every connection.
// Its interceptor also answers a unary or server-streaming call whose request bytes do
// not parse with INVALID_ARGUMENT naming the method (gRPC's own answer is UNIMPLEMENTED
// or INTERNAL with an empty message).
//
//   ServerCallTracker calls;
//   grpc::ServerBuilder builder;
//   calls.Install(&builder);
//   ...
//   std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
//   ...
//   ShutdownServer(server.get(), &calls, absl::Now() + grace);
//
// Thread-safety: all methods may be called concurrently. The tracker must outlive the
// server.
class ServerCallTracker {
 public:
  ServerCallTracker() = default;
  ServerCallTracker(const ServerCallTracker&) = delete;
  ServerCallTracker& operator=(const ServerCallTracker&) = delete;

  // Counts every call of the server built by `builder` from its arrival at the
  // service until it is done. REQUIRES: before builder->BuildAndStart(); replaces any
  // interceptors set on `builder`.
  void Install(grpc::ServerBuilder* builder);

  // Calls in progress.
  int64_t in_flight() const;

  // Waits until no call is in progress or `deadline` passes. True if none is.
  bool WaitIdle(absl::Time deadline) const;

  // Used by the interceptor.
  void Enter();
  void Leave();

 private:
  mutable absl::Mutex mu_;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

// Shuts `server` down: admits no new call or connection from now on, lets the calls
// in progress finish until `deadline`, then cancels the rest and closes every
// connection (without waiting for idle clients), and waits until the server is done.
// REQUIRES: `calls` was installed on the builder of `server`; every call's reactor
// finishes once cancelled (e.g. waiting KvGets were completed before).
void ShutdownServer(grpc::Server* server, const ServerCallTracker* calls, absl::Time deadline);

// Stop signals of a server process (SIGTERM, SIGINT). Call BlockStopSignals first in
// main, before any thread starts (threads inherit the mask, so none of gRPC's or
// RocksDB's threads takes them); WaitForStopSignal then blocks until one arrives and
// returns its number.
void BlockStopSignals();
int WaitForStopSignal();

}  // namespace ember

#endif  // EMBER_SERVER_SHARED_GRACEFUL_SHUTDOWN_H_
