// Copyright 2026 The Ember Authors.
//
// HotRowCache: a worker's cache of hot embedding rows (HET-style; ModelConfig.skew.
// hot_cache_steps). A hot key's row, once pulled, is reused for up to `max_age` steps
// instead of being pulled again; the keys that are hot come from the coordinator's hot
// set (hotkeys.proto, HotSetView), refreshed by the caller every step.
//
//   HotRowCache cache(/*dims=*/{16, 16}, /*max_age=*/2, /*max_rows=*/100000);
//   HotRowCache::TablePull pull;
//   cache.Lookup(/*table=*/0, step, ids, absl::MakeSpan(rows), hot_keys, &pull);
//   if (!pull.ids.empty()) ...pull pull.ids into pull.rows (or, when pull.direct,
//                             pull every ID straight into `rows`)...
//   cache.Complete(/*table=*/0, step, ids, absl::MakeSpan(rows), &pull);
//
// Staleness bound: a row pulled for step s serves steps s..s+max_age (a pull for a
// step below s, e.g. a late one, never refreshes an entry). The cache never sees this
// worker's own pushes, so a served row may miss up to max_age steps of updates, its
// own included: usable with SSP/ASP, never with BSP.
//
// Counting: a lookup is a hot key of a pull (Lookup's `hot` contains it); a hit is a
// lookup served from the cache. Keys that are not hot are neither.
//
// Bound: at most `max_rows` rows. A row that finds the cache full first makes the
// cache drop its expired entries (at most once per step); if it is still full, the
// row is not cached.
//
// Thread-safety: none (the trainer thread owns it).

#ifndef EMBER_WORKER_SKEW_HOT_ROW_CACHE_H_
#define EMBER_WORKER_SKEW_HOT_ROW_CACHE_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/types/span.h"

namespace ember::worker {

class HotRowCache {
 public:
  // What is left to pull of one table's IDs after the cache served its part.
  struct TablePull {
    // True when the cache served nothing: pull every ID straight into the caller's
    // rows (ids/index/rows below are empty).
    bool direct = true;
    std::vector<uint64_t> ids;    // the IDs to pull
    std::vector<uint32_t> index;  // each one's position in the caller's IDs
    std::vector<float> rows;      // their rows, [ids x dim]: the pull's output
    // Positions (in the caller's IDs) of hot keys that were not served: cached by
    // Complete once pulled.
    std::vector<uint32_t> to_cache;
  };

  // `dims`: the row size of each table. REQUIRES: max_rows >= 1.
  HotRowCache(std::vector<int> dims, uint32_t max_age, uint64_t max_rows);

  // For the pull of `ids` of `table` at training step `step`: every ID in `hot` whose
  // cached row was pulled at most max_age steps before `step` is written to its row
  // of `rows` ([ids x dim]) and left out of the pull; `pull` receives the rest.
  // `hot` may be null (nothing is hot). Counts lookups and hits.
  void Lookup(int table, uint64_t step, absl::Span<const uint64_t> ids, absl::Span<float> rows,
              const absl::flat_hash_set<uint64_t>* hot, TablePull* pull);

  // After the pull of `pull` succeeded: scatters pull->rows into `rows` (unless
  // direct) and caches the pulled hot rows with `step`. `ids` and `rows` as given to
  // Lookup.
  void Complete(int table, uint64_t step, absl::Span<const uint64_t> ids, absl::Span<float> rows,
                TablePull* pull);

  uint64_t lookups() const { return lookups_; }
  uint64_t hits() const { return hits_; }
  // Rows held now, over tables.
  uint64_t rows() const { return rows_; }

 private:
  struct Entry {
    uint64_t step = 0;  // the step the row was pulled for
    uint32_t slot = 0;  // its row in the table's arena
  };
  struct Table {
    int dim = 0;
    absl::flat_hash_map<uint64_t, Entry> entries;
    std::vector<float> arena;    // [slots x dim]
    std::vector<uint32_t> free;  // free slots of the arena
  };

  bool Fresh(const Entry& e, uint64_t step) const {
    return e.step <= step && step - e.step <= max_age_;
  }
  // Drops every expired entry (for `step`) of every table.
  void Sweep(uint64_t step);
  void Insert(int table, uint64_t step, uint64_t id, const float* row);

  const uint32_t max_age_;
  const uint64_t max_rows_;
  std::vector<Table> tables_;
  uint64_t rows_ = 0;
  uint64_t lookups_ = 0;
  uint64_t hits_ = 0;
  bool swept_ = false;  // a sweep ran at swept_step_
  uint64_t swept_step_ = 0;
  std::vector<uint32_t> served_;  // Lookup's scratch: positions served from the cache
};

}  // namespace ember::worker

#endif  // EMBER_WORKER_SKEW_HOT_ROW_CACHE_H_
