// Copyright 2026 The Ember Authors.
//
// DenseTower: the dense part of a DLRM-style CTR model. The interface and its CPU
// backend (OpenBLAS) live here, in common/, because the training worker and the
// serving follower (Predict) run the same tower and must score bitwise alike. The CUDA
// backend (cuBLAS and Ember's kernels: worker/dense/cuda/) is the worker's, chosen by
// worker/dense/dense_device.h CreateDenseTower. Both backends share the shapes, the
// parameter layout and the initial weights (tower_layout.h).
//
//   dense features [B x num_dense] -> bottom MLP (ReLU after every layer)
//   pooled embeddings, F features [B x dim_f each]
//   interaction: DOT (pairwise dots of [bottom, f_1..f_F], lower triangle, plus the
//                bottom output), CONCAT ([bottom, f_1..f_F]) or CROSS (DCN-v2: cross
//                layers x_{l+1} = x0 * (W_l x_l + b_l) + x_l over x0 = the CONCAT row,
//                W_l full rank or U_l V_l; the output is x_L)
//   -> top MLP (ReLU after every hidden layer) -> 1 logit
//   multi-task (DenseTowerConfig.tasks): each extra task's own top MLP over the same
//   interaction output -> its logit (ForwardTasks; see MultiTaskLoss for the ESMM head)
//
// All parameters (weights then bias of every layer: bottom, cross, top) live in one flat
// buffer, and so do their gradients, so a worker all-reduces one array and a dense
// optimizer steps one array.
//
//   absl::StatusOr<std::unique_ptr<DenseTower>> tower =
//       DenseTower::Create(config.dense(), /*num_dense=*/3, /*feature_dims=*/{16, 16});
//   tower->Forward(batch_size, dense, pooled, logits);      // logits [B]
//   float loss = BceWithLogits(logits, labels, weights, scale, dlogits);
//   tower->Backward(dlogits, d_pooled);   // fills gradients(), writes d_pooled
//   optimizer->Step(tower->step_parameters(), tower->step_gradients());
//   EMBER_RETURN_IF_ERROR(tower->status());  // CUDA: the first device error, if any
//
// Thread-safety: none; one tower per training thread. Forward must precede Backward
// with the same batch (the tower keeps the activations).
//
// Determinism: the same parameters and inputs give bitwise the same logits, gradients
// and d_pooled on one CPU type (fixed summation orders; OpenBLAS single-threaded, see
// Create). Across CPU types the last bits may differ (OpenBLAS and Ember pick SIMD
// kernels per CPU). "The same inputs" means the same whole batch: one example's logit
// may differ in the last bits when it is computed in a batch of another size, because
// OpenBLAS's sgemm blocks rows by batch size (measured on Debian 12's OpenBLAS for input
// widths of 16 and more, 2026-12-02); scores that must agree across batchings need a
// batch-invariant forward: Score. Forward + backward of the benchmark model (3 dense, bottom [64,
// 16], 8 features of dim 16, DOT, top [64, 32]) at batch 1024 takes about 0.85 ms of one core.
//
// The CUDA backend keeps parameters, gradients and activations in device memory;
// parameters() and gradients() are host mirrors (see there), and the training step's
// collective and optimizer work on step_parameters() / step_gradients() in device
// memory. In FP32 it is meant to match the CPU backend to float rounding (different
// summation orders), not bitwise, and to be run-to-run deterministic (no atomics);
// tests/worker/dense/cuda_dense_test.cc checks both on a GPU.

#ifndef EMBER_COMMON_MODEL_DENSE_TOWER_H_
#define EMBER_COMMON_MODEL_DENSE_TOWER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ember/v1/model.pb.h"

