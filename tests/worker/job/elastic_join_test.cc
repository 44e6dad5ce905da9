// Copyright 2026 The Ember Authors.
//
// The coordinator's side of elastic runs (docs/ARCHITECTURE.md "Elastic runs") against a
// real ember-coordinator and PS shard on loopback, the test playing the workers with
// JoinJob calls: a bad worker range, a rank given with a range, a missing member id, a
// worker whose range or mode differs from the run's, and an elastic run on a coordinator
// without checkpoints are refused with INVALID_ARGUMENT / FAILED_PRECONDITION; waiting
// workers form a world ordered by member id; a worker asking to join at a later step
// waits (GetJob and `emberctl jobs describe` list it as pending) without changing the
// running world; one beyond the maximum waits for a place.

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "tests/support/local_cluster.h"
#include "tests/support/scratch_dir.h"
#include "tools/harness/process.h"

namespace ember {
namespace {

using ::testing::HasSubstr;

constexpr char kJob[] = "elastic-join";

v1::JoinJobRequest Elastic(const std::string& member, uint32_t min, uint32_t max) {
  v1::JoinJobRequest join;
  join.set_job(kJob);
  join.set_generation(1);
  join.set_min_workers(min);
  join.set_max_workers(max);
  join.set_member(member);
  join.set_wait_ms(0);
  return join;
}

class ElasticJoinTest : public ::testing::Test {
 protected:
  // A coordinator (with `flags`) and one shard, slots assigned.
  void Start(std::vector<std::string> flags) {
    LocalClusterOptions options;
    options.dir = dir_.path();
    options.shards = 1;
    options.coordinator_flags = std::move(flags);
    cluster_ = std::make_unique<LocalCluster>(std::move(options));
    absl::Status s = cluster_->Start();
    if (s.ok()) s = cluster_->WaitForSlots();
    ASSERT_TRUE(s.ok()) << s;
    stub_ = v1::CoordinatorService::NewStub(
        grpc::CreateChannel(cluster_->coordinator_address(), grpc::InsecureChannelCredentials()));
  }
  void StartWithCheckpoints(const std::string& settle_ms) {
    Start({absl::StrCat("--checkpoint_dir=", dir_.path(), "/ckpt"),
           absl::StrCat("--elastic_settle_ms=", settle_ms)});
  }

  grpc::Status Join(const v1::JoinJobRequest& request, v1::JoinJobResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub_->JoinJob(&context, request, response);
  }
  grpc::Status Join(const v1::JoinJobRequest& request) {
    v1::JoinJobResponse ignored;
    return Join(request, &ignored);
  }

  // Calls JoinJob for `request` until it is ready (up to 30 s).
  v1::JoinJobResponse JoinUntilReady(const v1::JoinJobRequest& request) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    v1::JoinJobResponse response;
    while (absl::Now() < deadline) {
      const grpc::Status s = Join(request, &response);
      EXPECT_TRUE(s.ok()) << s.error_message();
      if (!s.ok() || response.ready()) return response;
      absl::SleepFor(absl::Milliseconds(100));  // polling pace, not event ordering
    }
    ADD_FAILURE() << request.member() << " never got a place: " << response.waiting_for();
    return response;
  }

  v1::GetJobResponse GetJob() {
    absl::StatusOr<v1::GetJobResponse> job = cluster_->GetJob(kJob);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : v1::GetJobResponse();
  }

  ScratchDir dir_{"ember-elastic-join"};
  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<v1::CoordinatorService::Stub> stub_;
};

TEST_F(ElasticJoinTest, BadRangesRanksMembersAndMixedModesAreRefused) {
  ASSERT_NO_FATAL_FAILURE(StartWithCheckpoints("60000"));
  grpc::Status s = Join(Elastic("a", 3, 2));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("is not 1 <= min <= max"));
  s = Join(Elastic("a", 0, 2));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::JoinJobRequest ranked = Elastic("a", 1, 2);
  ranked.set_rank(1);
  ranked.set_world_size(2);
  s = Join(ranked);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("leaves rank and world_size to the coordinator"));
  s = Join(Elastic("", 1, 2));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("member id"));
  v1::JoinJobRequest min_only = Elastic("a", 1, 0);
  s = Join(min_only);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // The run starts elastic [1, 2]; a worker with another range or a fixed world size
  // is refused, naming both.
  ASSERT_TRUE(Join(Elastic("a", 1, 2)).ok());
  s = Join(Elastic("b", 1, 3));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("runs elastic workers [1, 2]"));
  EXPECT_THAT(s.error_message(), HasSubstr("elastic workers [1, 3]"));
  v1::JoinJobRequest fixed;
  fixed.set_job(kJob);
  fixed.set_generation(1);
  fixed.set_rank(0);
  fixed.set_world_size(2);
  fixed.set_wait_ms(0);
  s = Join(fixed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("a fixed world of 2 worker(s)"));
}

TEST_F(ElasticJoinTest, AnElasticRunNeedsCheckpoints) {
  ASSERT_NO_FATAL_FAILURE(Start({}));
  const grpc::Status s = Join(Elastic("a", 1, 2));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("--checkpoint_dir"));
}

// A scale request beyond the range waits for a place: the world forms at once with MAX
// workers, and one more waits, told why.
TEST_F(ElasticJoinTest, AWorkerBeyondTheMaximumWaitsForAPlace) {
  ASSERT_NO_FATAL_FAILURE(StartWithCheckpoints("60000"));
  ASSERT_TRUE(Join(Elastic("a", 1, 2)).ok());
  ASSERT_TRUE(Join(Elastic("b", 1, 2)).ok());
  const v1::JoinJobResponse a = JoinUntilReady(Elastic("a", 1, 2));
  ASSERT_TRUE(a.ready());
  EXPECT_EQ(a.world_size(), 2u);
  v1::JoinJobResponse c;
  ASSERT_TRUE(Join(Elastic("c", 1, 2), &c).ok());
  EXPECT_FALSE(c.ready());
  EXPECT_THAT(c.waiting_for(), HasSubstr("runs its maximum of 2 workers"));
  EXPECT_EQ(GetJob().world_size(), 2u);
}

