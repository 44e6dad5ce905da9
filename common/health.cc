// Copyright 2026 The Ember Authors.

#include "common/health.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace ember {
namespace {

// Answers every call the probe port gets other than the health service's. (It also
// gives the probe server the callback service gRPC requires of a server.)
class RefuseEverything final : public grpc::CallbackGenericService {
 public:
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    return new Refusal;
  }

 private:
  class Refusal final : public grpc::ServerGenericBidiReactor {
   public:
    Refusal() {
      Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                          "this port serves only grpc.health.v1.Health"));
    }
    void OnDone() override { delete this; }
  };
};

}  // namespace

void EnableHealthService() { grpc::EnableDefaultHealthCheckService(true); }

HealthReporter::HealthReporter(grpc::Server* server, std::string service)
    : service_(std::move(service)), refuse_(std::make_unique<RefuseEverything>()), server_(server) {
  absl::MutexLock lock(&mu_);
  SetAll("", true);
  SetAll(service_, false);
}

HealthReporter::~HealthReporter() { Shutdown(); }

absl::StatusOr<int> HealthReporter::ServeProbes(const std::string& host, int port) {
  if (port < 0) return -1;
  grpc::ServerBuilder builder;
  builder.RegisterCallbackGenericService(refuse_.get());
  int bound = 0;
  builder.AddListeningPort(absl::StrCat(host, ":", port), grpc::InsecureServerCredentials(),
                           &bound);
  std::unique_ptr<grpc::Server> probes = builder.BuildAndStart();
  if (probes == nullptr || bound == 0) {
    return absl::UnavailableError(
        absl::StrCat("--health_port: cannot listen on ", host, ":", port));
  }
  absl::MutexLock lock(&mu_);
  probes_ = std::move(probes);
  // The probe server starts with its own defaults: give it this server's state.
  if (shut_down_) {
    probes_->GetHealthCheckService()->Shutdown();
  } else {
    SetAll("", true);
    SetAll(service_, ready_);
  }
  return bound;
}

void HealthReporter::SetReady(bool ready) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  ready_ = ready;
  SetAll(service_, ready);
}

void HealthReporter::Shutdown() {
  std::unique_ptr<grpc::Server> probes;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    for (grpc::Server* server : {server_, probes_.get()}) {
      if (server != nullptr && server->GetHealthCheckService() != nullptr) {
        server->GetHealthCheckService()->Shutdown();
      }
    }
    probes = std::move(probes_);
  }
  if (probes != nullptr) probes->Shutdown(absl::ToChronoTime(absl::Now()));
}

void HealthReporter::SetAll(const std::string& service, bool serving) {
  for (grpc::Server* server : {server_, probes_.get()}) {
    if (server != nullptr && server->GetHealthCheckService() != nullptr) {
      server->GetHealthCheckService()->SetServingStatus(service, serving);
    }
  }
}

}  // namespace ember
