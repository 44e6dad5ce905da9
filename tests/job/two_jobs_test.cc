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
//    two jobs name the same tables).

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/job/job_cluster.h"
#include "tools/harness/process.h"
#include "tools/harness/result_json.h"

namespace ember {
namespace {

// Worker slots of job B in a cluster with both jobs: after A's ranks.
constexpr int kJobBSlot = kWorkers;

class TwoJobsTest : public JobClusterTest {
 protected:
  static void SetUpTestSuite() {
    ASSERT_NO_FATAL_FAILURE(GenerateData("ember-two-jobs"));
    // Job B: the quickstart model under another name (the same table names).
    std::ifstream in(std::string(EMBER_SOURCE_DIR) + "/configs/quickstart.pbtxt");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string renamed =
        absl::StrReplaceAll(text, {{"name: \"quickstart\"", "name: \"quickstart-b\""}});
    ASSERT_NE(renamed, text);
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
  std::unique_ptr<Cluster> Start(const std::string& name, bool a, bool b) {
    std::unique_ptr<Cluster> c = NewCluster(name);
    c->StartCoordinator(2);
    for (int i = 0; i < 2; ++i) c->StartShard(i);
    // Job B's workers take the slots after A's (the first ones when alone: Finish
    // waits for every slot).
    for (int r = 0; r < kWorkers; ++r) {
      if (a) c->StartWorker(r, FlagsA());
      if (b) c->StartWorker((a ? kJobBSlot : 0) + r, FlagsB(*c, r));
    }
    return c;
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
  // Each job alone, on a cluster of its own.
  std::string alone_a, alone_b;
  {
    std::unique_ptr<Cluster> c = Start("alone-a", true, false);
    ASSERT_FALSE(HasFatalFailure());
    alone_a = c->Finish();
    ASSERT_EQ(JsonValue(alone_a, "steps"), absl::StrCat(kSteps)) << alone_a;
  }
  {
    std::unique_ptr<Cluster> c = Start("alone-b", false, true);
    ASSERT_FALSE(HasFatalFailure());
    c->Finish();
    alone_b = ResultB(*c);
    ASSERT_EQ(JsonValue(alone_b, "steps"), absl::StrCat(kSteps)) << alone_b;
  }

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

}  // namespace
}  // namespace ember
