// Copyright 2026 The Ember Authors.
//
// Ember's CUDA kernels one by one (worker/dense/cuda/kernels.h) against their CPU
// twins: the DOT interaction (to float rounding), bias + activation, ReLU backward and
// column sums, the BCE loss, and sum / mean pooling (bitwise, with the pooling plan).
// Outputs are poisoned with NaN first, so an element no kernel wrote fails the check.

#include "worker/dense/cuda/kernels.h"

#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/model/dense_tower.h"
#include "common/model/layers.h"
#include "gtest/gtest.h"
#include "tests/worker/dense/cuda_test_util.h"
#include "worker/dense/pooling_plan.h"

namespace ember::worker::cuda_internal {
namespace {

using ::ember::worker::testing::DeviceVector;
using ::ember::worker::testing::Random;
using ::ember::worker::testing::RelativeError;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(CudaKernelsTest, DotInteractionMatchesTheCpu) {
  EMBER_SKIP_WITHOUT_GPU();
  for (bool bottom : {true, false}) {
    for (int dim : {4, 16, 33, 128}) {
      for (int features : {1, 8, 26}) {
        if (!bottom && features < 2) continue;
        SCOPED_TRACE(absl::StrCat("bottom ", bottom, " dim ", dim, " features ", features));
        const int batch = 300;
        const int width = model::dense_internal::DotOutputWidth(bottom, features, dim);
        const std::vector<float> b = Random(size_t(batch) * dim, 1);
        const std::vector<float> p = Random(size_t(batch) * features * dim, 2);
        const std::vector<float> dout = Random(size_t(batch) * width, 3);
        std::vector<float> out(size_t(batch) * width), db(b.size()), dp(p.size());
        model::dense_internal::DotInteractionForward(
            batch, features, dim, bottom ? b.data() : nullptr, p.data(), out.data());
        model::dense_internal::DotInteractionBackward(
            batch, features, dim, bottom ? b.data() : nullptr, p.data(), dout.data(),
            bottom ? db.data() : nullptr, dp.data());
        DeviceVector<float> gb(b), gp(p), gdout(dout), gout(out.size(), kNaN), gdb(db.size(), kNaN),
            gdp(dp.size(), kNaN);
        ASSERT_EQ(LaunchDotForward(nullptr, batch, features, dim, bottom ? gb.get() : nullptr,
                                   gp.get(), gout.get()),
                  cudaSuccess);
        ASSERT_EQ(LaunchDotBackward(nullptr, batch, features, dim, bottom ? gb.get() : nullptr,
                                    gp.get(), gdout.get(), bottom ? gdb.get() : nullptr, gdp.get()),
                  cudaSuccess);
        EXPECT_LE(RelativeError(gout.Read(), out), 1e-6);
        EXPECT_LE(RelativeError(gdp.Read(), dp), 1e-6);
        if (bottom) {
          EXPECT_LE(RelativeError(gdb.Read(), db), 1e-6);
        }
      }
    }
  }
}

TEST(CudaKernelsTest, BiasActivationReluBackwardAndColumnSums) {
  EMBER_SKIP_WITHOUT_GPU();
  for (int batch : {1, 511, 512, 513, 70000}) {
    for (int cols : {1, 31, 64, 100}) {
      SCOPED_TRACE(absl::StrCat("batch ", batch, " cols ", cols));
      const std::vector<float> y0 = Random(size_t(batch) * cols, 4);
      const std::vector<float> bias = Random(cols, 5);
      std::vector<float> y = y0;
      for (size_t i = 0; i < y.size(); ++i) y[i] = std::max(0.0f, y[i] + bias[i % cols]);
      DeviceVector<float> gy(y0), gbias(bias);
      ASSERT_EQ(LaunchBiasActivation(nullptr, batch, cols, gbias.get(), true, gy.get()),
                cudaSuccess);
      EXPECT_EQ(gy.Read(), y);  // one add and a max: bitwise

      std::vector<float> dy = Random(y.size(), 6);
      DeviceVector<float> gdy(dy);
      model::dense_internal::ReluBackward(dy.size(), y.data(), dy.data());
      ASSERT_EQ(LaunchReluBackward(nullptr, dy.size(), gy.get(), gdy.get()), cudaSuccess);
      EXPECT_EQ(gdy.Read(), dy);

      std::vector<double> want(cols, 0.0);
      for (int r = 0; r < batch; ++r) {
        for (int c = 0; c < cols; ++c) want[c] += dy[size_t(r) * cols + c];
      }
      DeviceVector<float> partial(size_t(ColumnSumsPartialRows(batch)) * cols, kNaN),
          sums(cols, kNaN);
      ASSERT_EQ(LaunchColumnSums(nullptr, batch, cols, gdy.get(), partial.get(), sums.get()),
                cudaSuccess);
      const std::vector<float> got = sums.Read();
      const std::vector<float> want_f(want.begin(), want.end());
      EXPECT_LE(RelativeError(got, want_f), 1e-5);
    }
  }
}

TEST(CudaKernelsTest, BceMatchesTheCpuLoss) {
  EMBER_SKIP_WITHOUT_GPU();
  for (int batch : {1, 1000, 65536}) {
    for (bool weighted : {false, true}) {
      SCOPED_TRACE(absl::StrCat("batch ", batch, " weighted ", weighted));
      std::vector<float> logits = Random(batch, 7, 20.0f);  // saturated ones too
      std::vector<float> labels(batch), weights;
      for (int i = 0; i < batch; ++i) labels[i] = static_cast<float>(i % 3 == 0);
      if (weighted) weights = Random(batch, 8, 2.0f);
      std::vector<float> dlogits(batch);
      const float scale = 1.0f / batch;
      const float loss =
          model::BceWithLogits(logits, labels, weights, scale, absl::MakeSpan(dlogits));
      DeviceVector<float> gl(logits), glab(labels), gw(weighted ? weights : std::vector<float>{0}),
          gd(batch, kNaN);
      DeviceVector<double> partials(BcePartialCount(batch), 0.0), gloss(1, 0.0);
      ASSERT_EQ(LaunchBce(nullptr, batch, gl.get(), glab.get(), weighted ? gw.get() : nullptr,
                          scale, gd.get(), partials.get(), gloss.get()),
                cudaSuccess);
      EXPECT_NEAR(gloss.Read()[0], loss, 1e-6 * std::fabs(loss));
      EXPECT_LE(RelativeError(gd.Read(), dlogits), 1e-6);
    }
  }
}

// Pooling is bitwise the CPU's: same additions in the same order.
TEST(CudaKernelsTest, PoolingIsBitwiseTheCpusWithThePlan) {
  EMBER_SKIP_WITHOUT_GPU();
  const int batch = 2000;
  std::mt19937 rng(3);
  // Tables: 0 (500 rows, dim 16), 1 (50 rows, dim 8). Features: 0 SUM on table 0, 1 MEAN
  // on table 0 (multi-hot up to 20), 2 MEAN on table 1.
  std::vector<PoolingFeature> features = {{0, 16, 0, false}, {0, 16, 16, true}, {1, 8, 32, true}};
  std::vector<uint32_t> table_rows = {500, 50};
  std::vector<std::vector<uint32_t>> offsets(3), ids(3);
  for (int f = 0; f < 3; ++f) {
    offsets[f].push_back(0);
    for (int b = 0; b < batch; ++b) {
      const int count = f == 0 ? 1 : static_cast<int>(rng() % 21);
      for (int k = 0; k < count; ++k) {
        // Skewed: low ids repeat often, so rows collect many contributions.
        ids[f].push_back(static_cast<uint32_t>((rng() % 7 == 0 ? rng() : rng() % 5) %
                                               table_rows[features[f].table]));
      }
      offsets[f].push_back(static_cast<uint32_t>(ids[f].size()));
    }
  }
  absl::StatusOr<PoolingPlan> plan = PoolingPlan::Build(batch, features, table_rows, offsets, ids);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<float> rows = Random(plan->rows_floats(), 1);
  std::vector<float> pooled(size_t(batch) * plan->pooled_width());
  plan->Forward(rows, absl::MakeSpan(pooled));
  const std::vector<float> d_pooled = Random(pooled.size(), 2);
  std::vector<float> d_rows(rows.size());
  plan->Backward(d_pooled, absl::MakeSpan(d_rows));

  std::vector<int> dim, offset, mean;
  std::vector<int64_t> rows_offset;
  for (const PoolingFeature& f : plan->features()) {
    dim.push_back(f.dim);
    offset.push_back(f.pooled_offset);
    mean.push_back(f.mean ? 1 : 0);
    rows_offset.push_back(static_cast<int64_t>(plan->table_offset(f.table)));
  }
  DeviceVector<int> gdim(dim), goffset(offset), gmean(mean);
  DeviceVector<int64_t> grows_offset(rows_offset);
  DeviceVector<uint32_t> gbag(plan->bag_begin()), gids(plan->ids());
  DevicePoolingPlan dplan;
  dplan.batch = batch;
  dplan.pooled_width = plan->pooled_width();
  dplan.num_features = 3;
  dplan.feature_dim = gdim.get();
  dplan.feature_pooled_offset = goffset.get();
  dplan.feature_mean = gmean.get();
  dplan.feature_rows_offset = grows_offset.get();
  dplan.bag_begin = gbag.get();
  dplan.ids = gids.get();
  DeviceVector<float> grows(rows), gpooled(pooled.size(), kNaN), gdp(d_pooled),
      gdrows(d_rows.size(), kNaN);
  ASSERT_EQ(LaunchPoolForward(nullptr, dplan, grows.get(), gpooled.get()), cudaSuccess);
  EXPECT_EQ(gpooled.Read(), pooled);
  for (size_t t = 0; t < plan->num_tables(); ++t) {
    DeviceVector<uint32_t> begin(plan->row_begin(t)), bags(plan->row_bags(t));
    ASSERT_EQ(LaunchPoolBackward(nullptr, dplan, static_cast<int>(plan->table_rows(t)),
                                 plan->table_dim(t), begin.get(), bags.get(), gdp.get(),
                                 gdrows.get() + plan->table_offset(t)),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  EXPECT_EQ(gdrows.Read(), d_rows);
}

}  // namespace
}  // namespace ember::worker::cuda_internal
