// Copyright 2026 The Ember Authors.
//
// ember-serving against a real cluster on loopback (the emberctl fixture: a coordinator,
// two ember-ps, table "item" with 200 pushed rows), without checkpoints: a follower
// that starts empty follows both shards from version 0. Pins the follower's outcomes:
// its rows equal the shards' rows (digests), Lookup answers exactly what the PS answers,
// a killed follower resumes from its persisted positions, bad Lookup input is refused.

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ember/v1/serving.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/serving/serving_client.h"
#include "tests/support/http_get.h"
#include "tests/support/ports.h"
#include "tests/tools/emberctl_fixture.h"

namespace ember {
namespace {

class ServingTest : public EmberctlTest {
 protected:
  std::unique_ptr<Process> StartServing(const std::string& name,
                                        const std::vector<std::string>& extra = {}) {
    return ember::StartServing(address_, dir_ + "/checkpoints", dir_ + "/" + name,
                               /*persist_ms=*/100, extra);
  }
  static std::unique_ptr<v1::ServingService::Stub> Stub(const Process& p) { return ServingStub(p); }
  static v1::ServingStatus Status(v1::ServingService::Stub& stub) { return ServingStatusOf(stub); }
  static TableDigests Digests(v1::ServingService::Stub& stub) { return ServingDigests(stub); }

  // The follower applied every shard's newest version.
  bool CaughtUp(v1::ServingService::Stub& stub) {
    const v1::ServingStatus status = Status(stub);
    if (!status.ready() || status.shards_size() != kCtlShards) return false;
    for (const v1::ShardFollowState& s : status.shards()) {
      if (s.applied_version() != ShardInfo(static_cast<int>(s.shard_id())).version()) return false;
    }
    return true;
  }

  static grpc::Status Lookup(v1::ServingService::Stub& stub, const std::string& table,
                             const std::vector<uint64_t>& ids, v1::LookupResponse* response,
                             bool deadline = true) {
    grpc::ClientContext context;
    if (deadline) context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::LookupRequest request;
    request.set_table(table);
    request.set_ids(std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * 8));
    return stub.Lookup(&context, request, response);
  }

  static std::vector<float> Floats(const v1::LookupResponse& response) {
    std::vector<float> out(response.values().size() / 4);
    std::memcpy(out.data(), response.values().data(), response.values().size());
    return out;
  }

  static std::vector<uint64_t> PushedIds(uint64_t first, int count) {
    std::vector<uint64_t> ids;
    for (int i = 0; i < count; ++i) ids.push_back((first + i) * 7919);
    return ids;
  }
};

TEST_F(ServingTest, FollowerRowsEqualTheShardsAndLookupEqualsPull) {
  std::unique_ptr<Process> serving = StartServing("f1");
  ASSERT_NE(serving, nullptr);
  auto stub = Stub(*serving);
  ASSERT_TRUE(Eventually([&] { return CaughtUp(*stub); })) << Status(*stub).DebugString();
  EXPECT_EQ(Digests(*stub), ShardDigests());

  // New pushes reach the follower; a second follower started now agrees.
  ASSERT_NO_FATAL_FAILURE(PushRows(1000, 150));
  ASSERT_NO_FATAL_FAILURE(PushRows(1, 50));  // updates of rows it already has
  std::unique_ptr<Process> second = StartServing("f2");
  ASSERT_NE(second, nullptr);
  auto stub2 = Stub(*second);
  ASSERT_TRUE(Eventually([&] { return CaughtUp(*stub) && CaughtUp(*stub2); }));
  const auto shards = ShardDigests();
  EXPECT_EQ(shards.at("item").first, 350u);
  EXPECT_EQ(Digests(*stub), shards);
  EXPECT_EQ(Digests(*stub2), shards);

  // Lookup of pushed and never-pushed ids: exactly the PS's answer.
  std::vector<uint64_t> ids = PushedIds(1, 200);
  for (uint64_t id = 5; id < 25; ++id) ids.push_back(id);  // not multiples of 7919: unknown
  std::vector<float> expected(ids.size() * 4);
  ASSERT_TRUE(client_->Pull("item", ids, absl::MakeSpan(expected)).ok());
  v1::LookupResponse response;
  const grpc::Status looked = Lookup(*stub, "item", ids, &response);
  ASSERT_TRUE(looked.ok()) << looked.error_message();
  EXPECT_EQ(Floats(response), expected);
  EXPECT_EQ(response.unknown_ids(), 20u);
}

TEST_F(ServingTest, UnknownIdsReadAsZerosWhenConfigured) {
  std::unique_ptr<Process> serving = StartServing("zeros", {"--unknown_ids=zeros"});
  ASSERT_NE(serving, nullptr);
  auto stub = Stub(*serving);
  ASSERT_TRUE(Eventually([&] { return CaughtUp(*stub); }));
  const std::vector<uint64_t> ids = {3, 7919, 4};
  std::vector<float> pulled(ids.size() * 4);
  ASSERT_TRUE(client_->Pull("item", ids, absl::MakeSpan(pulled)).ok());
  v1::LookupResponse response;
  ASSERT_TRUE(Lookup(*stub, "item", ids, &response).ok());
  const std::vector<float> got = Floats(response);
  ASSERT_EQ(got.size(), 12u);
  EXPECT_EQ(response.unknown_ids(), 2u);
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(got[j], 0.0f);
    EXPECT_EQ(got[4 + j], pulled[4 + j]);  // 7919 is a stored row
    EXPECT_EQ(got[8 + j], 0.0f);
  }
}

