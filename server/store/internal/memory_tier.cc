// Copyright 2026 The Ember Authors.

#include "server/store/internal/memory_tier.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstring>

namespace ember {
namespace {

using IndexSlot = std::pair<const uint64_t, uint32_t>;

// Index entry (id, position) plus its control byte, at the map's maximum load (7/8),
// plus the arena's id back-pointer: what one more resident row costs besides its bytes.
constexpr size_t kPerRowBookkeeping = (sizeof(IndexSlot) + 1) * 8 / 7 + sizeof(uint64_t);

// log2 of the rows per chunk: the largest power of two whose rows fit kChunkBytes, or
// a 16th of a stripe's share of a small budget (each stripe's last chunk is partly
// filled, and a budget of a few KiB in tests must still hold rows).
int ChunkShift(size_t row_bytes, int64_t budget_limit, uint32_t num_stripes) {
  size_t chunk_bytes = MemoryTier::kChunkBytes;
  if (budget_limit > 0) {
    chunk_bytes = std::min(chunk_bytes, static_cast<size_t>(budget_limit) / num_stripes / 16);
  }
  const size_t rows = std::max<size_t>(1, chunk_bytes / row_bytes);
  return std::bit_width(rows) - 1;
}

// An index this much larger than its rows is shrunk (after mass removals: a slot move,
// a policy pass); a tier that only cycles rows at its budget never shrinks it.
constexpr size_t kShrinkIndexBelow = 8;

// The frequency sketch: about this many 8-bit counters per resident row (a power of two),
// at most a kSketchShare-th of the stripe's share of the budget and of its rows' bytes;
// halved after kSightingsPerRow sightings per row. A budget too small for kMinCounters
// per stripe keeps no sketch (few counters saturate under a scan of many cold IDs and
// would only cost rows).
constexpr size_t kCountersPerRow = 8;
constexpr int64_t kSketchShare = 16;
constexpr size_t kMinCounters = 256, kMaxCounters = size_t{1} << 24;
constexpr uint32_t kSightingsPerRow = 10;
// Below (1 - 1/kRoomDivisor) of the budget, every row read enters (AdmitLoaded).
constexpr int64_t kRoomDivisor = 16;

}  // namespace

MemoryTier::MemoryTier(uint32_t row_floats, uint32_t num_stripes, MemoryBudget* budget,
                       bool frequency_admission)
    : row_bytes_(RowBytes(row_floats)),
      chunk_shift_(ChunkShift(row_bytes_, budget->limit(), num_stripes)),
      charge_(row_bytes_ + kPerRowBookkeeping),
      stripe_shift_(64 - std::max(1, std::countr_zero(num_stripes))),
      budget_(budget),
      frequency_admission_(frequency_admission) {
  assert(std::has_single_bit(num_stripes));
  stripes_.reserve(num_stripes);
  for (uint32_t i = 0; i < num_stripes; ++i) stripes_.push_back(std::make_unique<Stripe>());
}

MemoryTier::~MemoryTier() {
  int64_t charged = 0;
  for (auto& s : stripes_) {
    absl::MutexLock lock(&s->mu);
    charged += s->charged;
  }
  budget_->Release(charged);
}

int64_t MemoryTier::HeldBy(Stripe& s) const {
  const size_t index = s.index.capacity() == 0 ? 0 : s.index.capacity() * (sizeof(IndexSlot) + 1);
  return static_cast<int64_t>((s.chunks.size() << chunk_shift_) * row_bytes_ + index +
                              s.ids.capacity() * sizeof(uint64_t) +
                              s.chunks.capacity() * sizeof(s.chunks[0]) + s.freq.capacity());
}

void MemoryTier::Recharge(Stripe& s) {
  const int64_t held = HeldBy(s);
  if (held == s.charged) return;  // most calls: no allocation changed
  budget_->Charge(held - s.charged);
  s.charged = held;
}

char* MemoryTier::Insert(Stripe& s, uint64_t id) {
  const uint32_t pos = static_cast<uint32_t>(s.ids.size());
  if ((pos & (chunk_rows() - 1)) == 0) {
    s.chunks.push_back(std::unique_ptr<char[]>(new char[size_t{chunk_rows()} * row_bytes_]));
  }
  s.ids.push_back(id);
  s.index.emplace(id, pos);
  char* row = RowAt(s, pos);
  RowMeta* meta = Meta(row);
  *meta = RowMeta{};
  meta->flags = kRowLive;
  Recharge(s);
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
  // Keep the arena dense: the last row moves into the hole, and a chunk left empty is
  // freed, so that the bytes charged fall with the rows.
  const uint32_t last = static_cast<uint32_t>(s.ids.size() - 1);
  if (pos != last) {
    std::memcpy(row, RowAt(s, last), row_bytes_);
    s.ids[pos] = s.ids[last];
    s.index[s.ids[pos]] = pos;
  }
  s.ids.pop_back();
  if ((last & (chunk_rows() - 1)) == 0) s.chunks.pop_back();
  if (s.index.size() * kShrinkIndexBelow < s.index.capacity()) {
    s.index.rehash(0);
    s.ids.shrink_to_fit();
    s.chunks.shrink_to_fit();
  }
  Recharge(s);
  return true;
}

void MemoryTier::PickVictims(Stripe& s, size_t max, std::vector<uint64_t>* victims) {
  const uint32_t n = static_cast<uint32_t>(s.ids.size());
  if (n == 0 || s.index.empty()) return;
  if (frequency_admission_ && s.freq.empty() && budget_->limit() > 0) StartFrequencies(s);
  // Two full sweeps clear every referenced bit, so the loop always finds victims.
  uint64_t steps_left = 2ull * n;
  uint32_t pos = 0;
  while (victims->size() < max && SeekVictim(s, &steps_left, &pos)) {
    victims->push_back(s.ids[pos]);
    ++s.clock_hand;
  }
}

bool MemoryTier::SeekVictim(Stripe& s, uint64_t* steps_left, uint32_t* pos) {
  const uint32_t n = static_cast<uint32_t>(s.ids.size());
  while (*steps_left > 0) {
    --*steps_left;
    if (s.clock_hand >= n) s.clock_hand = 0;
    RowMeta* meta = Meta(RowAt(s, s.clock_hand));
    if (!(meta->flags & kRowLive) || (meta->flags & kRowWriteBack)) {
      ++s.clock_hand;
      continue;
    }
    if (meta->flags & kRowReferenced) {
      meta->flags &= ~kRowReferenced;
      ++s.clock_hand;
      continue;
    }
    *pos = s.clock_hand;
    return true;
  }
  return false;
}

void MemoryTier::StartFrequencies(Stripe& s) {
  const size_t rows = std::max<size_t>(s.ids.size(), 1);
  const size_t room = static_cast<size_t>(budget_->limit() / num_stripes() / kSketchShare);
  if (room < kMinCounters) return;
  // At most a kSketchShare-th of what the rows themselves take: small rows get fewer
  // counters each rather than a tier that holds noticeably fewer rows.
  const size_t row_share = rows * row_bytes_ / static_cast<size_t>(kSketchShare);
  const size_t counters = std::min({std::bit_ceil(rows * kCountersPerRow), std::bit_floor(room),
                                    std::bit_floor(std::max<size_t>(row_share, 1)), kMaxCounters});
  if (counters < kMinCounters) return;
  s.freq.assign(counters, 0);
  s.freq_samples = 0;
  s.freq_period = static_cast<uint32_t>(std::max<size_t>(rows, 64) * kSightingsPerRow);
  Recharge(s);
}

void MemoryTier::HalveFrequencies(Stripe& s) {
  for (uint8_t& c : s.freq) c >>= 1;
  s.freq_samples /= 2;
}

uint32_t MemoryTier::Frequency(Stripe& s, uint64_t id) {
  if (s.freq.empty()) return 0;
  const uint64_t h = FrequencyHash(id);
  uint32_t estimate = 255;
  for (uint32_t k = 0; k < 4; ++k)
    estimate = std::min<uint32_t>(estimate, s.freq[CounterOf(s, h, k)]);
  return estimate;
}

bool MemoryTier::AdmitLoaded(Stripe& s, uint64_t id, bool* exchanged) {
  *exchanged = false;
  // Room means well below the limit: rows admitted just under it would push the tier
  // over (a new chunk, a larger index), and shrinking would then evict rows that no
  // comparison chose.
  const int64_t limit = budget_->limit();
  if (s.freq.empty() || limit == 0 || budget_->used() <= limit - limit / kRoomDivisor) {
    return true;
  }
  // A stripe holding under half its share of the budget takes the row without an
  // exchange (shrinking evicts elsewhere): with only a few hot rows of its own it would
  // otherwise refuse every newcomer for good.
  const uint32_t n = static_cast<uint32_t>(s.ids.size());
  if (int64_t{n} * static_cast<int64_t>(charge_) * num_stripes() * 2 < limit) return true;
  uint64_t steps_left = 2ull * n;
  uint32_t pos = 0;
  // Nothing evictable here: the stripe takes it, shrinking evicts elsewhere.
  if (!SeekVictim(s, &steps_left, &pos)) return true;
  // The newcomer takes the victim's place here, so that the comparison decides what
  // leaves. A dirty victim must be written back first: no exchange then.
  const uint64_t victim = s.ids[pos];
  if ((Meta(RowAt(s, pos))->flags & kRowDirty) || Frequency(s, id) <= Frequency(s, victim)) {
    return false;
  }
  Remove(s, victim);
  *exchanged = true;
  return true;
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
    bytes += HeldBy(*s);
  }
  return bytes;
}

}  // namespace ember
