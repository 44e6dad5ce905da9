// Copyright 2026 The Ember Authors.

#include "server/store/count_min_sketch.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/hash.h"

namespace ember {

CountMinSketch::CountMinSketch(uint32_t width, uint32_t depth)
    : width_(width), depth_(depth), counters_(new std::atomic<uint32_t>[size_t{width} * depth]) {
  for (size_t i = 0; i < size_t{width_} * depth_; ++i) {
    counters_[i].store(0, std::memory_order_relaxed);
  }
}

size_t CountMinSketch::Index(uint32_t row, uint64_t id) const {
  const uint64_t h = Mix64Alt(id + 0x9e3779b97f4a7c15ULL * (row + 1));
  return size_t{row} * width_ + (h & (width_ - 1));
}

uint32_t CountMinSketch::Add(uint64_t id, uint32_t n) {
  uint32_t estimate = std::numeric_limits<uint32_t>::max();
  for (uint32_t r = 0; r < depth_; ++r) {
    std::atomic<uint32_t>& c = counters_[Index(r, id)];
    uint32_t old = c.load(std::memory_order_relaxed);
    uint32_t next;
    do {
      next = old > std::numeric_limits<uint32_t>::max() - n ? std::numeric_limits<uint32_t>::max()
                                                            : old + n;
    } while (!c.compare_exchange_weak(old, next, std::memory_order_relaxed));
    estimate = std::min(estimate, next);
  }
  return estimate;
}

uint32_t CountMinSketch::Estimate(uint64_t id) const {
  uint32_t estimate = std::numeric_limits<uint32_t>::max();
  for (uint32_t r = 0; r < depth_; ++r) {
    estimate = std::min(estimate, counters_[Index(r, id)].load(std::memory_order_relaxed));
  }
  return estimate;
}

std::string CountMinSketch::Serialize() const {
  std::string out(8 + bytes(), '\0');
  std::memcpy(out.data(), &width_, 4);
  std::memcpy(out.data() + 4, &depth_, 4);
  for (size_t i = 0; i < size_t{width_} * depth_; ++i) {
    const uint32_t v = counters_[i].load(std::memory_order_relaxed);
    std::memcpy(out.data() + 8 + 4 * i, &v, 4);
  }
  return out;
}

absl::Status CountMinSketch::Restore(absl::string_view data) {
  uint32_t width = 0, depth = 0;
  if (data.size() >= 8) {
    std::memcpy(&width, data.data(), 4);
    std::memcpy(&depth, data.data() + 4, 4);
  }
  if (data.size() != 8 + bytes() || width != width_ || depth != depth_) {
    return absl::InvalidArgumentError(absl::StrCat("sketch data of ", data.size(),
                                                   " bytes does not match a ", width_, "x", depth_,
                                                   " sketch"));
  }
  for (size_t i = 0; i < size_t{width_} * depth_; ++i) {
    uint32_t v;
    std::memcpy(&v, data.data() + 8 + 4 * i, 4);
    counters_[i].store(v, std::memory_order_relaxed);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> CountMinSketch::MergeSerialized(
    absl::Span<const std::string> sketches) {
  if (sketches.empty()) return absl::InvalidArgumentError("no sketches to merge");
  // Layout (Serialize): width u32 | depth u32 | width * depth u32 counters.
  auto shape = [](const std::string& data, uint32_t* width, uint32_t* depth) {
    if (data.size() < 8) return false;
    std::memcpy(width, data.data(), 4);
    std::memcpy(depth, data.data() + 4, 4);
    return data.size() == 8 + uint64_t{*width} * *depth * sizeof(uint32_t);
  };
  uint32_t width = 0, depth = 0;
  if (!shape(sketches[0], &width, &depth)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sketch 0 of ", sketches[0].size(), " bytes is malformed"));
  }
  std::string out = sketches[0];
  for (size_t s = 1; s < sketches.size(); ++s) {
    uint32_t w = 0, d = 0;
    if (!shape(sketches[s], &w, &d) || w != width || d != depth) {
      return absl::InvalidArgumentError(absl::StrCat("sketch ", s, " of ", sketches[s].size(),
                                                     " bytes does not match a ", width, "x", depth,
                                                     " sketch"));
    }
    for (size_t i = 8; i < out.size(); i += 4) {
      uint32_t a, b;
      std::memcpy(&a, out.data() + i, 4);
      std::memcpy(&b, sketches[s].data() + i, 4);
      const uint32_t sum = a > std::numeric_limits<uint32_t>::max() - b
                               ? std::numeric_limits<uint32_t>::max()
                               : a + b;
      std::memcpy(out.data() + i, &sum, 4);
    }
  }
  return out;
}

}  // namespace ember
