// Copyright 2026 The Ember Authors.
//
// Metrics: a thin layer over prometheus-cpp shared by every Ember process.
//
// A process owns one prometheus::Registry for its metric families and, when metrics are
// enabled, one MetricsServer that serves it (and any extra Collectable, e.g. gauges
// computed at scrape time) in the Prometheus text format at http://HOST:PORT/metrics.
// RpcMetrics records the latency and outcome of every RPC a server handles.
//
//   auto registry = std::make_shared<prometheus::Registry>();
//   RpcMetrics rpcs(*registry);
//   RpcMethodMetrics& pull = rpcs.Method("Pull");
//   ...
//   const int64_t start = clock->NowMicros();
//   absl::Status s = DoPull(...);
//   pull.Record(s.code(), clock->NowMicros() - start);
//
//   EMBER_ASSIGN_OR_RETURN(std::unique_ptr<MetricsServer> server,
//                          MetricsServer::Start("127.0.0.1", /*port=*/0));
//   server->Register(registry);
//   std::cout << "metrics on 127.0.0.1:" << server->port() << "\n";
//
// Metric names follow Prometheus conventions: snake_case, prefixed "ember_", base units
// (seconds, bytes), counters end in "_total".
//
// Thread-safety: every method may be called concurrently.

#ifndef EMBER_COMMON_METRICS_H_
#define EMBER_COMMON_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace ember {

// Serves registered collectables over HTTP at /metrics until destroyed. Every scrape
// also carries ember_build_info{version="0.2.0",commit="a78bb8c"} 1
// (common/build_info.h), so a dashboard can tell which build each process runs.
class MetricsServer {
 public:
  // Binds HOST:PORT (port 0: the kernel picks a free one, see port()) and starts
  // serving. UNAVAILABLE if the address cannot be bound; INVALID_ARGUMENT for a port
  // outside [0, 65535].
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& host, int port);

  // Stops serving; returns after scrapes in progress finished. Collectables registered
  // here are not touched afterwards.
  ~MetricsServer();

  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Adds `collectable` (a Registry or a custom collector) to every scrape. It is held
  // weakly: one that has expired is skipped.
  void Register(const std::weak_ptr<prometheus::Collectable>& collectable);

  // The bound port (the real one when Start was given 0).
  int port() const { return port_; }
  // "HOST:PORT".
  std::string address() const;

 private:
  MetricsServer(std::string host, std::unique_ptr<prometheus::Exposer> exposer, int port);

  const std::string host_;
  // Declared before the exposer, so it outlives every scrape.
  const std::shared_ptr<prometheus::Registry> build_info_;
  const std::unique_ptr<prometheus::Exposer> exposer_;
  const int port_;
};

// Histogram buckets for RPC latencies in seconds: 50 us to 5 s, about three per
// decade (50, 100, 250, 500 us, 1, 2.5, 5, 10, 25, 50, 100, 250, 500 ms, 1, 2.5, 5 s).
std::vector<double> RpcLatencyBuckets();

// The latency and outcome counters of one RPC method. Obtained from RpcMetrics.
class RpcMethodMetrics {
 public:
  // Records one finished call: `code` is its status (absl codes are gRPC's codes),
  // `latency_micros` the time from the handler's start to its Finish.
  void Record(absl::StatusCode code, int64_t latency_micros);

 private:
  friend class RpcMetrics;
  static constexpr int kNumCodes = 17;  // absl::StatusCode 0 (OK) .. 16 (UNAUTHENTICATED)

  RpcMethodMetrics(std::string method, prometheus::Histogram* latency,
                   prometheus::Family<prometheus::Counter>* calls);
  prometheus::Counter* CallsWith(absl::StatusCode code);

  const std::string method_;
  prometheus::Histogram* const latency_;
  prometheus::Family<prometheus::Counter>* const calls_;
  // Counters created on first use per code; Family::Add returns the same counter for
  // the same labels, so racing creators agree.
  std::array<std::atomic<prometheus::Counter*>, kNumCodes> by_code_{};
};

// The RPC metric families of one server, in `registry`:
//   <prefix>_latency_seconds{method}  histogram, RpcLatencyBuckets()
//   <prefix>_total{method,code}       counter; code is the gRPC code name, e.g. "OK",
//                                     "INVALID_ARGUMENT", "FAILED_PRECONDITION"
class RpcMetrics {
 public:
  // `registry` must outlive this object. Default prefix: "ember_rpc".
  explicit RpcMetrics(prometheus::Registry& registry, absl::string_view prefix = "ember_rpc");

  RpcMetrics(const RpcMetrics&) = delete;
  RpcMetrics& operator=(const RpcMetrics&) = delete;

  // The metrics of `method` (e.g. "Pull"), created on first use. The reference stays
  // valid for the lifetime of this object; callers on hot paths keep it.
  RpcMethodMetrics& Method(absl::string_view method);

 private:
  prometheus::Family<prometheus::Histogram>& latency_;
  prometheus::Family<prometheus::Counter>& calls_;

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<RpcMethodMetrics>> methods_ ABSL_GUARDED_BY(mu_);
};

// The gRPC name of `code` ("OK", "CANCELLED", ..., "UNAUTHENTICATED").
std::string GrpcCodeName(absl::StatusCode code);

}  // namespace ember

#endif  // EMBER_COMMON_METRICS_H_
