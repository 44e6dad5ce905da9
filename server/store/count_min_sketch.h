// Copyright 2026 The Ember Authors.
//
// A count-min sketch over 64-bit IDs: the admission filter that decides when an ID
// has been seen often enough to get a stored row. Estimates never undercount; they
// overcount by at most e * total / width with probability 1 - exp(-depth).
//
// Thread-safe: counters are relaxed atomics (saturating at 2^32 - 1).

#ifndef EMBER_SERVER_STORE_COUNT_MIN_SKETCH_H_
#define EMBER_SERVER_STORE_COUNT_MIN_SKETCH_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ember {

class CountMinSketch {
 public:
  // REQUIRES: width a power of two >= 64, 1 <= depth <= 16.
  CountMinSketch(uint32_t width, uint32_t depth);

  // Adds `n` sightings of `id`; returns the estimate after adding.
  uint32_t Add(uint64_t id, uint32_t n);
  uint32_t Estimate(uint64_t id) const;

  uint32_t width() const { return width_; }
  uint32_t depth() const { return depth_; }
  size_t bytes() const { return size_t{width_} * depth_ * sizeof(uint32_t); }

  // Serialized counters (for persistence and checkpoints), and the inverse. Restore
  // returns INVALID_ARGUMENT (and changes nothing) if `data` has another shape.
  std::string Serialize() const;
  absl::Status Restore(absl::string_view data);

  // The serialized sketch whose counters are the element-wise (saturating) sums of
  // `sketches`' counters: the sketch of the union of their ID streams, so it too never
  // undercounts. Errors: INVALID_ARGUMENT for an empty span, malformed data or sketches
  // of different shapes.
  static absl::StatusOr<std::string> MergeSerialized(absl::Span<const std::string> sketches);

 private:
  size_t Index(uint32_t row, uint64_t id) const;

  const uint32_t width_;
  const uint32_t depth_;
  std::unique_ptr<std::atomic<uint32_t>[]> counters_;
};

}  // namespace ember

#endif  // EMBER_SERVER_STORE_COUNT_MIN_SKETCH_H_
