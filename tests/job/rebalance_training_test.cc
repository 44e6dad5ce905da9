// Copyright 2026 The Ember Authors.
//
// Online slot migration under a running BSP job (docs/ARCHITECTURE.md invariant 6): real
// ember-datagen data, a real coordinator, PS shards and ember-worker processes over
// loopback, and the coordinator's AdminService as emberctl drives it.
//
// Pinned here:
//  - moving a quarter of the slots (both directions between two shards) while the job
//    trains ends with bitwise the model of the same job without moves, and no worker
//    call failed (no recovery: redirects and fences were absorbed by client retries);
//  - the same for growing the cluster from 2 to 3 shards with a rebalance plan;
//  - an operator's RestoreCheckpoint of the job's newest checkpoint onto the moved
//    cluster gives back the same rows.

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ember/v1/admin.grpc.pb.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "ember/v1/ps.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "server/coordinator/rebalance_planner.h"
#include "tests/job/job_cluster.h"
#include "tests/support/deadline.h"

namespace ember {
namespace {

namespace fs = std::filesystem;

constexpr char kToken[] = "rebalance-test-token";

// AdminService calls with the token and a deadline.
class Admin {
 public:
  explicit Admin(const std::string& address)
      : channel_(grpc::CreateChannel(address, grpc::InsecureChannelCredentials())),
        admin_(v1::AdminService::NewStub(channel_)),
        coordinator_(v1::CoordinatorService::NewStub(channel_)) {}

  template <typename Request, typename Response, typename Method>
  grpc::Status Call(Method method, const Request& request, Response* response) {
    grpc::ClientContext context;
    context.AddMetadata("ember-admin-token", kToken);
    SetDeadline(&context, absl::Seconds(30));
    return (admin_.get()->*method)(&context, request, response);
  }

