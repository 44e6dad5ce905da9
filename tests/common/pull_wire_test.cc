// Copyright 2026 The Ember Authors.

#include "common/pull_wire.h"

#include <cstring>
#include <string>
#include <vector>

#include "ember/v1/ps.grpc.pb.h"
#include "gtest/gtest.h"

namespace ember {
namespace {

// `values` as PulledValues writes them.
grpc::ByteBuffer Written(const std::string& values) {
  PulledValues out(values.size());
  std::memcpy(out.data(), values.data(), values.size());
  return out.Release();
}

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices)
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// The same bytes cut into slices of `piece` bytes (as a receiver's frames may be).
grpc::ByteBuffer Sliced(const std::string& bytes, size_t piece) {
  std::vector<grpc::Slice> slices;
  for (size_t off = 0; off < bytes.size(); off += piece) {
    slices.emplace_back(bytes.data() + off, std::min(piece, bytes.size() - off));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 7 + 3);
  return s;
}

std::vector<std::string> Rows(const grpc::ByteBuffer& buffer, size_t row_bytes, size_t rows,
                              bool* fast) {
  std::vector<std::string> out(rows);
  *fast = ForEachPulledRow(buffer, row_bytes, rows,
                           [&](size_t k, absl::string_view bytes) { out[k] = std::string(bytes); });
  return out;
}

TEST(PullWireTest, WrittenBytesAreAPullResponseThatProtobufParses) {
  for (size_t n : {size_t{4}, size_t{200}, size_t{256000}}) {
    const std::string values = Pattern(n);
    v1::PullResponse parsed;
    ASSERT_TRUE(parsed.ParseFromString(Flatten(Written(values)))) << n;
    EXPECT_EQ(parsed.values(), values) << n;
    EXPECT_TRUE(parsed.replica_missing().empty());
  }
}

TEST(PullWireTest, RowsComeBackInOrderWhateverTheSlicing) {
  const size_t row_bytes = 256, rows = 1000;
  const std::string values = Pattern(row_bytes * rows);
  const std::string wire = Flatten(Written(values));
  for (size_t piece : {size_t{1}, size_t{3}, size_t{255}, size_t{4096}, wire.size()}) {
    bool fast = false;
    const std::vector<std::string> got = Rows(Sliced(wire, piece), row_bytes, rows, &fast);
    ASSERT_TRUE(fast) << piece;
    for (size_t k = 0; k < rows; ++k) {
      ASSERT_EQ(got[k], values.substr(k * row_bytes, row_bytes))
          << "row " << k << " piece " << piece;
    }
  }
}

TEST(PullWireTest, AProtobufSerializedValuesOnlyResponseTakesTheFastPath) {
  v1::PullResponse response;
  response.set_values(Pattern(64 * 10));
  bool fast = false;
  const std::vector<std::string> got =
      Rows(Sliced(response.SerializeAsString(), 100), 64, 10, &fast);
  EXPECT_TRUE(fast);
  EXPECT_EQ(got[9], response.values().substr(9 * 64));
}

TEST(PullWireTest, AnyOtherShapeIsLeftToTheParser) {
  bool fast = true;
  // Wrong length for the rows asked.
  Rows(Written(Pattern(640)), 64, 11, &fast);
  EXPECT_FALSE(fast);
  fast = true;
  Rows(Written(Pattern(640)), 64, 9, &fast);
  EXPECT_FALSE(fast);
  // A replica read's answer (replica_missing after the values).
  v1::PullResponse replica;
  replica.set_values(Pattern(640));
  replica.add_replica_missing(3);
  fast = true;
  Rows(Sliced(replica.SerializeAsString(), 1000), 64, 10, &fast);
  EXPECT_FALSE(fast);
  // Empty, garbage, a truncated length.
  fast = true;
  Rows(grpc::ByteBuffer(), 64, 1, &fast);
  EXPECT_FALSE(fast);
  fast = true;
  Rows(Sliced("garbage", 3), 64, 1, &fast);
  EXPECT_FALSE(fast);
  fast = true;
  Rows(Sliced(std::string("\x0a\x80", 2), 1), 64, 1, &fast);
  EXPECT_FALSE(fast);
}

}  // namespace
}  // namespace ember
