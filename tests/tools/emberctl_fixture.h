// Copyright 2026 The Ember Authors.
//
// The fixture of emberctl's tests: a real cluster on loopback (ember-coordinator with
// --expected_shards=2 and an admin token, two ember-ps), a table "item" (dim 4, seed
// 42, SGD lr 0.5) with 200 pushed rows, and emberctl run as a child process with its
// stdout, stderr and exit code captured.
//
//   CtlResult r = Ctl({"slots", "show", "--json"});
//   EXPECT_EQ(r.exit_code, 0) << r;
//   EXPECT_TRUE(IsJsonObject(r.out));

#ifndef EMBER_TESTS_TOOLS_EMBERCTL_FIXTURE_H_
#define EMBER_TESTS_TOOLS_EMBERCTL_FIXTURE_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "common/ps_client.h"
#include "ember/v1/admin.grpc.pb.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "ember/v1/ps.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/support/eventually.h"
#include "tests/support/local_cluster.h"
#include "tests/support/ports.h"
#include "tools/harness/process.h"

namespace ember {

inline constexpr int kCtlShards = 2;
inline constexpr char kCtlToken[] = "emberctl-test-token";

struct CtlResult {
  int exit_code = -1;  // 128 + signal if killed
  std::string out;
  std::string err;
  absl::Duration elapsed;
};

std::ostream& operator<<(std::ostream& os, const CtlResult& r);

// Called with the child's pid and its stderr so far, each time more stderr arrives.
using StderrWatch = std::function<void(pid_t pid, const std::string& err)>;

// Runs emberctl with `args` in an environment without EMBER_* variables plus `env`
// ("NAME=value"); captures stdout and stderr; SIGKILL after two minutes.
CtlResult RunCtl(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                 const StderrWatch& watch = nullptr);

// True if `text` is exactly one well-formed JSON object (plus whitespace).
bool IsJsonObject(const std::string& text);

// The whitespace-separated cells of the first line of `text` whose first cell is `first`.
std::vector<std::string> RowOf(const std::string& text, const std::string& first);

class EmberctlTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // emberctl against this cluster, with --coordinator and --admin_token.
  CtlResult Ctl(std::vector<std::string> args, const StderrWatch& watch = nullptr);

  // Pushes one gradient to `count` ids of "item" from first_id on (stride 7919).
  void PushRows(uint64_t first_id, int count);
  // A PS client of job `job` (worker 2) whose table "item" of its own has `dim` floats
  // (SGD, learning rate 0.25), created through the coordinator. Fails the test on error.
  std::unique_ptr<PsClient> JobWithItemTable(const std::string& job, uint32_t dim);
  v1::GetClusterMapResponse ClusterMap();
  v1::GetShardInfoResponse ShardInfo(int shard);
  // table -> (rows, digest) summed over the shards, asked of the shards directly.
  std::map<std::string, std::pair<uint64_t, uint64_t>> ShardDigests();
  // AdminService.SetSlotOwner (metadata only); fails the test on error.
  void SetSlotOwner(uint32_t slot, uint32_t shard);

  std::string dir_;
  // The coordinator (--expected_shards=2, an admin token) and the two shards.
  std::unique_ptr<LocalCluster> cluster_;
  std::string address_;
  std::unique_ptr<v1::CoordinatorService::Stub> coordinator_stub_;
  std::unique_ptr<v1::AdminService::Stub> admin_stub_;
  std::string ps_address_[kCtlShards];
  std::unique_ptr<v1::PsService::Stub> ps_stub_[kCtlShards];
  std::unique_ptr<PsClient> client_;
};

// The commands whose server side (migrations, rebalance plans, RemoveShard,
// CreateTable, checkpoints, jobs, shard stats) landed separately.
class EmberctlAdminTest : public EmberctlTest {};

}  // namespace ember

#endif  // EMBER_TESTS_TOOLS_EMBERCTL_FIXTURE_H_
