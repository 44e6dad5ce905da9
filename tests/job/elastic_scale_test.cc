// Copyright 2026 The Ember Authors.
//
// Elastic runs (docs/ARCHITECTURE.md "Elastic runs"): workers that join and leave a
// running BSP job, which changes its world size at a checkpoint each time. Real
// ember-datagen data, a coordinator with checkpoints, PS shards and ember-worker
// processes on loopback (job_cluster.h); the workers run with --workers=1:3.
//
// Pinned here:
//  - 2 -> 3 -> 1 workers at given steps (a third worker joins at step 30, two leave at
//    step 60): every example of each epoch is trained exactly once (result.json
//    examples_per_epoch equals the data's line count), every process exits 0, and a
//    second run of the same schedule, with a PS shard SIGKILLed after the second
//    resize, ends with bitwise the same model;
//  - a worker sent SIGTERM leaves at the next step's checkpoint and exits 0; the other
//    goes on alone and still trains every example once;
//  - a leave that would go below the run's minimum waits: the worker trains on.

#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "tests/job/job_cluster.h"
#include "tools/harness/process.h"
#include "tools/harness/result_json.h"

namespace ember {
namespace {

constexpr uint64_t kJoinStep = 30;
constexpr uint64_t kLeaveStep = 60;

class ElasticScaleTest : public JobClusterTest {
 protected:
  static void SetUpTestSuite() { GenerateData("ember-elastic-scale"); }
  static void TearDownTestSuite() { TearDownData(); }

  // A cluster of 2 shards whose coordinator forms a world once no worker arrived for
  // 8 s (the first formation: so that both starting workers make it on a slow machine).
  std::unique_ptr<Cluster> StartCluster(const std::string& name) {
    std::unique_ptr<Cluster> c = NewCluster(name);
    c->elastic_ = true;
    c->StartCoordinator(2, {"--elastic_settle_ms=8000"});
    for (int i = 0; i < 2 && !HasFatalFailure(); ++i) c->StartShard(i);
    job_ = {absl::StrCat("--config=", WriteLastOutConfig(c->dir_, "file")), "--epochs=2",
            "--checkpoint_every_steps=20", "--workers=1:3"};
    return c;
  }

  // Starts worker process `index` named `member` with the job's flags and `extra`.
  void StartMember(Cluster* c, int index, const std::string& member,
                   const std::vector<std::string>& extra = {}) {
    std::vector<std::string> flags = job_;
    flags.push_back(absl::StrCat("--member=", member));
    flags.insert(flags.end(), extra.begin(), extra.end());
    c->StartWorker(index, flags);
  }

  static v1::GetJobResponse GetJob(const Cluster& c) { return c.GetJob(); }

  // Runs the 2 -> 3 -> 1 schedule: w3 waits to join at kJoinStep, w1 and w2 leave at
  // kLeaveStep. `faults` runs while the job does (Cluster::Finish).
  std::string RunSchedule(Cluster* c, const std::function<void(absl::Duration)>& faults = nullptr) {
    // The joiner first: it waits, and rank 0 knows of it before the first step.
    StartMember(c, 2, "w3", {absl::StrCat("--join_at_step=", kJoinStep)});
    StartMember(c, 0, "w1", {absl::StrCat("--leave_at_step=", kLeaveStep)});
    StartMember(c, 1, "w2", {absl::StrCat("--leave_at_step=", kLeaveStep)});
    if (HasFatalFailure()) return "";
    return c->Finish(faults);
  }

