// Copyright 2026 The Ember Authors.
//
// LocalCluster: the real processes of one Ember cluster on loopback, for multi-process
// tests: an ember-coordinator, N ember-ps shards and, optionally, ember-worker and
// ember-serving (follower) processes. Each starts on an ephemeral port (--port=0; the
// ready line names it), keeps its data under the cluster's directory, and is stopped
// by PID (tools/harness/process.h: SIGTERM, then SIGKILL). The argument lists every
// test shares are here, once; a test's own flags come after them, per kind (options)
// and per start (`extra`), in that order (the binaries keep the last value of a
// repeated flag).
//
//   coordinator  --data_dir=DIR/coordinator --port=P --expected_shards=N
//                (P: 0 at the first start, the same port at a restart)
//   shard i      --data_dir=DIR/ps-i --port=0 --shard_id=i --coordinator=ADDRESS
//                (RestartShard: the port of its previous start)
//   worker r     --coordinator=ADDRESS --rank=r                  (ready: "worker ")
//   follower i   --coordinator=ADDRESS --data_dir=DIR/serving-i --port=0
//
//   LocalClusterOptions options;
//   options.dir = dir_;
//   options.shards = 2;
//   options.coordinator_flags = {"--heartbeat_timeout_ms=2000"};
//   options.shard_flags = {"--heartbeat_ms=100"};
//   LocalCluster cluster(std::move(options));
//   ASSERT_TRUE(cluster.Start().ok());            // the coordinator, then every shard
//   ASSERT_TRUE(cluster.WaitForSlots().ok());     // every shard serves the map's epoch
//   cluster.shard(1)->Kill();                     // a crash
//   ASSERT_TRUE(cluster.RestartShard(1).ok());    // on its old port
//   EXPECT_TRUE(cluster.StopAll().ok());          // every exit code 0
//
// The directory belongs to the caller (create and remove it); the processes create
// their data directories below it. Binaries default to the EMBER_*_BINARY paths the
// test target defines (tests/CMakeLists.txt, ember_test BINARIES).
//
// Thread-safety: one thread at a time, the thread that outlives the processes (the
// test's main thread; see Process).

#ifndef EMBER_TESTS_SUPPORT_LOCAL_CLUSTER_H_
#define EMBER_TESTS_SUPPORT_LOCAL_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ember/v1/coordinator.pb.h"
#include "tools/harness/process.h"

namespace ember {

// Paths of the binaries a LocalCluster starts; empty: that kind cannot be started.
struct LocalClusterBinaries {
  std::string coordinator;
  std::string ps;
  std::string worker;
  std::string serving;
};

// The binaries of the including test target. Internal linkage: the EMBER_*_BINARY
// macros differ between test targets (and the support library has none).
static inline LocalClusterBinaries TargetBinaries() {
  LocalClusterBinaries binaries;
#ifdef EMBER_COORDINATOR_BINARY
  binaries.coordinator = EMBER_COORDINATOR_BINARY;
#endif
#ifdef EMBER_PS_BINARY
  binaries.ps = EMBER_PS_BINARY;
#endif
#ifdef EMBER_WORKER_BINARY
  binaries.worker = EMBER_WORKER_BINARY;
#endif
#ifdef EMBER_SERVING_BINARY
  binaries.serving = EMBER_SERVING_BINARY;
#endif
  return binaries;
}

struct LocalClusterOptions {
  // Where the processes keep their data (owned by the caller).
  std::string dir;
  // The coordinator's --expected_shards, and the shards Start() starts.
  int shards = 2;
  // Flags after the common ones, for every start of that kind (restarts too).
  std::vector<std::string> coordinator_flags;
  std::vector<std::string> shard_flags;
  std::vector<std::string> worker_flags;
  std::vector<std::string> follower_flags;
  // How long a process may take to print its ready line. Default: 30 s for servers,
  // 60 s for workers and followers (they load a config or a checkpoint first).
  absl::Duration server_start_timeout = absl::Seconds(30);
  absl::Duration client_start_timeout = absl::Seconds(60);
  LocalClusterBinaries binaries = TargetBinaries();
};

// Starts one ember-serving process (a follower) that the caller owns:
// --coordinator=`coordinator` --data_dir=`data_dir` --port=0, then `extra`; ready at its
// "listening on " line. Errors: Process::Start's. LocalCluster::StartFollower uses it;
// so do tests whose followers come and go (tests/serving/serving_client.h).
absl::StatusOr<std::unique_ptr<Process>> StartFollowerProcess(
    const std::string& binary, const std::string& coordinator, const std::string& data_dir,
    const std::vector<std::string>& extra, absl::Duration timeout = absl::Seconds(60));

class LocalCluster {
 public:
  explicit LocalCluster(LocalClusterOptions options);
  // Kills (SIGKILL) whatever still runs.
  ~LocalCluster();

  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  // StartCoordinator() and then StartShard(i) for every shard; stops at the first error.
  absl::Status Start();

