// Copyright 2026 The Ember Authors.
//
// Transport security and admin authorization against real processes over loopback: a
// coordinator and two PS shards run with mutual TLS (certificates from
// tools/gen-certs.sh), an admin token, admin identities and an audit file.
//
// Pins: a plaintext client and a client of another CA are refused at the handshake;
// a worker's certificate reaches the data plane (tables, Pull, Push) but every admin
// RPC of the coordinator and the shards answers PERMISSION_DENIED and changes
// nothing, and it cannot register a shard; an admin certificate or the admin token is
// accepted, and each admin change appears in the audit log and the JSON-lines audit
// file; the plaintext health port reports liveness and readiness; bad TLS flags exit 2.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/admin_auth.h"
#include "common/grpc_status.h"
#include "common/ps_client.h"
#include "common/tls.h"
#include "ember/v1/admin.grpc.pb.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "ember/v1/ps.grpc.pb.h"
#include "ember/v1/serving.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "tests/support/deadline.h"
#include "tests/support/eventually.h"
#include "tests/support/http_get.h"
#include "tests/support/ports.h"
#include "tests/support/token_call.h"
#include "tests/support/usage_errors.h"
#include "tools/harness/process.h"

namespace ember {
namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

constexpr char kToken[] = "security-test-token";
constexpr char kIdentities[] = "--admin_identities=ember-admin,ember-server";
constexpr absl::Duration kStartTimeout = absl::Seconds(30);
constexpr absl::Duration kRpcTimeout = absl::Seconds(5);

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

template <typename Rpc>
absl::Status Call(Rpc rpc, const std::string& token = "") {
  return CallWithToken(rpc, kRpcTimeout, kAdminTokenMetadataKey, token);
}

v1::TableConfig Table(const std::string& name) { return SmallSgdTable(name); }

// The shared cluster: started once for the suite (process starts dominate its time).
struct Cluster {
  std::string dir;
  std::string certs;  // the cluster's CA and certificates
  std::string other;  // a second CA's
  std::unique_ptr<Process> coordinator;
  std::vector<std::unique_ptr<Process>> shards;
  std::string coordinator_address;
  int coordinator_health_port = -1;
  int shard_health_port = -1;
  int coordinator_metrics_port = -1;
};

class SecurityTest : public ::testing::Test {
 protected:
  static std::vector<std::string> TlsFlags(const std::string& dir, const std::string& name) {
    return {absl::StrCat("--tls_ca=", dir, "/ca.pem"),
            absl::StrCat("--tls_cert=", dir, "/", name, ".pem"),
            absl::StrCat("--tls_key=", dir, "/", name, ".key")};
  }

  static std::shared_ptr<grpc::ChannelCredentials> Credentials(const std::string& dir,
                                                               const std::string& name) {
    TlsOptions options{absl::StrCat(dir, "/ca.pem"), absl::StrCat(dir, "/", name, ".pem"),
                       absl::StrCat(dir, "/", name, ".key")};
    absl::StatusOr<TlsCredentials> creds = TlsCredentials::Load(options);
    EXPECT_TRUE(creds.ok()) << creds.status();
    return creds.ok() ? creds->Channel() : grpc::InsecureChannelCredentials();
  }

