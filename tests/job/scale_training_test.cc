// Copyright 2026 The Ember Authors.
//
// Shards that come and go while a BSP job trains (docs/ARCHITECTURE.md "Shards that come
// and go"): the coordinator's shard policy (server/coordinator/shard_policy.h) with real
// ember-datagen data, a real coordinator, PS shards and ember-worker processes.
//
// Pinned here:
//  - a shard added while the job trains gets its share of the slots by itself
//    (--auto_rebalance), and the model is bitwise the reference's, with no recovery;
//  - a shard sent SIGTERM (--drain_on_sigterm) drains its slots to the others while the
//    job trains and exits 0, no worker call failed (no recovery, every worker exits 0),
//    the model is bitwise the reference's; restarted under its id (owning nothing), it
//    does not end the job's attempt;
//  - a SIGTERM while an operator's slot move runs waits for its turn: the drain starts
//    after that move's last switch;
//  - the last shard holding slots is refused: it exits 1 keeping them.
// Each case prints how long its event took (SIGTERM to exit, join to balanced slots):
// figures for docs/PERFORMANCE.md, not assertions.

#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/slot.h"
#include "ember/v1/admin.grpc.pb.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/job/coordinator_view.h"
#include "tests/job/job_cluster.h"
#include "tests/support/deadline.h"
#include "tests/support/http_get.h"
#include "tests/support/local_cluster.h"
#include "tests/support/ports.h"
#include "tests/support/scratch_dir.h"

namespace ember {
namespace {

constexpr char kToken[] = "scale-test-token";

// Every slot is on one of `shards`, each within 5% of an even share.
void ExpectEvenOver(const std::map<uint32_t, uint32_t>& owned,
                    const std::vector<uint32_t>& shards) {
  uint32_t total = 0;
  for (uint32_t id : shards) {
    auto it = owned.find(id);
    ASSERT_NE(it, owned.end()) << "shard " << id;
    total += it->second;
    EXPECT_NEAR(it->second, double{kNumSlots} / shards.size(), kNumSlots * 0.05 / shards.size())
        << "shard " << id;
  }
  EXPECT_EQ(total, kNumSlots);
}

class ScaleTrainingTest : public JobClusterTest {
 protected:
  static void SetUpTestSuite() { SetUpData("ember-scale"); }
  static void TearDownTestSuite() { TearDownData(); }

  // Starts the coordinator (with `coordinator_flags`) expecting `shards` shards, the
  // shards (`shard_flags` each) and the job's workers.
  std::unique_ptr<Cluster> StartJob(const std::string& name, int shards,
                                    std::vector<std::string> coordinator_flags,
                                    const std::vector<std::string>& shard_flags) {
    std::unique_ptr<Cluster> c = NewCluster(name);
    coordinator_flags.push_back(absl::StrCat("--admin_token=", kToken));
    coordinator_flags.push_back("--policy_retry_ms=500");
    metrics_port_ = FreePort();
    coordinator_flags.push_back(absl::StrCat("--metrics_port=", metrics_port_));
    c->StartCoordinator(shards, coordinator_flags);
    for (int i = 0; i < shards; ++i) c->StartShard(i, shard_flags);
    for (int r = 0; r < kWorkers; ++r) c->StartWorker(r, Flags());
    return c;
  }

  // The coordinator's /metrics has every one of `lines`.
  void ExpectMetrics(const std::vector<std::string>& lines) const {
    absl::StatusOr<std::string> body = HttpGet(metrics_port_, "/metrics");
    ASSERT_TRUE(body.ok()) << body.status();
    for (const std::string& line : lines) {
      EXPECT_TRUE(absl::StrContains(*body, line)) << line << "\n" << *body;
    }
  }

  int metrics_port_ = -1;

