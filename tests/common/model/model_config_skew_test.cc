// Copyright 2026 The Ember Authors.
//
// Tests of common/model/model_config.{h,cc}, the skew section (model.proto SkewConfig):
// its defaults only when present, what is accepted, and every validation error.

#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "common/model/model_config.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/common/model/model_config_test_util.h"

namespace ember::model {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;

class ModelConfigSkewValidationTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(ModelConfigSkewValidationTest, RejectsWithFieldName) { ExpectRefused(GetParam()); }

v1::ModelConfig WithSkew(const char* skew) {
  v1::ModelConfig config = Small();
  EXPECT_TRUE(google::protobuf::TextFormat::MergeFromString(skew, &config)) << skew;
  return config;
}

TEST(ModelConfigTest, SkewDefaultsOnlyWhenTheSectionIsThere) {
  absl::StatusOr<v1::ModelConfig> none = NormalizeModelConfig(Small(), "small");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_skew());  // a config without one keeps its digest

  absl::StatusOr<v1::ModelConfig> c =
      NormalizeModelConfig(WithSkew(R"pb(skew { cold_features: "u" })pb"), "small");
  ASSERT_TRUE(c.ok()) << c.status();
  const v1::SkewConfig& skew = c->skew();
  EXPECT_EQ(skew.cold_max_count(), 20u);
  EXPECT_TRUE(skew.has_cold_loss_weight());
  EXPECT_EQ(skew.cold_loss_weight(), 1.0f);
  EXPECT_EQ(skew.cold_resample_fraction(), 0.0f);
  EXPECT_EQ(skew.cold_replay_capacity(), 0u);  // 4 x batch_size, decided at run time
  EXPECT_EQ(skew.cold_max_tracked_ids(), 1000000u);
  EXPECT_EQ(skew.hot_cache_steps(), 0u);
  EXPECT_EQ(skew.hot_cache_max_rows(), 100000u);
  absl::StatusOr<v1::ModelConfig> again = NormalizeModelConfig(*c, "small");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(MessageDifferencer::Equals(*c, *again));

  // The quickstart config names its cold features with every option off.
  absl::StatusOr<v1::ModelConfig> quickstart = LoadModelConfig(kQuickstart);
  ASSERT_TRUE(quickstart.ok()) << quickstart.status();
  EXPECT_THAT(quickstart->skew().cold_features(), ::testing::ElementsAre("user_id", "item_id"));
  EXPECT_EQ(quickstart->skew().cold_loss_weight(), 1.0f);
}

TEST(ModelConfigTest, SkewOptionsOnAreAccepted) {
  const absl::StatusOr<v1::ModelConfig> c = NormalizeModelConfig(
      WithSkew(R"pb(
        skew { cold_features: "u" cold_loss_weight: 2 cold_resample_fraction: 1 hot_cache_steps: 3 }
        training { consistency: ASP }
      )pb"),
      "x");
  EXPECT_TRUE(c.ok()) << c.status();
}

INSTANTIATE_TEST_SUITE_P(
    SkewChecks, ModelConfigSkewValidationTest,
    ::testing::Values(
        BadCase{"cold feature unknown",
                [](v1::ModelConfig* c) { c->mutable_skew()->add_cold_features("user"); },
                "skew.cold_features[0] (user): 'user' is not a feature name"},
        BadCase{"cold feature twice",
                [](v1::ModelConfig* c) {
                  c->mutable_skew()->add_cold_features("u");
                  c->mutable_skew()->add_cold_features("u");
                },
                "skew.cold_features[1] (u): feature 'u' appears twice"},
        BadCase{"cold feature multi-hot",
                [](v1::ModelConfig* c) { c->mutable_skew()->add_cold_features("items"); },
                "skew.cold_features[0] (items): column 'items' is MULTI_HOT; a cold feature "
                "must be CATEGORICAL"},
        BadCase{"cold weight 0",
                [](v1::ModelConfig* c) {
                  c->mutable_skew()->add_cold_features("u");
                  c->mutable_skew()->set_cold_loss_weight(0);
                },
                "skew.cold_loss_weight: 0 must be in (0, 1000] (1 = off)"},
        BadCase{"cold weight negative",
                [](v1::ModelConfig* c) {
                  c->mutable_skew()->add_cold_features("u");
                  c->mutable_skew()->set_cold_loss_weight(-2);
                },
                "skew.cold_loss_weight: -2 must be in (0, 1000]"},
        BadCase{"cold weight NaN",
                [](v1::ModelConfig* c) { c->mutable_skew()->set_cold_loss_weight(NAN); },
                "skew.cold_loss_weight: nan must be in"},
        BadCase{"cold weight huge",
                [](v1::ModelConfig* c) { c->mutable_skew()->set_cold_loss_weight(1e6); },
                "skew.cold_loss_weight: 1e+06 must be in (0, 1000]"},
        BadCase{"resample above 1",
                [](v1::ModelConfig* c) { c->mutable_skew()->set_cold_resample_fraction(1.5); },
                "skew.cold_resample_fraction: 1.5 must be in [0, 1]"},
        BadCase{"resample negative",
                [](v1::ModelConfig* c) { c->mutable_skew()->set_cold_resample_fraction(-0.1); },
                "skew.cold_resample_fraction: -0.1 must be in [0, 1]"},
        BadCase{"weight without cold features",
                [](v1::ModelConfig* c) { c->mutable_skew()->set_cold_loss_weight(2); },
                "skew.cold_features: cold_loss_weight and cold_resample_fraction need at least "
                "one cold feature"},
        BadCase{"resampling without cold features",
                [](v1::ModelConfig* c) { c->mutable_skew()->set_cold_resample_fraction(0.5); },
                "skew.cold_features: cold_loss_weight and cold_resample_fraction need"},
        BadCase{"cold max count too big",
                [](v1::ModelConfig* c) { c->mutable_skew()->set_cold_max_count(2000000000); },
                "skew.cold_max_count: 2000000000 is out of range 1..1000000000"},
        BadCase{"replay capacity too big",
                [](v1::ModelConfig* c) { c->mutable_skew()->set_cold_replay_capacity(1 << 21); },
                "skew.cold_replay_capacity: 2097152 is above 1048576"},
        BadCase{"tracked ids too many",
                [](v1::ModelConfig* c) { c->mutable_skew()->set_cold_max_tracked_ids(2000000000); },
                "skew.cold_max_tracked_ids: 2000000000 is out of range"},
        BadCase{"hot cache with BSP",
                [](v1::ModelConfig* c) { c->mutable_skew()->set_hot_cache_steps(2); },
                "skew.hot_cache_steps: the hot-row cache serves rows up to 2 steps old, but BSP "
                "training must be exact"},
        BadCase{"hot cache rows too many",
                [](v1::ModelConfig* c) {
                  c->mutable_training()->set_consistency(v1::TrainingConfig::SSP);
                  c->mutable_skew()->set_hot_cache_steps(2);
                  c->mutable_skew()->set_hot_cache_max_rows(uint64_t{1} << 30);
                },
                "skew.hot_cache_max_rows: 1073741824 is out of range 1..67108864"}),
    BadCaseName);

}  // namespace
}  // namespace ember::model
