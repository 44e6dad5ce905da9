// Copyright 2026 The Ember Authors.

#include "common/pull_wire.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace ember {
namespace {

// PullResponse.values: field 1, wire type 2 (length-delimited).
constexpr uint8_t kValuesTag = (1 << 3) | 2;
constexpr size_t kMaxSplitRow = 64 * 1024;

// A read position in a sequence of slices.
class SliceCursor {
 public:
  explicit SliceCursor(const std::vector<grpc::Slice>& slices) : slices_(slices) {}

  bool Byte(uint8_t* out) {
    Skip();
    if (index_ == slices_.size()) return false;
    *out = slices_[index_].begin()[offset_++];
    return true;
  }

  // The next n bytes: a view into a slice, or assembled in `scratch` (n bytes) when
  // they span slices. False past the end.
  bool Take(size_t n, char* scratch, absl::string_view* out) {
    Skip();
    if (index_ == slices_.size()) return n == 0;
    const grpc::Slice& s = slices_[index_];
    if (s.size() - offset_ >= n) {
      *out = absl::string_view(reinterpret_cast<const char*>(s.begin()) + offset_, n);
      offset_ += n;
      return true;
    }
    size_t got = 0;
    while (got < n) {
      Skip();
      if (index_ == slices_.size()) return false;
      const grpc::Slice& part = slices_[index_];
      const size_t take = std::min(n - got, part.size() - offset_);
      std::memcpy(scratch + got, part.begin() + offset_, take);
      got += take;
      offset_ += take;
    }
    *out = absl::string_view(scratch, n);
    return true;
  }

 private:
  void Skip() {
    while (index_ < slices_.size() && offset_ == slices_[index_].size()) {
      ++index_;
      offset_ = 0;
    }
  }

  const std::vector<grpc::Slice>& slices_;
  size_t index_ = 0;
  size_t offset_ = 0;
};

}  // namespace

PulledValues::PulledValues(size_t bytes)
    : bytes_(bytes),
      values_(bytes),
      data_(reinterpret_cast<char*>(const_cast<uint8_t*>(values_.begin()))) {}

grpc::ByteBuffer PulledValues::Release() {
  char header[1 + 10];
  size_t n = 0;
  header[n++] = static_cast<char>(kValuesTag);
  uint64_t length = bytes_;
  do {
    uint8_t b = length & 0x7f;
    length >>= 7;
    if (length != 0) b |= 0x80;
    header[n++] = static_cast<char>(b);
  } while (length != 0);
  grpc::Slice slices[2] = {grpc::Slice(header, n), values_};
  return grpc::ByteBuffer(slices, 2);
}

bool ForEachPulledRow(const grpc::ByteBuffer& buffer, size_t row_bytes, size_t rows,
                      absl::FunctionRef<void(size_t k, absl::string_view bytes)> row) {
  if (row_bytes == 0 || row_bytes > kMaxSplitRow) return false;
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return false;
  SliceCursor cursor(slices);
  uint8_t b = 0;
  if (!cursor.Byte(&b) || b != kValuesTag) return false;
  uint64_t length = 0;
  size_t header = 1;
  for (int shift = 0;; shift += 7) {
    if (shift > 63 || !cursor.Byte(&b)) return false;
    ++header;
    length |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) break;
  }
  if (length != uint64_t{rows} * row_bytes || header + length != buffer.Length()) return false;
  std::vector<char> scratch(row_bytes);
  for (size_t k = 0; k < rows; ++k) {
    absl::string_view bytes;
    if (!cursor.Take(row_bytes, scratch.data(), &bytes))
      return false;  // not reached: length checked
    row(k, bytes);
  }
  return true;
}

}  // namespace ember
