// Copyright 2026 The Ember Authors.
//
// HotSetPublisher without processes: share threshold over summed rates, hysteresis,
// the top-K cut, versions only on change (keys, holders, incarnations), rates updated
// in place, DEAD shards' reports dropped, versions above what shards and clients
// report after a coordinator restart, disabled hot keys, option validation, metrics.

#include "server/coordinator/hot_set_publisher.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/metric_family.h"
#include "tests/support/eventually.h"

namespace ember {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

v1::ShardInfo Shard(uint32_t id, bool alive = true) {
  v1::ShardInfo shard;
  shard.set_shard_id(id);
  shard.set_address("10.0.0." + std::to_string(id) + ":7000");
  shard.set_state(alive ? v1::ShardInfo::ALIVE : v1::ShardInfo::DEAD);
  return shard;
}

// A report with `total` keys/s and (table, id, rate) keys.
struct Key {
  std::string table;
  uint64_t id;
  double rate;
};
v1::HotKeyReport Report(double total, const std::vector<Key>& keys) {
  v1::HotKeyReport report;
  report.set_total_rate(total);
  for (const Key& k : keys) {
    v1::HotKeyTable* table = nullptr;
    for (v1::HotKeyTable& t : *report.mutable_tables()) {
      if (t.table() == k.table) table = &t;
    }
    if (table == nullptr) {
      table = report.add_tables();
      table->set_table(k.table);
    }
    v1::HotKey* key = table->add_keys();
    key->set_id(k.id);
    key->set_rate(k.rate);
  }
  return report;
}

// The hot ids of `table` in `set`, in the set's order.
std::vector<uint64_t> Ids(const v1::HotSet& set, const std::string& table) {
  std::vector<uint64_t> out;
  for (const v1::HotKeyTable& t : set.tables()) {
    if (t.table() != table) continue;
    for (const v1::HotKey& k : t.keys()) out.push_back(k.id());
  }
  return out;
}

std::vector<uint32_t> Holders(const v1::HotSet& set) {
  std::vector<uint32_t> out;
  for (const v1::HotSetHolder& h : set.holders()) out.push_back(h.shard_id());
  return out;
}

HotSetOptions Options(uint32_t keys_per_table = 32, double min_share = 0.01) {
  HotSetOptions o;
  o.keys_per_table = keys_per_table;
  o.min_share = min_share;
  o.replicas = 2;
  return o;
}

TEST(HotSetPublisherTest, PublishesKeysAboveTheShareOfSummedRates) {
  HotSetPublisher p(Options());
  // Cluster load 1000 keys/s; min share 1% = 10 keys/s.
  p.Report(0, 11, Report(600, {{"item", 1, 100}, {"item", 2, 6}, {"user", 9, 9.9}}), 0);
  p.Report(1, 12, Report(400, {{"item", 2, 6}, {"item", 3, 9}}), 0);
  EXPECT_TRUE(p.Compute({Shard(1), Shard(0)}));
  const v1::HotSet set = p.Get(0);
  EXPECT_EQ(set.version(), 1u);
  // item 2 is hot only summed over shards (12/1000); item 3 (0.9%) and user 9 are not.
  EXPECT_THAT(Ids(set, "item"), ElementsAre(1, 2));
  EXPECT_THAT(Ids(set, "user"), IsEmpty());
  ASSERT_EQ(set.tables_size(), 1);
  EXPECT_DOUBLE_EQ(set.tables(0).keys(0).rate(), 100);
  EXPECT_DOUBLE_EQ(set.tables(0).keys(1).rate(), 12);
  EXPECT_DOUBLE_EQ(set.total_rate(), 1000);
  // Holders: alive shards by ascending id, with address and incarnation; settings.
  EXPECT_THAT(Holders(set), ElementsAre(0, 1));
  EXPECT_EQ(set.holders(0).address(), "10.0.0.0:7000");
  EXPECT_EQ(set.holders(0).incarnation(), 11u);
  EXPECT_EQ(set.holders(1).incarnation(), 12u);
  EXPECT_EQ(set.replicas(), 2u);
  EXPECT_EQ(p.version(), 1u);
}

TEST(HotSetPublisherTest, HotKeysStayHotDownToHalfTheShare) {
  HotSetPublisher p(Options());
  p.Report(0, 0, Report(1000, {{"item", 1, 20}}), 0);
  ASSERT_TRUE(p.Compute({Shard(0)}));
  // 0.6%: below the 1% threshold but above half of it: still hot, no new version. A
  // new key at the same share does not become hot.
  p.Report(0, 0, Report(1000, {{"item", 1, 6}, {"item", 2, 6}}), 0);
  EXPECT_FALSE(p.Compute({Shard(0)}));
  EXPECT_THAT(Ids(p.Get(0), "item"), ElementsAre(1));
  EXPECT_DOUBLE_EQ(p.Get(0).tables(0).keys(0).rate(), 6);  // the current rate
  // 0.4%: below half of the threshold: no longer hot.
  p.Report(0, 0, Report(1000, {{"item", 1, 4}}), 0);
  EXPECT_TRUE(p.Compute({Shard(0)}));
  const v1::HotSet set = p.Get(0);
  EXPECT_EQ(set.version(), 2u);
  EXPECT_THAT(Ids(set, "item"), IsEmpty());
  EXPECT_EQ(set.tables_size(), 0);
}

TEST(HotSetPublisherTest, CutsAtKeysPerTableByRateThenId) {
  HotSetPublisher p(Options(/*keys_per_table=*/3));
  p.Report(
      0, 0,
      Report(1000,
             {{"item", 5, 50}, {"item", 4, 80}, {"item", 7, 50}, {"item", 6, 50}, {"user", 1, 30}}),
      0);
  ASSERT_TRUE(p.Compute({Shard(0)}));
  const v1::HotSet set = p.Get(0);
  EXPECT_THAT(Ids(set, "item"), ElementsAre(4, 5, 6));  // descending rate, ties by id
  EXPECT_THAT(Ids(set, "user"), ElementsAre(1));
  ASSERT_EQ(set.tables_size(), 2);
  EXPECT_EQ(set.tables(0).table(), "item");  // ascending table names
  EXPECT_EQ(set.tables(1).table(), "user");
}

TEST(HotSetPublisherTest, NewVersionOnlyWhenKeysHoldersOrIncarnationsChange) {
  HotSetPublisher p(Options());
  p.Report(0, 1, Report(500, {{"item", 1, 100}}), 0);
  p.Report(1, 2, Report(500, {}), 0);
  ASSERT_TRUE(p.Compute({Shard(0), Shard(1)}));
  ASSERT_EQ(p.version(), 1u);
  // Same keys, other rates: same version, new rates and total.
  p.Report(0, 1, Report(900, {{"item", 1, 300}}), 0);
  EXPECT_FALSE(p.Compute({Shard(0), Shard(1)}));
  v1::HotSet set = p.Get(0);
  EXPECT_EQ(set.version(), 1u);
  EXPECT_DOUBLE_EQ(set.tables(0).keys(0).rate(), 300);
  EXPECT_DOUBLE_EQ(set.total_rate(), 1400);
  // A new shard is a new holder.
  EXPECT_TRUE(p.Compute({Shard(0), Shard(1), Shard(2)}));
  EXPECT_EQ(p.version(), 2u);
  EXPECT_FALSE(p.Compute({Shard(0), Shard(1), Shard(2)}));
  // A restarted shard (new incarnation) changes the holders too.
  p.ShardRegistered(1, 99);
  EXPECT_TRUE(p.Compute({Shard(0), Shard(1), Shard(2)}));
  set = p.Get(0);
  EXPECT_EQ(set.version(), 3u);
  EXPECT_EQ(set.holders(1).incarnation(), 99u);
  // A changed address too.
  v1::ShardInfo moved = Shard(2);
  moved.set_address("10.0.9.9:7000");
  EXPECT_TRUE(p.Compute({Shard(0), Shard(1), moved}));
  EXPECT_EQ(p.version(), 4u);
}

TEST(HotSetPublisherTest, NothingPublishedBeforeAShardIsAlive) {
  HotSetPublisher p(Options());
  EXPECT_FALSE(p.Compute({}));
  EXPECT_FALSE(p.Compute({Shard(0, /*alive=*/false)}));
  EXPECT_EQ(p.version(), 0u);
  EXPECT_EQ(p.Get(0).version(), 0u);
  // A set with holders but no hot keys yet is published (shards learn the settings).
  EXPECT_TRUE(p.Compute({Shard(0)}));
  EXPECT_EQ(p.Get(0).version(), 1u);
  EXPECT_EQ(p.Get(0).tables_size(), 0);
}

TEST(HotSetPublisherTest, DeadShardsReportsAreDropped) {
  HotSetPublisher p(Options());
  p.Report(0, 0, Report(500, {{"item", 1, 100}}), 0);
  p.Report(1, 0, Report(500, {{"item", 2, 100}}), 0);
  ASSERT_TRUE(p.Compute({Shard(0), Shard(1)}));
  EXPECT_THAT(Ids(p.Get(0), "item"), ElementsAre(1, 2));
  // Shard 1 is DEAD: its keys and load go, and it is no holder.
  EXPECT_TRUE(p.Compute({Shard(0), Shard(1, /*alive=*/false)}));
  v1::HotSet set = p.Get(0);
  EXPECT_THAT(Ids(set, "item"), ElementsAre(1));
  EXPECT_DOUBLE_EQ(set.total_rate(), 500);
  EXPECT_THAT(Holders(set), ElementsAre(0));
  // Back ALIVE without a new report: the old one stays forgotten.
  EXPECT_TRUE(p.Compute({Shard(0), Shard(1)}));
  EXPECT_THAT(Ids(p.Get(0), "item"), ElementsAre(1));
  // Its next report counts again.
  p.Report(1, 0, Report(500, {{"item", 2, 100}}), 0);
  EXPECT_TRUE(p.Compute({Shard(0), Shard(1)}));
  EXPECT_THAT(Ids(p.Get(0), "item"), ElementsAre(1, 2));
}

TEST(HotSetPublisherTest, GetOmitsTheListsForTheCurrentVersion) {
  HotSetPublisher p(Options());
  p.Report(0, 0, Report(100, {{"item", 1, 50}}), 0);
  ASSERT_TRUE(p.Compute({Shard(0)}));
  const v1::HotSet current = p.Get(1);
  EXPECT_EQ(current.version(), 1u);
  EXPECT_EQ(current.tables_size(), 0);
  EXPECT_EQ(current.holders_size(), 0);
  EXPECT_EQ(current.replicas(), 2u);  // the settings are always there
  EXPECT_DOUBLE_EQ(current.total_rate(), 100);
  const v1::HotSet full = p.Get(0);
  EXPECT_EQ(full.tables_size(), 1);
  EXPECT_EQ(full.holders_size(), 1);
}

TEST(HotSetPublisherTest, PublishesAboveVersionsShardsAndClientsHave) {
  // A restarted coordinator: shard 0 applied version 7 of the previous process.
  HotSetPublisher p(Options());
  p.Report(0, 0, Report(100, {{"item", 1, 50}}), /*applied_version=*/7);
  ASSERT_TRUE(p.Compute({Shard(0)}));
  EXPECT_EQ(p.version(), 8u);
  EXPECT_FALSE(p.Compute({Shard(0)}));
  // A client that has version 12 forces a version above it even without a change.
  EXPECT_EQ(p.Get(12).version(), 8u);
  EXPECT_TRUE(p.Compute({Shard(0)}));
  EXPECT_EQ(p.version(), 13u);
  EXPECT_FALSE(p.Compute({Shard(0)}));
  EXPECT_EQ(p.version(), 13u);
}

TEST(HotSetPublisherTest, ZeroKeysPerTableDisablesHotKeys) {
  HotSetPublisher p(Options(/*keys_per_table=*/0));
  p.Report(0, 0, Report(100, {{"item", 1, 50}}), 3);
  EXPECT_FALSE(p.Compute({Shard(0)}));
  EXPECT_EQ(p.Get(0).version(), 0u);
  EXPECT_TRUE(p.Start([] { return std::vector<v1::ShardInfo>{}; }).ok());  // no thread
  p.Stop();
}

TEST(HotSetPublisherTest, IgnoresRatesThatAreNotNumbers) {
  HotSetPublisher p(Options());
  p.Report(0, 0, Report(-5, {{"item", 1, 50}}), 0);
  p.Report(1, 0, Report(100, {{"item", 2, std::numeric_limits<double>::quiet_NaN()}}), 0);
  ASSERT_TRUE(p.Compute({Shard(0), Shard(1)}));
  const v1::HotSet set = p.Get(0);
  EXPECT_DOUBLE_EQ(set.total_rate(), 100);
  EXPECT_THAT(Ids(set, "item"), ElementsAre(1));
}

TEST(HotSetPublisherTest, ValidatesOptions) {
  HotSetOptions o;
  EXPECT_TRUE(ValidateHotSetOptions(o).ok());
  o.min_share = 0;
  EXPECT_THAT(std::string(ValidateHotSetOptions(o).message()), HasSubstr("--hot_min_share"));
  o.min_share = 1.5;
  EXPECT_FALSE(ValidateHotSetOptions(o).ok());
  o = HotSetOptions();
  o.max_staleness_ms = 100;
  EXPECT_THAT(std::string(ValidateHotSetOptions(o).message()), HasSubstr("--hot_refresh_ms"));
  o.refresh_interval_ms = 200;
  EXPECT_THAT(std::string(ValidateHotSetOptions(o).message()), HasSubstr("below --hot_refresh_ms"));
  o.max_staleness_ms = 800;
  EXPECT_TRUE(ValidateHotSetOptions(o).ok());
  o = HotSetOptions();
  o.publish_interval = absl::ZeroDuration();
  EXPECT_THAT(std::string(ValidateHotSetOptions(o).message()),
              HasSubstr("--hot_publish_interval_ms"));
  o = HotSetOptions();
  o.replicas = 5000;
  EXPECT_THAT(std::string(ValidateHotSetOptions(o).message()), HasSubstr("--hot_replicas"));
  HotSetPublisher bad(HotSetOptions{.keys_per_table = 1, .min_share = 2});
  EXPECT_EQ(bad.Start([] { return std::vector<v1::ShardInfo>{}; }).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(HotSetPublisherTest, ThreadPublishesFromTheShardsCallback) {
  HotSetOptions o = Options();
  o.publish_interval = absl::Milliseconds(5);
  HotSetPublisher p(o);
  p.Report(0, 0, Report(100, {{"item", 1, 50}}), 0);
  ASSERT_TRUE(p.Start([] { return std::vector<v1::ShardInfo>{Shard(0)}; }).ok());
  EXPECT_EQ(p.Start([] { return std::vector<v1::ShardInfo>{}; }).code(),
            absl::StatusCode::kFailedPrecondition);
  // The first computation runs at once when the thread starts; poll for its result.
  Eventually([&] { return p.version() != 0; }, absl::Seconds(20), absl::Milliseconds(5));
  p.Stop();
  EXPECT_EQ(p.version(), 1u);
  EXPECT_THAT(Ids(p.Get(0), "item"), ElementsAre(1));
}

TEST(HotSetPublisherTest, MetricsShowVersionAndKeysPerTable) {
  HotSetPublisher p(Options());
  p.Report(0, 0, Report(100, {{"item", 1, 50}, {"item", 2, 40}, {"user", 3, 5}}), 0);
  ASSERT_TRUE(p.Compute({Shard(0)}));
  const std::vector<prometheus::MetricFamily> families = p.MetricsCollector()->Collect();
  double version = -1;
  std::vector<std::pair<std::string, double>> keys;
  for (const prometheus::MetricFamily& f : families) {
    if (f.name == "ember_hot_set_version") version = f.metric.at(0).gauge.value;
    if (f.name == "ember_hot_keys") {
      for (const prometheus::ClientMetric& m : f.metric) {
        keys.emplace_back(m.label.at(0).value, m.gauge.value);
      }
    }
  }
  EXPECT_EQ(version, 1);
  EXPECT_THAT(keys, ElementsAre(std::make_pair(std::string("item"), 2.0),
                                std::make_pair(std::string("user"), 1.0)));
}

}  // namespace
}  // namespace ember