  std::vector<std::string> job_;
};

TEST_F(ElasticScaleTest, TwoThenThreeThenOneWorkersTrainEveryExampleOnceAndRecoverBitwise) {
  const uint64_t lines = TrainLines(*root_ + "/data/train");
  const std::string every_example_once = absl::StrCat("[", lines, ", ", lines, "]");

  std::unique_ptr<Cluster> first = StartCluster("schedule");
  ASSERT_FALSE(HasFatalFailure());
  const std::string a = RunSchedule(first.get());
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(HasEpochExamples(a, every_example_once)) << a;
  EXPECT_EQ(JsonValue(a, "workers"), "1") << a;
  // The final rank 0 (w3) took part in one of the two resizes; the run had both.
  EXPECT_EQ(JsonValue(a, "resizes_rank0"), "1") << a;
  EXPECT_EQ(JsonValue(a, "recoveries_rank0"), "0") << a;
  const v1::GetJobResponse job = GetJob(*first);
  EXPECT_EQ(job.phase(), v1::GetJobResponse::FINISHED);
  EXPECT_EQ(job.resizes(), 2u);
  EXPECT_EQ(job.recoveries(), 0u);
  EXPECT_EQ(job.min_workers(), 1u);
  EXPECT_EQ(job.max_workers(), 3u);
  ASSERT_EQ(job.members_size(), 1);
  EXPECT_EQ(job.members(0), "w3");
  first.reset();

  // The same schedule, with shard 0 SIGKILLed once a checkpoint after the second
  // resize exists (the test restarts it): the run rolls back to that checkpoint at
  // world size 1 and ends with bitwise the same model.
  std::unique_ptr<Cluster> second = StartCluster("schedule-with-kill");
  ASSERT_FALSE(HasFatalFailure());
  Cluster* c = second.get();
  bool killed = false;
  const std::string b = RunSchedule(c, [&](absl::Duration) {
    if (killed || c->NewestCheckpointStep() < kLeaveStep + 20) return;
    // Kill() reaps the process: the supervisor's restart happens here.
    ASSERT_TRUE(c->shard(0)->Kill().ok());
    ASSERT_NO_FATAL_FAILURE(c->StartShard(0));
    ++c->restarts_;
    killed = true;
  });
  ASSERT_FALSE(b.empty());
  EXPECT_TRUE(killed) << "the run ended before the fault";
  EXPECT_GE(c->restarts_, 1);
  EXPECT_TRUE(HasEpochExamples(b, every_example_once)) << b;
  EXPECT_EQ(JsonValue(b, "steps"), JsonValue(a, "steps"));
  EXPECT_EQ(JsonValue(b, "sparse_checksum"), JsonValue(a, "sparse_checksum"));
  EXPECT_EQ(JsonValue(b, "dense_checksum"), JsonValue(a, "dense_checksum"));
  EXPECT_EQ(JsonValue(b, "model_checksum"), JsonValue(a, "model_checksum"));
  EXPECT_GE(GetJob(*c).recoveries(), 1u);
}

TEST_F(ElasticScaleTest, AWorkerSentSigtermLeavesAtACheckpointAndExitsZero) {
  std::unique_ptr<Cluster> c = StartCluster("sigterm");
  ASSERT_FALSE(HasFatalFailure());
  StartMember(c.get(), 0, "w1");
  StartMember(c.get(), 1, "w2");
  ASSERT_FALSE(HasFatalFailure());
  bool sent = false;
  const std::string result = c->Finish([&](absl::Duration) {
    if (sent || c->NewestCheckpointStep() < 20) return;
    ASSERT_EQ(kill(c->worker(1)->pid(), SIGTERM), 0);
    sent = true;
  });
  ASSERT_FALSE(result.empty());  // Finish expected both exit codes 0
  EXPECT_TRUE(sent);
  const uint64_t lines = TrainLines(*root_ + "/data/train");
  EXPECT_TRUE(HasEpochExamples(result, absl::StrCat("[", lines, ", ", lines, "]"))) << result;
  EXPECT_EQ(JsonValue(result, "workers"), "1") << result;
  const v1::GetJobResponse job = GetJob(*c);
  EXPECT_EQ(job.resizes(), 1u);
  EXPECT_EQ(job.recoveries(), 0u);
  ASSERT_EQ(job.members_size(), 1);
  EXPECT_EQ(job.members(0), "w1");
}

// A leave that would take the run below its minimum waits: with --workers=2:3 a worker
// asking to leave at step 20 trains on to the end, and the run never resizes.
TEST_F(ElasticScaleTest, ALeaveBelowTheMinimumWaitsAndTheWorkerTrainsOn) {
  std::unique_ptr<Cluster> c = StartCluster("below-min");
  ASSERT_FALSE(HasFatalFailure());
  job_.back() = "--workers=2:3";
  StartMember(c.get(), 0, "w1");
  StartMember(c.get(), 1, "w2", {"--leave_at_step=20"});
  ASSERT_FALSE(HasFatalFailure());
  const std::string result = c->Finish();
  ASSERT_FALSE(result.empty());
  EXPECT_EQ(JsonValue(result, "workers"), "2") << result;
  const uint64_t lines = TrainLines(*root_ + "/data/train");
  EXPECT_TRUE(HasEpochExamples(result, absl::StrCat("[", lines, ", ", lines, "]"))) << result;
  const v1::GetJobResponse job = GetJob(*c);
  EXPECT_EQ(job.resizes(), 0u);
  EXPECT_EQ(job.members_size(), 2);
}

}  // namespace
}  // namespace ember
