// Copyright 2026 The Ember Authors.

#include "server/ps/heavy_hitters.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/random/random.h"

namespace ember {
namespace {

// Weights grow as e^x with x = lambda * (now - landmark); beyond this x the counters
// are rescaled (e^40 ~ 2e17 keeps ~1e290 of headroom for counts in a double).
constexpr double kMaxExponent = 40.0;
// Exponents are clamped to this when reading, so a `now` far from the landmark in
// either direction gives 0 or a huge finite factor, never inf/NaN.
constexpr double kClampExponent = 600.0;

// Sampling positions: a per-thread generator (no lock, no seeding cost per call).
absl::InsecureBitGen& ThreadGen() {
  thread_local absl::InsecureBitGen gen;
  return gen;
}

}  // namespace

HeavyHitters::HeavyHitters(const HeavyHittersOptions& options)
    : options_(options), lambda_(std::log(2.0) / absl::ToDoubleSeconds(options.half_life)) {
  counters_.reserve(options_.capacity);
  heap_.reserve(options_.capacity);
  pos_.reserve(options_.capacity);
  index_.reserve(options_.capacity);
}

double HeavyHitters::WeightAt(absl::Time now) {
  if (!started_) {
    landmark_ = now;
    started_ = true;
  }
  double x = lambda_ * absl::ToDoubleSeconds(now - landmark_);
  if (x > kMaxExponent) {
    // Renormalise: same estimates, landmark moved to `now`.
    const double factor = std::exp(-x);
    for (Counter& c : counters_) {
      c.count *= factor;
      c.error *= factor;
    }
    total_ *= factor;
    landmark_ = now;
    x = 0;
  }
  return std::exp(std::max(x, -kClampExponent));
}

double HeavyHitters::DecayAt(absl::Time now) const {
  if (!started_) return 0;
  const double x = lambda_ * absl::ToDoubleSeconds(now - landmark_);
  return std::exp(-std::clamp(x, -kClampExponent, kClampExponent));
}

void HeavyHitters::Record(absl::Span<const uint64_t> ids, absl::Time now) {
  if (ids.empty()) return;
  const uint32_t s = options_.sample_every;
  if (s <= 1 || options_.capacity == 0) {
    absl::MutexLock lock(&mu_);
    const double w = WeightAt(now);
    total_ += w * static_cast<double>(ids.size());
    if (options_.capacity == 0) return;
    for (uint64_t id : ids) Add(id, w);
    return;
  }
  // Geometric skips: the gap before the next sampled position is Geometric(1/s), so
  // each position is sampled independently with probability 1/s.
  const double log_keep = std::log1p(-1.0 / static_cast<double>(s));
  absl::InsecureBitGen& gen = ThreadGen();
  auto skip = [&]() {
    const double u = absl::Uniform(absl::IntervalOpenOpen, gen, 0.0, 1.0);
    return static_cast<size_t>(std::floor(std::log(u) / log_keep));
  };
  // Sampled ids go to a small stack buffer first, so the lock is held only to add them.
  constexpr size_t kChunk = 256;
  uint64_t sampled[kChunk];
  size_t pos = skip();
  bool first = true;
  while (first || pos < ids.size()) {
    size_t n = 0;
    for (; pos < ids.size() && n < kChunk; pos += 1 + skip()) sampled[n++] = ids[pos];
    absl::MutexLock lock(&mu_);
    const double w = WeightAt(now);
    if (first) total_ += w * static_cast<double>(ids.size());
    first = false;
    for (size_t i = 0; i < n; ++i) Add(sampled[i], w * static_cast<double>(s));
  }
}

void HeavyHitters::Add(uint64_t id, double weight) {
  auto it = index_.find(id);
  if (it != index_.end()) {
    const uint32_t slot = it->second;
    counters_[slot].count += weight;
    SiftDown(pos_[slot]);
    return;
  }
  if (counters_.size() < options_.capacity) {
    const auto slot = static_cast<uint32_t>(counters_.size());
    counters_.push_back(Counter{id, weight, 0});
    pos_.push_back(static_cast<uint32_t>(heap_.size()));
    heap_.push_back(slot);
    index_.emplace(id, slot);
    SiftUp(heap_.size() - 1);
    return;
  }
  // Replace the minimum: the newcomer inherits its count as its possible overcount.
  const uint32_t slot = heap_[0];
  Counter& counter = counters_[slot];
  index_.erase(counter.id);
  const double min = counter.count;
  counter = Counter{id, min + weight, min};
  index_.emplace(id, slot);
  SiftDown(0);
}

void HeavyHitters::SiftUp(size_t pos) {
  const uint32_t moving = heap_[pos];
  const double count = counters_[moving].count;
  while (pos > 0) {
    const size_t parent = (pos - 1) / 2;
    if (CountAt(parent) <= count) break;
    Place(pos, heap_[parent]);
    pos = parent;
  }
  Place(pos, moving);
}

void HeavyHitters::SiftDown(size_t pos) {
  const uint32_t moving = heap_[pos];
  const double count = counters_[moving].count;
  const size_t n = heap_.size();
  while (true) {
    size_t child = 2 * pos + 1;
    if (child >= n) break;
    if (child + 1 < n && CountAt(child + 1) < CountAt(child)) ++child;
    if (CountAt(child) >= count) break;
    Place(pos, heap_[child]);
    pos = child;
  }
  Place(pos, moving);
}

std::vector<v1::HotKey> HeavyHitters::Top(size_t n, absl::Time now) const {
  std::vector<Counter> counters;
  double decay = 0;
  {
    absl::MutexLock lock(&mu_);
    counters = counters_;
    decay = DecayAt(now);
  }
  n = std::min(n, counters.size());
  std::partial_sort(counters.begin(), counters.begin() + static_cast<std::ptrdiff_t>(n),
                    counters.end(), [](const Counter& a, const Counter& b) {
                      return a.count != b.count ? a.count > b.count : a.id < b.id;
                    });
  std::vector<v1::HotKey> out;
  out.reserve(n);
  const double scale = decay * lambda_;
  for (size_t i = 0; i < n; ++i) {
    v1::HotKey& key = out.emplace_back();
    key.set_id(counters[i].id);
    key.set_rate(counters[i].count * scale);
    key.set_error(counters[i].error * scale);
  }
  return out;
}

double HeavyHitters::TotalRate(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  return total_ * DecayAt(now) * lambda_;
}

size_t HeavyHitters::size() const {
  absl::MutexLock lock(&mu_);
  return counters_.size();
}

}  // namespace ember
