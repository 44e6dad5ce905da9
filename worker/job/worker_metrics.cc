// Copyright 2026 The Ember Authors.

#include "worker/job/worker_metrics.h"

#include <utility>

#include "common/status_macros.h"

namespace ember::worker {

absl::StatusOr<std::unique_ptr<WorkerMetrics>> WorkerMetrics::Start(const std::string& host,
                                                                    int port) {
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<MetricsServer> server, MetricsServer::Start(host, port));
  auto registry = std::make_shared<prometheus::Registry>();
  server->Register(registry);
  return std::unique_ptr<WorkerMetrics>(new WorkerMetrics(std::move(server), std::move(registry)));
}

WorkerMetrics::WorkerMetrics(std::unique_ptr<MetricsServer> server,
                             std::shared_ptr<prometheus::Registry> r)
    : server_(std::move(server)), registry_(std::move(r)) {
  steps_ = &prometheus::BuildCounter()
                .Name("ember_worker_steps_total")
                .Help("Training steps this worker completed.")
                .Register(*registry_)
                .Add({});
  examples_ = &prometheus::BuildCounter()
                   .Name("ember_worker_examples_total")
                   .Help("Training examples this worker processed.")
                   .Register(*registry_)
                   .Add({});
  loss_ = &prometheus::BuildGauge()
               .Name("ember_worker_loss")
               .Help("Mean training loss of the latest step over all workers.")
               .Register(*registry_)
               .Add({});
  auto& stage = prometheus::BuildCounter()
                    .Name("ember_worker_stage_seconds_total")
                    .Help("Seconds spent per stage of a training step.")
                    .Register(*registry_);
  pull_seconds_ = &stage.Add({{"stage", "pull"}});
  compute_seconds_ = &stage.Add({{"stage", "compute"}});
  allreduce_seconds_ = &stage.Add({{"stage", "allreduce"}});
  push_seconds_ = &stage.Add({{"stage", "push"}});
  cold_examples_ = &prometheus::BuildCounter()
                        .Name("ember_worker_cold_examples_total")
                        .Help("Training examples this worker judged cold (skew.cold_features).")
                        .Register(*registry_)
                        .Add({});
  resampled_examples_ = &prometheus::BuildCounter()
                             .Name("ember_worker_resampled_examples_total")
                             .Help("Cold examples this worker replayed (skew re-sampling).")
                             .Register(*registry_)
                             .Add({});
  hot_cache_lookups_ = &prometheus::BuildCounter()
                            .Name("ember_worker_hot_cache_lookups_total")
                            .Help("Hot keys this worker looked up in its hot-row cache.")
                            .Register(*registry_)
                            .Add({});
  hot_cache_hits_ = &prometheus::BuildCounter()
                         .Name("ember_worker_hot_cache_hits_total")
                         .Help("Hot-row cache lookups served without a pull.")
                         .Register(*registry_)
                         .Add({});
}

void WorkerMetrics::RecordSkew(double cold, double resampled, double cache_lookups,
                               double cache_hits) {
  cold_examples_->Increment(cold);
  resampled_examples_->Increment(resampled);
  hot_cache_lookups_->Increment(cache_lookups);
  hot_cache_hits_->Increment(cache_hits);
}

void WorkerMetrics::RecordStep(int examples, double loss, double pull_s, double compute_s,
                               double allreduce_s, double push_s) {
  steps_->Increment();
  examples_->Increment(examples);
  loss_->Set(loss);
  pull_seconds_->Increment(pull_s);
  compute_seconds_->Increment(compute_s);
  allreduce_seconds_->Increment(allreduce_s);
  push_seconds_->Increment(push_s);
}

}  // namespace ember::worker
