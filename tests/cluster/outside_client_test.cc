// Copyright 2026 The Ember Authors.
//
// What an outside client could do (issue 28, section 1), against real processes on
// loopback: an ember-coordinator, one ember-ps shard and, where a case needs it, an
// ember-serving follower, reached the way a client written outside the project would
// (plain stubs from proto/ember/v1, and a generic stub for bytes that are no message).
//
// clang-format off
//  #  call                        outside input                              answer
//  1  Push (SGD/Adagrad/Adam/FTRL) finite gradients (3e38) whose update      INVALID_ARGUMENT, rows, state
//                               would make a row or its state non-finite   and version unchanged; a normal
//                                                                          push after it applies
//  2  Push                        a (worker, sequence) applied before, sent  FAILED_PRECONDITION naming the
//                               again with other gradients or other ids    worker and the sequence
//  3  Push                        sequence 2^64-1 or 2^63                    INVALID_ARGUMENT; the worker's
//                                                                          next push applies
//  4  PS Push/CreateTable/        request bytes that are no protobuf         INVALID_ARGUMENT naming the
//     GetShardInfo, Pull (raw),   message                                  method (not UNIMPLEMENTED or
//     coordinator KvGet/                                                   INTERNAL with no message)
//     DescribeTable/CreateTable,
//     serving Lookup/
//     GetServingStatus
//  5  PS Pull, Push               a 4 MB table name                          NOT_FOUND with a short message
//     coordinator DescribeTable,  a 1 MB name or key                         (not RESOURCE_EXHAUSTED)
//     KvGet
// clang-format on

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/grpc_status.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "ember/v1/ps.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/support/deadline.h"
#include "tests/support/local_cluster.h"
#include "tests/support/ps_wire.h"
#include "tests/support/scratch_dir.h"

namespace ember {
namespace {

constexpr uint32_t kDim = 4;
constexpr uint64_t kWorker = 7;
constexpr float kHuge = 3e38f;  // finite; its square and twice it are not

class OutsideClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok()) << dir_.error();
    LocalClusterOptions options;
    options.dir = dir_.path();
    options.shards = 1;
    cluster_ = std::make_unique<LocalCluster>(std::move(options));
    ASSERT_TRUE(cluster_->Start().ok());
    ASSERT_TRUE(cluster_->WaitForSlots().ok());
    ps_channel_ =
        grpc::CreateChannel(cluster_->shard_address(0), grpc::InsecureChannelCredentials());
    coordinator_channel_ =
        grpc::CreateChannel(cluster_->coordinator_address(), grpc::InsecureChannelCredentials());
    ps_ = v1::PsService::NewStub(ps_channel_);
    coordinator_ = v1::CoordinatorService::NewStub(coordinator_channel_);
    v1::GetShardInfoResponse info;
    ASSERT_TRUE(GetShardInfo(&info).ok());
    epoch_ = info.epoch();
  }

  void TearDown() override {
    if (cluster_ != nullptr) {
      EXPECT_TRUE(cluster_->StopAll().ok());
    }
  }

  absl::Status CreateTable(const std::string& name, v1::OptimizerConfig::Kind kind, float lr) {
    v1::CreateTableRequest request;
    request.mutable_config()->set_name(name);
    request.mutable_config()->set_dim(kDim);
    request.mutable_config()->mutable_optimizer()->set_kind(kind);
    request.mutable_config()->mutable_optimizer()->set_learning_rate(lr);
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::CreateTableResponse response;
    return FromGrpcStatus(ps_->CreateTable(&context, request, &response), &context);
  }

  absl::Status GetShardInfo(v1::GetShardInfoResponse* info) {
    grpc::ClientContext context;
    SetDeadline(&context);
    return FromGrpcStatus(ps_->GetShardInfo(&context, v1::GetShardInfoRequest(), info), &context);
  }

  v1::PushRequest PushOf(const std::string& table, const std::vector<uint64_t>& ids,
                         const std::vector<float>& grads, uint64_t sequence) const {
    v1::PushRequest r;
    r.set_table(table);
    r.set_ids(PackIds(ids));
    r.set_grads(PackFloat32(grads));
    r.set_step(1);
    r.set_worker_id(kWorker);
    r.set_sequence(sequence);
    r.set_epoch(epoch_);
    return r;
  }

  absl::Status Push(const v1::PushRequest& request, v1::PushResponse* response = nullptr) {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::PushResponse ignored;
    return FromGrpcStatus(ps_->Push(&context, request, response ? response : &ignored), &context);
  }

  absl::Status Pull(const std::string& table, const std::vector<uint64_t>& ids,
                    std::string* values) {
    v1::PullRequest request;
    request.set_table(table);
    request.set_ids(PackIds(ids));
    request.set_epoch(epoch_);
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::PullResponse response;
    absl::Status s = FromGrpcStatus(ps_->Pull(&context, request, &response), &context);
    if (values != nullptr) *values = response.values();
    return s;
  }

  // What a refused push must leave as it was: the pulled bytes of `ids` and the
  // shard's version.
  std::string State(const std::string& table, const std::vector<uint64_t>& ids) {
    std::string values;
    const absl::Status pulled = Pull(table, ids, &values);
    EXPECT_TRUE(pulled.ok()) << pulled;
    v1::GetShardInfoResponse info;
    EXPECT_TRUE(GetShardInfo(&info).ok());
    return absl::StrCat(values, "|", info.version());
  }

  // Sends `bytes` as the request of `method` through a generic stub: no message
  // parsing on this side, as from a client with a broken encoder.
  static grpc::Status SendBytes(const std::shared_ptr<grpc::Channel>& channel,
                                const std::string& method, const std::string& bytes) {
    grpc::GenericStub stub(channel);
    grpc::ClientContext context;
    SetDeadline(&context);
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    grpc::Status result;
    absl::Notification done;
    stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
      result = std::move(s);
      done.Notify();
    });
    done.WaitForNotification();  // bounded by the context's deadline
    return result;
  }

  ScratchDir dir_{"outside_client_test"};
  std::unique_ptr<LocalCluster> cluster_;
  std::shared_ptr<grpc::Channel> ps_channel_;
  std::shared_ptr<grpc::Channel> coordinator_channel_;
  std::unique_ptr<v1::PsService::Stub> ps_;
  std::unique_ptr<v1::CoordinatorService::Stub> coordinator_;
  uint64_t epoch_ = 0;
};

