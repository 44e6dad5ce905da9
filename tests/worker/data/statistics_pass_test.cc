// Copyright 2026 The Ember Authors.
//
// Tests of worker/data/statistics_pass.{h,cc}: exact statistics of a small schema TSV
// dataset of two files, the cap on the sample, and its errors.

#include "worker/data/statistics_pass.h"

#include <cmath>
#include <fstream>
#include <string>

#include "common/model/model_config.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tests/support/scratch_dir.h"

namespace ember::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// price: LOG1P then clipped to 2, standardized from the data; hour: 4 quantile buckets
// from the data; a cross (not in the files) and a given bucketizing are left alone.
constexpr char kConfig[] = R"pb(
  data {
    columns { name: "label" kind: LABEL }
    columns {
      name: "price"
      kind: DENSE
      transform: LOG1P
      clip_max: 2
      standardize: true
      missing_value: 0
    }
    columns { name: "hour" kind: BUCKETIZED quantiles: 4 }
    columns {
      name: "day"
      kind: BUCKETIZED
      boundaries: [ 3 ]
    }
    columns { name: "u" kind: CATEGORICAL }
    columns {
      name: "u_x_hour"
      kind: CROSS
      cross_of: [ "u", "hour" ]
    }
    columns { name: "price_q" source: "price" kind: BUCKETIZED quantiles: 2 }
  }
  tables { name: "t" dim: 16 }
  features { column: "u_x_hour" table: "t" }
  features { column: "day" table: "t" }
)pb";

class StatisticsPassTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok()) << dir_.error();
    // Two files, read in name order; "u" and "day" are not read by the pass (a bad ID
    // there does not matter).
    std::ofstream(dir_.path() + "/part-0.tsv") << "label\tprice\thour\tday\tu\n"
                                               << "1\t0\t8\t1\ta\n"
                                               << "0\t1\t\t1\tb\n"       // hour empty: not sampled
                                               << "1\t\t1\t1\tc\n"       // price empty: 0
                                               << "0\t1000\t7\t1\td\n";  // log1p -> clipped to 2
    std::ofstream(dir_.path() + "/part-1.tsv") << "u\tday\thour\tprice\tlabel\n"  // other order
                                               << "e\t1\t2\t3\t1\n"
                                               << "f\t1\t6\t0\t0\n"
                                               << "g\t1\t3\t0\t1\n"
                                               << "h\t1\t5\t0\t0\n"
                                               << "i\t1\t4\t0\t1\n";
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(kConfig, &config_));
    config_.mutable_data()->set_train_path(dir_.path());
    absl::StatusOr<v1::ModelConfig> normalized = model::NormalizeModelConfig(config_, "test");
    ASSERT_TRUE(normalized.ok()) << normalized.status();
    config_ = *normalized;
  }

  ScratchDir dir_{"statistics_pass_test"};
  v1::ModelConfig config_;
};

TEST_F(StatisticsPassTest, ExactStatistics) {
  absl::StatusOr<v1::ModelConfig> filled = ComputeStatistics(config_);
  ASSERT_TRUE(filled.ok()) << filled.status();
  // price after LOG1P and the clip: 0, log1p(1), 0, 2, log1p(3), 0, 0, 0, 0.
  const double values[] = {0, std::log1p(1.0f), 0, 2, std::log1p(3.0f), 0, 0, 0, 0};
  double sum = 0, squares = 0;
  for (double v : values) sum += v;
  const double mean = sum / 9;
  for (double v : values) squares += (v - mean) * (v - mean);
  const v1::ColumnConfig& price = filled->data().columns(1);
  EXPECT_FLOAT_EQ(price.mean(), static_cast<float>(mean));
  EXPECT_FLOAT_EQ(price.std(), static_cast<float>(std::sqrt(squares / 9)));
  // hour: 8 non-empty values 8 1 7 2 6 3 5 4 -> s[2], s[4], s[6] = 3, 5, 7.
  EXPECT_THAT(filled->data().columns(2).boundaries(), ElementsAre(3, 5, 7));
  EXPECT_THAT(filled->data().columns(3).boundaries(), ElementsAre(3));  // given
  // price_q reads the raw prices of "price" (empty left out): 0 1 1000 3 0 0 0 0 ->
  // sorted 0 0 0 0 0 1 3 1000, s[4] = 0.
  EXPECT_THAT(filled->data().columns(6).boundaries(), ElementsAre(0));
  // The rest of the config is unchanged.
  v1::ModelConfig rest = *filled;
  rest.mutable_data()->mutable_columns(1)->clear_mean();
  rest.mutable_data()->mutable_columns(1)->clear_std();
  rest.mutable_data()->mutable_columns(2)->clear_boundaries();
  rest.mutable_data()->mutable_columns(6)->clear_boundaries();
  EXPECT_EQ(rest.SerializeAsString(), config_.SerializeAsString());
}

TEST_F(StatisticsPassTest, SampleIsTheFirstExamples) {
  config_.set_statistics_max_examples(4);  // the first file only
  absl::StatusOr<v1::ModelConfig> filled = ComputeStatistics(config_);
  ASSERT_TRUE(filled.ok()) << filled.status();
  const double mean = (std::log1p(1.0) + 2) / 4;
  EXPECT_NEAR(filled->data().columns(1).mean(), mean, 1e-6);
  // hour 8, 1, 7: s[0], s[1], s[2] of 1 7 8 (m = 3: floor(i * 3 / 4) = 0, 1, 2).
  EXPECT_THAT(filled->data().columns(2).boundaries(), ElementsAre(1, 7, 8));
}

TEST_F(StatisticsPassTest, NothingToComputeReadsNothing) {
  config_.mutable_data()->mutable_columns(1)->set_standardize(false);
  config_.mutable_data()->mutable_columns(2)->add_boundaries(1);
  config_.mutable_data()->mutable_columns(6)->add_boundaries(1);
  config_.mutable_data()->set_train_path(dir_.path() + "/missing");
  absl::StatusOr<v1::ModelConfig> filled = ComputeStatistics(config_);
  ASSERT_TRUE(filled.ok()) << filled.status();
  EXPECT_EQ(filled->SerializeAsString(), config_.SerializeAsString());
}

TEST_F(StatisticsPassTest, Errors) {
  v1::ModelConfig config = config_;
  config.mutable_data()->set_train_path(dir_.path() + "/missing");
  EXPECT_EQ(ComputeStatistics(config).status().code(), absl::StatusCode::kNotFound);

  std::ofstream(dir_.path() + "/empty.tsv") << "label\tprice\thour\tday\tu\n";
  config = config_;
  config.mutable_data()->set_train_path(dir_.path() + "/empty.tsv");
  absl::Status s = ComputeStatistics(config).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("data.columns[1] (price)"));

  // A file without the column.
  std::ofstream(dir_.path() + "/nohour.tsv") << "label\tprice\tday\tu\n1\t1\t1\ta\n";
  config.mutable_data()->set_train_path(dir_.path() + "/nohour.tsv");
  s = ComputeStatistics(config).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("no column 'hour'"));
}

}  // namespace
}  // namespace ember::worker