  static void SetUpTestSuite() {
    cluster_ = new Cluster;
    Cluster& c = *cluster_;
    const std::string tmpl = absl::StrCat(::testing::TempDir(), "/security_test.XXXXXX");
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    ASSERT_NE(mkdtemp(buf.data()), nullptr);
    c.dir = buf.data();
    c.certs = c.dir + "/certs";
    c.other = c.dir + "/other";
    RunResult made = RunBinary(EMBER_GEN_CERTS, c.certs);
    ASSERT_EQ(made.exit_code, 0) << made.output;
    made = RunBinary(EMBER_GEN_CERTS, c.other + " --ca_name=Other-CA");
    ASSERT_EQ(made.exit_code, 0) << made.output;

    c.coordinator_health_port = FreePort();
    c.coordinator_metrics_port = FreePort();
    std::vector<std::string> args = {absl::StrCat("--data_dir=", c.dir, "/coordinator"),
                                     "--expected_shards=2",
                                     absl::StrCat("--admin_token=", kToken),
                                     kIdentities,
                                     absl::StrCat("--audit_log=", c.dir, "/audit.jsonl"),
                                     absl::StrCat("--health_port=", c.coordinator_health_port),
                                     absl::StrCat("--metrics_port=", c.coordinator_metrics_port)};
    for (std::string& flag : TlsFlags(c.certs, "server")) args.push_back(std::move(flag));
    absl::StatusOr<std::unique_ptr<Process>> p =
        Process::Start(EMBER_COORDINATOR_BINARY, args, "listening on ", kStartTimeout);
    ASSERT_TRUE(p.ok()) << p.status();
    c.coordinator = std::move(*p);
    c.coordinator_address = c.coordinator->ready_text();

    for (int shard = 0; shard < 2; ++shard) {
      // Shard 0 proves itself to the coordinator with its certificate, shard 1 with the
      // token: both are admin credentials.
      std::vector<std::string> ps_args = {
          absl::StrCat("--data_dir=", c.dir, "/ps", shard), absl::StrCat("--shard_id=", shard),
          absl::StrCat("--coordinator=", c.coordinator_address),
          shard == 0 ? std::string(kIdentities) : absl::StrCat("--admin_token=", kToken)};
      if (shard == 0) {
        c.shard_health_port = FreePort();
        ps_args.push_back(absl::StrCat("--health_port=", c.shard_health_port));
      }
      for (std::string& flag : TlsFlags(c.certs, "server")) ps_args.push_back(std::move(flag));
      p = Process::Start(EMBER_PS_BINARY, ps_args, "listening on ", kStartTimeout);
      ASSERT_TRUE(p.ok()) << p.status();
      c.shards.push_back(std::move(*p));
    }
    // Both shards registered over TLS and own slots.
    auto stub = v1::CoordinatorService::NewStub(
        grpc::CreateChannel(c.coordinator_address, Credentials(c.certs, "client")));
    // Waits on other processes' registration.
    const bool registered = Eventually(
        [&] {
          v1::GetClusterMapResponse map;
          return Call([&](grpc::ClientContext* ctx) {
                   return stub->GetClusterMap(ctx, v1::GetClusterMapRequest(), &map);
                 }).ok() &&
                 map.shards_size() == 2 && map.epoch() > 0;
        },
        kStartTimeout, absl::Milliseconds(50));
    ASSERT_TRUE(registered) << "the shards did not register with the TLS coordinator";
  }

  static void TearDownTestSuite() {
    if (cluster_ == nullptr) return;
    for (auto& shard : cluster_->shards) shard->Stop(absl::Seconds(10)).IgnoreError();
    if (cluster_->coordinator != nullptr)
      cluster_->coordinator->Stop(absl::Seconds(10)).IgnoreError();
    std::error_code ignored;
    std::filesystem::remove_all(cluster_->dir, ignored);
    delete cluster_;
    cluster_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(cluster_, nullptr);
    ASSERT_NE(cluster_->coordinator, nullptr);
    ASSERT_EQ(cluster_->shards.size(), 2u);
  }

  const Cluster& c() const { return *cluster_; }

  std::unique_ptr<v1::AdminService::Stub> Admin(std::shared_ptr<grpc::ChannelCredentials> creds) {
    return v1::AdminService::NewStub(grpc::CreateChannel(c().coordinator_address, creds));
  }

  // The shards as the coordinator lists them (through an admin certificate).
  std::vector<v1::ShardInfo> ListShards() {
    auto admin = Admin(Credentials(c().certs, "admin"));
    v1::ListShardsResponse response;
    EXPECT_TRUE(Call([&](grpc::ClientContext* ctx) {
                  return admin->ListShards(ctx, v1::ListShardsRequest(), &response);
                }).ok());
    return {response.shards().begin(), response.shards().end()};
  }

  absl::Status CreateTableAsAdmin(std::shared_ptr<grpc::ChannelCredentials> creds,
                                  const std::string& name, const std::string& token = "") {
    auto admin = Admin(std::move(creds));
    v1::AdminCreateTableRequest request;
    *request.mutable_config() = Table(name);
    v1::AdminCreateTableResponse response;
    return Call(
        [&](grpc::ClientContext* ctx) { return admin->CreateTable(ctx, request, &response); },
        token);
  }

  bool TableExists(const std::string& name) {
    auto stub = v1::CoordinatorService::NewStub(
        grpc::CreateChannel(c().coordinator_address, Credentials(c().certs, "client")));
    return CoordinatorHasTable(*stub, name);
  }