TEST_F(ServingTest, LookupRefusesBadInput) {
  std::unique_ptr<Process> serving = StartServing("bad", {"--max_batch_keys=16"});
  ASSERT_NE(serving, nullptr);
  auto stub = Stub(*serving);
  ASSERT_TRUE(Eventually([&] { return CaughtUp(*stub); }));
  v1::LookupResponse response;
  EXPECT_EQ(Lookup(*stub, "nope", {1}, &response).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Lookup(*stub, "item", {}, &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Lookup(*stub, "item", std::vector<uint64_t>(17, 1), &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  const grpc::Status no_deadline = Lookup(*stub, "item", {1}, &response, /*deadline=*/false);
  EXPECT_EQ(no_deadline.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(no_deadline.error_message().find("deadline"), std::string::npos);
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::LookupRequest request;
    request.set_table("item");
    request.set_ids(std::string(7, 'x'));  // not a whole uint64
    EXPECT_EQ(stub->Lookup(&context, request, &response).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  // The follower still serves after all of that.
  EXPECT_TRUE(Lookup(*stub, "item", {7919}, &response).ok());
}

TEST_F(ServingTest, KilledFollowerResumesFromItsPositions) {
  std::unique_ptr<Process> serving = StartServing("f1");
  ASSERT_NE(serving, nullptr);
  {
    auto stub = Stub(*serving);
    ASSERT_TRUE(Eventually([&] { return CaughtUp(*stub); }));
    // Positions are persisted every 100 ms: wait for one persist after catching up.
    absl::SleepFor(absl::Milliseconds(300));  // a persist period, not event ordering
  }
  ASSERT_TRUE(serving->Kill().ok());
  ASSERT_NO_FATAL_FAILURE(PushRows(2000, 100));
  serving = StartServing("f1");
  ASSERT_NE(serving, nullptr);
  auto stub = Stub(*serving);
  // Resumed from its positions, not bootstrapped again.
  EXPECT_EQ(Status(*stub).bootstraps(), 0u);
  ASSERT_TRUE(Eventually([&] { return CaughtUp(*stub); }));
  EXPECT_EQ(Digests(*stub), ShardDigests());
  const v1::ServingStatus status = Status(*stub);
  for (const v1::ShardFollowState& s : status.shards()) {
    EXPECT_EQ(s.last_error(), "") << "shard " << s.shard_id();
  }
}

TEST_F(ServingTest, RestartedShardTellsTheFollowerToBootstrap) {
  std::unique_ptr<Process> serving = StartServing("f1");
  ASSERT_NE(serving, nullptr);
  auto stub = Stub(*serving);
  ASSERT_TRUE(Eventually([&] { return CaughtUp(*stub); }));
  ASSERT_TRUE(cluster_->shard(0)->Kill().ok());
  const absl::Status restarted = cluster_->StartShard(0);  // a fresh port, the same data
  ASSERT_TRUE(restarted.ok()) << restarted;
  // Its old stream ended; without a checkpoint there is nothing to bootstrap from, and
  // the follower says so instead of applying a history that no longer exists.
  ASSERT_TRUE(Eventually([&] {
    const v1::ServingStatus status = Status(*stub);
    for (const v1::ShardFollowState& s : status.shards()) {
      if (s.shard_id() == 0 && s.last_error().find("re-bootstrap") != std::string::npos) {
        return true;
      }
    }
    return false;
  })) << Status(*stub).DebugString();
  EXPECT_FALSE(Status(*stub).ready());
}

// Slot moves while pushes run: the rows of moved slots come from their new owner's
// stream (a resync of the gained slots at the switch), and the follower ends with the
// shards' rows, with no stale copy from the old owner.
TEST_F(ServingTest, FollowerStaysEqualAcrossSlotMovesUnderPushes) {
  std::unique_ptr<Process> serving = StartServing("f1");
  ASSERT_NE(serving, nullptr);
  auto stub = Stub(*serving);
  ASSERT_TRUE(Eventually([&] { return CaughtUp(*stub); }));
  std::atomic<bool> stop{false};
  std::atomic<int> pushes{0};
  std::thread pusher([&] {
    std::vector<uint64_t> ids = PushedIds(1, 400);
    std::vector<float> grads(ids.size() * 4, 0.125f);
    while (!stop.load()) {
      if (client_->Push("item", ids, grads, /*step=*/2).ok()) pushes.fetch_add(1);
    }
  });
  const CtlResult away = Ctl({"slots", "move", "--slots=0-8191", "--to=1"});
  const CtlResult back = Ctl({"slots", "move", "--slots=0-4095,12000-16383", "--to=0"});
  stop.store(true);
  pusher.join();
  ASSERT_EQ(away.exit_code, 0) << away;
  ASSERT_EQ(back.exit_code, 0) << back;
  EXPECT_GT(pushes.load(), 0);
  ASSERT_TRUE(Eventually([&] { return CaughtUp(*stub); })) << Status(*stub).DebugString();
  EXPECT_EQ(Digests(*stub), ShardDigests());
  const v1::ServingStatus status = Status(*stub);
  uint64_t resyncs = 0;
  for (const v1::ShardFollowState& s : status.shards()) resyncs += s.resyncs_applied();
  EXPECT_GE(resyncs, 2u) << "each move's target resynced the slots it gained";
  // Lookups agree with the PS for every pushed id.
  const std::vector<uint64_t> ids = PushedIds(1, 400);
  std::vector<float> expected(ids.size() * 4);
  ASSERT_TRUE(client_->Pull("item", ids, absl::MakeSpan(expected)).ok());
  v1::LookupResponse response;
  ASSERT_TRUE(Lookup(*stub, "item", ids, &response).ok());
  EXPECT_EQ(Floats(response), expected);
}

TEST_F(ServingTest, EmberctlServingCommands) {
  std::unique_ptr<Process> serving = StartServing("f1");
  ASSERT_NE(serving, nullptr);
  auto stub = Stub(*serving);
  ASSERT_TRUE(Eventually([&] { return CaughtUp(*stub); }));
  const std::string at = absl::StrCat("--serving=", serving->ready_text());

  CtlResult status = Ctl({"serving", "status", at});
  ASSERT_EQ(status.exit_code, 0) << status;
  EXPECT_NE(status.out.find(": ready,"), std::string::npos) << status;
  EXPECT_EQ(RowOf(status.out, "0").size(), 10u) << status;  // one row per shard
  CtlResult json = Ctl({"serving", "status", at, "--json"});
  ASSERT_EQ(json.exit_code, 0) << json;
  EXPECT_TRUE(IsJsonObject(json.out)) << json;
  EXPECT_NE(json.out.find("\"ready\":true"), std::string::npos) << json;

  // The follower's checksum line equals the cluster's (`emberctl checksum`).
  CtlResult mine = Ctl({"serving", "checksum", at});
  CtlResult cluster = Ctl({"checksum"});
  ASSERT_EQ(mine.exit_code, 0) << mine;
  ASSERT_EQ(cluster.exit_code, 0) << cluster;
  const std::vector<std::string> follower_row = RowOf(mine.out, "item");
  const std::vector<std::string> cluster_row = RowOf(cluster.out, "item");
  ASSERT_EQ(follower_row.size(), 3u) << mine;
  ASSERT_GE(cluster_row.size(), 3u) << cluster;
  EXPECT_EQ(follower_row[1], cluster_row[1]);  // rows
  EXPECT_EQ(follower_row[2], cluster_row[2]);  // digest

  CtlResult lookup = Ctl({"serving", "lookup", at, "--table=item", "--ids=7919,3"});
  ASSERT_EQ(lookup.exit_code, 0) << lookup;
  EXPECT_EQ(RowOf(lookup.out, "7919").size(), 5u) << lookup;  // id + 4 floats
  EXPECT_NE(lookup.out.find("(1 of 2 ids without a stored row"), std::string::npos) << lookup;
  EXPECT_EQ(Ctl({"serving", "lookup", at, "--table=item", "--ids=7,x"}).exit_code, 2);
  EXPECT_EQ(Ctl({"serving", "lookup", at, "--table=nope", "--ids=7"}).exit_code, 1);
  EXPECT_EQ(Ctl({"serving", "status"}).exit_code, 2) << "--serving is required";
  EXPECT_EQ(Ctl({"serving", "versions", at}).exit_code, 0);
  const CtlResult pin = Ctl({"serving", "pin", at, "ckpt-000000000001-a1"});
  EXPECT_EQ(pin.exit_code, 1) << pin;
  EXPECT_NE(pin.err.find("no valid checkpoint"), std::string::npos) << pin;
}

// The follower's Prometheus endpoint carries per-shard lag and progress.
TEST_F(ServingTest, MetricsShowPerShardLagAndProgress) {
  absl::StatusOr<int> port = FreeLoopbackPort();
  ASSERT_TRUE(port.ok()) << port.status();
  // The ready line is the later "metrics on" line, so the gRPC port is chosen here.
  absl::StatusOr<std::unique_ptr<Process>> serving = Process::Start(
      EMBER_SERVING_BINARY,
      {absl::StrCat("--coordinator=", address_), absl::StrCat("--checkpoint_dir=", dir_, "/ck"),
       absl::StrCat("--data_dir=", dir_, "/metrics"), absl::StrCat("--port=", *port),
       "--metrics_port=0"},
      "metrics on ", absl::Seconds(60));
  ASSERT_TRUE(serving.ok()) << serving.status();
  int metrics_port = 0;
  const std::string& address = (*serving)->ready_text();
  ASSERT_TRUE(absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &metrics_port)) << address;
  auto stub = v1::ServingService::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", *port), grpc::InsecureChannelCredentials()));
  ASSERT_TRUE(Eventually([&] { return CaughtUp(*stub); }));
  v1::LookupResponse response;
  ASSERT_TRUE(Lookup(*stub, "item", {7919}, &response).ok());
  absl::StatusOr<std::string> text = HttpGet(metrics_port, "/metrics");
  ASSERT_TRUE(text.ok()) << text.status();
  for (const char* series :
       {"ember_serving_lag_versions{shard=\"0\"} 0", "ember_serving_lag_versions{shard=\"1\"} 0",
        "ember_serving_connected{shard=\"1\"} 1", "ember_serving_ready 1",
        "ember_serving_lag_seconds{shard=\"0\"}", "ember_serving_rows_applied_total{shard=\"0\"}",
        "ember_rpc_total{code=\"OK\",method=\"Lookup\"} 1"}) {
    EXPECT_NE(text->find(series), std::string::npos) << series << "\n" << *text;
  }
}

TEST_F(ServingTest, ModelVersionsWithoutCheckpoints) {
  std::unique_ptr<Process> serving = StartServing("f1");
  ASSERT_NE(serving, nullptr);
  auto stub = Stub(*serving);
  grpc::ClientContext list_context;
  v1::ListModelVersionsResponse versions;
  ASSERT_TRUE(stub->ListModelVersions(&list_context, {}, &versions).ok());
  EXPECT_EQ(versions.versions_size(), 0);
  grpc::ClientContext pin_context;
  v1::PinModelVersionRequest pin;
  pin.set_checkpoint("ckpt-000000000100-a1");
  v1::PinModelVersionResponse pinned;
  EXPECT_EQ(stub->PinModelVersion(&pin_context, pin, &pinned).error_code(),
            grpc::StatusCode::NOT_FOUND);
  grpc::ClientContext dense_context;
  v1::GetDenseParametersResponse dense;
  EXPECT_EQ(stub->GetDenseParameters(&dense_context, {}, &dense).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace ember