  // Starts the coordinator (the flags in the header comment, coordinator_flags, `extra`),
  // replacing a stopped one; a restart reuses the previous port, so clients and shards
  // that know the old address reconnect. Errors: Process::Start's (the child is reaped);
  // FAILED_PRECONDITION if no coordinator binary is known.
  absl::Status StartCoordinator(const std::vector<std::string>& extra = {});

  // Starts shard `i` (0 <= i; the flags in the header comment, shard_flags, `extra`) on a
  // fresh port, replacing a stopped process at `i`. REQUIRES: the coordinator started.
  // Errors as StartCoordinator.
  absl::Status StartShard(int i, const std::vector<std::string>& extra = {});
  // The same on the port shard `i` had (same address); FAILED_PRECONDITION if it never
  // started.
  absl::Status RestartShard(int i, const std::vector<std::string>& extra = {});

  // Starts worker `rank` (--coordinator, --rank, worker_flags, `extra`); it is ready at
  // its "worker " line. With --workers=MIN:MAX among the flags (an elastic run) there is
  // no --rank: `rank` is the process's index, the coordinator gives its ranks. REQUIRES: the
  // coordinator started. Errors as StartCoordinator.
  absl::Status StartWorker(int rank, const std::vector<std::string>& extra = {});

  // Starts follower `i` (ember-serving: --coordinator, --data_dir, --port=0,
  // follower_flags, `extra`). Errors as StartCoordinator.
  absl::Status StartFollower(int i, const std::vector<std::string>& extra = {});

  // Polls (up to `timeout`) until the coordinator's map has an epoch and every running
  // shard serves that epoch: slots are assigned and known everywhere. DEADLINE_EXCEEDED
  // (naming the last map epoch) if not.
  absl::Status WaitForSlots(absl::Duration timeout = absl::Seconds(30));

  // Stops every process (workers, followers, shards, then the coordinator) with SIGTERM
  // and SIGKILL after `grace` each. OK if every one exited with code 0 (or was stopped
  // before); otherwise the first failure, naming the process. Nothing is left running.
  absl::Status StopAll(absl::Duration grace = absl::Seconds(10));

  // The processes; null where none was started. A test may Stop/Kill/Wait them
  // (a stopped process stays until its next start replaces it).
  Process* coordinator() const { return coordinator_.get(); }
  Process* shard(int i) const { return At(shards_, i); }
  Process* worker(int rank) const { return At(workers_, rank); }
  Process* follower(int i) const { return At(followers_, i); }
  // One more than the highest index started so far.
  int shard_count() const { return static_cast<int>(shards_.size()); }
  int worker_count() const { return static_cast<int>(workers_.size()); }

  // "127.0.0.1:PORT" of the last start (empty before).
  const std::string& coordinator_address() const { return coordinator_address_; }
  std::string shard_address(int i) const;
  const LocalClusterOptions& options() const { return options_; }

  // The coordinator's view of `job` (CoordinatorService.GetJob, plaintext, 10 s).
  absl::StatusOr<v1::GetJobResponse> GetJob(const std::string& job) const;

 private:
  static Process* At(const std::vector<std::unique_ptr<Process>>& v, int i) {
    return i >= 0 && static_cast<size_t>(i) < v.size() ? v[i].get() : nullptr;
  }
  // Starts `binary` with `args`, ready at `ready_prefix`, into `slot` (replacing it).
  static absl::Status StartInto(const std::string& kind, const std::string& binary,
                                std::vector<std::string> args,
                                const std::vector<std::string>& flags,
                                const std::vector<std::string>& extra,
                                const std::string& ready_prefix, absl::Duration timeout,
                                std::unique_ptr<Process>* slot);
  absl::Status StartShardOnPort(int i, int port, const std::vector<std::string>& extra);

  LocalClusterOptions options_;
  std::unique_ptr<Process> coordinator_;
  std::string coordinator_address_;
  int coordinator_port_ = 0;
  std::vector<std::unique_ptr<Process>> shards_;
  std::vector<std::string> shard_addresses_;
  std::vector<std::unique_ptr<Process>> workers_;
  std::vector<std::unique_ptr<Process>> followers_;
};

}  // namespace ember

#endif  // EMBER_TESTS_SUPPORT_LOCAL_CLUSTER_H_