  HealthCheckResponse::ServingStatus Health(int port, const std::string& service) {
    auto stub = grpc::health::v1::Health::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
    HealthCheckRequest request;
    request.set_service(service);
    HealthCheckResponse response;
    absl::Status s =
        Call([&](grpc::ClientContext* ctx) { return stub->Check(ctx, request, &response); });
    if (absl::IsNotFound(s)) return HealthCheckResponse::SERVICE_UNKNOWN;
    return s.ok() ? response.status() : HealthCheckResponse::UNKNOWN;
  }

  static Cluster* cluster_;
};

Cluster* SecurityTest::cluster_ = nullptr;

TEST_F(SecurityTest, PlaintextClientIsRefused) {
  auto coordinator = v1::CoordinatorService::NewStub(
      grpc::CreateChannel(c().coordinator_address, grpc::InsecureChannelCredentials()));
  v1::GetClusterMapResponse map;
  absl::Status s = Call([&](grpc::ClientContext* ctx) {
    return coordinator->GetClusterMap(ctx, v1::GetClusterMapRequest(), &map);
  });
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;

  auto ps = v1::PsService::NewStub(
      grpc::CreateChannel(ListShards().at(0).address(), grpc::InsecureChannelCredentials()));
  v1::GetShardInfoResponse info;
  s = Call([&](grpc::ClientContext* ctx) {
    return ps->GetShardInfo(ctx, v1::GetShardInfoRequest(), &info);
  });
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
}

TEST_F(SecurityTest, CertificateOfAnotherCaIsRefused) {
  // A client certificate the cluster's CA did not sign.
  auto coordinator = v1::CoordinatorService::NewStub(
      grpc::CreateChannel(c().coordinator_address, Credentials(c().other, "admin")));
  v1::GetClusterMapResponse map;
  absl::Status s = Call([&](grpc::ClientContext* ctx) {
    return coordinator->GetClusterMap(ctx, v1::GetClusterMapRequest(), &map);
  });
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  // Nor does an admin call get through with the right token on top.
  EXPECT_TRUE(absl::IsUnavailable(
      CreateTableAsAdmin(Credentials(c().other, "admin"), "other_ca_table", kToken)));
  EXPECT_FALSE(TableExists("other_ca_table"));
}

TEST_F(SecurityTest, WorkerCertificateUsesTheDataPlane) {
  PsClientOptions options;
  options.coordinator_address = c().coordinator_address;
  options.channel_credentials = Credentials(c().certs, "client");
  options.worker_id = 7;
  absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->CreateTableEverywhere(Table("worker_rows")).ok());
  const std::vector<uint64_t> ids = {1, 2, 3, 40000, 1u << 30};
  std::vector<float> before(ids.size() * 4);
  // A shard learns of a new table through the coordinator a heartbeat later.
  const absl::Status pulled =
      EventuallyOk([&] { return (*client)->Pull("worker_rows", ids, absl::MakeSpan(before)); },
                   kStartTimeout, absl::Milliseconds(50));
  ASSERT_TRUE(pulled.ok()) << pulled;
  std::vector<float> grads(ids.size() * 4, 1.0f);
  ASSERT_TRUE((*client)->Push("worker_rows", ids, grads, /*step=*/1).ok());
  std::vector<float> after(ids.size() * 4);
  ASSERT_TRUE((*client)->Pull("worker_rows", ids, absl::MakeSpan(after)).ok());
  for (size_t i = 0; i < after.size(); ++i) EXPECT_FLOAT_EQ(after[i], before[i] - 0.5f) << i;
}

