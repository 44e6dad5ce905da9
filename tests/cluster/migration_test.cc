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
//    calls without it, while the coordinator (same token) still migrates.

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/ps_client.h"
#include "common/slot.h"
#include "ember/v1/admin.grpc.pb.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "ember/v1/ps.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "server/coordinator/rebalance_planner.h"
#include "tests/cluster/process.h"

namespace ember {
namespace {

constexpr char kToken[] = "migration-test-token";
constexpr uint32_t kDim = 8;
constexpr int kIds = 4000;
constexpr absl::Duration kWaitBound = absl::Seconds(60);

template <typename Stub, typename Request, typename Response, typename Method>
grpc::Status Call(Stub* stub, Method method, const Request& request, Response* response,
                  bool admin = false) {
  grpc::ClientContext context;
  if (admin) context.AddMetadata("ember-admin-token", kToken);
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  return (stub->*method)(&context, request, response);
}

bool Eventually(const std::function<bool()>& done) {
  const absl::Time end = absl::Now() + kWaitBound;
  while (absl::Now() < end) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(20));  // polling pace, not event ordering
  }
  return done();
}

v1::TableConfig Table(const std::string& name, v1::OptimizerConfig::Kind optimizer) {
  v1::TableConfig config;
  config.set_name(name);
  config.set_dim(kDim);
  config.mutable_initializer()->set_kind(v1::InitializerConfig::UNIFORM);
  config.mutable_optimizer()->set_kind(optimizer);
  config.mutable_optimizer()->set_learning_rate(0.5f);
  return config;
}

std::vector<uint64_t> Ids() {
  std::vector<uint64_t> ids(kIds);
  for (int i = 0; i < kIds; ++i) ids[i] = 1000 + 7 * static_cast<uint64_t>(i);
  return ids;
}

struct Digest {
  uint64_t rows = 0;
  uint64_t digest = 0;
  bool operator==(const Digest& o) const { return rows == o.rows && digest == o.digest; }
};

class MigrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            absl::StrCat("ember-migration-", getpid(), "-",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::remove_all(dir_);
  }

  void TearDown() override {
    pushing_ = false;
    if (pusher_.joinable()) pusher_.join();
    for (auto& p : ps_) p.reset();
    coordinator_.reset();
    std::filesystem::remove_all(dir_);
  }

  void StartCoordinator(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {absl::StrCat("--data_dir=", dir_, "/coordinator"),
                                     absl::StrCat("--port=", port_), "--expected_shards=2",
                                     "--heartbeat_timeout_ms=1500",
                                     absl::StrCat("--admin_token=", kToken)};
    args.insert(args.end(), extra.begin(), extra.end());
    absl::StatusOr<std::unique_ptr<Process>> p =
        Process::Start(EMBER_COORDINATOR_BINARY, args, "listening on ", absl::Seconds(30));
    ASSERT_TRUE(p.ok()) << p.status();
    coordinator_ = std::move(*p);
    address_ = coordinator_->ready_text();
    port_ = address_.substr(address_.rfind(':') + 1);
    auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
    admin_ = v1::AdminService::NewStub(channel);
    coordinator_stub_ = v1::CoordinatorService::NewStub(channel);
  }

  void StartPs(int i, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {absl::StrCat("--data_dir=", dir_, "/ps-", i), "--port=0",
                                     absl::StrCat("--shard_id=", i), "--heartbeat_ms=100",
                                     absl::StrCat("--coordinator=", address_)};
    args.insert(args.end(), extra.begin(), extra.end());
    absl::StatusOr<std::unique_ptr<Process>> p =
        Process::Start(EMBER_PS_BINARY, args, "listening on ", absl::Seconds(30));
    ASSERT_TRUE(p.ok()) << p.status();
    ps_[i] = std::move(*p);
    ps_stub_[i] = v1::PsService::NewStub(
        grpc::CreateChannel(ps_[i]->ready_text(), grpc::InsecureChannelCredentials()));
  }

  // A 2-shard cluster with the tables and rows (Adagrad: optimizer state moves too),
  // flushed; the oracle digests taken.
  void StartCluster(const std::vector<std::string>& coordinator_flags = {},
                    const std::vector<std::vector<std::string>>& ps_flags = {{}, {}}) {
    ASSERT_NO_FATAL_FAILURE(StartCoordinator(coordinator_flags));
    for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(StartPs(i, ps_flags[i]));
    ASSERT_TRUE(Eventually([&] { return Map().epoch() > 0; }));
    PsClientOptions options;
    options.coordinator_address = address_;
    options.worker_id = 1;
    options.max_retries = 12;
    absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
    ASSERT_TRUE(client_->CreateTableEverywhere(Table("item", v1::OptimizerConfig::ADAGRAD)).ok());
    ASSERT_TRUE(client_->CreateTableEverywhere(Table("exact", v1::OptimizerConfig::SGD)).ok());
    const std::vector<uint64_t> ids = Ids();
    for (int step = 1; step <= 3; ++step) {
      std::vector<float> grads(ids.size() * kDim);
      for (size_t k = 0; k < grads.size(); ++k) grads[k] = 0.01f * static_cast<float>(k % 13 + step);
      const absl::Status pushed = client_->Push("item", ids, grads, step);
      ASSERT_TRUE(pushed.ok()) << pushed;
    }
    oracle_ = Checksums();
    ASSERT_EQ(oracle_.rows, static_cast<uint64_t>(kIds));
  }

  v1::GetClusterMapResponse Map() {
    v1::GetClusterMapResponse map;
    Call(coordinator_stub_.get(), &v1::CoordinatorService::Stub::GetClusterMap,
         v1::GetClusterMapRequest(), &map);
    return map;
  }

  static uint32_t OwnerOf(const v1::GetClusterMapResponse& map, uint32_t slot) {
    uint32_t owner = kNoShard;
    if (map.slot_owners().size() == 4 * kNumSlots) std::memcpy(&owner, map.slot_owners().data() + 4 * slot, 4);
    return owner;
  }

  // The "item" digests of both shards added up (Checksum flushes first).
  Digest Checksums() {
    Digest sum;
    for (int i = 0; i < 2; ++i) {
      v1::ChecksumRequest request;
      request.set_table("item");
      v1::ChecksumResponse response;
      const grpc::Status s =
          Call(ps_stub_[i].get(), &v1::PsService::Stub::Checksum, request, &response);
      EXPECT_TRUE(s.ok()) << s.error_message();
      if (!s.ok() || response.tables_size() != 1) return {};
      sum.rows += response.tables(0).rows();
      sum.digest += response.tables(0).digest();
    }
    return sum;
  }

  // The first `n` slots shard `from` owns, moved to 1 - from.
  v1::MigrationSpec MoveSpec(uint32_t from, size_t n, uint64_t bytes_per_sec = 0) {
    const v1::GetClusterMapResponse map = Map();
    std::vector<uint32_t> slots;
    for (uint32_t slot = 0; slot < kNumSlots && slots.size() < n; ++slot) {
      if (OwnerOf(map, slot) == from) slots.push_back(slot);
    }
    v1::MigrationSpec spec;
    spec.set_reason("test move");
    spec.set_bytes_per_sec(bytes_per_sec);
    v1::SlotMove* move = spec.add_moves();
    move->set_source(from);
    move->set_target(1 - from);
    for (v1::SlotRange& range : ToRanges(slots)) *move->add_ranges() = range;
    return spec;
  }

  v1::Migration Start(const v1::MigrationSpec& spec) {
    v1::StartMigrationRequest request;
    *request.mutable_spec() = spec;
    v1::Migration op;
    const grpc::Status s =
        Call(admin_.get(), &v1::AdminService::Stub::StartMigration, request, &op, true);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return op;
  }

  // Polls the operation until it ends (or the coordinator does not answer for long).
  v1::Migration WaitForEnd(const std::string& op_id) {
    v1::Migration op;
    Eventually([&] {
      v1::GetMigrationRequest request;
      request.set_op_id(op_id);
      if (!Call(admin_.get(), &v1::AdminService::Stub::GetMigration, request, &op, true).ok()) {
        return false;
      }
      return op.phase() == v1::Migration::DONE || op.phase() == v1::Migration::FAILED ||
             op.phase() == v1::Migration::CANCELLED;
    });
    return op;
  }

  // Every slot of `spec` is owned by its target, the digests equal the oracle, and
  // the source kept no row of a moved slot.
  void ExpectMoved(const v1::MigrationSpec& spec) {
    const v1::GetClusterMapResponse map = Map();
    for (const v1::SlotMove& move : spec.moves()) {
      absl::StatusOr<std::vector<uint32_t>> slots = FromRanges(move.ranges());
      ASSERT_TRUE(slots.ok());
      for (uint32_t slot : *slots) ASSERT_EQ(OwnerOf(map, slot), move.target()) << slot;
      v1::GetSlotStatsResponse stats;
      ASSERT_TRUE(Call(ps_stub_[move.source()].get(), &v1::PsService::Stub::GetSlotStats,
                       v1::GetSlotStatsRequest(), &stats)
                      .ok());
      for (uint32_t slot : *slots) {
        uint64_t rows = 0;
        std::memcpy(&rows, stats.rows().data() + 8 * slot, 8);
        ASSERT_EQ(rows, 0u) << "slot " << slot << " left rows on shard " << move.source();
      }
    }
    const Digest now = Checksums();
    EXPECT_EQ(now.rows, oracle_.rows);
    EXPECT_EQ(now.digest, oracle_.digest);
  }

  std::string dir_, address_, port_ = "0";
  std::unique_ptr<Process> coordinator_;
  std::unique_ptr<Process> ps_[2];
  std::unique_ptr<v1::AdminService::Stub> admin_;
  std::unique_ptr<v1::CoordinatorService::Stub> coordinator_stub_;
  std::unique_ptr<v1::PsService::Stub> ps_stub_[2];
  std::unique_ptr<PsClient> client_;
  Digest oracle_;
  std::atomic<bool> pushing_{false};
  std::thread pusher_;
};

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
  ASSERT_TRUE(Eventually([&] { return rounds > 2; }));
  const v1::Migration op = WaitForEnd(Start(MoveSpec(1, 4096)).op_id());
  ASSERT_TRUE(Eventually([&] { return rounds > 4; }));
  pushing_ = false;
  pusher_.join();
  ASSERT_TRUE(failure.ok()) << failure;
  ASSERT_EQ(op.phase(), v1::Migration::DONE) << op.error();
  std::cerr << "pushes during the move: " << rounds << " rounds, longest call "
            << longest_micros / 1000.0 << " ms, longest fence " << op.max_fence_ms() << " ms"
            << std::endl;
  std::vector<float> pulled(ids.size() * kDim);
  ASSERT_TRUE(client_->Pull("exact", ids, absl::MakeSpan(pulled)).ok());
  for (size_t k = 0; k < pulled.size(); ++k) {
    float expected = base[k];
    for (int r = 0; r < rounds; ++r) expected -= 0.5f * 0.25f;
    ASSERT_EQ(pulled[k], expected) << "id " << ids[k / kDim];
  }
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
  EXPECT_EQ(Call(ps_stub_[1].get(), &v1::PsService::Stub::RestoreShard, restore, &restored)
                .error_code(),
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
  Process* victim = fault.victim >= 0 ? ps_[fault.victim].get() : coordinator_.get();
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
    std::cerr << "after the fault: " << v1::Migration::Phase_Name(op.phase()) << " ("
              << op.error() << "); re-running the request" << std::endl;
    op = WaitForEnd(Start(spec).op_id());
  }
  ASSERT_EQ(op.phase(), v1::Migration::DONE) << op.error();
  ExpectMoved(op.spec());
}

