// Copyright 2026 The Ember Authors.
//
// Bad input over the wire against real ember-ps and ember-coordinator processes: every
// case gets its documented gRPC status code and leaves the state byte-identical (the
// PS: GetShardInfo and the pulled bytes of a fixed id set; the coordinator: its
// cluster map and audit log), and both processes keep answering. Also: flag errors
// of ember-ps, and graceful shutdown with an idle client connected.
//
// clang-format off
//  #  call                   bad input                             status
//  1  Push                   grads sized for another dim           INVALID_ARGUMENT
//  2  Push                   NaN gradient                          INVALID_ARGUMENT
//  3  Push                   +Inf gradient                         INVALID_ARGUMENT
//  4  Push                   -Inf gradient                         INVALID_ARGUMENT
//  5  Pull / Push            empty batch (no ids)                  INVALID_ARGUMENT
//  6  Pull / Push            more ids than --max_batch_keys        INVALID_ARGUMENT (1)
//  7  Pull / Push            message over --max_message_mb         RESOURCE_EXHAUSTED (2)
//  8  Pull / Push            unknown table                         NOT_FOUND
//  9  Pull / Push            id whose slot another shard owns      FAILED_PRECONDITION + WrongShard
// 10  Pull / Push            stale epoch (0)                       FAILED_PRECONDITION + WrongShard
// 11  Pull / Push            future epoch (2)                      UNAVAILABLE (shard behind: retry)
// 12  Push                   duplicate (worker_id, sequence)       OK, applied once
// 13  Push                   sequence 0                            INVALID_ARGUMENT
// 14  Pull / Push            ids bytes not a multiple of 8         INVALID_ARGUMENT
// 15  Push                   grads bytes of the wrong length       INVALID_ARGUMENT
// 16  Pull / Push            unknown value encoding                INVALID_ARGUMENT
// 17  Push                   fp16 grads of the wrong length        INVALID_ARGUMENT
// 18  PS CreateTable         bad name ("bad name!", "", 65 chars)  INVALID_ARGUMENT
// 19  PS CreateTable         dim 0, dim 5000 (> 4096)              INVALID_ARGUMENT
// 20  PS CreateTable         negative learning rate                INVALID_ARGUMENT
// 21  PS CreateTable         existing name, different dim          ALREADY_EXISTS
// 22  AdminService.*         no ember-admin-token metadata         UNAUTHENTICATED
// 23  AdminService.*         wrong token                           UNAUTHENTICATED
// 24  SetSlotOwner           slot >= 16384                         INVALID_ARGUMENT
// 25  KvPut                  empty key                             INVALID_ARGUMENT
// 26  KvGet                  empty key                             NOT_FOUND (3)
// 27  Coordinator            invalid table config (dim 0)          INVALID_ARGUMENT
//     CreateTable
// 28  LeaveCluster           unknown shard                         FAILED_PRECONDITION
// 29  LeaveCluster           incarnation 0                         INVALID_ARGUMENT
// 30  LeaveCluster           another incarnation than registered   FAILED_PRECONDITION
// 31  LeaveCluster           the last shard holding slots          FAILED_PRECONDITION
// clang-format on
//
// (1) The same code as the store's StoreOptions.max_batch_keys check: an oversized
//     batch is a malformed request, not a resource the server ran out of.
// (2) Set by gRPC itself before the request reaches the service.
// (3) KvGet does not validate keys: an empty key is simply absent.

#include <sys/wait.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/float16.h"
#include "common/grpc_status.h"
#include "common/slot.h"
#include "common/slot_map.h"
#include "ember/v1/admin.grpc.pb.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "ember/v1/ps.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/support/deadline.h"
#include "tests/support/ps_wire.h"
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

constexpr uint32_t kDim = 8;
constexpr uint32_t kMaxBatchKeys = 64;
constexpr char kToken[] = "bad-input-test-token";
constexpr absl::Duration kCallDeadline = kDefaultCallDeadline;
// The grace period the servers get on the command line, and the bound the shutdown
// tests hold them to: an idle client must not make them use it.
constexpr int kGraceMs = 20000;
constexpr absl::Duration kExitBound = absl::Seconds(10);

