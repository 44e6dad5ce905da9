// Copyright 2026 The Ember Authors.
//
// Eviction policy (TTL, minimum count, count decay) and flushing of dirty rows.
//
// Policy eviction deletes a row everywhere: from the backend first, then from memory,
// and emits a tombstone. Count decay changes a row's meta, so every decayed row that
// stays gets a change-log entry too: delta checkpoints and the update stream read the
// change log, and a row left out would restore (or serve) with its old count. Deleting from the
// backend first means a concurrent loader either reads the row before the delete and then sees the
// removal note (memory_tier.h), or reads after it and finds nothing; either way the row is not
// brought back with stale bytes.

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "server/store/internal/embedding_table.h"

namespace ember {
namespace {

constexpr size_t kScanChunk = 4096;

}  // namespace

absl::Status EmbeddingTable::FlushDirty(absl::Duration spread) {
  absl::Status first_error;
  const absl::Duration pause = spread / tier_.num_stripes();
  for (uint32_t s = 0; s < tier_.num_stripes(); ++s) {
    if (s > 0 && pause > absl::ZeroDuration()) absl::SleepFor(pause);
    MemoryTier::Stripe& st = tier_.stripe(s);
    std::vector<uint64_t> ids;
    std::vector<std::string> bytes;
    {
      absl::MutexLock lock(&st.mu);
      tier_.ForEach(st, [&](uint64_t id, char* row) {
        RowMeta* meta = MemoryTier::Meta(row);
        if (!(meta->flags & kRowDirty) || (meta->flags & kRowWriteBack)) return;
        std::string copy(row, tier_.row_bytes());
        reinterpret_cast<RowMeta*>(copy.data())->flags = 0;
        ids.push_back(id);
        bytes.push_back(std::move(copy));
        meta->flags = (meta->flags & ~kRowDirty) | kRowWriteBack;
      });
    }
    if (ids.empty()) continue;
    absl::Status status = WriteBackRows(st, ids, bytes, /*remove_after=*/false);
    if (!status.ok() && first_error.ok()) first_error = status;
  }
  return first_error;
}

// One EvictByPolicy pass: the policy, the step it runs against, and what it did.
struct EmbeddingTable::EvictionPass {
  // A row of the backend that the pass rewrites (decay) or deletes.
  struct Candidate {
    uint64_t id;
    std::string value;  // rewritten value (decay) or empty for delete
    bool erase;
  };

  bool decay;
  float count_decay;
  int64_t ttl;
  float min_count;
  int64_t step;
  EvictionReport report;
  std::vector<Change> changes;   // tombstones and decay changes, committed at the end
  std::vector<Candidate> chunk;  // backend rows waiting for EvictStoredChunk

