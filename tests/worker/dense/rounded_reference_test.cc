// Copyright 2026 The Ember Authors.
//
// The rounded CPU reference of the CUDA tests (rounded_reference.h), checked where no
// GPU is needed: in fp32 it is the CPU tower (so its wiring of layers, interactions and
// gradients is right), and its roundings are the ones the GPU's precisions make.

#include "tests/worker/dense/rounded_reference.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/model/dense_tower.h"
#include "gtest/gtest.h"
#include "tests/common/model/gradient_check.h"

namespace ember::worker::testing {
namespace {

using ::ember::model::test::Random;

double RelativeError(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    diff += (double{got[i]} - want[i]) * (double{got[i]} - want[i]);
    norm += double{want[i]} * want[i];
  }
  return norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

TEST(RoundedReferenceTest, RoundsLikeTf32AndBf16) {
  const float x = 1.0f + 0x1.8p-11f;  // halfway above tf32's last bit, odd: rounds up
  EXPECT_EQ(RoundMantissa(x, 13, Rounding::kNearestEven), 1.0f + 0x1p-10f);
  EXPECT_EQ(RoundMantissa(x, 13, Rounding::kTruncate), 1.0f);
  EXPECT_EQ(RoundMantissa(1.0f + 0x1p-8f, 16, Rounding::kNearestEven), 1.0f);  // tie to even
  EXPECT_EQ(RoundMantissa(-1.0f - 0x1.8p-8f, 16, Rounding::kNearestEven), -1.0f - 0x1p-7f);
  EXPECT_EQ(RoundOperands(DensePrecision::kFp32, Rounding::kTruncate, &x, 1)[0], x);
}

// In fp32 the reference is the CPU tower: logits, the non-BCE Backward's gradients and
// d_pooled, for DOT with and without a bottom vector, and CONCAT.
TEST(RoundedReferenceTest, InFp32ItIsTheCpuTower) {
  struct Case {
    v1::DenseTowerConfig::Interaction interaction;
    std::vector<uint32_t> bottom, top;
    int num_dense;
    std::vector<int> dims;
  };
  const std::vector<Case> cases = {
      {v1::DenseTowerConfig::DOT, {64, 16}, {64, 32}, 3, std::vector<int>(8, 16)},
      {v1::DenseTowerConfig::DOT, {}, {8}, 4, {4, 4}},
      {v1::DenseTowerConfig::DOT, {}, {16, 8}, 0, {8, 8, 8}},
      {v1::DenseTowerConfig::CONCAT, {8}, {16}, 3, {4, 6}},
      {v1::DenseTowerConfig::CONCAT, {8}, {8}, 5, {}},
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    SCOPED_TRACE(absl::StrCat("case ", k));
    const Case& c = cases[k];
    v1::DenseTowerConfig config;
    config.set_interaction(c.interaction);
    for (uint32_t w : c.bottom) config.add_bottom_mlp(w);
    for (uint32_t w : c.top) config.add_top_mlp(w);
    config.set_init_seed(3);
    std::unique_ptr<model::DenseTower> cpu = *CreateDenseTower(config, c.num_dense, c.dims);
    const int batch = 33, width = cpu->pooled_width();
    const std::vector<float> dense = Random(size_t(batch) * c.num_dense, 1);
    const std::vector<float> pooled = Random(size_t(batch) * width, 2);
    const std::vector<float> dlogits = Random(batch, 3);
    const absl::Span<const float> p = cpu->parameters();
    const std::vector<float> params(p.begin(), p.end());
    std::vector<float> logits(batch), d_pooled(size_t(batch) * width);
    cpu->Forward(batch, dense, pooled, absl::MakeSpan(logits));
    cpu->Backward(dlogits, absl::MakeSpan(d_pooled));
    const absl::Span<const float> g = cpu->gradients();

    RoundedReference reference(
        *model::dense_internal::BuildTowerLayout(config, c.num_dense, c.dims),
        DensePrecision::kFp32);
    std::vector<float> grads, ref_d_pooled;
    EXPECT_LE(RelativeError(reference.Forward(batch, params, dense, pooled), logits), 1e-6);
    reference.Backward(dlogits, &grads, &ref_d_pooled);
    EXPECT_LE(RelativeError(grads, std::vector<float>(g.begin(), g.end())), 1e-6);
    EXPECT_LE(RelativeError(ref_d_pooled, d_pooled), 1e-6);

    // bf16 operands move the logits by about bf16's precision, not more.
    RoundedReference bf16(*model::dense_internal::BuildTowerLayout(config, c.num_dense, c.dims),
                          DensePrecision::kBf16);
    const double e = RelativeError(bf16.Forward(batch, params, dense, pooled), logits);
    EXPECT_GT(e, 0.0);
    EXPECT_LE(e, 4e-2);
  }
}

}  // namespace
}  // namespace ember::worker::testing
