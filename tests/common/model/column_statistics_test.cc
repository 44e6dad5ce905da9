// Copyright 2026 The Ember Authors.
//
// Tests of common/model/column_statistics.{h,cc}: which columns need statistics, exact
// means, stds and quantile boundaries from a sample, copying them from a checkpoint's
// config, and the errors when they are missing.

#include "common/model/column_statistics.h"

#include <cmath>
#include <string>
#include <vector>

#include "common/model/model_config.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace ember::model {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kConfig[] = R"pb(
  data {
    columns { name: "label" kind: LABEL }
    columns { name: "price" kind: DENSE standardize: true }
    columns { name: "age" kind: DENSE standardize: true mean: 40 std: 10 }
    columns { name: "hour" kind: BUCKETIZED quantiles: 4 }
    columns {
      name: "day"
      kind: BUCKETIZED
      boundaries: [ 1, 2 ]
    }
    columns { name: "u" kind: CATEGORICAL }
  }
  tables { name: "t" dim: 16 }
  features { column: "hour" table: "t" }
  features { column: "u" table: "t" }
)pb";

v1::ModelConfig Config() {
  v1::ModelConfig config;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(kConfig, &config));
  absl::StatusOr<v1::ModelConfig> normalized = NormalizeModelConfig(config, "test");
  EXPECT_TRUE(normalized.ok()) << normalized.status();
  return *normalized;
}

TEST(ColumnStatisticsTest, WhichColumnsNeedThem) {
  const v1::ModelConfig config = Config();
  std::vector<bool> needs;
  for (const v1::ColumnConfig& c : config.data().columns())
    needs.push_back(ColumnNeedsStatistics(c));
  EXPECT_THAT(needs, ElementsAre(false, true, false, true, false, false));
  EXPECT_TRUE(NeedsStatistics(config));
  const absl::Status s = CheckStatistics(config, "job.pbtxt");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("job.pbtxt: data.columns[1] (price): standardize needs mean and std, "
                        "which this config lacks"));
}

TEST(ColumnStatisticsTest, QuantileBoundariesAreExactAndDeduplicated) {
  // 8 values, 4 buckets: s[2], s[4], s[6] of the sorted values, whatever their order.
  EXPECT_THAT(QuantileBoundaries({8, 1, 7, 2, 6, 3, 5, 4}, 4), ElementsAre(3, 5, 7));
  // 10 values, 3 buckets: s[3], s[6].
  EXPECT_THAT(QuantileBoundaries({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 3), ElementsAre(3, 6));
  // Ties: s[2] = s[4] = 1 -> one boundary; a constant column has one boundary.
  EXPECT_THAT(QuantileBoundaries({1, 1, 1, 1, 1, 1, 9, 9}, 4), ElementsAre(1, 9));
  EXPECT_THAT(QuantileBoundaries({5, 5, 5}, 10), ElementsAre(5));
  // Fewer values than buckets.
  EXPECT_THAT(QuantileBoundaries({2, 1}, 4), ElementsAre(1, 2));
}

TEST(ColumnStatisticsTest, FillsMeanStdAndBoundaries) {
  v1::ModelConfig config = Config();
  ColumnSample sample;
  sample["price"] = {1, 2, 3, 4};  // mean 2.5, population std sqrt(1.25)
  sample["hour"] = {8, 1, 7, 2, 6, 3, 5, 4};
  ASSERT_TRUE(FillStatistics(sample, &config).ok());
  const v1::ColumnConfig& price = config.data().columns(1);
  EXPECT_FLOAT_EQ(price.mean(), 2.5f);
  EXPECT_FLOAT_EQ(price.std(), std::sqrt(1.25f));
  EXPECT_EQ(config.data().columns(2).mean(), 40.0f);  // given: kept
  EXPECT_THAT(config.data().columns(3).boundaries(), ElementsAre(3, 5, 7));
  EXPECT_THAT(config.data().columns(4).boundaries(), ElementsAre(1, 2));
  EXPECT_FALSE(NeedsStatistics(config));
  EXPECT_TRUE(CheckStatistics(config, "x").ok());
  // The filled config is a valid config, and normalizing it keeps the statistics.
  absl::StatusOr<v1::ModelConfig> again = NormalizeModelConfig(config, "x");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FLOAT_EQ(again->data().columns(1).mean(), 2.5f);
}

TEST(ColumnStatisticsTest, ConstantColumnGetsStdOne) {
  v1::ModelConfig config = Config();
  ColumnSample sample;
  sample["price"] = {3, 3, 3};
  sample["hour"] = {1};
  ASSERT_TRUE(FillStatistics(sample, &config).ok());
  EXPECT_EQ(config.data().columns(1).mean(), 3.0f);
  EXPECT_EQ(config.data().columns(1).std(), 1.0f);
}

TEST(ColumnStatisticsTest, EmptySampleIsAnError) {
  v1::ModelConfig config = Config();
  ColumnSample sample;
  sample["price"] = {1};
  sample["hour"] = {};  // every value empty
  const absl::Status s = FillStatistics(sample, &config);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("data.columns[3] (hour): quantiles needs its boundaries, "
                                     "but the statistics sample has no non-empty values"));
}

TEST(ColumnStatisticsTest, CopiesFromACheckpointConfig) {
  v1::ModelConfig saved = Config();
  ColumnSample sample;
  sample["price"] = {1, 2, 3, 4};
  sample["hour"] = {8, 1, 7, 2, 6, 3, 5, 4};
  ASSERT_TRUE(FillStatistics(sample, &saved).ok());

  v1::ModelConfig job = Config();
  ASSERT_TRUE(CopyStatistics(saved, "checkpoint c1", &job).ok());
  EXPECT_EQ(job.SerializeAsString(), saved.SerializeAsString());

  // A checkpoint whose config lacks them is refused, naming the column.
  v1::ModelConfig lacking = Config();
  job = Config();
  const absl::Status s = CopyStatistics(lacking, "checkpoint c1", &job);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("checkpoint c1 lacks the statistics of data.columns[1] "
                                     "(price): standardize needs mean and std"));
  // Or has no such column.
  lacking.mutable_data()->mutable_columns(1)->set_name("cost");
  EXPECT_THAT(CopyStatistics(lacking, "checkpoint c1", &job).message(),
              HasSubstr("no such column"));
}

}  // namespace
}  // namespace ember::model
