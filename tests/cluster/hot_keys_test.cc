// Copyright 2026 The Ember Authors.
//
// Hot keys end to end (hotkeys.proto) with real processes on loopback: an
// ember-coordinator and three ember-ps shards started and stopped here, a PsClient in
// this process, emberctl as a child process.
//
// Pinned here:
//  - publication: from a skewed pull stream the coordinator publishes a hot set
//    (version >= 1) with the top keys by rate and none of the cold ones; GetHotSet
//    with the current version omits the lists; the version stays while only rates
//    change and grows when a key becomes hot; the coordinator's metrics show it;
//  - replica reads (--hot_replicas=2, synchronous refresh): after pushes of hot keys,
//    pulls through a replica-reading client return bitwise the owner's rows (asked of
//    the owner directly), the owner serves fewer of the hot keys' pulls than without
//    replica reads, and the client's replica_stats show the reads; holders that fail
//    or lack a key (injected on the client's channels) cost no correctness: their
//    keys go to the owner;
//  - `emberctl hotkeys` (text and --json) names the hot keys and the skew index;
//  - bad --hot_* flags are refused with exit code 2 and a message naming the flag.

#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/grpc_status.h"
#include "common/ps_client.h"
#include "common/slot.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "ember/v1/ps.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/client_interceptor.h"
#include "gtest/gtest.h"
#include "server/ps/shard_agent.h"
#include "tests/support/deadline.h"
#include "tests/support/eventually.h"
#include "tests/support/http_get.h"
#include "tests/support/local_cluster.h"
#include "tests/support/ports.h"
#include "tests/support/usage_errors.h"
#include "tests/tools/emberctl_fixture.h"
#include "tools/harness/process.h"

namespace ember {
namespace {

constexpr int kShards = 3;
constexpr uint32_t kDim = 8;
constexpr absl::Duration kWaitBound = absl::Seconds(60);

template <typename Stub, typename Request, typename Response, typename Method>
absl::Status Call(Stub* stub, Method method, const Request& request, Response* response) {
  grpc::ClientContext context;
  SetDeadline(&context, absl::Seconds(10));
  return FromGrpcStatus((stub->*method)(&context, request, response), &context);
}

std::vector<uint64_t> HotIds(const v1::HotSet& set, const std::string& table) {
  std::vector<uint64_t> out;
  for (const v1::HotKeyTable& t : set.tables()) {
    if (t.table() != table) continue;
    for (const v1::HotKey& key : t.keys()) out.push_back(key.id());
  }
  return out;
}

// Fault injection on replica reads (PullRequest.replica_read), seen by the client as
// the holder's answer: kFail turns every one into UNAVAILABLE; kFirstMissing makes the
// holder say it lacks the first key (zeroing its row, as the protocol says).
class ReplicaFaults : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  enum Mode { kFail, kFirstMissing };
  ReplicaFaults(Mode mode, uint32_t dim, std::shared_ptr<std::atomic<int>> injected)
      : mode_(mode), dim_(dim), injected_(std::move(injected)) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    if (std::string(info->method()) != "/ember.v1.PsService/Pull") return nullptr;
    return new Interceptor(this);
  }

 private:
  class Interceptor : public grpc::experimental::Interceptor {
   public:
    explicit Interceptor(ReplicaFaults* f) : f_(f) {}
    void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
      using grpc::experimental::InterceptionHookPoints;
      if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
        const auto* request = static_cast<const v1::PullRequest*>(methods->GetSendMessage());
        replica_ = request != nullptr && request->replica_read();
      }
      if (replica_ && f_->mode_ == kFirstMissing &&
          methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
        auto* response = static_cast<v1::PullResponse*>(methods->GetRecvMessage());
        if (response != nullptr && response->replica_missing_size() == 0 &&
            response->values().size() >= f_->dim_ * sizeof(float)) {
          response->add_replica_missing(0);
          response->mutable_values()->replace(0, f_->dim_ * sizeof(float),
                                              std::string(f_->dim_ * sizeof(float), '\0'));
          f_->injected_->fetch_add(1);
        }
      }
      if (replica_ && f_->mode_ == kFail &&
          methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_STATUS)) {
        *methods->GetRecvStatus() =
            grpc::Status(grpc::StatusCode::UNAVAILABLE, "injected: holder unreachable");
        f_->injected_->fetch_add(1);
      }
      methods->Proceed();
    }

   private:
    ReplicaFaults* const f_;
    bool replica_ = false;
  };

  const Mode mode_;
  const uint32_t dim_;
  std::shared_ptr<std::atomic<int>> injected_;
};

