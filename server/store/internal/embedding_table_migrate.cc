// Copyright 2026 The Ember Authors.
//
// Slot migration on one table: export pages, encoded reads, import and slot drops
// (embedding_store.h, "Slot migration").
//
// The hazard is an older copy of a row reaching the backend after an import or a drop:
// a dirty resident row that a flush or a CLOCK eviction writes back later, or a
// write-back already in flight (kRowWriteBack) whose backend write lands later. Import
// and drop therefore settle the resident copies first, under the stripe lock taken once
// no write-back of those rows is in flight: an imported value overwrites the resident
// copy in place and stays dirty, so any write-back of the old bytes is followed by one
// of the new; a removed row leaves memory, so it can never be written back. Only then
// do they write the backend. Afterwards they settle memory again for loads that raced
// with the backend write (memory_tier.h: a load in flight consults the removals made
// since it started).

#include <algorithm>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/slot.h"
#include "common/status_macros.h"
#include "server/store/internal/embedding_table.h"

namespace ember {
namespace {

// Longest wait for a write-back of a row in flight (one backend write).
constexpr absl::Duration kWriteBackWait = absl::Seconds(10);

std::string EncodeVersion(uint64_t v) { return std::string(reinterpret_cast<char*>(&v), 8); }

absl::Status WriteBackTimeout(const std::string& table) {
  return absl::UnavailableError(absl::StrCat("table '", table, "': a write-back stayed in flight ",
                                             "for ", absl::FormatDuration(kWriteBackWait),
                                             "; retry"));
}

// Overwrites a resident row with stored bytes and marks it dirty (memory flags kept).
void OverwriteResident(char* row, absl::string_view bytes) {
  RowMeta* meta = MemoryTier::Meta(row);
  const uint32_t flags = meta->flags;
  std::memcpy(row, bytes.data(), bytes.size());
  meta->flags = flags | kRowDirty;
}

}  // namespace

bool EmbeddingTable::InSlots(uint64_t id, uint32_t first_slot, uint32_t last_slot) const {
  const uint32_t slot = SlotOf(config_.seed(), id);
  return slot >= first_slot && slot <= last_slot;
}

bool EmbeddingTable::LockWithoutWriteBacks(MemoryTier::Stripe& st, absl::Span<const uint64_t> ids) {
  // Evaluated with st.mu held (by absl::Mutex) each time the condition may have changed.
  auto idle = [this, &st, ids]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(st.mu) {
    for (uint64_t id : ids) {
      char* row = tier_.Find(st, id);
      if (row != nullptr && (MemoryTier::Meta(row)->flags & kRowWriteBack)) return false;
    }
    return true;
  };
  if (st.mu.LockWhenWithTimeout(absl::Condition(&idle), kWriteBackWait)) return true;
  st.mu.Unlock();
  return false;
}

// ---------------------------------------------------------------------------------
// Export and encoded reads

absl::Status EmbeddingTable::FlushSlots(uint32_t first_slot, uint32_t last_slot) {
  absl::Status first_error;
  for (uint32_t s = 0; s < tier_.num_stripes(); ++s) {
    MemoryTier::Stripe& st = tier_.stripe(s);
    std::vector<uint64_t> ids, busy;
    std::vector<std::string> bytes;
    auto take = [&](uint64_t id, char* row) {  // as FlushDirty
      RowMeta* meta = MemoryTier::Meta(row);
      std::string copy(row, tier_.row_bytes());
      reinterpret_cast<RowMeta*>(copy.data())->flags = 0;
      ids.push_back(id);
      bytes.push_back(std::move(copy));
      meta->flags = (meta->flags & ~kRowDirty) | kRowWriteBack;
    };
    {
      absl::MutexLock lock(&st.mu);
      tier_.ForEach(st, [&](uint64_t id, char* row) {
        const uint32_t flags = MemoryTier::Meta(row)->flags;
        if (!(flags & (kRowDirty | kRowWriteBack)) || !InSlots(id, first_slot, last_slot)) return;
        if (flags & kRowWriteBack) {
          busy.push_back(id);
        } else {
          take(id, row);
        }
      });
    }
    if (!ids.empty()) {
      absl::Status status = WriteBackRows(st, ids, bytes, /*remove_after=*/false);
      if (!status.ok() && first_error.ok()) first_error = status;
    }
    if (busy.empty()) continue;
    // Write-backs started by others must land before the range is read; one that
    // failed left its row dirty, so write it again.
    if (!LockWithoutWriteBacks(st, busy)) return WriteBackTimeout(config_.name());
    ids.clear();
    bytes.clear();
    for (uint64_t id : busy) {
      char* row = tier_.Find(st, id);
      if (row != nullptr && (MemoryTier::Meta(row)->flags & kRowDirty)) take(id, row);
    }
    st.mu.Unlock();
    if (!ids.empty()) {
      absl::Status status = WriteBackRows(st, ids, bytes, /*remove_after=*/false);
      if (!status.ok() && first_error.ok()) first_error = status;
    }
  }
  return first_error;
}

void EmbeddingTable::CopyResident(std::vector<EncodedRow>* rows, std::vector<bool>* copied) {
  copied->assign(rows->size(), false);
  if (rows->empty()) return;
  std::vector<uint64_t> ids(rows->size());
  for (size_t i = 0; i < rows->size(); ++i) ids[i] = (*rows)[i].id;
  std::vector<uint32_t> order, starts;
  GroupByStripe(ids, &order, &starts);
  for (uint32_t s = 0; s + 1 < starts.size(); ++s) {
    if (starts[s] == starts[s + 1]) continue;
    MemoryTier::Stripe& st = tier_.stripe(s);
    absl::MutexLock lock(&st.mu);
    for (uint32_t k = starts[s]; k < starts[s + 1]; ++k) {
      EncodedRow& out = (*rows)[order[k]];
      const char* row = tier_.Find(st, out.id);
      if (row == nullptr) continue;
      out.value.assign(row, tier_.row_bytes());
      reinterpret_cast<RowMeta*>(out.value.data())->flags = 0;
      (*copied)[order[k]] = true;
    }
  }
}

absl::StatusOr<RowPage> EmbeddingTable::ExportRows(uint32_t first_slot, uint32_t last_slot,
                                                   absl::string_view after_key, size_t max_rows) {
  if (after_key.empty()) EMBER_RETURN_IF_ERROR(FlushSlots(first_slot, last_slot));
  // Every key is kRowKeySize bytes, so key + "\0" is the smallest key after `key`.
  const std::string begin = after_key.empty() ? SlotBeginKey(first_slot)
                                              : absl::StrCat(after_key, absl::string_view("\0", 1));
  RowPage page;
  bool more = false;
  absl::Status bad_row;
  EMBER_RETURN_IF_ERROR(ctx_.backend->Scan(
      ctx_.backend_table, begin, SlotEndKey(last_slot),
      [&](std::string_view key, std::string_view value) {
        if (page.rows.size() == max_rows) {
          more = true;
          return false;
        }
        uint32_t slot;
        uint64_t id;
        if (!DecodeRowKey(key, &slot, &id) || value.size() != tier_.row_bytes()) {
          bad_row = absl::DataLossError(absl::StrCat("table '", config_.name(),
                                                     "': malformed stored row (key ", key.size(),
                                                     " bytes, value ", value.size(), " bytes)"));
          return false;
        }
        page.rows.push_back({id, std::string(value)});
        return true;
      }));
  EMBER_RETURN_IF_ERROR(bad_row);
  // The backend is read first: a row resident now is at least as new as its stored copy.
  std::vector<bool> copied;
  CopyResident(&page.rows, &copied);
  if (more) page.next_cursor = Key(page.rows.back().id);
  return page;
}

absl::StatusOr<std::vector<EncodedRow>> EmbeddingTable::ReadEncoded(
    absl::Span<const uint64_t> ids) {
  std::vector<EncodedRow> rows(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) rows[i].id = ids[i];
  // Memory first: a row not resident then has its newest bytes in the backend.
  std::vector<bool> copied;
  CopyResident(&rows, &copied);
  std::vector<size_t> misses;
  std::vector<std::string> keys;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (copied[i]) continue;
    misses.push_back(i);
    keys.push_back(Key(rows[i].id));
  }
  if (misses.empty()) return rows;
  std::vector<std::string> values;
  std::vector<bool> found;
  EMBER_RETURN_IF_ERROR(ctx_.backend->MultiGet(ctx_.backend_table, keys, &values, &found));
  for (size_t k = 0; k < misses.size(); ++k) {
    if (!found[k]) continue;
    if (values[k].size() != tier_.row_bytes()) {
      return absl::DataLossError(
          absl::StrCat("table '", config_.name(), "' id ", rows[misses[k]].id, ": stored row has ",
                       values[k].size(), " bytes; expected ", tier_.row_bytes()));
    }
    rows[misses[k]].value = std::move(values[k]);
  }
  return rows;
}

