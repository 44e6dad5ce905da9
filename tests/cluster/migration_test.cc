// Copyright 2026 The Ember Authors.
//
// Online slot migration between real processes on loopback: ember-coordinator (the
// SlotMigrator) and two ember-ps shards with rows, driven through AdminService the
// way emberctl drives it (server/coordinator/slot_migrator.h has the protocol).
//
// Pinned here:
//  - a move keeps every row bit for bit (embedding, optimizer state, meta: checksums
//    equal the oracle taken before), gives every slot exactly one owner and leaves no
//    row of a moved slot on the source;
//  - pushes running during a move are applied exactly once, none fails (exact
//    dyadic arithmetic makes the expected rows known);
//  - a kill of the source, the target or the coordinator at each phase (test hooks),
//    followed by restarts and, where the operation stopped, a re-run of the same
//    request, ends with the same outcome;
//  - the same request attaches to a running operation; cancel rolls back cleanly;
//  - shards started with the admin token refuse migration, checkpoint and restore
//    calls without it, while the coordinator (same token) still migrates;
//  - a move carries every job's own store with the shared one (docs/ARCHITECTURE.md
//    "Several jobs per PS cluster": the fixture's job ctr-f has rows in every case, the
//    kill matrix included), and a restore of any store during the copy starts it over.

#include "tests/cluster/migration_fixture.h"

