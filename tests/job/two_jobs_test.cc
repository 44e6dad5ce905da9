// Copyright 2026 The Ember Authors.
//
// Two jobs on one PS cluster (docs/ARCHITECTURE.md "Several jobs per PS cluster"): each
// with tables of its own (--own_tables), so that both train at once, each recovers on
// its own and neither's rows, attempts or checkpoints touch the other's. Real
// ember-datagen data, a coordinator with checkpoints, 2 PS shards and 2 BSP
// ember-worker processes per job on loopback (job_cluster.h). Pinned:
//  - job B's worker is killed mid-run: B rolls back to its checkpoint while A trains
//    on (A's attempt is not ended: A recovers only from the PS kill below);
//  - a PS shard is SIGKILLed while both train: both recover;
//  - both end bitwise equal to their runs alone, and both tables are their own (the
//    two jobs name the same tables);
//  - shards that come and go move both jobs' rows with their slots: a shard added while
//    both train gets its share (--auto_rebalance) and is then drained by a SIGTERM; no
//    call fails, neither job recovers, both end bitwise equal to their runs alone.

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/job/coordinator_view.h"
#include "tests/job/job_cluster.h"
#include "tools/harness/process.h"
#include "tools/harness/result_json.h"

namespace ember {
namespace {

// Worker slots of job B in a cluster with both jobs: after A's ranks.
constexpr int kJobBSlot = kWorkers;
constexpr char kToken[] = "two-jobs-test-token";

class TwoJobsTest : public JobClusterTest {
 protected:
  static void SetUpTestSuite() {
    ASSERT_NO_FATAL_FAILURE(GenerateData("ember-two-jobs"));
    // Job B: the quickstart model under another name (the same table names) with
    // another model (a dense init seed and the tables' learning rate), so that rows of
    // one job's store in the other's would change a model.
    std::ifstream in(std::string(EMBER_SOURCE_DIR) + "/configs/quickstart.pbtxt");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string renamed = absl::StrReplaceAll(
        text,
        {{"name: \"quickstart\"", "name: \"quickstart-b\""},
         {"init_seed: 1", "init_seed: 2"},
         {"learning_rate: 0.1 initial_accumulator", "learning_rate: 0.05 initial_accumulator"}});
    ASSERT_NE(renamed, text);
    ASSERT_TRUE(absl::StrContains(renamed, "init_seed: 2"));
    ASSERT_TRUE(absl::StrContains(renamed, "learning_rate: 0.05"));
    config_b_ = new std::string(*root_ + "/quickstart-b.pbtxt");
    std::ofstream(*config_b_) << renamed;
  }
  static void TearDownTestSuite() {
    delete config_b_;
    TearDownData();
  }

  // Job A's (quickstart) worker flags: tables of its own.
  static std::vector<std::string> FlagsA() {
    std::vector<std::string> flags = Flags();
    flags.push_back("--own_tables");
    return flags;
  }
  // Job B's worker flags for `rank`: its config, rank, run directory.
  static std::vector<std::string> FlagsB(const Cluster& c, int rank) {
    std::vector<std::string> flags = FlagsA();
    flags.push_back(absl::StrCat("--config=", *config_b_));
    flags.push_back(absl::StrCat("--rank=", rank));
    flags.push_back(absl::StrCat("--run_dir=", c.dir_, "/run-b"));
    return flags;
  }
  static std::string ResultB(const Cluster& c) { return ReadFile(c.dir_ + "/run-b/result.json"); }

  // A cluster of 2 shards; `a` and `b` say which jobs run on it.
  std::unique_ptr<Cluster> Start(const std::string& name, bool a, bool b,
                                 const std::vector<std::string>& coordinator_flags = {},
                                 const std::vector<std::string>& shard_flags = {}) {
    std::unique_ptr<Cluster> c = NewCluster(name);
    c->StartCoordinator(2, coordinator_flags);
    for (int i = 0; i < 2; ++i) c->StartShard(i, shard_flags);
    // Job B's workers take the slots after A's (the first ones when alone: Finish
    // waits for every slot).
    for (int r = 0; r < kWorkers; ++r) {
      if (a) c->StartWorker(r, FlagsA());
      if (b) c->StartWorker((a ? kJobBSlot : 0) + r, FlagsB(*c, r));
    }
    return c;
  }

  // Each job alone on a cluster of its own: (A's result, B's result).
  std::pair<std::string, std::string> AloneRuns() {
    std::pair<std::string, std::string> alone;
    {
      std::unique_ptr<Cluster> c = Start("alone-a", true, false);
      EXPECT_FALSE(HasFatalFailure());
      alone.first = c->Finish();
      EXPECT_EQ(JsonValue(alone.first, "steps"), absl::StrCat(kSteps)) << alone.first;
    }
    {
      std::unique_ptr<Cluster> c = Start("alone-b", false, true);
      EXPECT_FALSE(HasFatalFailure());
      c->Finish();
      alone.second = ResultB(*c);
      EXPECT_EQ(JsonValue(alone.second, "steps"), absl::StrCat(kSteps)) << alone.second;
    }
    EXPECT_NE(JsonValue(alone.first, "model_checksum"), JsonValue(alone.second, "model_checksum"))
        << "the two jobs train different models";
    return alone;
  }

  static void ExpectSameModel(const std::string& result, const std::string& alone) {
    ASSERT_FALSE(result.empty());
    EXPECT_EQ(JsonValue(result, "steps"), absl::StrCat(kSteps)) << result;
    for (const char* field :
         {"sparse_rows", "sparse_checksum", "dense_checksum", "model_checksum"}) {
      EXPECT_EQ(JsonValue(result, field), JsonValue(alone, field)) << field;
    }
  }

