// Copyright 2026 The Ember Authors.
//
// WorkerMetrics: a training worker's Prometheus metrics, served on its own port
// (common/metrics.h): steps and examples, the latest loss, and seconds spent per
// stage of a step (pull, compute, all-reduce, push), so an operator sees where a
// step's time goes; and the skew handling's counts (ModelConfig.skew): examples judged
// cold, replayed examples, hot-row cache lookups and hits.

#ifndef EMBER_WORKER_JOB_WORKER_METRICS_H_
#define EMBER_WORKER_JOB_WORKER_METRICS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/metrics.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace ember::worker {

class WorkerMetrics {
 public:
  // Serves the metrics on host:port (0 = ephemeral). Errors: the server's.
  static absl::StatusOr<std::unique_ptr<WorkerMetrics>> Start(const std::string& host, int port);

  // Records one step: this worker's examples, the step's mean loss (global) and the
  // seconds of each stage.
  void RecordStep(int examples, double loss, double pull_s, double compute_s, double allreduce_s,
                  double push_s);
  // Records this worker's skew counts of one step: read examples judged cold, replayed
  // examples, hot keys looked up in the hot-row cache and the hits among them.
  void RecordSkew(double cold, double resampled, double cache_lookups, double cache_hits);
  std::string address() const { return server_->address(); }

 private:
  WorkerMetrics(std::unique_ptr<MetricsServer> server, std::shared_ptr<prometheus::Registry> r);

  std::unique_ptr<MetricsServer> server_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Counter* steps_;
  prometheus::Counter* examples_;
  prometheus::Gauge* loss_;
  prometheus::Counter* pull_seconds_;
  prometheus::Counter* compute_seconds_;
  prometheus::Counter* allreduce_seconds_;
  prometheus::Counter* push_seconds_;
  prometheus::Counter* cold_examples_;
  prometheus::Counter* resampled_examples_;
  prometheus::Counter* hot_cache_lookups_;
  prometheus::Counter* hot_cache_hits_;
};

}  // namespace ember::worker

#endif  // EMBER_WORKER_JOB_WORKER_METRICS_H_