// 1: under every optimizer, finite gradients that would overflow the row or its state
// are refused before anything is written; the rows stay finite and a normal push still
// applies.
TEST_F(OutsideClientTest, HugeFiniteGradientsAreRefusedUnderEveryOptimizer) {
  struct Kind {
    const char* table;
    v1::OptimizerConfig::Kind kind;
    float lr;
    int pushes_until_refused;  // SGD: w - 3e38 fits once, the second overflows
  };
  const std::vector<Kind> kinds = {{"sgd", v1::OptimizerConfig::SGD, 1.0f, 2},
                                   {"adagrad", v1::OptimizerConfig::ADAGRAD, 0.1f, 1},
                                   {"adam", v1::OptimizerConfig::ADAM, 0.01f, 1},
                                   {"ftrl", v1::OptimizerConfig::FTRL, 0.1f, 1}};
  const std::vector<uint64_t> ids = {1, 2, 3};
  uint64_t sequence = 0;
  for (const Kind& k : kinds) {
    SCOPED_TRACE(k.table);
    ASSERT_TRUE(CreateTable(k.table, k.kind, k.lr).ok());
    ASSERT_TRUE(Push(PushOf(k.table, {1, 2}, std::vector<float>(2 * kDim, 0.5f), ++sequence)).ok());
    std::vector<float> huge(ids.size() * kDim, 0.25f);
    huge[kDim + 1] = kHuge;  // id 2, in the middle of the batch
    for (int i = 1; i < k.pushes_until_refused; ++i) {
      ASSERT_TRUE(Push(PushOf(k.table, ids, huge, ++sequence)).ok());
    }
    const std::string before = State(k.table, ids);
    const absl::Status refused = Push(PushOf(k.table, ids, huge, ++sequence));
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
    EXPECT_TRUE(absl::StrContains(refused.message(), "non-finite")) << refused;
    EXPECT_TRUE(absl::StrContains(refused.message(), "id 2")) << refused;
    EXPECT_EQ(State(k.table, ids), before) << "a refused push changed the shard";
    // The refused sequence was not consumed, and a normal push applies.
    v1::PushResponse pushed;
    ASSERT_TRUE(
        Push(PushOf(k.table, ids, std::vector<float>(ids.size() * kDim, 0.25f), sequence), &pushed)
            .ok());
    std::string values;
    ASSERT_TRUE(Pull(k.table, ids, &values).ok());
    EXPECT_NE(absl::StrCat(values, "|", pushed.version()), before);
    std::vector<float> floats(values.size() / 4);
    std::memcpy(floats.data(), values.data(), values.size());
    for (float f : floats) EXPECT_TRUE(std::isfinite(f)) << f;
  }
}

// 2: a retry must be the same push; a (worker, sequence) reused for another payload is
// refused, not answered OK with its payload dropped.
TEST_F(OutsideClientTest, ASequenceReusedForAnotherPushIsRefused) {
  ASSERT_TRUE(CreateTable("item", v1::OptimizerConfig::SGD, 0.5f).ok());
  const std::vector<float> grads(2 * kDim, 0.5f);
  v1::PushResponse first;
  ASSERT_TRUE(Push(PushOf("item", {1, 2}, grads, 5), &first).ok());
  const std::string before = State("item", {1, 2, 3});
  std::vector<float> other = grads;
  other[3] = -0.5f;
  for (const v1::PushRequest& reused :
       {PushOf("item", {1, 2}, other, 5), PushOf("item", {1, 3}, grads, 5)}) {
    const absl::Status s = Push(reused);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "sequence 5 of worker 7")) << s;
    EXPECT_EQ(State("item", {1, 2, 3}), before);
  }
  // The true retry still gets the first application's version.
  v1::PushResponse retry;
  ASSERT_TRUE(Push(PushOf("item", {1, 2}, grads, 5), &retry).ok());
  EXPECT_EQ(retry.version(), first.version());
}

