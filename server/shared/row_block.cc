// Copyright 2026 The Ember Authors.

#include "server/shared/row_block.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ember {

void AppendRows(absl::Span<const EncodedRow> rows, v1::RowBlock* block) {
  std::string* out = block->mutable_rows();
  size_t bytes = 0;
  for (const EncodedRow& row : rows)
    bytes += sizeof(uint64_t) + sizeof(uint32_t) + row.value.size();
  out->reserve(out->size() + bytes);
  for (const EncodedRow& row : rows) {
    const uint32_t n = static_cast<uint32_t>(row.value.size());
    out->append(reinterpret_cast<const char*>(&row.id), sizeof(row.id));  // little-endian host
    out->append(reinterpret_cast<const char*>(&n), sizeof(n));
    out->append(row.value);
  }
  block->set_count(block->count() + static_cast<uint32_t>(rows.size()));
}

absl::StatusOr<std::vector<EncodedRow>> DecodeRows(const v1::RowBlock& block) {
  const std::string& in = block.rows();
  std::vector<EncodedRow> rows;
  rows.reserve(block.count());
  size_t at = 0;
  while (at < in.size()) {
    if (in.size() - at < sizeof(uint64_t) + sizeof(uint32_t)) {
      return absl::InvalidArgumentError(
          absl::StrCat("row block of table '", block.table(), "' is truncated at byte ", at));
    }
    EncodedRow row;
    uint32_t n = 0;
    std::memcpy(&row.id, in.data() + at, sizeof(row.id));
    std::memcpy(&n, in.data() + at + sizeof(row.id), sizeof(n));
    at += sizeof(uint64_t) + sizeof(uint32_t);
    if (in.size() - at < n) {
      return absl::InvalidArgumentError(absl::StrCat("row block of table '", block.table(),
                                                     "': row ", rows.size(), " claims ", n,
                                                     " bytes, ", in.size() - at, " left"));
    }
    row.value.assign(in.data() + at, n);
    at += n;
    rows.push_back(std::move(row));
  }
  if (rows.size() != block.count()) {
    return absl::InvalidArgumentError(absl::StrCat("row block of table '", block.table(),
                                                   "' holds ", rows.size(), " rows, count says ",
                                                   block.count()));
  }
  return rows;
}

}  // namespace ember
