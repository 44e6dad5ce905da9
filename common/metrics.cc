// Copyright 2026 The Ember Authors.

#include "common/metrics.h"

#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/build_info.h"
#include "prometheus/exposer.h"
#include "prometheus/gauge.h"

namespace ember {
namespace {

// ember_build_info{version,commit} 1.
std::shared_ptr<prometheus::Registry> BuildInfoRegistry() {
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildGauge()
      .Name("ember_build_info")
      .Help("The build of this process: its version and git commit; always 1")
      .Register(*registry)
      .Add({{"version", std::string(BuildVersion())}, {"commit", std::string(BuildCommit())}})
      .Set(1);
  return registry;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& host,
                                                                    int port) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("metrics port ", port, " not in [0, 65535]"));
  }
  const std::string bind = absl::StrCat(host, ":", port);
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    // civetweb throws when it cannot bind; translated here, never propagated.
    exposer = std::make_unique<prometheus::Exposer>(bind, /*num_threads=*/2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", bind, ": ", e.what()));
  }
  const std::vector<int> ports = exposer->GetListeningPorts();
  if (ports.empty() || ports[0] <= 0) {
    return absl::UnavailableError(absl::StrCat("metrics server on ", bind, " reports no port"));
  }
  return std::unique_ptr<MetricsServer>(new MetricsServer(host, std::move(exposer), ports[0]));
}

MetricsServer::MetricsServer(std::string host, std::unique_ptr<prometheus::Exposer> exposer,
                             int port)
    : host_(std::move(host)),
      build_info_(BuildInfoRegistry()),
      exposer_(std::move(exposer)),
      port_(port) {
  exposer_->RegisterCollectable(build_info_);
}

MetricsServer::~MetricsServer() = default;

void MetricsServer::Register(const std::weak_ptr<prometheus::Collectable>& collectable) {
  exposer_->RegisterCollectable(collectable);
}

std::string MetricsServer::address() const { return absl::StrCat(host_, ":", port_); }

std::vector<double> RpcLatencyBuckets() {
  return {50e-6, 100e-6, 250e-6, 500e-6, 1e-3,   2.5e-3, 5e-3, 10e-3,
          25e-3, 50e-3,  100e-3, 250e-3, 500e-3, 1.0,    2.5,  5.0};
}

std::string GrpcCodeName(absl::StatusCode code) {
  // absl's codes and names are gRPC's; anything outside them is reported as UNKNOWN,
  // as gRPC itself would.
  std::string name = absl::StatusCodeToString(code);
  return name.empty() ? "UNKNOWN" : name;
}

RpcMethodMetrics::RpcMethodMetrics(std::string method, prometheus::Histogram* latency,
                                   prometheus::Family<prometheus::Counter>* calls)
    : method_(std::move(method)), latency_(latency), calls_(calls) {}

prometheus::Counter* RpcMethodMetrics::CallsWith(absl::StatusCode code) {
  int index = static_cast<int>(code);
  if (index < 0 || index >= kNumCodes) index = static_cast<int>(absl::StatusCode::kUnknown);
  std::atomic<prometheus::Counter*>& slot = by_code_[index];
  prometheus::Counter* counter = slot.load(std::memory_order_acquire);
  if (counter == nullptr) {
    counter = &calls_->Add(
        {{"method", method_}, {"code", GrpcCodeName(static_cast<absl::StatusCode>(index))}});
    slot.store(counter, std::memory_order_release);
  }
  return counter;
}

void RpcMethodMetrics::Record(absl::StatusCode code, int64_t latency_micros) {
  latency_->Observe(static_cast<double>(latency_micros) * 1e-6);
  CallsWith(code)->Increment();
}

RpcMetrics::RpcMetrics(prometheus::Registry& registry, absl::string_view prefix)
    : latency_(prometheus::BuildHistogram()
                   .Name(absl::StrCat(prefix, "_latency_seconds"))
                   .Help("Time from an RPC handler's start to its response, by method.")
                   .Register(registry)),
      calls_(prometheus::BuildCounter()
                 .Name(absl::StrCat(prefix, "_total"))
                 .Help("RPCs handled, by method and gRPC status code.")
                 .Register(registry)) {}

RpcMethodMetrics& RpcMetrics::Method(absl::string_view method) {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<RpcMethodMetrics>& m = methods_[method];
  if (m == nullptr) {
    const std::string name(method);
    prometheus::Histogram* latency = &latency_.Add({{"method", name}}, RpcLatencyBuckets());
    m.reset(new RpcMethodMetrics(name, latency, &calls_));
  }
  return *m;
}

}  // namespace ember
