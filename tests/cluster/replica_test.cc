// Copyright 2026 The Ember Authors.
//
// Hot-key replication between PS shards (hotkeys.proto): three shards, each a real
// PsServiceImpl over its own RocksDB behind its own gRPC server on loopback, hosted in
// this process so the test can hand them hot sets (ApplyHotSet) without a coordinator.
// Everything else goes over gRPC: pushes, owner pulls, replica pulls, PutReplicas.
//
// Checked: after each synchronous push, replica pulls equal owner pulls bitwise;
// replica_missing for keys that are not hot, non-holders, keys not copied yet, a
// stale periodic copy (steps) and copies whose owner changed; drops; a push whose
// holder cannot take the copy fails UNAVAILABLE, and its retry (answered from the
// dedup window) copies again; malformed PutReplicas is refused and changes nothing;
// heavy hitters and GetShardInfo report the load. One test runs a real ember-ps
// process: the binary serves PutReplicas and replica reads.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/float16.h"
#include "common/grpc_status.h"
#include "common/slot.h"
#include "common/slot_map.h"
#include "ember/v1/ps.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "server/ps/ps_metrics.h"
#include "server/ps/ps_service.h"
#include "server/shared/shard_storage.h"
#include "server/shared/slot_owners.h"
#include "server/store/initializer.h"
#include "tests/cluster/in_process_shard.h"
#include "tests/support/deadline.h"
#include "tools/harness/process.h"

#ifndef EMBER_PS_BINARY
#error "EMBER_PS_BINARY must name the ember-ps binary"
#endif

