// Copyright 2026 The Ember Authors.
//
// emberctl's commands that change the cluster or read what the coordinator's admin
// side keeps (admin.proto): slot moves and migrations (follow, detach, Ctrl-C, cancel),
// rebalance plans, drain and remove, table creation, jobs and shard stats in `status`,
// checkpoints. Each asserts what the protos define.

#include <signal.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/deadline.h"
#include "tests/tools/emberctl_fixture.h"

namespace ember {
namespace {

// The op id in the JSON of a migration.
std::string OpId(const std::string& json) {
  const size_t at = json.find("\"op_id\":\"");
  if (at == std::string::npos) return "";
  return json.substr(at + 9, json.find('"', at + 9) - at - 9);
}

TEST_F(EmberctlAdminTest, SlotsMoveRunsToDoneAndKeepsRows) {
  const auto before = ShardDigests();
  CtlResult r = Ctl({"slots", "move", "--slots=0-99", "--to=1"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StartsWith(r.out, "move 100 slots 0 -> 1: 0-99\nmigration ")) << r;
  EXPECT_TRUE(absl::StrContains(r.out, " DONE: slots move\n")) << r;
  EXPECT_TRUE(absl::StrContains(r.out, "  moves         1/1\n")) << r;
  r = Ctl({"slots", "show"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StrContains(r.out,
                                "SHARD  SLOTS  RANGES\n"
                                "0      8092   100-8191\n"
                                "1      8292   0-99,8192-16383\n"))
      << r.out;
  EXPECT_EQ(ShardDigests(), before) << "a slot move changed rows";
  r = Ctl({"--json", "slots", "move", "--slots=100-199", "--to=1"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(IsJsonObject(r.out)) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"phase\":\"DONE\"")) << r.out;

  // The migrations it left behind.
  r = Ctl({"migrations", "list"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StartsWith(r.out, "OP  ") || absl::StartsWith(r.out, "OP ")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "DONE")) << r.out;
  r = Ctl({"--json", "migrations", "show"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StrContains(r.out, "\"phase\":\"DONE\"")) << r.out;
  const std::string op = OpId(r.out);
  ASSERT_NE(op, "") << r.out;
  r = Ctl({"migrations", "wait", op});
  EXPECT_EQ(r.exit_code, 0) << r;
  r = Ctl({"migrations", "resume", op});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(absl::StrContains(r.err, "FAILED_PRECONDITION: migration " + op + " is DONE")) << r;
  r = Ctl({"migrations", "cancel", op});  // finished: returned as is
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StrContains(r.out, "DONE")) << r;
}

TEST_F(EmberctlAdminTest, CtrlCStopsFollowingNotTheMigration) {
  // Enough rows that a throttled move of shard 0's slots takes seconds.
  ASSERT_NO_FATAL_FAILURE(PushRows(1000, 20000));
  const auto before = ShardDigests();
  bool sent = false;
  CtlResult r = Ctl({"slots", "move", "--slots=0-8191", "--to=1", "--bytes_per_sec=100000"},
                    [&](pid_t pid, const std::string& err) {
                      if (!sent && absl::StrContains(err, "Ctrl-C stops following")) {
                        kill(pid, SIGINT);
                        sent = true;
                      }
                    });
  ASSERT_TRUE(sent) << r;
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(absl::StrContains(r.err, "keeps running on the coordinator")) << r;
  const std::string op = Ctl({"--json", "migrations", "show"}).out;
  ASSERT_NE(OpId(op), "") << op;
  r = Ctl({"migrations", "wait", OpId(op)});
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StrContains(r.out, " DONE: slots move\n")) << r;
  EXPECT_TRUE(absl::StrContains(r.err, absl::StrCat("[", OpId(op), "] move ")) &&
              absl::StrContains(r.err, " rows "))
      << "progress lines: " << r;
  r = Ctl({"slots", "show"});
  EXPECT_TRUE(absl::StrContains(r.out, "0      0      -\n1      16384  0-16383\n")) << r.out;
  EXPECT_EQ(ShardDigests(), before);
}

TEST_F(EmberctlAdminTest, AKilledCliRerunAttachesToItsMigrationAndCompletesIt) {
  ASSERT_NO_FATAL_FAILURE(PushRows(1000, 20000));
  const auto before = ShardDigests();
  const std::vector<std::string> command = {"slots", "move", "--slots=0-8191", "--to=1",
                                            "--bytes_per_sec=100000"};
  bool killed = false;
  CtlResult r = Ctl(command, [&](pid_t pid, const std::string& err) {
    // Killed (no chance to clean up) once the copy is under way.
    if (!killed && absl::StrContains(err, " rows ")) {
      kill(pid, SIGKILL);
      killed = true;
    }
  });
  ASSERT_TRUE(killed) << r;
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r;
  const std::string first = OpId(Ctl({"--json", "migrations", "show"}).out);
  ASSERT_NE(first, "");
  // The same command again: it attaches to the running operation (or resumes it),
  // skipping the slots already moved, and follows it to the end.
  r = Ctl(command);
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StrContains(r.out, "DONE")) << r;
  EXPECT_EQ(OpId(Ctl({"--json", "migrations", "show"}).out), first) << "a second operation ran";
  r = Ctl({"slots", "show"});
  EXPECT_TRUE(absl::StrContains(r.out, "0      0      -\n1      16384  0-16383\n")) << r.out;
  EXPECT_EQ(ShardDigests(), before);
}

TEST_F(EmberctlAdminTest, DetachThenCancel) {
  ASSERT_NO_FATAL_FAILURE(PushRows(1000, 20000));
  const auto before = ShardDigests();
  CtlResult r = Ctl(
      {"--json", "slots", "move", "--slots=0-8191", "--to=1", "--bytes_per_sec=50000", "--detach"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(IsJsonObject(r.out)) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"detached\":true")) << r.out;
  const std::string op = OpId(r.out);
  ASSERT_NE(op, "") << r.out;
  r = Ctl({"migrations", "cancel", op});
  EXPECT_EQ(r.exit_code, 0) << r;
  r = Ctl({"migrations", "wait", op});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(absl::StrContains(r.err, "CANCELLED")) << r;
  r = Ctl({"slots", "show"});
  EXPECT_TRUE(absl::StrContains(r.out, "0      8192   0-8191\n1      8192   8192-16383\n"))
      << r.out;
  EXPECT_EQ(ShardDigests(), before);
}

TEST_F(EmberctlAdminTest, MigrationErrors) {
  CtlResult r = Ctl({"migrations", "show"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(absl::StrContains(r.err, "NOT_FOUND")) << r;
  r = Ctl({"migrations", "cancel", "no-such-op"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(absl::StrContains(r.err, "NOT_FOUND")) << r;
  r = Ctl({"migrations", "list"});
  EXPECT_EQ(r.exit_code, 0) << r;
}

TEST_F(EmberctlAdminTest, RebalancePlans) {
  CtlResult r = Ctl({"rebalance", "--by=slots", "--dry_run"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StartsWith(r.out, "plan for epoch 1: balanced, no moves\n")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "max/mean: before 1.00, after 1.00\n")) << r.out;
  // 1000 slots handed to shard 1 (metadata only) unbalance the slot counts.
  for (uint32_t slot = 0; slot < 1000; ++slot) ASSERT_NO_FATAL_FAILURE(SetSlotOwner(slot, 1));
  r = Ctl({"rebalance", "--by=slots", "--dry-run"});  // '-' and '_' are the same
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StrContains(r.out, "MOVE  SOURCE  TARGET  SLOTS")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "dry run: nothing started")) << r.out;
  r = Ctl({"--json", "rebalance", "--by=slots", "--dry_run"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(IsJsonObject(r.out)) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"moves\":[{\"source\":1,\"target\":0,")) << r.out;
  // Planned and run: the slot counts even out.
  r = Ctl({"rebalance", "--by=slots"});
  ASSERT_EQ(r.exit_code, 0) << r;
  r = Ctl({"rebalance", "--by=slots", "--dry_run"});
  EXPECT_TRUE(absl::StrContains(r.out, "balanced, no moves")) << r.out;
}

TEST_F(EmberctlAdminTest, DrainThenRemoveShard) {
  const auto before = ShardDigests();
  CtlResult r = Ctl({"shards", "remove", "--id=1"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(absl::StrContains(r.err, "FAILED_PRECONDITION")) << r;
  r = Ctl({"shards", "drain", "--id=1", "--dry_run"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StrContains(r.out, "1 (drain)")) << r.out;
  r = Ctl({"shards", "drain", "--id=1"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StrContains(r.out, "DONE: drain shard 1")) << r.out;
  r = Ctl({"slots", "show"});
  EXPECT_TRUE(absl::StrContains(r.out, "0      16384  0-16383\n1      0      -\n")) << r.out;
  EXPECT_EQ(ShardDigests(), before);
  r = Ctl({"checksum"});
  EXPECT_EQ(r.exit_code, 0) << r;
  // A running shard registers again: stop it first, as an operator would.
  ASSERT_TRUE(cluster_->shard(1)->Stop(absl::Seconds(10)).ok());
  r = Ctl({"shards", "remove", "--id=1"});
  EXPECT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.out, "removed shard 1\n");
  r = Ctl({"shards", "list"});
  EXPECT_FALSE(absl::StrContains(r.out, ps_address_[1])) << r.out;
}

TEST_F(EmberctlAdminTest, TablesCreate) {
  CtlResult r = Ctl({"tables", "create", "--name=user", "--dim=8", "--optimizer=adagrad",
                     "--learning_rate=0.05", "--seed=7", "--admission_min_count=2"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(
      absl::StartsWith(r.out, "created table user\nname                                user\n"))
      << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "optimizer.kind                      ADAGRAD\n")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "pending shards: none\n")) << r.out;
  const std::string config = dir_ + "/query.pbtxt";
  std::ofstream(config) << "name: \"query\" dim: 2 optimizer { kind: FTRL }\n";
  r = Ctl({"--json", "tables", "create", absl::StrCat("--config=", config)});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(IsJsonObject(r.out)) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"pending_shards\":[]")) << r.out;
  r = Ctl({"tables", "list"});
  EXPECT_EQ(RowOf(r.out, "user"),
            (std::vector<std::string>{"user", "8", "adagrad", "0.05", "7", "2"}))
      << r.out;
  EXPECT_EQ(RowOf(r.out, "query").at(2), "ftrl") << r.out;
}

// Joins job "ctr" (run 1) as its only worker; the attempt's answer.
// Joins job `job` (default "ctr") as its only worker; `own_tables`: with tables of its own.
v1::JoinJobResponse JoinCtr(v1::CoordinatorService::Stub& coordinator,
                            const std::string& job = "ctr", bool own_tables = false) {
  grpc::ClientContext context;
  SetDeadline(&context, absl::Seconds(10));
  v1::JoinJobRequest join;
  join.set_job(job);
  join.set_own_tables(own_tables);
  join.set_generation(1);
  join.set_world_size(1);
  join.set_wait_ms(5000);
  v1::JoinJobResponse joined;
  const grpc::Status s = coordinator.JoinJob(&context, join, &joined);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return joined;
}

TEST_F(EmberctlAdminTest, StatusShowsJobsAndShardStats) {
  ASSERT_NE(JoinCtr(*coordinator_stub_).attempt(), 0u);
  CtlResult r = Ctl({"status", "--sample_ms=0"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StrContains(r.out, "JOB  PHASE")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\nctr  ")) << r.out;
  r = Ctl({"--json", "status", "--sample_ms=0"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StrContains(r.out, "\"jobs\":[{\"job\":\"ctr\",")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"jobs_error\":null")) << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, "\"requests\":0,")) << "the pushes count: " << r.out;
}

TEST_F(EmberctlAdminTest, JobsListAndDescribeShowProgress) {
  const v1::JoinJobResponse joined = JoinCtr(*coordinator_stub_);
  ASSERT_NE(joined.attempt(), 0u);
  // Before rank 0 reports: the job, with no progress.
  CtlResult r = Ctl({"jobs", "describe", "ctr"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StrContains(r.out, "progress:          no report yet")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "tables:            shared\n")) << r.out;
  // A job with tables of its own runs beside it, and says where its tables are.
  ASSERT_NE(JoinCtr(*coordinator_stub_, "ctr-own", /*own_tables=*/true).attempt(), 0u);
  r = Ctl({"jobs", "describe", "ctr-own"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(
      absl::StrContains(r.out, "tables:            its own (store 'ctr-own' on every shard)"))
      << r.out;
  r = Ctl({"--json", "jobs", "describe", "ctr-own"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StrContains(r.out, "\"tables_job\":\"ctr-own\"")) << r.out;
  // Its store's size over the shards: 3 rows pushed to a table of its own.
  std::unique_ptr<PsClient> own = JobWithItemTable("ctr-own", 4);
  ASSERT_NE(own, nullptr);
  const std::vector<uint64_t> ids = {11, 12, 13};
  ASSERT_TRUE(own->Push("item", ids, std::vector<float>(ids.size() * 4, 1.0f), 1).ok());
  r = Ctl({"jobs", "describe", "ctr-own"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StrContains(r.out, "store size:        "));
  EXPECT_TRUE(absl::StrContains(r.out, " 3 in memory (")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "on 2 of 2 alive shards\n")) << r.out;
  r = Ctl({"jobs", "describe", "ctr"});
  EXPECT_FALSE(absl::StrContains(r.out, "store size:")) << "a job on the shared tables";

  grpc::ClientContext context;
  SetDeadline(&context, absl::Seconds(10));
  v1::ReportProgressRequest report;
  report.set_job("ctr");
  report.set_generation(1);
  report.set_attempt(joined.attempt());
  report.mutable_progress()->set_step(30);
  report.mutable_progress()->set_examples(30 * 100);
  report.mutable_progress()->set_estimated_steps(120);
  report.mutable_progress()->set_examples_per_sec(100);  // 90 steps of 100: 90 s left
  report.mutable_progress()->set_train_loss(0.4321);
  v1::ReportProgressResponse reported;
  ASSERT_TRUE(coordinator_stub_->ReportProgress(&context, report, &reported).ok());

  r = Ctl({"jobs", "list"});
  ASSERT_EQ(r.exit_code, 0) << r;
  const std::vector<std::string> row = RowOf(r.out, "ctr");
  ASSERT_GE(row.size(), 10u) << r.out;
  EXPECT_EQ(row[1], "RUNNING") << r.out;
  EXPECT_EQ(row[4], "30") << r.out;      // STEP
  EXPECT_EQ(row[5], "25.0%") << r.out;   // PROGRESS
  EXPECT_EQ(row[6], "100") << r.out;     // EX/S
  EXPECT_EQ(row[7], "0.4321") << r.out;  // LOSS
  EXPECT_EQ(row[8], "-") << r.out;       // AUC: no evaluation yet
  EXPECT_THAT(row[9], ::testing::MatchesRegex("1m(2[0-9]|30)s")) << r.out;  // ETA
  r = Ctl({"jobs", "describe", "ctr"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StrContains(r.out, "step:              30 of about 120")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "test AUC:          -")) << r.out;
  r = Ctl({"--json", "jobs", "describe", "ctr"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(IsJsonObject(r.out)) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"progress_ratio\":0.25")) << r.out;
  r = Ctl({"--json", "jobs", "list"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StrContains(r.out, "{\"jobs\":[{\"job\":\"ctr\",")) << r.out;

  // Usage and lookup errors.
  r = Ctl({"jobs", "describe"});
  EXPECT_EQ(r.exit_code, 2) << r;
  r = Ctl({"jobs", "describe", "nope"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(absl::StrContains(r.err, "NOT_FOUND")) << r;
}

TEST_F(EmberctlAdminTest, Checkpoints) {
  // The coordinator runs without --checkpoint_dir.
  CtlResult r = Ctl({"checkpoint", "list", "--job=ctr"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(absl::StrContains(r.err, "FAILED_PRECONDITION")) << r;
  r = Ctl({"checkpoint", "restore", "--job=ctr"});
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_FALSE(absl::StrContains(r.err, "UNIMPLEMENTED")) << r;
}

}  // namespace
}  // namespace ember
