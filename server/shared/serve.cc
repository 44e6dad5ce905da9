// Copyright 2026 The Ember Authors.

#include "server/shared/serve.h"
#include "common/keepalive.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/health.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "server/shared/graceful_shutdown.h"

namespace ember {

void DeclareListenFlags(FlagSet& flags, ServerFlags* server) {
  flags.String("host", &server->host, "ADDR", "address to bind");
  flags.Number("port", &server->port, "N", "port to bind; 0 picks a free one").Max(65535);
  flags
      .Number("max_connections", &server->max_connections, "N",
              "client connections open at once; one beyond is closed at accept (-1: half the "
              "open-file limit, at most 16384; 0: no bound)")
      .Min(-1);
  flags
      .Number("max_connections_per_peer", &server->max_connections_per_peer, "N",
              "client connections open at once from one IP address (0: no bound)")
      .Min(0);
}

void DeclareMetricsAndShutdownFlags(FlagSet& flags, ServerFlags* server) {
  flags
      .Number("shutdown_grace_ms", &server->shutdown_grace_ms, "N",
              "time calls in flight get at shutdown")
      .Min(0);
  flags
      .Number("metrics_port", &server->metrics_port, "N",
              "serve Prometheus metrics at /metrics on this port; 0 picks a free one, -1 "
              "disables")
      .Range(-1, 65535);
  flags.String("metrics_host", &server->metrics_host, "ADDR", "address the metrics server binds")
      .DefaultText("--host");
}

void FinishServerFlags(ServerFlags* server) {
  if (server->metrics_host.empty()) server->metrics_host = server->host;
}

ServeOptions ServeOptionsFrom(const ServerFlags& server) {
  ServeOptions serve;
  serve.host = server.host;
  serve.port = server.port;
  serve.max_connections = server.max_connections;
  serve.max_connections_per_peer = server.max_connections_per_peer;
  serve.shutdown_grace = absl::Milliseconds(server.shutdown_grace_ms);
  return serve;
}

absl::Status ServeUntilStopped(const ServeOptions& o, const ServeHooks& hooks) {
  ServerCallTracker calls;  // outlives the server
  EnableHealthService();
  grpc::ServerBuilder builder;
  calls.Install(&builder);
  SetServerKeepalive(&builder);
  // Ember's own listener (connection_gate.h) hands gRPC the connections it admits.
  const std::string open_files = RaiseOpenFileLimit();
  const ConnectionLimits limits =
      ConnectionLimitsFor(o.max_connections, o.max_connections_per_peer);
  EMBER_LOG(INFO) << open_files << "; connections: at most "
                  << (limits.max_connections > 0 ? absl::StrCat(limits.max_connections) : "any")
                  << ", " << (limits.max_per_peer > 0 ? absl::StrCat(limits.max_per_peer) : "any")
                  << " per client address";
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<ConnectionGate> gate,
                         ConnectionGate::Listen(o.host, o.port, limits));
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor =
      builder.experimental().AddExternalConnectionAcceptor(
          grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD, o.credentials);
  if (o.max_receive_message_bytes >= 0) {
    builder.SetMaxReceiveMessageSize(o.max_receive_message_bytes);
  }
  if (o.max_send_message_bytes >= 0) builder.SetMaxSendMessageSize(o.max_send_message_bytes);
  if (o.configure) o.configure(&builder);
  for (grpc::Service* service : o.services) builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot start the server on ", o.host, ":", o.port));
  }
  gate->Start(std::move(acceptor));
  const int port = gate->port();
  std::shared_ptr<prometheus::Collectable> gate_metrics = gate->Collector();
  if (o.metrics != nullptr) o.metrics->Register(gate_metrics);
  HealthReporter health(server.get(), o.health_service);
  EMBER_ASSIGN_OR_RETURN(const int health_port, health.ServeProbes(o.host, o.health_port));
  if (hooks.started) EMBER_RETURN_IF_ERROR(hooks.started(port));
  health.SetReady(true);
  std::cout << "listening on " << o.host << ":" << port << std::endl;
  if (o.metrics != nullptr) std::cout << "metrics on " << o.metrics->address() << std::endl;
  if (health_port >= 0) std::cout << "health on " << o.host << ":" << health_port << std::endl;
  if (hooks.ready) hooks.ready(port);

  const int signal_number = WaitForStopSignal();
  EMBER_LOG(INFO) << "signal " << signal_number << ", shutting down";
  const absl::Status drained = hooks.draining ? hooks.draining() : absl::OkStatus();
  health.Shutdown();
  if (hooks.stopping) hooks.stopping();
  gate->Stop();  // no connection is handed to the server once it shuts down
  ShutdownServer(server.get(), &calls, absl::Now() + o.shutdown_grace);
  const absl::Status stopped = hooks.stopped ? hooks.stopped() : absl::OkStatus();
  return drained.ok() ? stopped : drained;
}

void ExitAfterServing(absl::string_view program, const absl::Status& served) {
  if (!served.ok()) std::cerr << program << ": " << served << std::endl;
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(served.ok() ? 0 : 1);
}

}  // namespace ember
