// Copyright 2026 The Ember Authors.
//
// The cluster token in a plaintext cluster (issue 28 item 1.4), against real processes
// over loopback: a coordinator and one PS shard started with --cluster_token (and an
// admin token), no TLS.
//
// Pins: a client without the token (or with a wrong one) cannot register a fake shard
// (it does not appear in the cluster map), cannot heartbeat, cannot re-register shard 0
// at another address, cannot create a table on the coordinator or directly on the
// shard, and cannot write a rendezvous key; each refusal names the call and the flag
// to set and does not echo the token. With the token each call works: PsClient with
// PsClientOptions::cluster_token creates a table (without it, refused), and the
// coordinator forwards a table to the shard with the token. The real shard registered
// with its --cluster_token (the shard agent sends it), and the admin token (an
// operator's) is accepted in its place. Bad --cluster_token flags exit 2 naming the
// flag.

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/cluster_token.h"
#include "common/grpc_status.h"
#include "common/ps_client.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "ember/v1/ps.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "tests/support/deadline.h"
#include "tests/support/eventually.h"
#include "tests/support/token_call.h"
#include "tests/support/usage_errors.h"
#include "tools/harness/process.h"

namespace ember {
namespace {

constexpr char kToken[] = "cluster-token-test-secret";
constexpr char kAdminToken[] = "cluster-token-test-admin";
constexpr absl::Duration kStartTimeout = absl::Seconds(30);
constexpr absl::Duration kRpcTimeout = absl::Seconds(5);

template <typename Rpc>
absl::Status Call(Rpc rpc, const std::string& token = "") {
  return CallWithToken(rpc, kRpcTimeout, kClusterTokenMetadataKey, token);
}

v1::TableConfig Table(const std::string& name) { return SmallSgdTable(name); }

// A refusal for want of the token: UNAUTHENTICATED, naming the call and the flag, and
// never the token itself.
void ExpectRefused(const absl::Status& s, const std::string& method) {
  EXPECT_TRUE(absl::IsUnauthenticated(s)) << method << ": " << s;
  EXPECT_TRUE(absl::StrContains(s.message(), method)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "--cluster_token_file")) << s;
  EXPECT_FALSE(absl::StrContains(s.message(), kToken)) << s;
}

class ClusterTokenTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string tmpl = absl::StrCat(::testing::TempDir(), "/cluster_token_test.XXXXXX");
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    ASSERT_NE(mkdtemp(buf.data()), nullptr);
    dir_ = new std::string(buf.data());
    absl::StatusOr<std::unique_ptr<Process>> p =
        Process::Start(EMBER_COORDINATOR_BINARY,
                       {absl::StrCat("--data_dir=", *dir_, "/coordinator"), "--expected_shards=1",
                        absl::StrCat("--cluster_token=", kToken),
                        absl::StrCat("--admin_token=", kAdminToken), "--metrics_port=0"},
                       "listening on ", kStartTimeout);
    ASSERT_TRUE(p.ok()) << p.status();
    coordinator_ = p->release();
    address_ = new std::string(coordinator_->ready_text());
    p = Process::Start(EMBER_PS_BINARY,
                       {absl::StrCat("--data_dir=", *dir_, "/ps0"), "--shard_id=0",
                        absl::StrCat("--coordinator=", *address_),
                        absl::StrCat("--cluster_token=", kToken), "--metrics_port=0"},
                       "listening on ", kStartTimeout);
    ASSERT_TRUE(p.ok()) << p.status();
    shard_ = p->release();
    // The real shard registers with its token (waits on another process).
    const bool registered = Eventually(
        [] {
          v1::GetClusterMapResponse map = Map();
          return map.shards_size() == 1 && map.epoch() > 0;
        },
        kStartTimeout, absl::Milliseconds(50));
    ASSERT_TRUE(registered) << "the shard did not register with its token";
    shard_address_ = new std::string(Map().shards(0).address());
  }

  static void TearDownTestSuite() {
    for (Process* p : {shard_, coordinator_}) {
      if (p != nullptr) p->Stop(absl::Seconds(10)).IgnoreError();
      delete p;
    }
    std::error_code ignored;
    if (dir_ != nullptr) std::filesystem::remove_all(*dir_, ignored);
    delete dir_;
    delete address_;
    delete shard_address_;
  }

  void SetUp() override { ASSERT_NE(shard_address_, nullptr); }

  static std::unique_ptr<v1::CoordinatorService::Stub> Coordinator() {
    return v1::CoordinatorService::NewStub(
        grpc::CreateChannel(*address_, grpc::InsecureChannelCredentials()));
  }

  static v1::GetClusterMapResponse Map() {
    v1::GetClusterMapResponse map;
    auto stub = Coordinator();
    EXPECT_TRUE(Call([&](grpc::ClientContext* ctx) {
                  return stub->GetClusterMap(ctx, v1::GetClusterMapRequest(), &map);
                }).ok());
    return map;
  }

  static absl::Status Register(uint32_t shard, const std::string& address,
                               const std::string& token) {
    auto stub = Coordinator();
    v1::RegisterShardRequest request;
    request.set_shard_id(shard);
    request.set_address(address);
    request.set_incarnation(77);
    v1::RegisterShardResponse response;
    return Call(
        [&](grpc::ClientContext* ctx) { return stub->RegisterShard(ctx, request, &response); },
        token);
  }

  // `*pending`: the shards the coordinator could not forward the table to.
  static absl::Status CreateOnCoordinator(const std::string& name, const std::string& token,
                                          int* pending = nullptr) {
    auto stub = Coordinator();
    v1::CoordinatorCreateTableRequest request;
    *request.mutable_config() = Table(name);
    v1::CoordinatorCreateTableResponse response;
    if (pending != nullptr) *pending = -1;
    absl::Status s =
        Call([&](grpc::ClientContext* ctx) { return stub->CreateTable(ctx, request, &response); },
             token);
    if (s.ok() && pending != nullptr) *pending = response.pending_shards_size();
    return s;
  }

  static bool TableOnCoordinator(const std::string& name) {
    auto stub = Coordinator();
    return CoordinatorHasTable(*stub, name);
  }

  static absl::Status KvPut(const std::string& key, const std::string& token) {
    auto stub = Coordinator();
    v1::KvPutRequest request;
    request.set_key(key);
    request.set_value("10.0.0.66:1234");
    v1::KvPutResponse response;
    return Call([&](grpc::ClientContext* ctx) { return stub->KvPut(ctx, request, &response); },
                token);
  }

  static bool KvHas(const std::string& key) {
    auto stub = Coordinator();
    v1::KvGetRequest request;
    request.set_key(key);
    v1::KvGetResponse response;
    return Call([&](grpc::ClientContext* ctx) { return stub->KvGet(ctx, request, &response); })
        .ok();
  }

  static std::string* dir_;
  static std::string* address_;
  static std::string* shard_address_;
  static Process* coordinator_;
  static Process* shard_;
};

