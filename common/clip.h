// Copyright 2026 The Ember Authors.
//
// Client strings in error messages. A status message that echoes what a client sent
// (a table, job or key name, a path) must stay short: a 4 MB table name echoed whole
// makes a 4 MB grpc-message trailer, which a client with gRPC's default metadata limit
// receives as RESOURCE_EXHAUSTED instead of the real error. Every error message that
// quotes a client string quotes ClipForMessage(string).
//
//   return absl::NotFoundError(absl::StrCat("unknown table '", ClipForMessage(name), "'"));
//
// ToGrpcStatus (grpc_status.h) also clips whole messages to kMaxStatusMessageBytes, as
// a backstop for a site that quotes a client string unclipped.

#ifndef EMBER_COMMON_CLIP_H_
#define EMBER_COMMON_CLIP_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace ember {

// Bytes of a client string an error message quotes.
inline constexpr size_t kMaxQuotedBytes = 128;
// Bytes of a whole status message sent to a client.
inline constexpr size_t kMaxStatusMessageBytes = 2048;

// `text` itself when it has at most `max_bytes` bytes; otherwise its first bytes (cut at
// a UTF-8 character boundary, at most `max_bytes`) followed by "... (N bytes)", N being
// the full length.
std::string ClipForMessage(absl::string_view text, size_t max_bytes = kMaxQuotedBytes);

}  // namespace ember

#endif  // EMBER_COMMON_CLIP_H_