// ---------------------------------------------------------------------------------
// Import

// One id of an import: its row, re-stamped with the version reserved for it.
struct EmbeddingTable::ImportItem {
  std::string value;  // re-stamped; empty: remove
  bool in_memory = false;
};

void EmbeddingTable::StampImported(absl::Span<const EncodedRow> rows,
                                   absl::Span<const uint64_t> ids,
                                   const absl::flat_hash_map<uint64_t, size_t>& pick,
                                   std::vector<ImportItem>* items, std::vector<Change>* changes) {
  const size_t n = ids.size();
  uint64_t version = ctx_.log->Reserve(static_cast<uint32_t>(n));
  for (size_t k = 0; k < n; ++k, ++version) {
    (*items)[k].value = rows[pick.at(ids[k])].value;
    const bool tombstone = (*items)[k].value.empty();
    if (!tombstone) {
      RowMeta meta;
      std::memcpy(&meta, (*items)[k].value.data(), sizeof(meta));
      meta.version = version;
      meta.flags = 0;
      std::memcpy((*items)[k].value.data(), &meta, sizeof(meta));
    }
    (*changes)[k] = {version, ids[k], ctx_.index, tombstone};
  }
}

absl::Status EmbeddingTable::ImportResident(MemoryTier::Stripe& st, absl::Span<const uint64_t> ids,
                                            absl::Span<const uint32_t> positions,
                                            absl::Span<ImportItem> items,
                                            std::vector<uint64_t>* stripe_ids) {
  stripe_ids->clear();
  for (uint32_t pos : positions) stripe_ids->push_back(ids[pos]);
  if (!LockWithoutWriteBacks(st, *stripe_ids)) return WriteBackTimeout(config_.name());
  for (uint32_t pos : positions) {
    ImportItem& item = items[pos];
    char* row = tier_.Find(st, ids[pos]);
    if (row == nullptr) continue;
    if (item.value.empty()) {
      tier_.Remove(st, ids[pos], /*deleted=*/true);
    } else {
      OverwriteResident(row, item.value);
      item.in_memory = true;
    }
  }
  st.mu.Unlock();
  return absl::OkStatus();
}

