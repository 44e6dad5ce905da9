// Copyright 2026 The Ember Authors.
//
// JobClient's finish protocol (worker/job/job_client.h) against a real ember-coordinator
// and PS shard on loopback, the test playing the workers: a rank above 0 waits for rank
// 0's FinishJob (AwaitFinished), is told ABORTED when the attempt was rolled back first,
// FAILED_PRECONDITION when the job failed or a newer run superseded it, and
// DEADLINE_EXCEEDED when nobody finishes; FinishJob refuses a rolled-back attempt and
// accepts a retry of a finished one. Rank 0's progress reports (ReportProgress) reach
// GetJob and the coordinator's ember_job_* metrics, and bad or stale reports are refused.
// A new run says what it does with the rows an earlier run left (JoinJobRequest.rows).
// Another job cannot start while one runs (the shards' attempt fence is cluster-wide)
// until an operator stops it (`emberctl jobs stop`, admin.proto StopJob).

#include "worker/job/job_client.h"

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/http_get.h"
#include "tests/support/local_cluster.h"
#include "tests/support/ports.h"
#include "tests/support/scratch_dir.h"
#include "tools/harness/process.h"

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
  // The runs here train nothing: each says it continues from the shards' rows.
  join.set_rows(v1::JoinJobRequest::START_ROWS_CONTINUE);
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

TEST_F(JobClientTest, TheCoordinatorGivesEachRunIdItsGeneration) {
  const uint64_t a1 = StartAndJoin({absl::StrCat("--checkpoint_dir=", dir_.path(), "/ckpt")});
  ASSERT_NE(a1, 0u);  // run 1 of the job, by its generation
  ASSERT_TRUE(jobs_->Finish(FinishRequest(1, a1), absl::Seconds(10)).ok());

  // A run id the job has not seen: the next generation, a new run.
  v1::JoinJobRequest by_id = JoinRequest(0, 0);
  by_id.set_run_id("k8s-uid-a");
  absl::StatusOr<v1::JoinJobResponse> a = jobs_->Join(by_id, wait_);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->generation(), 2u);
  // The same id again (a restarted worker of that run): the same run. It rejoins as
  // the worker that failed in the attempt, and the run recovers into a new attempt.
  by_id.set_after_attempt(a->attempt());
  absl::StatusOr<v1::JoinJobResponse> again = jobs_->Join(by_id, wait_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->generation(), 2u);
  EXPECT_GT(again->attempt(), a->attempt());

  // Another id: generation 3; the first id is now superseded.
  by_id.set_run_id("k8s-uid-b");
  by_id.set_after_attempt(0);
  absl::StatusOr<v1::JoinJobResponse> b = jobs_->Join(by_id, wait_);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->generation(), 3u);
  by_id.set_run_id("k8s-uid-a");
  absl::StatusOr<v1::JoinJobResponse> old = jobs_->Join(by_id, wait_);
  EXPECT_EQ(old.status().code(), absl::StatusCode::kFailedPrecondition) << old.status();
  EXPECT_NE(old.status().message().find("superseded by generation 3"), std::string::npos)
      << old.status();

  // Refused: a run id with a generation, a run id over 128 bytes.
  v1::JoinJobRequest both = JoinRequest(4, 0);
  both.set_run_id("k8s-uid-c");
  EXPECT_EQ(jobs_->Join(both, wait_).status().code(), absl::StatusCode::kInvalidArgument);
  v1::JoinJobRequest long_id = JoinRequest(0, 0);
  long_id.set_run_id(std::string(129, 'x'));
  EXPECT_EQ(jobs_->Join(long_id, wait_).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<v1::GetJobResponse> job = jobs_->GetJob(kJob, absl::Seconds(10));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->generation(), 3u);  // nothing refused changed the run
}

