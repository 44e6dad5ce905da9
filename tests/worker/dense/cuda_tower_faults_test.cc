// Copyright 2026 The Ember Authors.
//
// The CUDA tower beyond the single step: a CPU checkpoint restored into it, a tower used
// from another thread than the one that made it (on device 1: skipped with fewer than
// two GPUs), and a sticky CUDA error (a kernel that writes through a bad address),
// which must lose the context for the whole process and make it exit 75 instead of
// retrying. Every test skips where no GPU is visible.

#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "common/model/dense_tower.h"
#include "gtest/gtest.h"
#include "tests/worker/dense/cuda_fault_kernel.h"
#include "tests/worker/dense/cuda_test_util.h"
#include "worker/cuda/context_lost.h"
#include "worker/dense/dense_optimizer.h"

namespace ember::worker {
namespace {

using testing::Random;
using testing::RelativeError;

// The quickstart tower.
constexpr int kNumDense = 3;
const std::vector<int>& Dims() {
  static const std::vector<int>* dims = new std::vector<int>(8, 16);
  return *dims;
}

v1::DenseTowerConfig Quickstart() {
  v1::DenseTowerConfig config;
  config.set_interaction(v1::DenseTowerConfig::DOT);
  for (uint32_t w : {64, 16}) config.add_bottom_mlp(w);
  for (uint32_t w : {64, 32}) config.add_top_mlp(w);
  config.set_init_seed(5);
  return config;
}

DenseTowerOptions Gpu(int device = 0) {
  DenseTowerOptions gpu;
  gpu.device = model::DenseDevice::kCuda;
  gpu.cuda_device = device;
  return gpu;
}

// One BCE training step; returns the loss.
float TrainStep(model::DenseTower& tower, DenseOptimizer& optimizer, int batch, uint32_t seed) {
  const int width = tower.pooled_width();
  const std::vector<float> dense = Random(size_t(batch) * kNumDense, seed);
  const std::vector<float> pooled = Random(size_t(batch) * width, seed + 1);
  std::vector<float> labels(batch), logits(batch), d_pooled(size_t(batch) * width);
  for (int i = 0; i < batch; ++i) labels[i] = dense[size_t(i) * kNumDense] > 0 ? 1.0f : 0.0f;
  tower.Forward(batch, dense, pooled, absl::MakeSpan(logits));
  const float loss =
      tower.BackwardWithBce(logits, labels, {}, 1.0f / batch, absl::MakeSpan(d_pooled));
  optimizer.Step(tower.step_parameters(), tower.step_gradients());
  return loss;
}

// What the trainer does at a restore (trainer_checkpoint.cc): the parameters through
// the host mirror and SyncParametersToDevice, the optimizer through LoadState. A CPU
// run's checkpoint after 3 Adam steps, restored into a fresh CUDA tower, trains on like
// the CPU run for 3 more steps (fp32: to float rounding).
TEST(CudaTowerRestoreTest, RestoresACpuCheckpointAndTrainsOn) {
  EMBER_SKIP_WITHOUT_GPU();
  std::unique_ptr<model::DenseTower> cpu = *CreateDenseTower(Quickstart(), kNumDense, Dims());
  v1::DenseOptimizerConfig adam;
  adam.set_learning_rate(0.01f);
  std::unique_ptr<DenseOptimizer> cpu_opt = CreateDenseOptimizer(adam, *cpu);
  for (int step = 0; step < 3; ++step) TrainStep(*cpu, *cpu_opt, 512, 10 * step);
  const absl::Span<const float> saved = cpu->parameters();
  const std::vector<float> checkpoint(saved.begin(), saved.end());
  const std::vector<float> state = cpu_opt->SaveState();

  v1::DenseTowerConfig other = Quickstart();
  other.set_init_seed(99);  // the restore must overwrite every initial weight
  absl::StatusOr<std::unique_ptr<model::DenseTower>> made =
      CreateDenseTower(other, kNumDense, Dims(), Gpu());
  ASSERT_TRUE(made.ok()) << made.status();
  std::unique_ptr<model::DenseTower> cuda = std::move(*made);
  std::unique_ptr<DenseOptimizer> cuda_opt = CreateDenseOptimizer(adam, *cuda);
  const absl::Span<float> mirror = cuda->parameters();
  ASSERT_EQ(mirror.size(), checkpoint.size());
  std::memcpy(mirror.data(), checkpoint.data(), checkpoint.size() * sizeof(float));
  ASSERT_TRUE(cuda->SyncParametersToDevice().ok()) << cuda->status();
  ASSERT_TRUE(cuda_opt->LoadState(state).ok());
  EXPECT_EQ(cuda_opt->SaveState(), state);  // the moments and the step count, bitwise

  for (int step = 3; step < 6; ++step) {
    const float want = TrainStep(*cpu, *cpu_opt, 512, 10 * step);
    const float got = TrainStep(*cuda, *cuda_opt, 512, 10 * step);
    EXPECT_NEAR(got, want, 1e-4 * want) << "step " << step;
  }
  ASSERT_TRUE(cuda->status().ok()) << cuda->status();
  const absl::Span<const float> a = cuda->parameters();
  const absl::Span<const float> b = cpu->parameters();
  EXPECT_LE(
      RelativeError(std::vector<float>(a.begin(), a.end()), std::vector<float>(b.begin(), b.end())),
      1e-4);
}

// cudaSetDevice is per thread: a tower on device 1, made on this thread and used from
// another one (whose current device is 0), gives the same results as here.
TEST(CudaTowerThreadTest, AnotherThreadUsesTheTowersDevice) {
  EMBER_SKIP_WITHOUT_GPU();
  EMBER_SKIP_WITH_FEWER_GPUS(2);
  v1::DenseOptimizerConfig sgd;
  sgd.set_kind(v1::DenseOptimizerConfig::SGD);
  std::vector<float> losses[2];
  for (int run = 0; run < 2; ++run) {
    std::unique_ptr<model::DenseTower> tower =
        *CreateDenseTower(Quickstart(), kNumDense, Dims(), Gpu(/*device=*/1));
    std::unique_ptr<DenseOptimizer> opt = CreateDenseOptimizer(sgd, *tower);
    auto train = [&] {
      for (int step = 0; step < 2; ++step)
        losses[run].push_back(TrainStep(*tower, *opt, 256, step));
    };
    if (run == 0) {
      train();
    } else {
      std::thread other(train);
      other.join();
    }
    EXPECT_TRUE(tower->status().ok()) << "run " << run << ": " << tower->status();
    EXPECT_TRUE(opt->status().ok()) << "run " << run << ": " << opt->status();
  }
  EXPECT_EQ(losses[0], losses[1]);
}

// In a child process (death tests re-run this binary, so it starts with a fresh CUDA
// context): a kernel writes through a bad address; the tower's next call fails with
// the sticky error, the process-wide CudaContextLost() turns true, and the child exits
// as ember-worker does then (kExitCudaContextLost, 75).
void LoseTheContextAndExit() {
  std::unique_ptr<model::DenseTower> tower =
      *CreateDenseTower(Quickstart(), kNumDense, Dims(), Gpu());
  const int batch = 64, width = tower->pooled_width();
  std::vector<float> logits(batch);
  const std::vector<float> dense = Random(size_t(batch) * kNumDense, 1);
  const std::vector<float> pooled = Random(size_t(batch) * width, 2);
  tower->Forward(batch, dense, pooled, absl::MakeSpan(logits));
  if (!tower->status().ok() || CudaContextLost()) _exit(3);
  testing::LaunchIllegalAddressWrite(static_cast<cudaStream_t>(tower->cuda_stream()));
  tower->Forward(batch, dense, pooled, absl::MakeSpan(logits));
  const absl::Status s = tower->status();
  fprintf(stderr, "tower status: %s\n", s.ToString().c_str());
  if (s.code() != absl::StatusCode::kUnavailable ||
      !absl::StrContains(s.message(), "cudaErrorIllegalAddress") || !CudaContextLost()) {
    _exit(1);
  }
  // A new tower in the same process fails the same way: why the worker must not retry.
  absl::StatusOr<std::unique_ptr<model::DenseTower>> again =
      CreateDenseTower(Quickstart(), kNumDense, Dims(), Gpu());
  fprintf(stderr, "a new tower: %s\n", again.status().ToString().c_str());
  if (again.ok()) _exit(2);
  _exit(kExitCudaContextLost);
}

TEST(CudaContextLostDeathTest, AnIllegalAddressLosesTheContextForTheProcess) {
  EMBER_SKIP_WITHOUT_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(LoseTheContextAndExit(), ::testing::ExitedWithCode(kExitCudaContextLost),
              "the CUDA context is lost");
}

}  // namespace
}  // namespace ember::worker
