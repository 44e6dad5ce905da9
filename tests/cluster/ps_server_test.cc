// Copyright 2026 The Ember Authors.
//
// End-to-end tests of one real ember-ps process over gRPC on loopback: pull/push
// semantics, fp16 wire encoding, exactly-once pushes, fenced routing, input
// validation and durability across a graceful restart.

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/float16.h"
#include "common/grpc_status.h"
#include "common/slot.h"
#include "common/slot_map.h"
#include "ember/v1/ps.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "server/shared/slot_owners.h"
#include "server/store/initializer.h"
#include "tests/support/deadline.h"
#include "tools/harness/process.h"

#ifndef EMBER_PS_BINARY
#error "EMBER_PS_BINARY must name the ember-ps binary"
#endif

namespace ember {
namespace {

constexpr uint32_t kDim = 8;
constexpr float kLearningRate = 0.125f;  // exact in binary: expectations are exact

std::string PackIds(const std::vector<uint64_t>& ids) {
  return std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * 8);
}

std::vector<float> UnpackFloat32(const std::string& bytes) {
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

std::string PackFloat32(const std::vector<float>& values) {
  std::string out;
  AppendFloat32Bytes(values, &out);
  return out;
}

// A thin synchronous client: every call has a deadline and returns an absl::Status
// carrying the WrongShard detail, if any.
class Client {
 public:
  explicit Client(const std::string& address)
      : stub_(v1::PsService::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {}

  absl::Status CreateTable(const v1::TableConfig& config, v1::TableConfig* normalized) {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::CreateTableRequest request;
    *request.mutable_config() = config;
    v1::CreateTableResponse response;
    absl::Status s = FromGrpcStatus(stub_->CreateTable(&context, request, &response), &context);
    if (s.ok() && normalized != nullptr) *normalized = response.config();
    return s;
  }

  absl::Status Pull(const v1::PullRequest& request, v1::PullResponse* response) {
    grpc::ClientContext context;
    SetDeadline(&context);
    return FromGrpcStatus(stub_->Pull(&context, request, response), &context);
  }

  absl::Status Push(const v1::PushRequest& request, v1::PushResponse* response) {
    grpc::ClientContext context;
    SetDeadline(&context);
    return FromGrpcStatus(stub_->Push(&context, request, response), &context);
  }

  absl::Status CheckpointShard(const v1::CheckpointShardRequest& request) {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::CheckpointShardResponse response;
    return FromGrpcStatus(stub_->CheckpointShard(&context, request, &response), &context);
  }

  absl::Status RestoreShard(const v1::RestoreShardRequest& request) {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::RestoreShardResponse response;
    return FromGrpcStatus(stub_->RestoreShard(&context, request, &response), &context);
  }

  absl::Status GetShardInfo(v1::GetShardInfoResponse* response) {
    grpc::ClientContext context;
    SetDeadline(&context);
    return FromGrpcStatus(stub_->GetShardInfo(&context, v1::GetShardInfoRequest(), response),
                          &context);
  }

 private:
  std::unique_ptr<v1::PsService::Stub> stub_;
};

class PsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string tmpl = absl::StrCat(::testing::TempDir(), "/ps_server_test.XXXXXX");
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    ASSERT_NE(mkdtemp(buf.data()), nullptr);
    dir_ = buf.data();
  }

  void TearDown() override {
    client_.reset();
    if (process_ != nullptr) {
      absl::StatusOr<int> code = process_->Stop(absl::Seconds(10));
      EXPECT_TRUE(code.ok() && *code == 0) << "ember-ps did not exit cleanly";
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  void StartServer(uint32_t shard_id = 0, uint32_t num_shards = 1) {
    absl::StatusOr<std::unique_ptr<Process>> p =
        Process::Start(EMBER_PS_BINARY,
                       {absl::StrCat("--data_dir=", dir_, "/db"), "--port=0",
                        absl::StrCat("--shard_id=", shard_id),
                        absl::StrCat("--num_shards=", num_shards), "--memory_budget_mb=64"},
                       "listening on ", absl::Seconds(30));
    ASSERT_TRUE(p.ok()) << p.status();
    process_ = std::move(*p);
    client_ = std::make_unique<Client>(process_->ready_text());
  }

  // Creates the SGD test table and remembers its normalized config.
  void CreateTable() {
    v1::TableConfig config;
    config.set_name("item");
    config.set_dim(kDim);
    config.mutable_optimizer()->set_kind(v1::OptimizerConfig::SGD);
    config.mutable_optimizer()->set_learning_rate(kLearningRate);
    ASSERT_TRUE(client_->CreateTable(config, &table_).ok());
    ASSERT_NE(table_.seed(), 0u);
  }

  std::vector<float> Init(uint64_t id) const {
    std::vector<float> v(kDim);
    InitEmbedding(table_.initializer(), table_.seed(), id, v.data(), kDim);
    return v;
  }

  // Ids whose slots the even map over `num_shards` gives to `shard`.
  std::vector<uint64_t> IdsOwnedBy(uint32_t shard, uint32_t num_shards, size_t n) const {
    std::vector<uint32_t> shards;
    for (uint32_t i = 0; i < num_shards; ++i) shards.push_back(i);
    const SlotMap map = SlotMap::Even(shards, 1);
    std::vector<uint64_t> ids;
    for (uint64_t id = 1; ids.size() < n; ++id) {
      if (map.OwnerOf(SlotOf(table_.seed(), id)) == shard) ids.push_back(id);
    }
    return ids;
  }

  v1::PullRequest PullOf(const std::vector<uint64_t>& ids,
                         v1::ValueEncoding encoding = v1::VALUE_ENCODING_FLOAT32) const {
    v1::PullRequest r;
    r.set_table("item");
    r.set_ids(PackIds(ids));
    r.set_epoch(1);
    r.set_encoding(encoding);
    return r;
  }

  v1::PushRequest PushOf(const std::vector<uint64_t>& ids, const std::vector<float>& grads,
                         uint64_t sequence) const {
    v1::PushRequest r;
    r.set_table("item");
    r.set_ids(PackIds(ids));
    r.set_grads(PackFloat32(grads));
    r.set_step(1);
    r.set_worker_id(7);
    r.set_sequence(sequence);
    r.set_epoch(1);
    return r;
  }

  std::vector<float> PullFloats(const std::vector<uint64_t>& ids) {
    v1::PullResponse response;
    const absl::Status s = client_->Pull(PullOf(ids), &response);
    EXPECT_TRUE(s.ok()) << s;
    return UnpackFloat32(response.values());
  }

  std::string dir_;
  std::unique_ptr<Process> process_;
  std::unique_ptr<Client> client_;
  v1::TableConfig table_;
};

std::vector<float> Gradients(size_t rows, float base) {
  std::vector<float> g(rows * kDim);
  for (size_t i = 0; i < g.size(); ++i) g[i] = base + 0.25f * static_cast<float>(i % 5);
  return g;
}

TEST_F(PsServerTest, PullOfUnknownIdsIsDeterministicInit) {
  StartServer();
  CreateTable();
  const std::vector<uint64_t> ids = {1, 42, 1ull << 40, ~0ull};
  const std::vector<float> got = PullFloats(ids);
  ASSERT_EQ(got.size(), ids.size() * kDim);
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::vector<float> want = Init(ids[i]);
    for (uint32_t j = 0; j < kDim; ++j) EXPECT_EQ(got[i * kDim + j], want[j]) << i << "," << j;
  }
}

TEST_F(PsServerTest, PushAppliesSgdAndPullSeesIt) {
  StartServer();
  CreateTable();
  const std::vector<uint64_t> ids = {3, 5, 9};
  const std::vector<float> grads = Gradients(ids.size(), 0.5f);
  v1::PushResponse pushed;
  ASSERT_TRUE(client_->Push(PushOf(ids, grads, 1), &pushed).ok());
  EXPECT_GT(pushed.version(), 0u);
  const std::vector<float> got = PullFloats(ids);
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::vector<float> init = Init(ids[i]);
    for (uint32_t j = 0; j < kDim; ++j) {
      EXPECT_FLOAT_EQ(got[i * kDim + j], init[j] - kLearningRate * grads[i * kDim + j]);
    }
  }
  v1::GetShardInfoResponse info;
  ASSERT_TRUE(client_->GetShardInfo(&info).ok());
  EXPECT_EQ(info.shard_id(), 0u);
  EXPECT_EQ(info.epoch(), 1u);
  EXPECT_EQ(info.owned_slots(), kNumSlots);
  EXPECT_GE(info.version(), pushed.version());
  ASSERT_EQ(info.tables_size(), 1);
  EXPECT_EQ(info.tables(0), "item");
}

TEST_F(PsServerTest, Float16PullAndPushRoundTrip) {
  StartServer();
  CreateTable();
  const std::vector<uint64_t> ids = {11, 12};
  v1::PullResponse half;
  ASSERT_TRUE(client_->Pull(PullOf(ids, v1::VALUE_ENCODING_FLOAT16), &half).ok());
  ASSERT_EQ(half.values().size(), ids.size() * kDim * 2);
  std::vector<float> decoded(ids.size() * kDim);
  DecodeFloat16Bytes(half.values(), absl::MakeSpan(decoded));
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::vector<float> init = Init(ids[i]);
    for (uint32_t j = 0; j < kDim; ++j) {
      EXPECT_NEAR(decoded[i * kDim + j], init[j], std::abs(init[j]) * 1e-3f + 1e-7f);
      EXPECT_EQ(decoded[i * kDim + j], HalfToFloat(FloatToHalf(init[j])));
    }
  }
  // Gradients exactly representable in fp16 apply exactly.
  const std::vector<float> grads = Gradients(ids.size(), -1.5f);
  v1::PushRequest push = PushOf(ids, grads, 1);
  push.set_encoding(v1::VALUE_ENCODING_FLOAT16);
  std::string packed;
  AppendFloat16Bytes(grads, &packed);
  push.set_grads(packed);
  v1::PushResponse pushed;
  ASSERT_TRUE(client_->Push(push, &pushed).ok());
  const std::vector<float> got = PullFloats(ids);
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::vector<float> init = Init(ids[i]);
    for (uint32_t j = 0; j < kDim; ++j) {
      EXPECT_FLOAT_EQ(got[i * kDim + j], init[j] - kLearningRate * grads[i * kDim + j]);
    }
  }
}

