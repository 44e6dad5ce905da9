// Copyright 2026 The Ember Authors.
//
// End-to-end tests of a real ember-coordinator process over gRPC on loopback: tables,
// the rendezvous key-value store (including a KvGet that waits for a KvPut), admin
// authentication and auditing, slot assignment, persistence across a restart, flag
// errors, and the PS side of the protocol (ShardAgent instances in this process:
// registration, heartbeats, map and table propagation, DEAD detection, surviving a
// coordinator outage).

#include <sys/wait.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/grpc_status.h"
#include "common/slot.h"
#include "common/slot_map.h"
#include "ember/v1/admin.grpc.pb.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "ember/v1/ps.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "server/ps/shard_agent.h"
#include "server/shared/slot_owners.h"
#include "tests/support/deadline.h"
#include "tests/support/eventually.h"
#include "tests/support/usage_errors.h"
#include "tools/harness/process.h"

#ifndef EMBER_PS_BINARY
#error "EMBER_PS_BINARY must name the ember-ps binary"
#endif
#ifndef EMBER_COORDINATOR_BINARY
#error "EMBER_COORDINATOR_BINARY must name the ember-coordinator binary"
#endif

namespace ember {
namespace {

constexpr char kToken[] = "s3cret-admin-token";
// Bound of every "until" wait below; generous so slow CI machines pass.
constexpr absl::Duration kWaitBound = absl::Seconds(20);

v1::TableConfig ItemTable() {
  v1::TableConfig config;
  config.set_name("item");
  config.set_dim(8);
  config.mutable_optimizer()->set_kind(v1::OptimizerConfig::ADAGRAD);
  return config;
}

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string tmpl = absl::StrCat(::testing::TempDir(), "/coordinator_test.XXXXXX");
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    ASSERT_NE(mkdtemp(buf.data()), nullptr);
    dir_ = buf.data();
  }

