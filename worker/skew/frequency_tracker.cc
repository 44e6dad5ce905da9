// Copyright 2026 The Ember Authors.

#include "worker/skew/frequency_tracker.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ember::worker {

FrequencyTracker::FrequencyTracker(std::vector<Feature> features, uint64_t max_ids)
    : features_(std::move(features)),
      max_ids_(max_ids),
      counts_(features_.size()),
      batch_counts_(features_.size()) {
  assert(max_ids_ >= 1);
  for ([[maybe_unused]] const Feature& f : features_) assert(f.threshold >= 1);
}

uint32_t FrequencyTracker::CountOf(int feature, uint64_t id) const {
  const auto& counts = counts_[feature];
  auto it = counts.find(id);
  return it == counts.end() ? 0 : it->second;
}

bool FrequencyTracker::Add(int feature, uint64_t id) {
  auto& counts = counts_[feature];
  auto it = counts.find(id);
  if (it != counts.end()) {
    if (it->second < features_[feature].threshold) ++it->second;
    return true;
  }
  if (tracked_ >= max_ids_) {
    ++untracked_;
    return false;
  }
  counts.emplace(id, 1);
  ++tracked_;
  return true;
}

void FrequencyTracker::Classify(const model::ExampleBatch& batch, std::vector<uint8_t>* cold) {
  cold->assign(static_cast<size_t>(batch.size), 0);
  for (auto& m : batch_counts_) m.clear();
  for (int i = 0; i < batch.size; ++i) {
    bool is_cold = false;
    for (size_t f = 0; f < features_.size(); ++f) {
      const model::SparseColumn& column = batch.sparse[features_[f].sparse_index];
      for (uint32_t k = column.offsets[i]; k < column.offsets[i + 1]; ++k) {
        const uint64_t id = column.ids[k];
        uint32_t& seen = batch_counts_[f][id];
        // The count before this example: the tracker's plus the batch's earlier ones.
        const uint64_t count = static_cast<uint64_t>(CountOf(static_cast<int>(f), id)) + seen;
        if (count < features_[f].threshold) is_cold = true;
        if (seen < features_[f].threshold) ++seen;
      }
    }
    (*cold)[i] = is_cold ? 1 : 0;
  }
}

void FrequencyTracker::Count(const model::ExampleBatch& batch, int examples) {
  for (int i = 0; i < examples; ++i) {
    for (size_t f = 0; f < features_.size(); ++f) {
      const model::SparseColumn& column = batch.sparse[features_[f].sparse_index];
      for (uint32_t k = column.offsets[i]; k < column.offsets[i + 1]; ++k) {
        Add(static_cast<int>(f), column.ids[k]);
      }
    }
  }
}

void FrequencyTracker::Save(v1::FrequencyTrackerState* state) const {
  state->Clear();
  std::vector<std::pair<uint64_t, uint32_t>> sorted;
  for (const auto& counts : counts_) {
    sorted.assign(counts.begin(), counts.end());
    std::sort(sorted.begin(), sorted.end());
    v1::FrequencyTrackerState::Feature* out = state->add_features();
    out->mutable_id_deltas()->Reserve(static_cast<int>(sorted.size()));
    out->mutable_counts()->Reserve(static_cast<int>(sorted.size()));
    uint64_t previous = 0;
    for (const auto& [id, count] : sorted) {
      out->add_id_deltas(id - previous);
      out->add_counts(count);
      previous = id;
    }
  }
  state->set_untracked(untracked_);
}

absl::Status FrequencyTracker::Load(const v1::FrequencyTrackerState& state) {
  if (state.features_size() != num_features()) {
    return absl::InvalidArgumentError(absl::StrCat("frequency tracker state has ",
                                                   state.features_size(), " features, the job ",
                                                   num_features()));
  }
  std::vector<absl::flat_hash_map<uint64_t, uint32_t>> counts(features_.size());
  uint64_t tracked = 0;
  for (int f = 0; f < num_features(); ++f) {
    const v1::FrequencyTrackerState::Feature& in = state.features(f);
    if (in.id_deltas_size() != in.counts_size()) {
      return absl::InvalidArgumentError(absl::StrCat("frequency tracker state, feature ", f, ": ",
                                                     in.id_deltas_size(), " IDs but ",
                                                     in.counts_size(), " counts"));
    }
    tracked += static_cast<uint64_t>(in.counts_size());
    if (tracked > max_ids_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "frequency tracker state holds more than cold_max_tracked_ids = ", max_ids_, " IDs"));
    }
    counts[f].reserve(static_cast<size_t>(in.counts_size()));
    uint64_t id = 0;
    for (int i = 0; i < in.counts_size(); ++i) {
      if ((i > 0 && in.id_deltas(i) == 0) || in.id_deltas(i) > ~uint64_t{0} - id) {
        return absl::InvalidArgumentError(absl::StrCat("frequency tracker state, feature ", f,
                                                       ": IDs not strictly ascending at ", i));
      }
      id += in.id_deltas(i);
      const uint32_t count = in.counts(i);
      if (count == 0 || count > features_[f].threshold) {
        return absl::InvalidArgumentError(absl::StrCat("frequency tracker state, feature ", f,
                                                       ": count ", count, " of ID ", id,
                                                       " is outside 1..", features_[f].threshold));
      }
      counts[f].emplace(id, count);
    }
  }
  counts_ = std::move(counts);
  tracked_ = tracked;
  untracked_ = state.untracked();
  return absl::OkStatus();
}

}  // namespace ember::worker
