// Copyright 2026 The Ember Authors.
//
// EmbeddingTable::Checksum: the order-independent digest of a table's stored rows
// that lets tests and operators compare a model across shard counts, restores and
// serving followers (embedding_store.h, TableChecksum).

#include <cstring>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "server/store/internal/embedding_table.h"
#include "server/store/row_layout.h"

namespace ember {
namespace {

// A 64-bit hash of one row's model-relevant content: the id, the meta fields that
// do not depend on the shard (last_seen_step, count) and the floats (embedding and
// optimizer state).
uint64_t RowDigest(uint64_t id, std::string_view value) {
  RowMeta meta;
  std::memcpy(&meta, value.data(), sizeof(RowMeta));
  uint32_t count_bits;
  std::memcpy(&count_bits, &meta.count, sizeof(count_bits));
  const uint64_t h = Mix64(Mix64(id) ^ static_cast<uint64_t>(meta.last_seen_step)) ^ count_bits;
  return Mix64(h ^ HashBytes(absl::string_view(value.data() + sizeof(RowMeta),
                                               value.size() - sizeof(RowMeta))));
}

}  // namespace

absl::StatusOr<TableChecksum> EmbeddingTable::Checksum(const SlotFilter& counted) {
  EMBER_RETURN_IF_ERROR(FlushDirty());
  TableChecksum sum;
  sum.table = config_.name();
  const size_t expected = RowBytes(row_floats_);
  absl::Status bad_row;
  EMBER_RETURN_IF_ERROR(ctx_.backend->Scan(
      ctx_.backend_table, "", "", [&](std::string_view key, std::string_view value) {
        uint32_t slot;
        uint64_t id;
        if (!DecodeRowKey(key, &slot, &id) || value.size() != expected) {
          bad_row = absl::DataLossError(absl::StrCat("table ", config_.name(),
                                                     ": malformed stored row (key ", key.size(),
                                                     " bytes, value ", value.size(), " bytes)"));
          return false;
        }
        if (counted != nullptr && !counted(slot)) return true;
        sum.rows += 1;
        sum.digest += RowDigest(id, value);
        return true;
      }));
  EMBER_RETURN_IF_ERROR(bad_row);
  return sum;
}

}  // namespace ember
