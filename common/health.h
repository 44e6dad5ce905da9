// Copyright 2026 The Ember Authors.
//
// Liveness and readiness over the standard gRPC health service (grpc.health.v1.Health,
// proto/grpc/health/v1/health.proto). Every Ember server answers it on its own port
// (with the port's TLS). Kubernetes' gRPC probes cannot speak TLS, so with
// --health_port a server also answers it, and nothing else, in plaintext on a second
// port: the probe learns whether the process is up and ready, and reaches no data.
//
//   Service ""            SERVING while the process runs (liveness).
//   Service kPsService... SERVING once the server takes traffic, NOT_SERVING before
//                         that and while it drains at shutdown (readiness).
//
//   EnableHealthService();                        // before any ServerBuilder
//   std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
//   HealthReporter health(server.get(), "ember.v1.PsService");
//   EMBER_RETURN_IF_ERROR(health.ServeProbes(host, health_port));
//   health.SetReady(true);
//   ...
//   health.Shutdown();                            // first thing at shutdown
//
// Thread-safety: SetReady and Shutdown may be called from any thread.

#ifndef EMBER_COMMON_HEALTH_H_
#define EMBER_COMMON_HEALTH_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/server.h"

namespace ember {

// Makes every server built from here on carry the health service. Idempotent.
void EnableHealthService();

class HealthReporter {
 public:
  // `server` (not owned, built after EnableHealthService) reports `service` as not
  // ready until SetReady(true).
  HealthReporter(grpc::Server* server, std::string service);
  ~HealthReporter();

  HealthReporter(const HealthReporter&) = delete;
  HealthReporter& operator=(const HealthReporter&) = delete;

  // Starts the plaintext probe port on `host`:`port` (0 picks one); -1 does nothing.
  // Returns the bound port (-1 for none). UNAVAILABLE when it cannot listen.
  absl::StatusOr<int> ServeProbes(const std::string& host, int port);

  // Readiness of the service on both ports.
  void SetReady(bool ready);

  // Everything NOT_SERVING (and stays so), then the probe port stops.
  void Shutdown();

 private:
  void SetAll(const std::string& service, bool serving) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string service_;
  const std::unique_ptr<grpc::CallbackGenericService> refuse_;  // the probe port's
  absl::Mutex mu_;
  grpc::Server* const server_;
  std::unique_ptr<grpc::Server> probes_ ABSL_GUARDED_BY(mu_);
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ember

#endif  // EMBER_COMMON_HEALTH_H_
