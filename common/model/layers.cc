// Copyright 2026 The Ember Authors.

#include "common/model/layers.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

namespace ember::model::dense_internal {
namespace {

#define EMBER_ALWAYS_INLINE inline __attribute__((always_inline))

// ---- SIMD dispatch. Every hand-written kernel is a template over W, the float lanes
// of its vectors, run by Run: with W = 8 compiled for x86-64-v3 (AVX2, FMA) on CPUs
// that have it, else with W = 4 for the baseline (SSE2). So results are bitwise
// reproducible on one CPU type, as OpenBLAS's own per-CPU kernels already are; they
// may differ in the last bits between CPU types.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
bool UseWide() {
  static const bool wide = __builtin_cpu_supports("x86-64-v3");
  return wide;
}
// The body, inlined here, is compiled for x86-64-v3.
template <typename Body>
__attribute__((target("arch=x86-64-v3"))) void RunWide(const Body& body) {
  body.template operator()<8>();
}
template <typename Body>
void Run(const Body& body) {
  if (UseWide()) {
    RunWide(body);
  } else {
    body.template operator()<4>();
  }
}
#else
template <typename Body>
void Run(const Body& body) {
  body.template operator()<4>();
}
#endif

// W floats (W = 4 or 8): a GCC vector, one SSE or AVX register. Loads and stores go
// through the unaligned, may_alias variant.
template <int W>
struct VecTypes {
  typedef float V __attribute__((vector_size(4 * W)));
  typedef float Unaligned __attribute__((vector_size(4 * W), aligned(4), may_alias));
};
template <int W>
using Vec = typename VecTypes<W>::V;
typedef float V4 __attribute__((vector_size(16)));

template <int W>
EMBER_ALWAYS_INLINE Vec<W> Load(const float* p) {
  return *reinterpret_cast<const typename VecTypes<W>::Unaligned*>(p);
}
template <int W>
EMBER_ALWAYS_INLINE void Store(float* p, Vec<W> v) {
  *reinterpret_cast<typename VecTypes<W>::Unaligned*>(p) = v;
}
// Four lanes: v itself, or lanes k + (k + 4) of eight.
template <int W>
EMBER_ALWAYS_INLINE V4 Fold(Vec<W> v) {
  if constexpr (W == 4) {
    return v;
  } else {
    return __builtin_shufflevector(v, v, 0, 1, 2, 3) + __builtin_shufflevector(v, v, 4, 5, 6, 7);
  }
}
// Pairwise sums of a then b: [a0 + a1, a2 + a3, b0 + b1, b2 + b3] (SSE3's haddps).
EMBER_ALWAYS_INLINE V4 HorizontalAdd(V4 a, V4 b) {
  return __builtin_shufflevector(a, b, 0, 2, 4, 6) + __builtin_shufflevector(a, b, 1, 3, 5, 7);
}
// The sum of the lanes in a fixed order: with t = Fold(v), (t0 + t1) + (t2 + t3).
template <int W>
EMBER_ALWAYS_INLINE float Sum(Vec<W> v) {
  const V4 t = Fold<W>(v);
  return (t[0] + t[1]) + (t[2] + t[3]);
}
// [Sum(a), Sum(b), Sum(c), Sum(d)], bitwise, with few shuffles for the four.
template <int W>
EMBER_ALWAYS_INLINE V4 Sum4(Vec<W> a, Vec<W> b, Vec<W> c, Vec<W> d) {
  return HorizontalAdd(HorizontalAdd(Fold<W>(a), Fold<W>(b)),
                       HorizontalAdd(Fold<W>(c), Fold<W>(d)));
}

// Dot product with W interleaved partial sums (a fixed order, so deterministic); a
// single running sum would be one long dependency chain.
template <int W>
EMBER_ALWAYS_INLINE float Dot(const float* a, const float* b, int n) {
  Vec<W> acc = {};
  int k = 0;
  for (; k + W <= n; k += W) acc += Load<W>(a + k) * Load<W>(b + k);
  float tail = 0.0f;
  for (; k < n; ++k) tail += a[k] * b[k];
  return Sum<W>(acc) + tail;
}

// ---- DOT interaction.

// Index of pair (i, j), i > j, in the row-major strict lower triangle.
EMBER_ALWAYS_INLINE int Pair(int i, int j) { return i * (i - 1) / 2 + j; }

// The rows of Z of one example: the bottom vector (when there is one), then the
// features. T is float (gradients) or const float (values).
template <typename T>
class ZRows {
 public:
  ZRows(int num_features, int dim, T* bottom, T* pooled)
      : num_features_(num_features), dim_(dim), bottom_(bottom), pooled_(pooled) {}
  int n() const { return num_features_ + (bottom_ != nullptr ? 1 : 0); }
  // Sets rows[0..n) to example r's rows.
  EMBER_ALWAYS_INLINE void Get(int r, T** rows) const {
    int i = 0;
    if (bottom_ != nullptr) rows[i++] = bottom_ + static_cast<size_t>(r) * dim_;
    T* p = pooled_ + static_cast<size_t>(r) * num_features_ * dim_;
    for (int f = 0; f < num_features_; ++f) rows[i++] = p + static_cast<size_t>(f) * dim_;
  }