  // The same model as the reference, and no worker call failed: no recovery, the same
  // attempt.
  static void ExpectSameModelWithoutRecovery(const std::string& result) {
    ExpectSameModel(result);
    EXPECT_EQ(JsonValue(result, "recoveries_rank0"), "0") << result;
    EXPECT_EQ(JsonValue(result, "attempt"), JsonValue(*reference_, "attempt")) << result;
  }
};

TEST_F(ScaleTrainingTest, AShardAddedWhileTrainingGetsItsSlotsAutomatically) {
  std::unique_ptr<Cluster> c = StartJob("join", 2, {"--auto_rebalance"}, {});
  ASSERT_FALSE(HasFatalFailure());
  CoordinatorView view(c->address_, kToken);
  absl::Time joined = absl::InfiniteFuture();
  bool balanced = false;
  const std::string result = c->Finish([&](absl::Duration) {
    if (balanced) return;
    if (joined == absl::InfiniteFuture()) {
      if (c->NewestCheckpointStep() < 20) return;
      c->StartShard(2);  // a scale-up: nobody asks for a rebalance
      joined = absl::Now();
      return;
    }
    const std::map<uint32_t, uint32_t> owned = view.OwnedSlots();
    const std::vector<v1::Migration> ops = view.Migrations();
    if (owned.count(2) == 0 || owned.at(2) == 0 || ops.empty() ||
        ops.back().phase() != v1::Migration::DONE) {
      return;
    }
    balanced = true;
    // The job was still training: the moves happened under load.
    EXPECT_FALSE(c->worker(0)->Wait(absl::ZeroDuration()).ok());
    std::cerr << "scale: join to balanced " << absl::Now() - joined << " (migration "
              << ops.back().seconds() << " s: " << ops.back().rows_copied() << " rows in "
              << ops.back().spec().moves_size() << " moves, longest fence "
              << ops.back().max_fence_ms() << " ms)" << std::endl;
  });
  EXPECT_TRUE(balanced) << "the new shard was not given slots before the job ended";
  ExpectSameModelWithoutRecovery(result);
  ExpectEvenOver(view.OwnedSlots(), {0, 1, 2});
  const std::vector<v1::Migration> ops = view.Migrations();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].spec().reason(), "auto rebalance: shard 2 joined");
  EXPECT_EQ(ops[0].who(), "coordinator policy");
  ExpectMetrics({"ember_coordinator_policy_migrations_total{kind=\"join\"} 1",
                 "ember_coordinator_policy_migrations_total{kind=\"drain\"} 0",
                 "ember_coordinator_policy_failed_starts_total 0",
                 "ember_coordinator_leaving_shards 0"});
}

TEST_F(ScaleTrainingTest, AShardSentSigtermDrainsAndExitsWithNoFailedCall) {
  std::unique_ptr<Cluster> c =
      StartJob("drain", 3, {}, {"--drain_on_sigterm", "--drain_linger_ms=300"});
  ASSERT_FALSE(HasFatalFailure());
  CoordinatorView view(c->address_, kToken);
  absl::Time sent = absl::InfiniteFuture();
  bool exited = false;
  const std::string result = c->Finish([&](absl::Duration) {
    if (exited) return;
    if (sent == absl::InfiniteFuture()) {
      if (c->NewestCheckpointStep() < 20) return;
      c->Retire(2);  // a scale-down: Kubernetes' SIGTERM
      sent = absl::Now();
      return;
    }
    absl::StatusOr<int> code = c->shard(2)->Wait(absl::ZeroDuration());
    if (!code.ok()) return;
    exited = true;
    EXPECT_EQ(*code, 0) << "the drained shard's exit code";
    EXPECT_EQ(view.OwnedSlots()[2], 0u) << "it exited owning slots";
    EXPECT_FALSE(c->worker(0)->Wait(absl::ZeroDuration()).ok()) << "the job ended first";
    const std::vector<v1::Migration> ops = view.Migrations();
    ASSERT_FALSE(ops.empty());
    std::cerr << "scale: SIGTERM to exit " << absl::Now() - sent << " (migration "
              << ops.back().seconds() << " s: " << ops.back().rows_copied() << " rows in "
              << ops.back().spec().moves_size() << " moves, longest fence "
              << ops.back().max_fence_ms() << " ms)" << std::endl;
    // The drained shard comes back under its id with nothing (a StatefulSet that
    // restarts it): it owns no rows of the attempt, so the attempt goes on.
    c->StartShard(2);
  });
  EXPECT_TRUE(exited) << "the shard did not exit before the job ended";
  ExpectSameModelWithoutRecovery(result);
  ExpectEvenOver(view.OwnedSlots(), {0, 1});
  const std::vector<v1::Migration> ops = view.Migrations();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].spec().reason(), "drain shard 2 (leaving)");
  // Shard 2 is back as a new process: no longer leaving.
  ExpectMetrics({"ember_coordinator_policy_migrations_total{kind=\"drain\"} 1",
                 "ember_coordinator_policy_migrations_total{kind=\"join\"} 0",
                 "ember_coordinator_leaving_shards 0"});
}

