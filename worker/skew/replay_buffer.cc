// Copyright 2026 The Ember Authors.

#include "worker/skew/replay_buffer.h"

#include <cassert>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ember::worker {

ReplayBuffer::ReplayBuffer(size_t capacity) : capacity_(capacity) { assert(capacity_ >= 1); }

void ReplayBuffer::Push(const model::ExampleBatch& batch, int i) {
  assert(i >= 0 && i < batch.size);
  if (examples_.size() >= capacity_) {
    examples_.pop_front();
    ++dropped_;
  }
  Example e;
  e.label = batch.labels[i];
  e.weight = batch.weights[i];
  const size_t d = static_cast<size_t>(batch.num_dense);
  e.dense.assign(batch.dense.begin() + static_cast<std::ptrdiff_t>(i * d),
                 batch.dense.begin() + static_cast<std::ptrdiff_t>((i + 1) * d));
  e.ends.reserve(batch.sparse.size());
  for (const model::SparseColumn& column : batch.sparse) {
    e.ids.insert(e.ids.end(), column.ids.begin() + column.offsets[i],
                 column.ids.begin() + column.offsets[i + 1]);
    e.ends.push_back(static_cast<uint32_t>(e.ids.size()));
  }
  examples_.push_back(std::move(e));
}

void ReplayBuffer::AppendTo(size_t n, model::ExampleBatch* batch) const {
  assert(n <= examples_.size());
  for (size_t k = 0; k < n; ++k) {
    const Example& e = examples_[k];
    assert(e.dense.size() == static_cast<size_t>(batch->num_dense));
    assert(e.ends.size() == batch->sparse.size());
    batch->labels.push_back(e.label);
    batch->weights.push_back(e.weight);
    batch->dense.insert(batch->dense.end(), e.dense.begin(), e.dense.end());
    uint32_t begin = 0;
    for (size_t f = 0; f < e.ends.size(); ++f) {
      model::SparseColumn& column = batch->sparse[f];
      column.ids.insert(column.ids.end(), e.ids.begin() + begin, e.ids.begin() + e.ends[f]);
      column.offsets.push_back(static_cast<uint32_t>(column.ids.size()));
      begin = e.ends[f];
    }
    for (std::vector<float>& eval : batch->eval) {
      eval.push_back(std::numeric_limits<float>::quiet_NaN());
    }
    ++batch->size;
  }
}

void ReplayBuffer::PopFront(size_t n) {
  assert(n <= examples_.size());
  examples_.erase(examples_.begin(), examples_.begin() + static_cast<std::ptrdiff_t>(n));
}

void ReplayBuffer::Save(v1::ReplayBufferState* state) const {
  state->Clear();
  state->set_size(static_cast<uint32_t>(examples_.size()));
  state->set_dropped(dropped_);
  if (examples_.empty()) return;
  const size_t num_features = examples_.front().ends.size();
  state->set_num_dense(static_cast<uint32_t>(examples_.front().dense.size()));
  for (size_t f = 0; f < num_features; ++f) state->add_features();
  for (const Example& e : examples_) {
    state->add_labels(e.label);
    state->add_weights(e.weight);
    for (float v : e.dense) state->add_dense(v);
    uint32_t begin = 0;
    for (size_t f = 0; f < num_features; ++f) {
      v1::ReplayBufferState::Feature* out = state->mutable_features(static_cast<int>(f));
      out->add_lengths(e.ends[f] - begin);
      for (uint32_t k = begin; k < e.ends[f]; ++k) out->add_ids(e.ids[k]);
      begin = e.ends[f];
    }
  }
}

absl::Status ReplayBuffer::Load(const v1::ReplayBufferState& state, int num_dense,
                                int num_features) {
  const auto bad = [](auto... why) {
    return absl::InvalidArgumentError(absl::StrCat("replay buffer state: ", why...));
  };
  const uint64_t n = state.size();
  if (n > capacity_) return bad(n, " examples, the capacity is ", capacity_);
  if (n == 0) {
    examples_.clear();
    dropped_ = state.dropped();
    return absl::OkStatus();
  }
  if (state.num_dense() != static_cast<uint32_t>(num_dense) ||
      state.features_size() != num_features) {
    return bad(state.num_dense(), " dense values and ", state.features_size(),
               " features per example, the job has ", num_dense, " and ", num_features);
  }
  if (static_cast<uint64_t>(state.labels_size()) != n ||
      static_cast<uint64_t>(state.weights_size()) != n ||
      static_cast<uint64_t>(state.dense_size()) != n * static_cast<uint64_t>(num_dense)) {
    return bad("labels, weights or dense values do not match ", n, " examples");
  }
  for (int f = 0; f < num_features; ++f) {
    const v1::ReplayBufferState::Feature& in = state.features(f);
    if (static_cast<uint64_t>(in.lengths_size()) != n) {
      return bad("feature ", f, " has ", in.lengths_size(), " lengths for ", n, " examples");
    }
    uint64_t total = 0;
    for (uint32_t len : in.lengths()) total += len;
    if (total != static_cast<uint64_t>(in.ids_size())) {
      return bad("feature ", f, " lengths add up to ", total, " IDs, it has ", in.ids_size());
    }
  }
  std::deque<Example> examples;
  std::vector<int> next_id(static_cast<size_t>(num_features), 0);
  for (uint64_t i = 0; i < n; ++i) {
    Example e;
    e.label = state.labels(static_cast<int>(i));
    e.weight = state.weights(static_cast<int>(i));
    const int d = num_dense;
    e.dense.assign(state.dense().begin() + static_cast<int>(i) * d,
                   state.dense().begin() + static_cast<int>(i + 1) * d);
    for (int f = 0; f < num_features; ++f) {
      const v1::ReplayBufferState::Feature& in = state.features(f);
      const int len = static_cast<int>(in.lengths(static_cast<int>(i)));
      e.ids.insert(e.ids.end(), in.ids().begin() + next_id[f], in.ids().begin() + next_id[f] + len);
      next_id[f] += len;
      e.ends.push_back(static_cast<uint32_t>(e.ids.size()));
    }
    examples.push_back(std::move(e));
  }
  examples_ = std::move(examples);
  dropped_ = state.dropped();
  return absl::OkStatus();
}

}  // namespace ember::worker
