// Copyright 2026 The Ember Authors.

#include "tools/bench/zipf.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace ember::bench {
namespace {

// log1p(x) / x, continuous at 0.
double Helper1(double x) {
  return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
}

// expm1(x) / x, continuous at 0.
double Helper2(double x) {
  return std::abs(x) > 1e-8 ? std::expm1(x) / x
                            : 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x));
}

}  // namespace

absl::StatusOr<ZipfSampler> ZipfSampler::Create(uint64_t n, double s, uint64_t seed) {
  if (n == 0) return absl::InvalidArgumentError("zipf: n must be >= 1");
  if (!std::isfinite(s) || s <= 0 || s > 20) {
    return absl::InvalidArgumentError(absl::StrFormat("zipf: exponent %g not in (0, 20]", s));
  }
  return ZipfSampler(n, s, seed);
}

ZipfSampler::ZipfSampler(uint64_t n, double s, uint64_t seed) : n_(n), s_(s), rng_(seed) {
  h_integral_x1_ = HIntegral(1.5) - 1.0;
  h_integral_n_ = HIntegral(static_cast<double>(n_) + 0.5);
  squeeze_ = 2.0 - HIntegralInverse(HIntegral(2.5) - H(2.0));
}

double ZipfSampler::H(double x) const { return std::exp(-s_ * std::log(x)); }

double ZipfSampler::HIntegral(double x) const {
  const double log_x = std::log(x);
  return Helper2((1.0 - s_) * log_x) * log_x;
}

double ZipfSampler::HIntegralInverse(double x) const {
  double t = x * (1.0 - s_);
  if (t < -1.0) t = -1.0;  // rounding guard: the exact value is >= -1
  return std::exp(Helper1(t) * x);
}

uint64_t ZipfSampler::Next() {
  // Draw u uniformly from (HIntegral(n + 0.5), HIntegral(1.5) - 1], invert to a real x
  // whose density dominates the Zipf mass function, round to k, and accept k unless it
  // falls in the thin region between the hat and the mass of k.
  for (;;) {
    const double uniform = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
    const double u = h_integral_n_ + uniform * (h_integral_x1_ - h_integral_n_);
    const double x = HIntegralInverse(u);
    double k = std::floor(x + 0.5);
    if (k < 1) {
      k = 1;
    } else if (k > static_cast<double>(n_)) {
      k = static_cast<double>(n_);
    }
    if (k - x <= squeeze_ || u >= HIntegral(k + 0.5) - H(k)) {
      return static_cast<uint64_t>(k) - 1;
    }
  }
}

}  // namespace ember::bench
