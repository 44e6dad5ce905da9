// Copyright 2026 The Ember Authors.
//
// The CUDA dense tower and optimizers against the CPU backend (worker/dense/cuda/).
// Tolerances are ||gpu - want|| / ||want|| over each output (logits, loss, parameter
// gradients, d_pooled), documented in docs/PERFORMANCE.md "GPU workers":
//   against the fp32 CPU tower: fp32 2e-5 for everything (same math, other summation
//     orders); tf32 1e-2 and bf16 4e-2 for logits, loss and SGD-stepped parameters only;
//   against a CPU reference that rounds the products' operands like the GPU
//     (rounded_reference.h, which says why): fp32 2e-5, tf32 and bf16 2e-3 for logits,
//     gradients and d_pooled (the Backward without the loss);
//   over a 30-step Adam run: each step's loss within fp32 1e-3, tf32 2e-2, bf16 5e-2.
// The optimizers are bitwise the CPU's. Every test skips where no GPU is visible.

#include <algorithm>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/model/dense_tower.h"
#include "common/model/tower_layout.h"
#include "gtest/gtest.h"
#include "tests/worker/dense/cuda_test_util.h"
#include "tests/worker/dense/rounded_reference.h"
#include "worker/dense/dense_optimizer.h"

namespace ember::worker {
namespace {

using testing::DeviceVector;
using testing::Random;
using testing::RelativeError;
using testing::RoundedReference;
using testing::Rounding;

struct TowerCase {
  const char* name;
  v1::DenseTowerConfig::Interaction interaction;
  std::vector<uint32_t> bottom, top;
  int num_dense;
  std::vector<int> dims;
};

std::vector<TowerCase> Cases() {
  return {
      {"dot", v1::DenseTowerConfig::DOT, {8, 4}, {16}, 3, {4, 4, 4}},
      {"dot_raw_dense", v1::DenseTowerConfig::DOT, {}, {8}, 4, {4, 4}},
      {"dot_no_dense", v1::DenseTowerConfig::DOT, {}, {16, 8}, 0, {8, 8, 8, 8}},
      {"concat", v1::DenseTowerConfig::CONCAT, {8}, {16}, 3, {4, 6}},
      {"concat_no_dense", v1::DenseTowerConfig::CONCAT, {8}, {}, 0, {5, 3}},
      {"concat_dense_only", v1::DenseTowerConfig::CONCAT, {8}, {8}, 5, {}},
      {"quickstart",
       v1::DenseTowerConfig::DOT,
       {64, 16},
       {64, 32},
       3,
       {16, 16, 16, 16, 16, 16, 16, 16}},
  };
}

v1::DenseTowerConfig ConfigOf(const TowerCase& c) {
  v1::DenseTowerConfig config;
  config.set_interaction(c.interaction);
  for (uint32_t w : c.bottom) config.add_bottom_mlp(w);
  for (uint32_t w : c.top) config.add_top_mlp(w);
  config.set_init_seed(11);
  return config;
}

struct Tolerances {
  double vs_cpu;        // logits, loss, SGD-stepped parameters against the fp32 CPU tower
  double vs_reference;  // logits, gradients, d_pooled against the rounded reference
  double loss_curve;    // each step's loss over a 30-step run
};

Tolerances TolerancesOf(DensePrecision precision) {
  switch (precision) {
    case DensePrecision::kTf32:
      return {1e-2, 2e-3, 2e-2};
    case DensePrecision::kBf16:
      return {4e-2, 2e-3, 5e-2};
    case DensePrecision::kFp32:
      break;
  }
  return {2e-5, 2e-5, 1e-3};
}

DenseTowerOptions Gpu(DensePrecision precision = DensePrecision::kFp32, int device = 0) {
  DenseTowerOptions gpu;
  gpu.device = model::DenseDevice::kCuda;
  gpu.precision = precision;
  gpu.cuda_device = device;
  return gpu;
}

struct StepResult {
  std::vector<float> logits, d_pooled, gradients, parameters;
  float loss = 0;
};

// Forward, BCE + backward and one optimizer step of `tower`.
StepResult Step(model::DenseTower& tower, DenseOptimizer& optimizer, int batch, int num_dense,
                uint32_t seed) {
  const int width = tower.pooled_width();
  const std::vector<float> dense = Random(size_t(batch) * num_dense, seed);
  const std::vector<float> pooled = Random(size_t(batch) * width, seed + 1);
  const std::vector<float> weights = Random(batch, seed + 2);
  std::vector<float> labels(batch);
  for (int i = 0; i < batch; ++i) labels[i] = (i * 7 + seed) % 3 == 0 ? 1.0f : 0.0f;
  StepResult r;
  r.logits.resize(batch);
  r.d_pooled.resize(size_t(batch) * width);
  tower.Forward(batch, dense, pooled, absl::MakeSpan(r.logits));
  r.loss = tower.BackwardWithBce(r.logits, labels, weights, 1.0f / std::max(batch, 1),
                                 absl::MakeSpan(r.d_pooled));
  const absl::Span<const float> g = tower.gradients();
  r.gradients.assign(g.begin(), g.end());
  optimizer.Step(tower.step_parameters(), tower.step_gradients());
  const absl::Span<const float> p = tower.parameters();
  r.parameters.assign(p.begin(), p.end());
  EXPECT_TRUE(tower.status().ok()) << tower.status();
  EXPECT_TRUE(optimizer.status().ok()) << optimizer.status();
  return r;
}

class CudaTowerTest : public ::testing::TestWithParam<DensePrecision> {};

INSTANTIATE_TEST_SUITE_P(Precisions, CudaTowerTest,
                         ::testing::Values(DensePrecision::kFp32, DensePrecision::kTf32,
                                           DensePrecision::kBf16),
                         [](const auto& info) { return DensePrecisionName(info.param); });

// Every layer kind (bottom MLP, DOT with and without a bottom vector, CONCAT, top MLP,
// logit layer) through the BCE loss and two SGD steps, against the CPU. SGD, not Adam:
// Adam's first step is about lr * sign(g), so a gradient that reduced precision moved
// across zero would move its parameter by 2 lr; SGD moves it by lr times the error.
// The gradients themselves are held to the rounded reference below (and, in fp32, to
// the CPU here too).
TEST_P(CudaTowerTest, MatchesTheCpuTowerOverTwoSgdSteps) {
  EMBER_SKIP_WITHOUT_GPU();
  const Tolerances tol = TolerancesOf(GetParam());
  const bool fp32 = GetParam() == DensePrecision::kFp32;
  v1::DenseOptimizerConfig sgd;
  sgd.set_kind(v1::DenseOptimizerConfig::SGD);
  sgd.set_learning_rate(0.05f);
  for (const TowerCase& c : Cases()) {
    for (int batch : {1, 37, 1024}) {
      SCOPED_TRACE(absl::StrCat(c.name, " batch ", batch));
      const v1::DenseTowerConfig config = ConfigOf(c);
      std::unique_ptr<model::DenseTower> cpu = *CreateDenseTower(config, c.num_dense, c.dims);
      absl::StatusOr<std::unique_ptr<model::DenseTower>> made =
          CreateDenseTower(config, c.num_dense, c.dims, Gpu(GetParam()));
      ASSERT_TRUE(made.ok()) << made.status();
      std::unique_ptr<model::DenseTower> cuda = std::move(*made);
      std::unique_ptr<DenseOptimizer> cpu_opt = CreateDenseOptimizer(sgd, *cpu);
      std::unique_ptr<DenseOptimizer> cuda_opt = CreateDenseOptimizer(sgd, *cuda);
      for (int step = 0; step < 2; ++step) {
        SCOPED_TRACE(absl::StrCat("step ", step));
        const StepResult want = Step(*cpu, *cpu_opt, batch, c.num_dense, 100 + step);
        const StepResult got = Step(*cuda, *cuda_opt, batch, c.num_dense, 100 + step);
        EXPECT_LE(RelativeError(got.logits, want.logits), tol.vs_cpu);
        EXPECT_NEAR(got.loss, want.loss, tol.vs_cpu * std::fabs(want.loss) + 1e-7);
        EXPECT_LE(RelativeError(got.parameters, want.parameters), tol.vs_cpu);
        if (fp32) {
          EXPECT_LE(RelativeError(got.d_pooled, want.d_pooled), tol.vs_cpu);
          EXPECT_LE(RelativeError(got.gradients, want.gradients), tol.vs_cpu);
        }
      }
    }
  }
}

// The non-BCE Backward (explicit dlogits, as multi-loss callers use it) of every layer
// kind, over two steps, against the CPU reference that rounds the products' operands
// like this precision does (for tf32 the closer of its two candidate roundings).
TEST_P(CudaTowerTest, BackwardMatchesARoundedCpuReference) {
  EMBER_SKIP_WITHOUT_GPU();
  const double tol = TolerancesOf(GetParam()).vs_reference;
  v1::DenseOptimizerConfig sgd;
  sgd.set_kind(v1::DenseOptimizerConfig::SGD);
  sgd.set_learning_rate(0.05f);
  for (const TowerCase& c : Cases()) {
    for (int batch : {37, 1024}) {
      SCOPED_TRACE(absl::StrCat(c.name, " batch ", batch));
      const v1::DenseTowerConfig config = ConfigOf(c);
      absl::StatusOr<model::dense_internal::TowerLayout> layout =
          model::dense_internal::BuildTowerLayout(config, c.num_dense, c.dims);
      ASSERT_TRUE(layout.ok()) << layout.status();
      std::unique_ptr<model::DenseTower> cuda =
          *CreateDenseTower(config, c.num_dense, c.dims, Gpu(GetParam()));
      std::unique_ptr<DenseOptimizer> opt = CreateDenseOptimizer(sgd, *cuda);
      const int width = cuda->pooled_width();
      for (int step = 0; step < 2; ++step) {
        SCOPED_TRACE(absl::StrCat("step ", step));
        const uint32_t seed = 200 + 10 * step;
        const std::vector<float> dense = Random(size_t(batch) * c.num_dense, seed);
        const std::vector<float> pooled = Random(size_t(batch) * width, seed + 1);
        std::vector<float> dlogits = Random(batch, seed + 2);
        for (float& d : dlogits) d /= static_cast<float>(batch);
        const absl::Span<const float> p = cuda->parameters();
        const std::vector<float> params(p.begin(), p.end());
        std::vector<float> logits(batch), d_pooled(size_t(batch) * width);
        cuda->Forward(batch, dense, pooled, absl::MakeSpan(logits));
        cuda->Backward(dlogits, absl::MakeSpan(d_pooled));
        const absl::Span<const float> g = cuda->gradients();
        const std::vector<float> grads(g.begin(), g.end());
        ASSERT_TRUE(cuda->status().ok()) << cuda->status();
        // For tf32, the candidate with the smallest gradient error; every candidate's
        // errors are in the message (they tell how cuBLAS rounds).
        double logit_error = INFINITY, grad_error = INFINITY, pooled_error = INFINITY;
        std::string candidates;
        const bool tf32 = GetParam() == DensePrecision::kTf32;
        for (Rounding rounding : {Rounding::kNearestEven, Rounding::kTruncate, Rounding::kFp32}) {
          RoundedReference reference(*layout, GetParam(), rounding);
          const std::vector<float> want_logits = reference.Forward(batch, params, dense, pooled);
          std::vector<float> want_grads, want_d_pooled;
          reference.Backward(dlogits, &want_grads, &want_d_pooled);
          const double e_logits = RelativeError(logits, want_logits);
          const double e_grads = RelativeError(grads, want_grads);
          const double e_pooled = RelativeError(d_pooled, want_d_pooled);
          absl::StrAppend(&candidates, " [rounding ", static_cast<int>(rounding), ": logits ",
                          e_logits, ", gradients ", e_grads, ", d_pooled ", e_pooled, "]");
          if (e_grads < grad_error) {
            logit_error = e_logits;
            grad_error = e_grads;
            pooled_error = e_pooled;
          }
          if (!tf32) break;  // one rounding only
        }
        SCOPED_TRACE(absl::StrCat("errors against the reference (0 nearest, 1 truncate, 2 fp32):",
                                  candidates));
        if (tf32 && batch == 1024 && std::string(c.name) == "quickstart") {
          // Printed on success too: tools/gpu-check.sh copies it into its summary.
          std::cout << "tf32 reference errors, step " << step << ":" << candidates << std::endl;
        }
        EXPECT_LE(logit_error, tol);
        EXPECT_LE(grad_error, tol);
        EXPECT_LE(pooled_error, tol);
        opt->Step(cuda->step_parameters(), cuda->step_gradients());
        ASSERT_TRUE(opt->status().ok()) << opt->status();
      }
    }
  }
}

// Labels the tower can learn from its inputs, so that a loss curve falls.
std::vector<float> LearnableLabels(const std::vector<float>& dense, int num_dense,
                                   const std::vector<float>& pooled, int width) {
  const size_t batch = width > 0 ? pooled.size() / width : dense.size() / num_dense;
  std::vector<float> labels(batch);
  for (size_t i = 0; i < batch; ++i) {
    float s = 0;
    if (num_dense > 0) s += dense[i * num_dense];
    if (width > 0) s += pooled[i * width] - pooled[i * width + width - 1];
    labels[i] = s > 0 ? 1.0f : 0.0f;
  }
  return labels;
}

// 30 Adam steps of the quickstart tower on the GPU and on the CPU from the same
// initial weights and batches: the loss curves agree step by step and both fall.
TEST_P(CudaTowerTest, LossCurveFollowsTheCpuOverThirtyAdamSteps) {
  EMBER_SKIP_WITHOUT_GPU();
  const double tol = TolerancesOf(GetParam()).loss_curve;
  const TowerCase c = Cases().back();
  const v1::DenseTowerConfig config = ConfigOf(c);
  std::unique_ptr<model::DenseTower> cpu = *CreateDenseTower(config, c.num_dense, c.dims);
  std::unique_ptr<model::DenseTower> cuda =
      *CreateDenseTower(config, c.num_dense, c.dims, Gpu(GetParam()));
  v1::DenseOptimizerConfig adam;
  adam.set_learning_rate(0.01f);
  std::unique_ptr<DenseOptimizer> cpu_opt = CreateDenseOptimizer(adam, *cpu);
  std::unique_ptr<DenseOptimizer> cuda_opt = CreateDenseOptimizer(adam, *cuda);
  const int batch = 1024, width = cpu->pooled_width();
  std::vector<float> cpu_loss, cuda_loss;
  for (int step = 0; step < 30; ++step) {
    const std::vector<float> dense = Random(size_t(batch) * c.num_dense, 1000 + 2 * step);
    const std::vector<float> pooled = Random(size_t(batch) * width, 1001 + 2 * step);
    const std::vector<float> labels = LearnableLabels(dense, c.num_dense, pooled, width);
    for (model::DenseTower* tower : {cpu.get(), cuda.get()}) {
      std::vector<float> logits(batch), d_pooled(size_t(batch) * width);
      tower->Forward(batch, dense, pooled, absl::MakeSpan(logits));
      const float loss =
          tower->BackwardWithBce(logits, labels, {}, 1.0f / batch, absl::MakeSpan(d_pooled));
      DenseOptimizer& opt = tower == cpu.get() ? *cpu_opt : *cuda_opt;
      opt.Step(tower->step_parameters(), tower->step_gradients());
      (tower == cpu.get() ? cpu_loss : cuda_loss).push_back(loss);
    }
    ASSERT_TRUE(cuda->status().ok()) << cuda->status();
    ASSERT_TRUE(cuda_opt->status().ok()) << cuda_opt->status();
  }
  for (int step = 0; step < 30; ++step) {
    EXPECT_NEAR(cuda_loss[step], cpu_loss[step], tol * cpu_loss[step]) << "step " << step;
  }
  auto mean = [](const std::vector<float>& v, int from, int to) {
    double s = 0;
    for (int i = from; i < to; ++i) s += v[i];
    return s / (to - from);
  };
  EXPECT_LT(mean(cpu_loss, 25, 30), 0.9 * mean(cpu_loss, 0, 5));
  EXPECT_LT(mean(cuda_loss, 25, 30), 0.9 * mean(cuda_loss, 0, 5));
}

TEST(CudaTowerTest, IsRunToRunDeterministic) {
  EMBER_SKIP_WITHOUT_GPU();
  const DenseTowerOptions gpu = Gpu();
  const TowerCase c = Cases().back();
  v1::DenseOptimizerConfig adagrad;
  adagrad.set_kind(v1::DenseOptimizerConfig::ADAGRAD);
  StepResult first;
  for (int run = 0; run < 2; ++run) {
    std::unique_ptr<model::DenseTower> tower =
        *CreateDenseTower(ConfigOf(c), c.num_dense, c.dims, gpu);
    std::unique_ptr<DenseOptimizer> opt = CreateDenseOptimizer(adagrad, *tower);
    StepResult r = Step(*tower, *opt, 4096, c.num_dense, 5);
    r = Step(*tower, *opt, 4096, c.num_dense, 6);
    if (run == 0) {
      first = r;
      continue;
    }
    EXPECT_EQ(r.logits, first.logits);
    EXPECT_EQ(r.loss, first.loss);
    EXPECT_EQ(r.gradients, first.gradients);
    EXPECT_EQ(r.parameters, first.parameters);
  }
}

TEST(CudaTowerTest, EmptyBatchZeroesGradientsAndBatchMayChange) {
  EMBER_SKIP_WITHOUT_GPU();
  const DenseTowerOptions gpu = Gpu();
  const TowerCase c = Cases().front();
  std::unique_ptr<model::DenseTower> tower =
      *CreateDenseTower(ConfigOf(c), c.num_dense, c.dims, gpu);
  v1::DenseOptimizerConfig sgd;
  sgd.set_kind(v1::DenseOptimizerConfig::SGD);
  std::unique_ptr<DenseOptimizer> opt = CreateDenseOptimizer(sgd, *tower);
  Step(*tower, *opt, 300, c.num_dense, 1);
  const StepResult empty = Step(*tower, *opt, 0, c.num_dense, 2);
  for (float g : empty.gradients) ASSERT_EQ(g, 0.0f);
  Step(*tower, *opt, 5000, c.num_dense, 3);  // grows every buffer
  Step(*tower, *opt, 7, c.num_dense, 4);
  EXPECT_TRUE(tower->status().ok()) << tower->status();
}

// Writes through the parameters() mirror reach the device with SyncParametersToDevice.
TEST(CudaTowerTest, ParameterMirrorRoundTrips) {
  EMBER_SKIP_WITHOUT_GPU();
  const DenseTowerOptions gpu = Gpu();
  const TowerCase c = Cases().front();
  std::unique_ptr<model::DenseTower> cpu = *CreateDenseTower(ConfigOf(c), c.num_dense, c.dims);
  std::unique_ptr<model::DenseTower> cuda =
      *CreateDenseTower(ConfigOf(c), c.num_dense, c.dims, gpu);
  const std::vector<float> params = Random(cpu->parameters().size(), 9, 0.3f);
  std::memcpy(cpu->parameters().data(), params.data(), params.size() * sizeof(float));
  std::memcpy(cuda->parameters().data(), params.data(), params.size() * sizeof(float));
  ASSERT_TRUE(cuda->SyncParametersToDevice().ok());
  const absl::Span<const float> back = cuda->parameters();
  EXPECT_TRUE(std::equal(back.begin(), back.end(), params.begin(), params.end()));
  const int batch = 64;
  const std::vector<float> dense = Random(batch * c.num_dense, 1), pooled = Random(batch * 12, 2);
  std::vector<float> a(batch), b(batch);
  cpu->Forward(batch, dense, pooled, absl::MakeSpan(a));
  cuda->Forward(batch, dense, pooled, absl::MakeSpan(b));
  EXPECT_LE(RelativeError(b, a), 2e-5);
}

// The device optimizers are bitwise the CPU ones, and their state moves between backends.
TEST(CudaOptimizerTest, BitwiseTheCpuOptimizersAndStateMoves) {
  EMBER_SKIP_WITHOUT_GPU();
  const DenseTowerOptions gpu = Gpu();
  const TowerCase c = Cases().front();
  std::unique_ptr<model::DenseTower> cuda =
      *CreateDenseTower(ConfigOf(c), c.num_dense, c.dims, gpu);
  const size_t n = cuda->step_parameters().size();
  for (auto kind : {v1::DenseOptimizerConfig::SGD, v1::DenseOptimizerConfig::ADAGRAD,
                    v1::DenseOptimizerConfig::ADAM}) {
    SCOPED_TRACE(v1::DenseOptimizerConfig::Kind_Name(kind));
    v1::DenseOptimizerConfig config;
    config.set_kind(kind);
    config.set_learning_rate(0.05f);
    std::unique_ptr<DenseOptimizer> cpu_opt = DenseOptimizer::Create(config, n);
    std::unique_ptr<DenseOptimizer> cuda_opt = CreateDenseOptimizer(config, *cuda);
    // On the tower's compute stream, where the optimizer steps.
    const cudaStream_t stream = static_cast<cudaStream_t>(cuda->cuda_stream());
    std::vector<float> p = Random(n, 1);
    DeviceVector<float> dp(p, stream);
    for (int step = 0; step < 3; ++step) {
      const std::vector<float> g = Random(n, 10 + step);
      DeviceVector<float> dg(g, stream);
      cpu_opt->Step(absl::MakeSpan(p), g);
      cuda_opt->Step(absl::MakeSpan(dp.get(), n), absl::MakeConstSpan(dg.get(), n));
      ASSERT_TRUE(cuda_opt->status().ok()) << cuda_opt->status();
      EXPECT_EQ(dp.Read(), p);
    }
    EXPECT_EQ(cuda_opt->SaveState(), cpu_opt->SaveState());
    // A CPU checkpoint restores into a device optimizer, and the next steps agree.
    std::unique_ptr<DenseOptimizer> restored = CreateDenseOptimizer(config, *cuda);
    ASSERT_TRUE(restored->LoadState(cpu_opt->SaveState()).ok());
    const std::vector<float> g = Random(n, 99);
    DeviceVector<float> dg(g, stream);
    cpu_opt->Step(absl::MakeSpan(p), g);
    restored->Step(absl::MakeSpan(dp.get(), n), absl::MakeConstSpan(dg.get(), n));
    EXPECT_EQ(dp.Read(), p);
    EXPECT_EQ(restored->LoadState(std::vector<float>(3, 0.0f)).code(),
              absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace ember::worker
