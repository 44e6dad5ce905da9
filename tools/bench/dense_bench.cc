// Copyright 2026 The Ember Authors.
//
// `ember-bench dense`: one training step of the quickstart model's dense tower
// (configs/quickstart.pbtxt: 3 dense inputs, bottom [64, 16], 8 pooled features of dim
// 16, DOT, top [64, 32]; Adam) on each backend this machine has: the CPU (OpenBLAS,
// one thread, as a worker runs it) and, where a GPU is visible, CUDA in fp32, tf32 and
// bf16. A step is what the trainer does: Forward (inputs from host memory), BCE +
// Backward (d_pooled back to host memory) and the optimizer step.
//
// At batch 4096 and 65536 it reports per backend the median step time over
// --repetitions, examples/s, and achieved TFLOP/s: 3 x 2 x (multiply-adds of one
// example's forward pass) x batch / step time (backward costs twice the forward).
// Ratios are against the CPU measured in the same run. Inputs rotate over 4 random
// sets so no backend times a cache of one batch.

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/model/dense_tower.h"
#include "common/model/model_config.h"
#include "common/model/tower_layout.h"
#include "common/status_macros.h"
#include "tools/bench/figures.h"
#include "tools/bench/suite.h"
#include "worker/dense/dense_device.h"
#include "worker/dense/dense_optimizer.h"

namespace ember::bench {
namespace {

using model::DenseDevice;
using model::DenseTower;
using worker::DensePrecision;
using worker::DenseTowerOptions;

void Say(const std::string& line) { std::fprintf(stderr, "dense: %s\n", line.c_str()); }

struct Inputs {
  std::vector<float> dense, pooled, labels;
};

std::vector<Inputs> MakeInputs(int batch, int num_dense, int width, uint64_t seed) {
  std::vector<Inputs> sets(4);
  uint64_t state = seed * 0x9e3779b97f4a7c15ULL + 1;
  auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return static_cast<float>(state >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f;
  };
  for (Inputs& in : sets) {
    in.dense.resize(size_t(batch) * num_dense);
    in.pooled.resize(size_t(batch) * width);
    in.labels.resize(batch);
    for (float& x : in.dense) x = next();
    for (float& x : in.pooled) x = 0.1f * next();
    for (float& x : in.labels) x = next() > 0.5f ? 1.0f : 0.0f;
  }
  return sets;
}

// Median seconds of one step over the repetitions.
absl::StatusOr<double> TimeSteps(const v1::ModelConfig& config, const std::vector<int>& dims,
                                 int num_dense, const DenseTowerOptions& device, int batch,
                                 const BenchOptions& options) {
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<model::DenseTower> tower,
                         CreateDenseTower(config.dense(), num_dense, dims, device));
  std::unique_ptr<worker::DenseOptimizer> optimizer =
      worker::CreateDenseOptimizer(config.dense_optimizer(), *tower);
  const int width = tower->pooled_width();
  const std::vector<Inputs> sets = MakeInputs(batch, num_dense, width, options.seed);
  std::vector<float> logits(batch), d_pooled(size_t(batch) * width);
  size_t step = 0;
  auto run = [&](int steps) -> absl::Status {
    for (int i = 0; i < steps; ++i, ++step) {
      const Inputs& in = sets[step % sets.size()];
      tower->Forward(batch, in.dense, in.pooled, absl::MakeSpan(logits));
      tower->BackwardWithBce(logits, in.labels, {}, 1.0f / batch, absl::MakeSpan(d_pooled));
      optimizer->Step(tower->step_parameters(), tower->step_gradients());
    }
    tower->parameters();  // waits for the last optimizer step on a device
    EMBER_RETURN_IF_ERROR(tower->status());
    return optimizer->status();
  };
  using Clock = std::chrono::steady_clock;
  // Warm-up: allocation, cuBLAS heuristics, the caches.
  const Clock::time_point warm_end =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(std::max(0.2, options.warmup_s)));
  do {
    EMBER_RETURN_IF_ERROR(run(3));
  } while (Clock::now() < warm_end);
  std::vector<double> per_step;
  for (int r = 0; r < options.repetitions; ++r) {
    int steps = 0;
    const Clock::time_point start = Clock::now();
    double elapsed = 0;
    do {
      EMBER_RETURN_IF_ERROR(run(5));
      steps += 5;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < options.min_time_s);
    per_step.push_back(elapsed / steps);
  }
  std::sort(per_step.begin(), per_step.end());
  return per_step[per_step.size() / 2];
}

