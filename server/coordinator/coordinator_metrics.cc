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

}  // namespace ember
