// Copyright 2026 The Ember Authors.
//
// HotSetPublisher: the coordinator's hot set (proto/ember/v1/hotkeys.proto, docs/ARCHITECTURE.md
// "Skew"). It keeps each shard's latest HotKeyReport (from its heartbeats), and at
// every Compute (on its own thread every `publish_interval` once started):
//  * forgets the reports of shards that are not ALIVE;
//  * sums each (table, id)'s rate over the shards, and the shards' total_rate;
//  * per table, takes the keys whose share = rate / total_rate is at least
//    `min_share`, plus the keys already hot whose share is still at least
//    min_share / 2 (hysteresis), the `keys_per_table` highest rates of them (ties:
//    smaller id first);
//  * publishes version + 1 when the keys, the holders (the ALIVE shards by ascending
//    id, with their addresses and process incarnations) or the settings differ from
//    the current set. Otherwise
//    the current set only takes the new rates and total_rate (no new version).
//
// The hot set is soft state: nothing is persisted. A restarted coordinator starts at
// version 0; a shard or client that reports a newer version than the current one
// (Heartbeat's hot_set_version, GetHotSet's known_version) makes the next Compute
// publish above it, so every holder of an old version gets the new set (they only
// take versions newer than theirs).
//
//   HotSetOptions options;
//   options.replicas = 2;
//   HotSetPublisher publisher(options);
//   publisher.Start([&state] { return state.Shards(); });
//   publisher.Report(shard_id, incarnation, request.hot_keys(), request.hot_set_version());
//   v1::HotSet set = publisher.Get(known_version);  // lists omitted when current
//   publisher.Stop();
//
// Thread-safety: all methods may be called concurrently; Start and Stop from one
// thread. The shards callback runs on the publisher thread, never under its lock.

#ifndef EMBER_SERVER_COORDINATOR_HOT_SET_PUBLISHER_H_
#define EMBER_SERVER_COORDINATOR_HOT_SET_PUBLISHER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "ember/v1/coordinator.pb.h"
#include "ember/v1/hotkeys.pb.h"
#include "prometheus/collectable.h"

namespace ember {

// Settings of the hot set (coordinator flags --hot_*). Not changeable after
// construction.
struct HotSetOptions {
  // Most hot keys per table; 0 disables hot keys entirely (nothing is ever published:
  // version stays 0). Default: 32
  uint32_t keys_per_table = 32;
  // Least share of the cluster's load that makes a key hot, in (0, 1]. A hot key stays
  // hot while its share is at least half of it. Default: 0.01 (on 4 shards, a key that
  // alone adds 4% to its owner's mean load). Training jobs deduplicate a batch's IDs,
  // so their keys stay far below it and are not replicated (docs/PERFORMANCE.md "Skew").
  double min_share = 0.01;
  // Time between two computations on the publisher thread. Default: 1 s
  absl::Duration publish_interval = absl::Seconds(1);
  // Published as HotSet.replicas, refresh_interval_ms, max_staleness_ms,
  // max_staleness_steps (see hotkeys.proto). Default: 0 each (replication off).
  uint32_t replicas = 0;
  uint32_t refresh_interval_ms = 0;
  uint32_t max_staleness_ms = 0;
  uint32_t max_staleness_steps = 0;
};

// INVALID_ARGUMENT naming the flag for options out of range.
absl::Status ValidateHotSetOptions(const HotSetOptions& options);

class HotSetPublisher {
 public:
  using ShardsCallback = std::function<std::vector<v1::ShardInfo>()>;

  explicit HotSetPublisher(const HotSetOptions& options);
  // Stop().
  ~HotSetPublisher();

  HotSetPublisher(const HotSetPublisher&) = delete;
  HotSetPublisher& operator=(const HotSetPublisher&) = delete;

  // Starts the thread that calls Compute(shards()) every publish_interval (the first
  // at once). FAILED_PRECONDITION if already started; INVALID_ARGUMENT for bad
  // options or a missing callback. Does nothing (OK) when keys_per_table is 0.
  absl::Status Start(ShardsCallback shards);
  // Stops and joins the thread. Idempotent.
  void Stop();

  // Records `report` as shard `shard_id`'s latest (replacing the previous one), the
  // shard process's `incarnation` (0: unknown) and `applied_version`, the hot set
  // version the shard has.
  void Report(uint32_t shard_id, uint64_t incarnation, const v1::HotKeyReport& report,
              uint64_t applied_version);
  // Records a (re)registration: a new incarnation makes the next Compute publish
  // (HotSetHolder.incarnation). 0: unknown, ignored.
  void ShardRegistered(uint32_t shard_id, uint64_t incarnation);

  // One computation over `shards` (the coordinator's view, any order). Returns whether
  // it published a new version.
  bool Compute(const std::vector<v1::ShardInfo>& shards);

  // The current hot set for a caller that has `known_version`: without `tables` and
  // `holders` when known_version equals the current version. A known_version above the
  // current one (a restarted coordinator) makes the next Compute publish above it.
  v1::HotSet Get(uint64_t known_version);
  // The current version (0: nothing published yet).
  uint64_t version() const;

  // Scrape-time metrics: ember_hot_set_version, ember_hot_keys{table}.
  std::shared_ptr<prometheus::Collectable> MetricsCollector();

 private:
  class Collector;

  void Loop();
  // Marks that someone holds `version`: the next Compute publishes above it.
  void SeenVersion(uint64_t version) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Compute's phases. Adds a holder per alive shard (ascending) to *next.
  void AddHolders(const std::vector<const v1::ShardInfo*>& alive, v1::HotSet* next)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the reports of shards not alive and sums the others' key rates per table
  // into *rates; returns their total rate.
  double SumRates(const absl::flat_hash_set<uint32_t>& alive_ids,
                  std::map<std::string, absl::flat_hash_map<uint64_t, double>>* rates)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds to *next, per table, the keys whose share of `total` reaches min_share (half
  // of it for keys hot in `was`), hottest first, at most keys_per_table.
  void AddHotKeys(const std::map<std::string, absl::flat_hash_map<uint64_t, double>>& rates,
                  double total, const std::map<std::string, std::vector<uint64_t>>& was,
                  v1::HotSet* next) const;

  const HotSetOptions options_;
  ShardsCallback shards_;
  absl::Notification stop_;
  std::thread thread_;

  mutable absl::Mutex mu_;
  std::map<uint32_t, v1::HotKeyReport> reports_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, uint64_t> incarnations_ ABSL_GUARDED_BY(mu_);  // last known
  v1::HotSet current_ ABSL_GUARDED_BY(mu_);                         // version 0: none published
  // The highest version a shard or client said it has, if above current_.version().
  uint64_t floor_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ember

#endif  // EMBER_SERVER_COORDINATOR_HOT_SET_PUBLISHER_H_