TEST_F(SecurityTest, WorkerCertificateCannotCallAdminRpcs) {
  std::shared_ptr<grpc::ChannelCredentials> worker = Credentials(c().certs, "client");
  // The coordinator's AdminService.
  const absl::Status created = CreateTableAsAdmin(worker, "worker_admin_table");
  EXPECT_TRUE(absl::IsPermissionDenied(created)) << created;
  EXPECT_TRUE(absl::StrContains(created.message(), "ember-worker")) << created;
  EXPECT_FALSE(TableExists("worker_admin_table"));
  auto admin = Admin(worker);
  v1::SetSlotOwnerRequest move;
  move.set_slot(0);
  move.set_shard_id(1);
  v1::SetSlotOwnerResponse moved;
  const std::vector<v1::ShardInfo> before = ListShards();
  EXPECT_TRUE(absl::IsPermissionDenied(
      Call([&](grpc::ClientContext* ctx) { return admin->SetSlotOwner(ctx, move, &moved); })));
  // A wrong token is UNAUTHENTICATED, whatever the certificate.
  EXPECT_TRUE(absl::IsUnauthenticated(CreateTableAsAdmin(worker, "worker_admin_table", "wrong")));

  // A shard's admin RPCs (slot migration).
  for (const v1::ShardInfo& shard : before) {
    auto ps = v1::PsService::NewStub(grpc::CreateChannel(shard.address(), worker));
    v1::DropSlotsRequest drop;
    v1::SlotRange* range = drop.add_ranges();
    range->set_first(0);
    range->set_last(16383);
    v1::DropSlotsResponse dropped;
    const absl::Status s =
        Call([&](grpc::ClientContext* ctx) { return ps->DropSlots(ctx, drop, &dropped); });
    EXPECT_TRUE(absl::IsPermissionDenied(s)) << shard.address() << ": " << s;
  }
  // Registering a shard address is an admin act too.
  auto coordinator =
      v1::CoordinatorService::NewStub(grpc::CreateChannel(c().coordinator_address, worker));
  v1::RegisterShardRequest hijack;
  hijack.set_shard_id(0);
  hijack.set_address("127.0.0.1:1");
  v1::RegisterShardResponse registered;
  EXPECT_TRUE(absl::IsPermissionDenied(Call([&](grpc::ClientContext* ctx) {
    return coordinator->RegisterShard(ctx, hijack, &registered);
  })));
  // Nor is forging a shard's heartbeat (a new incarnation would end a job's attempt).
  v1::HeartbeatRequest forged;
  forged.set_shard_id(0);
  forged.set_incarnation(12345);
  v1::HeartbeatResponse beat;
  EXPECT_TRUE(absl::IsPermissionDenied(
      Call([&](grpc::ClientContext* ctx) { return coordinator->Heartbeat(ctx, forged, &beat); })));
  const std::vector<v1::ShardInfo> after = ListShards();
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].address(), before[i].address());
    EXPECT_EQ(after[i].owned_slots(), before[i].owned_slots());
  }
}

TEST_F(SecurityTest, AdminCredentialsChangeAndEveryChangeIsAudited) {
  ASSERT_TRUE(CreateTableAsAdmin(Credentials(c().certs, "admin"), "by_admin_cert").ok());
  // A worker creates its tables through the data plane (CoordinatorService).
  auto data_plane = v1::CoordinatorService::NewStub(
      grpc::CreateChannel(c().coordinator_address, Credentials(c().certs, "client")));
  v1::CoordinatorCreateTableRequest by_worker;
  *by_worker.mutable_config() = Table("by_worker");
  v1::CoordinatorCreateTableResponse created;
  ASSERT_TRUE(Call([&](grpc::ClientContext* ctx) {
                return data_plane->CreateTable(ctx, by_worker, &created);
              }).ok());
  ASSERT_TRUE(CreateTableAsAdmin(Credentials(c().certs, "client"), "by_token", kToken).ok());
  EXPECT_TRUE(TableExists("by_admin_cert"));
  EXPECT_TRUE(TableExists("by_token"));

  auto admin = Admin(Credentials(c().certs, "admin"));
  v1::GetAuditLogResponse log;
  ASSERT_TRUE(Call([&](grpc::ClientContext* ctx) {
                return admin->GetAuditLog(ctx, v1::GetAuditLogRequest(), &log);
              }).ok());
  const v1::AuditEntry* by_cert = nullptr;
  const v1::AuditEntry* by_token = nullptr;
  for (const v1::AuditEntry& entry : log.entries()) {
    if (absl::StrContains(entry.what(), "by_admin_cert")) by_cert = &entry;
    if (absl::StrContains(entry.what(), "by_token")) by_token = &entry;
    // Refused calls changed nothing, so left no entry.
    EXPECT_FALSE(absl::StrContains(entry.what(), "worker_admin_table")) << entry.what();
    EXPECT_FALSE(absl::StrContains(entry.what(), "other_ca_table")) << entry.what();
    EXPECT_FALSE(absl::StrContains(entry.who(), kToken)) << "the token leaked: " << entry.who();
  }
  ASSERT_NE(by_cert, nullptr);
  ASSERT_NE(by_token, nullptr);
  EXPECT_TRUE(absl::StrContains(by_cert->who(), "cert=ember-admin")) << by_cert->who();
  EXPECT_TRUE(absl::StrContains(by_token->who(), "cert=ember-worker")) << by_token->who();
  EXPECT_TRUE(absl::StrContains(by_token->who(), TokenId(kToken))) << by_token->who();
  // Shard 0 registered with its certificate, shard 1 with the token.
  bool registered_by_cert = false;
  for (const v1::AuditEntry& entry : log.entries()) {
    if (absl::StartsWith(entry.what(), "register_shard id=0")) {
      registered_by_cert = absl::StrContains(entry.who(), "cert=ember-server");
    }
  }
  EXPECT_TRUE(registered_by_cert);
  // Tables a worker creates through the data plane name its certificate too.
  bool worker_table = false;
  for (const v1::AuditEntry& entry : log.entries()) {
    if (absl::StrContains(entry.what(), "create_table by_worker")) {
      worker_table = absl::StrContains(entry.who(), "cert=ember-worker");
    }
  }
  EXPECT_TRUE(worker_table);

  // The JSON-lines file mirrors the log: one line per entry, in order.
  const std::string file = ReadFile(c().dir + "/audit.jsonl");
  std::vector<std::string> lines;
  std::stringstream in(file);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), static_cast<size_t>(log.entries_size()));
  for (int i = 0; i < log.entries_size(); ++i) {
    EXPECT_TRUE(
        absl::StartsWith(lines[i], absl::StrCat("{\"sequence\":", log.entries(i).sequence(), ",")))
        << lines[i];
  }
  EXPECT_TRUE(absl::StrContains(file, "cert=ember-admin\",\"what\":\"create_table"));
}