// An idle client channel reads its socket only when gRPC's backup poller runs (every
// 5 s by default), so it answers a server's shutdown GOAWAY/PING late. Make that "never"
// (before gRPC reads its configuration, at the first channel) so that a server that
// waited for idle clients would use its whole grace period and fail the shutdown tests,
// instead of passing after the 5 s poll.
const bool kSlowBackupPoll =
    setenv("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS", "600000", /*overwrite=*/1) == 0;

std::string TempDir(absl::string_view name) {
  const std::string tmpl = absl::StrCat(::testing::TempDir(), "/", name, ".XXXXXX");
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) return "";
  return buf.data();
}

// One bad request and what it must get.
struct Case {
  std::string name;
  absl::StatusCode code;
  std::function<absl::Status()> call;
  bool wrong_shard = false;  // the status must carry the WrongShard trailer
};

// ---------------------------------------------------------------------------------
// ember-ps

class PsBadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir("bad_input_ps");
    ASSERT_FALSE(dir_.empty());
    // Shard 0 of 2 (so that some ids belong to another shard), a small batch limit and
    // a 1 MiB message limit.
    absl::StatusOr<std::unique_ptr<Process>> p = Process::Start(
        EMBER_PS_BINARY,
        {absl::StrCat("--data_dir=", dir_, "/db"), "--port=0", "--shard_id=0", "--num_shards=2",
         "--memory_budget_mb=64", absl::StrCat("--max_batch_keys=", kMaxBatchKeys),
         "--max_message_mb=1", absl::StrCat("--shutdown_grace_ms=", kGraceMs)},
        "listening on ", absl::Seconds(30));
    ASSERT_TRUE(p.ok()) << p.status();
    process_ = std::move(*p);
    stub_ = v1::PsService::NewStub(
        grpc::CreateChannel(process_->ready_text(), grpc::InsecureChannelCredentials()));

    v1::TableConfig config;
    config.set_name("item");
    config.set_dim(kDim);
    config.mutable_optimizer()->set_kind(v1::OptimizerConfig::SGD);
    config.mutable_optimizer()->set_learning_rate(0.125f);
    ASSERT_TRUE(CreateTable(config, &table_).ok());
    const SlotMap map = SlotMap::Even({0, 1}, /*epoch=*/1);
    for (uint64_t id = 1; mine_.size() < 16 || theirs_.empty(); ++id) {
      if (map.OwnerOf(SlotOf(table_.seed(), id)) == 0) {
        if (mine_.size() < 16) mine_.push_back(id);
      } else if (theirs_.empty()) {
        theirs_.push_back(id);
      }
    }
    // Some stored rows, so that "unchanged" covers stored rows and init vectors.
    v1::PushResponse pushed;
    ASSERT_TRUE(Push(PushOf({mine_[0], mine_[1]}, Grads(2, 0.5f), /*sequence=*/1), &pushed).ok());
    first_version_ = pushed.version();
  }

  void TearDown() override {
    if (process_ != nullptr) {
      // Still answering, then a clean exit (with this client still connected).
      v1::GetShardInfoResponse info;
      EXPECT_TRUE(GetShardInfo(&info).ok()) << "ember-ps stopped answering";
      absl::StatusOr<int> code = process_->Stop(kExitBound);
      EXPECT_TRUE(code.ok() && *code == 0) << "ember-ps did not exit cleanly";
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  absl::Status CreateTable(const v1::TableConfig& config, v1::TableConfig* normalized = nullptr) {
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

  absl::Status GetShardInfo(v1::GetShardInfoResponse* response) {
    grpc::ClientContext context;
    SetDeadline(&context);
    return FromGrpcStatus(stub_->GetShardInfo(&context, v1::GetShardInfoRequest(), response),
                          &context);
  }

  v1::PullRequest PullOf(const std::vector<uint64_t>& ids) const {
    v1::PullRequest r;
    r.set_table("item");
    r.set_ids(PackIds(ids));
    r.set_epoch(1);
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

  static std::vector<float> Grads(size_t rows, float base) {
    std::vector<float> g(rows * kDim);
    for (size_t i = 0; i < g.size(); ++i) g[i] = base + 0.25f * static_cast<float>(i % 5);
    return g;
  }

  // The shard's observable state: GetShardInfo and the pulled bytes of mine_.
  std::string Snapshot() {
    v1::GetShardInfoResponse info;
    const absl::Status s = GetShardInfo(&info);
    EXPECT_TRUE(s.ok()) << s;
    // Call counters and latencies count every call, failed ones too: not state.
    info.clear_requests();
    info.clear_latency_counts();
    info.clear_pulled_keys();  // the snapshot's own Pull counts
    info.clear_hot_keys();     // decayed rates move with time
    v1::PullResponse pulled;
    const absl::Status p = Pull(PullOf(mine_), &pulled);
    EXPECT_TRUE(p.ok()) << p;
    EXPECT_EQ(pulled.values().size(), mine_.size() * kDim * 4);
    return absl::StrCat(info.SerializeAsString(), "|", pulled.values());
  }

  // Runs every case: its code (and trailer), and the state unchanged after it.
  void RunCases(const std::vector<Case>& cases) {
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name);
      const std::string before = Snapshot();
      const absl::Status s = c.call();
      EXPECT_EQ(s.code(), c.code) << s;
      if (c.wrong_shard) {
        const std::optional<v1::WrongShard> detail = GetWrongShard(s);
        ASSERT_TRUE(detail.has_value()) << s;
        EXPECT_EQ(detail->epoch(), 1u);
      }
      EXPECT_EQ(Snapshot(), before) << "state changed";
    }
  }

  std::string dir_;
  std::unique_ptr<Process> process_;
  std::unique_ptr<v1::PsService::Stub> stub_;
  v1::TableConfig table_;
  std::vector<uint64_t> mine_;    // 16 ids shard 0 owns; the first two have rows
  std::vector<uint64_t> theirs_;  // 1 id shard 1 owns
  uint64_t first_version_ = 0;
};

TEST_F(PsBadInputTest, MalformedPushes) {
  v1::PushResponse r;
  uint64_t seq = 100;  // a fresh sequence per case: no case is rejected as a duplicate
  auto push = [&](v1::PushRequest request) { return Push(request, &r); };
  auto with_grad = [&](float bad) {
    std::vector<float> g = Grads(2, 1.0f);
    g[5] = bad;
    return PushOf({mine_[0], mine_[2]}, g, ++seq);
  };
  std::vector<Case> cases = {
      {"grads for dim 16", absl::StatusCode::kInvalidArgument,
       [&] {
         v1::PushRequest p = PushOf({mine_[0], mine_[2]}, Grads(4, 1.0f), ++seq);
         return push(p);  // 2 ids * 16 floats
       }},
      {"NaN gradient", absl::StatusCode::kInvalidArgument,
       [&] { return push(with_grad(std::nanf(""))); }},
      {"+Inf gradient", absl::StatusCode::kInvalidArgument,
       [&] { return push(with_grad(std::numeric_limits<float>::infinity())); }},
      {"-Inf gradient", absl::StatusCode::kInvalidArgument,
       [&] { return push(with_grad(-std::numeric_limits<float>::infinity())); }},
      {"empty push", absl::StatusCode::kInvalidArgument,
       [&] { return push(PushOf({}, {}, ++seq)); }},
      {"push over max_batch_keys", absl::StatusCode::kInvalidArgument,
       [&] {
         std::vector<uint64_t> ids(kMaxBatchKeys + 1);
         for (size_t i = 0; i < ids.size(); ++i) ids[i] = mine_[i % mine_.size()];
         return push(PushOf(ids, Grads(ids.size(), 1.0f), ++seq));
       }},
      {"push over max_message_mb", absl::StatusCode::kResourceExhausted,
       [&] {
         v1::PushRequest p = PushOf({mine_[0]}, Grads(1, 1.0f), ++seq);
         p.mutable_grads()->resize(2 << 20);
         return push(p);
       }},
      {"push to unknown table", absl::StatusCode::kNotFound,
       [&] {
         v1::PushRequest p = PushOf({mine_[0]}, Grads(1, 1.0f), ++seq);
         p.set_table("nope");
         return push(p);
       }},
      {"sequence 0", absl::StatusCode::kInvalidArgument,
       [&] { return push(PushOf({mine_[0]}, Grads(1, 1.0f), 0)); }},
      {"push ids not a multiple of 8", absl::StatusCode::kInvalidArgument,
       [&] {
         v1::PushRequest p = PushOf({mine_[0]}, Grads(1, 1.0f), ++seq);
         p.mutable_ids()->push_back('\0');
         return push(p);
       }},
      {"grads one byte short", absl::StatusCode::kInvalidArgument,
       [&] {
         v1::PushRequest p = PushOf({mine_[0], mine_[2]}, Grads(2, 1.0f), ++seq);
         p.mutable_grads()->pop_back();
         return push(p);
       }},
      {"push with unknown encoding", absl::StatusCode::kInvalidArgument,
       [&] {
         v1::PushRequest p = PushOf({mine_[0]}, Grads(1, 1.0f), ++seq);
         p.set_encoding(static_cast<v1::ValueEncoding>(7));
         return push(p);
       }},
      {"fp16 grads of fp32 length", absl::StatusCode::kInvalidArgument,
       [&] {
         v1::PushRequest p = PushOf({mine_[0]}, Grads(1, 1.0f), ++seq);
         p.set_encoding(v1::VALUE_ENCODING_FLOAT16);
         return push(p);
       }},
      {"fp16 grads one element short", absl::StatusCode::kInvalidArgument,
       [&] {
         v1::PushRequest p = PushOf({mine_[0]}, {}, ++seq);
         p.set_encoding(v1::VALUE_ENCODING_FLOAT16);
         std::string half;
         const std::vector<float> g = Grads(1, 1.0f);
         AppendFloat16Bytes(absl::MakeConstSpan(g).subspan(1), &half);
         p.set_grads(half);
         return push(p);
       }},
      {"duplicate (worker, sequence)", absl::StatusCode::kOk,
       [&] {
         absl::Status s = push(PushOf({mine_[0], mine_[1]}, Grads(2, 0.5f), 1));
         if (s.ok() && r.version() != first_version_) {
           return absl::InternalError(absl::StrCat("retry got version ", r.version(),
                                                   ", the first push ", first_version_));
         }
         return s;
       }},
  };
  RunCases(cases);
  // A rejected push's sequence was not consumed.
  v1::PushResponse pushed;
  EXPECT_TRUE(Push(PushOf({mine_[3]}, Grads(1, 1.0f), 101), &pushed).ok());
}

TEST_F(PsBadInputTest, MalformedPulls) {
  v1::PullResponse r;
  auto pull = [&](v1::PullRequest request) { return Pull(request, &r); };
  std::vector<Case> cases = {
      {"empty pull", absl::StatusCode::kInvalidArgument, [&] { return pull(PullOf({})); }},
      {"pull over max_batch_keys", absl::StatusCode::kInvalidArgument,
       [&] { return pull(PullOf(std::vector<uint64_t>(kMaxBatchKeys + 1, mine_[0]))); }},
      {"pull over max_message_mb", absl::StatusCode::kResourceExhausted,
       [&] { return pull(PullOf(std::vector<uint64_t>((2 << 20) / 8, mine_[0]))); }},
      {"pull of unknown table", absl::StatusCode::kNotFound,
       [&] {
         v1::PullRequest p = PullOf({mine_[0]});
         p.set_table("nope");
         return pull(p);
       }},
      {"pull ids not a multiple of 8", absl::StatusCode::kInvalidArgument,
       [&] {
         v1::PullRequest p = PullOf({mine_[0]});
         p.mutable_ids()->resize(12);
         return pull(p);
       }},
      {"pull with unknown encoding", absl::StatusCode::kInvalidArgument,
       [&] {
         v1::PullRequest p = PullOf({mine_[0]});
         p.set_encoding(static_cast<v1::ValueEncoding>(9));
         return pull(p);
       }},
  };
  RunCases(cases);
}

TEST_F(PsBadInputTest, MisroutedCallsCarryWrongShard) {
  v1::PullResponse pulled;
  v1::PushResponse pushed;
  uint64_t seq = 200;
  auto pull_at = [&](std::vector<uint64_t> ids, uint64_t epoch) {
    v1::PullRequest p = PullOf(ids);
    p.set_epoch(epoch);
    return Pull(p, &pulled);
  };
  auto push_at = [&](std::vector<uint64_t> ids, uint64_t epoch) {
    v1::PushRequest p = PushOf(ids, Grads(ids.size(), 1.0f), ++seq);
    p.set_epoch(epoch);
    return Push(p, &pushed);
  };
  const auto kFp = absl::StatusCode::kFailedPrecondition;
  std::vector<Case> cases = {
      {"pull of a slot shard 1 owns", kFp,
       [&] {
         return pull_at({mine_[0], theirs_[0]}, 1);
       },
       true},
      {"push to a slot shard 1 owns", kFp,
       [&] {
         return push_at({mine_[0], theirs_[0]}, 1);
       },
       true},
      {"pull at stale epoch 0", kFp, [&] { return pull_at({mine_[0]}, 0); }, true},
      {"push at stale epoch 0", kFp, [&] { return push_at({mine_[0]}, 0); }, true},
      // The shard's map lags the client's: retryable, and nothing to redirect to.
      {"pull at future epoch 2", absl::StatusCode::kUnavailable,
       [&] { return pull_at({mine_[0]}, 2); }, false},
      {"push at future epoch 2", absl::StatusCode::kUnavailable,
       [&] { return push_at({mine_[0]}, 2); }, false},
  };
  RunCases(cases);
  const absl::Status s = pull_at({theirs_[0]}, 1);
  const std::optional<v1::WrongShard> detail = GetWrongShard(s);
  ASSERT_TRUE(detail.has_value()) << s;
  EXPECT_EQ(detail->slot(), SlotOf(table_.seed(), theirs_[0]));
  EXPECT_EQ(detail->owner(), 1u);
}

TEST_F(PsBadInputTest, InvalidTableConfigs) {
  auto create = [&](std::function<void(v1::TableConfig*)> edit) {
    return [this, edit] {
      v1::TableConfig c;
      c.set_name("fresh");
      c.set_dim(4);
      edit(&c);
      return CreateTable(c);
    };
  };
  const auto kIa = absl::StatusCode::kInvalidArgument;
  std::vector<Case> cases = {
      {"name with a space", kIa, create([](v1::TableConfig* c) { c->set_name("bad name!"); })},
      {"empty name", kIa, create([](v1::TableConfig* c) { c->set_name(""); })},
      {"65-char name", kIa, create([](v1::TableConfig* c) { c->set_name(std::string(65, 'a')); })},
      {"dim 0", kIa, create([](v1::TableConfig* c) { c->set_dim(0); })},
      {"dim 5000", kIa, create([](v1::TableConfig* c) { c->set_dim(5000); })},
      {"negative learning rate", kIa,
       create([](v1::TableConfig* c) { c->mutable_optimizer()->set_learning_rate(-0.1f); })},
      {"existing name, other dim", absl::StatusCode::kAlreadyExists, create([](v1::TableConfig* c) {
         c->set_name("item");
         c->set_dim(kDim * 2);
       })},
  };
  RunCases(cases);
  v1::GetShardInfoResponse info;
  ASSERT_TRUE(GetShardInfo(&info).ok());
  ASSERT_EQ(info.tables_size(), 1);
  EXPECT_EQ(info.tables(0), "item");
}

// An idle client (its channel connected, no call in progress) must not hold the
// shutdown for the grace period: SIGTERM exits 0 well within it.
TEST_F(PsBadInputTest, IdleClientDoesNotHoldShutdown) {
  v1::GetShardInfoResponse info;
  ASSERT_TRUE(GetShardInfo(&info).ok());  // the channel is connected and stays so
  absl::StatusOr<int> code = process_->Stop(kExitBound);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << "ember-ps did not exit within " << kExitBound << " of SIGTERM "
                      << "with --shutdown_grace_ms=" << kGraceMs << " (137: killed)";
  process_.reset();
}

// ---------------------------------------------------------------------------------
// ember-coordinator

class CoordinatorBadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir("bad_input_coordinator");
    ASSERT_FALSE(dir_.empty());
    absl::StatusOr<std::unique_ptr<Process>> p = Process::Start(
        EMBER_COORDINATOR_BINARY,
        {absl::StrCat("--data_dir=", dir_, "/db"), "--port=0", "--expected_shards=1",
         absl::StrCat("--admin_token=", kToken), absl::StrCat("--shutdown_grace_ms=", kGraceMs)},
        "listening on ", absl::Seconds(30));
    ASSERT_TRUE(p.ok()) << p.status();
    process_ = std::move(*p);
    auto channel = grpc::CreateChannel(process_->ready_text(), grpc::InsecureChannelCredentials());
    stub_ = v1::CoordinatorService::NewStub(channel);
    admin_ = v1::AdminService::NewStub(channel);
  }

  void TearDown() override {
    if (process_ != nullptr) {
      EXPECT_TRUE(Snapshot().has_value()) << "ember-coordinator stopped answering";
      absl::StatusOr<int> code = process_->Stop(kExitBound);
      EXPECT_TRUE(code.ok() && *code == 0) << "ember-coordinator did not exit cleanly";
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // The cluster map and the audit log, serialized; nullopt if a call failed.
  std::optional<std::string> Snapshot() {
    grpc::ClientContext map_context;
    SetDeadline(&map_context);
    v1::GetClusterMapResponse map;
    if (!stub_->GetClusterMap(&map_context, v1::GetClusterMapRequest(), &map).ok()) {
      return std::nullopt;
    }
    for (v1::ShardInfo& shard : *map.mutable_shards()) shard.clear_millis_since_heartbeat();
    grpc::ClientContext log_context;
    SetDeadline(&log_context);
    log_context.AddMetadata("ember-admin-token", kToken);
    v1::GetAuditLogResponse log;
    if (!admin_->GetAuditLog(&log_context, v1::GetAuditLogRequest(), &log).ok()) {
      return std::nullopt;
    }
    return absl::StrCat(map.SerializeAsString(), "|", log.SerializeAsString());
  }

  void RunCases(const std::vector<Case>& cases) {
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name);
      const std::optional<std::string> before = Snapshot();
      ASSERT_TRUE(before.has_value());
      const absl::Status s = c.call();
      EXPECT_EQ(s.code(), c.code) << s;
      EXPECT_EQ(Snapshot(), before) << "state changed";
    }
  }

  // SetSlotOwner with `token` (none when empty).
  absl::Status SetSlotOwner(const std::string& token, uint32_t slot) {
    grpc::ClientContext context;
    SetDeadline(&context);
    if (!token.empty()) context.AddMetadata("ember-admin-token", token);
    v1::SetSlotOwnerRequest request;
    request.set_slot(slot);
    request.set_shard_id(0);
    v1::SetSlotOwnerResponse response;
    return FromGrpcStatus(admin_->SetSlotOwner(&context, request, &response), nullptr);
  }

  absl::Status ListShards(const std::string& token) {
    grpc::ClientContext context;
    SetDeadline(&context);
    if (!token.empty()) context.AddMetadata("ember-admin-token", token);
    v1::ListShardsResponse response;
    return FromGrpcStatus(admin_->ListShards(&context, v1::ListShardsRequest(), &response),
                          nullptr);
  }

  std::string dir_;
  std::unique_ptr<Process> process_;
  std::unique_ptr<v1::CoordinatorService::Stub> stub_;
  std::unique_ptr<v1::AdminService::Stub> admin_;
};