absl::Status EmbeddingTable::PublishImported(MemoryTier::Stripe& st, absl::Span<const uint64_t> ids,
                                             absl::Span<const uint32_t> positions,
                                             absl::Span<const ImportItem> items,
                                             std::vector<uint64_t>* stripe_ids) {
  stripe_ids->clear();
  for (uint32_t pos : positions) {
    if (!items[pos].in_memory) stripe_ids->push_back(ids[pos]);
  }
  if (stripe_ids->empty()) return absl::OkStatus();
  if (!LockWithoutWriteBacks(st, *stripe_ids)) return WriteBackTimeout(config_.name());
  for (uint32_t pos : positions) {
    const ImportItem& item = items[pos];
    const uint64_t id = ids[pos];
    if (item.in_memory) continue;
    char* row = tier_.Find(st, id);
    if (item.value.empty()) {
      if (row != nullptr) {
        tier_.Remove(st, id, /*deleted=*/true);
      } else {
        tier_.NoteDeleted(st, id);
      }
    } else if (row != nullptr) {
      OverwriteResident(row, item.value);
    } else {
      // Publish the stored bytes as a removal: what loads in flight must use.
      tier_.InsertStored(st, id, item.value);
      tier_.Remove(st, id);
    }
  }
  st.mu.Unlock();
  return absl::OkStatus();
}