INSTANTIATE_TEST_SUITE_P(
    Phases, MigrationFaultTest,
    ::testing::Values(Fault{"SourceWhileCopying", 0, "--test_crash_on_migration=ExportRows:3"},
                      Fault{"SourceWhileCatchingUp", 0,
                            "--test_crash_on_migration=ExportChanges:1"},
                      Fault{"SourceAtTheFence", 0, "--test_crash_on_migration=FenceSlots:2"},
                      Fault{"SourceWhileCleaningUp", 0, "--test_crash_on_migration=DropSlots:1"},
                      Fault{"TargetWhileCopying", 1, "--test_crash_on_migration=ImportRows:2"},
                      Fault{"TargetAtTheSwitch", 1, "--test_crash_on_migration=InstallSlotMap:1"},
                      Fault{"CoordinatorWhileCopying", -1, "--test_crash_migration_at=copying"},
                      Fault{"CoordinatorWhileCatchingUp", -1,
                            "--test_crash_migration_at=catching_up"},
                      Fault{"CoordinatorWhileFenced", -1, "--test_crash_migration_at=fenced"},
                      Fault{"CoordinatorAfterTheSwitch", -1, "--test_crash_migration_at=switched"}),
    [](const ::testing::TestParamInfo<Fault>& info) { return info.param.name; });

}  // namespace
}  // namespace ember
