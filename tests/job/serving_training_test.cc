// Copyright 2026 The Ember Authors.
//
// ember-serving followers under a real training job (2 workers, 2 PS shards, a
// checkpoint every 20 steps): after the job stops, every follower's rows equal the PS
// rows (row count and digest per table: no lost, extra or stale rows). Pins the
// follower's behaviour under faults:
//  * a follower started before any checkpoint follows from version 0; one started
//    mid-job bootstraps from a checkpoint; a follower SIGKILLed mid-stream resumes from
//    its persisted positions without a new bootstrap;
//  * a PS shard SIGKILLed mid-job (the job rolls back to its newest checkpoint): the
//    follower's position is no longer on the shard's history, it re-bootstraps from a
//    checkpoint and still ends equal to the PS;
//  * an operator's restore of an older checkpoint of the stopped job: the follower
//    bootstraps from the restored cut, not from the newest checkpoint (whose history
//    the shards no longer have), and ends equal to the PS in a few bootstraps;
//  * model versions: the served dense tower is a checkpoint's (byte for byte), follows
//    newer checkpoints, and a pin holds it; with --max_staleness_steps the applied rows
//    are never trained more than that many steps past the served dense tower;
//  * a job with tables of its own: followers started before it and from its
//    checkpoint follow the job's store, through a slot move of 2048 slots mid-job (the
//    move carries the job's store; the target's stream resyncs the slots), and end
//    equal to the job's rows.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ember/v1/admin.grpc.pb.h"
#include "ember/v1/ps.grpc.pb.h"
#include "ember/v1/serving.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "server/checkpoint/checkpoint_catalog.h"
#include "tests/job/job_cluster.h"
#include "tests/serving/serving_client.h"
#include "tests/support/eventually.h"

