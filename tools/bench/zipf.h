// Copyright 2026 The Ember Authors.
//
// ZipfSampler: Zipf(s) ranks over [0, n) for benchmark key streams.
//
// Rank r (0-based) is drawn with probability proportional to 1 / (r + 1)^s, in O(1)
// expected time and O(1) memory for any n, by rejection-inversion (W. Hörmann and
// G. Derflinger, "Rejection-inversion to generate variates from monotone discrete
// distributions", ACM TOMACS 6(3), 1996; the formulation of Apache Commons RNG's
// RejectionInversionZipfSampler). Deterministic for a given seed.
//
// Rank 0 is the hottest. IdOfRank() scatters ranks over the 64-bit ID space with a
// bijection, so hot IDs are neither small nor sequential (and land in unrelated slots
// and stripes), as real feature IDs do.
//
// Example:
//   EMBER_ASSIGN_OR_RETURN(ZipfSampler zipf, ZipfSampler::Create(10'000'000, 1.1, seed));
//   uint64_t id = IdOfRank(zipf.Next());
//
// Thread-compatible: one sampler per thread.

#ifndef EMBER_TOOLS_BENCH_ZIPF_H_
#define EMBER_TOOLS_BENCH_ZIPF_H_

#include <cstdint>
#include <random>

#include "absl/status/statusor.h"
#include "common/hash.h"

namespace ember::bench {

// The benchmark ID of rank (or row index) `rank`: a bijection on uint64.
inline uint64_t IdOfRank(uint64_t rank) { return Mix64(rank + 0x9e3779b97f4a7c15ULL); }

class ZipfSampler {
 public:
  // Errors: INVALID_ARGUMENT unless n >= 1 and s is finite and in (0, 20].
  static absl::StatusOr<ZipfSampler> Create(uint64_t n, double s, uint64_t seed);

  // The next rank in [0, n).
  uint64_t Next();

  uint64_t n() const { return n_; }
  double s() const { return s_; }

 private:
  ZipfSampler(uint64_t n, double s, uint64_t seed);

  double H(double x) const;          // x^-s
  double HIntegral(double x) const;  // integral of H, shifted so it is exact at 1
  double HIntegralInverse(double x) const;

  uint64_t n_;
  double s_;
  double h_integral_x1_;
  double h_integral_n_;
  double squeeze_;
  std::mt19937_64 rng_;
};

}  // namespace ember::bench

#endif  // EMBER_TOOLS_BENCH_ZIPF_H_