  v1::GetClusterMapResponse Map() {
    grpc::ClientContext context;
    SetDeadline(&context, absl::Seconds(10));
    v1::GetClusterMapResponse map;
    EXPECT_TRUE(coordinator_->GetClusterMap(&context, v1::GetClusterMapRequest(), &map).ok());
    return map;
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::AdminService::Stub> admin_;
  std::unique_ptr<v1::CoordinatorService::Stub> coordinator_;
};

uint32_t OwnerOf(const v1::GetClusterMapResponse& map, uint32_t slot) {
  uint32_t owner = 0;
  std::memcpy(&owner, map.slot_owners().data() + 4 * slot, 4);
  return owner;
}

// The digests of every table summed over the cluster's shards (PsService.Checksum).
uint64_t SparseDigest(Cluster& c) {
  uint64_t sum = 0;
  for (int i = 0; i < c.shard_count(); ++i) {
    auto stub = v1::PsService::NewStub(
        grpc::CreateChannel(c.shard(i)->ready_text(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    SetDeadline(&context, absl::Seconds(30));
    v1::ChecksumResponse response;
    EXPECT_TRUE(stub->Checksum(&context, v1::ChecksumRequest(), &response).ok());
    for (const auto& table : response.tables()) sum += table.digest();
  }
  return sum;
}

class RebalanceTrainingTest : public JobClusterTest {
 protected:
  static void SetUpTestSuite() { SetUpData("ember-rebalance"); }
  static void TearDownTestSuite() { TearDownData(); }

  // Runs the job to its end, starting the migration `start()` returns once training
  // passed step 40; checks that the migration finished DONE while the job trained.
  std::string TrainWithMigration(Cluster& c, Admin& admin,
                                 const std::function<v1::MigrationSpec()>& spec) {
    bool started = false;
    bool done = false;
    std::string op_id;
    const std::string result = c.Finish([&](absl::Duration) {
      if (done) return;
      if (!started && c.NewestCheckpointStep() >= 40) {
        v1::StartMigrationRequest request;
        *request.mutable_spec() = spec();
        v1::Migration op;
        const grpc::Status s = admin.Call(&v1::AdminService::Stub::StartMigration, request, &op);
        ASSERT_TRUE(s.ok()) << s.error_message();
        op_id = op.op_id();
        started = true;
        return;
      }
      if (!started) return;
      v1::GetMigrationRequest get;
      get.set_op_id(op_id);
      v1::Migration op;
      ASSERT_TRUE(admin.Call(&v1::AdminService::Stub::GetMigration, get, &op).ok());
      if (op.phase() == v1::Migration::FAILED || op.phase() == v1::Migration::CANCELLED) {
        FAIL() << "migration ended " << v1::Migration::Phase_Name(op.phase()) << ": " << op.error();
      }
      if (op.phase() != v1::Migration::DONE) return;
      done = true;
      // The job was still training: the moves happened under load.
      EXPECT_FALSE(c.worker(0)->Wait(absl::ZeroDuration()).ok());
      std::cerr << "migration " << op_id << ": " << op.rows_copied() << " rows, " << op.seconds()
                << " s, longest fence " << op.max_fence_ms() << " ms" << std::endl;
    });
    EXPECT_TRUE(done) << "the migration did not finish before the job";
    return result;
  }

  static void ExpectSameModelWithoutRecovery(const std::string& result) {
    ExpectSameModel(result);
    EXPECT_EQ(JsonValue(result, "recoveries_rank0"), "0") << result;
  }
};

TEST_F(RebalanceTrainingTest, MovingAQuarterOfTheSlotsWhileTrainingKeepsTheModelBitwise) {
  std::unique_ptr<Cluster> c = NewCluster("move-quarter");
  ASSERT_NO_FATAL_FAILURE(c->StartCoordinator(2, {absl::StrCat("--admin_token=", kToken)}));
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(c->StartShard(i));
  for (int r = 0; r < kWorkers; ++r) ASSERT_NO_FATAL_FAILURE(c->StartWorker(r, Flags()));
  Admin admin(c->address_);
  std::vector<std::pair<uint32_t, uint32_t>> moved;  // slot, new owner
  const std::string result = TrainWithMigration(*c, admin, [&] {
    // 2048 slots of each shard go to the other: 4096 of 16384 slots move.
    const v1::GetClusterMapResponse map = admin.Map();
    v1::MigrationSpec spec;
    spec.set_reason("test: move a quarter");
    for (uint32_t from : {0u, 1u}) {
      std::vector<uint32_t> slots;
      for (uint32_t slot = 0; slot < kNumSlots && slots.size() < 2048; ++slot) {
        if (OwnerOf(map, slot) == from) slots.push_back(slot);
      }
      for (uint32_t slot : slots) moved.emplace_back(slot, 1 - from);
      v1::SlotMove* move = spec.add_moves();
      move->set_source(from);
      move->set_target(1 - from);
      for (v1::SlotRange& range : ToRanges(slots)) *move->add_ranges() = range;
    }
    return spec;
  });
  ExpectSameModelWithoutRecovery(result);
  const v1::GetClusterMapResponse map = admin.Map();
  for (const auto& [slot, owner] : moved) ASSERT_EQ(OwnerOf(map, slot), owner) << "slot " << slot;
  EXPECT_EQ(moved.size(), 4096u);

  // An operator's restore of the job's newest checkpoint (taken at the end, after the
  // moves) onto the moved cluster gives back the same rows.
  v1::ListCheckpointsRequest list;
  list.set_job("quickstart");
  v1::ListCheckpointsResponse listed;
  ASSERT_TRUE(admin.Call(&v1::AdminService::Stub::ListCheckpoints, list, &listed).ok());
  ASSERT_GT(listed.checkpoints_size(), 0);
  const std::string newest = listed.checkpoints(listed.checkpoints_size() - 1).name();
  const uint64_t digest = SparseDigest(*c);
  v1::RestoreCheckpointRequest restore;
  restore.set_job("quickstart");
  v1::RestoreCheckpointResponse restored;
  const grpc::Status s = admin.Call(&v1::AdminService::Stub::RestoreCheckpoint, restore, &restored);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(restored.name(), newest);
  EXPECT_EQ(SparseDigest(*c), digest);
}

TEST_F(RebalanceTrainingTest, GrowingFromTwoToThreeShardsWhileTrainingKeepsTheModelBitwise) {
  std::unique_ptr<Cluster> c = NewCluster("grow");
  ASSERT_NO_FATAL_FAILURE(c->StartCoordinator(2, {absl::StrCat("--admin_token=", kToken)}));
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(c->StartShard(i));
  for (int r = 0; r < kWorkers; ++r) ASSERT_NO_FATAL_FAILURE(c->StartWorker(r, Flags()));
  // The new shard joins with no slots.
  ASSERT_NO_FATAL_FAILURE(c->StartShard(2));
  Admin admin(c->address_);
  const std::string result = TrainWithMigration(*c, admin, [&] {
    v1::PlanRebalanceRequest request;
    request.set_by(v1::PlanRebalanceRequest::SLOTS);
    v1::PlanRebalanceResponse plan;
    const grpc::Status s = admin.Call(&v1::AdminService::Stub::PlanRebalance, request, &plan);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_GT(plan.spec().moves_size(), 0);
    return plan.spec();
  });
  ExpectSameModelWithoutRecovery(result);
  const v1::GetClusterMapResponse map = admin.Map();
  std::vector<int> slots(3, 0);
  for (uint32_t slot = 0; slot < kNumSlots; ++slot) {
    const uint32_t owner = OwnerOf(map, slot);
    ASSERT_LT(owner, 3u) << "slot " << slot;
    ++slots[owner];
  }
  for (int shard = 0; shard < 3; ++shard) {
    EXPECT_NEAR(slots[shard], kNumSlots / 3.0, kNumSlots * 0.05 / 3) << "shard " << shard;
  }
}

}  // namespace
}  // namespace ember
