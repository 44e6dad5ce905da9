// Copyright 2026 The Ember Authors.
//
// Request decoding shared by the PsService handlers (ps_service*.cc): value encodings
// and packed ids. Internal to server/ps.

#ifndef EMBER_SERVER_PS_REQUEST_CODEC_H_
#define EMBER_SERVER_PS_REQUEST_CODEC_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "ember/v1/ps.pb.h"

namespace ember {

// Bytes per element of `encoding`, or INVALID_ARGUMENT for an unknown one.
inline absl::StatusOr<size_t> ElementBytes(int encoding) {
  switch (encoding) {
    case v1::VALUE_ENCODING_FLOAT32:
      return 4;
    case v1::VALUE_ENCODING_FLOAT16:
      return 2;
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown value encoding ", encoding));
  }
}

// Unpacks little-endian uint64 ids. INVALID_ARGUMENT for an empty or ragged buffer or
// more than `max_keys` ids (checked before anything is allocated for the batch).
inline absl::StatusOr<std::vector<uint64_t>> DecodeIds(const std::string& bytes,
                                                       uint32_t max_keys) {
  if (bytes.empty()) return absl::InvalidArgumentError("empty ids");
  if (bytes.size() % sizeof(uint64_t) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ids length ", bytes.size(), " is not a multiple of 8"));
  }
  if (bytes.size() / sizeof(uint64_t) > max_keys) {
    return absl::InvalidArgumentError(absl::StrCat("batch of ", bytes.size() / sizeof(uint64_t),
                                                   " keys exceeds the limit of ", max_keys,
                                                   " (--max_batch_keys)"));
  }
  std::vector<uint64_t> ids(bytes.size() / sizeof(uint64_t));
  std::memcpy(ids.data(), bytes.data(), bytes.size());  // little-endian host (float16.cc)
  return ids;
}

// What identifies a push's payload for deduplication (PushDedup): its table, ids,
// gradient bytes, encoding and step; not the routing (epoch), which a retry may change,
// nor (worker_id, sequence, attempt), which name it. Stable within one process only.
inline uint64_t PushDigest(const v1::PushRequest& request) {
  return absl::HashOf(request.table(), request.ids(), request.grads(),
                      static_cast<int>(request.encoding()), request.step());
}

}  // namespace ember

#endif  // EMBER_SERVER_PS_REQUEST_CODEC_H_