TEST_F(CoordinatorBadInputTest, RejectsBadCalls) {
  // Slots assigned (epoch 1), so SetSlotOwner's checks, not its precondition, decide.
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::RegisterShardRequest request;
    request.set_shard_id(0);
    request.set_address("127.0.0.1:1");
    v1::RegisterShardResponse response;
    ASSERT_TRUE(stub_->RegisterShard(&context, request, &response).ok());
    ASSERT_TRUE(response.assigned());
  }
  const auto kIa = absl::StatusCode::kInvalidArgument;
  const auto kUnauth = absl::StatusCode::kUnauthenticated;
  std::vector<Case> cases = {
      {"ListShards without token", kUnauth, [&] { return ListShards(""); }},
      {"ListShards with a wrong token", kUnauth, [&] { return ListShards("wrong"); }},
      {"SetSlotOwner without token", kUnauth, [&] { return SetSlotOwner("", 5); }},
      {"SetSlotOwner with a wrong token", kUnauth,
       [&] { return SetSlotOwner(std::string(kToken) + "x", 5); }},
      {"SetSlotOwner slot 16384", kIa, [&] { return SetSlotOwner(kToken, kNumSlots); }},
      {"SetSlotOwner slot 0xffffffff", kIa, [&] { return SetSlotOwner(kToken, 0xffffffffu); }},
      {"KvPut of an empty key", kIa,
       [&] {
         grpc::ClientContext context;
         SetDeadline(&context);
         v1::KvPutRequest request;
         request.set_value("v");
         v1::KvPutResponse response;
         return FromGrpcStatus(stub_->KvPut(&context, request, &response), nullptr);
       }},
      {"KvGet of an empty key", absl::StatusCode::kNotFound,
       [&] {
         grpc::ClientContext context;
         SetDeadline(&context);
         v1::KvGetRequest request;
         v1::KvGetResponse response;
         return FromGrpcStatus(stub_->KvGet(&context, request, &response), nullptr);
       }},
      {"CreateTable with dim 0", kIa,
       [&] {
         grpc::ClientContext context;
         SetDeadline(&context);
         v1::CoordinatorCreateTableRequest request;
         request.mutable_config()->set_name("item");
         v1::CoordinatorCreateTableResponse response;
         return FromGrpcStatus(stub_->CreateTable(&context, request, &response), nullptr);
       }},
  };
  RunCases(cases);
}

