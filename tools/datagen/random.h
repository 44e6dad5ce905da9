// Copyright 2026 The Ember Authors.
//
// Randomness for ember-datagen that is identical on every platform and library
// version: xoshiro256** seeded through splitmix64, uniform and Gaussian variates built
// from it (no std::*_distribution, whose output differs between standard libraries),
// and a Zipf sampler over a precomputed CDF.
//
//   Rng rng = Rng::ForStream(seed, kTrainStream, file_index);
//   double u = rng.Uniform();          // [0, 1)
//   ZipfTable zipf(100000, 1.1);
//   uint32_t rank = zipf.Sample(rng);  // 0 is the most popular
//
// Thread-compatible: one Rng per thread; a ZipfTable is immutable once built.

#ifndef EMBER_TOOLS_DATAGEN_RANDOM_H_
#define EMBER_TOOLS_DATAGEN_RANDOM_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "common/hash.h"

namespace ember::datagen {

// xoshiro256** (Blackman and Vigna), seeded by splitmix64.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& word : s_) {
      seed += 0x9e3779b97f4a7c15ULL;
      word = Mix64(seed);
    }
  }

  // An independent stream for (seed, stream, index), e.g. one per output file or one
  // per entity: the same arguments always give the same sequence.
  static Rng ForStream(uint64_t seed, uint64_t stream, uint64_t index) {
    return Rng(Mix64(Mix64(seed ^ Mix64(stream + 0x632be59bd9b4e019ULL)) + index));
  }

  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  // Uniform in (0, 1]: safe under log().
  double UniformPositive() { return 1.0 - Uniform(); }

  // Uniform integer in [0, n). REQUIRES: n >= 1. (Multiply-shift; the bias is below
  // 2^-32 for the sizes datagen uses.)
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }

  // Standard normal (Box-Muller, one variate per call).
  double Gaussian() {
    const double r = std::sqrt(-2.0 * std::log(UniformPositive()));
    return r * std::cos(2.0 * 3.14159265358979323846 * Uniform());
  }

  bool Bernoulli(double p) { return Uniform() < p; }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

// Zipf(s) over ranks [0, n): P(rank r) proportional to 1 / (r + 1)^s. Samples by binary
// search of the cumulative table (n doubles).
class ZipfTable {
 public:
  // REQUIRES: n >= 1, s >= 0 (s = 0 is uniform).
  ZipfTable(uint64_t n, double s);

  uint64_t Sample(Rng& rng) const;

  // Probability of rank r.
  double Probability(uint64_t r) const;

  uint64_t size() const { return cdf_.size(); }

 private:
  std::vector<double> cdf_;  // cdf_[r] = P(rank <= r); cdf_.back() == 1
};

// A deterministic shuffle of 1..n: ShuffledIds(n, rng)[rank] is the ID of the entity
// at popularity rank `rank`, so popular IDs are neither small nor contiguous.
std::vector<uint64_t> ShuffledIds(uint64_t n, Rng& rng);

}  // namespace ember::datagen

#endif  // EMBER_TOOLS_DATAGEN_RANDOM_H_