TEST_F(SecurityTest, HealthPortReportsLivenessAndReadinessInPlaintext) {
  EXPECT_EQ(Health(c().coordinator_health_port, ""), HealthCheckResponse::SERVING);
  EXPECT_EQ(Health(c().coordinator_health_port, "ember.v1.CoordinatorService"),
            HealthCheckResponse::SERVING);
  EXPECT_EQ(Health(c().shard_health_port, ""), HealthCheckResponse::SERVING);
  EXPECT_EQ(Health(c().shard_health_port, "ember.v1.PsService"), HealthCheckResponse::SERVING);
  EXPECT_EQ(Health(c().shard_health_port, "no.such.Service"), HealthCheckResponse::SERVICE_UNKNOWN);
  // The probe port serves nothing else.
  auto ps = v1::PsService::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", c().shard_health_port), grpc::InsecureChannelCredentials()));
  v1::GetShardInfoResponse info;
  const absl::Status s = Call([&](grpc::ClientContext* ctx) {
    return ps->GetShardInfo(ctx, v1::GetShardInfoRequest(), &info);
  });
  EXPECT_TRUE(absl::IsUnimplemented(s)) << s;
  // The main port answers health checks too, with its TLS.
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(c().coordinator_address, Credentials(c().certs, "client")));
  HealthCheckRequest request;
  HealthCheckResponse response;
  ASSERT_TRUE(
      Call([&](grpc::ClientContext* ctx) { return health->Check(ctx, request, &response); }).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
}

// What deploy/prometheus/alerts.yml reads from the coordinator (plain HTTP).
TEST_F(SecurityTest, CoordinatorExportsShardLiveness) {
  absl::StatusOr<std::string> body = HttpGet(c().coordinator_metrics_port, "/metrics");
  ASSERT_TRUE(body.ok()) << body.status();
  for (const char* line :
       {"ember_coordinator_shard_alive{shard=\"0\"} 1",
        "ember_coordinator_shard_alive{shard=\"1\"} 1", "ember_coordinator_shards 2",
        "ember_coordinator_shard_owned_slots{shard=\"1\"} 8192"}) {
    EXPECT_TRUE(absl::StrContains(*body, line)) << line << "\n" << *body;
  }
  EXPECT_TRUE(
      absl::StrContains(*body, "ember_coordinator_shard_heartbeat_age_seconds{shard=\"0\"}"));
}

