// Copyright 2026 The Ember Authors.
//
// The pull data path's wire bytes, written and read without protobuf copies: an
// owner's PullResponse (ps.proto) is the single field `values` (field 1, bytes), so
// ember-ps writes its tag and length by hand in one small slice and the rows straight
// into a second, uninitialized slice that gRPC sends as it is (no zero fill, no
// serialization copy); PsClient copies each row from the received slices straight into
// the caller's buffer (no parse into a string, no staging vector). Both sides speak
// plain protobuf on the wire: any other shape of response (a replica read's
// `replica_missing`, another encoder) is parsed as a PullResponse.
//
//   PulledValues values(bytes);            // server
//   store->Pull(..., values.data() ...);   // fill all `bytes`
//   *response = values.Release();
//
//   bool fast = ForEachPulledRow(buffer, row_bytes, rows, [&](size_t k, absl::string_view row) {
//     std::memcpy(&out[index[k] * dim], row.data(), row.size());
//   });                                    // client; false: parse it as a PullResponse
//
// Thread-compatible; the functions are pure.

#ifndef EMBER_COMMON_PULL_WIRE_H_
#define EMBER_COMMON_PULL_WIRE_H_

#include <cstddef>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

namespace ember {

// A PullResponse of `bytes` value bytes under construction: data() is uninitialized
// memory (4-byte aligned) that the caller fills completely before Release().
class PulledValues {
 public:
  explicit PulledValues(size_t bytes);
  PulledValues(const PulledValues&) = delete;
  PulledValues& operator=(const PulledValues&) = delete;

  char* data() { return data_; }
  size_t size() const { return bytes_; }
  // The response's wire bytes: two slices, the field header and the values.
  grpc::ByteBuffer Release();

 private:
  size_t bytes_;
  grpc::Slice values_;
  char* data_;
};

// Calls `row(k, bytes)` for k = 0..rows-1 with the k-th `row_bytes` bytes of the
// `values` of the PullResponse in `buffer`, when the buffer is exactly that field
// holding rows * row_bytes bytes (what PulledValues writes). Returns false, having
// called nothing, for any other content (the caller parses it as a PullResponse,
// which also explains a wrong length). A row split across slices is assembled in a
// local buffer first (rows of up to 64 KiB; longer ones return false).
bool ForEachPulledRow(const grpc::ByteBuffer& buffer, size_t row_bytes, size_t rows,
                      absl::FunctionRef<void(size_t k, absl::string_view bytes)> row);

}  // namespace ember

#endif  // EMBER_COMMON_PULL_WIRE_H_
