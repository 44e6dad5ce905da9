// Copyright 2026 The Ember Authors.
//
// PsClient against two real ember-ps processes (--num_shards=2): batches spanning
// both shards, redirects from a wrong slot map, a killed shard, and concurrent
// pushes and pulls from several threads.

#include "common/ps_client.h"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/float16.h"
#include "common/slot.h"
#include "common/slot_map.h"
#include "gtest/gtest.h"
#include "server/store/initializer.h"
#include "server/store/table_config.h"
#include "tools/harness/process.h"

#ifndef EMBER_PS_BINARY
#error "EMBER_PS_BINARY must name the ember-ps binary"
#endif

namespace ember {
namespace {

constexpr uint32_t kDim = 8;

class PsClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string tmpl = absl::StrCat(::testing::TempDir(), "/ps_client_test.XXXXXX");
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    ASSERT_NE(mkdtemp(buf.data()), nullptr);
    dir_ = buf.data();
    for (uint32_t shard = 0; shard < 2; ++shard) {
      absl::StatusOr<std::unique_ptr<Process>> p = Process::Start(
          EMBER_PS_BINARY,
          {absl::StrCat("--data_dir=", dir_, "/shard", shard), "--port=0",
           absl::StrCat("--shard_id=", shard), "--num_shards=2", "--memory_budget_mb=64"},
          "listening on ", absl::Seconds(30));
      ASSERT_TRUE(p.ok()) << p.status();
      ps_[shard] = std::move(*p);
    }
  }

