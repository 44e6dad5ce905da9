// Copyright 2026 The Ember Authors.
//
// Tests of the host-side pooling plan (worker/dense/pooling_plan.h): the forward and
// transposed CSRs, the CPU reference pooling against hand-computed values, and the
// errors for malformed offsets and ids.

#include "worker/dense/pooling_plan.h"

#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ember::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

// Two tables: table 0 (3 rows, dim 2) used by features 0 (SUM) and 1 (MEAN); table 1
// (2 rows, dim 1) used by feature 2 (SUM). Batch 2.
//   feature 0: example 0 -> {0, 2}, example 1 -> {}
//   feature 1: example 0 -> {1},    example 1 -> {2, 2, 0}
//   feature 2: example 0 -> {1},    example 1 -> {0, 1}
absl::StatusOr<PoolingPlan> SmallPlan() {
  return PoolingPlan::Build(2, {{0, 2, 0, false}, {0, 2, 2, true}, {1, 1, 4, false}}, {3, 2},
                            {{0, 2, 2}, {0, 1, 4}, {0, 1, 3}}, {{0, 2}, {1, 2, 2, 0}, {1, 0, 1}});
}

TEST(PoolingPlanTest, BuildsForwardAndTransposedCsr) {
  absl::StatusOr<PoolingPlan> plan = SmallPlan();
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->pooled_width(), 5);
  EXPECT_EQ(plan->table_offset(1), 6u);
  EXPECT_EQ(plan->rows_floats(), 8u);
  // Bags f * batch + b: (0,0) (0,1) (1,0) (1,1) (2,0) (2,1).
  EXPECT_THAT(plan->bag_begin(), ElementsAre(0, 2, 2, 3, 6, 7, 9));
  EXPECT_THAT(plan->ids(), ElementsAre(0, 2, 1, 2, 2, 0, 1, 0, 1));
  // Table 0: row 0 <- bags 0, 3; row 1 <- bag 2; row 2 <- bags 0, 3, 3 (feature, example,
  // position order).
  EXPECT_THAT(plan->row_begin(0), ElementsAre(0, 2, 3, 6));
  EXPECT_THAT(plan->row_bags(0), ElementsAre(0, 3, 2, 0, 3, 3));
  EXPECT_THAT(plan->row_begin(1), ElementsAre(0, 1, 3));
  EXPECT_THAT(plan->row_bags(1), ElementsAre(5, 4, 5));
}

TEST(PoolingPlanTest, ForwardAndBackwardMatchHandComputedValues) {
  absl::StatusOr<PoolingPlan> plan = SmallPlan();
  ASSERT_TRUE(plan.ok());
  // Table 0 rows (1, 2) (3, 4) (5, 6); table 1 rows (10) (20).
  const std::vector<float> rows = {1, 2, 3, 4, 5, 6, 10, 20};
  std::vector<float> pooled(2 * 5, -1.0f);
  plan->Forward(rows, absl::MakeSpan(pooled));
  const std::vector<float> want = {6, 8, 3,         4,         20,   // example 0
                                   0, 0, 11.0f / 3, 14.0f / 3, 30};  // example 1
  EXPECT_THAT(pooled, Pointwise(FloatNear(1e-6), want));
  const std::vector<float> d_pooled = {1, 2, 3, 4, 5, 6, 7, 9, 12, 8};
  std::vector<float> d_rows(8, -1.0f);
  plan->Backward(d_pooled, absl::MakeSpan(d_rows));
  // Row 0 of table 0: feature 0 example 0 (1, 2) + feature 1 example 1 (9, 12) / 3.
  EXPECT_FLOAT_EQ(d_rows[0], 1 + 9.0f / 3);
  EXPECT_FLOAT_EQ(d_rows[1], 2 + 12.0f / 3);
  EXPECT_FLOAT_EQ(d_rows[2], 3);  // row 1: feature 1 example 0, a bag of one: unscaled
  EXPECT_FLOAT_EQ(d_rows[3], 4);
  EXPECT_FLOAT_EQ(d_rows[4], 1 + 2 * (9.0f / 3));  // row 2: f0 e0, and twice f1 e1
  EXPECT_FLOAT_EQ(d_rows[5], 2 + 2 * (12.0f / 3));
  EXPECT_FLOAT_EQ(d_rows[6], 8);      // table 1 row 0: f2 e1
  EXPECT_FLOAT_EQ(d_rows[7], 5 + 8);  // row 1: f2 e0, f2 e1
}

TEST(PoolingPlanTest, RejectsMalformedInput) {
  auto error = [](absl::StatusOr<PoolingPlan> plan) {
    return std::string(plan.status().message());
  };
  EXPECT_THAT(error(PoolingPlan::Build(1, {{0, 2, 0, false}}, {3}, {{0, 1}}, {{3}})),
              HasSubstr("past table 0's 3 rows"));
  EXPECT_THAT(error(PoolingPlan::Build(2, {{0, 2, 0, false}}, {3}, {{0, 1}}, {{0}})),
              HasSubstr("batch + 1 = 3"));
  EXPECT_THAT(error(PoolingPlan::Build(2, {{0, 2, 0, false}}, {3}, {{0, 2, 1}}, {{0, 1}})),
              HasSubstr("entries from 0 to the id count"));
  EXPECT_THAT(error(PoolingPlan::Build(2, {{0, 2, 0, false}}, {3}, {{0, 2, 1}}, {{0}})),
              HasSubstr("decrease"));
  EXPECT_THAT(error(PoolingPlan::Build(1, {{1, 2, 0, false}}, {3}, {{0, 0}}, {{}})),
              HasSubstr("does not exist"));
  EXPECT_THAT(error(PoolingPlan::Build(1, {{0, 2, 0, false}, {0, 3, 2, false}}, {3},
                                       {{0, 0}, {0, 0}}, {{}, {}})),
              HasSubstr("has dim 2"));
  EXPECT_EQ(PoolingPlan::Build(-1, {}, {}, {}, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PoolingPlanTest, EmptyBatchIsFine) {
  absl::StatusOr<PoolingPlan> plan = PoolingPlan::Build(0, {{0, 2, 0, false}}, {3}, {{0}}, {{}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->bag_begin(), ElementsAre(0));
  EXPECT_THAT(plan->row_begin(0), ElementsAre(0, 0, 0, 0));
}

}  // namespace
}  // namespace ember::worker