TEST_F(ScaleTrainingTest, ASigtermDuringASlotMoveWaitsForItsTurn) {
  std::unique_ptr<Cluster> c =
      StartJob("turn", 3, {}, {"--drain_on_sigterm", "--drain_linger_ms=300"});
  ASSERT_FALSE(HasFatalFailure());
  CoordinatorView view(c->address_, kToken);
  std::string admin_op;
  bool exited = false;
  const std::string result = c->Finish([&](absl::Duration) {
    if (exited) return;
    if (admin_op.empty()) {
      if (c->NewestCheckpointStep() < 20) return;
      // An operator's move of 1024 of shard 0's slots to shard 1, throttled so that it
      // still runs when the SIGTERM comes.
      const std::map<uint32_t, uint32_t> owned = view.OwnedSlots();
      ASSERT_GT(owned.at(0), 0u);
      v1::MigrationSpec spec;
      spec.set_reason("test: an operator's move");
      spec.set_bytes_per_sec(32 << 10);
      v1::SlotMove* move = spec.add_moves();
      move->set_source(0);
      move->set_target(1);
      v1::SlotRange* range = move->add_ranges();
      range->set_first(0);
      range->set_last(1023);  // shard 0 owns the lowest slots (SlotMap::Even)
      absl::StatusOr<v1::Migration> op = view.Start(spec);
      ASSERT_TRUE(op.ok()) << op.status();
      admin_op = op->op_id();
      c->Retire(2);  // while the move runs
      // Else the case pins nothing: the throttle keeps the move going for seconds.
      const std::vector<v1::Migration> ops = view.Migrations();
      ASSERT_FALSE(ops.empty());
      EXPECT_NE(ops.back().phase(), v1::Migration::DONE) << "the move ended before the SIGTERM";
      return;
    }
    absl::StatusOr<int> code = c->shard(2)->Wait(absl::ZeroDuration());
    if (!code.ok()) return;
    exited = true;
    EXPECT_EQ(*code, 0) << "the drained shard's exit code";
  });
  ASSERT_FALSE(admin_op.empty()) << "the job ended before its first checkpoint";
  ExpectSameModelWithoutRecovery(result);
  // The throttled move may outlast the (short) job: the drain then runs after it.
  if (!exited) {
    absl::StatusOr<int> code = c->shard(2)->Wait(absl::Minutes(2));
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 0) << "the drained shard's exit code";
  }
  const std::vector<v1::Migration> ops = view.Migrations();
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].op_id(), admin_op);
  EXPECT_EQ(ops[0].phase(), v1::Migration::DONE);
  EXPECT_EQ(ops[1].spec().reason(), "drain shard 2 (leaving)");
  EXPECT_EQ(ops[1].phase(), v1::Migration::DONE);
  // The drain started from the map the operator's move left: after its last switch.
  EXPECT_GE(ops[1].epoch_before(), ops[0].epoch_after());
  EXPECT_EQ(view.OwnedSlots()[2], 0u);
}

// Bad input: a SIGTERM of the last shard holding slots cannot drain. The coordinator
// refuses it, and the shard shuts down as usual and exits 1, keeping its slots.
TEST(ScaleDrainTest, TheLastShardHoldingSlotsIsRefusedAndExitsOneKeepingThem) {
  ScratchDir dir("scale_drain_test");
  ASSERT_TRUE(dir.ok()) << dir.error();
  LocalClusterOptions options;
  options.dir = dir.path();
  options.shards = 1;
  options.shard_flags = {"--heartbeat_ms=100", "--drain_on_sigterm"};
  LocalCluster cluster(std::move(options));
  ASSERT_TRUE(cluster.Start().ok());
  ASSERT_TRUE(cluster.WaitForSlots().ok());
  absl::StatusOr<int> code = cluster.shard(0)->Stop(absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 1);
  EXPECT_EQ(CoordinatorView(cluster.coordinator_address(), kToken).OwnedSlots()[0], kNumSlots);
}

}  // namespace
}  // namespace ember