TEST_F(JobClientTest, ANewRunSaysWhatItDoesWithTheShardsRows) {
  const uint64_t a1 = StartAndJoin({absl::StrCat("--checkpoint_dir=", dir_.path(), "/ckpt")});
  ASSERT_NE(a1, 0u);  // the first run on a new cluster: any choice is fine

  // Run 2 says nothing: refused, naming the earlier run and every way out.
  v1::JoinJobRequest unsaid = JoinRequest(2, 0);
  unsaid.clear_rows();
  absl::StatusOr<v1::JoinJobResponse> refused = jobs_->Join(unsaid, wait_);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  for (const char* word : {"generation 1", "--rows=continue", "--rows=fresh", "--resume_from"}) {
    EXPECT_NE(refused.status().message().find(word), std::string::npos)
        << word << ": " << refused.status();
  }
  // Fresh with a checkpoint to resume from: contradictory, refused before either is used.
  v1::JoinJobRequest both = JoinRequest(2, 0);
  both.set_rows(v1::JoinJobRequest::START_ROWS_FRESH);
  both.set_resume_from("latest");
  EXPECT_EQ(jobs_->Join(both, wait_).status().code(), absl::StatusCode::kInvalidArgument);

  // Fresh: the run starts (the shard empties its tables for it).
  v1::JoinJobRequest fresh = JoinRequest(2, 0);
  fresh.set_rows(v1::JoinJobRequest::START_ROWS_FRESH);
  absl::StatusOr<v1::JoinJobResponse> started = jobs_->Join(fresh, wait_);
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_GT(started->attempt(), a1);

  // Another job may not start under the running one (let alone empty its tables).
  v1::JoinJobRequest other = JoinRequest(1, 0);
  other.set_job("another-job");
  other.set_rows(v1::JoinJobRequest::START_ROWS_FRESH);
  absl::StatusOr<v1::JoinJobResponse> clash = jobs_->Join(other, wait_);
  EXPECT_EQ(clash.status().code(), absl::StatusCode::kFailedPrecondition) << clash.status();
  EXPECT_NE(clash.status().message().find(kJob), std::string::npos) << clash.status();
  absl::StatusOr<v1::GetJobResponse> job = jobs_->GetJob(kJob, absl::Seconds(10));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->generation(), 2u);
  EXPECT_EQ(job->phase(), v1::GetJobResponse::RUNNING);
}

// Two jobs on one cluster: the second cannot start while the first runs (their attempts
// would fence each other's calls and each restore would roll back the other's rows);
// `emberctl jobs stop` ends the first (its worker's next join fails) and the second
// starts. The stop needs the admin credential and a running job.
TEST_F(JobClientTest, AnotherJobStartsOnlyOnceTheRunningOneEndsOrIsStopped) {
  const uint64_t a1 = StartAndJoin(
      {absl::StrCat("--checkpoint_dir=", dir_.path(), "/ckpt"), "--admin_token=secret"});
  ASSERT_NE(a1, 0u);
  v1::JoinJobRequest other = JoinRequest(1, 0);
  other.set_job("another-job");
  absl::StatusOr<v1::JoinJobResponse> refused = jobs_->Join(other, wait_);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  for (const char* word : {"job 'another-job' cannot start",
                           "job 'finish-test' (generation 1) "
                           "is RUNNING",
                           "emberctl jobs stop finish-test"}) {
    EXPECT_THAT(std::string(refused.status().message()), ::testing::HasSubstr(word));
  }
  absl::StatusOr<v1::GetJobResponse> nothing = jobs_->GetJob("another-job", absl::Seconds(10));
  EXPECT_EQ(nothing.status().code(), absl::StatusCode::kNotFound) << nothing.status();

  const std::string ctl = absl::StrCat("--coordinator=", cluster_->coordinator_address());
  // The stop needs the admin credential, a known job and a running one.
  RunResult r = RunBinary(EMBER_CTL_BINARY, absl::StrCat("jobs stop finish-test ", ctl));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::HasSubstr("admin token"));
  r = RunBinary(EMBER_CTL_BINARY, absl::StrCat("jobs stop no-such-job --admin_token=secret ", ctl));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::HasSubstr("unknown job 'no-such-job'"));
  r = RunBinary(EMBER_CTL_BINARY,
                absl::StrCat("jobs stop finish-test --admin_token=secret --reason=gone ", ctl));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::HasSubstr("FAILED, stopped by an operator: gone"));
  r = RunBinary(EMBER_CTL_BINARY, absl::StrCat("jobs stop finish-test --admin_token=secret ", ctl));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::HasSubstr("is FAILED: nothing to stop"));
  r = RunBinary(EMBER_CTL_BINARY, absl::StrCat("audit --admin_token=secret ", ctl));
  EXPECT_THAT(r.output, ::testing::HasSubstr("stop_job job=finish-test reason=gone"));

  // The stopped run's worker is told so when it rejoins; the other job starts.
  absl::StatusOr<v1::JoinJobResponse> rejoin = jobs_->Join(JoinRequest(1, a1), wait_);
  EXPECT_EQ(rejoin.status().code(), absl::StatusCode::kFailedPrecondition) << rejoin.status();
  EXPECT_THAT(std::string(rejoin.status().message()),
              ::testing::HasSubstr("stopped by an operator: gone"));
  absl::StatusOr<v1::JoinJobResponse> started = jobs_->Join(other, wait_);
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_GT(started->attempt(), a1);
}