// A factory per channel that forwards to one shared factory.
class Forward : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit Forward(std::shared_ptr<grpc::experimental::ClientInterceptorFactoryInterface> f)
      : f_(std::move(f)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    return f_->CreateClientInterceptor(info);
  }

 private:
  std::shared_ptr<grpc::experimental::ClientInterceptorFactoryInterface> f_;
};

class HotKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            absl::StrCat("ember-hot-keys-", getpid(), "-",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::remove_all(dir_);
  }

  void TearDown() override {
    clients_.clear();
    for (int i = 0; i < kShards; ++i) ps_stub_[i].reset();
    coordinator_stub_.reset();
    if (cluster_ != nullptr) {
      const absl::Status stopped = cluster_->StopAll(absl::Seconds(20));
      EXPECT_TRUE(stopped.ok()) << stopped;  // every process exits with 0
    }
    cluster_.reset();
    std::filesystem::remove_all(dir_);
  }

  // A coordinator with `flags` (plus a fast publication) and three shards counting
  // every pulled key; the table "item" created through the coordinator.
  void StartCluster(const std::vector<std::string>& flags) {
    absl::StatusOr<int> metrics_port = FreeLoopbackPort();
    ASSERT_TRUE(metrics_port.ok()) << metrics_port.status();
    metrics_port_ = *metrics_port;
    std::vector<std::string> coordinator_flags = {"--heartbeat_timeout_ms=5000",
                                                  "--hot_publish_interval_ms=100",
                                                  absl::StrCat("--metrics_port=", metrics_port_)};
    coordinator_flags.insert(coordinator_flags.end(), flags.begin(), flags.end());
    LocalClusterOptions cluster_options;
    cluster_options.dir = dir_;
    cluster_options.shards = kShards;
    cluster_options.coordinator_flags = coordinator_flags;
    cluster_options.shard_flags = {"--heartbeat_ms=100", "--heavy_hitters_sample=1"};
    cluster_ = std::make_unique<LocalCluster>(std::move(cluster_options));
    const absl::Status coordinator = cluster_->StartCoordinator();
    ASSERT_TRUE(coordinator.ok()) << coordinator;
    address_ = cluster_->coordinator_address();
    coordinator_stub_ = v1::CoordinatorService::NewStub(
        grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
    for (int i = 0; i < kShards; ++i) {
      const absl::Status started = cluster_->StartShard(i);
      ASSERT_TRUE(started.ok()) << started;
      ps_address_[i] = cluster_->shard_address(i);
      ps_stub_[i] = v1::PsService::NewStub(
          grpc::CreateChannel(ps_address_[i], grpc::InsecureChannelCredentials()));
    }
    ASSERT_TRUE(Eventually(
        [&] {
          v1::GetClusterMapResponse map;
          return Call(coordinator_stub_.get(), &v1::CoordinatorService::Stub::GetClusterMap,
                      v1::GetClusterMapRequest(), &map)
                     .ok() &&
                 map.epoch() > 0;
        },
        kWaitBound));
    owner_client_ = NewClient(/*read_replicas=*/false);
    ASSERT_NE(owner_client_, nullptr);
    v1::TableConfig config;
    config.set_name("item");
    config.set_dim(kDim);
    config.mutable_optimizer()->set_kind(v1::OptimizerConfig::SGD);
    config.mutable_optimizer()->set_learning_rate(0.5f);
    ASSERT_TRUE(owner_client_->CreateTableEverywhere(config).ok());
    absl::StatusOr<v1::TableConfig> table = owner_client_->GetTable("item");
    ASSERT_TRUE(table.ok());
    seed_ = table->seed();
  }

  PsClient* NewClient(
      bool read_replicas,
      std::shared_ptr<grpc::experimental::ClientInterceptorFactoryInterface> faults = nullptr) {
    PsClientOptions options;
    if (faults != nullptr) {
      options.shard_interceptors = [faults] {
        std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> v;
        v.push_back(std::make_unique<Forward>(faults));
        return v;
      };
    }
    options.coordinator_address = address_;
    options.worker_id = 100 + clients_.size();
    options.read_replicas = read_replicas;
    options.hot_set_refresh_interval = absl::Milliseconds(100);
    absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(options);
    EXPECT_TRUE(client.ok()) << client.status();
    if (!client.ok()) return nullptr;
    clients_.push_back(*std::move(client));
    return clients_.back().get();  // tables come from the coordinator
  }

  v1::HotSet GetHotSet(uint64_t known_version) {
    v1::GetHotSetRequest request;
    request.set_known_version(known_version);
    v1::GetHotSetResponse response;
    EXPECT_TRUE(
        Call(coordinator_stub_.get(), &v1::CoordinatorService::Stub::GetHotSet, request, &response)
            .ok());
    return response.hot_set();
  }

  v1::GetShardInfoResponse ShardInfo(int shard) {
    v1::GetShardInfoResponse response;
    EXPECT_TRUE(Call(ps_stub_[shard].get(), &v1::PsService::Stub::GetShardInfo,
                     v1::GetShardInfoRequest(), &response)
                    .ok());
    return response;
  }

  uint32_t OwnerOf(uint64_t id) { return owner_client_->slot_map().OwnerOf(SlotOf(seed_, id)); }

  // `count` ids owned by `shard`, from `from` on.
  std::vector<uint64_t> IdsOwnedBy(uint32_t shard, int count, uint64_t from) {
    std::vector<uint64_t> ids;
    for (uint64_t id = from; static_cast<int>(ids.size()) < count; ++id) {
      if (OwnerOf(id) == shard) ids.push_back(id);
    }
    return ids;
  }

  // The rows of `ids` asked of their owner directly (a plain, routed PullRequest).
  std::vector<float> OwnerPull(const std::vector<uint64_t>& ids) {
    std::vector<float> out(ids.size() * kDim);
    for (size_t k = 0; k < ids.size(); ++k) {
      v1::PullRequest request;
      request.set_table("item");
      request.set_ids(std::string(reinterpret_cast<const char*>(&ids[k]), sizeof(uint64_t)));
      request.set_epoch(owner_client_->slot_map().epoch());
      request.set_encoding(v1::VALUE_ENCODING_FLOAT32);
      v1::PullResponse response;
      const uint32_t owner = OwnerOf(ids[k]);
      const absl::Status s =
          Call(ps_stub_[owner].get(), &v1::PsService::Stub::Pull, request, &response);
      EXPECT_TRUE(s.ok()) << s;
      EXPECT_EQ(response.values().size(), kDim * sizeof(float));
      if (response.values().size() == kDim * sizeof(float)) {
        std::memcpy(&out[k * kDim], response.values().data(), kDim * sizeof(float));
      }
    }
    return out;
  }

  // `pulls` pulls through `client`: each has `hot[j]` when pull % (1 << j) == 0, and
  // `cold_per_pull` ids never pulled before.
  void SkewedPulls(PsClient* client, const std::vector<uint64_t>& hot, int pulls,
                   int cold_per_pull) {
    for (int p = 0; p < pulls; ++p) {
      std::vector<uint64_t> ids;
      for (size_t j = 0; j < hot.size(); ++j) {
        if (p % (1 << j) == 0) ids.push_back(hot[j]);
      }
      for (int c = 0; c < cold_per_pull; ++c) ids.push_back(next_cold_++);
      std::vector<float> out(ids.size() * kDim);
      const absl::Status s = client->Pull("item", ids, absl::MakeSpan(out));
      ASSERT_TRUE(s.ok()) << s;
    }
  }

  std::string dir_;
  int metrics_port_ = 0;
  std::unique_ptr<LocalCluster> cluster_;
  std::string address_;
  std::unique_ptr<v1::CoordinatorService::Stub> coordinator_stub_;
  std::string ps_address_[kShards];
  std::unique_ptr<v1::PsService::Stub> ps_stub_[kShards];
  std::vector<std::unique_ptr<PsClient>> clients_;
  PsClient* owner_client_ = nullptr;
  uint64_t seed_ = 0;
  uint64_t next_cold_ = 1'000'000;
};

