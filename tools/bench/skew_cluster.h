// Copyright 2026 The Ember Authors.
//
// SkewCluster: the loopback cluster of the `skew` suite (skew_bench.cc): a coordinator
// and N PS shards as real processes, plus what the suite reads from them: per-shard
// load (GetShardInfo) and stored rows per table (Checksum), and training jobs of
// ember-worker processes against it.
//
//   SkewCluster cluster(bin, scratch + "/run-1");
//   EMBER_RETURN_IF_ERROR(cluster.Start(4, {"--hot_replicas=3"}));
//   EMBER_ASSIGN_OR_RETURN(std::string result, cluster.Train(config, data, 2, {}));
//   EMBER_ASSIGN_OR_RETURN(std::vector<ShardLoad> load, cluster.Load());
//
// Not thread-safe. The destructor stops every process it started (by PID).

#ifndef EMBER_TOOLS_BENCH_SKEW_CLUSTER_H_
#define EMBER_TOOLS_BENCH_SKEW_CLUSTER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/harness/process.h"

namespace ember::bench {

// One shard's cumulative load counters (GetShardInfoResponse).
struct ShardLoad {
  uint32_t shard_id = 0;
  uint64_t pulled_keys = 0;
  uint64_t pushed_keys = 0;
  uint64_t replica_pulled_keys = 0;
  uint64_t hot_set_version = 0;
  // Keys served: pulled (owned) + answered from replicas + pushed.
  uint64_t served() const { return pulled_keys + replica_pulled_keys + pushed_keys; }
};

// max / mean of per-shard keys served between two samples of Load().
double MaxOverMean(const std::vector<ShardLoad>& before, const std::vector<ShardLoad>& after);
// Per-shard keys served between the samples, divided by their mean.
std::vector<double> LoadOverMean(const std::vector<ShardLoad>& before,
                                 const std::vector<ShardLoad>& after);

class SkewCluster {
 public:
  // `bin`: the directory of the Ember binaries; `dir`: scratch (replaced).
  SkewCluster(std::string bin, std::string dir);
  ~SkewCluster();

  // Starts the coordinator (extra flags appended) and `shards` PS shards, and waits
  // until all registered.
  absl::Status Start(int shards, const std::vector<std::string>& coordinator_flags,
                     const std::vector<std::string>& shard_flags = {});
  const std::string& coordinator_address() const { return coordinator_address_; }

  // Runs `workers` ember-worker processes of `config` on `data` (train/ and test/
  // under it) to the end; returns rank 0's result.json. INTERNAL if a worker fails.
  absl::StatusOr<std::string> Train(const std::string& config, const std::string& data, int workers,
                                    const std::vector<std::string>& worker_flags);

  // Every shard's load counters, by ascending shard id.
  absl::StatusOr<std::vector<ShardLoad>> Load() const;
  // Stored rows per table, summed over shards (Checksum RPC; flushes the shards).
  absl::StatusOr<std::map<std::string, uint64_t>> RowsPerTable() const;

  // Stops every process and removes the shards' data (keeps logs). Idempotent.
  void Stop();

 private:
  std::string bin_, dir_;
  std::string coordinator_address_;
  std::unique_ptr<Process> coordinator_;
  std::vector<std::unique_ptr<Process>> shards_;
  int jobs_ = 0;
};

}  // namespace ember::bench

#endif  // EMBER_TOOLS_BENCH_SKEW_CLUSTER_H_