  void TearDown() override {
    StopCoordinator();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // Starts the coordinator on `port` (0: ephemeral) over dir_/db.
  void StartCoordinator(uint32_t expected_shards = 1, int port = 0,
                        int heartbeat_timeout_ms = 3000) {
    absl::StatusOr<std::unique_ptr<Process>> p =
        Process::Start(EMBER_COORDINATOR_BINARY,
                       {absl::StrCat("--data_dir=", dir_, "/db"), absl::StrCat("--port=", port),
                        absl::StrCat("--expected_shards=", expected_shards),
                        absl::StrCat("--heartbeat_timeout_ms=", heartbeat_timeout_ms),
                        absl::StrCat("--admin_token=", kToken)},
                       "listening on ", absl::Seconds(30));
    ASSERT_TRUE(p.ok()) << p.status();
    process_ = std::move(*p);
    address_ = process_->ready_text();
    auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
    stub_ = v1::CoordinatorService::NewStub(channel);
    admin_ = v1::AdminService::NewStub(channel);
  }

  void StopCoordinator() {
    if (process_ == nullptr) return;
    // Open client connections hold a graceful shutdown for its whole grace period.
    stub_.reset();
    admin_.reset();
    absl::StatusOr<int> code = process_->Stop(absl::Seconds(10));
    EXPECT_TRUE(code.ok() && *code == 0) << "ember-coordinator did not exit cleanly";
    process_.reset();
  }

  int port() const { return std::stoi(address_.substr(address_.rfind(':') + 1)); }

  absl::Status CreateTable(const v1::TableConfig& config,
                           v1::CoordinatorCreateTableResponse* response = nullptr) {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::CoordinatorCreateTableRequest request;
    *request.mutable_config() = config;
    v1::CoordinatorCreateTableResponse ignored;
    return FromGrpcStatus(stub_->CreateTable(&context, request, response ? response : &ignored),
                          &context);
  }

  absl::StatusOr<v1::TableConfig> DescribeTable(const std::string& name) {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::DescribeTableRequest request;
    request.set_name(name);
    v1::DescribeTableResponse response;
    absl::Status s = FromGrpcStatus(stub_->DescribeTable(&context, request, &response), &context);
    if (!s.ok()) return s;
    return response.config();
  }

  absl::Status KvPut(const std::string& key, const std::string& value) {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::KvPutRequest request;
    request.set_key(key);
    request.set_value(value);
    v1::KvPutResponse response;
    return FromGrpcStatus(stub_->KvPut(&context, request, &response), &context);
  }

  absl::StatusOr<std::string> KvGet(const std::string& key, uint32_t wait_ms = 0) {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::KvGetRequest request;
    request.set_key(key);
    request.set_wait_ms(wait_ms);
    v1::KvGetResponse response;
    absl::Status s = FromGrpcStatus(stub_->KvGet(&context, request, &response), &context);
    if (!s.ok()) return s;
    return response.value();
  }

  absl::StatusOr<v1::RegisterShardResponse> Register(uint32_t id, const std::string& address) {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::RegisterShardRequest request;
    request.set_shard_id(id);
    request.set_address(address);
    v1::RegisterShardResponse response;
    absl::Status s = FromGrpcStatus(stub_->RegisterShard(&context, request, &response), &context);
    if (!s.ok()) return s;
    return response;
  }

  v1::GetClusterMapResponse ClusterMap() {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::GetClusterMapResponse response;
    const absl::Status s = FromGrpcStatus(
        stub_->GetClusterMap(&context, v1::GetClusterMapRequest(), &response), &context);
    EXPECT_TRUE(s.ok()) << s;
    return response;
  }

  // `token` empty: no token metadata at all.
  absl::StatusOr<uint64_t> SetSlotOwner(uint32_t slot, uint32_t shard,
                                        const std::string& token = kToken) {
    grpc::ClientContext context;
    SetDeadline(&context);
    if (!token.empty()) context.AddMetadata("ember-admin-token", token);
    v1::SetSlotOwnerRequest request;
    request.set_slot(slot);
    request.set_shard_id(shard);
    v1::SetSlotOwnerResponse response;
    absl::Status s = FromGrpcStatus(admin_->SetSlotOwner(&context, request, &response), &context);
    if (!s.ok()) return s;
    return response.epoch();
  }

  absl::StatusOr<std::vector<v1::AuditEntry>> AuditLog(const std::string& token = kToken) {
    grpc::ClientContext context;
    SetDeadline(&context);
    if (!token.empty()) context.AddMetadata("ember-admin-token", token);
    v1::GetAuditLogResponse response;
    absl::Status s = FromGrpcStatus(
        admin_->GetAuditLog(&context, v1::GetAuditLogRequest(), &response), &context);
    if (!s.ok()) return s;
    return std::vector<v1::AuditEntry>(response.entries().begin(), response.entries().end());
  }

  absl::Status ListShards(const std::string& token) {
    grpc::ClientContext context;
    SetDeadline(&context);
    if (!token.empty()) context.AddMetadata("ember-admin-token", token);
    v1::ListShardsResponse response;
    return FromGrpcStatus(admin_->ListShards(&context, v1::ListShardsRequest(), &response),
                          &context);
  }

  std::string dir_;
  std::string address_;
  std::unique_ptr<Process> process_;
  std::unique_ptr<v1::CoordinatorService::Stub> stub_;
  std::unique_ptr<v1::AdminService::Stub> admin_;
};

TEST_F(CoordinatorTest, CreateAndDescribeTables) {
  StartCoordinator();
  v1::CoordinatorCreateTableResponse created;
  ASSERT_TRUE(CreateTable(ItemTable(), &created).ok());
  EXPECT_EQ(created.config().name(), "item");
  EXPECT_NE(created.config().seed(), 0u);       // defaults filled in
  EXPECT_EQ(created.pending_shards_size(), 0);  // no shards yet

  absl::StatusOr<v1::TableConfig> described = DescribeTable("item");
  ASSERT_TRUE(described.ok()) << described.status();
  EXPECT_EQ(described->SerializeAsString(), created.config().SerializeAsString());

  EXPECT_TRUE(CreateTable(ItemTable()).ok()) << "equal config must be idempotent";
  v1::TableConfig conflicting = ItemTable();
  conflicting.set_dim(16);
  const absl::Status conflict = CreateTable(conflicting);
  EXPECT_EQ(conflict.code(), absl::StatusCode::kAlreadyExists);
  // It names what differs, so a second job sharing the table name knows what to change.
  EXPECT_THAT(std::string(conflict.message()), ::testing::HasSubstr("dim (16 asked, 8 existing)"));

  v1::TableConfig invalid = ItemTable();
  invalid.set_name("bad name!");
  EXPECT_EQ(CreateTable(invalid).code(), absl::StatusCode::kInvalidArgument);
  invalid = ItemTable();
  invalid.set_dim(0);
  EXPECT_EQ(CreateTable(invalid).code(), absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(DescribeTable("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ClusterMap().tables_size(), 1);
}

TEST_F(CoordinatorTest, CreateTableIsForwardedToAliveShards) {
  absl::StatusOr<std::unique_ptr<Process>> ps =
      Process::Start(EMBER_PS_BINARY,
                     {absl::StrCat("--data_dir=", dir_, "/ps0"), "--port=0", "--shard_id=0",
                      "--num_shards=1", "--memory_budget_mb=16"},
                     "listening on ", absl::Seconds(30));
  ASSERT_TRUE(ps.ok()) << ps.status();
  StartCoordinator(/*expected_shards=*/1);
  ASSERT_TRUE(Register(0, (*ps)->ready_text()).ok());
  ASSERT_TRUE(Register(1, "127.0.0.1:1").ok());  // nothing listens there

  v1::CoordinatorCreateTableResponse created;
  ASSERT_TRUE(CreateTable(ItemTable(), &created).ok());
  ASSERT_EQ(created.pending_shards_size(), 1);
  EXPECT_EQ(created.pending_shards(0), 1u);

  {
    auto ps_stub = v1::PsService::NewStub(
        grpc::CreateChannel((*ps)->ready_text(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::GetShardInfoResponse info;
    ASSERT_TRUE(ps_stub->GetShardInfo(&context, v1::GetShardInfoRequest(), &info).ok());
    ASSERT_EQ(info.tables_size(), 1);
    EXPECT_EQ(info.tables(0), "item");
  }
  absl::StatusOr<int> code = (*ps)->Stop(absl::Seconds(10));
  EXPECT_TRUE(code.ok() && *code == 0);
}

TEST_F(CoordinatorTest, KvPutGetAndWaitingGet) {
  StartCoordinator();
  EXPECT_EQ(KvGet("rank0").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(KvPut("rank0", "10.0.0.1:9000").ok());
  absl::StatusOr<std::string> got = KvGet("rank0");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "10.0.0.1:9000");
  ASSERT_TRUE(KvPut("rank0", "overwritten").ok());
  EXPECT_EQ(KvGet("rank0").value_or(""), "overwritten");

  // A short wait for a key nobody puts ends NOT_FOUND.
  EXPECT_EQ(KvGet("never", /*wait_ms=*/100).status().code(), absl::StatusCode::kNotFound);

  // A long wait completes as soon as another call puts the key.
  grpc::ClientContext context;
  SetDeadline(&context, absl::Seconds(60));
  v1::KvGetRequest request;
  request.set_key("rank1");
  request.set_wait_ms(50000);
  v1::KvGetResponse response;
  grpc::Status status;
  absl::Notification done;
  const absl::Time start = absl::Now();
  stub_->async()->KvGet(&context, &request, &response, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(200)))
      << "KvGet returned before the key existed";
  ASSERT_TRUE(KvPut("rank1", "hello").ok());
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kWaitBound));
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.value(), "hello");
  EXPECT_LT(absl::Now() - start, absl::Seconds(40));

  EXPECT_EQ(KvPut("", "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(KvPut(std::string(300, 'k'), "x").code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CoordinatorTest, AdminNeedsTokenAndAuditsChanges) {
  StartCoordinator(/*expected_shards=*/2);
  EXPECT_EQ(ListShards("").code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(ListShards("wrong").code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(ListShards(kToken).ok());
  EXPECT_EQ(AuditLog("").status().code(), absl::StatusCode::kUnauthenticated);

  // Before slots are assigned.
  ASSERT_TRUE(Register(0, "127.0.0.1:7000").ok());
  EXPECT_EQ(ClusterMap().epoch(), 0u);
  EXPECT_EQ(SetSlotOwner(5, 0).status().code(), absl::StatusCode::kFailedPrecondition);

  absl::StatusOr<v1::RegisterShardResponse> r1 = Register(1, "127.0.0.1:7001");
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_TRUE(r1->assigned());
  EXPECT_EQ(r1->epoch(), 1u);
  absl::StatusOr<SlotMap> map = UnpackSlotOwners(r1->slot_owners(), r1->epoch());
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map->owners(), SlotMap::Even({0, 1}, 1).owners());

  EXPECT_EQ(SetSlotOwner(5, 1, "").status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(SetSlotOwner(5, 1, "wrong").status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(ClusterMap().epoch(), 1u) << "a rejected admin call changed the map";
  EXPECT_EQ(SetSlotOwner(kNumSlots, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SetSlotOwner(5, 9).status().code(), absl::StatusCode::kNotFound);

  absl::StatusOr<uint64_t> epoch = SetSlotOwner(5, 1);
  ASSERT_TRUE(epoch.ok()) << epoch.status();
  EXPECT_EQ(*epoch, 2u);
  v1::GetClusterMapResponse cluster = ClusterMap();
  EXPECT_EQ(cluster.epoch(), 2u);
  absl::StatusOr<SlotMap> moved = UnpackSlotOwners(cluster.slot_owners(), cluster.epoch());
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(moved->OwnerOf(5), 1u);
  ASSERT_EQ(cluster.shards_size(), 2);
  EXPECT_EQ(cluster.shards(1).address(), "127.0.0.1:7001");
  EXPECT_EQ(cluster.shards(1).state(), v1::ShardInfo::ALIVE);

  absl::StatusOr<std::vector<v1::AuditEntry>> log = AuditLog();
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_FALSE(log->empty());
  const v1::AuditEntry& last = log->back();
  EXPECT_TRUE(absl::StrContains(last.what(), "set_slot_owner slot=5 shard=1")) << last.what();
  EXPECT_EQ(last.epoch_before(), 1u);
  EXPECT_EQ(last.epoch_after(), 2u);
  EXPECT_TRUE(absl::StrContains(last.who(), "peer=")) << last.who();
  EXPECT_TRUE(absl::StrContains(last.who(), "token=tok-")) << last.who();
  EXPECT_FALSE(absl::StrContains(last.who(), kToken)) << "the token itself must not be logged";
  EXPECT_GT(last.unix_micros(), 0);
  for (size_t i = 0; i < log->size(); ++i) EXPECT_EQ((*log)[i].sequence(), i + 1);
}

TEST_F(CoordinatorTest, RestartKeepsEverything) {
  StartCoordinator(/*expected_shards=*/1);
  ASSERT_TRUE(CreateTable(ItemTable()).ok());
  ASSERT_TRUE(Register(0, "127.0.0.1:7000").ok());
  ASSERT_TRUE(Register(3, "127.0.0.1:7003").ok());  // after assignment: no slots
  ASSERT_TRUE(SetSlotOwner(77, 3).ok());
  ASSERT_TRUE(KvPut("job/rendezvous", "v1").ok());
  const v1::GetClusterMapResponse before = ClusterMap();
  absl::StatusOr<std::vector<v1::AuditEntry>> log_before = AuditLog();
  ASSERT_TRUE(log_before.ok());
  EXPECT_EQ(before.epoch(), 2u);

  StopCoordinator();
  StartCoordinator(/*expected_shards=*/1);
  const v1::GetClusterMapResponse after = ClusterMap();
  EXPECT_EQ(after.epoch(), 2u);
  EXPECT_EQ(after.slot_owners(), before.slot_owners());
  ASSERT_EQ(after.tables_size(), 1);
  EXPECT_EQ(after.tables(0).SerializeAsString(), before.tables(0).SerializeAsString());
  ASSERT_EQ(after.shards_size(), 2);
  EXPECT_EQ(after.shards(1).shard_id(), 3u);
  EXPECT_EQ(after.shards(1).address(), "127.0.0.1:7003");
  EXPECT_EQ(KvGet("job/rendezvous").value_or(""), "v1");
  absl::StatusOr<std::vector<v1::AuditEntry>> log_after = AuditLog();
  ASSERT_TRUE(log_after.ok());
  ASSERT_EQ(log_after->size(), log_before->size());
  EXPECT_EQ(log_after->back().SerializeAsString(), log_before->back().SerializeAsString());

  // A change after the restart continues the epoch and the audit sequence.
  absl::StatusOr<uint64_t> epoch = SetSlotOwner(78, 3);
  ASSERT_TRUE(epoch.ok());
  EXPECT_EQ(*epoch, 3u);
  absl::StatusOr<std::vector<v1::AuditEntry>> log_more = AuditLog();
  ASSERT_TRUE(log_more.ok());
  ASSERT_EQ(log_more->size(), log_before->size() + 1);
  EXPECT_EQ(log_more->back().sequence(), log_before->size() + 1);
}

TEST_F(CoordinatorTest, BadFlagsExitWithUsage) {
  EXPECT_EQ(RunBinary(EMBER_COORDINATOR_BINARY, "--help").exit_code, 0);
  // Exit code 2 is what these pin; the messages are bad_input_test's.
  ExpectUsageErrors(EMBER_COORDINATOR_BINARY,
                    {{"--port=0", ""},  // no --data_dir
                     {"--data_dir=/tmp/x --port=abc", ""},
                     {"--data_dir=/tmp/x --expected_shards=0", ""},
                     {"--data_dir=/tmp/x --no_such_flag=1", ""},
                     {"--data_dir=/tmp/x --admin_token_file=/nonexistent/token", ""}});
}

// A ShardAgent with callbacks that record what it applied.
struct RecordingAgent {
  RecordingAgent(const std::string& coordinator, uint32_t shard_id, const std::string& address) {
    ShardAgentOptions options;
    options.coordinator_address = coordinator;
    options.shard_id = shard_id;
    options.advertised_address = address;
    options.heartbeat_interval = absl::Milliseconds(50);
    options.max_backoff = absl::Milliseconds(200);
    agent = std::make_unique<ShardAgent>(
        options,
        [this](const SlotMap& map) {
          absl::MutexLock lock(&mu);
          this->map = map;
        },
        [this](const std::string& job, const v1::TableConfig& config) {
          absl::MutexLock lock(&mu);
          tables.push_back(job.empty() ? config.name() : absl::StrCat(job, "/", config.name()));
          return absl::OkStatus();
        });
  }
  SlotMap Map() {
    absl::MutexLock lock(&mu);
    return map;
  }
  std::vector<std::string> Tables() {
    absl::MutexLock lock(&mu);
    return tables;
  }

  absl::Mutex mu;
  SlotMap map ABSL_GUARDED_BY(mu);
  std::vector<std::string> tables ABSL_GUARDED_BY(mu);
  std::unique_ptr<ShardAgent> agent;
};

TEST_F(CoordinatorTest, ShardAgentsFollowTheCoordinator) {
  StartCoordinator(/*expected_shards=*/2, /*port=*/0, /*heartbeat_timeout_ms=*/1000);
  ASSERT_TRUE(CreateTable(ItemTable()).ok());
  // Unreachable PsService addresses: the agents stand in for the shards.
  RecordingAgent a0(address_, 0, "127.0.0.1:1");
  RecordingAgent a1(address_, 1, "127.0.0.1:2");
  ASSERT_TRUE(a0.agent->Start().ok());
  EXPECT_FALSE(a0.agent->WaitForEpoch(1, absl::Milliseconds(300))) << "assigned with one shard";
  ASSERT_TRUE(a1.agent->Start().ok());
  ASSERT_TRUE(a0.agent->WaitForEpoch(1, kWaitBound));
  ASSERT_TRUE(a1.agent->WaitForEpoch(1, kWaitBound));
  EXPECT_EQ(a0.Map().owners(), SlotMap::Even({0, 1}, 1).owners());
  EXPECT_EQ(a0.Tables(), std::vector<std::string>{"item"});  // learned on registration

  // A table created later reaches the shards with their heartbeats.
  v1::TableConfig user = ItemTable();
  user.set_name("user");
  ASSERT_TRUE(CreateTable(user).ok());
  EXPECT_TRUE(Eventually([&] { return a1.Tables().size() == 2; }, kWaitBound));
  EXPECT_EQ(a1.Tables().back(), "user");

  // A slot move reaches both shards.
  ASSERT_TRUE(SetSlotOwner(0, 1).ok());
  ASSERT_TRUE(a0.agent->WaitForEpoch(2, kWaitBound));
  ASSERT_TRUE(a1.agent->WaitForEpoch(2, kWaitBound));
  EXPECT_EQ(a0.Map().OwnerOf(0), 1u);

  // A shard that stops heartbeating is reported DEAD; its slots stay.
  a1.agent->Stop();
  EXPECT_TRUE(Eventually(
      [&] {
        const v1::GetClusterMapResponse m = ClusterMap();
        return m.shards_size() == 2 && m.shards(1).state() == v1::ShardInfo::DEAD;
      },
      kWaitBound));
  v1::GetClusterMapResponse cluster = ClusterMap();
  EXPECT_EQ(cluster.shards(0).state(), v1::ShardInfo::ALIVE);
  EXPECT_EQ(cluster.epoch(), 2u);
  EXPECT_GT(cluster.shards(1).owned_slots(), 0u);

  // It comes back at a new address with the same id and keeps its slots.
  RecordingAgent a1b(address_, 1, "127.0.0.1:3");
  ASSERT_TRUE(a1b.agent->Start().ok());
  ASSERT_TRUE(a1b.agent->WaitForEpoch(2, kWaitBound));
  EXPECT_TRUE(Eventually(
      [&] {
        const v1::GetClusterMapResponse m = ClusterMap();
        return m.shards(1).state() == v1::ShardInfo::ALIVE &&
               m.shards(1).address() == "127.0.0.1:3";
      },
      kWaitBound));
  EXPECT_EQ(ClusterMap().epoch(), 2u);
  EXPECT_EQ(a1b.Map().owners(), a0.Map().owners());

  // The coordinator dies: the shards keep their last map and reconnect after restart.
  const int old_port = port();
  ASSERT_TRUE(process_->Kill().ok());
  process_.reset();
  EXPECT_TRUE(Eventually([&] { return !a0.agent->connected(); }, kWaitBound));
  EXPECT_EQ(a0.agent->epoch(), 2u);
  EXPECT_EQ(a0.Map().epoch(), 2u);
  StartCoordinator(/*expected_shards=*/2, old_port, /*heartbeat_timeout_ms=*/1000);
  EXPECT_TRUE(Eventually([&] { return a0.agent->connected(); }, kWaitBound));
  ASSERT_TRUE(SetSlotOwner(1, 1).ok());
  EXPECT_TRUE(a0.agent->WaitForEpoch(3, kWaitBound));
  EXPECT_EQ(a0.Map().OwnerOf(1), 1u);

  // Stop is prompt even with a long heartbeat interval in progress.
  const absl::Time start = absl::Now();
  a0.agent->Stop();
  a1b.agent->Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

}  // namespace
}  // namespace ember
