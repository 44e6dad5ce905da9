// Copyright 2026 The Ember Authors.
//
// ServingCluster: the loopback cluster of the `serving` suite (serving_bench.cc): a
// coordinator (checkpoints in the scratch directory), shards 0 and 1 (ember-ps) and a
// follower (ember-serving) as real processes, plus what the suite reads from them: the
// shards' newest versions, the follower's status, whether it has caught up, and its
// digest of table "train".
//
//   ServingCluster cluster{bin, scratch};
//   EMBER_RETURN_IF_ERROR(cluster.Start());          // coordinator and 2 shards
//   ... populate, train the served model ...
//   EMBER_RETURN_IF_ERROR(cluster.StartServing());   // the follower
//   EMBER_RETURN_IF_ERROR(cluster.WaitCaughtUp());
//
// Not thread-safe. The destructor stops the processes by PID: the follower first
// (SIGTERM: it persists its positions), then the shards (SIGKILL: scratch data), then
// the coordinator.

#ifndef EMBER_TOOLS_BENCH_SERVING_CLUSTER_H_
#define EMBER_TOOLS_BENCH_SERVING_CLUSTER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/grpc_status.h"
#include "common/ps_client.h"
#include "ember/v1/ps.grpc.pb.h"
#include "ember/v1/serving.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "tools/harness/process.h"

namespace ember::bench::serving {

inline constexpr char kTable[] = "train";  // the table the suite populates and probes
inline constexpr size_t kDim = 16;
inline constexpr int kMemoryBudgetMb = 256;  // each shard's memory tier
inline constexpr absl::Duration kStartTimeout = absl::Seconds(30);
inline constexpr absl::Duration kCatchUpBound = absl::Seconds(120);
inline constexpr absl::Duration kRpcDeadline = absl::Seconds(10);

// Runs `call` with a fresh ClientContext carrying kRpcDeadline; returns its status as
// absl::Status.
template <typename Fn>
absl::Status Call(Fn call) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kRpcDeadline));
  const grpc::Status s = call(&context);
  return FromGrpcStatus(s, &context);
}

// Polls `done` (a StatusOr<bool>; an error counts as "not yet") every 20 ms until
// true, or DEADLINE_EXCEEDED naming `what` (and the last error) after `bound`.
template <typename Fn>
absl::Status PollUntil(Fn done, absl::Duration bound, const std::string& what) {
  const absl::Time end = absl::Now() + bound;
  absl::Status last;
  while (true) {
    absl::StatusOr<bool> d = done();
    if (d.ok() && *d) return absl::OkStatus();
    if (!d.ok()) last = d.status();
    if (absl::Now() > end) {
      return absl::DeadlineExceededError(
          absl::StrCat("timed out waiting for ", what,
                       last.ok() ? std::string() : absl::StrCat("; last: ", last.ToString())));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}
struct ServingCluster {
  std::string bin;  // where ember-coordinator, ember-ps and ember-serving are
  std::string dir;  // scratch: their data and the checkpoints
  std::unique_ptr<Process> coordinator;
  std::vector<std::unique_ptr<Process>> ps;
  std::vector<std::unique_ptr<v1::PsService::Stub>> ps_stubs;
  std::unique_ptr<Process> serving;
  std::unique_ptr<v1::ServingService::Stub> serving_stub;

  ~ServingCluster();

  // The coordinator and shards 0 and 1, once both serve the first slot map.
  absl::Status Start();
  // The follower, with the coordinator's --checkpoint_dir.
  absl::Status StartServing();
  // GetShardInfo of each shard, in shard order.
  absl::StatusOr<std::vector<v1::GetShardInfoResponse>> ShardInfos();
  // The newest version of each shard, summed.
  absl::StatusOr<uint64_t> PsVersions();
  absl::StatusOr<v1::ServingStatus> FollowerStatus();
  // Waits until the follower is ready and has applied, on every shard, at least the
  // version the shard had when the wait began.
  absl::Status WaitCaughtUp();
  // kTable's (rows, digest) on the follower.
  absl::StatusOr<PsClient::TableDigest> FollowerDigest();

 private:
  absl::StatusOr<std::unique_ptr<Process>> Spawn(const std::string& name,
                                                 const std::vector<std::string>& args);
};

}  // namespace ember::bench::serving

#endif  // EMBER_TOOLS_BENCH_SERVING_CLUSTER_H_