namespace ember {
namespace {

constexpr uint32_t kDim = 8;
constexpr uint32_t kShards = 3;
constexpr absl::Duration kDeadline = absl::Seconds(10);
constexpr absl::Duration kSettle = absl::Seconds(20);

std::string PackIds(const std::vector<uint64_t>& ids) {
  return std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * 8);
}

using Shard = InProcessShard;

class ReplicaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string tmpl = absl::StrCat(::testing::TempDir(), "/replica_test.XXXXXX");
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    ASSERT_NE(mkdtemp(buf.data()), nullptr);
    dir_ = buf.data();
    map_ = SlotMap::Even({0, 1, 2}, /*epoch=*/1);
    for (uint32_t id = 0; id < kShards; ++id) StartShard(id);
    v1::TableConfig config;
    config.set_name("item");
    config.set_dim(kDim);
    config.mutable_optimizer()->set_kind(v1::OptimizerConfig::SGD);
    config.mutable_optimizer()->set_learning_rate(0.125f);
    for (uint32_t id = 0; id < kShards; ++id) {
      v1::CreateTableRequest request;
      *request.mutable_config() = config;
      v1::CreateTableResponse response;
      ASSERT_TRUE(shards_[id].service->DoCreateTable(request, &response).ok());
      table_ = response.config();
    }
  }

  void TearDown() override {
    for (Shard& shard : shards_) {
      shard.service->StopReplication();
      EXPECT_TRUE(shard.Stop().ok());
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  void StartShard(uint32_t id) {
    absl::StatusOr<Shard> shard =
        Shard::Start(dir_, id, map_, 64 << 20, [](PsServiceImpl& service, ShardStorage& storage) {
          service.EnableCheckpoints(&storage);
          HotKeyOptions hot;
          hot.heavy_hitters.sample_every = 1;  // exact counts for the report checks
          hot.owner.initial_retry = absl::Milliseconds(20);
          hot.owner.round_timeout = absl::Seconds(2);
          service.SetHotKeyOptions(hot);
        });
    ASSERT_TRUE(shard.ok()) << shard.status();
    shards_.push_back(std::move(*shard));
  }

  // `n` ids of `table_` owned by `owner` in the even map.
  std::vector<uint64_t> IdsOwnedBy(uint32_t owner, size_t n, uint64_t first = 1) const {
    std::vector<uint64_t> ids;
    for (uint64_t id = first; ids.size() < n; ++id) {
      if (map_.OwnerOf(SlotOf(table_.seed(), id)) == owner) ids.push_back(id);
    }
    return ids;
  }

  v1::HotSet HotSetOf(uint64_t version, const std::vector<uint64_t>& hot, uint32_t replicas,
                      uint32_t refresh_interval_ms = 0) const {
    v1::HotSet set;
    set.set_version(version);
    set.set_replicas(replicas);
    set.set_refresh_interval_ms(refresh_interval_ms);
    v1::HotKeyTable* table = set.add_tables();
    table->set_table("item");
    for (uint64_t id : hot) table->add_keys()->set_id(id);
    for (uint32_t id = 0; id < kShards; ++id) {
      v1::HotSetHolder* holder = set.add_holders();
      holder->set_shard_id(id);
      holder->set_address(shards_[id].address);
    }
    return set;
  }

  void ApplyEverywhere(const v1::HotSet& set) {
    for (Shard& shard : shards_) shard.service->ApplyHotSet(set);
    for (Shard& shard : shards_) ASSERT_TRUE(shard.service->WaitForReplicasSettled(kSettle));
  }

  absl::Status Pull(uint32_t shard, const std::vector<uint64_t>& ids, bool replica,
                    v1::PullResponse* response, int64_t step = 0,
                    v1::ValueEncoding encoding = v1::VALUE_ENCODING_FLOAT32) {
    v1::PullRequest request;
    request.set_table("item");
    request.set_ids(PackIds(ids));
    request.set_epoch(replica ? 0 : 1);
    request.set_encoding(encoding);
    request.set_replica_read(replica);
    request.set_step(step);
    grpc::ClientContext context;
    SetDeadline(&context, kDeadline);
    return FromGrpcStatus(shards_[shard].stub->Pull(&context, request, response), &context);
  }

  // The owner's values of `ids` (as bytes, for bitwise comparison).
  std::string OwnerValues(uint32_t owner, const std::vector<uint64_t>& ids) {
    v1::PullResponse response;
    const absl::Status s = Pull(owner, ids, /*replica=*/false, &response);
    EXPECT_TRUE(s.ok()) << s;
    return response.values();
  }

  absl::Status Push(uint32_t shard, const std::vector<uint64_t>& ids, float grad, uint64_t sequence,
                    int64_t step = 1, absl::Duration deadline = kDeadline) {
    v1::PushRequest request;
    request.set_table("item");
    request.set_ids(PackIds(ids));
    std::vector<float> grads(ids.size() * kDim);
    for (size_t i = 0; i < grads.size(); ++i) grads[i] = grad * static_cast<float>(i % 5 + 1);
    AppendFloat32Bytes(grads, request.mutable_grads());
    request.set_step(step);
    request.set_worker_id(9);
    request.set_sequence(sequence);
    request.set_epoch(1);
    v1::PushResponse response;
    grpc::ClientContext context;
    SetDeadline(&context, deadline);
    return FromGrpcStatus(shards_[shard].stub->Push(&context, request, &response), &context);
  }

  absl::Status PutReplicas(uint32_t shard, const v1::PutReplicasRequest& request,
                           v1::PutReplicasResponse* response = nullptr) {
    v1::PutReplicasResponse ignored;
    grpc::ClientContext context;
    SetDeadline(&context, kDeadline);
    return FromGrpcStatus(
        shards_[shard].stub->PutReplicas(&context, request, response ? response : &ignored),
        &context);
  }

  // The value of metric `name` (counter or gauge) with label `label`="`value`" (or
  // none), or -1 if absent.
  double Metric(uint32_t shard, const std::string& name, const std::string& label = "",
                const std::string& value = "") {
    for (const prometheus::MetricFamily& family : shards_[shard].registry->Collect()) {
      if (family.name != name) continue;
      for (const prometheus::ClientMetric& m : family.metric) {
        bool match = label.empty();
        for (const prometheus::ClientMetric::Label& l : m.label) {
          match = match || (l.name == label && l.value == value);
        }
        if (match)
          return family.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
      }
    }
    return -1;
  }

  v1::GetShardInfoResponse Info(uint32_t shard) {
    v1::GetShardInfoResponse info;
    EXPECT_TRUE(shards_[shard].service->DoGetShardInfo(v1::GetShardInfoRequest(), &info).ok());
    return info;
  }

  // Asserts that a replica pull of `ids` on `holder` answers every id with exactly the
  // owner's bytes.
  void ExpectReplicaEqualsOwner(uint32_t holder, uint32_t owner, const std::vector<uint64_t>& ids) {
    v1::PullResponse replica;
    ASSERT_TRUE(Pull(holder, ids, /*replica=*/true, &replica).ok());
    EXPECT_EQ(replica.replica_missing_size(), 0) << "holder " << holder;
    EXPECT_EQ(replica.values(), OwnerValues(owner, ids)) << "holder " << holder;
  }

  std::vector<uint32_t> Missing(uint32_t shard, const std::vector<uint64_t>& ids,
                                int64_t step = 0) {
    v1::PullResponse response;
    const absl::Status s = Pull(shard, ids, /*replica=*/true, &response, step);
    EXPECT_TRUE(s.ok()) << s;
    return std::vector<uint32_t>(response.replica_missing().begin(),
                                 response.replica_missing().end());
  }

  std::string dir_;
  SlotMap map_;
  std::vector<Shard> shards_;
  v1::TableConfig table_;
};

TEST_F(ReplicaTest, SynchronousReplicasEqualTheOwnerAfterEveryPush) {
  const std::vector<uint64_t> hot = IdsOwnedBy(0, 6);
  const std::vector<uint64_t> cold = IdsOwnedBy(0, 3, hot.back() + 1);
  ApplyEverywhere(HotSetOf(1, hot, /*replicas=*/2));
  // Filled before any push: the init vectors.
  ExpectReplicaEqualsOwner(1, 0, hot);
  ExpectReplicaEqualsOwner(2, 0, hot);
  std::vector<uint64_t> batch = hot;
  batch.insert(batch.end(), cold.begin(), cold.end());
  for (uint64_t seq = 1; seq <= 8; ++seq) {
    // Alternate a mixed push and a push of some hot keys only; no waiting in between.
    const std::vector<uint64_t> ids =
        seq % 2 == 1 ? batch : std::vector<uint64_t>(hot.begin(), hot.begin() + 3);
    ASSERT_TRUE(Push(0, ids, 0.01f * static_cast<float>(seq), seq, /*step=*/seq).ok());
    ExpectReplicaEqualsOwner(1, 0, hot);
    ExpectReplicaEqualsOwner(2, 0, hot);
  }
  // float16 replica reads encode the same values.
  v1::PullResponse half, owner_half;
  ASSERT_TRUE(Pull(1, hot, true, &half, 0, v1::VALUE_ENCODING_FLOAT16).ok());
  ASSERT_TRUE(Pull(0, hot, false, &owner_half, 0, v1::VALUE_ENCODING_FLOAT16).ok());
  EXPECT_EQ(half.values(), owner_half.values());
  // Cold keys are not replicated.
  EXPECT_EQ(Missing(1, cold).size(), cold.size());
  // Load: the holders answered replica reads and report the keys as their hot keys.
  EXPECT_GT(Info(1).replica_pulled_keys(), 0u);
  EXPECT_EQ(Info(1).replica_rows(), hot.size());
  EXPECT_EQ(Info(1).hot_set_version(), 1u);
  const v1::HotKeyReport report = shards_[1].service->HotKeyReport(3);
  ASSERT_EQ(report.tables_size(), 1);
  EXPECT_EQ(report.tables(0).keys_size(), 3);
  EXPECT_GT(report.total_rate(), 0);
  EXPECT_GT(Info(0).pushed_keys(), 0u);
  EXPECT_GT(Info(0).pulled_keys(), 0u);
  // Metrics.
  EXPECT_EQ(Metric(1, "ember_replica_pulled_keys_total"),
            static_cast<double>(Info(1).replica_pulled_keys()));
  EXPECT_EQ(Metric(1, "ember_replica_missing_keys_total"), static_cast<double>(cold.size()));
  EXPECT_EQ(Metric(1, "ember_replica_rows"), static_cast<double>(hot.size()));
  EXPECT_EQ(Metric(1, "ember_hot_set_version"), 1.0);
  EXPECT_EQ(Metric(1, "ember_hot_keys"), static_cast<double>(hot.size()));
  EXPECT_GT(Metric(1, "ember_hot_key_rate", "rank", "1"), 0.0);
  EXPECT_GE(Metric(0, "ember_replica_copies_total", "result", "ok"), 2.0 * 9);  // fill + pushes
  EXPECT_EQ(Metric(0, "ember_replica_copies_total", "result", "error"), 0.0);
  EXPECT_EQ(Metric(1, "ember_rpc_total", "method", "PutReplicas") > 0, true);
}

TEST_F(ReplicaTest, MissingWhenNotHotNotAHolderNotCopiedOrOwnerChanged) {
  const std::vector<uint64_t> hot = IdsOwnedBy(0, 4);
  const std::vector<uint64_t> hot_of_1 = IdsOwnedBy(1, 2);
  std::vector<uint64_t> all = hot;
  all.insert(all.end(), hot_of_1.begin(), hot_of_1.end());
  // One replica: shard 0's keys are held by shard 1 only; shard 1's by shard 2.
  const v1::HotSet set = HotSetOf(1, all, /*replicas=*/1);
  // Holders first: nothing copied yet.
  shards_[1].service->ApplyHotSet(set);
  shards_[2].service->ApplyHotSet(set);
  EXPECT_EQ(Missing(1, hot).size(), hot.size());
  // The owner applies it and fills its holder.
  shards_[0].service->ApplyHotSet(set);
  ASSERT_TRUE(shards_[0].service->WaitForReplicasSettled(kSettle));
  ASSERT_TRUE(shards_[1].service->WaitForReplicasSettled(kSettle));
  ExpectReplicaEqualsOwner(1, 0, hot);
  ExpectReplicaEqualsOwner(2, 1, hot_of_1);
  // Shard 2 is not a holder of shard 0's keys; shard 1 does not replicate its own.
  EXPECT_EQ(Missing(2, hot).size(), hot.size());
  EXPECT_EQ(Missing(1, hot_of_1).size(), hot_of_1.size());
  // Not hot.
  const std::vector<uint64_t> cold = IdsOwnedBy(0, 2, hot.back() + 1);
  EXPECT_EQ(Missing(1, cold), (std::vector<uint32_t>{0, 1}));
  // Mixed: positions of the missing ones, values zero there.
  v1::PullResponse mixed;
  ASSERT_TRUE(Pull(1, {hot[0], cold[0], hot[1]}, true, &mixed).ok());
  EXPECT_EQ(std::vector<uint32_t>(mixed.replica_missing().begin(), mixed.replica_missing().end()),
            (std::vector<uint32_t>{1}));
  EXPECT_EQ(mixed.values().substr(kDim * 4, kDim * 4), std::string(kDim * 4, '\0'));

  // The slot of hot[0] moves to shard 2 in shard 1's map: its copy (owner 0) goes.
  const uint32_t moved_slot = SlotOf(table_.seed(), hot[0]);
  SlotMap moved = map_;
  moved.SetOwner(moved_slot, 2);
  moved.set_epoch(2);
  const size_t before = Info(1).replica_rows();
  shards_[1].service->SetSlotMap(moved);
  EXPECT_LT(Info(1).replica_rows(), before);
  EXPECT_EQ(Missing(1, {hot[0], hot[1]}), (std::vector<uint32_t>{0}));
}

TEST_F(ReplicaTest, DropRemovesCopiesEvenWhileTheHolderStillThinksTheKeyIsHot) {
  const std::vector<uint64_t> hot = IdsOwnedBy(0, 4);
  ApplyEverywhere(HotSetOf(1, hot, /*replicas=*/2));
  ExpectReplicaEqualsOwner(1, 0, hot);
  ASSERT_EQ(Info(2).replica_rows(), hot.size());
  // Only the owner learns that hot[2] and hot[3] are no longer hot.
  shards_[0].service->ApplyHotSet(HotSetOf(2, {hot[0], hot[1]}, 2));
  ASSERT_TRUE(shards_[0].service->WaitForReplicasSettled(kSettle));
  for (uint32_t holder : {1u, 2u}) {
    EXPECT_EQ(Info(holder).replica_rows(), 2u);
    EXPECT_EQ(Missing(holder, hot), (std::vector<uint32_t>{2, 3})) << holder;
  }
  // A later push of a dropped key does not bring its copy back.
  ASSERT_TRUE(Push(0, hot, 0.5f, 1).ok());
  EXPECT_EQ(Missing(1, hot), (std::vector<uint32_t>{2, 3}));
  ExpectReplicaEqualsOwner(1, 0, {hot[0], hot[1]});
  // Replication off (replicas = 0): every copy is dropped.
  shards_[0].service->ApplyHotSet(HotSetOf(3, hot, /*replicas=*/0));
  ASSERT_TRUE(shards_[0].service->WaitForReplicasSettled(kSettle));
  EXPECT_EQ(Info(1).replica_rows(), 0u);
  EXPECT_EQ(Info(2).replica_rows(), 0u);
}

TEST_F(ReplicaTest, PushFailsUnavailableUntilEveryHolderHasTheRows) {
  const std::vector<uint64_t> hot = IdsOwnedBy(0, 3);
  // The owner serves job attempt 1 (an empty chain: only the attempt). A slot map
  // raises only a restored owner (attempt_raise_test), as it does below.
  v1::RestoreShardRequest restore;
  restore.set_attempt(1);
  restore.set_epoch(1);
  restore.set_slot_owners(PackSlotOwners(map_));
  v1::RestoreShardResponse restored;
  ASSERT_TRUE(shards_[0].service->DoRestoreShard(restore, &restored).ok());
  ApplyEverywhere(HotSetOf(1, hot, 2));
  // Holder 2 is restored to job attempt 5: it drops the copies of older attempts and
  // refuses (ABORTED) the owner's, made at attempt 1.
  restore.set_attempt(5);
  ASSERT_TRUE(shards_[2].service->DoRestoreShard(restore, &restored).ok());
  EXPECT_EQ(Info(2).replica_rows(), 0u);
  const absl::Status failed = Push(0, hot, 0.25f, /*sequence=*/1);
  EXPECT_EQ(failed.code(), absl::StatusCode::kUnavailable) << failed;
  EXPECT_NE(failed.message().find("shard 2"), std::string::npos) << failed;
  // The rows were applied, and holder 1 has them.
  ExpectReplicaEqualsOwner(1, 0, hot);
  EXPECT_EQ(Missing(2, hot).size(), hot.size());
  // The owner moves to attempt 5 without a restore (InstallSlotMap carries it), so its
  // dedup window is kept: the retry is answered as a duplicate and copies again.
  v1::InstallSlotMapRequest install;
  install.set_epoch(1);
  install.set_attempt(5);
  install.set_slot_owners(PackSlotOwners(map_));
  v1::InstallSlotMapResponse installed;
  ASSERT_TRUE(shards_[0].service->DoInstallSlotMap(install, &installed).ok());
  const std::string owner_before = OwnerValues(0, hot);
  const absl::Status retried = Push(0, hot, 0.25f, /*sequence=*/1);
  ASSERT_TRUE(retried.ok()) << retried;
  EXPECT_EQ(OwnerValues(0, hot), owner_before) << "a duplicate is not applied twice";
  ExpectReplicaEqualsOwner(1, 0, hot);
  ExpectReplicaEqualsOwner(2, 0, hot);
}

TEST_F(ReplicaTest, PeriodicCopiesHonourTheStepBound) {
  const std::vector<uint64_t> hot = IdsOwnedBy(0, 2);
  v1::HotSet set = HotSetOf(1, hot, 2, /*refresh_interval_ms=*/20);
  set.set_max_staleness_ms(3'600'000);  // time never makes these copies stale here
  set.set_max_staleness_steps(5);
  ApplyEverywhere(set);
  ASSERT_TRUE(Push(0, hot, 0.5f, 1, /*step=*/10).ok());
  ASSERT_TRUE(shards_[0].service->WaitForReplicasSettled(kSettle));
  ExpectReplicaEqualsOwner(1, 0, hot);
  EXPECT_TRUE(Missing(1, hot, /*step=*/15).empty());
  EXPECT_EQ(Missing(1, hot, /*step=*/16).size(), hot.size()) << "more than 5 steps behind";
  EXPECT_TRUE(Missing(1, hot, /*step=*/0).empty()) << "no step: no step bound";
}

TEST_F(ReplicaTest, MalformedPutReplicasIsRefusedAndChangesNothing) {
  const std::vector<uint64_t> hot = IdsOwnedBy(0, 2);
  ApplyEverywhere(HotSetOf(1, hot, 2));
  const std::string values_before = OwnerValues(0, hot);
  ExpectReplicaEqualsOwner(1, 0, hot);

  v1::PutReplicasRequest good;
  good.set_table("item");
  good.set_owner_shard(0);
  good.set_owner_incarnation(shards_[0].service->incarnation());
  good.set_ids(PackIds(hot));
  std::vector<float> values(hot.size() * kDim, 42.0f);
  AppendFloat32Bytes(values, good.mutable_values());
  const std::vector<uint64_t> versions(hot.size(), ~uint64_t{0});
  good.set_versions(PackIds(versions));
  good.set_hot_set_version(1);

  struct Case {
    std::string name;
    v1::PutReplicasRequest request;
    absl::StatusCode code;
  };
  std::vector<Case> cases;
  auto add = [&](std::string name, absl::StatusCode code, auto mutate) {
    v1::PutReplicasRequest r = good;
    mutate(r);
    cases.push_back({std::move(name), std::move(r), code});
  };
  using C = absl::StatusCode;
  add("unknown table", C::kNotFound, [](auto& r) { r.set_table("nope"); });
  add("empty ids", C::kInvalidArgument, [](auto& r) { r.clear_ids(); });
  add("ragged ids", C::kInvalidArgument, [](auto& r) { r.mutable_ids()->push_back('x'); });
  add("short values", C::kInvalidArgument, [](auto& r) { r.mutable_values()->resize(8); });
  add("long versions", C::kInvalidArgument, [](auto& r) { r.mutable_versions()->append(8, '\0'); });
  add("NaN value", C::kInvalidArgument, [](auto& r) {
    const float nan = std::nanf("");
    std::memcpy(r.mutable_values()->data() + 12, &nan, 4);
  });
  add("drop with values", C::kInvalidArgument, [](auto& r) { r.set_drop(true); });
  add("from itself", C::kInvalidArgument, [](auto& r) { r.set_owner_shard(1); });
  add("no incarnation", C::kInvalidArgument, [](auto& r) { r.set_owner_incarnation(0); });
  for (const Case& c : cases) {
    const absl::Status s = PutReplicas(1, c.request);
    EXPECT_EQ(s.code(), c.code) << c.name << ": " << s;
    EXPECT_FALSE(s.message().empty()) << c.name;
  }
  // Nothing changed: the copies still equal the owner's rows.
  EXPECT_EQ(Info(1).replica_rows(), hot.size());
  ExpectReplicaEqualsOwner(1, 0, hot);
  EXPECT_EQ(OwnerValues(0, hot), values_before);
  // The well-formed request is taken (a newer version): proves the cases above were
  // refused for their defect alone.
  v1::PutReplicasResponse applied;
  ASSERT_TRUE(PutReplicas(1, good, &applied).ok());
  EXPECT_EQ(applied.applied(), hot.size());
  v1::PullResponse forged;
  ASSERT_TRUE(Pull(1, hot, true, &forged).ok());
  EXPECT_EQ(forged.values().substr(0, 4),
            std::string(reinterpret_cast<const char*>(&values[0]), 4));
}

TEST(ReplicaProcessTest, EmberPsServesPutReplicasAndReplicaReads) {
  const std::string tmpl = absl::StrCat(::testing::TempDir(), "/replica_process.XXXXXX");
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  ASSERT_NE(mkdtemp(buf.data()), nullptr);
  const std::string dir = buf.data();
  absl::StatusOr<std::unique_ptr<Process>> ps =
      Process::Start(EMBER_PS_BINARY,
                     {absl::StrCat("--data_dir=", dir, "/db"), "--port=0", "--shard_id=1",
                      "--num_shards=2", "--memory_budget_mb=16", "--heavy_hitters_sample=1"},
                     "listening on ", absl::Seconds(30));
  ASSERT_TRUE(ps.ok()) << ps.status();
  auto stub = v1::PsService::NewStub(
      grpc::CreateChannel((*ps)->ready_text(), grpc::InsecureChannelCredentials()));
  auto deadline = [] { return absl::ToChronoTime(absl::Now() + kDeadline); };
  {
    grpc::ClientContext context;
    context.set_deadline(deadline());
    v1::CreateTableRequest request;
    request.mutable_config()->set_name("item");
    request.mutable_config()->set_dim(kDim);
    v1::CreateTableResponse response;
    ASSERT_TRUE(stub->CreateTable(&context, request, &response).ok());
  }
  const std::vector<uint64_t> ids = {11, 12, 13};
  v1::PutReplicasRequest put;
  put.set_table("item");
  put.set_owner_shard(0);
  put.set_owner_incarnation(77);
  put.set_ids(PackIds(ids));
  AppendFloat32Bytes(std::vector<float>(ids.size() * kDim, 0.5f), put.mutable_values());
  put.set_versions(PackIds({1, 1, 1}));
  put.set_hot_set_version(1);
  {
    grpc::ClientContext context;
    context.set_deadline(deadline());
    v1::PutReplicasRequest bad = put;
    bad.mutable_versions()->resize(9);
    v1::PutReplicasResponse response;
    const grpc::Status s = stub->PutReplicas(&context, bad, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  }
  {
    grpc::ClientContext context;
    context.set_deadline(deadline());
    v1::PutReplicasResponse response;
    ASSERT_TRUE(stub->PutReplicas(&context, put, &response).ok());
    EXPECT_EQ(response.applied(), ids.size());
  }
  {
    // Held, but no hot set: nothing is served.
    grpc::ClientContext context;
    context.set_deadline(deadline());
    v1::PullRequest pull;
    pull.set_table("item");
    pull.set_ids(PackIds(ids));
    pull.set_replica_read(true);
    v1::PullResponse response;
    ASSERT_TRUE(stub->Pull(&context, pull, &response).ok());
    EXPECT_EQ(response.replica_missing_size(), 3);
    EXPECT_EQ(response.values(), std::string(ids.size() * kDim * 4, '\0'));
  }
  {
    grpc::ClientContext context;
    context.set_deadline(deadline());
    v1::GetShardInfoResponse info;
    ASSERT_TRUE(stub->GetShardInfo(&context, v1::GetShardInfoRequest(), &info).ok());
    EXPECT_EQ(info.replica_rows(), ids.size());
    EXPECT_EQ(info.replica_pulled_keys(), 0u);
    EXPECT_EQ(info.hot_set_version(), 0u);
  }
  absl::StatusOr<int> code = (*ps)->Stop(absl::Seconds(10));
  EXPECT_TRUE(code.ok() && *code == 0);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

}  // namespace
}  // namespace ember