TEST_F(PsServerTest, RetriedPushIsAppliedOnce) {
  StartServer();
  CreateTable();
  const std::vector<uint64_t> ids = {21};
  const std::vector<float> grads(kDim, 1.0f);
  v1::PushResponse first, retry, next;
  ASSERT_TRUE(client_->Push(PushOf(ids, grads, 1), &first).ok());
  ASSERT_TRUE(client_->Push(PushOf(ids, grads, 1), &retry).ok());
  EXPECT_EQ(retry.version(), first.version());
  const std::vector<float> init = Init(21);
  std::vector<float> got = PullFloats(ids);
  for (uint32_t j = 0; j < kDim; ++j) EXPECT_FLOAT_EQ(got[j], init[j] - kLearningRate);

  // A new sequence applies again; another worker's sequence 1 is its own.
  ASSERT_TRUE(client_->Push(PushOf(ids, grads, 2), &next).ok());
  EXPECT_GT(next.version(), first.version());
  v1::PushRequest other = PushOf(ids, grads, 1);
  other.set_worker_id(8);
  ASSERT_TRUE(client_->Push(other, &next).ok());
  got = PullFloats(ids);
  for (uint32_t j = 0; j < kDim; ++j) {
    EXPECT_FLOAT_EQ(got[j], init[j] - kLearningRate - kLearningRate - kLearningRate);
  }

  // Sequence 0 is not a sequence.
  EXPECT_EQ(client_->Push(PushOf(ids, grads, 0), &next).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(PsServerTest, SlotOwnedByAnotherShardIsRedirected) {
  StartServer(/*shard_id=*/0, /*num_shards=*/2);
  CreateTable();
  const uint64_t mine = IdsOwnedBy(0, 2, 1)[0];
  const uint64_t theirs = IdsOwnedBy(1, 2, 1)[0];
  ASSERT_EQ(PullFloats({mine}).size(), kDim);

  v1::PullResponse response;
  const absl::Status pull = client_->Pull(PullOf({mine, theirs}), &response);
  ASSERT_EQ(pull.code(), absl::StatusCode::kFailedPrecondition) << pull;
  const std::optional<v1::WrongShard> detail = GetWrongShard(pull);
  ASSERT_TRUE(detail.has_value()) << pull;
  EXPECT_EQ(detail->slot(), SlotOf(table_.seed(), theirs));
  EXPECT_EQ(detail->owner(), 1u);
  EXPECT_EQ(detail->epoch(), 1u);

  // A rejected push changes nothing, including the id this shard owns.
  v1::PushResponse pushed;
  const absl::Status push = client_->Push(PushOf({mine, theirs}, Gradients(2, 1.0f), 1), &pushed);
  ASSERT_EQ(push.code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(GetWrongShard(push).has_value());
  EXPECT_EQ(PullFloats({mine}), Init(mine));
}

TEST_F(PsServerTest, StaleEpochIsRejected) {
  StartServer();
  CreateTable();
  for (uint64_t epoch : {uint64_t{0}}) {
    v1::PullRequest pull = PullOf({1});
    pull.set_epoch(epoch);
    v1::PullResponse response;
    const absl::Status s = client_->Pull(pull, &response);
    ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    const std::optional<v1::WrongShard> detail = GetWrongShard(s);
    ASSERT_TRUE(detail.has_value());
    EXPECT_EQ(detail->epoch(), 1u);
    EXPECT_EQ(detail->owner(), 0u);

    v1::PushRequest push = PushOf({1}, Gradients(1, 1.0f), 1);
    push.set_epoch(epoch);
    v1::PushResponse pushed;
    EXPECT_EQ(client_->Push(push, &pushed).code(), absl::StatusCode::kFailedPrecondition);
  }
  EXPECT_EQ(PullFloats({1}), Init(1));
}

// A client whose map is newer than the shard's (the shard just started, or missed the
// coordinator's update) gets a retryable UNAVAILABLE, not a redirect the client would
// have to ignore; nothing is applied.
TEST_F(PsServerTest, EpochNewerThanTheShardsIsRetryable) {
  StartServer();
  CreateTable();
  v1::PullRequest pull = PullOf({1});
  pull.set_epoch(2);
  v1::PullResponse response;
  const absl::Status s = client_->Pull(pull, &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_FALSE(GetWrongShard(s).has_value());
  v1::PushRequest push = PushOf({1}, Gradients(1, 1.0f), 1);
  push.set_epoch(2);
  v1::PushResponse pushed;
  EXPECT_EQ(client_->Push(push, &pushed).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(PullFloats({1}), Init(1));
}

TEST_F(PsServerTest, MalformedRequestsAreInvalidArgument) {
  StartServer();
  CreateTable();
  v1::PullResponse pulled;
  v1::PushResponse pushed;

  v1::PullRequest ragged = PullOf({1});
  ragged.mutable_ids()->resize(7);
  EXPECT_EQ(client_->Pull(ragged, &pulled).code(), absl::StatusCode::kInvalidArgument);
  v1::PullRequest empty = PullOf({1});
  empty.clear_ids();
  EXPECT_EQ(client_->Pull(empty, &pulled).code(), absl::StatusCode::kInvalidArgument);
  v1::PullRequest bad_encoding = PullOf({1});
  bad_encoding.set_encoding(static_cast<v1::ValueEncoding>(9));
  EXPECT_EQ(client_->Pull(bad_encoding, &pulled).code(), absl::StatusCode::kInvalidArgument);

  v1::PushRequest short_grads = PushOf({1, 2}, Gradients(2, 1.0f), 1);
  short_grads.mutable_grads()->resize(short_grads.grads().size() - 4);
  EXPECT_EQ(client_->Push(short_grads, &pushed).code(), absl::StatusCode::kInvalidArgument);
  v1::PushRequest half_length = PushOf({1, 2}, Gradients(2, 1.0f), 2);
  half_length.set_encoding(v1::VALUE_ENCODING_FLOAT16);  // fp32 bytes: twice too long
  EXPECT_EQ(client_->Push(half_length, &pushed).code(), absl::StatusCode::kInvalidArgument);
  std::vector<float> nan_grads = Gradients(1, 1.0f);
  nan_grads[3] = std::nanf("");
  EXPECT_EQ(client_->Push(PushOf({1}, nan_grads, 3), &pushed).code(),
            absl::StatusCode::kInvalidArgument);
  // None of them changed anything; a failed push's sequence is still usable.
  EXPECT_EQ(PullFloats({1}), Init(1));
  EXPECT_TRUE(client_->Push(PushOf({1}, Gradients(1, 1.0f), 3), &pushed).ok());
}

TEST_F(PsServerTest, UnknownTableIsNotFound) {
  StartServer();
  v1::PullRequest pull = PullOf({1});
  pull.set_table("nope");
  v1::PullResponse pulled;
  EXPECT_EQ(client_->Pull(pull, &pulled).code(), absl::StatusCode::kNotFound);
  v1::PushRequest push;
  push.set_table("nope");
  push.set_ids(PackIds({1}));
  push.set_sequence(1);
  push.set_epoch(1);
  v1::PushResponse pushed;
  EXPECT_EQ(client_->Push(push, &pushed).code(), absl::StatusCode::kNotFound);
}

TEST_F(PsServerTest, GracefulRestartKeepsPushedRows) {
  StartServer();
  CreateTable();
  std::vector<uint64_t> ids(64);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = 1000 + 17 * i;
  v1::PushResponse pushed;
  ASSERT_TRUE(client_->Push(PushOf(ids, Gradients(ids.size(), 0.75f), 1), &pushed).ok());
  const std::vector<float> before = PullFloats(ids);
  ASSERT_NE(std::vector<float>(before.begin(), before.begin() + kDim), Init(ids[0]));

  // An idle connected channel holds gRPC's graceful shutdown until the grace period
  // (--shutdown_grace_ms) ends; drop it so the test does not wait on that.
  client_.reset();
  absl::StatusOr<int> code = process_->Stop(absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  process_.reset();

  StartServer();
  CreateTable();  // tables are re-declared after a restart (later: by the coordinator)
  EXPECT_EQ(PullFloats(ids), before);
  v1::GetShardInfoResponse info;
  ASSERT_TRUE(client_->GetShardInfo(&info).ok());
  EXPECT_GE(info.version(), pushed.version());
}

// A job's checkpoint cuts the rows of one attempt: a shard that restarted and was not
// restored for the attempt (its rows are whatever it had on disk) must refuse, or a
// recovery could roll back to a cut no attempt ever had (the no-lost-sample
// invariant); so must a shard already restored for a later attempt.
TEST_F(PsServerTest, JobCheckpointNeedsTheShardRestoredForItsAttempt) {
  StartServer();
  CreateTable();
  v1::PushResponse pushed;
  ASSERT_TRUE(client_->Push(PushOf({1, 2, 3}, Gradients(3, 1.0f), 1), &pushed).ok());
  auto checkpoint = [&](uint64_t attempt, const std::string& name) {
    v1::CheckpointShardRequest request;
    request.set_dir(absl::StrCat(dir_, "/", name));
    request.set_name(name);
    request.set_attempt(attempt);
    return client_->CheckpointShard(request);
  };
  auto restore = [&](uint64_t attempt) {
    v1::RestoreShardRequest request;  // no chain: adopt the current rows
    request.set_attempt(attempt);
    request.set_epoch(1);
    request.set_slot_owners(PackSlotOwners(SlotMap::Even({0}, 1)));
    return client_->RestoreShard(request);
  };
  // A fresh process (as after a restart): restored for no attempt yet.
  EXPECT_EQ(checkpoint(1, "a1-before").code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(checkpoint(0, "not-a-job").ok());  // an operator's cut names no attempt
  ASSERT_TRUE(restore(1).ok());
  EXPECT_TRUE(checkpoint(1, "a1").ok());
  EXPECT_EQ(checkpoint(2, "a2-early").code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(restore(2).ok());
  EXPECT_EQ(checkpoint(1, "a1-late").code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(checkpoint(2, "a2").ok());
}

}  // namespace
}  // namespace ember
