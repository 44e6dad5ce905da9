// Copyright 2026 The Ember Authors.

#include "server/store/internal/memory_tier.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstring>

namespace ember {
namespace {

// Index entry (id, position) plus its control byte, at the map's maximum load (7/8),
// plus the arena's id back-pointer: what one resident row costs besides its bytes.
constexpr size_t kPerRowBookkeeping =
    (sizeof(std::pair<const uint64_t, uint32_t>) + 1) * 8 / 7 + sizeof(uint64_t);

}  // namespace

MemoryTier::MemoryTier(uint32_t row_floats, uint32_t num_stripes, MemoryBudget* budget)
    : row_bytes_(RowBytes(row_floats)),
      charge_(row_bytes_ + kPerRowBookkeeping),
      stripe_shift_(64 - std::max(1, std::countr_zero(num_stripes))),
      budget_(budget) {
  assert(std::has_single_bit(num_stripes));
  stripes_.reserve(num_stripes);
  for (uint32_t i = 0; i < num_stripes; ++i) stripes_.push_back(std::make_unique<Stripe>());
}

MemoryTier::~MemoryTier() {
  int64_t rows = 0;
  for (auto& s : stripes_) {
    absl::MutexLock lock(&s->mu);
    rows += static_cast<int64_t>(s->index.size());
  }
  budget_->Release(rows * static_cast<int64_t>(charge_));
}

char* MemoryTier::Insert(Stripe& s, uint64_t id) {
  uint32_t pos;
  if (!s.free.empty()) {
    pos = s.free.back();
    s.free.pop_back();
  } else {
    pos = static_cast<uint32_t>(s.ids.size());
    if (pos % kChunkRows == 0) {
      s.chunks.push_back(std::unique_ptr<char[]>(new char[kChunkRows * row_bytes_]));
    }
    s.ids.push_back(0);
  }
  s.ids[pos] = id;
  s.index.emplace(id, pos);
  char* row = RowAt(s, pos);
  RowMeta* meta = Meta(row);
  *meta = RowMeta{};
  meta->flags = kRowLive;
  budget_->Charge(static_cast<int64_t>(charge_));
  return row;
}

char* MemoryTier::InsertStored(Stripe& s, uint64_t id, absl::string_view bytes) {
  assert(bytes.size() == row_bytes_);
  char* row = Insert(s, id);
  const uint32_t flags = Meta(row)->flags;
  std::memcpy(row, bytes.data(), row_bytes_);
  Meta(row)->flags = flags;
  return row;
}

bool MemoryTier::Remove(Stripe& s, uint64_t id, bool deleted) {
  auto it = s.index.find(id);
  if (it == s.index.end()) return false;
  const uint32_t pos = it->second;
  s.index.erase(it);
  char* row = RowAt(s, pos);
  ++s.removals;
  if (!s.active_loads.empty()) {
    std::string bytes;
    if (!deleted) {
      Meta(row)->flags = 0;  // stored rows carry no memory-tier flags
      bytes.assign(row, row_bytes_);
    }
    s.recent.push_back({s.removals, id, std::move(bytes)});
  }
  Meta(row)->flags = 0;
  s.free.push_back(pos);
  budget_->Release(static_cast<int64_t>(charge_));
  return true;
}

void MemoryTier::PickVictims(Stripe& s, size_t max, std::vector<uint64_t>* victims) {
  const uint32_t n = static_cast<uint32_t>(s.ids.size());
  if (n == 0 || s.index.empty()) return;
  // Two full sweeps clear every referenced bit, so the loop always finds victims.
  for (uint64_t steps = 0; steps < 2ull * n && victims->size() < max; ++steps) {
    if (s.clock_hand >= n) s.clock_hand = 0;
    const uint32_t pos = s.clock_hand++;
    RowMeta* meta = Meta(RowAt(s, pos));
    if (!(meta->flags & kRowLive) || (meta->flags & kRowWriteBack)) continue;
    if (meta->flags & kRowReferenced) {
      meta->flags &= ~kRowReferenced;
      continue;
    }
    victims->push_back(s.ids[pos]);
  }
}

void MemoryTier::NoteDeleted(Stripe& s, uint64_t id) {
  ++s.removals;
  if (!s.active_loads.empty()) s.recent.push_back({s.removals, id, std::string()});
}

uint64_t MemoryTier::BeginLoad(Stripe& s) {
  s.active_loads.push_back(s.removals);
  return s.removals;
}

void MemoryTier::EndLoad(Stripe& s, uint64_t snapshot) {
  auto it = std::find(s.active_loads.begin(), s.active_loads.end(), snapshot);
  assert(it != s.active_loads.end());
  *it = s.active_loads.back();
  s.active_loads.pop_back();
  if (s.active_loads.empty()) {
    s.recent.clear();
    return;
  }
  // Entries at or below the oldest live snapshot are needed by no one.
  const uint64_t oldest = *std::min_element(s.active_loads.begin(), s.active_loads.end());
  std::erase_if(s.recent, [oldest](const Stripe::Removed& r) { return r.seq <= oldest; });
}

bool MemoryTier::FindRemovedSince(Stripe& s, uint64_t id, uint64_t snapshot,
                                  absl::string_view* bytes) {
  if (s.removals == snapshot) return false;
  for (auto it = s.recent.rbegin(); it != s.recent.rend(); ++it) {
    if (it->seq <= snapshot) break;
    if (it->id == id) {
      *bytes = it->bytes;
      return true;
    }
  }
  return false;
}

int64_t MemoryTier::ResidentRows() {
  int64_t rows = 0;
  for (auto& s : stripes_) {
    absl::MutexLock lock(&s->mu);
    rows += static_cast<int64_t>(s->index.size());
  }
  return rows;
}

int64_t MemoryTier::HeldBytes() {
  int64_t bytes = 0;
  for (auto& s : stripes_) {
    absl::MutexLock lock(&s->mu);
    bytes += static_cast<int64_t>(s->chunks.size() * kChunkRows * row_bytes_);
    bytes += static_cast<int64_t>(s->index.capacity() *
                                  (sizeof(std::pair<const uint64_t, uint32_t>) + 1));
    bytes += static_cast<int64_t>(s->ids.capacity() * sizeof(uint64_t) +
                                  s->free.capacity() * sizeof(uint32_t));
  }
  return bytes;
}

}  // namespace ember
