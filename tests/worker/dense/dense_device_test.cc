// Copyright 2026 The Ember Authors.
//
// Host-side tests of the dense backends: device and precision parsing, backend
// selection (CheckDenseDevice, Create with --device=cuda where no GPU is visible), the
// shared tower layout and initial weights, the default BackwardWithBce, the optimizer
// factory and the pooling plan (worker/dense/dense_device.h, tower_layout.h,
// pooling_plan.h). They run everywhere; tests/worker/dense/cuda_dense_test.cc needs a GPU.

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "common/model/dense_tower.h"
#include "common/model/tower_layout.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/device_collective.h"
#include "worker/dense/cuda/cuda_backend.h"
#include "worker/dense/dense_device.h"
#include "worker/dense/dense_optimizer.h"
#include "worker/dense/pooling_plan.h"

namespace ember::worker {
namespace {

using ::testing::HasSubstr;

v1::DenseTowerConfig Config(v1::DenseTowerConfig::Interaction interaction) {
  v1::DenseTowerConfig config;
  config.set_interaction(interaction);
  config.add_bottom_mlp(8);
  config.add_bottom_mlp(4);
  config.add_top_mlp(16);
  config.set_init_seed(7);
  return config;
}

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

TEST(DenseDeviceTest, ParsesDevicesAndPrecisions) {
  EXPECT_EQ(*ParseDenseDevice("cpu"), model::DenseDevice::kCpu);
  EXPECT_EQ(*ParseDenseDevice("cuda"), model::DenseDevice::kCuda);
  EXPECT_THAT(ParseDenseDevice("gpu").status().message(), HasSubstr("want cpu or cuda"));
  EXPECT_EQ(*ParseDensePrecision("fp32"), DensePrecision::kFp32);
  EXPECT_EQ(*ParseDensePrecision("tf32"), DensePrecision::kTf32);
  EXPECT_EQ(*ParseDensePrecision("bf16"), DensePrecision::kBf16);
  EXPECT_EQ(ParseDensePrecision("fp16").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_STREQ(DensePrecisionName(DensePrecision::kBf16), "bf16");
  EXPECT_STREQ(DenseDeviceName(model::DenseDevice::kCuda), "cuda");
}

TEST(DenseDeviceTest, TheCpuComputesInFp32Only) {
  DenseTowerOptions options;
  EXPECT_TRUE(CheckDenseDevice(options).ok());
  options.precision = DensePrecision::kBf16;
  const absl::Status s = CheckDenseDevice(options);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("needs --device=cuda"));
  EXPECT_EQ(CreateDenseTower(Config(v1::DenseTowerConfig::DOT), 3, {4, 4}, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Where no GPU is visible (CI), asking for one fails at once with the reason; where one
// is, the tower comes up on it.
TEST(DenseDeviceTest, CudaIsRefusedClearlyWithoutADevice) {
  DenseTowerOptions options;
  options.device = model::DenseDevice::kCuda;
  options.cuda_device = -1;
  EXPECT_EQ(CheckDenseDevice(options).code(), absl::StatusCode::kInvalidArgument);
  options.cuda_device = 0;
  const absl::Status probe = CheckDenseDevice(options);
  absl::StatusOr<std::unique_ptr<model::DenseTower>> tower =
      CreateDenseTower(Config(v1::DenseTowerConfig::DOT), 3, {4, 4}, options);
#ifdef EMBER_HAVE_CUDA
  EXPECT_TRUE(cuda_internal::BuiltWithCuda());
  if (probe.ok()) {
    ASSERT_TRUE(tower.ok()) << tower.status();
    EXPECT_EQ((*tower)->device(), model::DenseDevice::kCuda);
    return;
  }
  EXPECT_EQ(probe.code(), absl::StatusCode::kUnavailable) << probe;
  EXPECT_THAT(probe.message(), HasSubstr("CUDA"));
#else
  EXPECT_FALSE(cuda_internal::BuiltWithCuda());
  EXPECT_EQ(probe.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(probe.message(), HasSubstr("built without CUDA"));
#endif
  EXPECT_EQ(tower.status().code(), probe.code());
  EXPECT_EQ(DescribeCudaDevice(0).status().code(), probe.code());
  // Out of range ordinals are refused the same way.
  options.cuda_device = 4096;
  EXPECT_FALSE(CheckDenseDevice(options).ok());
}

// CROSS has no CUDA kernels yet: refused before the device is even probed, so the same
// on every machine; the CPU makes it.
TEST(DenseDeviceTest, CrossIsRefusedOnCuda) {
  v1::DenseTowerConfig config = Config(v1::DenseTowerConfig::CROSS);
  DenseTowerOptions options;
  options.device = model::DenseDevice::kCuda;
  const absl::Status s = CheckDenseTowerOnDevice(config, options);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(s.message(), "interaction CROSS is not on CUDA yet; use --device=cpu");
  EXPECT_EQ(CreateDenseTower(config, 3, {4, 4}, options).status(), s);
  options.device = model::DenseDevice::kCpu;
  EXPECT_TRUE(CheckDenseTowerOnDevice(config, options).ok());
  absl::StatusOr<std::unique_ptr<model::DenseTower>> tower =
      CreateDenseTower(config, 3, {4, 4}, options);
  ASSERT_TRUE(tower.ok()) << tower.status();
  EXPECT_EQ((*tower)->device(), model::DenseDevice::kCpu);
  // Other interactions pass the check on either device.
  options.device = model::DenseDevice::kCuda;
  EXPECT_TRUE(CheckDenseTowerOnDevice(Config(v1::DenseTowerConfig::DOT), options).ok());
}

// Multi-task heads have no CUDA kernels yet: refused like CROSS, before any probe.
TEST(DenseDeviceTest, MultiTaskHeadsAreRefusedOnCuda) {
  v1::DenseTowerConfig config = Config(v1::DenseTowerConfig::DOT);
  v1::TaskConfig* task = config.add_tasks();
  task->set_name("conversion");
  task->set_kind(v1::TaskConfig::ESMM_CTCVR);
  DenseTowerOptions options;
  options.device = model::DenseDevice::kCuda;
  const absl::Status s = CheckDenseTowerOnDevice(config, options);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(s.message(), "multi-task heads are not on CUDA yet; use --device=cpu");
  EXPECT_EQ(CreateDenseTower(config, 3, {4, 4}, options).status(), s);
  options.device = model::DenseDevice::kCpu;
  absl::StatusOr<std::unique_ptr<model::DenseTower>> tower =
      CreateDenseTower(config, 3, {4, 4}, options);
  ASSERT_TRUE(tower.ok()) << tower.status();
  EXPECT_EQ((*tower)->num_tasks(), 2);
}

TEST(DenseDeviceTest, DeviceCollectiveRejectsBadOptions) {
  CollectiveOptions options;
  options.rank = 2;
  options.world_size = 2;
  const absl::Status s = DeviceCollective::Connect(options, 0).status();
#ifdef EMBER_HAVE_CUDA
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  options.rank = 1;  // world size 2 without a coordinator
  EXPECT_THAT(DeviceCollective::Connect(options, 0).status().message(),
              HasSubstr("needs a coordinator"));
#else
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
#endif
}

TEST(TowerLayoutTest, SharedLayoutMatchesTheCpuTower) {
  for (auto interaction : {v1::DenseTowerConfig::DOT, v1::DenseTowerConfig::CONCAT}) {
    v1::DenseTowerConfig config = Config(interaction);
    absl::StatusOr<model::dense_internal::TowerLayout> layout =
        model::dense_internal::BuildTowerLayout(config, 3, {4, 4, 4});
    ASSERT_TRUE(layout.ok()) << layout.status();
    absl::StatusOr<std::unique_ptr<model::DenseTower>> tower =
        CreateDenseTower(config, 3, {4, 4, 4});
    ASSERT_TRUE(tower.ok());
    EXPECT_EQ(layout->num_parameters, (*tower)->parameters().size());
    const std::vector<float> init = model::dense_internal::InitialParameters(*layout, 7);
    const absl::Span<const float> params = (*tower)->parameters();
    EXPECT_TRUE(std::equal(init.begin(), init.end(), params.begin(), params.end()));
  }
}

// DOT with bottom [3 -> 8 -> 4], 3 features of dim 4, top [22 -> 16 -> 1]:
// n = 4 vectors, 6 pairs of 4 MACs, interaction width 4 + 6 = 10.
TEST(TowerLayoutTest, CountsMultiplyAddsAndWidths) {
  absl::StatusOr<model::dense_internal::TowerLayout> layout =
      model::dense_internal::BuildTowerLayout(Config(v1::DenseTowerConfig::DOT), 3, {4, 4, 4});
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->interaction_width, 10);
  EXPECT_EQ(layout->MaxWidth(), 16);
  EXPECT_DOUBLE_EQ(layout->ForwardMacsPerExample(), 3 * 8 + 8 * 4 + 6 * 4 + 10 * 16 + 16 * 1);
  EXPECT_EQ(model::dense_internal::BuildTowerLayout(Config(v1::DenseTowerConfig::DOT), 3, {4, 5})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DenseTowerTest, BackwardWithBceIsBceThenBackwardBitwise) {
  const int batch = 9;
  auto make = [] { return *CreateDenseTower(Config(v1::DenseTowerConfig::DOT), 3, {4, 4, 4}); };
  std::unique_ptr<model::DenseTower> a = make(), b = make();
  const std::vector<float> dense = Random(batch * 3, 1), pooled = Random(batch * 12, 2);
  std::vector<float> labels(batch), weights = Random(batch, 3);
  for (int i = 0; i < batch; ++i) labels[i] = static_cast<float>(i % 2);
  std::vector<float> logits_a(batch), logits_b(batch), dlogits(batch);
  std::vector<float> dp_a(batch * 12), dp_b(batch * 12);
  a->Forward(batch, dense, pooled, absl::MakeSpan(logits_a));
  const float loss_a =
      model::BceWithLogits(logits_a, labels, weights, 0.25f, absl::MakeSpan(dlogits));
  a->Backward(dlogits, absl::MakeSpan(dp_a));
  b->Forward(batch, dense, pooled, absl::MakeSpan(logits_b));
  const float loss_b = b->BackwardWithBce(logits_b, labels, weights, 0.25f, absl::MakeSpan(dp_b));
  EXPECT_EQ(loss_a, loss_b);
  EXPECT_EQ(dp_a, dp_b);
  const absl::Span<const float> ga = a->gradients(), gb = b->gradients();
  EXPECT_TRUE(std::equal(ga.begin(), ga.end(), gb.begin(), gb.end()));
}

TEST(DenseTowerTest, OptimizerFactoryFollowsTheTower) {
  std::unique_ptr<model::DenseTower> tower =
      *CreateDenseTower(Config(v1::DenseTowerConfig::CONCAT), 3, {4});
  v1::DenseOptimizerConfig config;
  config.set_kind(v1::DenseOptimizerConfig::ADAGRAD);
  std::unique_ptr<DenseOptimizer> a = CreateDenseOptimizer(config, *tower);
  std::unique_ptr<DenseOptimizer> b = DenseOptimizer::Create(config, tower->parameters().size());
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->status().ok());
  std::vector<float> pa = Random(tower->parameters().size(), 4), pb = pa;
  const std::vector<float> g = Random(pa.size(), 5);
  a->Step(absl::MakeSpan(pa), g);
  b->Step(absl::MakeSpan(pb), g);
  EXPECT_EQ(pa, pb);
  EXPECT_EQ(a->SaveState(), b->SaveState());
  config.set_kind(static_cast<v1::DenseOptimizerConfig::Kind>(99));
  EXPECT_EQ(CreateDenseOptimizer(config, *tower), nullptr);
}

}  // namespace
}  // namespace ember::worker