 private:
  const int num_features_, dim_;
  T* const bottom_;
  T* const pooled_;
};

// Writes the pairs of example r to out + r * stride. kChunks > 0: dim = W * kChunks,
// row i held in registers; 0: any dim.
template <int W, int kChunks>
EMBER_ALWAYS_INLINE void DotForward(int batch, const ZRows<const float>& z, int dim, float* out,
                                    size_t stride) {
  if constexpr (kChunks > 0) dim = W * kChunks;
  const int n = z.n();
  std::vector<const float*> rows(n);
  for (int r = 0; r < batch; ++r) {
    z.Get(r, rows.data());
    float* o = out + r * stride;
    for (int i = 1; i < n; ++i) {
      if constexpr (kChunks > 0) {
        Vec<W> zi[kChunks];
        for (int c = 0; c < kChunks; ++c) zi[c] = Load<W>(rows[i] + W * c);
        auto dot = [&](int j) __attribute__((always_inline)) {
          Vec<W> acc = zi[0] * Load<W>(rows[j]);
          for (int c = 1; c < kChunks; ++c) acc += zi[c] * Load<W>(rows[j] + W * c);
          return acc;
        };
        int j = 0;
        for (; j + 4 <= i; j += 4, o += 4) {
          const V4 sums = Sum4<W>(dot(j), dot(j + 1), dot(j + 2), dot(j + 3));
          std::memcpy(o, &sums, sizeof(sums));
        }
        for (; j < i; ++j) *o++ = Sum<W>(dot(j));
      } else {
        for (int j = 0; j < i; ++j) *o++ = Dot<W>(rows[i], rows[j], dim);
      }
    }
  }
}

// Rows [i, i + kQ) of dZ = S Z for one example (see DotBackward), summed over j in
// order in registers, kQ rows at a time so that the multiply-add chains are
// independent (one row alone waits on their latency). S_aj is pairs[Pair(a, j)] below
// the diagonal and pairs[Pair(j, a)] above it; the diagonal, zero, is skipped.
template <int W, int kChunks, int kQ>
EMBER_ALWAYS_INLINE void DotBackwardRows(int i, int n, const float* const* rows, const float* pairs,
                                         const float* passthrough, float* const* drows) {
  Vec<W> acc[kQ][kChunks];
  for (int q = 0; q < kQ; ++q) {
    for (int c = 0; c < kChunks; ++c) {
      acc[q][c] = passthrough != nullptr && i + q == 0 ? Load<W>(passthrough + W * c) : Vec<W>{};
    }
  }
  auto add = [&](int q, float s, const Vec<W>* zj) __attribute__((always_inline)) {
    for (int c = 0; c < kChunks; ++c) acc[q][c] += s * zj[c];
  };
  for (int j = 0; j < n; ++j) {
    Vec<W> zj[kChunks];
    for (int c = 0; c < kChunks; ++c) zj[c] = Load<W>(rows[j] + W * c);
    if (j < i) {
      for (int q = 0; q < kQ; ++q) add(q, pairs[Pair(i + q, j)], zj);
    } else if (j >= i + kQ) {
      const float* s = pairs + Pair(j, i);  // S_{i+q, j} = s[q]
      for (int q = 0; q < kQ; ++q) add(q, s[q], zj);
    } else {
      for (int q = 0; q < kQ; ++q) {
        if (i + q > j) add(q, pairs[Pair(i + q, j)], zj);
        if (i + q < j) add(q, pairs[Pair(j, i + q)], zj);
      }
    }
  }
  for (int q = 0; q < kQ; ++q) {
    for (int c = 0; c < kChunks; ++c) Store<W>(drows[i + q] + W * c, acc[q][c]);
  }
}

// dZ = S Z, S symmetric with S_ij = S_ji = dout of pair (i, j) and a zero diagonal,
// plus the bottom pass-through on row 0. Example r's dout is [pass-through (with a
// bottom vector), pairs] at dout + r * stride.
template <int W, int kChunks>
EMBER_ALWAYS_INLINE void DotBackward(int batch, const ZRows<const float>& z, const ZRows<float>& dz,
                                     bool has_bottom, int dim, const float* dout, size_t stride) {
  if constexpr (kChunks > 0) dim = W * kChunks;
  // As many rows as keep the accumulators in half of the 16 vector registers.
  constexpr int kQ = kChunks > 0 && kChunks < 8 ? 8 / kChunks : 1;
  const int n = z.n();
  std::vector<const float*> rows(n);
  std::vector<float*> drows(n);
  for (int r = 0; r < batch; ++r) {
    z.Get(r, rows.data());
    dz.Get(r, drows.data());
    const float* g = dout + r * stride;
    const float* passthrough = has_bottom ? g : nullptr;
    const float* pairs = g + (has_bottom ? dim : 0);
    if constexpr (kChunks > 0) {
      int i = 0;
      for (; i + kQ <= n; i += kQ) {
        DotBackwardRows<W, kChunks, kQ>(i, n, rows.data(), pairs, passthrough, drows.data());
      }
      for (; i < n; ++i) {
        DotBackwardRows<W, kChunks, 1>(i, n, rows.data(), pairs, passthrough, drows.data());
      }
    } else {
      for (int i = 0; i < n; ++i) {
        float* dzi = drows[i];
        for (int k = 0; k < dim; ++k) dzi[k] = has_bottom && i == 0 ? g[k] : 0.0f;
        for (int j = 0; j < n; ++j) {
          if (j == i) continue;
          const float sij = pairs[i > j ? Pair(i, j) : Pair(j, i)];
          for (int k = 0; k < dim; ++k) dzi[k] += sij * rows[j][k];
        }
      }
    }
  }
}

// Runs Kernel<W, kChunks> with dim = W * kChunks for the dims worth a specialization.
template <int W, template <int, int> class Kernel, typename... Args>
EMBER_ALWAYS_INLINE void ForDim(int dim, Args... args) {
  switch (dim) {
    case 8:
      return Kernel<W, 8 / W>::Run(args...);
    case 16:
      return Kernel<W, 16 / W>::Run(args...);
    case 32:
      return Kernel<W, 32 / W>::Run(args...);
    default:
      return Kernel<W, 0>::Run(args...);
  }
}
template <int W, int kChunks>
struct DotForwardKernel {
  EMBER_ALWAYS_INLINE static void Run(int batch, const ZRows<const float>* z, int dim, float* out,
                                      size_t stride) {
    DotForward<W, kChunks>(batch, *z, dim, out, stride);
  }
};
template <int W, int kChunks>
struct DotBackwardKernel {
  EMBER_ALWAYS_INLINE static void Run(int batch, const ZRows<const float>* z,
                                      const ZRows<float>* dz, bool has_bottom, int dim,
                                      const float* dout, size_t stride) {
    DotBackward<W, kChunks>(batch, *z, *dz, has_bottom, dim, dout, stride);
  }
};

// Copies rows of `width` floats: from src (stride src_stride) to dst (stride dst_stride).
void CopyRows(int batch, int width, const float* src, size_t src_stride, float* dst,
              size_t dst_stride) {
  if (width == 0) return;
  for (int r = 0; r < batch; ++r) {
    std::memcpy(dst + r * dst_stride, src + r * src_stride, sizeof(float) * width);
  }
}

}  // namespace

void SetBlasSingleThreaded() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

// OpenBLAS's beta = 0 pass that clears C is slow (as slow as a small product), so C
// is filled here (with the bias, or zeros) and sgemm runs with beta = 1, which skips
// that pass. The bits are the same: C = b + (x W^T) either way.
void LinearForward(int batch, int in, int out, const float* x, const float* w, const float* b,
                   bool relu, float* y) {
  if (out == 1) {
    // A matrix-vector product: sgemm's packing costs more than the product.
    Run([&]<int W>() __attribute__((always_inline)) {
      for (int r = 0; r < batch; ++r) {
        const float v = Dot<W>(x + static_cast<size_t>(r) * in, w, in) + b[0];
        y[r] = relu ? std::max(v, 0.0f) : v;
      }
    });
    return;
  }
  Run([&]<int W>() __attribute__((always_inline)) {
    for (int r = 0; r < batch; ++r) {
      float* row = y + static_cast<size_t>(r) * out;
      for (int o = 0; o < out; ++o) row[o] = b[o];
    }
  });
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, out, in, 1.0f, x, in, w, in, 1.0f, y,
              out);
  if (relu) {
    const size_t n = static_cast<size_t>(batch) * out;
    Run([&]<int W>() __attribute__((always_inline)) {
      for (size_t i = 0; i < n; ++i) y[i] = std::max(y[i], 0.0f);
    });
  }
}

