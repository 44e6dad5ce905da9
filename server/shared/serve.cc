// Copyright 2026 The Ember Authors.

#include "server/shared/serve.h"
#include "common/keepalive.h"

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
  serve.shutdown_grace = absl::Milliseconds(server.shutdown_grace_ms);
  return serve;
}

absl::Status ServeUntilStopped(const ServeOptions& o, const ServeHooks& hooks) {
  ServerCallTracker calls;  // outlives the server
  EnableHealthService();
  grpc::ServerBuilder builder;
  calls.Install(&builder);
  SetServerKeepalive(&builder);
  int port = 0;
  builder.AddListeningPort(absl::StrCat(o.host, ":", o.port), o.credentials, &port);
  if (o.max_receive_message_bytes >= 0) {
    builder.SetMaxReceiveMessageSize(o.max_receive_message_bytes);
  }
  if (o.max_send_message_bytes >= 0) builder.SetMaxSendMessageSize(o.max_send_message_bytes);
  if (o.configure) o.configure(&builder);
  for (grpc::Service* service : o.services) builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", o.host, ":", o.port));
  }
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
  ShutdownServer(server.get(), &calls, absl::Now() + o.shutdown_grace);
  const absl::Status stopped = hooks.stopped ? hooks.stopped() : absl::OkStatus();
  return drained.ok() ? stopped : drained;
}

}  // namespace ember