std::string* ClusterTokenTest::dir_ = nullptr;
std::string* ClusterTokenTest::address_ = nullptr;
std::string* ClusterTokenTest::shard_address_ = nullptr;
Process* ClusterTokenTest::coordinator_ = nullptr;
Process* ClusterTokenTest::shard_ = nullptr;

TEST_F(ClusterTokenTest, FakeShardIsRefusedWithoutTheToken) {
  ExpectRefused(Register(7, "127.0.0.1:1", ""), "RegisterShard");
  EXPECT_TRUE(absl::IsPermissionDenied(Register(7, "127.0.0.1:1", "wrong")));
  const v1::GetClusterMapResponse map = Map();
  for (const v1::ShardInfo& shard : map.shards()) EXPECT_NE(shard.shard_id(), 7u);
}

TEST_F(ClusterTokenTest, ShardZeroCannotBeHijacked) {
  ExpectRefused(Register(0, "127.0.0.1:1", ""), "RegisterShard");
  const v1::GetClusterMapResponse map = Map();
  ASSERT_EQ(map.shards_size(), 1);
  EXPECT_EQ(map.shards(0).address(), *shard_address_);
}

TEST_F(ClusterTokenTest, HeartbeatNeedsTheToken) {
  auto stub = Coordinator();
  v1::HeartbeatRequest request;
  request.set_shard_id(0);
  request.set_incarnation(99);  // a forged restart
  v1::HeartbeatResponse response;
  ExpectRefused(
      Call([&](grpc::ClientContext* ctx) { return stub->Heartbeat(ctx, request, &response); }),
      "Heartbeat");
  EXPECT_TRUE(absl::IsPermissionDenied(
      Call([&](grpc::ClientContext* ctx) { return stub->Heartbeat(ctx, request, &response); },
           "wrong")));
}

