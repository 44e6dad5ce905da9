// Copyright 2026 The Ember Authors.

#include "worker/skew/hot_row_cache.h"

#include <cassert>
#include <cstring>

namespace ember::worker {

HotRowCache::HotRowCache(std::vector<int> dims, uint32_t max_age, uint64_t max_rows)
    : max_age_(max_age), max_rows_(max_rows), tables_(dims.size()) {
  assert(max_rows_ >= 1);
  for (size_t t = 0; t < dims.size(); ++t) tables_[t].dim = dims[t];
}

void HotRowCache::Lookup(int table, uint64_t step, absl::Span<const uint64_t> ids,
                         absl::Span<float> rows, const absl::flat_hash_set<uint64_t>* hot,
                         TablePull* pull) {
  Table& t = tables_[table];
  const size_t dim = static_cast<size_t>(t.dim);
  assert(rows.size() == ids.size() * dim);
  pull->direct = true;
  pull->ids.clear();
  pull->index.clear();
  pull->rows.clear();
  pull->to_cache.clear();
  if (hot == nullptr || hot->empty()) return;
  served_.clear();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!hot->contains(ids[i])) continue;
    ++lookups_;
    auto it = t.entries.find(ids[i]);
    if (it != t.entries.end() && Fresh(it->second, step)) {
      ++hits_;
      std::memcpy(&rows[i * dim], &t.arena[it->second.slot * dim], dim * sizeof(float));
      served_.push_back(static_cast<uint32_t>(i));
    } else {
      pull->to_cache.push_back(static_cast<uint32_t>(i));
    }
  }
  if (served_.empty()) return;
  pull->direct = false;
  size_t next_served = 0;  // served_ is ascending
  for (size_t i = 0; i < ids.size(); ++i) {
    if (next_served < served_.size() && served_[next_served] == i) {
      ++next_served;
      continue;
    }
    pull->ids.push_back(ids[i]);
    pull->index.push_back(static_cast<uint32_t>(i));
  }
  pull->rows.resize(pull->ids.size() * dim);
}

void HotRowCache::Complete(int table, uint64_t step, absl::Span<const uint64_t> ids,
                           absl::Span<float> rows, TablePull* pull) {
  Table& t = tables_[table];
  const size_t dim = static_cast<size_t>(t.dim);
  if (!pull->direct) {
    for (size_t k = 0; k < pull->ids.size(); ++k) {
      std::memcpy(&rows[pull->index[k] * dim], &pull->rows[k * dim], dim * sizeof(float));
    }
  }
  for (uint32_t i : pull->to_cache) Insert(table, step, ids[i], &rows[i * dim]);
}

void HotRowCache::Insert(int table, uint64_t step, uint64_t id, const float* row) {
  Table& t = tables_[table];
  const size_t dim = static_cast<size_t>(t.dim);
  auto it = t.entries.find(id);
  if (it != t.entries.end()) {
    if (step < it->second.step) return;  // a late pull never replaces a newer row
    it->second.step = step;
    std::memcpy(&t.arena[it->second.slot * dim], row, dim * sizeof(float));
    return;
  }
  if (rows_ >= max_rows_) {
    if (swept_ && swept_step_ == step) return;
    Sweep(step);
    if (rows_ >= max_rows_) return;
  }
  uint32_t slot;
  if (!t.free.empty()) {
    slot = t.free.back();
    t.free.pop_back();
  } else {
    slot = static_cast<uint32_t>(t.arena.size() / dim);
    t.arena.resize(t.arena.size() + dim);
  }
  std::memcpy(&t.arena[slot * dim], row, dim * sizeof(float));
  t.entries.emplace(id, Entry{step, slot});
  ++rows_;
}

void HotRowCache::Sweep(uint64_t step) {
  swept_ = true;
  swept_step_ = step;
  for (Table& t : tables_) {
    for (auto it = t.entries.begin(); it != t.entries.end();) {
      if (step > it->second.step && step - it->second.step > max_age_) {
        t.free.push_back(it->second.slot);
        t.entries.erase(it++);
        --rows_;
      } else {
        ++it;
      }
    }
  }
}

}  // namespace ember::worker