// A member that joins the running attempt again from another process (a restarted
// container under the same host name) ends the attempt; from the same process it is a
// retry of a lost answer.
TEST_F(ElasticJoinTest, AMemberThatJoinsAgainFromAnotherProcessEndsTheAttempt) {
  ASSERT_NO_FATAL_FAILURE(StartWithCheckpoints("300"));
  auto from = [](const std::string& member, uint64_t process) {
    v1::JoinJobRequest join = Elastic(member, 2, 2);
    join.set_process(process);
    return join;
  };
  ASSERT_TRUE(Join(from("a", 11)).ok());
  ASSERT_TRUE(Join(from("b", 22)).ok());
  const v1::JoinJobResponse a = JoinUntilReady(from("a", 11));
  const v1::JoinJobResponse b = JoinUntilReady(from("b", 22));
  ASSERT_TRUE(a.ready() && b.ready());
  ASSERT_EQ(a.attempt(), b.attempt());
  const v1::JoinJobResponse retry = JoinUntilReady(from("a", 11));
  EXPECT_EQ(retry.attempt(), a.attempt());
  EXPECT_EQ(GetJob().recoveries(), 0u);

  // "a" restarted: its new process joins; the attempt ends and the next one takes it.
  ASSERT_TRUE(Join(from("a", 99)).ok());
  ASSERT_TRUE(Join(from("b", 22)).ok());
  const v1::JoinJobResponse restarted = JoinUntilReady(from("a", 99));
  const v1::JoinJobResponse b_again = JoinUntilReady(from("b", 22));
  EXPECT_GT(restarted.attempt(), a.attempt());
  EXPECT_EQ(b_again.attempt(), restarted.attempt());
  EXPECT_EQ(restarted.rank(), 0u);
  const v1::GetJobResponse job = GetJob();
  EXPECT_EQ(job.recoveries(), 1u);
  EXPECT_THAT(job.failure(), HasSubstr("worker 'a' restarted"));
  // From its new process, asking again is a retry again.
  EXPECT_EQ(JoinUntilReady(from("a", 99)).attempt(), restarted.attempt());
  EXPECT_EQ(GetJob().recoveries(), 1u);
}

TEST_F(ElasticJoinTest, WaitingWorkersFormAWorldByMemberIdAndALaterJoinerWaits) {
  ASSERT_NO_FATAL_FAILURE(StartWithCheckpoints("500"));
  // "b" arrives first; ranks follow the member ids, not the arrival order.
  ASSERT_TRUE(Join(Elastic("b", 1, 3)).ok());
  ASSERT_TRUE(Join(Elastic("a", 1, 3)).ok());
  const v1::JoinJobResponse a = JoinUntilReady(Elastic("a", 1, 3));
  const v1::JoinJobResponse b = JoinUntilReady(Elastic("b", 1, 3));
  ASSERT_TRUE(a.ready() && b.ready());
  EXPECT_EQ(a.rank(), 0u);
  EXPECT_EQ(b.rank(), 1u);
  EXPECT_EQ(a.world_size(), 2u);
  EXPECT_EQ(b.world_size(), 2u);
  EXPECT_EQ(a.attempt(), b.attempt());
  // Asked again (its answer lost), a member gets the same answer.
  const v1::JoinJobResponse again = JoinUntilReady(Elastic("a", 1, 3));
  EXPECT_EQ(again.rank(), 0u);
  EXPECT_EQ(again.attempt(), a.attempt());

  // "c" joins at step 50 or later: it waits, and the running world stays.
  v1::JoinJobRequest later = Elastic("c", 1, 3);
  later.set_join_at_step(50);
  v1::JoinJobResponse c;
  ASSERT_TRUE(Join(later, &c).ok());
  EXPECT_FALSE(c.ready());
  EXPECT_THAT(c.waiting_for(), HasSubstr("at or after step 50"));
  const v1::GetJobResponse job = GetJob();
  EXPECT_EQ(job.phase(), v1::GetJobResponse::RUNNING);
  EXPECT_EQ(job.min_workers(), 1u);
  EXPECT_EQ(job.max_workers(), 3u);
  EXPECT_EQ(job.world_size(), 2u);
  ASSERT_EQ(job.members_size(), 2);
  EXPECT_EQ(job.members(0), "a");
  EXPECT_EQ(job.members(1), "b");
  ASSERT_EQ(job.pending_size(), 1);
  EXPECT_EQ(job.pending(0).member(), "c");
  EXPECT_EQ(job.pending(0).join_at_step(), 50u);
  EXPECT_EQ(job.resizes(), 0u);
  EXPECT_EQ(job.attempt(), a.attempt());

  // emberctl jobs describe shows the same.
  const RunResult described = RunBinary(
      EMBER_CTL_BINARY,
      absl::StrCat("jobs describe ", kJob, " --coordinator=", cluster_->coordinator_address()));
  ASSERT_EQ(described.exit_code, 0) << described.output;
  EXPECT_THAT(described.output, HasSubstr("1 to 3 (elastic)"));
  EXPECT_THAT(described.output, HasSubstr("members:           a, b"));
  EXPECT_THAT(described.output, HasSubstr("c (from step 50)"));
}

}  // namespace
}  // namespace ember