v1::ReportProgressRequest ProgressRequest(uint64_t generation, uint64_t attempt) {
  v1::ReportProgressRequest r;
  r.set_job(kJob);
  r.set_generation(generation);
  r.set_attempt(attempt);
  r.set_rank(0);
  v1::JobProgress& p = *r.mutable_progress();
  p.set_step(50);
  p.set_examples(50 * 128);
  p.set_estimated_steps(200);
  p.set_examples_per_sec(1000);
  p.set_train_loss(0.5);
  p.set_has_test_auc(true);
  p.set_test_auc(0.75);
  p.set_progress_ratio(0.9);  // the coordinator's to fill: ignored
  p.set_eta_seconds(12345);
  return r;
}

TEST_F(JobClientTest, ProgressReportsReachGetJobAndTheMetrics) {
  const int metrics_port = FreePort();
  const uint64_t a1 = StartAndJoin({absl::StrCat("--checkpoint_dir=", dir_.path(), "/ckpt"),
                                    absl::StrCat("--metrics_port=", metrics_port)});
  ASSERT_NE(a1, 0u);
  const absl::Time sent = absl::Now();
  ASSERT_TRUE(jobs_->ReportProgressAsync(ProgressRequest(1, a1)));
  ASSERT_TRUE(jobs_->AwaitProgressReport(absl::Seconds(10)).ok());

  absl::StatusOr<v1::GetJobResponse> job = jobs_->GetJob(kJob, absl::Seconds(10));
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(job->has_progress());
  const v1::JobProgress& p = job->progress();
  EXPECT_EQ(p.step(), 50u);
  EXPECT_EQ(p.examples(), 50u * 128);
  EXPECT_EQ(p.attempt(), a1);
  EXPECT_EQ(p.workers(), 1u);
  EXPECT_DOUBLE_EQ(p.progress_ratio(), 0.25);
  // 150 steps of 128 examples at 1000 examples/s: 19.2 s, counted down since the report.
  EXPECT_LE(p.eta_seconds(), 19.2);
  EXPECT_GT(p.eta_seconds(), 19.2 - absl::ToDoubleSeconds(absl::Now() - sent) - 0.01);
  EXPECT_TRUE(p.has_test_auc());
  EXPECT_DOUBLE_EQ(p.test_auc(), 0.75);
  EXPECT_GE(p.reported_unix_ms(), absl::ToUnixMillis(sent));

  absl::StatusOr<std::string> metrics = HttpGet(metrics_port, "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  const std::string label = absl::StrCat("{training_job=\"", kJob, "\"}");
  for (const std::string& line : {absl::StrCat("ember_job_progress_ratio", label, " 0.25"),
                                  absl::StrCat("ember_job_examples_per_second", label, " 1000"),
                                  absl::StrCat("ember_job_workers", label, " 1"),
                                  absl::StrCat("ember_job_step", label, " 50"),
                                  absl::StrCat("ember_job_eta_seconds", label, " ")}) {
    EXPECT_NE(metrics->find(line), std::string::npos) << line << "\n" << *metrics;
  }

  // Refused: another rank, a number that is not finite, an unknown job.
  v1::ReportProgressRequest bad = ProgressRequest(1, a1);
  bad.set_rank(1);
  ASSERT_TRUE(jobs_->ReportProgressAsync(bad));
  EXPECT_EQ(jobs_->AwaitProgressReport(absl::Seconds(10)).code(),
            absl::StatusCode::kInvalidArgument);
  bad = ProgressRequest(1, a1);
  bad.mutable_progress()->set_examples_per_sec(std::nan(""));
  ASSERT_TRUE(jobs_->ReportProgressAsync(bad));
  absl::Status s = jobs_->AwaitProgressReport(absl::Seconds(10));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("examples_per_sec"), std::string::npos) << s;
  bad = ProgressRequest(1, a1);
  bad.set_job("no-such-job");
  ASSERT_TRUE(jobs_->ReportProgressAsync(bad));
  EXPECT_EQ(jobs_->AwaitProgressReport(absl::Seconds(10)).code(), absl::StatusCode::kNotFound);

  // A rolled-back attempt's report is refused; the new attempt's replaces the progress.
  absl::StatusOr<v1::JoinJobResponse> second = jobs_->Join(JoinRequest(1, a1), wait_);
  ASSERT_TRUE(second.ok()) << second.status();
  const uint64_t a2 = second->attempt();
  ASSERT_TRUE(jobs_->ReportProgressAsync(ProgressRequest(1, a1)));
  EXPECT_EQ(jobs_->AwaitProgressReport(absl::Seconds(10)).code(), absl::StatusCode::kAborted);
  v1::ReportProgressRequest later = ProgressRequest(1, a2);
  later.mutable_progress()->set_step(200);
  later.mutable_progress()->set_examples(200 * 128);
  ASSERT_TRUE(jobs_->ReportProgressAsync(later));
  ASSERT_TRUE(jobs_->AwaitProgressReport(absl::Seconds(10)).ok());
  job = jobs_->GetJob(kJob, absl::Seconds(10));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->progress().attempt(), a2);
  EXPECT_DOUBLE_EQ(job->progress().progress_ratio(), 1.0);
  EXPECT_DOUBLE_EQ(job->progress().eta_seconds(), 0.0);

  // A finished run reads complete, and no longer counts workers.
  ASSERT_TRUE(jobs_->Finish(FinishRequest(1, a2), absl::Seconds(10)).ok());
  metrics = HttpGet(metrics_port, "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_NE(metrics->find(absl::StrCat("ember_job_workers", label, " 0")), std::string::npos)
      << *metrics;
  EXPECT_NE(metrics->find(absl::StrCat("ember_job_examples_per_second", label, " 0")),
            std::string::npos)
      << *metrics;

  // A new run has no progress until its rank 0 reports.
  ASSERT_TRUE(jobs_->Join(JoinRequest(2, 0), wait_).ok());
  job = jobs_->GetJob(kJob, absl::Seconds(10));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_FALSE(job->has_progress());
}

