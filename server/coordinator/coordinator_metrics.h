// Copyright 2026 The Ember Authors.
//
// CoordinatorCollector: the coordinator's view of the cluster as Prometheus metrics,
// read from CoordinatorState at scrape time (what `emberctl status` shows):
//
//   ember_coordinator_shard_alive{shard}                   1 ALIVE, 0 DEAD
//   ember_coordinator_shard_heartbeat_age_seconds{shard}   since the last heartbeat
//   ember_coordinator_shard_owned_slots{shard}             slots the map gives it
//   ember_coordinator_slot_map_epoch                       the map's epoch
//   ember_coordinator_shards                               registered shards
//
// deploy/prometheus/alerts.yml alerts on the heartbeat age (a shard that stopped
// reporting) before the coordinator's own --heartbeat_timeout_ms turns it DEAD.
//
// JobCollector: every job's progress (JobManager::ListJobs, rank 0's reports), for
// operators and autoscalers. The label is `training_job`, not `job`, which Prometheus
// gives every series of a scrape target:
//
//   ember_job_progress_ratio{training_job}       steps done / estimated steps (1: finished)
//   ember_job_eta_seconds{training_job}          seconds left at the current speed (absent:
//                                                unknown)
//   ember_job_examples_per_second{training_job}  all workers, this attempt (0 unless RUNNING)
//   ember_job_workers{training_job}              the attempt's world size (0 once it ended)
//   ember_job_step{training_job}                 steps done in the run
//
// Thread-safety: Collect may run concurrently with anything; `state` and `jobs` must
// outlive the collectors.

#ifndef EMBER_SERVER_COORDINATOR_COORDINATOR_METRICS_H_
#define EMBER_SERVER_COORDINATOR_COORDINATOR_METRICS_H_

#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "server/coordinator/coordinator_state.h"
#include "server/coordinator/job_manager.h"

namespace ember {

class CoordinatorCollector final : public prometheus::Collectable {
 public:
  explicit CoordinatorCollector(const CoordinatorState* state) : state_(state) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const CoordinatorState* const state_;
};

class JobCollector final : public prometheus::Collectable {
 public:
  explicit JobCollector(const JobManager* jobs) : jobs_(jobs) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const JobManager* const jobs_;
};

}  // namespace ember

#endif  // EMBER_SERVER_COORDINATOR_COORDINATOR_METRICS_H_
