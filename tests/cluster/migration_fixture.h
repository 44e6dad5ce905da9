// Copyright 2026 The Ember Authors.
//
// MigrationTest: the fixture of the slot-migration tests between real processes
// (tests/cluster/migration_test.cc, migration_pause_test.cc): ember-coordinator and two
// ember-ps shards with rows on loopback, driven through AdminService the way emberctl
// drives it, with the oracle digests and the checks every move ends with.

#ifndef EMBER_TESTS_CLUSTER_MIGRATION_FIXTURE_H_
#define EMBER_TESTS_CLUSTER_MIGRATION_FIXTURE_H_

#include <unistd.h>

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
#include "tests/support/deadline.h"
#include "tests/support/eventually.h"
#include "tests/support/local_cluster.h"
#include "tools/harness/process.h"

namespace ember {

constexpr char kToken[] = "migration-test-token";
constexpr uint32_t kDim = 8;
constexpr int kIds = 4000;
constexpr absl::Duration kWaitBound = absl::Seconds(60);
// A job with a table of its own ("item", other rows): every move carries its store too.
constexpr char kFixtureJob[] = "ctr-f";

template <typename Stub, typename Request, typename Response, typename Method>
grpc::Status Call(Stub* stub, Method method, const Request& request, Response* response,
                  bool admin = false) {
  grpc::ClientContext context;
  if (admin) context.AddMetadata("ember-admin-token", kToken);
  SetDeadline(&context, absl::Seconds(10));
  return (stub->*method)(&context, request, response);
}

inline v1::TableConfig Table(const std::string& name, v1::OptimizerConfig::Kind optimizer) {
  v1::TableConfig config;
  config.set_name(name);
  config.set_dim(kDim);
  config.mutable_initializer()->set_kind(v1::InitializerConfig::UNIFORM);
  config.mutable_optimizer()->set_kind(optimizer);
  config.mutable_optimizer()->set_learning_rate(0.5f);
  return config;
}

inline std::vector<uint64_t> Ids() {
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
    // Every start's flags; a test's own (a fault hook) go to one start only.
    LocalClusterOptions cluster_options;
    cluster_options.dir = dir_;
    cluster_options.shards = 2;
    cluster_options.coordinator_flags = {"--heartbeat_timeout_ms=1500",
                                         absl::StrCat("--admin_token=", kToken)};
    cluster_options.shard_flags = {"--heartbeat_ms=100"};
    cluster_ = std::make_unique<LocalCluster>(std::move(cluster_options));
  }

  void TearDown() override {
    pushing_ = false;
    if (pusher_.joinable()) pusher_.join();
    cluster_.reset();  // SIGKILL
    std::filesystem::remove_all(dir_);
  }

  // Starts (or restarts, on the same port) the coordinator with `extra` flags.
  void StartCoordinator(const std::vector<std::string>& extra = {}) {
    const absl::Status started = cluster_->StartCoordinator(extra);
    ASSERT_TRUE(started.ok()) << started;
    address_ = cluster_->coordinator_address();
    auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
    admin_ = v1::AdminService::NewStub(channel);
    coordinator_stub_ = v1::CoordinatorService::NewStub(channel);
  }

  // Starts (or restarts, on a fresh port) shard `i` with `extra` flags.
  void StartPs(int i, const std::vector<std::string>& extra = {}) {
    const absl::Status started = cluster_->StartShard(i, extra);
    ASSERT_TRUE(started.ok()) << started;
    ps_stub_[i] = v1::PsService::NewStub(
        grpc::CreateChannel(cluster_->shard_address(i), grpc::InsecureChannelCredentials()));
  }

