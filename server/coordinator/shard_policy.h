// Copyright 2026 The Ember Authors.
//
// ShardPolicy: the coordinator's policy loop for shards that come and go while jobs
// run. It moves slots with the existing machinery only: the rebalance planner
// (rebalance_planner.h) decides which slots go where, the SlotMigrator (slot_migrator.h)
// moves them online. It never runs more than one operation at a time, and it never
// starts one while another (an operator's too) runs: it waits for its turn.
//
//   Join (with auto_rebalance): an alive shard that owns no slots and is not leaving
//     gets about its share, planned by slot count over every alive shard that is not
//     leaving ("auto rebalance: shard 2 joined").
//   Drain (always): a shard that asked to leave (Leave, CoordinatorService.LeaveCluster,
//     sent by a shard on SIGTERM) gives every slot to the others; the plan keeps only
//     the moves out of leaving shards ("drain shard 1 (leaving)"). Drains go before joins.
//
// A start the migrator refuses (a dead owner, a shard that is not alive), or an
// operation of the policy that ends FAILED, is tried again after `retry`. Leaving is
// memory only: the shard asks again and again until it owns nothing, so a restarted
// coordinator learns it anew; a shard seen with a new incarnation (a new process under
// the id) is no longer leaving.
//
//   ShardPolicy policy(state.get(), &migrator, options);
//   policy.Start();
//   ... service: policy.OnShardSeen(id, incarnation) on every registration and heartbeat,
//   ...          policy.Leave(id, incarnation) for LeaveCluster
//   policy.Stop();  // before the migrator stops
//
// Metrics (MetricsCollector):
//   ember_coordinator_policy_migrations_total{kind="join|drain"}  operations started
//   ember_coordinator_policy_failed_starts_total                   starts refused or
//                                                                  operations FAILED
//   ember_coordinator_leaving_shards                               alive shards leaving
//
// Thread-safety: all methods may be called concurrently; the loop runs on its own
// thread. `state` and `migrator` are not owned and must outlive the policy.

#ifndef EMBER_SERVER_COORDINATOR_SHARD_POLICY_H_
#define EMBER_SERVER_COORDINATOR_SHARD_POLICY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ember/v1/coordinator.pb.h"
#include "prometheus/collectable.h"
#include "server/coordinator/coordinator_state.h"
#include "server/coordinator/slot_migrator.h"

namespace ember {

struct ShardPolicyOptions {
  // Give a shard that joins with no slots its share (--auto_rebalance). Draining is
  // always on. Default: false
  bool auto_rebalance = false;
  // Wait before trying again after a refused start or a FAILED operation
  // (--policy_retry_ms). Default: 5 s
  absl::Duration retry = absl::Seconds(5);
  // How often the loop looks at the cluster (it also wakes on Leave). Default: 200 ms
  absl::Duration tick = absl::Milliseconds(200);
  // Copy rate of the policy's operations, bytes/s; 0: unthrottled. Default: 0
  uint64_t bytes_per_sec = 0;
};

class ShardPolicy {
 public:
  ShardPolicy(CoordinatorState* state, SlotMigrator* migrator, ShardPolicyOptions options);
  // Stop().
  ~ShardPolicy();

  ShardPolicy(const ShardPolicy&) = delete;
  ShardPolicy& operator=(const ShardPolicy&) = delete;

  // Starts the loop. Idempotent.
  void Start();
  // Stops the loop (an operation it started keeps running in the migrator). Idempotent.
  void Stop();

  // A registration or heartbeat of `shard_id` from process `incarnation` (0: unknown,
  // ignored). A new incarnation of a leaving shard is no longer leaving.
  void OnShardSeen(uint32_t shard_id, uint64_t incarnation);

  // Shard `shard_id` (process `incarnation`) asks to leave: marks it leaving and
  // answers how far its drain is (done once it owns no slot). Errors, and nothing is
  // marked: FAILED_PRECONDITION for a shard the coordinator does not know, an
  // incarnation other than the one that last registered or heartbeat (another process
  // has the id), slots not assigned yet, or no other alive shard that is not leaving to
  // take its slots (the last shard holding slots); INVALID_ARGUMENT for incarnation 0.
  absl::StatusOr<v1::LeaveClusterResponse> Leave(uint32_t shard_id, uint64_t incarnation);

  // The metrics above, read at scrape time.
  std::shared_ptr<prometheus::Collectable> MetricsCollector();

 private:
  class Collector;

  void Loop();
  // One look at the cluster: starts at most one operation.
  void Step();
  // Why the shard's drain is not done yet, for its log.
  std::string DrainDetail(uint32_t shard_id) const;

  CoordinatorState* const state_;
  SlotMigrator* const migrator_;
  const ShardPolicyOptions options_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  std::map<uint32_t, uint64_t> incarnations_ ABSL_GUARDED_BY(mu_);  // last seen
  std::map<uint32_t, uint64_t> leaving_ ABSL_GUARDED_BY(mu_);       // id -> incarnation
  std::string op_id_ ABSL_GUARDED_BY(mu_);                          // the policy's newest operation
  bool op_checked_ ABSL_GUARDED_BY(mu_) = true;                     // its FAILED end was counted
  absl::Time retry_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  uint64_t joins_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t drains_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t failed_starts_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace ember

#endif  // EMBER_SERVER_COORDINATOR_SHARD_POLICY_H_