// 3: the top of the sequence range is refused, so it cannot leave the worker with no
// sequence above its highest (every later push ABORTED until the shard restarts).
TEST_F(OutsideClientTest, TheTopSequencesAreRefusedAndTheWorkerGoesOn) {
  ASSERT_TRUE(CreateTable("item", v1::OptimizerConfig::SGD, 0.5f).ok());
  const std::vector<float> grads(kDim, 0.5f);
  for (uint64_t top : {std::numeric_limits<uint64_t>::max(), uint64_t{1} << 63}) {
    const absl::Status s = Push(PushOf("item", {1}, grads, top));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "out of range")) << s;
  }
  EXPECT_TRUE(Push(PushOf("item", {1}, grads, 1)).ok());
  EXPECT_TRUE(Push(PushOf("item", {1}, grads, 2)).ok());
}

// 4: bytes that are no protobuf message (a length-delimited field 1 that claims 100
// bytes and has 3) get INVALID_ARGUMENT with a message, on every service.
TEST_F(OutsideClientTest, UnparsableRequestsAreInvalidArgument) {
  ASSERT_TRUE(std::filesystem::create_directories(dir_.path() + "/ckpt"));
  ASSERT_TRUE(
      cluster_->StartFollower(0, {absl::StrCat("--checkpoint_dir=", dir_.path(), "/ckpt")}).ok());
  auto serving_channel =
      grpc::CreateChannel(cluster_->follower(0)->ready_text(), grpc::InsecureChannelCredentials());
  const std::string garbage(
      "\x0a\x64"
      "abc",
      5);
  struct Target {
    std::shared_ptr<grpc::Channel> channel;
    std::string method;
  };
  const std::vector<Target> targets = {
      {ps_channel_, "/ember.v1.PsService/Push"},
      {ps_channel_, "/ember.v1.PsService/CreateTable"},
      {ps_channel_, "/ember.v1.PsService/GetShardInfo"},
      {ps_channel_, "/ember.v1.PsService/Pull"},  // a raw method: its own parse
      {coordinator_channel_, "/ember.v1.CoordinatorService/KvGet"},
      {coordinator_channel_, "/ember.v1.CoordinatorService/DescribeTable"},
      {coordinator_channel_, "/ember.v1.CoordinatorService/CreateTable"},
      {serving_channel, "/ember.v1.ServingService/Lookup"},
      {serving_channel, "/ember.v1.ServingService/GetServingStatus"},
  };
  for (const Target& t : targets) {
    SCOPED_TRACE(t.method);
    const grpc::Status s = SendBytes(t.channel, t.method, garbage);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_FALSE(s.error_message().empty());
    EXPECT_TRUE(absl::StrContains(s.error_message(), "Pull") ||
                absl::StrContains(s.error_message(), t.method))
        << s.error_message();
  }
  // A method no service has stays UNIMPLEMENTED.
  EXPECT_EQ(SendBytes(ps_channel_, "/ember.v1.PsService/NoSuchMethod", garbage).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  // And the servers still answer well-formed calls.
  v1::GetShardInfoResponse info;
  EXPECT_TRUE(GetShardInfo(&info).ok());
}

// 5: a huge client string is not echoed whole: the answer is the real error with a
// short message, not RESOURCE_EXHAUSTED from a trailer the client cannot take.
TEST_F(OutsideClientTest, AHugeNameGetsItsErrorWithAShortMessage) {
  const std::string four_mb(4 << 20, 't');
  constexpr size_t kShort = 512;
  std::string values;
  absl::Status s = Pull(four_mb, {1}, &values);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s.message().substr(0, 200);
  EXPECT_LT(s.message().size(), kShort);
  EXPECT_TRUE(absl::StrContains(s.message(), "(4194304 bytes)")) << s.message().substr(0, 300);
  s = Push(PushOf(four_mb, {1}, std::vector<float>(kDim, 0.5f), 1));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s.message().substr(0, 200);
  EXPECT_LT(s.message().size(), kShort);

  const std::string one_mb(1 << 20, 'k');
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::DescribeTableRequest request;
    request.set_name(one_mb);
    v1::DescribeTableResponse response;
    s = FromGrpcStatus(coordinator_->DescribeTable(&context, request, &response), &context);
    EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s.message().substr(0, 200);
    EXPECT_LT(s.message().size(), kShort);
  }
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::KvGetRequest request;
    request.set_key(one_mb);
    v1::KvGetResponse response;
    s = FromGrpcStatus(coordinator_->KvGet(&context, request, &response), &context);
    EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s.message().substr(0, 200);
    EXPECT_LT(s.message().size(), kShort);
  }
}

}  // namespace
}  // namespace ember
