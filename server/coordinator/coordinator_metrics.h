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
// Thread-safety: Collect may run concurrently with anything; `state` must outlive it.

#ifndef EMBER_SERVER_COORDINATOR_COORDINATOR_METRICS_H_
#define EMBER_SERVER_COORDINATOR_COORDINATOR_METRICS_H_

#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "server/coordinator/coordinator_state.h"

namespace ember {

class CoordinatorCollector final : public prometheus::Collectable {
 public:
  explicit CoordinatorCollector(const CoordinatorState* state) : state_(state) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const CoordinatorState* const state_;
};

}  // namespace ember

#endif  // EMBER_SERVER_COORDINATOR_COORDINATOR_METRICS_H_