// A shard's LeaveCluster (its drain at SIGTERM) that cannot be served is refused, and
// nothing is marked: the shard exits 1 and keeps its slots.
TEST_F(CoordinatorBadInputTest, RefusesLeaveClusterItCannotServe) {
  {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::RegisterShardRequest request;
    request.set_shard_id(0);
    request.set_address("127.0.0.1:1");
    request.set_incarnation(7);
    v1::RegisterShardResponse response;
    ASSERT_TRUE(stub_->RegisterShard(&context, request, &response).ok());
    ASSERT_TRUE(response.assigned());
  }
  auto leave = [&](uint32_t shard_id, uint64_t incarnation) {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::LeaveClusterRequest request;
    request.set_shard_id(shard_id);
    request.set_incarnation(incarnation);
    v1::LeaveClusterResponse response;
    return FromGrpcStatus(stub_->LeaveCluster(&context, request, &response), nullptr);
  };
  const auto kFp = absl::StatusCode::kFailedPrecondition;
  RunCases({
      {"an unknown shard", kFp, [&] { return leave(9, 7); }},
      {"incarnation 0", absl::StatusCode::kInvalidArgument, [&] { return leave(0, 0); }},
      {"another process's incarnation", kFp, [&] { return leave(0, 8); }},
      {"the last shard holding slots", kFp, [&] { return leave(0, 7); }},
  });
}

