// Copyright 2026 The Ember Authors.
//
// MemoryTier: the resident rows of one table on one shard.
//
// A striped hash map: an ID's stripe is fixed by a hash independent of its slot, and
// each stripe has its own lock, index (id -> arena position) and arena of fixed-size
// rows (row_layout.h), allocated in chunks so a row never moves while resident.
// Batch operations group their keys by stripe and take each stripe's lock once.
// Replacement is CLOCK (second chance) per stripe.
//
// Admission by frequency (TinyLFU-style, StoreOptions::frequency_admission, off by
// default): once a
// stripe has had to evict, it counts the accesses of its IDs in a sketch of 8-bit
// counters (4 per ID in one array of about 8 counters per resident row, halved every
// 10 sightings per row, so that it follows popularity as it changes). While the budget
// is nearly full, a row that a pull read from the backend enters the tier only if its
// ID was seen more often than the row the CLOCK hand would evict next, which it then
// replaces; otherwise the pull answers from the bytes it read. A cold tail of
// once-seen IDs then no longer pushes hot rows out. Rows a push writes always enter
// (they are held until written back).
//
// The budget is charged what each stripe really holds, not an estimate per row: its
// row chunks (the last one partly filled), its index at its real capacity and its
// arena bookkeeping (Stripe::charged, updated by every insert and removal). Removal
// keeps the arena dense (the last row moves into the hole) and frees a chunk once it
// is empty, so eviction gives memory back; rows never move while their stripe's lock
// is held by a caller that still uses them (every move happens inside Remove).
//
// MemoryTier only manages memory; EmbeddingTable decides what to load, write back
// and evict. Methods taking a Stripe& require its `mu` held (see each comment).
// MemoryBudget is shared by every table of a store.

#ifndef EMBER_SERVER_STORE_INTERNAL_MEMORY_TIER_H_
#define EMBER_SERVER_STORE_INTERNAL_MEMORY_TIER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/hash.h"
#include "server/store/row_layout.h"

namespace ember {

// Bytes charged to the memory tier across a store. Thread-safe.
class MemoryBudget {
 public:
  // limit_bytes == 0 means unlimited.
  explicit MemoryBudget(int64_t limit_bytes) : limit_(limit_bytes) {}
  void Charge(int64_t bytes) { used_.fetch_add(bytes, std::memory_order_relaxed); }
  void Release(int64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }
  int64_t used() const { return used_.load(std::memory_order_relaxed); }
  int64_t limit() const { return limit_; }
  // Bytes above the limit (0 when unlimited or under it).
  int64_t Excess() const { return limit_ == 0 ? 0 : std::max<int64_t>(0, used() - limit_); }

 private:
  const int64_t limit_;
  std::atomic<int64_t> used_{0};
};

struct IdHash {
  size_t operator()(uint64_t id) const { return static_cast<size_t>(Mix64(id)); }
};

class MemoryTier {
 public:
  // Bytes of one row chunk, at most: a chunk holds the largest power of two of rows that
  // fits (at least one), in a 16th of a stripe's share of a smaller budget. Small, so
  // that a stripe's partly filled chunk costs little.
  static constexpr size_t kChunkBytes = 4096;

  struct Stripe {
    absl::Mutex mu;
    absl::flat_hash_map<uint64_t, uint32_t, IdHash> index ABSL_GUARDED_BY(mu);
    std::vector<std::unique_ptr<char[]>> chunks ABSL_GUARDED_BY(mu);
    std::vector<uint64_t> ids ABSL_GUARDED_BY(mu);  // arena position -> id; dense
    uint32_t clock_hand ABSL_GUARDED_BY(mu) = 0;
    int64_t charged ABSL_GUARDED_BY(mu) = 0;  // bytes charged to the budget (HeldBy)
    // Loads in flight. A loader reads the backend without the lock, so a row may
    // be loaded, updated, written back and removed by others meanwhile, leaving the
    // loader's copy stale. To close that race without IO under the lock, every
    // removal made while loads are in flight keeps the removed row's bytes in
    // `recent` (empty bytes: deleted by policy); a loader consults them before
    // inserting (FindRemovedSince). Both are pruned as loads finish.
    uint64_t removals ABSL_GUARDED_BY(mu) = 0;               // sequence number of the last removal
    std::vector<uint64_t> active_loads ABSL_GUARDED_BY(mu);  // snapshots of `removals`
    struct Removed {
      uint64_t seq;
      uint64_t id;
      std::string bytes;
    };
    std::vector<Removed> recent ABSL_GUARDED_BY(mu);
    // Frequency sketch (see the top of this file): empty until the stripe first evicts.
    std::vector<uint8_t> freq ABSL_GUARDED_BY(mu);
    uint32_t freq_samples ABSL_GUARDED_BY(mu) = 0;  // sightings since the last halving
    uint32_t freq_period ABSL_GUARDED_BY(mu) = 0;   // sightings between halvings
  };