TEST_F(HotKeysTest, CoordinatorPublishesTheTopKeysOnlyOnChange) {
  ASSERT_NO_FATAL_FAILURE(StartCluster({"--hot_min_share=0.02", "--hot_keys_per_table=8"}));
  // Key 101 in every pull, 202 in every 2nd, 303 in every 4th; three cold keys each.
  // Shares: 21%, 10.5%, 5.3%; a cold key 0.18% (below 2%). Fewer cold keys per shard
  // than its heavy-hitter counters, so none is overestimated.
  const std::vector<uint64_t> hot = {101, 202, 303};
  ASSERT_NO_FATAL_FAILURE(SkewedPulls(owner_client_, hot, 120, 3));

  // While the first reports come in, few keys make up the load and cold ones can be
  // hot for a while; once every shard reported the stream, exactly the three are.
  v1::HotSet set;
  ASSERT_TRUE(Eventually(
      [&] {
        set = GetHotSet(0);
        return HotIds(set, "item") == hot;  // by descending rate
      },
      kWaitBound))
      << set.DebugString();
  EXPECT_GE(set.version(), 1u);
  EXPECT_EQ(set.replicas(), 0u);
  EXPECT_GT(set.total_rate(), 0);
  ASSERT_EQ(set.holders_size(), kShards);
  for (int i = 0; i < kShards; ++i) {
    EXPECT_EQ(set.holders(i).shard_id(), static_cast<uint32_t>(i));
    EXPECT_EQ(set.holders(i).address(), ps_address_[i]);
  }

  // The caller's version is current: no lists. (Retried if a version came meanwhile.)
  v1::HotSet current;
  ASSERT_TRUE(Eventually(
      [&] {
        set = GetHotSet(0);
        current = GetHotSet(set.version());
        return current.version() == set.version();
      },
      kWaitBound));
  EXPECT_EQ(current.tables_size(), 0);
  EXPECT_EQ(current.holders_size(), 0);

  // Rates keep changing (they decay) but the keys do not: no new version over several
  // publications (each one updates total_rate).
  const uint64_t version = set.version();
  std::set<double> totals;
  ASSERT_TRUE(Eventually(
      [&] {
        const v1::HotSet now = GetHotSet(version);
        EXPECT_EQ(now.version(), version);
        totals.insert(now.total_rate());
        return totals.size() >= 4;
      },
      kWaitBound));
  EXPECT_EQ(GetHotSet(0).version(), version);

  // A new hot key is a change: a new version with it.
  ASSERT_NO_FATAL_FAILURE(SkewedPulls(owner_client_, {404}, 300, 0));
  ASSERT_TRUE(Eventually(
      [&] {
        set = GetHotSet(version);
        const std::vector<uint64_t> ids = HotIds(set, "item");
        return std::find(ids.begin(), ids.end(), 404u) != ids.end();
      },
      kWaitBound))
      << set.DebugString();
  EXPECT_GT(set.version(), version);
  for (uint64_t id : HotIds(set, "item")) EXPECT_LT(id, 1'000'000u) << "a cold key is hot";

  // The client fetches it; every shard applies it (heartbeat responses).
  ASSERT_TRUE(owner_client_->RefreshHotSet().ok());
  EXPECT_GE(owner_client_->hot_set()->version(), set.version());
  EXPECT_TRUE(owner_client_->hot_set()->IsHot("item", 404));
  for (int i = 0; i < kShards; ++i) {
    EXPECT_TRUE(
        Eventually([&] { return ShardInfo(i).hot_set_version() >= set.version(); }, kWaitBound))
        << "shard " << i;
  }

  // The coordinator's metrics.
  absl::StatusOr<std::string> metrics = HttpGet(metrics_port_, "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_TRUE(absl::StrContains(*metrics, "ember_hot_set_version ")) << *metrics;
  EXPECT_TRUE(absl::StrContains(*metrics, "ember_hot_keys{table=\"item\"} ")) << *metrics;
}

TEST_F(HotKeysTest, ReplicaReadsAreExactAndTakeLoadOffTheOwner) {
  ASSERT_NO_FATAL_FAILURE(StartCluster({"--hot_min_share=0.02", "--hot_replicas=2"}));
  PsClient* replica_client = NewClient(/*read_replicas=*/true);
  ASSERT_NE(replica_client, nullptr);
  // Four hot keys, all owned by shard 0 (so its load is what replication takes off).
  const std::vector<uint64_t> hot = IdsOwnedBy(0, 4, 1);
  std::vector<float> grads(hot.size() * kDim);
  for (size_t k = 0; k < grads.size(); ++k) grads[k] = 0.25f * static_cast<float>(k % 5) - 0.5f;
  ASSERT_TRUE(owner_client_->Push("item", hot, grads, /*step=*/1).ok());

  // Make them hot: every pull has all four and three cold keys.
  std::vector<uint64_t> always;
  for (uint64_t id : hot) always.push_back(id);
  for (int p = 0; p < 100; ++p) {
    std::vector<uint64_t> ids = always;
    for (int c = 0; c < 3; ++c) ids.push_back(next_cold_++);
    std::vector<float> out(ids.size() * kDim);
    ASSERT_TRUE(owner_client_->Pull("item", ids, absl::MakeSpan(out)).ok());
  }
  std::shared_ptr<const HotSetView> view;
  ASSERT_TRUE(Eventually(
      [&] {
        if (!replica_client->RefreshHotSet().ok()) return false;
        view = replica_client->hot_set();
        for (uint64_t id : hot) {
          if (!view->IsHot("item", id)) return false;
        }
        return view->replicated();
      },
      kWaitBound))
      << replica_client->hot_set()->proto().DebugString();
  EXPECT_EQ(view->ReplicaHoldersOf(0), (std::vector<uint32_t>{1, 2}));
  // Every shard applied the set and both holders have copies of the four rows.
  for (int i = 0; i < kShards; ++i) {
    ASSERT_TRUE(
        Eventually([&] { return ShardInfo(i).hot_set_version() >= view->version(); }, kWaitBound));
  }
  for (int i : {1, 2}) {
    ASSERT_TRUE(Eventually([&] { return ShardInfo(i).replica_rows() >= hot.size(); }, kWaitBound))
        << "holder " << i << ": " << ShardInfo(i).DebugString();
  }

  // Synchronous refresh: after each push, replica reads are the owner's rows, bit for bit.
  PsCallOptions f32;
  f32.encoding = WireEncoding::kFloat32;
  for (int step = 2; step <= 6; ++step) {
    f32.step = step;
    ASSERT_TRUE(owner_client_->Push("item", hot, grads, step).ok());
    const std::vector<float> expected = OwnerPull(hot);
    for (int read = 0; read < 6; ++read) {
      std::vector<float> got(hot.size() * kDim);
      ASSERT_TRUE(replica_client->Pull("item", hot, absl::MakeSpan(got), f32).ok());
      ASSERT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0)
          << "step " << step << " read " << read;
    }
  }
  EXPECT_GT(replica_client->replica_stats().replica_keys, 0u);

  // The same 60 pulls without and with replica reads: what the owner serves.
  auto owner_pulled = [&] { return ShardInfo(0).pulled_keys(); };
  auto replica_pulled = [&] {
    return ShardInfo(1).replica_pulled_keys() + ShardInfo(2).replica_pulled_keys();
  };
  auto pull_hot = [&](PsClient* client) {
    for (int p = 0; p < 60; ++p) {
      std::vector<float> out(hot.size() * kDim);
      ASSERT_TRUE(client->Pull("item", hot, absl::MakeSpan(out)).ok());
    }
  };
  const uint64_t owner0 = owner_pulled();
  ASSERT_NO_FATAL_FAILURE(pull_hot(owner_client_));
  const uint64_t without = owner_pulled() - owner0;
  EXPECT_EQ(without, 60 * hot.size());
  const PsClient::ReplicaStats before = replica_client->replica_stats();
  const uint64_t owner1 = owner_pulled();
  const uint64_t replicas1 = replica_pulled();
  ASSERT_NO_FATAL_FAILURE(pull_hot(replica_client));
  const uint64_t with = owner_pulled() - owner1;
  const uint64_t from_replicas = replica_pulled() - replicas1;
  const PsClient::ReplicaStats after = replica_client->replica_stats();
  // Spread over three readers: about a third each; every key answered exactly once.
  EXPECT_LT(with, without * 3 / 4) << "owner served " << with << " of " << without;
  EXPECT_GT(from_replicas, 0u);
  EXPECT_EQ(with + from_replicas, 60 * hot.size());
  EXPECT_EQ(after.replica_keys - before.replica_keys,
            from_replicas + (after.replica_missing - before.replica_missing));

  // Holders that fail or lack a key: the owner answers those keys, the pull succeeds
  // with the owner's rows.
  const std::vector<float> expected = OwnerPull(hot);
  for (ReplicaFaults::Mode mode : {ReplicaFaults::kFail, ReplicaFaults::kFirstMissing}) {
    auto injected = std::make_shared<std::atomic<int>>(0);
    PsClient* faulty =
        NewClient(/*read_replicas=*/true, std::make_shared<ReplicaFaults>(mode, kDim, injected));
    ASSERT_NE(faulty, nullptr);
    ASSERT_TRUE(faulty->RefreshHotSet().ok());
    for (int read = 0; read < 20; ++read) {
      std::vector<float> got(hot.size() * kDim);
      const absl::Status s = faulty->Pull("item", hot, absl::MakeSpan(got), f32);
      ASSERT_TRUE(s.ok()) << s;
      ASSERT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0)
          << "mode " << mode << " read " << read;
    }
    const PsClient::ReplicaStats stats = faulty->replica_stats();
    EXPECT_GT(injected->load(), 0) << "mode " << mode;
    if (mode == ReplicaFaults::kFail) {
      EXPECT_EQ(stats.fallbacks, static_cast<uint64_t>(injected->load()));
    } else {
      EXPECT_EQ(stats.replica_missing, static_cast<uint64_t>(injected->load()));
      EXPECT_EQ(stats.fallbacks, 0u);
    }
  }

  // emberctl hotkeys names the hot keys, their owner and the skew index.
  CtlResult text = RunCtl({absl::StrCat("--coordinator=", address_), "hotkeys"});
  ASSERT_EQ(text.exit_code, 0) << text;
  EXPECT_TRUE(absl::StrContains(text.out, "hot set version")) << text;
  EXPECT_TRUE(absl::StrContains(text.out, "replicas 2")) << text;
  EXPECT_TRUE(absl::StrContains(text.out, "load skew index (max/mean served keys): ")) << text;
  for (uint64_t id : hot) {
    const std::vector<std::string> row = RowOf(text.out, absl::StrCat(id));
    ASSERT_EQ(row.size(), 4u) << text;
    EXPECT_EQ(row[3], "0") << "owner of " << id << "\n" << text;
    EXPECT_TRUE(absl::EndsWith(row[2], "%")) << text;
  }
  CtlResult json = RunCtl(
      {absl::StrCat("--coordinator=", address_), "hotkeys", "--json", "--table=item", "--top=2"});
  ASSERT_EQ(json.exit_code, 0) << json;
  EXPECT_TRUE(IsJsonObject(json.out)) << json;
  EXPECT_TRUE(absl::StrContains(json.out, "\"load_skew_index\":")) << json;
  EXPECT_FALSE(absl::StrContains(json.out, "\"load_skew_index\":null")) << json;
  EXPECT_TRUE(absl::StrContains(json.out, "\"replica_pulled_keys\":")) << json;
  EXPECT_TRUE(absl::StrContains(json.out, "\"table\":\"item\",\"hot_keys\":")) << json;
  int listed = 0;
  for (uint64_t id : hot) listed += absl::StrContains(json.out, absl::StrCat("\"id\":", id, ","));
  EXPECT_EQ(listed, 2) << json;  // --top=2

  // Errors: an unknown table, a bad --top, an unreachable coordinator.
  CtlResult unknown = RunCtl({absl::StrCat("--coordinator=", address_), "hotkeys", "--table=nope"});
  EXPECT_EQ(unknown.exit_code, 1) << unknown;
  EXPECT_TRUE(absl::StrContains(unknown.err, "no table 'nope'")) << unknown;
  CtlResult top = RunCtl({absl::StrCat("--coordinator=", address_), "hotkeys", "--top=0"});
  EXPECT_EQ(top.exit_code, 2) << top;
  EXPECT_TRUE(absl::StrContains(top.err, "--top must be in [1, 100000]")) << top;
  CtlResult down = RunCtl(
      {absl::StrCat("--coordinator=127.0.0.1:", FreePort()), "--timeout_ms=2000", "hotkeys"});
  EXPECT_EQ(down.exit_code, 1) << down;
  EXPECT_TRUE(absl::StrContains(down.err, "is ember-coordinator running at")) << down;
}