TEST_F(SecurityTest, EmberctlSpeaksTlsAndExplainsRefusals) {
  const std::string coordinator = absl::StrCat("--coordinator=", c().coordinator_address);
  auto tls = [&](const std::string& name) {
    return absl::StrCat(" --tls_ca=", c().certs, "/ca.pem --tls_cert=", c().certs, "/", name,
                        ".pem --tls_key=", c().certs, "/", name, ".key");
  };
  RunResult status = RunBinary(EMBER_CTL_BINARY, coordinator + tls("admin") + " status");
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_TRUE(absl::StrContains(status.output, "shards 2 (2 alive)")) << status.output;

  RunResult refused = RunBinary(EMBER_CTL_BINARY, coordinator + tls("client") + " status");
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_TRUE(absl::StrContains(refused.output, "not an admin identity")) << refused.output;

  RunResult plaintext = RunBinary(EMBER_CTL_BINARY, coordinator + " --timeout_ms=2000 status");
  EXPECT_EQ(plaintext.exit_code, 1) << plaintext.output;
  EXPECT_TRUE(absl::StrContains(plaintext.output, "--tls_ca")) << plaintext.output;
}

TEST_F(SecurityTest, BadTlsFlagsExitWithUsageErrors) {
  const std::string data = absl::StrCat("--data_dir=", c().dir, "/bad_flags");
  const std::string ca = absl::StrCat(" --tls_ca=", c().certs, "/ca.pem");
  const std::string cert = absl::StrCat(" --tls_cert=", c().certs, "/server.pem");
  const std::string key = absl::StrCat(" --tls_key=", c().certs, "/server.key");
  const std::string token = absl::StrCat(" --admin_token=", kToken);
  const std::vector<UsageErrorCase> cases = {
      {data + ca + token, "all of --tls_ca, --tls_cert and --tls_key"},
      {data + " --tls_ca=/no/such/ca.pem" + cert + key + token, "cannot read '/no/such/ca.pem'"},
      {data + ca + cert + absl::StrCat(" --tls_key=", c().certs, "/server.pem") + token,
       "holds no PEM PRIVATE KEY"},
      {data + ca + cert + key, "give --admin_token_file or --admin_identities"},
      {data + ca + cert + key + token + " --health_port=70000", "--health_port"},
      // The cluster token is for plaintext clusters (cluster_token_test.cc).
      {data + ca + cert + key + token + " --cluster_token=x", "is for plaintext clusters"},
  };
  ExpectUsageErrors(EMBER_PS_BINARY, cases, UsageErrorChecks().MessageAnywhere());
  RunResult coordinator =
      RunBinary(EMBER_COORDINATOR_BINARY, absl::StrCat("--data_dir=", c().dir, "/bad") + ca);
  EXPECT_EQ(coordinator.exit_code, 2) << coordinator.output;
}

// Readiness turns NOT_SERVING when a server starts to drain, before it stops.
TEST(HealthTest, ShardReportsNotServingWhenItDrains) {
  const std::string tmpl = absl::StrCat(::testing::TempDir(), "/health_test.XXXXXX");
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  ASSERT_NE(mkdtemp(buf.data()), nullptr);
  const std::string dir = buf.data();
  const int health_port = FreePort();
  absl::StatusOr<std::unique_ptr<Process>> ps =
      Process::Start(EMBER_PS_BINARY,
                     {absl::StrCat("--data_dir=", dir, "/ps"),
                      absl::StrCat("--health_port=", health_port), "--shutdown_grace_ms=2000"},
                     "listening on ", kStartTimeout);
  ASSERT_TRUE(ps.ok()) << ps.status();
  auto stub = grpc::health::v1::Health::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", health_port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  SetDeadline(&context, absl::Seconds(30));
  HealthCheckRequest request;
  request.set_service("ember.v1.PsService");
  std::unique_ptr<grpc::ClientReader<HealthCheckResponse>> watch = stub->Watch(&context, request);
  HealthCheckResponse update;
  ASSERT_TRUE(watch->Read(&update));
  EXPECT_EQ(update.status(), HealthCheckResponse::SERVING);
  std::thread stopper([&ps] { (*ps)->Stop(absl::Seconds(10)).IgnoreError(); });
  bool saw_not_serving = false;
  while (watch->Read(&update)) {
    if (update.status() == HealthCheckResponse::NOT_SERVING) saw_not_serving = true;
  }
  stopper.join();
  EXPECT_TRUE(saw_not_serving);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

}  // namespace
}  // namespace ember