namespace ember::model {

// Where a tower runs. Only the worker makes CUDA towers (worker/dense/dense_device.h).
enum class DenseDevice { kCpu, kCuda };

class DenseTower {
 public:
  // `config` as normalized (defaults filled in: see model.proto); a zero interaction
  // or init_seed still means its default (DOT, 1). `num_dense` >= 0 dense inputs;
  // `feature_dims` the dim of each pooled feature, in order. Weights are Xavier-uniform
  // U(-sqrt(6 / (in + out)), +) from one splitmix64 stream seeded with init_seed over
  // the flat buffer in order (the same bits on every platform), biases 0.
  //  - bottom_mlp empty: the dense features themselves are the bottom output.
  //  - num_dense == 0: no bottom output and bottom_mlp is ignored. CONCAT uses the
  //    features alone; DOT interacts the features alone (Z = [f_1..f_F], output the
  //    pairwise dots only), which needs F >= 2 features of one dim.
  //  - CROSS: cross_layers 0 means 2; cross_rank 0 full rank.
  // INVALID_ARGUMENT when the shapes do not fit (DOT with a feature dim that differs
  // from the bottom output size, or fewer than two vectors to interact; no inputs at
  // all; a layer size of 0 or above 65536; num_dense < 0; a feature dim < 1; CROSS with
  // cross_layers above 8 or cross_rank not below the CONCAT width; cross_layers or
  // cross_rank set without CROSS).
  // Makes a CPU tower; it sets OpenBLAS to one thread, process-wide (its threads would
  // change the bits; the worker's threads are the parallelism).
  static absl::StatusOr<std::unique_ptr<DenseTower>> Create(const v1::DenseTowerConfig& config,
                                                            int num_dense,
                                                            std::vector<int> feature_dims);
  virtual ~DenseTower() = default;

  virtual DenseDevice device() const { return DenseDevice::kCpu; }
  // OK, or the first device error (CUDA: a failed copy, launch or cuBLAS call, already
  // translated to absl::Status). After an error the tower is broken: later calls do
  // nothing and status() keeps returning it. The CPU backend is always OK.
  virtual absl::Status status() const { return absl::OkStatus(); }

  // The width of the pooled input row: sum of feature_dims.
  virtual int pooled_width() const = 0;

  // Computes the logits of a batch. `dense` is [batch x num_dense] row-major; `pooled`
  // is [batch x pooled_width] row-major, the features side by side in order; `logits`
  // is [batch]. The inputs are copied where Backward needs them: the caller may reuse
  // its buffers at once. batch may change between calls (0 is allowed). REQUIRES:
  // sizes match.
  virtual void Forward(int batch, absl::Span<const float> dense, absl::Span<const float> pooled,
                       absl::Span<float> logits) = 0;

  // Computes the logits of a batch for scoring (evaluation, serving's Predict): like
  // Forward, but a row's logit does not depend on the batch it is in, so any batching
  // of the same rows gives bitwise the same scores (the CPU tower runs every row as a
  // batch of one: the same sgemm shapes every time; about 0.7 us per row for the
  // quickstart model, about twice the per-row time of a 1000-row Forward). It clobbers the
  // activations Forward keeps: call Forward again before a Backward. The CUDA tower runs Forward
  // (cuBLAS picks kernels by shape, so its scores are not batch-invariant). Arguments
  // and REQUIRES as Forward.
  virtual void Score(int batch, absl::Span<const float> dense, absl::Span<const float> pooled,
                     absl::Span<float> logits) = 0;

  // Back-propagates d(loss)/d(logit) of the last Forward: overwrites gradients() with
  // the parameter gradients and d_pooled ([batch x pooled_width]) with the gradient of
  // the pooled inputs. REQUIRES: a Forward with the same batch before.
  virtual void Backward(absl::Span<const float> dlogits, absl::Span<float> d_pooled) = 0;

  // BceWithLogits of the last Forward's logits (the ones it wrote to `logits`, passed
  // back here) and then Backward of its dlogits, in one call: returns the loss as
  // BceWithLogits does and writes d_pooled. The CPU backend runs exactly those two
  // functions; the CUDA one computes the loss on the device from its own logits.
  virtual float BackwardWithBce(absl::Span<const float> logits, absl::Span<const float> labels,
                                absl::Span<const float> weights, float scale,
                                absl::Span<float> d_pooled) = 0;

  // ---- Multi-task heads (DenseTowerConfig.tasks; CPU backend only). Task 0 is the
  // click task: Forward, Score, Backward and BackwardWithBce are its (on a multi-task
  // tower Backward leaves the other heads' gradients 0), so evaluation of the click
  // task and serving's Predict are unchanged. Task-major buffers hold
  // [num_tasks x batch]: task t's row b at t * batch + b.