void LinearBackward(int batch, int in, int out, const float* x, const float* w, const float* dy,
                    float* dw, float* db, float* dx) {
  // db = column sums of dy.
  Run([&]<int W>() __attribute__((always_inline)) {
    std::fill(db, db + out, 0.0f);
    for (int r = 0; r < batch; ++r) {
      const float* row = dy + static_cast<size_t>(r) * out;
      for (int o = 0; o < out; ++o) db[o] += row[o];
    }
  });
  if (out == 1) {
    Run([&]<int W>() __attribute__((always_inline)) {
      std::fill(dw, dw + in, 0.0f);
      for (int r = 0; r < batch; ++r) {
        const float* row = x + static_cast<size_t>(r) * in;
        const float g = dy[r];
        for (int k = 0; k < in; ++k) dw[k] += g * row[k];
      }
      if (dx != nullptr) {
        for (int r = 0; r < batch; ++r) {
          float* row = dx + static_cast<size_t>(r) * in;
          for (int k = 0; k < in; ++k) row[k] = dy[r] * w[k];
        }
      }
    });
    return;
  }
  std::fill(dw, dw + static_cast<size_t>(out) * in, 0.0f);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, batch, 1.0f, dy, out, x, in, 1.0f,
              dw, in);
  if (dx != nullptr) {
    std::fill(dx, dx + static_cast<size_t>(batch) * in, 0.0f);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, in, out, 1.0f, dy, out, w, in,
                1.0f, dx, in);
  }
}

