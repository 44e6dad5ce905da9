// Copyright 2026 The Ember Authors.

#include "worker/skew/skew_handler.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model/model_config.h"

namespace ember::worker {

SkewHandler::SkewHandler(const v1::ModelConfig& config, const SparseLayout& layout, int world_size)
    : layout_(layout), num_dense_(static_cast<int>(model::DenseColumns(config).size())) {
  const v1::SkewConfig& skew = config.skew();
  const uint32_t batch_size = config.training().batch_size();
  cold_loss_weight_ = skew.has_cold_loss_weight() ? skew.cold_loss_weight() : 1.0f;
  const bool resample = skew.cold_resample_fraction() > 0;
  if (cold_loss_weight_ != 1.0f || resample) {
    std::vector<FrequencyTracker::Feature> features;
    const uint64_t max_count = std::max<uint64_t>(skew.cold_max_count(), 1);
    for (const std::string& name : skew.cold_features()) {
      for (int f = 0; f < config.features_size(); ++f) {
        if (config.features(f).name() != name) continue;
        // The cluster-wide count is estimated as local x workers, unless the data is
        // partitioned by this very column (every example of an ID meets one worker).
        const uint64_t multiplier =
            config.data().partition_by() == config.features(f).column() ? 1 : world_size;
        // local x multiplier < max_count  <=>  local < ceil(max_count / multiplier).
        const uint64_t threshold = (max_count + multiplier - 1) / multiplier;
        features.push_back({f, static_cast<uint32_t>(std::max<uint64_t>(threshold, 1))});
      }
    }
    const uint64_t max_ids =
        skew.cold_max_tracked_ids() > 0 ? skew.cold_max_tracked_ids() : 1000000;
    tracker_ = std::make_unique<FrequencyTracker>(std::move(features), max_ids);
  }
  if (resample) {
    max_replay_ = static_cast<size_t>(
        std::floor(static_cast<double>(skew.cold_resample_fraction()) * batch_size));
    const size_t capacity =
        skew.cold_replay_capacity() > 0 ? skew.cold_replay_capacity() : 4 * size_t{batch_size};
    replay_ = std::make_unique<ReplayBuffer>(capacity);
  }
  if (skew.hot_cache_steps() > 0) {
    const uint64_t max_rows = skew.hot_cache_max_rows() > 0 ? skew.hot_cache_max_rows() : 100000;
    std::vector<int> dims;
    for (const SparseLayout::Table& t : layout.tables) dims.push_back(t.dim);
    cache_ = std::make_unique<HotRowCache>(std::move(dims), skew.hot_cache_steps(), max_rows);
  }
}

int SkewHandler::PlannedSize(const PreparedBatch& batch) const {
  if (batch.prepared || replay_ == nullptr) return batch.examples.size;
  return batch.examples.size + static_cast<int>(std::min(replay_->size(), max_replay_));
}

void SkewHandler::Prepare(PreparedBatch* batch) {
  if (batch->prepared) return;
  batch->prepared = true;
  batch->read_size = batch->examples.size;
  batch->cold_count = 0;
  if (tracker_ == nullptr) return;
  model::ExampleBatch& ex = batch->examples;
  tracker_->Classify(ex, &batch->cold);
  for (int i = 0; i < batch->read_size; ++i) {
    if (batch->cold[i] == 0) continue;
    ++batch->cold_count;
    if (cold_loss_weight_ != 1.0f) ex.weights[i] *= cold_loss_weight_;
  }
  if (replay_ != nullptr) {
    const size_t n = std::min(replay_->size(), max_replay_);
    if (n > 0) {
      replay_->AppendTo(n, &ex);
      batch->sparse.Build(ex);  // the replays' IDs join the batch's unique IDs
    }
  }
}

void SkewHandler::StartPulls(PsClient& client, uint64_t step, const HotSetView* hot,
                             PreparedBatch* batch, std::vector<PsHandle>* handles) {
  Prepare(batch);
  if (cache_ == nullptr) {
    worker::StartPulls(client, batch->sparse, handles, static_cast<int64_t>(step));
    return;
  }
  PsCallOptions call;
  call.step = static_cast<int64_t>(step);
  SparseBatch& sparse = batch->sparse;
  batch->pull_step = step;
  batch->cache_pulls.resize(static_cast<size_t>(sparse.num_tables()));
  for (int t = 0; t < sparse.num_tables(); ++t) {
    SparseBatch::TableData& table = sparse.table(t);
    HotRowCache::TablePull& pull = batch->cache_pulls[t];
    const std::string& name = layout_.tables[t].name;
    const absl::flat_hash_set<uint64_t>* keys = hot != nullptr ? hot->HotKeys(name) : nullptr;
    cache_->Lookup(t, step, table.ids, absl::MakeSpan(table.rows), keys, &pull);
    if (table.ids.empty()) continue;
    if (pull.direct) {
      handles->push_back(client.PullAsync(name, table.ids, absl::MakeSpan(table.rows), call));
    } else if (!pull.ids.empty()) {
      handles->push_back(client.PullAsync(name, pull.ids, absl::MakeSpan(pull.rows), call));
    }
  }
}

void SkewHandler::FinishPulls(PreparedBatch* batch) {
  if (cache_ == nullptr) return;
  SparseBatch& sparse = batch->sparse;
  for (int t = 0; t < sparse.num_tables(); ++t) {
    SparseBatch::TableData& table = sparse.table(t);
    cache_->Complete(t, batch->pull_step, table.ids, absl::MakeSpan(table.rows),
                     &batch->cache_pulls[t]);
  }
}

void SkewHandler::Commit(const PreparedBatch& batch) {
  if (tracker_ == nullptr) return;
  const model::ExampleBatch& ex = batch.examples;
  tracker_->Count(ex, batch.read_size);
  const int replayed = ex.size - batch.read_size;
  if (replay_ != nullptr) {
    replay_->PopFront(static_cast<size_t>(replayed));
    for (int i = 0; i < batch.read_size; ++i) {
      if (batch.cold[i] != 0) replay_->Push(ex, i);
    }
  }
  pending_[0] += static_cast<float>(batch.cold_count);
  pending_[1] += static_cast<float>(replayed);
}

SkewHandler::StepCounts SkewHandler::TakeStepCounts() {
  StepCounts counts = pending_;
  pending_ = {0, 0, 0, 0};
  if (cache_ != nullptr) {
    counts[2] = static_cast<float>(cache_->hits() - reported_hits_);
    counts[3] = static_cast<float>(cache_->lookups() - reported_lookups_);
    reported_hits_ = cache_->hits();
    reported_lookups_ = cache_->lookups();
  }
  return counts;
}

void SkewHandler::Save(v1::WorkerSkewState* state) const {
  state->Clear();
  if (tracker_ != nullptr) tracker_->Save(state->mutable_tracker());
  if (replay_ != nullptr) replay_->Save(state->mutable_replay());
}

absl::Status SkewHandler::Load(const v1::WorkerSkewState& state) {
  if (tracker_ == nullptr) return absl::OkStatus();
  if (absl::Status s = tracker_->Load(state.tracker()); !s.ok()) return s;
  if (replay_ == nullptr) return absl::OkStatus();
  return replay_->Load(state.replay(), num_dense_, static_cast<int>(layout_.features.size()));
}

}  // namespace ember::worker