namespace ember {
namespace {

TEST_F(MigrationTest, AMoveKeepsEveryRowAndLeavesNothingBehind) {
  ASSERT_NO_FATAL_FAILURE(StartCluster());
  const std::vector<uint64_t> ids = Ids();
  std::vector<float> before(ids.size() * kDim);
  ASSERT_TRUE(client_->Pull("item", ids, absl::MakeSpan(before)).ok());
  const v1::MigrationSpec spec = MoveSpec(0, 4096);
  const v1::Migration op = WaitForEnd(Start(spec).op_id());
  ASSERT_EQ(op.phase(), v1::Migration::DONE) << op.error();
  EXPECT_EQ(op.moves_done(), 4u);  // split into moves of 1024 slots
  EXPECT_GT(op.rows_copied(), 0u);
  EXPECT_GT(op.epoch_after(), op.epoch_before());
  ExpectMoved(op.spec());
  std::vector<float> after(ids.size() * kDim);
  ASSERT_TRUE(client_->Pull("item", ids, absl::MakeSpan(after)).ok());
  EXPECT_EQ(before, after);
}

TEST_F(MigrationTest, AMigrationStartsAsSoonAsThePreviousReadsDone) {
  // The coordinator publishes DONE a little before its migration thread exits; a start
  // in between (a script that moves slots back and forth) must not be told that the
  // finished migration "is running" (ember-bench rebalance hit this on 2026-12-06).
  ASSERT_NO_FATAL_FAILURE(StartCluster());
  for (int round = 0; round < 6; ++round) {
    const v1::Migration started = Start(MoveSpec(round % 2, 64));
    ASSERT_FALSE(started.op_id().empty()) << "round " << round;
    const v1::Migration op = WaitForEnd(started.op_id());
    ASSERT_EQ(op.phase(), v1::Migration::DONE) << "round " << round << ": " << op.error();
  }
}

TEST_F(MigrationTest, PushesDuringAMoveAreAppliedExactlyOnce) {
  ASSERT_NO_FATAL_FAILURE(StartCluster());
  const std::vector<uint64_t> ids = Ids();
  // The rows before any push (the deterministic init vectors).
  std::vector<float> base(ids.size() * kDim);
  ASSERT_TRUE(client_->Pull("exact", ids, absl::MakeSpan(base)).ok());
  std::atomic<int> rounds{0};
  std::atomic<int64_t> longest_micros{0};
  absl::Status failure;
  pushing_ = true;
  pusher_ = std::thread([&] {
    // Dyadic gradients and learning rate: every SGD step is exact in float, so the
    // final rows are known whatever the timing.
    const std::vector<float> grads(ids.size() * kDim, 0.25f);
    while (pushing_) {
      const absl::Time start = absl::Now();
      absl::Status s = client_->Push("exact", ids, grads, rounds + 1);
      const int64_t micros = absl::ToInt64Microseconds(absl::Now() - start);
      if (micros > longest_micros) longest_micros = micros;
      if (!s.ok()) {
        failure = s;
        return;
      }
      ++rounds;
    }
  });
  ASSERT_TRUE(Eventually([&] { return rounds > 2; }, kWaitBound));
  const v1::Migration op = WaitForEnd(Start(MoveSpec(1, 4096)).op_id());
  ASSERT_TRUE(Eventually([&] { return rounds > 4; }, kWaitBound));
  pushing_ = false;
  pusher_.join();
  ASSERT_TRUE(failure.ok()) << failure;
  ASSERT_EQ(op.phase(), v1::Migration::DONE) << op.error();
  std::cerr << "pushes during the move: " << rounds << " rounds, longest call "
            << longest_micros / 1000.0 << " ms, longest fence " << op.max_fence_ms() << " ms"
            << std::endl;
  ExpectPushedExactly(ids, base, rounds);
  ExpectMoved(op.spec());
}

TEST_F(MigrationTest, TheSameRequestAttachesAndCancelRollsBack) {
  ASSERT_NO_FATAL_FAILURE(StartCluster());
  // Throttled to a crawl: the operation is still copying when it is cancelled.
  const v1::MigrationSpec slow = MoveSpec(0, 2048, /*bytes_per_sec=*/20000);
  const v1::Migration first = Start(slow);
  const v1::Migration again = Start(slow);
  EXPECT_EQ(first.op_id(), again.op_id());
  v1::StartMigrationRequest other;
  *other.mutable_spec() = MoveSpec(1, 10);
  v1::Migration refused;
  EXPECT_EQ(Call(admin_.get(), &v1::AdminService::Stub::StartMigration, other, &refused, true)
                .error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  v1::CancelMigrationRequest cancel;
  cancel.set_op_id(first.op_id());
  v1::Migration cancelled;
  ASSERT_TRUE(
      Call(admin_.get(), &v1::AdminService::Stub::CancelMigration, cancel, &cancelled, true).ok());
  const v1::Migration op = WaitForEnd(first.op_id());
  ASSERT_EQ(op.phase(), v1::Migration::CANCELLED);
  // Nothing moved, nothing left on the target, the digests unchanged.
  const v1::GetClusterMapResponse map = Map();
  absl::StatusOr<std::vector<uint32_t>> slots = FromRanges(slow.moves(0).ranges());
  ASSERT_TRUE(slots.ok());
  for (uint32_t slot : *slots) ASSERT_EQ(OwnerOf(map, slot), 0u);
  const Digest now = Checksums();
  EXPECT_EQ(now.rows, oracle_.rows);
  EXPECT_EQ(now.digest, oracle_.digest);
  // A new request after the cancel runs to its end.
  const v1::Migration done = WaitForEnd(Start(MoveSpec(0, 2048)).op_id());
  ASSERT_EQ(done.phase(), v1::Migration::DONE) << done.error();
  ExpectMoved(done.spec());
}

TEST_F(MigrationTest, AMoveCarriesEveryJobsStoreAndARestoreOfAnyStoreStartsTheCopyOver) {
  ASSERT_NO_FATAL_FAILURE(StartCluster());
  // Job ctr-a's own "item" table (the shared one's name), with other rows.
  PsClientOptions options;
  options.coordinator_address = address_;
  options.worker_id = 2;
  options.max_retries = 12;
  options.job = "ctr-a";
  absl::StatusOr<std::unique_ptr<PsClient>> job = PsClient::Create(options);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE((*job)->CreateTableEverywhere(Table("item", v1::OptimizerConfig::ADAGRAD)).ok());
  const std::vector<uint64_t> ids = Ids();
  std::vector<float> grads(ids.size() * kDim);
  for (size_t k = 0; k < grads.size(); ++k) grads[k] = 0.03f * static_cast<float>(k % 7 + 1);
  ASSERT_TRUE((*job)->Push("item", ids, grads, 1).ok());
  const Digest job_before = Checksums("ctr-a");
  ASSERT_EQ(job_before.rows, static_cast<uint64_t>(kIds));
  ASSERT_NE(job_before.digest, oracle_.digest);
  std::vector<float> rows_before(ids.size() * kDim);
  ASSERT_TRUE((*job)->Pull("item", ids, absl::MakeSpan(rows_before)).ok());

  // Throttled: still copying when another job's store on the source is restored (a
  // fresh start of job ctr-b), which the copy must not outlive.
  const v1::Migration started = Start(MoveSpec(0, 4096, /*bytes_per_sec=*/100000));
  ASSERT_TRUE(Eventually(
      [&] {
        v1::GetMigrationRequest get;
        get.set_op_id(started.op_id());
        v1::Migration op;
        return Call(admin_.get(), &v1::AdminService::Stub::GetMigration, get, &op, true).ok() &&
               op.phase() == v1::Migration::COPYING && op.rows_copied() > 0;
      },
      kWaitBound));
  const v1::GetClusterMapResponse map = Map();
  v1::RestoreShardRequest restore;
  restore.set_job("ctr-b");
  restore.set_attempt(1);
  restore.set_clear(true);
  restore.set_epoch(map.epoch());
  restore.set_slot_owners(map.slot_owners());
  v1::RestoreShardResponse restored;
  const grpc::Status s =
      Call(ps_stub_[0].get(), &v1::PsService::Stub::RestoreShard, restore, &restored);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const v1::Migration op = WaitForEnd(started.op_id());
  ASSERT_EQ(op.phase(), v1::Migration::DONE) << op.error();
  EXPECT_GE(op.restarts(), 1u) << "the copy went on past a restore";
  // Both stores moved whole: no row left on the source (GetSlotStats counts every
  // store), the digests and the job's rows as before.
  ExpectMoved(op.spec());
  const Digest job_after = Checksums("ctr-a");
  EXPECT_EQ(job_after.rows, job_before.rows);
  EXPECT_EQ(job_after.digest, job_before.digest);
  std::vector<float> rows_after(ids.size() * kDim);
  ASSERT_TRUE((*job)->Pull("item", ids, absl::MakeSpan(rows_after)).ok());
  EXPECT_EQ(rows_after, rows_before);
}

TEST_F(MigrationTest, ShardsWithATokenRefuseMigrationCallsWithoutIt) {
  const std::string token = absl::StrCat("--admin_token=", kToken);
  ASSERT_NO_FATAL_FAILURE(StartCluster({}, {{token}, {token}}));
  v1::DropSlotsRequest drop;
  v1::SlotRange* range = drop.add_ranges();
  range->set_first(0);
  range->set_last(kNumSlots - 1);
  v1::DropSlotsResponse dropped;
  // Without the token, and with a wrong one: refused before anything is looked at.
  EXPECT_EQ(Call(ps_stub_[0].get(), &v1::PsService::Stub::DropSlots, drop, &dropped).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  {
    grpc::ClientContext context;
    context.AddMetadata("ember-admin-token", "not-the-token");
    EXPECT_EQ(ps_stub_[0]->DropSlots(&context, drop, &dropped).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  v1::InstallSlotMapRequest install;
  install.set_epoch(1000);
  install.set_slot_owners(std::string(4 * kNumSlots, '\0'));
  v1::InstallSlotMapResponse installed;
  EXPECT_EQ(Call(ps_stub_[1].get(), &v1::PsService::Stub::InstallSlotMap, install, &installed)
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  v1::RestoreShardRequest restore;
  restore.set_attempt(99);
  v1::RestoreShardResponse restored;
  EXPECT_EQ(
      Call(ps_stub_[1].get(), &v1::PsService::Stub::RestoreShard, restore, &restored).error_code(),
      grpc::StatusCode::UNAUTHENTICATED);
  // With it, the shard's own checks apply: it owns these slots, so it keeps them.
  EXPECT_EQ(
      Call(ps_stub_[0].get(), &v1::PsService::Stub::DropSlots, drop, &dropped, true).error_code(),
      grpc::StatusCode::FAILED_PRECONDITION);
  // Data calls stay open, and the coordinator (same token) still moves slots.
  const Digest now = Checksums();
  EXPECT_EQ(now.digest, oracle_.digest);
  const v1::Migration op = WaitForEnd(Start(MoveSpec(0, 1024)).op_id());
  ASSERT_EQ(op.phase(), v1::Migration::DONE) << op.error();
  ExpectMoved(op.spec());
}

// One fault: which process dies, and where.
struct Fault {
  std::string name;
  int victim;  // 0, 1: that PS shard (0 is the source); -1: the coordinator
  std::string flag;
};

class MigrationFaultTest : public MigrationTest, public ::testing::WithParamInterface<Fault> {};

TEST_P(MigrationFaultTest, AKillAtAnyPhaseEndsWithOneOwnerPerSlotAndEveryRow) {
  const Fault& fault = GetParam();
  std::vector<std::vector<std::string>> ps_flags = {{}, {}};
  std::vector<std::string> coordinator_flags;
  if (fault.victim >= 0) {
    ps_flags[fault.victim].push_back(fault.flag);
  } else {
    coordinator_flags.push_back(fault.flag);
  }
  ASSERT_NO_FATAL_FAILURE(StartCluster(coordinator_flags, ps_flags));
  const v1::MigrationSpec spec = MoveSpec(0, 2048);
  Start(spec);
  // The victim dies at its hook; the supervisor (this test) restarts it.
  Process* victim = fault.victim >= 0 ? cluster_->shard(fault.victim) : cluster_->coordinator();
  ASSERT_TRUE(victim->Wait(kWaitBound).ok()) << "the fault hook did not fire";
  if (fault.victim >= 0) {
    ASSERT_NO_FATAL_FAILURE(StartPs(fault.victim));
  } else {
    ASSERT_NO_FATAL_FAILURE(StartCoordinator());
  }
  // The operation finishes by itself (retries, or the restarted coordinator resumes
  // it); should it have stopped, the same request resumes it.
  v1::Migration op = WaitForEnd("");
  if (op.phase() != v1::Migration::DONE) {
    std::cerr << "after the fault: " << v1::Migration::Phase_Name(op.phase()) << " (" << op.error()
              << "); re-running the request" << std::endl;
    op = WaitForEnd(Start(spec).op_id());
  }
  ASSERT_EQ(op.phase(), v1::Migration::DONE) << op.error();
  ExpectMoved(op.spec());
}

INSTANTIATE_TEST_SUITE_P(
    Phases, MigrationFaultTest,
    ::testing::Values(
        Fault{"SourceWhileCopying", 0, "--test_crash_on_migration=ExportRows:3"},
        Fault{"SourceWhileCatchingUp", 0, "--test_crash_on_migration=ExportChanges:1"},
        Fault{"SourceAtTheFence", 0, "--test_crash_on_migration=FenceSlots:2"},
        Fault{"SourceWhileCleaningUp", 0, "--test_crash_on_migration=DropSlots:1"},
        Fault{"TargetWhileCopying", 1, "--test_crash_on_migration=ImportRows:2"},
        Fault{"TargetAtTheSwitch", 1, "--test_crash_on_migration=InstallSlotMap:1"},
        Fault{"CoordinatorWhileCopying", -1, "--test_crash_migration_at=copying"},
        Fault{"CoordinatorWhileCatchingUp", -1, "--test_crash_migration_at=catching_up"},
        Fault{"CoordinatorWhileFenced", -1, "--test_crash_migration_at=fenced"},
        Fault{"CoordinatorAfterTheSwitch", -1, "--test_crash_migration_at=switched"}),
    [](const ::testing::TestParamInfo<Fault>& info) { return info.param.name; });

}  // namespace
}  // namespace ember
