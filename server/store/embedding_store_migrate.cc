// Copyright 2026 The Ember Authors.
//
// EmbeddingStore's slot migration API (embedding_store.h, "Slot migration"): argument
// checks here, the work per table in embedding_table_migrate.cc.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/slot.h"
#include "common/status_macros.h"
#include "server/store/embedding_store.h"
#include "server/store/internal/embedding_table.h"
#include "server/store/row_layout.h"

namespace ember {
namespace {

absl::Status CheckSlotRange(uint32_t first_slot, uint32_t last_slot) {
  if (last_slot < first_slot || last_slot >= kNumSlots) {
    return absl::InvalidArgumentError(absl::StrCat("bad slot range [", first_slot, ", ", last_slot,
                                                   "]: need first <= last < ", kNumSlots));
  }
  return absl::OkStatus();
}

// A cursor is the row key of the previous page's last row, which lies in the range.
absl::Status CheckCursor(absl::string_view cursor, uint32_t first_slot, uint32_t last_slot) {
  if (cursor.empty()) return absl::OkStatus();
  uint32_t slot;
  uint64_t id;
  if (!DecodeRowKey(std::string_view(cursor.data(), cursor.size()), &slot, &id) ||
      slot < first_slot || slot > last_slot) {
    return absl::InvalidArgumentError(absl::StrCat(
        "malformed export cursor (", cursor.size(), " bytes) for slots [", first_slot, ", ",
        last_slot, "]: pass the next_cursor of the previous page of the same range"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RowPage> EmbeddingStore::ExportSlotRows(absl::string_view table, uint32_t first_slot,
                                                       uint32_t last_slot, absl::string_view cursor,
                                                       size_t max_rows) {
  EMBER_RETURN_IF_ERROR(CheckSlotRange(first_slot, last_slot));
  if (max_rows == 0) return absl::InvalidArgumentError("export: max_rows must be > 0");
  EMBER_RETURN_IF_ERROR(CheckCursor(cursor, first_slot, last_slot));
  EMBER_ASSIGN_OR_RETURN(EmbeddingTable * t, FindTable(table));
  return t->ExportRows(first_slot, last_slot, cursor, max_rows);
}

absl::StatusOr<std::vector<EncodedRow>> EmbeddingStore::ReadEncodedRows(
    absl::string_view table, absl::Span<const uint64_t> ids) {
  EMBER_ASSIGN_OR_RETURN(EmbeddingTable * t, FindTable(table));
  return t->ReadEncoded(ids);
}

absl::Status EmbeddingStore::ImportRows(absl::string_view table,
                                        absl::Span<const EncodedRow> rows) {
  EMBER_ASSIGN_OR_RETURN(EmbeddingTable * t, FindTable(table));
  for (const EncodedRow& row : rows) {
    if (!row.value.empty() && row.value.size() != t->row_bytes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "import into '", table, "': row of id ", row.id, " has ", row.value.size(),
          " bytes; the table's rows have ", t->row_bytes(), " (same dim and optimizer needed)"));
    }
  }
  return t->Import(rows);
}

absl::StatusOr<uint64_t> EmbeddingStore::DropSlots(uint32_t first_slot, uint32_t last_slot) {
  EMBER_RETURN_IF_ERROR(CheckSlotRange(first_slot, last_slot));
  {
    absl::ReaderMutexLock lock(&tables_mu_);
    if (closed_) return absl::FailedPreconditionError("store is closed");
  }
  uint64_t removed = 0;
  for (EmbeddingTable* t : AllTables()) {
    EMBER_ASSIGN_OR_RETURN(uint64_t rows, t->DropSlots(first_slot, last_slot));
    removed += rows;
  }
  return removed;
}

absl::StatusOr<std::vector<uint64_t>> EmbeddingStore::RowsPerSlot() {
  {
    absl::ReaderMutexLock lock(&tables_mu_);
    if (closed_) return absl::FailedPreconditionError("store is closed");
  }
  std::vector<uint64_t> per_slot(kNumSlots, 0);
  for (EmbeddingTable* t : AllTables()) EMBER_RETURN_IF_ERROR(t->CountRowsPerSlot(&per_slot));
  return per_slot;
}

uint64_t EmbeddingStore::EstimatedStoredRows() const {
  uint64_t rows = 0;
  for (const EmbeddingTable* t : AllTables()) rows += t->EstimatedStoredRows();
  return rows;
}

}  // namespace ember