// The shard side of the protocol in this process: a ShardAgent's heartbeats carry its
// report, and it hands each newer hot set to on_hot_set once.
TEST(HotKeysAgentTest, HeartbeatsCarryReportsAndBringHotSets) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / absl::StrCat("ember-hot-keys-agent-", getpid()))
          .string();
  std::filesystem::remove_all(dir);
  absl::StatusOr<std::unique_ptr<Process>> coordinator =
      Process::Start(EMBER_COORDINATOR_BINARY,
                     {absl::StrCat("--data_dir=", dir), "--port=0", "--expected_shards=1",
                      "--hot_publish_interval_ms=50", "--hot_replicas=1"},
                     "listening on ", absl::Seconds(30));
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  const std::string address = (*coordinator)->ready_text();

  absl::Mutex mu;
  std::atomic<int> heartbeats{0};
  std::vector<uint64_t> applied;  // versions handed to on_hot_set, in order
  v1::HotSet last;
  ShardAgentOptions options;
  options.coordinator_address = address;
  options.shard_id = 4;
  options.advertised_address = "127.0.0.1:1";  // never called
  options.heartbeat_interval = absl::Milliseconds(20);
  options.incarnation = 77;
  {
    ShardAgent agent(
        options, [](const SlotMap&) {},
        [](const std::string&, const v1::TableConfig&) { return absl::OkStatus(); },
        [] { return uint64_t{0}; },
        [&heartbeats] {
          heartbeats.fetch_add(1);
          v1::HotKeyReport report;
          report.set_total_rate(100);
          v1::HotKeyTable* table = report.add_tables();
          table->set_table("item");
          v1::HotKey* key = table->add_keys();
          key->set_id(5);
          key->set_rate(60);
          return report;
        },
        [&](const v1::HotSet& set) {
          absl::MutexLock lock(&mu);
          applied.push_back(set.version());
          last = set;
        });
    ASSERT_TRUE(agent.Start().ok());
    ASSERT_TRUE(Eventually(
        [&] {
          absl::MutexLock lock(&mu);
          return !HotIds(last, "item").empty();
        },
        kWaitBound));
    // Five more heartbeats: the same version is not handed over again.
    const int seen = heartbeats.load();
    ASSERT_TRUE(Eventually([&] { return heartbeats.load() >= seen + 5; }, kWaitBound));
    agent.Stop();
    const uint64_t version = agent.hot_set_version();
    absl::MutexLock lock(&mu);
    EXPECT_EQ(HotIds(last, "item"), (std::vector<uint64_t>{5}));
    EXPECT_EQ(last.replicas(), 1u);
    ASSERT_EQ(last.holders_size(), 1);
    EXPECT_EQ(last.holders(0).shard_id(), 4u);
    EXPECT_EQ(last.holders(0).incarnation(), 77u);
    EXPECT_EQ(version, last.version());
    for (size_t i = 1; i < applied.size(); ++i) EXPECT_GT(applied[i], applied[i - 1]);
  }
  EXPECT_EQ((*coordinator)->Stop(absl::Seconds(20)).value_or(-1), 0);
  std::filesystem::remove_all(dir);
}