absl::StatusOr<Figures> RunDenseSuite(const BenchOptions& options) {
  EMBER_ASSIGN_OR_RETURN(v1::ModelConfig config,
                         model::LoadModelConfig(EMBER_SOURCE_DIR "/configs/quickstart.pbtxt"));
  std::vector<int> dims;
  for (const v1::FeatureConfig& feature : config.features()) {
    for (const v1::TableConfig& table : config.tables()) {
      if (table.name() == feature.table()) dims.push_back(static_cast<int>(table.dim()));
    }
  }
  const int num_dense = 3;
  EMBER_ASSIGN_OR_RETURN(model::dense_internal::TowerLayout layout,
                         model::dense_internal::BuildTowerLayout(config.dense(), num_dense, dims));
  const double flops_per_example = 3 * 2 * layout.ForwardMacsPerExample();

  Figures figures;
  figures.AddString("suite", "dense");
  figures.AddString("model",
                    "quickstart dense tower: 3 dense, bottom [64,16], 8x16 DOT, top [64,32]");
  figures.AddInt("parameters", static_cast<int64_t>(layout.num_parameters));
  figures.AddNumber("flops_per_example", flops_per_example);
  figures.AddNumber("min_time_s", options.min_time_s);
  figures.AddInt("repetitions", options.repetitions);

  struct Backend {
    std::string name;
    DenseTowerOptions options;
  };
  std::vector<Backend> backends = {{"cpu", {}}};
  DenseTowerOptions cuda;
  cuda.device = model::DenseDevice::kCuda;
  if (absl::Status s = worker::CheckDenseDevice(cuda); s.ok()) {
    figures.AddString("gpu", worker::DescribeCudaDevice(0).value_or("?"));
    for (DensePrecision p : {DensePrecision::kFp32, DensePrecision::kTf32, DensePrecision::kBf16}) {
      cuda.precision = p;
      backends.push_back({absl::StrCat("cuda_", worker::DensePrecisionName(p)), cuda});
    }
  } else {
    figures.AddString("gpu", absl::StrCat("none (", s.message(), ")"));
    Say(absl::StrCat("no GPU: CPU only (", s.message(), ")"));
  }
  for (int batch : {4096, 65536}) {
    double cpu_seconds = 0;
    for (const Backend& backend : backends) {
      EMBER_ASSIGN_OR_RETURN(const double seconds,
                             TimeSteps(config, dims, num_dense, backend.options, batch, options));
      const std::string key = absl::StrCat(backend.name, "_b", batch);
      if (backend.name == "cpu") cpu_seconds = seconds;
      figures.AddNumber(key + "_step_ms", seconds * 1e3);
      figures.AddNumber(key + "_examples_per_sec", batch / seconds);
      figures.AddNumber(key + "_tflops", flops_per_example * batch / seconds / 1e12);
      if (backend.name != "cpu") figures.AddNumber(key + "_vs_cpu", cpu_seconds / seconds);
      Say(absl::StrFormat("%-10s batch %6d: %8.3f ms/step, %10.0f examples/s, %.3f TFLOP/s",
                          backend.name, batch, seconds * 1e3, batch / seconds,
                          flops_per_example * batch / seconds / 1e12));
    }
  }
  return figures;
}

EMBER_BENCH_SUITE(dense, "one dense-tower training step: CPU vs CUDA fp32/tf32/bf16",
                  RunDenseSuite);

}  // namespace
}  // namespace ember::bench
