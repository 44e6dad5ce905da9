// Copyright 2026 The Ember Authors.
//
// ConnectionGate: the listening socket of ember-ps, ember-coordinator and ember-serving,
// owned by Ember instead of gRPC, so that connections are bounded in all and per client
// address (issue 28 item 1.1). gRPC 1.51 has no such bound (grpc.max_allowed_incoming_
// connections came in 1.55), and a client that opens connections and never closes them
// took a shard's file descriptors until its listener stopped for good.
//
// The gate binds HOST:PORT, accepts on a thread of its own and hands every connection
// it admits to the gRPC server through the server's external connection acceptor
// (ServerBuilder::experimental().AddExternalConnectionAcceptor: gRPC then owns the
// descriptor, runs TLS over it when the credentials say so, and closes it). A connection
// beyond a bound is closed at once, before a byte is read: the client sees a reset and
// retries another time (gRPC's reconnect backoff).
//
//   * Per peer: at most `max_per_peer` open connections from one IP address.
//   * In all: at most `max_connections`; by default half the open-file limit, so that
//     connections cannot take the descriptors RocksDB, outgoing channels and the
//     metrics server need (fd headroom).
//   * Out of descriptors anyway (EMFILE): the gate keeps one spare descriptor, which it
//     frees to accept and close the connection, so that it never stops accepting
//     (gRPC's own listener stops for good after one failed accept4).
//
// Counting without gRPC's help: gRPC does not say when it closes a connection, so the
// gate remembers each admitted connection's descriptor and socket inode and, when it
// recounts, drops those whose descriptor no longer names that socket (closed, or reused
// by another file: another inode). It recounts a peer when the peer reaches its bound,
// every peer when the bound in all is reached (at most every 50 ms), every 10 s, and
// when metrics are read: an accept below the bounds costs no recount.
//
//   EMBER_ASSIGN_OR_RETURN(std::unique_ptr<ConnectionGate> gate,
//                          ConnectionGate::Listen("0.0.0.0", 0, limits));
//   auto acceptor = builder.experimental().AddExternalConnectionAcceptor(
//       grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD, creds);
//   server = builder.BuildAndStart();
//   gate->Start(std::move(acceptor));  // gate->port() is the bound port
//   ...
//   gate->Stop();  // before the server shuts down: no connection is handed over after it
//
// Metrics (Collector()): ember_connections_open (gauge), ember_connections_refused_total
// {reason=peer|total|fds} (counter).
//
// Thread-safety: every method may be called from any thread; the accept loop runs on
// the gate's own thread between Start and Stop.

#ifndef EMBER_SERVER_SHARED_CONNECTION_GATE_H_
#define EMBER_SERVER_SHARED_CONNECTION_GATE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/server_builder.h"
#include "prometheus/collectable.h"

namespace ember {

struct ConnectionLimits {
  // Open connections in all; 0: no bound. ConnectionLimitsFor resolves the default.
  int64_t max_connections = 0;
  // Open connections from one IP address; 0: no bound.
  int64_t max_per_peer = 0;
};

// The flags' limits: --max_connections (-1: half the open-file soft limit at this point,
// at most 16,384) and --max_connections_per_peer (0: none).
ConnectionLimits ConnectionLimitsFor(int64_t max_connections, int64_t max_per_peer);

// Raises this process's soft limit of open files to the hard limit, so that sockets
// get every descriptor the system allows; returns a line for the log.
std::string RaiseOpenFileLimit();

class ConnectionGate {
 public:
  // Binds HOST:PORT ("[::]" and "::" bind every IPv6 and IPv4 address; port 0: the
  // kernel picks one) and listens. UNAVAILABLE naming the address and the reason when
  // it cannot (in use, not local, unresolvable).
  static absl::StatusOr<std::unique_ptr<ConnectionGate>> Listen(const std::string& host,
                                                                uint32_t port,
                                                                const ConnectionLimits& limits);
  ~ConnectionGate();  // Stop(), then closes the listening socket
  ConnectionGate(const ConnectionGate&) = delete;
  ConnectionGate& operator=(const ConnectionGate&) = delete;

  // The bound port.
  int port() const { return port_; }
  const ConnectionLimits& limits() const { return limits_; }

  // Starts accepting; admitted connections go to `acceptor` (the server must be
  // started). REQUIRES: called once.
  void Start(std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor);
  // Stops accepting and closes the listening socket (new connections are refused by the
  // kernel). Connections handed over stay with gRPC. Idempotent.
  void Stop();

  struct Counts {
    int64_t open = 0;  // admitted and not yet seen closed
    int64_t refused_peer = 0;
    int64_t refused_total = 0;
    int64_t refused_fds = 0;
  };
  // Recounts every peer's connections first.
  Counts counts();
  // Open connections from `peer` (an IP address as the gate writes it: "127.0.0.1",
  // "::1"; IPv4-mapped IPv6 addresses are written as IPv4), recounted.
  int64_t OpenFrom(const std::string& peer);

  // The gate's metrics, for a MetricsServer.
  std::shared_ptr<prometheus::Collectable> Collector();

 private:
  // The admitted connections and the refusals, shared with the metrics collector (which
  // may outlive the gate while a scrape runs).
  struct Book;
  class MetricsCollector;

  ConnectionGate(int listen_fd, int wake_fd, int port, const ConnectionLimits& limits);
  void AcceptLoop();
  // Accepts one connection and admits or refuses it.
  void AcceptOne();

  const int listen_fd_;
  const int wake_fd_;  // an eventfd; Stop writes it to end the accept loop's poll
  const int port_;
  const ConnectionLimits limits_;
  int spare_fd_ = -1;  // /dev/null, freed to accept and close when out of descriptors
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor_;
  std::thread thread_;
  std::atomic<bool> stopped_{false};
  const std::shared_ptr<Book> book_;
};

}  // namespace ember

#endif  // EMBER_SERVER_SHARED_CONNECTION_GATE_H_