void ReluBackward(size_t n, const float* y, float* dy) {
  Run([&]<int W>() __attribute__((always_inline)) {
    for (size_t i = 0; i < n; ++i) dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
  });
}

int DotOutputWidth(bool has_bottom, int num_features, int dim) {
  const int n = num_features + (has_bottom ? 1 : 0);
  return (has_bottom ? dim : 0) + n * (n - 1) / 2;
}

void DotInteractionForward(int batch, int num_features, int dim, const float* bottom,
                           const float* pooled, float* out) {
  const bool has_bottom = bottom != nullptr;
  const size_t width = DotOutputWidth(has_bottom, num_features, dim);
  if (has_bottom) CopyRows(batch, dim, bottom, dim, out, width);
  const ZRows<const float> z(num_features, dim, bottom, pooled);
  float* pairs = out + (has_bottom ? dim : 0);
  Run([&]<int W>() __attribute__((always_inline)) {
    ForDim<W, DotForwardKernel>(dim, batch, &z, dim, pairs, width);
  });
}

void DotInteractionBackward(int batch, int num_features, int dim, const float* bottom,
                            const float* pooled, const float* dout, float* d_bottom,
                            float* d_pooled) {
  const bool has_bottom = bottom != nullptr;
  const size_t width = DotOutputWidth(has_bottom, num_features, dim);
  const ZRows<const float> z(num_features, dim, bottom, pooled);
  const ZRows<float> dz(num_features, dim, d_bottom, d_pooled);
  Run([&]<int W>() __attribute__((always_inline)) {
    ForDim<W, DotBackwardKernel>(dim, batch, &z, &dz, has_bottom, dim, dout, width);
  });
}

void ConcatInteractionForward(int batch, int bottom_width, int pooled_width, const float* bottom,
                              const float* pooled, float* out) {
  const size_t width = static_cast<size_t>(bottom_width) + pooled_width;
  CopyRows(batch, bottom_width, bottom, bottom_width, out, width);
  CopyRows(batch, pooled_width, pooled, pooled_width, out + bottom_width, width);
}

void ConcatInteractionBackward(int batch, int bottom_width, int pooled_width, const float* dout,
                               float* d_bottom, float* d_pooled) {
  const size_t width = static_cast<size_t>(bottom_width) + pooled_width;
  if (d_bottom != nullptr) CopyRows(batch, bottom_width, dout, width, d_bottom, bottom_width);
  CopyRows(batch, pooled_width, dout + bottom_width, width, d_pooled, pooled_width);
}

void CrossForward(size_t n, const float* x0, const float* u, const float* x, float* x_next) {
  Run([&]<int W>() __attribute__((always_inline)) {
    for (size_t i = 0; i < n; ++i) x_next[i] = x0[i] * u[i] + x[i];
  });
}

void CrossBackward(size_t n, const float* x0, const float* u, const float* dx_next, float* du,
                   float* dx0) {
  Run([&]<int W>() __attribute__((always_inline)) {
    for (size_t i = 0; i < n; ++i) {
      du[i] = dx_next[i] * x0[i];
      dx0[i] += dx_next[i] * u[i];
    }
  });
}

void AddTo(size_t n, const float* x, float* y) {
  Run([&]<int W>() __attribute__((always_inline)) {
    for (size_t i = 0; i < n; ++i) y[i] += x[i];
  });
}

}  // namespace ember::model::dense_internal