// An idle client does not hold the shutdown: exit 0 well within the grace period.
TEST_F(CoordinatorBadInputTest, IdleClientDoesNotHoldShutdown) {
  ASSERT_TRUE(Snapshot().has_value());  // the channel is connected and stays so
  absl::StatusOr<int> code = process_->Stop(kExitBound);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << "ember-coordinator did not exit within " << kExitBound
                      << " of SIGTERM with --shutdown_grace_ms=" << kGraceMs << " (137: killed)";
  process_.reset();
}

// A KvGet waiting at SIGTERM fails with UNAVAILABLE (the coordinator completes it
// rather than letting it hold the grace period), and the coordinator exits 0.
TEST_F(CoordinatorBadInputTest, WaitingKvGetFailsUnavailableAtShutdown) {
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::KvGetRequest request;
  request.set_key("never-put");
  request.set_wait_ms(60000);
  v1::KvGetResponse response;
  absl::Notification done;
  grpc::Status status;
  stub_->async()->KvGet(&context, &request, &response, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  // Cannot observe "the KvGet is waiting" from outside; a KvPut of another key after it
  // on the same channel makes it very likely, and either order must exit cleanly.
  {
    grpc::ClientContext put_context;
    SetDeadline(&put_context);
    v1::KvPutRequest put;
    put.set_key("other");
    v1::KvPutResponse put_response;
    ASSERT_TRUE(stub_->KvPut(&put_context, put, &put_response).ok());
  }
  absl::StatusOr<int> code = process_->Stop(kExitBound);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << "ember-coordinator did not exit within " << kExitBound
                      << " of SIGTERM with --shutdown_grace_ms=" << kGraceMs;
  process_.reset();
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kCallDeadline));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
}