  inline static std::string* config_b_ = nullptr;
};

TEST_F(TwoJobsTest, TwoJobsRecoverApartAndEndAsTheirRunsAlone) {
  const auto [alone_a, alone_b] = AloneRuns();
  ASSERT_FALSE(HasFailure());

  // Both on one cluster: B's worker 1 is killed (B recovers, A trains on), then a
  // shard (both recover).
  std::unique_ptr<Cluster> c = Start("both", true, true);
  ASSERT_FALSE(HasFatalFailure());
  enum Phase { kWaitB, kWaitShard, kDone } phase = kWaitB;
  uint64_t a_recoveries_at_b_kill = 0;
  const std::string result_a = c->Finish([&](absl::Duration) {
    const uint64_t a_step = c->NewestCheckpointStep();
    if (phase == kWaitB && a_step >= 60) {
      a_recoveries_at_b_kill = c->GetJob().recoveries();
      ASSERT_TRUE(c->worker(kJobBSlot + 1)->Kill().ok());
      ASSERT_NO_FATAL_FAILURE(c->StartWorker(kJobBSlot + 1, FlagsB(*c, 1)));
      phase = kWaitShard;
    } else if (phase == kWaitShard && a_step >= 140) {
      ASSERT_TRUE(c->shard(1)->Kill().ok());
      ASSERT_NO_FATAL_FAILURE(c->StartShard(1));
      ++c->restarts_;
      phase = kDone;
    }
  });
  ASSERT_EQ(phase, kDone) << "the job ended before both faults";
  const std::string result_b = ResultB(*c);
  ExpectSameModel(result_a, alone_a);
  ExpectSameModel(result_b, alone_b);
  // B's worker kill ended B's attempt only; the shard kill ended both.
  EXPECT_EQ(c->GetJob().recoveries(), a_recoveries_at_b_kill + 1) << "job A";
}

TEST_F(TwoJobsTest, BothJobsRowsMoveWithTheirSlotsWhenAShardJoinsAndWhenItDrains) {
  const auto [alone_a, alone_b] = AloneRuns();
  ASSERT_FALSE(HasFailure());
  const std::vector<std::string> shard_flags = {"--drain_on_sigterm", "--drain_linger_ms=300"};
  std::unique_ptr<Cluster> c =
      Start("scaled", true, true,
            {"--auto_rebalance", absl::StrCat("--admin_token=", kToken), "--policy_retry_ms=500"},
            shard_flags);
  ASSERT_FALSE(HasFatalFailure());
  CoordinatorView view(c->address_, kToken);
  enum Phase { kJoin, kBalance, kDrain, kDone } phase = kJoin;
  // One step of the scale-up and scale-down; `training`: the jobs still run.
  std::vector<Phase> reached_while_training;
  auto advance = [&](bool training) {
    const std::vector<v1::Migration> ops =
        phase == kBalance || phase == kDrain ? view.Migrations() : std::vector<v1::Migration>();
    for (const v1::Migration& op : ops) {
      ASSERT_NE(op.phase(), v1::Migration::FAILED) << op.error();
    }
    const Phase before = phase;
    if (phase == kJoin && c->NewestCheckpointStep() >= 20) {
      ASSERT_NO_FATAL_FAILURE(c->StartShard(2, shard_flags));  // a scale-up
      phase = kBalance;
    } else if (phase == kBalance && !ops.empty() && ops.back().phase() == v1::Migration::DONE &&
               view.OwnedSlots()[2] > 0) {
      std::cerr << "join: " << ops.back().rows_copied() << " rows moved (both jobs' stores)"
                << std::endl;
      c->Retire(2);  // a scale-down
      phase = kDrain;
    } else if (phase == kDrain) {
      absl::StatusOr<int> code = c->shard(2)->Wait(absl::ZeroDuration());
      if (!code.ok()) return;
      EXPECT_EQ(*code, 0) << "the drained shard's exit code";
      EXPECT_EQ(view.OwnedSlots()[2], 0u) << "it exited owning slots";
      phase = kDone;
    }
    if (training && phase != before) reached_while_training.push_back(phase);
  };
  const std::string result_a = c->Finish([&](absl::Duration) { advance(/*training=*/true); });
  // The join must begin while both train. On a loaded machine its moves (or the drain)
  // can outlast the jobs (2 x 240 steps take ~5 s): they finish here, and the models
  // below must still be the jobs' alone.
  ASSERT_NE(phase, kJoin) << "the jobs ended before their first checkpoint";
  const absl::Time deadline = absl::Now() + absl::Seconds(90);
  while (phase != kDone && absl::Now() < deadline && !HasFatalFailure()) {
    advance(/*training=*/false);
    absl::SleepFor(absl::Milliseconds(50));  // polling pace
  }
  ASSERT_EQ(phase, kDone) << "the shard did not join and drain";
  std::cerr << "phases reached while the jobs trained: " << reached_while_training.size() << " of 3"
            << std::endl;
  const std::vector<v1::Migration> ops = view.Migrations();
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].spec().reason(), "auto rebalance: shard 2 joined");
  EXPECT_EQ(ops[1].spec().reason(), "drain shard 2 (leaving)");
  for (const v1::Migration& op : ops) {
    EXPECT_EQ(op.phase(), v1::Migration::DONE) << op.error();
    EXPECT_GT(op.rows_copied(), 0u);
  }
  // Rows that stayed behind, or came back freshly initialized, would change a model.
  const std::string result_b = ResultB(*c);
  ExpectSameModel(result_a, alone_a);
  ExpectSameModel(result_b, alone_b);
  for (const std::string* result : {&result_a, &result_b}) {
    EXPECT_EQ(JsonValue(*result, "recoveries_rank0"), "0") << *result;
  }
}

}  // namespace
}  // namespace ember
