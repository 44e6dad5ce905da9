// Copyright 2026 The Ember Authors.
//
// The layer kernels of the CPU dense tower (dense_tower.cc): Linear (OpenBLAS sgemm),
// ReLU, the DOT / CONCAT feature interactions and the CROSS (DCN-v2) gate, each as a forward and a
// backward function over row-major batches. Internal to worker/dense/; the tower and its tests are
// the only callers.
//
// Every function is deterministic: the same inputs give bitwise the same outputs
// (fixed summation orders; OpenBLAS single-threaded: see SetBlasSingleThreaded).
// Backward functions overwrite their outputs, never accumulate. Pointers may not alias
// unless stated. Batch and sizes are >= 1 unless stated.

#ifndef EMBER_COMMON_MODEL_LAYERS_H_
#define EMBER_COMMON_MODEL_LAYERS_H_

#include <cstddef>

namespace ember::model::dense_internal {

// Makes OpenBLAS run every call on the calling thread (process-wide; the first call
// sets it, later calls do nothing; thread-safe).
// Multi-threaded OpenBLAS splits sums by thread count, which changes bits; Ember's
// parallelism is its worker threads.
void SetBlasSingleThreaded();

// ---- Linear: y = x W^T + b, then ReLU when `relu`.
// x [batch x in], w [out x in] row-major, b [out], y [batch x out].
void LinearForward(int batch, int in, int out, const float* x, const float* w, const float* b,
                   bool relu, float* y);

// Back-propagates dy [batch x out] (already the gradient of the pre-activation, i.e.
// masked by ReluBackward when the layer has a ReLU): dw [out x in] = dy^T x,
// db [out] = column sums of dy, and dx [batch x in] = dy w unless dx is null.
void LinearBackward(int batch, int in, int out, const float* x, const float* w, const float* dy,
                    float* dw, float* db, float* dx);

// ---- ReLU (the forward half is fused into LinearForward).
// dy[i] = 0 where y[i] <= 0 (y: the ReLU's output), in place; n >= 0.
void ReluBackward(size_t n, const float* y, float* dy);

// ---- DOT interaction (DLRM). Per example, Z is the n x dim matrix whose row 0 is the
// bottom vector (when `bottom` is not null) and whose next rows are the F pooled
// features (n = F + 1, or F without a bottom vector). The output row is
//   [bottom (dim floats, only with a bottom vector), (Z Z^T)_{i,j} for i > j in
//    row-major order: (1,0), (2,0), (2,1), (3,0), ...]
// of width DotOutputWidth.
int DotOutputWidth(bool has_bottom, int num_features, int dim);

// bottom [batch x dim] or null; pooled [batch x num_features*dim]; out [batch x width].
// REQUIRES: n >= 2 (at least one pair).
void DotInteractionForward(int batch, int num_features, int dim, const float* bottom,
                           const float* pooled, float* out);

// The forward's inputs again, and dout [batch x width] -> d_bottom [batch x dim] (null
// iff bottom is null) and d_pooled [batch x num_features*dim].
void DotInteractionBackward(int batch, int num_features, int dim, const float* bottom,
                            const float* pooled, const float* dout, float* d_bottom,
                            float* d_pooled);

// ---- CONCAT interaction: out row = [bottom (bottom_width), pooled (pooled_width)].
// bottom_width may be 0 (bottom ignored).
void ConcatInteractionForward(int batch, int bottom_width, int pooled_width, const float* bottom,
                              const float* pooled, float* out);
// d_bottom and d_pooled are the slices of dout; d_bottom null = not wanted.
void ConcatInteractionBackward(int batch, int bottom_width, int pooled_width, const float* dout,
                               float* d_bottom, float* d_pooled);

// ---- CROSS (DCN-v2) layer: x_next = x0 * u + x (elementwise), where u = W x + b is
// the output of the layer's matrix product, computed by LinearForward over x without a
// ReLU (two of them for a low-rank layer), so every path a Linear layer takes (e.g. a
// batch-invariant one) applies to it. All arrays hold n = batch x width floats; n >= 0.
// x_next may alias x.
void CrossForward(size_t n, const float* x0, const float* u, const float* x, float* x_next);

// The gate's backward, given dx_next = d(loss)/d(x_next): writes du = dx_next * x0 (the
// dy to pass to the Linear's LinearBackward) and ACCUMULATES dx0 += dx_next * u (the one
// accumulating function here: x0 feeds every cross layer, so the caller zeroes dx0 once
// and the layers add to it, last layer first). The residual's share, dx += dx_next,
// is AddTo's, after LinearBackward wrote dx.
void CrossBackward(size_t n, const float* x0, const float* u, const float* dx_next, float* du,
                   float* dx0);

// y[i] += x[i] for i < n (n >= 0): a residual connection's gradient.
void AddTo(size_t n, const float* x, float* y);

}  // namespace ember::model::dense_internal

#endif  // EMBER_COMMON_MODEL_LAYERS_H_
