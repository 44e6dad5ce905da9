// Copyright 2026 The Ember Authors.
//
// RowBlock codec: whole stored rows on the wire between shards during slot migration
// (ps.proto RowBlock): per row a little-endian uint64 id, a little-endian uint32
// length n and n bytes of the stored row; n = 0 is a tombstone.
//
//   v1::RowBlock block;
//   AppendRows(page.rows, &block);
//   EMBER_ASSIGN_OR_RETURN(std::vector<EncodedRow> rows, DecodeRows(block));

#ifndef EMBER_SERVER_SHARED_ROW_BLOCK_H_
#define EMBER_SERVER_SHARED_ROW_BLOCK_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ember/v1/ps.pb.h"
#include "server/store/embedding_store.h"

namespace ember {

// Appends `rows` to block->rows() and adds them to block->count().
void AppendRows(absl::Span<const EncodedRow> rows, v1::RowBlock* block);

// The rows of `block`. INVALID_ARGUMENT for a truncated block or a count that does not
// match.
absl::StatusOr<std::vector<EncodedRow>> DecodeRows(const v1::RowBlock& block);

}  // namespace ember

#endif  // EMBER_SERVER_SHARED_ROW_BLOCK_H_