// ---------------------------------------------------------------------------------
// Flags

TEST(PsFlagsTest, HelpPrintsUsageAndExitsZero) {
  for (const char* flag : {"--help", "-h"}) {
    const RunResult r = RunBinary(EMBER_PS_BINARY, flag);
    EXPECT_EQ(r.exit_code, 0) << flag;
    EXPECT_TRUE(absl::StartsWith(r.output, "usage: ember-ps")) << r.output;
    EXPECT_TRUE(absl::StrContains(r.output, "--max_batch_keys")) << r.output;
  }
}

TEST(PsFlagsTest, BadFlagsExitTwoNamingTheFlag) {
  // Each: the arguments, and what the first line of the message must contain.
  const std::vector<UsageErrorCase> cases = {
      {"--port=0", "--data_dir is required"},
      {"--data_dir=/tmp/x --port=abc", "--port: bad number 'abc'"},
      {"--data_dir=/tmp/x --port=", "--port: bad number ''"},
      {"--data_dir=/tmp/x --port=70000", "--port must be <= 65535"},
      {"--data_dir=/tmp/x --port=-1", "--port: bad number '-1'"},
      {"--data_dir=/tmp/x --shard_id=2 --num_shards=2", "--shard_id must be < --num_shards"},
      {"--data_dir=/tmp/x --num_shards=0", "--num_shards must be >= 1"},
      {"--data_dir=/tmp/x --heartbeat_ms=0", "--heartbeat_ms must be > 0"},
      {"--data_dir=/tmp/x --memory_budget_mb=-1", "--memory_budget_mb must be in"},
      {"--data_dir=/tmp/x --memory_limit_mb=128", "--memory_limit_mb=128 is too small"},
      {"--data_dir=/tmp/x --memory_limit_mb=256 --memory_budget_mb=200",
       "--memory_limit_mb=256 is less than its shares"},
      {"--data_dir=/tmp/x --memory_limit_mb=512 --max_inflight_mb=0",
       "--memory_limit_mb=512 conflicts with --max_inflight_mb=0"},
      {"--data_dir=/tmp/x --max_message_mb=0", "--max_message_mb must be in [1, 2047]"},
      {"--data_dir=/tmp/x --max_message_mb=4096", "--max_message_mb must be in [1, 2047]"},
      {"--data_dir=/tmp/x --max_batch_keys=0", "--max_batch_keys must be >= 1"},
      {"--data_dir=/tmp/x --max_batch_keys=1e6", "--max_batch_keys: bad number '1e6'"},
      {"--data_dir=/tmp/x --shutdown_grace_ms=-5", "--shutdown_grace_ms must be >= 0"},
      {"--data_dir=/tmp/x --metrics_port=-2", "--metrics_port must be in [-1, 65535]"},
      {"--data_dir=/tmp/x --wal=maybe", "--wal: expected true or false"},
      {"--data_dir=/tmp/x --drain_timeout_ms=0", "--drain_timeout_ms must be > 0"},
      {"--data_dir=/tmp/x --drain_on_sigterm=maybe", "--drain_on_sigterm: expected true or false"},
      {"--data_dir=/tmp/x --port", "--port needs =value"},
      {"--data_dir=/tmp/x --no_such_flag=1", "unknown flag --no_such_flag"},
      {"--data_dir=/tmp/x stray", "unexpected argument 'stray'"},
  };
  ExpectUsageErrors(
      EMBER_PS_BINARY, cases,
      UsageErrorChecks().FirstLinePrefix("ember-ps: ").HintOnly("see 'ember-ps --help'"));
}

TEST(CoordinatorFlagsTest, HelpAndBadFlags) {
  const RunResult help = RunBinary(EMBER_COORDINATOR_BINARY, "--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(absl::StartsWith(help.output, "usage: ember-coordinator")) << help.output;
  const std::vector<UsageErrorCase> cases = {
      {"--data_dir=/tmp/x --port=abc", "--port: bad number 'abc'"},
      {"--data_dir=/tmp/x --heartbeat_timeout_ms=0", "--heartbeat_timeout_ms must be > 0"},
      {"--data_dir=/tmp/x --shutdown_grace_ms=-1", "--shutdown_grace_ms must be >= 0"},
      {"--data_dir=/tmp/x --policy_retry_ms=0", "--policy_retry_ms must be > 0"},
      {"--data_dir=/tmp/x --admin_token=a --admin_token_file=/f", "not both"},
  };
  ExpectUsageErrors(EMBER_COORDINATOR_BINARY, cases);
}

}  // namespace
}  // namespace ember
