// Copyright 2026 The Ember Authors.
//
// The CUDA dense tower and optimizers against the CPU backend (worker/dense/cuda/).
// Tolerances, as ||gpu - cpu|| / ||cpu|| over each output (logits, loss, parameter
// gradients, d_pooled), documented in docs/PERFORMANCE.md "GPU workers":
//   fp32 2e-5 (same math, other summation orders), tf32 1e-2, bf16 4e-2.
// The optimizers are bitwise the CPU's. Every test skips where no GPU is visible.

#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/model/dense_tower.h"
#include "gtest/gtest.h"
#include "tests/worker/dense/cuda_test_util.h"
#include "worker/collective/device_collective.h"
#include "worker/dense/dense_optimizer.h"

namespace ember::worker {
namespace {

using testing::DeviceVector;
using testing::Random;
using testing::RelativeError;

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

double Tolerance(DensePrecision precision) {
  switch (precision) {
    case DensePrecision::kTf32:
      return 1e-2;
    case DensePrecision::kBf16:
      return 4e-2;
    case DensePrecision::kFp32:
      break;
  }
  return 2e-5;
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
// logit layer) forward and backward, and a 2-step training run, against the CPU.
TEST_P(CudaTowerTest, MatchesTheCpuTowerOverTwoTrainingSteps) {
  EMBER_SKIP_WITHOUT_GPU();
  const double tol = Tolerance(GetParam());
  DenseTowerOptions gpu;
  gpu.device = model::DenseDevice::kCuda;
  gpu.precision = GetParam();
  v1::DenseOptimizerConfig adam;
  adam.set_learning_rate(0.01f);
  for (const TowerCase& c : Cases()) {
    for (int batch : {1, 37, 1024}) {
      SCOPED_TRACE(absl::StrCat(c.name, " batch ", batch));
      const v1::DenseTowerConfig config = ConfigOf(c);
      std::unique_ptr<model::DenseTower> cpu = *CreateDenseTower(config, c.num_dense, c.dims);
      absl::StatusOr<std::unique_ptr<model::DenseTower>> made =
          CreateDenseTower(config, c.num_dense, c.dims, gpu);
      ASSERT_TRUE(made.ok()) << made.status();
      std::unique_ptr<model::DenseTower> cuda = std::move(*made);
      std::unique_ptr<DenseOptimizer> cpu_opt = CreateDenseOptimizer(adam, *cpu);
      std::unique_ptr<DenseOptimizer> cuda_opt = CreateDenseOptimizer(adam, *cuda);
      for (int step = 0; step < 2; ++step) {
        SCOPED_TRACE(absl::StrCat("step ", step));
        const StepResult want = Step(*cpu, *cpu_opt, batch, c.num_dense, 100 + step);
        const StepResult got = Step(*cuda, *cuda_opt, batch, c.num_dense, 100 + step);
        EXPECT_LE(RelativeError(got.logits, want.logits), tol);
        EXPECT_NEAR(got.loss, want.loss, tol * std::fabs(want.loss) + 1e-7);
        EXPECT_LE(RelativeError(got.d_pooled, want.d_pooled), tol);
        EXPECT_LE(RelativeError(got.gradients, want.gradients), tol);
        EXPECT_LE(RelativeError(got.parameters, want.parameters), tol);
      }
    }
  }
}

TEST(CudaTowerTest, IsRunToRunDeterministic) {
  EMBER_SKIP_WITHOUT_GPU();
  DenseTowerOptions gpu;
  gpu.device = model::DenseDevice::kCuda;
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
  DenseTowerOptions gpu;
  gpu.device = model::DenseDevice::kCuda;
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
  DenseTowerOptions gpu;
  gpu.device = model::DenseDevice::kCuda;
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
  DenseTowerOptions gpu;
  gpu.device = model::DenseDevice::kCuda;
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
    std::vector<float> p = Random(n, 1);
    DeviceVector<float> dp(p);
    for (int step = 0; step < 3; ++step) {
      const std::vector<float> g = Random(n, 10 + step);
      DeviceVector<float> dg(g);
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
    DeviceVector<float> dg(g);
    cpu_opt->Step(absl::MakeSpan(p), g);
    restored->Step(absl::MakeSpan(dp.get(), n), absl::MakeConstSpan(dg.get(), n));
    EXPECT_EQ(dp.Read(), p);
    EXPECT_EQ(restored->LoadState(std::vector<float>(3, 0.0f)).code(),
              absl::StatusCode::kInvalidArgument);
  }
}

// NCCL with one rank: the communicator comes up and the all-reduce is the identity.
TEST(DeviceCollectiveTest, OneRankAllReduce) {
  EMBER_SKIP_WITHOUT_GPU();
  CollectiveOptions options;
  options.timeout = absl::Seconds(30);
  absl::StatusOr<std::unique_ptr<DeviceCollective>> nccl = DeviceCollective::Connect(options, 0);
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  EXPECT_EQ((*nccl)->world_size(), 1);
  const std::vector<float> values = Random(100003, 3);
  DeviceVector<float> data(values);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_TRUE((*nccl)->AllReduceSum(absl::MakeSpan(data.get(), values.size()), stream).ok());
  EXPECT_EQ(data.Read(), values);
  EXPECT_TRUE((*nccl)->AllReduceSum({}, stream).ok());
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace ember::worker