TEST_F(ClusterTokenTest, CreateTableNeedsTheToken) {
  ExpectRefused(CreateOnCoordinator("refused", ""), "CreateTable");
  EXPECT_FALSE(TableOnCoordinator("refused"));

  // Directly on the shard, past the coordinator.
  auto ps = v1::PsService::NewStub(
      grpc::CreateChannel(*shard_address_, grpc::InsecureChannelCredentials()));
  v1::CreateTableRequest request;
  *request.mutable_config() = Table("refused_on_shard");
  v1::CreateTableResponse response;
  ExpectRefused(
      Call([&](grpc::ClientContext* ctx) { return ps->CreateTable(ctx, request, &response); }),
      "CreateTable");
  v1::GetShardInfoResponse info;
  ASSERT_TRUE(Call([&](grpc::ClientContext* ctx) {
                return ps->GetShardInfo(ctx, v1::GetShardInfoRequest(), &info);
              }).ok());
  for (const std::string& table : info.tables()) EXPECT_NE(table, "refused_on_shard");

  // With the token, on the shard too.
  EXPECT_TRUE(
      Call([&](grpc::ClientContext* ctx) { return ps->CreateTable(ctx, request, &response); },
           kToken)
          .ok());
}

// The coordinator's forwarded CreateTable carries the cluster token: the shard (which
// has no admin token here) creates the table at once.
TEST_F(ClusterTokenTest, TheCoordinatorForwardsCreateTableWithTheToken) {
  int pending = -1;
  ASSERT_TRUE(CreateOnCoordinator("forwarded", kToken, &pending).ok());
  EXPECT_EQ(pending, 0);
  auto ps = v1::PsService::NewStub(
      grpc::CreateChannel(*shard_address_, grpc::InsecureChannelCredentials()));
  v1::GetShardInfoResponse info;
  ASSERT_TRUE(Call([&](grpc::ClientContext* ctx) {
                return ps->GetShardInfo(ctx, v1::GetShardInfoRequest(), &info);
              }).ok());
  EXPECT_THAT(info.tables(), ::testing::Contains("forwarded"));
}

TEST_F(ClusterTokenTest, KvPutNeedsTheToken) {
  ExpectRefused(KvPut("rdzv/job/1/gloo/rank_1", ""), "KvPut");
  EXPECT_FALSE(KvHas("rdzv/job/1/gloo/rank_1"));
  ASSERT_TRUE(KvPut("rdzv/job/1/gloo/rank_1", kToken).ok());
  EXPECT_TRUE(KvHas("rdzv/job/1/gloo/rank_1"));
}

TEST_F(ClusterTokenTest, AdminTokenIsAcceptedInItsPlace) {
  auto stub = Coordinator();
  v1::KvPutRequest request;
  request.set_key("operator/key");
  request.set_value("v");
  v1::KvPutResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, kRpcTimeout);
  context.AddMetadata(kAdminTokenMetadataKey, kAdminToken);
  EXPECT_TRUE(stub->KvPut(&context, request, &response).ok());
  EXPECT_TRUE(KvHas("operator/key"));
}

TEST_F(ClusterTokenTest, PsClientWithTheTokenCreatesTables) {
  PsClientOptions options;
  options.coordinator_address = *address_;
  options.cluster_token = kToken;
  absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->CreateTableEverywhere(Table("trained")).ok());
  EXPECT_TRUE(TableOnCoordinator("trained"));

  // Without the token the same client is refused, naming the call.
  options.cluster_token.clear();
  absl::StatusOr<std::unique_ptr<PsClient>> bare = PsClient::Create(options);
  ASSERT_TRUE(bare.ok()) << bare.status();
  absl::Status s = (*bare)->CreateTableEverywhere(Table("bare"));
  EXPECT_TRUE(absl::IsUnauthenticated(s)) << s;
  EXPECT_FALSE(TableOnCoordinator("bare"));
}

TEST_F(ClusterTokenTest, FakeShardWithTheTokenRegisters) {
  ASSERT_TRUE(Register(7, "127.0.0.1:1", kToken).ok());
  bool listed = false;
  const v1::GetClusterMapResponse map = Map();
  for (const v1::ShardInfo& shard : map.shards()) listed |= shard.shard_id() == 7;
  EXPECT_TRUE(listed);
}

TEST(ClusterTokenFlagsTest, BadTokenFlagsAreUsageErrors) {
  const std::string data =
      absl::StrCat("--data_dir=", ::testing::TempDir(), "/cluster_token_flags");
  const std::vector<UsageErrorCase> cases = {
      {data + " --cluster_token=a --cluster_token_file=/f", "not both"},
      {data + " --cluster_token_file=/no/such/token", "--cluster_token_file"},
  };
  for (const char* binary : {EMBER_COORDINATOR_BINARY, EMBER_PS_BINARY}) {
    ExpectUsageErrors(binary, cases, UsageErrorChecks().MessageAnywhere());
  }
}

}  // namespace
}  // namespace ember