// Jobs with tables of their own (JoinJobRequest.own_tables) start beside a running job
// on the shared tables, and beside each other; each is told its store; a worker that
// disagrees with its run about it is refused; a new run of such a job on a store that
// holds an earlier run's rows says what it does with them.
TEST_F(JobClientTest, JobsWithTablesOfTheirOwnRunBesideOthers) {
  const uint64_t a1 = StartAndJoin({absl::StrCat("--checkpoint_dir=", dir_.path(), "/ckpt")});
  ASSERT_NE(a1, 0u);  // finish-test runs on the shared tables
  v1::JoinJobRequest own = JoinRequest(1, 0);
  own.set_job("own-a");
  own.set_own_tables(true);
  own.clear_rows();  // the job's first run: its store is new
  absl::StatusOr<v1::JoinJobResponse> a = jobs_->Join(own, wait_);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->tables_job(), "own-a");
  own.set_job("own-b");
  absl::StatusOr<v1::JoinJobResponse> b = jobs_->Join(own, wait_);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->tables_job(), "own-b");
  EXPECT_NE(b->attempt(), a->attempt());
  for (const char* job : {kJob, "own-a", "own-b"}) {
    absl::StatusOr<v1::GetJobResponse> described = jobs_->GetJob(job, absl::Seconds(10));
    ASSERT_TRUE(described.ok()) << described.status();
    EXPECT_EQ(described->phase(), v1::GetJobResponse::RUNNING) << job;
  }

  // A second worker of own-a's run on the shared tables is refused, naming both.
  v1::JoinJobRequest shared_worker = own;
  shared_worker.set_job("own-a");
  shared_worker.set_own_tables(false);
  shared_worker.set_world_size(1);
  absl::StatusOr<v1::JoinJobResponse> mismatch = jobs_->Join(shared_worker, wait_);
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kInvalidArgument) << mismatch.status();
  EXPECT_THAT(std::string(mismatch.status().message()),
              ::testing::HasSubstr("runs on tables of its own"));

  // own-a's run finishes; its next run says what it does with the job's rows.
  v1::FinishJobRequest finish;
  finish.set_job("own-a");
  finish.set_generation(1);
  finish.set_attempt(a->attempt());
  ASSERT_TRUE(jobs_->Finish(finish, absl::Seconds(10)).ok());
  v1::JoinJobRequest next = own;
  next.set_job("own-a");
  next.set_generation(2);
  absl::StatusOr<v1::JoinJobResponse> unsaid = jobs_->Join(next, wait_);
  EXPECT_EQ(unsaid.status().code(), absl::StatusCode::kFailedPrecondition) << unsaid.status();
  EXPECT_THAT(std::string(unsaid.status().message()), ::testing::HasSubstr("--rows=fresh"));
  next.set_rows(v1::JoinJobRequest::START_ROWS_FRESH);
  absl::StatusOr<v1::JoinJobResponse> fresh = jobs_->Join(next, wait_);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(fresh->tables_job(), "own-a");
}

}  // namespace
}  // namespace ember::worker