  bool Expired(const RowMeta& m) const {
    return (ttl > 0 && step - m.last_seen_step > ttl) || (min_count > 0 && m.count < min_count);
  }
};

void EmbeddingTable::EmitEvictionChanges(const std::vector<uint64_t>& ids, bool tombstone,
                                         EvictionPass* pass) {
  if (ids.empty()) return;
  uint64_t version = ctx_.log->Reserve(static_cast<uint32_t>(ids.size()));
  for (uint64_t id : ids) pass->changes.push_back({version++, id, ctx_.index, tombstone});
}

absl::Status EmbeddingTable::EvictResident(MemoryTier::Stripe& st, EvictionPass* pass) {
  EvictionReport& report = pass->report;
  const bool decay = pass->decay;
  std::vector<uint64_t> candidates;
  std::vector<uint64_t> decayed;
  {
    absl::MutexLock lock(&st.mu);
    tier_.ForEach(st, [&](uint64_t id, char* row) {
      RowMeta* meta = MemoryTier::Meta(row);
      ++report.rows_scanned;
      if (decay) {
        meta->count *= pass->count_decay;
        meta->flags |= kRowDirty;
      }
      if (!(meta->flags & kRowWriteBack) && pass->Expired(*meta)) {
        candidates.push_back(id);
      } else if (decay) {
        decayed.push_back(id);
      }
    });
  }
  EmitEvictionChanges(decayed, false, pass);
  report.rows_decayed += decayed.size();
  if (candidates.empty()) return absl::OkStatus();
  BackendWriteBatch batch;
  for (uint64_t id : candidates) batch.push_back({ctx_.backend_table, Key(id), "", true});
  EMBER_RETURN_IF_ERROR(ctx_.backend->Write(batch));
  std::vector<uint64_t> removed;
  std::vector<uint64_t> kept;  // decayed, then touched before the delete: stays
  {
    absl::MutexLock lock(&st.mu);
    for (uint64_t id : candidates) {
      char* row = tier_.Find(st, id);
      if (row == nullptr) continue;
      RowMeta* meta = MemoryTier::Meta(row);
      if (!(meta->flags & kRowWriteBack) && pass->Expired(*meta)) {
        tier_.Remove(st, id, /*deleted=*/true);
        removed.push_back(id);
      } else {
        meta->flags |= kRowDirty;  // touched meanwhile: its backend copy is gone
        if (decay) kept.push_back(id);
      }
    }
  }
  EmitEvictionChanges(kept, false, pass);
  report.rows_decayed += kept.size();
  EmitEvictionChanges(removed, true, pass);
  report.rows_removed += removed.size();
  return absl::OkStatus();
}

absl::Status EmbeddingTable::EvictStoredChunk(EvictionPass* pass) {
  using Candidate = EvictionPass::Candidate;
  if (pass->chunk.empty()) return absl::OkStatus();
  // Skip rows that are resident now: memory is authoritative for them.
  std::vector<Candidate> todo;
  for (Candidate& c : pass->chunk) {
    MemoryTier::Stripe& st = tier_.stripe(tier_.StripeOf(c.id));
    absl::MutexLock lock(&st.mu);
    if (tier_.Find(st, c.id) == nullptr) todo.push_back(std::move(c));
  }
  pass->chunk.clear();
  BackendWriteBatch batch;
  for (const Candidate& c : todo) {
    batch.push_back({ctx_.backend_table, Key(c.id), c.erase ? "" : c.value, c.erase});
  }
  if (batch.empty()) return absl::OkStatus();
  EMBER_RETURN_IF_ERROR(ctx_.backend->Write(batch));
  std::vector<uint64_t> removed;
  std::vector<uint64_t> decayed;
  for (const Candidate& c : todo) {
    if (!c.erase) {
      decayed.push_back(c.id);
      continue;
    }
    MemoryTier::Stripe& st = tier_.stripe(tier_.StripeOf(c.id));
    absl::MutexLock lock(&st.mu);
    tier_.NoteDeleted(st, c.id);
    removed.push_back(c.id);
  }
  EmitEvictionChanges(decayed, false, pass);
  pass->report.rows_decayed += decayed.size();
  EmitEvictionChanges(removed, true, pass);
  pass->report.rows_removed += removed.size();
  return absl::OkStatus();
}

absl::Status EmbeddingTable::EvictStored(EvictionPass* pass, absl::Status* chunk_status) {
  absl::Status scan = ctx_.backend->Scan(
      ctx_.backend_table, "", "", [&](std::string_view key, std::string_view value) {
        uint32_t slot;
        uint64_t id;
        if (!DecodeRowKey(key, &slot, &id) || value.size() != tier_.row_bytes()) return true;
        ++pass->report.rows_scanned;
        RowMeta meta;
        std::memcpy(&meta, value.data(), sizeof(meta));
        if (pass->decay) meta.count *= pass->count_decay;
        if (pass->Expired(meta)) {
          pass->chunk.push_back({id, "", true});
        } else if (pass->decay) {
          std::string rewritten(value);
          std::memcpy(rewritten.data(), &meta, sizeof(meta));
          pass->chunk.push_back({id, std::move(rewritten), false});
        }
        if (pass->chunk.size() >= kScanChunk) {
          *chunk_status = EvictStoredChunk(pass);
          if (!chunk_status->ok()) return false;
        }
        return true;
      });
  if (chunk_status->ok()) *chunk_status = EvictStoredChunk(pass);
  return scan;
}

absl::StatusOr<EvictionReport> EmbeddingTable::EvictByPolicy(int64_t step) {
  const v1::EvictionConfig& ev = config_.eviction();
  EvictionPass pass;
  pass.decay = ev.count_decay() < 1.0f;
  pass.count_decay = ev.count_decay();
  pass.ttl = static_cast<int64_t>(ev.ttl_steps());
  pass.min_count = ev.min_count();
  pass.step = step;
  if (!pass.decay && pass.ttl == 0 && pass.min_count == 0) return pass.report;

  // 1. Resident rows: decay, find expired, delete from the backend, then from memory.
  for (uint32_t s = 0; s < tier_.num_stripes(); ++s) {
    if (absl::Status status = EvictResident(tier_.stripe(s), &pass); !status.ok()) {
      ctx_.log->Commit(pass.changes);  // every reserved version must be committed
      return status;
    }
  }

  // 2. Rows only in the backend, in chunks.
  absl::Status chunk_status;
  absl::Status scan = EvictStored(&pass, &chunk_status);
  ctx_.log->Commit(pass.changes);
  ctx_.counters->evicted_by_policy.fetch_add(pass.report.rows_removed, std::memory_order_relaxed);
  EMBER_RETURN_IF_ERROR(scan);
  EMBER_RETURN_IF_ERROR(chunk_status);
  return pass.report;
}

std::string EmbeddingTable::SerializeSketch() const {
  return sketch_ == nullptr ? std::string() : sketch_->Serialize();
}

absl::Status EmbeddingTable::RestoreSketch(absl::string_view data) {
  if (sketch_ == nullptr || data.empty()) return absl::OkStatus();
  return sketch_->Restore(data);
}

}  // namespace ember