absl::Status EmbeddingTable::Import(absl::Span<const EncodedRow> rows) {
  // The last row of each id, in first-seen order.
  absl::flat_hash_map<uint64_t, size_t> pick;
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < rows.size(); ++i) {
    auto [it, inserted] = pick.try_emplace(rows[i].id, i);
    if (inserted) {
      ids.push_back(rows[i].id);
    } else {
      it->second = i;
    }
  }
  if (ids.empty()) return absl::OkStatus();
  const size_t n = ids.size();
  std::vector<ImportItem> items(n);
  std::vector<Change> changes(n);
  StampImported(rows, ids, pick, &items, &changes);
  // Every reserved version is committed, whatever happens below.
  absl::Cleanup commit = [&] { ctx_.log->Commit(changes); };

  std::vector<uint32_t> order, starts;
  GroupByStripe(ids, &order, &starts);
  auto positions_of = [&](uint32_t s) {
    return absl::MakeConstSpan(order).subspan(starts[s], starts[s + 1] - starts[s]);
  };
  std::vector<uint64_t> stripe_ids;

  // 1. Resident copies: overwrite in place (stays dirty) or remove.
  for (uint32_t s = 0; s + 1 < starts.size(); ++s) {
    if (starts[s] == starts[s + 1]) continue;
    EMBER_RETURN_IF_ERROR(
        ImportResident(tier_.stripe(s), ids, positions_of(s), absl::MakeSpan(items), &stripe_ids));
  }

  // 2. Everything else goes straight to the backend, with the version high-water mark.
  BackendWriteBatch batch;
  for (size_t k = 0; k < n; ++k) {
    if (items[k].in_memory) continue;
    batch.push_back({ctx_.backend_table, Key(ids[k]), items[k].value, items[k].value.empty()});
  }
  if (batch.empty()) return absl::OkStatus();
  batch.push_back({kMetaTable, "version", EncodeVersion(ctx_.log->reserved()), false});
  EMBER_RETURN_IF_ERROR(ctx_.backend->Write(batch));

  // 3. Loads that raced with the write: a copy loaded meanwhile is replaced, and loads
  // still in flight see the new bytes (or the removal) among the stripe's removals.
  for (uint32_t s = 0; s + 1 < starts.size(); ++s) {
    EMBER_RETURN_IF_ERROR(
        PublishImported(tier_.stripe(s), ids, positions_of(s), items, &stripe_ids));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------
// Drop and counts

absl::Status EmbeddingTable::RemoveResidentSlots(uint32_t first_slot, uint32_t last_slot,
                                                 absl::flat_hash_set<uint64_t>* removed) {
  for (uint32_t s = 0; s < tier_.num_stripes(); ++s) {
    MemoryTier::Stripe& st = tier_.stripe(s);
    std::vector<uint64_t> victims, busy;
    {
      absl::MutexLock lock(&st.mu);
      tier_.ForEach(st, [&](uint64_t id, char* row) {
        if (!InSlots(id, first_slot, last_slot)) return;
        (MemoryTier::Meta(row)->flags & kRowWriteBack ? busy : victims).push_back(id);
      });
      for (uint64_t id : victims) tier_.Remove(st, id, /*deleted=*/true);
    }
    if (removed != nullptr) removed->insert(victims.begin(), victims.end());
    if (busy.empty()) continue;
    if (!LockWithoutWriteBacks(st, busy)) return WriteBackTimeout(config_.name());
    for (uint64_t id : busy) {
      if (tier_.Remove(st, id, /*deleted=*/true) && removed != nullptr) removed->insert(id);
    }
    st.mu.Unlock();
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> EmbeddingTable::DropSlots(uint32_t first_slot, uint32_t last_slot) {
  // 1. Memory first, so no copy of these rows can be written back after the delete.
  absl::flat_hash_set<uint64_t> memory_only;
  EMBER_RETURN_IF_ERROR(RemoveResidentSlots(first_slot, last_slot, &memory_only));
  // 2. Count the stored rows: the backend's, plus removed rows it never held.
  const std::string begin = SlotBeginKey(first_slot);
  const std::string end = SlotEndKey(last_slot);
  uint64_t stored = 0;
  EMBER_RETURN_IF_ERROR(ctx_.backend->Scan(ctx_.backend_table, begin, end,
                                           [&](std::string_view key, std::string_view) {
                                             uint32_t slot;
                                             uint64_t id;
                                             if (DecodeRowKey(key, &slot, &id)) {
                                               memory_only.erase(id);
                                             }
                                             ++stored;
                                             return true;
                                           }));
  // 3. The backend's range, then copies loaded while it was being deleted.
  EMBER_RETURN_IF_ERROR(ctx_.backend->DeleteRange(ctx_.backend_table, begin, end));
  EMBER_RETURN_IF_ERROR(RemoveResidentSlots(first_slot, last_slot, nullptr));
  return stored + memory_only.size();
}

absl::Status EmbeddingTable::CountRowsPerSlot(std::vector<uint64_t>* per_slot) {
  EMBER_RETURN_IF_ERROR(FlushDirty());
  absl::Status bad_key;
  EMBER_RETURN_IF_ERROR(
      ctx_.backend->Scan(ctx_.backend_table, "", "", [&](std::string_view key, std::string_view) {
        uint32_t slot;
        uint64_t id;
        if (!DecodeRowKey(key, &slot, &id)) {
          bad_key = absl::DataLossError(absl::StrCat(
              "table '", config_.name(), "': malformed row key of ", key.size(), " bytes"));
          return false;
        }
        ++(*per_slot)[slot];
        return true;
      }));
  return bad_key;
}

uint64_t EmbeddingTable::EstimatedStoredRows() const {
  return ctx_.backend->EstimateKeys(ctx_.backend_table);
}

}  // namespace ember
