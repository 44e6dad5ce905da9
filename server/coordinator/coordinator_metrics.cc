// Copyright 2026 The Ember Authors.

#include "server/coordinator/coordinator_metrics.h"

#include <string>
#include <utility>

#include "common/metric_families.h"

namespace ember {

std::vector<prometheus::MetricFamily> CoordinatorCollector::Collect() const {
  std::vector<prometheus::MetricFamily> out;
  FamilyWriter w(&out);
  std::vector<std::pair<std::string, double>> alive, age, slots;
  for (const v1::ShardInfo& shard : state_->Shards()) {
    const std::string id = std::to_string(shard.shard_id());
    alive.emplace_back(id, shard.state() == v1::ShardInfo::ALIVE ? 1 : 0);
    age.emplace_back(id, static_cast<double>(shard.millis_since_heartbeat()) / 1000.0);
    slots.emplace_back(id, shard.owned_slots());
  }
  w.Labelled("ember_coordinator_shard_alive",
             "1 while the shard heartbeats within --heartbeat_timeout_ms (ALIVE), 0 when DEAD.",
             prometheus::MetricType::Gauge, "shard", alive);
  w.Labelled("ember_coordinator_shard_heartbeat_age_seconds",
             "Seconds since the coordinator last heard from the shard.",
             prometheus::MetricType::Gauge, "shard", age);
  w.Labelled("ember_coordinator_shard_owned_slots", "Slots the coordinator's map gives the shard.",
             prometheus::MetricType::Gauge, "shard", slots);
  w.Gauge("ember_coordinator_slot_map_epoch", "Epoch of the coordinator's slot map.",
          static_cast<double>(state_->slot_map().epoch()));
  w.Gauge("ember_coordinator_shards", "Registered shards.", static_cast<double>(alive.size()));
  return out;
}

std::vector<prometheus::MetricFamily> JobCollector::Collect() const {
  std::vector<prometheus::MetricFamily> out;
  FamilyWriter w(&out);
  std::vector<std::pair<std::string, double>> ratio, eta, speed, workers, step;
  for (const v1::GetJobResponse& job : jobs_->ListJobs()) {
    const bool running = job.phase() == v1::GetJobResponse::RUNNING;
    const bool ended =
        job.phase() == v1::GetJobResponse::FINISHED || job.phase() == v1::GetJobResponse::FAILED;
    workers.emplace_back(job.job(), ended ? 0 : job.world_size());
    if (!job.has_progress()) continue;
    const v1::JobProgress& p = job.progress();
    ratio.emplace_back(job.job(), p.progress_ratio());
    if (p.eta_seconds() >= 0) eta.emplace_back(job.job(), p.eta_seconds());
    speed.emplace_back(job.job(), running ? p.examples_per_sec() : 0);
    step.emplace_back(job.job(), static_cast<double>(p.step()));
  }
  w.Labelled("ember_job_progress_ratio",
             "Steps done over the run's estimated steps (rank 0's last report; 1 once finished).",
             prometheus::MetricType::Gauge, "training_job", ratio);
  w.Labelled("ember_job_eta_seconds",
             "Seconds left in the run at its current speed, counted down since the last report.",
             prometheus::MetricType::Gauge, "training_job", eta);
  w.Labelled("ember_job_examples_per_second",
             "Training examples per second over all workers of the running attempt.",
             prometheus::MetricType::Gauge, "training_job", speed);
  w.Labelled("ember_job_workers", "World size of the job's attempt (0 once it ended).",
             prometheus::MetricType::Gauge, "training_job", workers);
  w.Labelled("ember_job_step", "Steps done in the job's run (rank 0's last report).",
             prometheus::MetricType::Gauge, "training_job", step);
  return out;
}

}  // namespace ember