  // REQUIRES: num_stripes a power of two. `frequency_admission`: see the top of this file.
  MemoryTier(uint32_t row_floats, uint32_t num_stripes, MemoryBudget* budget,
             bool frequency_admission = false);
  ~MemoryTier();

  uint32_t num_stripes() const { return static_cast<uint32_t>(stripes_.size()); }
  uint32_t StripeOf(uint64_t id) const {
    return static_cast<uint32_t>(Mix64Alt(id) >> stripe_shift_) & (num_stripes() - 1);
  }
  Stripe& stripe(uint32_t s) { return *stripes_[s]; }
  size_t row_bytes() const { return row_bytes_; }
  uint32_t chunk_rows() const { return 1u << chunk_shift_; }
  // What one more resident row costs, about (row + index slot at full load + arena
  // bookkeeping): how many rows to evict for a given excess. The budget itself is
  // charged the stripes' real bytes.
  size_t charged_bytes_per_row() const { return charge_; }

  // Returns the resident row of `id` or nullptr. REQUIRES: s.mu held.
  char* Find(Stripe& s, uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    auto it = s.index.find(id);
    return it == s.index.end() ? nullptr : RowAt(s, it->second);
  }
  // Hints the CPU to fetch `id`'s index bucket. REQUIRES: s.mu held.
  void Prefetch(Stripe& s, uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    s.index.prefetch(id);
  }

  // Adds `id` (absent) and returns its row memory with meta zeroed except flags =
  // kRowLive. The caller fills it. Charges the budget. REQUIRES: s.mu held.
  char* Insert(Stripe& s, uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);

  // Insert() filled with a stored row's bytes (row_bytes() of them, as read from the
  // backend); the memory-tier flags stay those of a fresh, clean row. REQUIRES: s.mu held.
  char* InsertStored(Stripe& s, uint64_t id, absl::string_view bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);

  // Removes `id` if resident; returns whether it was. `deleted` says the row is gone
  // for good (policy eviction) rather than written back. The stripe's last row moves
  // into the freed position: row pointers of this stripe taken before the call are
  // invalid after it. REQUIRES: s.mu held.
  bool Remove(Stripe& s, uint64_t id, bool deleted = false) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);

  // Records that non-resident `id` was deleted from the backend, for loads in flight.
  // REQUIRES: s.mu held.
  void NoteDeleted(Stripe& s, uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);

