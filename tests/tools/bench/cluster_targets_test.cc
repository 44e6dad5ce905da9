// Copyright 2026 The Ember Authors.
//
// The cluster suite's ratios and targets (tools/bench/cluster_targets.h): from given
// rates, every ratio, `_target` and `_met` field of the JSON, with the names the
// depths give them; a missing rate gives null and an unmet target.

#include "tools/bench/cluster_targets.h"

#include <cmath>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace ember::bench::cluster {
namespace {

// The rates of one run: every case of the suite (8 in flight, Redis pipeline 4).
Figures Rates(double ember_pull, double ember_pull8) {
  Figures f;
  f.AddNumber("ember_pull_keys_per_sec", ember_pull);
  f.AddNumber("ember_pull4_keys_per_sec", 1.2e6);
  f.AddNumber("ember_pull8_keys_per_sec", ember_pull8);
  f.AddNumber("ember_push_sgd_keys_per_sec", 0.7e6);
  f.AddNumber("ember_push8_sgd_keys_per_sec", 1.2e6);
  f.AddNumber("redis_mget_keys_per_sec", 0.4e6);
  f.AddNumber("redis_mget4_keys_per_sec", 0.5e6);
  f.AddNumber("noop_grpc_pull_keys_per_sec", 2.0e6);
  f.AddNumber("noop_grpc_pull8_keys_per_sec", 3.0e6);
  f.AddNumber("noop_grpc_push_keys_per_sec", 1.5e6);
  f.AddNumber("noop_grpc_push8_keys_per_sec", 2.0e6);
  return f;
}

bool Met(const Figures& f, const std::string& name) {
  return absl::StrContains(f.ToJson(), "\"" + name + "_met\": true");
}

TEST(ClusterTargetsTest, RatiosAtEqualAndUnequalConcurrency) {
  Figures f = Rates(1.0e6, 1.5e6);
  AddClusterRatios(f, /*in_flight=*/8, /*redis_pipeline=*/4);
  EXPECT_DOUBLE_EQ(*f.Number("pull_vs_redis"), 2.5);
  EXPECT_DOUBLE_EQ(*f.Number("pull4_vs_redis4"), 2.4);
  EXPECT_DOUBLE_EQ(*f.Number("pull8_vs_redis4"), 3.0);
  EXPECT_DOUBLE_EQ(*f.Number("pull8_vs_noop_grpc"), 0.5);
  EXPECT_DOUBLE_EQ(*f.Number("pull_vs_noop_grpc"), 0.5);
  EXPECT_DOUBLE_EQ(*f.Number("push8_vs_noop_grpc"), 0.6);
}

TEST(ClusterTargetsTest, TargetsOfIssue25AreReportedWithTheirFlags) {
  Figures f = Rates(1.0e6, 1.5e6);
  AddClusterRatios(f, 8, 4);
  EXPECT_DOUBLE_EQ(*f.Number("pull_vs_redis_target"), 8);
  EXPECT_DOUBLE_EQ(*f.Number("pull8_vs_noop_grpc_target"), 0.85);
  EXPECT_DOUBLE_EQ(*f.Number("ember_pull8_keys_per_sec_target"), 2.4e6);
  EXPECT_DOUBLE_EQ(*f.Number("ember_pull8_stretch_target"), 3.0e6);
  EXPECT_DOUBLE_EQ(*f.Number("ember_pull_keys_per_sec_target"), 1.3e6);
  for (const char* name : {"pull_vs_redis", "pull8_vs_noop_grpc", "ember_pull8_keys_per_sec",
                           "ember_pull8_stretch", "ember_pull_keys_per_sec"}) {
    EXPECT_TRUE(absl::StrContains(f.ToJson(), std::string("\"") + name + "_met\": false"))
        << name << " in " << f.ToJson();
  }
  // No target on the ratios the issue sets none for.
  EXPECT_FALSE(f.Number("pull4_vs_redis4_target").has_value());
  EXPECT_FALSE(f.Number("push8_vs_noop_grpc_target").has_value());
}

TEST(ClusterTargetsTest, TargetsMetAtTheirValues) {
  // ember_pull and ember_pull8 exactly at their targets (met is >=), the ratios above.
  Figures f = Rates(1.3e6, 3.0e6);
  f.AddNumber("noop_grpc_pull8_keys_per_sec", 3.5e6);  // 0.857
  f.AddNumber("redis_mget_keys_per_sec", 1.6e5);       // 8.125
  AddClusterRatios(f, 8, 4);
  for (const char* name : {"pull_vs_redis", "pull8_vs_noop_grpc", "ember_pull8_keys_per_sec",
                           "ember_pull8_stretch", "ember_pull_keys_per_sec"}) {
    EXPECT_TRUE(Met(f, name)) << name << " in " << f.ToJson();
  }
}

TEST(ClusterTargetsTest, NamesFollowTheDepths) {
  Figures f;
  f.AddNumber("ember_pull2_keys_per_sec", 1e6);
  f.AddNumber("redis_mget2_keys_per_sec", 5e5);
  AddClusterRatios(f, /*in_flight=*/16, /*redis_pipeline=*/2);
  EXPECT_DOUBLE_EQ(*f.Number("pull2_vs_redis2"), 2.0);
  EXPECT_TRUE(f.Number("pull16_vs_noop_grpc_target").has_value());
  EXPECT_TRUE(f.Number("ember_pull16_stretch_target").has_value());
}

TEST(ClusterTargetsTest, MissingRatesGiveNullAndUnmetTargets) {
  Figures f;
  f.AddNumber("ember_pull_keys_per_sec", 2e6);
  f.AddNumber("redis_mget_keys_per_sec", 0);
  AddClusterRatios(f, 8, 4);
  EXPECT_TRUE(std::isnan(*f.Number("pull_vs_redis")));
  EXPECT_TRUE(std::isnan(*f.Number("pull8_vs_noop_grpc")));
  const std::string json = f.ToJson();
  EXPECT_TRUE(absl::StrContains(json, "\"pull_vs_redis\": null")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"pull_vs_redis_met\": false")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"ember_pull8_keys_per_sec_met\": false")) << json;
  EXPECT_TRUE(Met(f, "ember_pull_keys_per_sec"));  // present and above 1.3e6
}

}  // namespace
}  // namespace ember::bench::cluster