  void TearDown() override {
    for (std::unique_ptr<Process>& p : ps_) {
      if (p != nullptr) p->Stop(absl::Seconds(10)).IgnoreError();
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  PsClientOptions Options(SlotMap map = SlotMap::Even({0, 1}, /*epoch=*/1)) const {
    PsClientOptions o;
    o.shard_addresses = {{0, ps_[0]->ready_text()}, {1, ps_[1]->ready_text()}};
    o.slot_map = std::move(map);
    o.worker_id = 42;
    return o;
  }

  std::unique_ptr<PsClient> NewClient(const PsClientOptions& options) {
    absl::StatusOr<std::unique_ptr<PsClient>> c = PsClient::Create(options);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }

  static v1::TableConfig SgdTable(float lr, v1::InitializerConfig::Kind init) {
    v1::TableConfig config;
    config.set_name("item");
    config.set_dim(kDim);
    config.mutable_initializer()->set_kind(init);
    config.mutable_optimizer()->set_kind(v1::OptimizerConfig::SGD);
    config.mutable_optimizer()->set_learning_rate(lr);
    return config;
  }

  // Ids 1..n; with n >= 16 both shards of the even map own some.
  static std::vector<uint64_t> Ids(size_t n) {
    std::vector<uint64_t> ids(n);
    for (size_t i = 0; i < n; ++i) ids[i] = 1000 + 7 * i;
    return ids;
  }

  std::string dir_;
  std::unique_ptr<Process> ps_[2];
};

TEST_F(PsClientTest, PushThenPullSpansBothShards) {
  std::unique_ptr<PsClient> client = NewClient(Options());
  ASSERT_NE(client, nullptr);
  const v1::TableConfig config = SgdTable(0.125f, v1::InitializerConfig::UNIFORM);
  ASSERT_TRUE(client->CreateTableEverywhere(config).ok());
  absl::StatusOr<v1::TableConfig> expected_config = NormalizeTableConfig(config);
  ASSERT_TRUE(expected_config.ok());
  absl::StatusOr<v1::TableConfig> table = client->GetTable("item");
  ASSERT_TRUE(table.ok());
  ASSERT_EQ(table->seed(), expected_config->seed());

  const std::vector<uint64_t> ids = Ids(32);
  const SlotMap even = SlotMap::Even({0, 1}, 1);
  int on_shard[2] = {0, 0};
  for (uint64_t id : ids) ++on_shard[even.OwnerOf(SlotOf(table->seed(), id))];
  ASSERT_GT(on_shard[0], 0);
  ASSERT_GT(on_shard[1], 0);

  std::vector<float> init(ids.size() * kDim);
  for (size_t i = 0; i < ids.size(); ++i) {
    InitEmbedding(table->initializer(), table->seed(), ids[i], &init[i * kDim], kDim);
  }
  std::vector<float> out(ids.size() * kDim);
  ASSERT_TRUE(client->Pull("item", ids, absl::MakeSpan(out)).ok());
  EXPECT_EQ(out, init);

  std::vector<float> grads(ids.size() * kDim);
  for (size_t k = 0; k < grads.size(); ++k) grads[k] = static_cast<float>(k % 5) - 2.0f;
  PsHandle push = client->PushAsync("item", ids, grads, /*step=*/1);
  ASSERT_TRUE(push.Wait().ok());

  ASSERT_TRUE(client->Pull("item", ids, absl::MakeSpan(out)).ok());
  for (size_t k = 0; k < out.size(); ++k) {
    EXPECT_EQ(out[k], init[k] - 0.125f * grads[k]) << "element " << k;
  }

  // The float16 wire encoding rounds each value to binary16.
  std::vector<float> half(out.size());
  ASSERT_TRUE(client->Pull("item", ids, absl::MakeSpan(half), {WireEncoding::kFloat16}).ok());
  for (size_t k = 0; k < out.size(); ++k) EXPECT_EQ(half[k], HalfToFloat(FloatToHalf(out[k])));

  // Contract errors.
  EXPECT_EQ(client->Pull("nope", ids, absl::MakeSpan(out)).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client->Pull("item", ids, absl::MakeSpan(out).subspan(1)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(PsClientTest, WrongSlotMapsFollowRedirects) {
  const SlotMap even = SlotMap::Even({0, 1}, 1);
  std::vector<uint32_t> reversed = even.owners();
  for (uint32_t& owner : reversed) owner = 1 - owner;
  absl::StatusOr<SlotMap> reversed_map = SlotMap::FromOwners(reversed, 1);
  absl::StatusOr<SlotMap> all_zero = SlotMap::FromOwners(std::vector<uint32_t>(kNumSlots, 0), 1);
  ASSERT_TRUE(reversed_map.ok() && all_zero.ok());

  const v1::TableConfig config = SgdTable(0.5f, v1::InitializerConfig::ZEROS);
  const std::vector<uint64_t> ids = Ids(16);
  std::vector<float> grads(ids.size() * kDim, 0.25f);
  float expected = 0.0f;
  uint64_t worker_id = 100;
  for (const SlotMap& map : {*reversed_map, *all_zero}) {
    PsClientOptions options = Options(map);
    options.worker_id = worker_id++;  // two clients: their sequences must not collide
    std::unique_ptr<PsClient> client = NewClient(options);
    ASSERT_NE(client, nullptr);
    ASSERT_TRUE(client->CreateTableEverywhere(config).ok());
    absl::Status pushed = client->Push("item", ids, grads, /*step=*/1);
    ASSERT_TRUE(pushed.ok()) << pushed;
    expected -= 0.5f * 0.25f;
    std::vector<float> out(ids.size() * kDim);
    absl::Status pulled = client->Pull("item", ids, absl::MakeSpan(out));
    ASSERT_TRUE(pulled.ok()) << pulled;
    for (float v : out) EXPECT_EQ(v, expected);
    // The client learned the true owner of every slot it touched.
    const SlotMap learned = client->slot_map();
    const uint64_t seed = client->GetTable("item")->seed();
    for (uint64_t id : ids) {
      EXPECT_EQ(learned.OwnerOf(SlotOf(seed, id)), even.OwnerOf(SlotOf(seed, id)));
    }
  }
}

TEST_F(PsClientTest, KilledShardGivesUnavailableWithinDeadline) {
  PsClientOptions options = Options();
  options.deadline = absl::Seconds(3);
  std::unique_ptr<PsClient> client = NewClient(options);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->CreateTableEverywhere(SgdTable(0.5f, v1::InitializerConfig::ZEROS)).ok());
  ASSERT_TRUE(ps_[1]->Kill().ok());
  ps_[1].reset();

  const std::vector<uint64_t> ids = Ids(32);
  std::vector<float> out(ids.size() * kDim);
  const absl::Time start = absl::Now();
  absl::Status s = client->Pull("item", ids, absl::MakeSpan(out));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("ps shard 1"), absl::string_view::npos) << s;
  EXPECT_LT(took, options.deadline + absl::Seconds(1));
  std::vector<float> grads(out.size(), 0.125f);
  EXPECT_FALSE(client->Push("item", ids, grads, 1).ok());
}

TEST_F(PsClientTest, ConcurrentPushesAndPullsSumExactly) {
  std::unique_ptr<PsClient> client = NewClient(Options());
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->CreateTableEverywhere(SgdTable(0.5f, v1::InitializerConfig::ZEROS)).ok());
  const std::vector<uint64_t> ids = Ids(64);
  constexpr int kThreads = 4;
  constexpr int kPushes = 20;
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<float> grads(ids.size() * kDim, static_cast<float>(t + 1) / 8.0f);
      std::vector<float> out(ids.size() * kDim);
      for (int i = 0; i < kPushes; ++i) {
        absl::Status s = client->Push("item", ids, grads, /*step=*/i);
        if (s.ok()) s = client->Pull("item", ids, absl::MakeSpan(out));
        if (!s.ok()) {
          results[t] = s;
          return;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;

  // sum over threads of kPushes * (t + 1) / 8 = 25; times lr 0.5.
  std::vector<float> out(ids.size() * kDim);
  ASSERT_TRUE(client->Pull("item", ids, absl::MakeSpan(out)).ok());
  for (float v : out) EXPECT_EQ(v, -12.5f);
}

}  // namespace
}  // namespace ember