  // A 2-shard cluster with the tables and rows (Adagrad: optimizer state moves too),
  // flushed; the oracle digests taken.
  void StartCluster(const std::vector<std::string>& coordinator_flags = {},
                    const std::vector<std::vector<std::string>>& ps_flags = {{}, {}}) {
    ASSERT_NO_FATAL_FAILURE(StartCoordinator(coordinator_flags));
    for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(StartPs(i, ps_flags[i]));
    ASSERT_TRUE(Eventually([&] { return Map().epoch() > 0; }, kWaitBound));
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
      for (size_t k = 0; k < grads.size(); ++k)
        grads[k] = 0.01f * static_cast<float>(k % 13 + step);
      const absl::Status pushed = client_->Push("item", ids, grads, step);
      ASSERT_TRUE(pushed.ok()) << pushed;
    }
    oracle_ = Checksums();
    ASSERT_EQ(oracle_.rows, static_cast<uint64_t>(kIds));
    // The job's own "item": half the ids, other gradients.
    options.worker_id = 3;
    options.job = kFixtureJob;
    absl::StatusOr<std::unique_ptr<PsClient>> job = PsClient::Create(options);
    ASSERT_TRUE(job.ok()) << job.status();
    ASSERT_TRUE((*job)->CreateTableEverywhere(Table("item", v1::OptimizerConfig::ADAGRAD)).ok());
    const std::vector<uint64_t> half(ids.begin(), ids.begin() + kIds / 2);
    std::vector<float> grads(half.size() * kDim);
    for (size_t k = 0; k < grads.size(); ++k) grads[k] = 0.02f * static_cast<float>(k % 5 + 1);
    const absl::Status pushed = (*job)->Push("item", half, grads, 1);
    ASSERT_TRUE(pushed.ok()) << pushed;
    job_oracle_ = Checksums(kFixtureJob);
    ASSERT_EQ(job_oracle_.rows, static_cast<uint64_t>(kIds / 2));
  }

  v1::GetClusterMapResponse Map() {
    v1::GetClusterMapResponse map;
    Call(coordinator_stub_.get(), &v1::CoordinatorService::Stub::GetClusterMap,
         v1::GetClusterMapRequest(), &map);
    return map;
  }

  static uint32_t OwnerOf(const v1::GetClusterMapResponse& map, uint32_t slot) {
    uint32_t owner = kNoShard;
    if (map.slot_owners().size() == 4 * kNumSlots)
      std::memcpy(&owner, map.slot_owners().data() + 4 * slot, 4);
    return owner;
  }

  // The "item" digests of both shards added up (Checksum flushes first): the shared
  // table's, or `job`'s own.
  Digest Checksums(const std::string& job = "") {
    Digest sum;
    for (int i = 0; i < 2; ++i) {
      v1::ChecksumRequest request;
      request.set_table("item");
      request.set_job(job);
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
    Eventually(
        [&] {
          v1::GetMigrationRequest request;
          request.set_op_id(op_id);
          if (!Call(admin_.get(), &v1::AdminService::Stub::GetMigration, request, &op, true).ok()) {
            return false;
          }
          return op.phase() == v1::Migration::DONE || op.phase() == v1::Migration::FAILED ||
                 op.phase() == v1::Migration::CANCELLED;
        },
        kWaitBound);
    return op;
  }

  // The "exact" rows of `ids` (SGD, lr 0.5) are `base` after `rounds` pushes of 0.25
  // each: every acknowledged push applied once (dyadic steps are exact in float).
  void ExpectPushedExactly(const std::vector<uint64_t>& ids, const std::vector<float>& base,
                           int rounds) {
    std::vector<float> pulled(ids.size() * kDim);
    ASSERT_TRUE(client_->Pull("exact", ids, absl::MakeSpan(pulled)).ok());
    for (size_t k = 0; k < pulled.size(); ++k) {
      float expected = base[k];
      for (int r = 0; r < rounds; ++r) expected -= 0.5f * 0.25f;
      ASSERT_EQ(pulled[k], expected) << "id " << ids[k / kDim];
    }
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
    const Digest job = Checksums(kFixtureJob);
    EXPECT_EQ(job.rows, job_oracle_.rows) << "job " << kFixtureJob;
    EXPECT_EQ(job.digest, job_oracle_.digest) << "job " << kFixtureJob;
  }

  std::string dir_, address_;
  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<v1::AdminService::Stub> admin_;
  std::unique_ptr<v1::CoordinatorService::Stub> coordinator_stub_;
  std::unique_ptr<v1::PsService::Stub> ps_stub_[2];
  std::unique_ptr<PsClient> client_;
  Digest oracle_;
  Digest job_oracle_;  // kFixtureJob's "item"
  std::atomic<bool> pushing_{false};
  std::thread pusher_;
};

}  // namespace ember

#endif  // EMBER_TESTS_CLUSTER_MIGRATION_FIXTURE_H_