TEST(HotKeysFlagsTest, BadHotFlagsAreRefused) {
  const RunResult help = RunBinary(EMBER_COORDINATOR_BINARY, "--help");
  EXPECT_EQ(help.exit_code, 0);
  for (const char* flag : {"--hot_keys_per_table", "--hot_min_share", "--hot_publish_interval_ms",
                           "--hot_replicas", "--hot_refresh_ms", "--hot_max_staleness_ms",
                           "--hot_max_staleness_steps", "--metrics_port"}) {
    EXPECT_TRUE(absl::StrContains(help.output, flag)) << flag;
  }
  const std::vector<UsageErrorCase> cases = {
      {"--hot_min_share=0", "--hot_min_share must be in (0, 1]"},
      {"--hot_min_share=1.5", "--hot_min_share must be in (0, 1]"},
      {"--hot_min_share=abc", "--hot_min_share: bad number 'abc'"},
      {"--hot_keys_per_table=-1", "--hot_keys_per_table: bad number '-1'"},
      {"--hot_keys_per_table=2000000", "--hot_keys_per_table must be <= 1000000"},
      {"--hot_replicas=-2", "--hot_replicas: bad number '-2'"},
      {"--hot_replicas=5000", "--hot_replicas must be <= 1024"},
      {"--hot_publish_interval_ms=0", "--hot_publish_interval_ms must be >= 1"},
      {"--hot_refresh_ms=x", "--hot_refresh_ms: bad number 'x'"},
      {"--hot_max_staleness_ms=100", "give --hot_refresh_ms > 0 too"},
      {"--hot_max_staleness_steps=3", "give --hot_refresh_ms > 0 too"},
      {"--hot_refresh_ms=200 --hot_max_staleness_ms=100", "is below --hot_refresh_ms"},
      {"--hot_replica=1", "unknown flag --hot_replica"},
      {"--metrics_port=-2", "--metrics_port must be in [-1, 65535]"},
  };
  ExpectUsageErrors(
      [](const std::string& args) {
        return RunBinary(EMBER_COORDINATOR_BINARY, "--data_dir=/tmp/x " + args);
      },
      cases, UsageErrorChecks().HintOnly("see 'ember-coordinator --help'"));
}

}  // namespace
}  // namespace ember