  // Registers a load that is about to read the backend for keys of this stripe;
  // returns the snapshot to pass to FindRemovedSince/EndLoad. REQUIRES: s.mu held.
  uint64_t BeginLoad(Stripe& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  void EndLoad(Stripe& s, uint64_t snapshot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // If `id` left the stripe after `snapshot`, returns its newest removed bytes
  // (empty: deleted) and true. REQUIRES: s.mu held, snapshot registered.
  bool FindRemovedSince(Stripe& s, uint64_t id, uint64_t snapshot, absl::string_view* bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);

  // Advances the CLOCK hand and returns up to `max` victim IDs (rows not referenced
  // since the hand last passed; their referenced bit is cleared on the way).
  // REQUIRES: s.mu held.
  void PickVictims(Stripe& s, size_t max, std::vector<uint64_t>* victims)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);

  // Counts one sighting of `id` in the stripe's frequency sketch (nothing before the
  // stripe has evicted). REQUIRES: s.mu held.
  void RecordAccess(Stripe& s, uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    if (s.freq.empty()) return;
    const uint64_t h = FrequencyHash(id);
    for (uint32_t k = 0; k < 4; ++k) {
      uint8_t& c = s.freq[CounterOf(s, h, k)];
      c += c < 255;
    }
    if (++s.freq_samples >= s.freq_period) HalveFrequencies(s);
  }

  // Whether a row of `id` that a pull read from the backend should enter the tier: yes
  // while the budget has room, the stripe keeps no sketch or holds under half its share;
  // else only if `id` was seen more often than the CLOCK hand's next victim (the hand
  // stops on it, passing referenced rows as PickVictims does) and that victim is clean:
  // it is removed here (`exchanged`), and the newcomer takes its place. Row pointers of
  // the stripe taken before are then invalid, as after Remove. REQUIRES: s.mu held.
  bool AdmitLoaded(Stripe& s, uint64_t id, bool* exchanged) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);

  // The sketch's estimate of `id`'s sightings (0 without a sketch). REQUIRES: s.mu held.
  uint32_t Frequency(Stripe& s, uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);

  // Calls fn(id, row) for each resident row of the stripe. REQUIRES: s.mu held.
  template <typename Fn>
  void ForEach(Stripe& s, Fn fn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    for (const auto& [id, pos] : s.index) fn(id, RowAt(s, pos));
  }

  // Resident rows and the exact bytes held (arenas, index, bookkeeping), summed over
  // stripes; the bytes equal what the budget is charged for this tier. Takes each
  // stripe lock in turn.
  int64_t ResidentRows();
  int64_t HeldBytes();

  static RowMeta* Meta(char* row) { return reinterpret_cast<RowMeta*>(row); }
  static float* Floats(char* row) { return reinterpret_cast<float*>(row + sizeof(RowMeta)); }
  static const RowMeta* Meta(const char* row) { return reinterpret_cast<const RowMeta*>(row); }
  static const float* Floats(const char* row) {
    return reinterpret_cast<const float*>(row + sizeof(RowMeta));
  }

 private:
  char* RowAt(Stripe& s, uint32_t pos) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    return s.chunks[pos >> chunk_shift_].get() +
           size_t{pos & ((1u << chunk_shift_) - 1)} * row_bytes_;
  }
  // The bytes stripe `s` holds: its chunks, its index at its capacity, its arena
  // bookkeeping. REQUIRES: s.mu held.
  int64_t HeldBy(Stripe& s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // Charges the budget the change of HeldBy(s) since the last call. REQUIRES: s.mu held.
  void Recharge(Stripe& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // Moves the CLOCK hand to the next row that may be evicted (live, no write-back in
  // flight, not referenced since the hand last passed; it clears the referenced bits it
  // passes), stops on it and returns its position in `pos`; false once `steps_left`
  // positions were looked at. REQUIRES: s.mu held.
  bool SeekVictim(Stripe& s, uint64_t* steps_left, uint32_t* pos)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // Starts the stripe's frequency sketch, sized by its rows. REQUIRES: s.mu held.
  void StartFrequencies(Stripe& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  void HalveFrequencies(Stripe& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  static uint64_t FrequencyHash(uint64_t id) { return Mix64(id ^ 0x9e3779b97f4a7c15ULL); }
  // The k-th of an ID's 4 counters (double hashing over the hash's two halves).
  static size_t CounterOf(const Stripe& s, uint64_t h, uint32_t k) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    const uint32_t lo = static_cast<uint32_t>(h), hi = static_cast<uint32_t>(h >> 32) | 1;
    return (lo + k * hi) & (s.freq.size() - 1);
  }

  const size_t row_bytes_;
  const int chunk_shift_;
  const size_t charge_;
  const int stripe_shift_;
  MemoryBudget* const budget_;
  const bool frequency_admission_;
  std::vector<std::unique_ptr<Stripe>> stripes_;
};

}  // namespace ember

#endif  // EMBER_SERVER_STORE_INTERNAL_MEMORY_TIER_H_