  // 1 + the number of extra tasks.
  virtual int num_tasks() const { return 1; }
  // Forward of every task: `logits` [num_tasks x batch]; the task-0 part is bitwise
  // Forward's. Arguments and REQUIRES as Forward.
  virtual void ForwardTasks(int batch, absl::Span<const float> dense,
                            absl::Span<const float> pooled, absl::Span<float> logits) {
    Forward(batch, dense, pooled, logits);
  }
  // Score (batch-invariant) of every task; `logits` [num_tasks x batch].
  virtual void ScoreTasks(int batch, absl::Span<const float> dense, absl::Span<const float> pooled,
                          absl::Span<float> logits) {
    Score(batch, dense, pooled, logits);
  }
  // MultiTaskLoss (below) of the last ForwardTasks' logits (passed back here) with
  // `labels` [num_tasks x batch], then the backward pass of its dlogits: overwrites
  // gradients() and d_pooled, returns the loss. With one task it is BackwardWithBce.
  virtual float BackwardWithTaskLoss(absl::Span<const float> logits, absl::Span<const float> labels,
                                     absl::Span<const float> weights, float scale,
                                     absl::Span<float> d_pooled) {
    return BackwardWithBce(logits, labels, weights, scale, d_pooled);
  }

  // The flat parameter and gradient buffers (same size and layout), on the host. CPU:
  // the live buffers. CUDA: host mirrors; each call copies the device buffer into the
  // mirror (blocking), and writes to the parameters() mirror reach the device only
  // through SyncParametersToDevice().
  virtual absl::Span<float> parameters() = 0;
  virtual absl::Span<float> gradients() = 0;
  // CUDA: copies the parameters() mirror to the device. CPU: nothing to do.
  virtual absl::Status SyncParametersToDevice() { return status(); }

  // The buffers a training step's all-reduce and optimizer work on: parameters() and
  // gradients() on the CPU; device memory on CUDA (never dereference those on the
  // host; a CUDA DenseOptimizer made by CreateDenseOptimizer steps them).
  virtual absl::Span<float> step_parameters() { return parameters(); }
  virtual absl::Span<float> step_gradients() { return gradients(); }
  // The cudaStream_t every device operation of the tower is ordered on; null on the CPU.
  virtual void* cuda_stream() const { return nullptr; }
};

// Weighted binary cross-entropy on logits, numerically stable. Returns
// sum_i w_i * bce(logit_i, label_i) * scale and writes dlogits_i = w_i * (sigmoid(logit_i) -
// label_i) * scale. Use scale = 1 / (global batch size) for a mean over the global batch.
// `weights` empty means every w_i = 1. REQUIRES: labels, dlogits (and weights unless
// empty) the size of logits.
float BceWithLogits(absl::Span<const float> logits, absl::Span<const float> labels,
                    absl::Span<const float> weights, float scale, absl::Span<float> dlogits);

// One extra task's head, as MultiTaskLoss and TaskProbability need it.
struct TaskHeadKind {
  v1::TaskConfig::Kind kind = v1::TaskConfig::INDEPENDENT;
  float loss_weight = 1.0f;
};

// The loss of a multi-task tower over task-major [(1 + heads.size()) x batch] logits and
// labels (task 0: the click task): BceWithLogits of task 0, plus per extra task t its
// loss_weight times
//  - INDEPENDENT: BceWithLogits of its logit and label;
//  - ESMM_CTCVR: the BCE of p = sigmoid(logit_0) * sigmoid(logit_t) against its label
//    (click and conversion), whose gradient reaches logit_0 too:
//      d/d logit_0 = (p - y) (1 - sigmoid(logit_0)) / (1 - p), and the same with t,
//    computed in double from log p = -softplus(-logit_0) - softplus(-logit_t), 1 - p at
//    least 1e-12.
// Weights and scale as BceWithLogits; returns the sum and writes dlogits (task-major).
// With no heads it is exactly BceWithLogits.
float MultiTaskLoss(absl::Span<const TaskHeadKind> heads, absl::Span<const float> logits,
                    absl::Span<const float> labels, absl::Span<const float> weights, float scale,
                    absl::Span<float> dlogits);

// Task t's probability of one example from its task-0 (click) logit and its own logit:
// ClickProbability(task_logit) (INDEPENDENT), or ClickProbability(click_logit) *
// ClickProbability(task_logit) (ESMM_CTCVR: p_ctcvr).
float TaskProbability(v1::TaskConfig::Kind kind, float click_logit, float task_logit);

// The click probability of a logit, 1 / (1 + exp(-logit)) in float: the one formula
// evaluation and serving's Predict both use, so their scores agree bitwise.
float ClickProbability(float logit);

}  // namespace ember::model

#endif  // EMBER_COMMON_MODEL_DENSE_TOWER_H_
