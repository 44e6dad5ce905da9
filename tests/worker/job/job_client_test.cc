// Copyright 2026 The Ember Authors.
//
// JobClient's finish protocol (worker/job/job_client.h) against a real ember-coordinator
// and PS shard on loopback, the test playing the workers: a rank above 0 waits for rank
// 0's FinishJob (AwaitFinished), is told ABORTED when the attempt was rolled back first,
// FAILED_PRECONDITION when the job failed or a newer run superseded it, and
// DEADLINE_EXCEEDED when nobody finishes; FinishJob refuses a rolled-back attempt and
// accepts a retry of a finished one.

#include "worker/job/job_client.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/local_cluster.h"
#include "tests/support/scratch_dir.h"

namespace ember::worker {
namespace {

constexpr char kJob[] = "finish-test";

v1::JoinJobRequest JoinRequest(uint64_t generation, uint64_t after_attempt) {
  v1::JoinJobRequest join;
  join.set_job(kJob);
  join.set_generation(generation);
  join.set_rank(0);
  join.set_world_size(1);
  join.set_after_attempt(after_attempt);
  return join;
}

v1::FinishJobRequest FinishRequest(uint64_t generation, uint64_t attempt) {
  v1::FinishJobRequest finish;
  finish.set_job(kJob);
  finish.set_generation(generation);
  finish.set_attempt(attempt);
  return finish;
}

class JobClientTest : public ::testing::Test {
 protected:
  // Starts a coordinator (with `coordinator_flags`) and one shard under `dir_`, connects
  // jobs_ and joins the first attempt of run 1 as its only worker; returns the attempt
  // (0 on failure).
  uint64_t StartAndJoin(std::vector<std::string> coordinator_flags) {
    LocalClusterOptions options;
    options.dir = dir_.path();
    options.shards = 1;
    options.coordinator_flags = std::move(coordinator_flags);
    cluster_ = std::make_unique<LocalCluster>(std::move(options));
    absl::Status s = cluster_->Start();
    if (s.ok()) s = cluster_->WaitForSlots();
    EXPECT_TRUE(s.ok()) << s;
    absl::StatusOr<std::unique_ptr<JobClient>> jobs =
        JobClient::Create(cluster_->coordinator_address());
    EXPECT_TRUE(jobs.ok()) << jobs.status();
    if (!s.ok() || !jobs.ok()) return 0;
    jobs_ = std::move(*jobs);
    wait_.timeout = absl::Seconds(30);
    absl::StatusOr<v1::JoinJobResponse> first = jobs_->Join(JoinRequest(1, 0), wait_);
    EXPECT_TRUE(first.ok()) << first.status();
    return first.ok() ? first->attempt() : 0;
  }

  ScratchDir dir_{"ember-job-client"};
  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<JobClient> jobs_;
  JobClient::JoinWait wait_;
};

TEST_F(JobClientTest, AwaitFinishedFollowsFinishRollbackAndSupersession) {
  const uint64_t a1 = StartAndJoin({absl::StrCat("--checkpoint_dir=", dir_.path(), "/ckpt")});
  ASSERT_NE(a1, 0u);
  // Nobody finishes the running attempt: the wait ends at its deadline, saying so.
  absl::Status s = jobs_->AwaitFinished(kJob, 1, a1, absl::Milliseconds(300));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("still running"), std::string::npos) << s;

  // A worker reports attempt a1 failed: the job recovers into a new attempt, and a rank
  // still waiting on a1 is told to rejoin.
  absl::StatusOr<v1::JoinJobResponse> second = jobs_->Join(JoinRequest(1, a1), wait_);
  ASSERT_TRUE(second.ok()) << second.status();
  const uint64_t a2 = second->attempt();
  ASSERT_GT(a2, a1);
  s = jobs_->AwaitFinished(kJob, 1, a1, absl::Seconds(10));
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;

  // Rank 0 of the rolled-back attempt may not finish the run; rank 0 of the running one
  // does, and a retry of that FinishJob is answered OK.
  EXPECT_EQ(jobs_->Finish(FinishRequest(1, a1), absl::Seconds(10)).code(),
            absl::StatusCode::kAborted);
  EXPECT_TRUE(jobs_->Finish(FinishRequest(1, a2), absl::Seconds(10)).ok());
  EXPECT_TRUE(jobs_->Finish(FinishRequest(1, a2), absl::Seconds(10)).ok());
  EXPECT_TRUE(jobs_->AwaitFinished(kJob, 1, a2, absl::Seconds(10)).ok());

  // A newer run of the job supersedes the finished one.
  ASSERT_TRUE(jobs_->Join(JoinRequest(2, 0), wait_).ok());
  s = jobs_->AwaitFinished(kJob, 1, a2, absl::Seconds(10));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("superseded"), std::string::npos) << s;
}

TEST_F(JobClientTest, AwaitFinishedReportsAFailedJob) {
  // No --checkpoint_dir: a failed attempt fails the job.
  const uint64_t a1 = StartAndJoin({});
  ASSERT_NE(a1, 0u);
  v1::JoinJobRequest failed = JoinRequest(1, a1);
  failed.set_reason("final evaluation: a test failure");
  EXPECT_FALSE(jobs_->Join(failed, wait_).ok());  // the job failed: no attempt to join
  absl::Status s = jobs_->AwaitFinished(kJob, 1, a1, absl::Seconds(10));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("failed"), std::string::npos) << s;
}

}  // namespace
}  // namespace ember::worker
