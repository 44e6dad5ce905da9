// Copyright 2026 The Ember Authors.

#include "tools/datagen/random.h"

#include <algorithm>
#include <utility>

namespace ember::datagen {

ZipfTable::ZipfTable(uint64_t n, double s) : cdf_(n) {
  double total = 0;
  for (uint64_t r = 0; r < n; ++r) {
    total += std::pow(static_cast<double>(r + 1), -s);
    cdf_[r] = total;
  }
  for (double& c : cdf_) c /= total;
  cdf_.back() = 1.0;
}

uint64_t ZipfTable::Sample(Rng& rng) const {
  const double u = rng.Uniform();
  // The first rank whose cumulative probability exceeds u.
  return static_cast<uint64_t>(std::upper_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
}

double ZipfTable::Probability(uint64_t r) const { return r == 0 ? cdf_[0] : cdf_[r] - cdf_[r - 1]; }

std::vector<uint64_t> ShuffledIds(uint64_t n, Rng& rng) {
  std::vector<uint64_t> ids(n);
  for (uint64_t i = 0; i < n; ++i) ids[i] = i + 1;
  for (uint64_t i = n; i > 1; --i) std::swap(ids[i - 1], ids[rng.Below(i)]);
  return ids;
}

}  // namespace ember::datagen