namespace ember {
namespace {

// How often the followers' progress is polled.
constexpr absl::Duration kFollowerPoll = absl::Milliseconds(50);
constexpr char kToken[] = "serving-training-token";

using Digests = TableDigests;

std::chrono::system_clock::time_point In(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

class ServingTrainingTest : public JobClusterTest {
 protected:
  static void SetUpTestSuite() { GenerateData("ember-serving-training"); }
  static void TearDownTestSuite() { TearDownData(); }

  std::unique_ptr<Process> StartServing(Cluster& c, const std::string& name,
                                        const std::vector<std::string>& extra = {}) {
    return ember::StartServing(c.address_, c.ckpt_, c.dir_ + "/" + name, /*persist_ms=*/200, extra);
  }
  static std::unique_ptr<v1::ServingService::Stub> Stub(const Process& p) { return ServingStub(p); }
  static v1::ServingStatus Status(v1::ServingService::Stub& stub) { return ServingStatusOf(stub); }

  static std::unique_ptr<v1::PsService::Stub> ShardStub(const Cluster& c, int shard) {
    return v1::PsService::NewStub(
        grpc::CreateChannel(c.shard(shard)->ready_text(), grpc::InsecureChannelCredentials()));
  }

  // Every shard's newest version (of `job`'s store: "" the shared one) equals the
  // follower's position on it.
  static bool CaughtUp(const Cluster& c, v1::ServingService::Stub& stub,
                       const std::string& job = "") {
    const v1::ServingStatus status = Status(stub);
    if (!status.ready() || status.shards_size() != c.shard_count()) return false;
    for (const v1::ShardFollowState& s : status.shards()) {
      grpc::ClientContext context;
      context.set_deadline(In(5));
      v1::GetShardInfoResponse info;
      v1::GetShardInfoRequest request;
      request.set_job(job);
      if (!ShardStub(c, static_cast<int>(s.shard_id()))
               ->GetShardInfo(&context, request, &info)
               .ok() ||
          info.version() != s.applied_version()) {
        return false;
      }
    }
    return true;
  }

  // table -> (rows, digest) summed over the shards (digests add up mod 2^64).
  static Digests ShardDigests(const Cluster& c, const std::string& job = "") {
    Digests out;
    for (int i = 0; i < c.shard_count(); ++i) {
      grpc::ClientContext context;
      context.set_deadline(In(30));
      v1::ChecksumRequest request;
      request.set_job(job);
      v1::ChecksumResponse response;
      const grpc::Status status = ShardStub(c, i)->Checksum(&context, request, &response);
      EXPECT_TRUE(status.ok()) << status.error_message();
      for (const auto& t : response.tables()) {
        out[t.table()].first += t.rows();
        out[t.table()].second += t.digest();
      }
    }
    return out;
  }

  static Digests FollowerDigests(v1::ServingService::Stub& stub) { return ServingDigests(stub); }

  // An AdminService call of the coordinator (started with --admin_token=kToken).
  template <typename Request, typename Response, typename Method>
  static grpc::Status Admin(const Cluster& c, Method method, const Request& request,
                            Response* response) {
    auto admin = v1::AdminService::NewStub(
        grpc::CreateChannel(c.address_, grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.AddMetadata("ember-admin-token", kToken);
    context.set_deadline(In(30));
    return (admin.get()->*method)(&context, request, response);
  }

  // Waits for the follower to catch up with the stopped job, then compares its rows.
  static void ExpectEqualToPs(const Cluster& c, v1::ServingService::Stub& stub,
                              const std::string& job = "") {
    ASSERT_TRUE(
        Eventually([&] { return CaughtUp(c, stub, job); }, absl::Seconds(60), kFollowerPoll))
        << Status(stub).DebugString();
    const Digests ps = ShardDigests(c, job);
    ASSERT_FALSE(ps.empty());
    EXPECT_EQ(FollowerDigests(stub), ps);
  }
};

TEST_F(ServingTrainingTest, FollowersEndEqualToThePsAndAKilledFollowerResumes) {
  std::unique_ptr<Cluster> c = NewCluster("followers");
  ASSERT_NO_FATAL_FAILURE(c->StartCoordinator(2));
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(c->StartShard(i));
  // Before any checkpoint: follows every shard from version 0.
  std::unique_ptr<Process> early = StartServing(*c, "early");
  ASSERT_NE(early, nullptr);
  for (int r = 0; r < kWorkers; ++r) ASSERT_NO_FATAL_FAILURE(c->StartWorker(r, Flags()));
  // Never applies a row trained more than 20 steps past its dense tower's checkpoint.
  std::unique_ptr<Process> bounded = StartServing(*c, "bounded", {"--max_staleness_steps=20"});
  ASSERT_NE(bounded, nullptr);
  auto bounded_stub = Stub(*bounded);
  int bound_checks = 0;
  std::unique_ptr<Process> late;
  bool killed = false;
  const std::string result = c->Finish([&](absl::Duration) {
    const v1::ModelVersion version = Status(*bounded_stub).version();
    if (!version.checkpoint().empty()) {
      EXPECT_LE(version.sparse_step(), version.dense_step() + 20) << version.DebugString();
      ++bound_checks;
    }
    const uint64_t step = c->NewestCheckpointStep();
    if (late == nullptr && step >= 40) late = StartServing(*c, "late");
    if (!killed && step >= 100) {
      ASSERT_TRUE(early->Kill().ok());
      early = StartServing(*c, "early");
      killed = true;
    }
  });
  ASSERT_TRUE(killed);
  ASSERT_NE(late, nullptr);
  EXPECT_EQ(JsonValue(result, "steps"), absl::StrCat(kSteps)) << result;
  auto early_stub = Stub(*early);
  auto late_stub = Stub(*late);
  ASSERT_NO_FATAL_FAILURE(ExpectEqualToPs(*c, *early_stub));
  ASSERT_NO_FATAL_FAILURE(ExpectEqualToPs(*c, *late_stub));
  // The job's last checkpoint is at its last step: the bounded follower ends equal too.
  EXPECT_GT(bound_checks, 0);
  ASSERT_NO_FATAL_FAILURE(ExpectEqualToPs(*c, *bounded_stub));
  const v1::ServingStatus early_status = Status(*early_stub);
  const v1::ServingStatus late_status = Status(*late_stub);
  EXPECT_EQ(early_status.bootstraps(), 0u) << "the restarted follower resumed its positions";
  EXPECT_EQ(early_status.bootstrap_checkpoint(), "");
  EXPECT_NE(late_status.bootstrap_checkpoint(), "") << "the late follower imported a checkpoint";
  uint64_t follower_rows = 0;
  for (const auto& [table, sum] : FollowerDigests(*late_stub)) follower_rows += sum.first;
  EXPECT_EQ(JsonValue(result, "sparse_rows"), absl::StrCat(follower_rows));

  // Model versions: the newest checkpoint's dense tower, byte for byte; a pin holds an
  // older one; unpinning returns to the newest.
  CheckpointCatalog catalog(c->ckpt_);
  const std::vector<std::string> names = c->CommittedCheckpoints();
  ASSERT_GE(names.size(), 2u);
  auto dense_of = [&](const std::string& name) {
    absl::StatusOr<v1::CheckpointManifest> manifest = catalog.ReadManifest("quickstart", name);
    EXPECT_TRUE(manifest.ok()) << manifest.status();
    absl::StatusOr<v1::WorkerState> state = catalog.ReadWorkerState(*manifest);
    EXPECT_TRUE(state.ok()) << state.status();
    return state.ok() ? state->dense_parameters() : "";
  };
  auto served = [&](v1::GetDenseParametersResponse* dense) {
    grpc::ClientContext context;
    context.set_deadline(In(5));
    return late_stub->GetDenseParameters(&context, {}, dense);
  };
  ASSERT_TRUE(Eventually(
      [&] {
        v1::GetDenseParametersResponse dense;
        return served(&dense).ok() && dense.version().checkpoint() == names.back();
      },
      absl::Seconds(10), kFollowerPoll));
  v1::GetDenseParametersResponse dense;
  ASSERT_TRUE(served(&dense).ok());
  EXPECT_EQ(dense.dense_parameters(), dense_of(names.back()));
  {
    grpc::ClientContext context;
    context.set_deadline(In(10));
    v1::PinModelVersionRequest pin;
    pin.set_checkpoint(names.front());
    v1::PinModelVersionResponse pinned;
    const grpc::Status status = late_stub->PinModelVersion(&context, pin, &pinned);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_TRUE(pinned.current().pinned());
    EXPECT_EQ(pinned.current().checkpoint(), names.front());
  }
  ASSERT_TRUE(served(&dense).ok());
  EXPECT_EQ(dense.version().checkpoint(), names.front());
  EXPECT_EQ(dense.dense_parameters(), dense_of(names.front()));
  {
    grpc::ClientContext context;
    context.set_deadline(In(10));
    v1::PinModelVersionRequest unpin;
    unpin.set_checkpoint("latest");
    v1::PinModelVersionResponse current;
    ASSERT_TRUE(late_stub->PinModelVersion(&context, unpin, &current).ok());
    EXPECT_FALSE(current.current().pinned());
    EXPECT_EQ(current.current().checkpoint(), names.back());
  }
}

// A job with tables of its own (--own_tables): followers read its store on the shards
// (its streams and tables). One started before the job (following the shared store, as
// far as it knew) bootstraps onto the job's store once the coordinator's run says so;
// one started mid-job bootstraps from the job's checkpoint; both end equal to the job's
// rows, and the shared store holds none of them.
TEST_F(ServingTrainingTest, FollowersOfAJobWithTablesOfItsOwnEndEqualToItsRows) {
  std::unique_ptr<Cluster> c = NewCluster("own-tables");
  ASSERT_NO_FATAL_FAILURE(c->StartCoordinator(2, {absl::StrCat("--admin_token=", kToken)}));
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(c->StartShard(i));
  std::unique_ptr<Process> early = StartServing(*c, "early");
  ASSERT_NE(early, nullptr);
  std::vector<std::string> flags = Flags();
  flags.push_back("--own_tables");
  for (int r = 0; r < kWorkers; ++r) ASSERT_NO_FATAL_FAILURE(c->StartWorker(r, flags));
  std::unique_ptr<Process> late;
  std::string move_op;
  const std::string result = c->Finish([&](absl::Duration) {
    const uint64_t step = c->NewestCheckpointStep();
    if (late == nullptr && step >= 40) late = StartServing(*c, "late");
    if (move_op.empty() && step >= 60) {
      // 2048 of shard 0's slots move to shard 1 while the job trains: both followers
      // get the job store's rows of those slots from shard 1's stream (a resync).
      v1::StartMigrationRequest start;
      v1::SlotMove* move = start.mutable_spec()->add_moves();
      move->set_source(0);
      move->set_target(1);
      move->add_ranges()->set_first(0);  // shard 0 owns the lowest slots (SlotMap::Even)
      move->mutable_ranges(0)->set_last(2047);
      v1::Migration op;
      const grpc::Status s = Admin(*c, &v1::AdminService::Stub::StartMigration, start, &op);
      ASSERT_TRUE(s.ok()) << s.error_message();
      move_op = op.op_id();
    }
  });
  ASSERT_NE(late, nullptr);
  ASSERT_FALSE(move_op.empty()) << "the job ended before the move";
  EXPECT_EQ(JsonValue(result, "steps"), absl::StrCat(kSteps)) << result;
  v1::Migration moved;
  ASSERT_TRUE(Eventually(
      [&] {
        v1::GetMigrationRequest get;
        get.set_op_id(move_op);
        return Admin(*c, &v1::AdminService::Stub::GetMigration, get, &moved).ok() &&
               (moved.phase() == v1::Migration::DONE || moved.phase() == v1::Migration::FAILED);
      },
      absl::Seconds(60), kFollowerPoll));
  ASSERT_EQ(moved.phase(), v1::Migration::DONE) << moved.error();
  EXPECT_GT(moved.rows_copied(), 0u) << "the job's rows moved";
  auto early_stub = Stub(*early);
  auto late_stub = Stub(*late);
  ASSERT_NO_FATAL_FAILURE(ExpectEqualToPs(*c, *early_stub, "quickstart"));
  ASSERT_NO_FATAL_FAILURE(ExpectEqualToPs(*c, *late_stub, "quickstart"));
  uint64_t follower_rows = 0;
  for (const auto& [table, sum] : FollowerDigests(*late_stub)) follower_rows += sum.first;
  EXPECT_EQ(JsonValue(result, "sparse_rows"), absl::StrCat(follower_rows));
  EXPECT_TRUE(ShardDigests(*c).empty()) << "the shared store has no table of the job";
  EXPECT_GE(Status(*early_stub).bootstraps(), 2u) << "the early follower moved to the job's store";
}

TEST_F(ServingTrainingTest, AFollowerOfAKilledShardReBootstrapsAndEndsEqual) {
  std::unique_ptr<Cluster> c = NewCluster("ps-kill");
  ASSERT_NO_FATAL_FAILURE(c->StartCoordinator(2));
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(c->StartShard(i));
  for (int r = 0; r < kWorkers; ++r) ASSERT_NO_FATAL_FAILURE(c->StartWorker(r, Flags()));
  std::unique_ptr<Process> follower;
  bool killed = false;
  const std::string result = c->Finish([&](absl::Duration) {
    const uint64_t step = c->NewestCheckpointStep();
    if (follower == nullptr && step >= 20) follower = StartServing(*c, "f");
    if (!killed && step >= 100) {
      // Kill() reaps the process: the supervisor's restart happens here.
      ASSERT_TRUE(c->shard(0)->Kill().ok());
      ASSERT_NO_FATAL_FAILURE(c->StartShard(0));
      ++c->restarts_;
      killed = true;
    }
  });
  ASSERT_TRUE(killed);
  ASSERT_NE(follower, nullptr);
  EXPECT_EQ(JsonValue(result, "steps"), absl::StrCat(kSteps)) << result;
  auto stub = Stub(*follower);
  ASSERT_NO_FATAL_FAILURE(ExpectEqualToPs(*c, *stub));
  const v1::ServingStatus status = Status(*stub);
  EXPECT_GE(status.bootstraps(), 2u) << status.DebugString();
}

TEST_F(ServingTrainingTest, AFollowerFollowsAnOperatorsRestoreOfAnOlderCheckpoint) {
  std::unique_ptr<Cluster> c = NewCluster("restore");
  ASSERT_NO_FATAL_FAILURE(c->StartCoordinator(2, {absl::StrCat("--admin_token=", kToken)}));
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(c->StartShard(i));
  for (int r = 0; r < kWorkers; ++r) ASSERT_NO_FATAL_FAILURE(c->StartWorker(r, Flags()));
  std::unique_ptr<Process> follower;
  const std::string result = c->Finish([&](absl::Duration) {
    if (follower == nullptr && c->NewestCheckpointStep() >= 20) follower = StartServing(*c, "f");
  });
  ASSERT_NE(follower, nullptr);
  EXPECT_EQ(JsonValue(result, "steps"), absl::StrCat(kSteps)) << result;
  auto stub = Stub(*follower);
  ASSERT_NO_FATAL_FAILURE(ExpectEqualToPs(*c, *stub));
  const std::vector<std::string> names = c->CommittedCheckpoints();
  ASSERT_GE(names.size(), 2u);

  // A finished job has no worker left to take a checkpoint: refused, not queued.
  v1::RequestCheckpointRequest ask;
  ask.set_job("quickstart");
  v1::RequestCheckpointResponse asked;
  grpc::Status s = Admin(*c, &v1::AdminService::Stub::RequestCheckpoint, ask, &asked);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("FINISHED"), std::string::npos) << s.error_message();

  // Restores the job's shards to `name`; the follower ends equal to the PS, bootstrapped
  // from `name`, within a few bootstraps.
  auto restore_and_follow = [&](const std::string& name) {
    const uint64_t bootstraps = Status(*stub).bootstraps();
    v1::RestoreCheckpointRequest restore;
    restore.set_job("quickstart");
    restore.set_name(name);
    v1::RestoreCheckpointResponse restored;
    const grpc::Status r =
        Admin(*c, &v1::AdminService::Stub::RestoreCheckpoint, restore, &restored);
    ASSERT_TRUE(r.ok()) << r.error_message();
    // The job's record says what its shards hold now (emberctl status shows it).
    v1::ListJobsResponse jobs;
    ASSERT_TRUE(Admin(*c, &v1::AdminService::Stub::ListJobs, v1::ListJobsRequest(), &jobs).ok());
    ASSERT_EQ(jobs.jobs_size(), 1);
    EXPECT_EQ(jobs.jobs(0).attempt(), restored.attempt());
    EXPECT_EQ(jobs.jobs(0).restored_from(), name);
    ASSERT_TRUE(Eventually(
        [&] {
          const v1::ServingStatus status = Status(*stub);
          return status.bootstraps() > bootstraps && status.bootstrap_checkpoint() == name &&
                 CaughtUp(*c, *stub);
        },
        absl::Seconds(60), kFollowerPoll))
        << Status(*stub).DebugString();
    ASSERT_NO_FATAL_FAILURE(ExpectEqualToPs(*c, *stub));
    const v1::ServingStatus status = Status(*stub);
    EXPECT_LE(status.bootstraps(), bootstraps + 3) << status.DebugString();
    for (const v1::ShardFollowState& shard : status.shards()) {
      EXPECT_TRUE(shard.connected()) << shard.DebugString();
      EXPECT_EQ(shard.last_error(), "") << "a working stream shows no old error";
    }
  };
  ASSERT_NO_FATAL_FAILURE(restore_and_follow(names.front()));
  // And back to the newest: every shard's stream reconnects.
  ASSERT_NO_FATAL_FAILURE(restore_and_follow(names.back()));
}

}  // namespace
}  // namespace ember
