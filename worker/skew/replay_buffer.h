// Copyright 2026 The Ember Authors.
//
// ReplayBuffer: a bounded FIFO of training examples (a worker's cold examples waiting to
// be replayed once, ModelConfig.skew.cold_resample_fraction).
//
//   ReplayBuffer buffer(/*capacity=*/4096);
//   buffer.Push(batch, i);                  // copy example i; drops the oldest when full
//   const size_t n = std::min(buffer.size(), max_replay);
//   buffer.AppendTo(n, &next_batch);        // the n oldest, appended to a batch
//   ...train next_batch...
//   buffer.PopFront(n);                     // each replayed example leaves the buffer
//
// AppendTo does not remove what it copies, so a batch prepared but not trained (a
// dropped prefetch) leaves the buffer as it was; PopFront removes them once trained.
// An example keeps its label, weight, dense values and every sparse feature's IDs,
// bit for bit; EVAL columns (test data only) are not kept.
//
// Thread-safety: none (the trainer thread owns it).

#ifndef EMBER_WORKER_SKEW_REPLAY_BUFFER_H_
#define EMBER_WORKER_SKEW_REPLAY_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "absl/status/status.h"
#include "common/model/example_batch.h"
#include "ember/v1/checkpoint.pb.h"

namespace ember::worker {

class ReplayBuffer {
 public:
  // REQUIRES: capacity >= 1.
  explicit ReplayBuffer(size_t capacity);

  size_t size() const { return examples_.size(); }
  size_t capacity() const { return capacity_; }
  // Examples pushed out unreplayed (the buffer was full) so far.
  uint64_t dropped() const { return dropped_; }

  // Copies example `i` of `batch` to the back; when the buffer is full the oldest
  // example is dropped first. REQUIRES: 0 <= i < batch.size.
  void Push(const model::ExampleBatch& batch, int i);

  // Appends copies of the `n` oldest examples to `batch`, in order (EVAL columns, if
  // the batch has any, get NaN). REQUIRES: n <= size(); batch has the layout of the
  // pushed examples (num_dense, number of sparse features).
  void AppendTo(size_t n, model::ExampleBatch* batch) const;

  // Removes the `n` oldest examples. REQUIRES: n <= size().
  void PopFront(size_t n);

  // The buffer as a checkpoint message (oldest first).
  void Save(v1::ReplayBufferState* state) const;
  // Replaces the contents with a Save()d state of a buffer with the same layout
  // (`num_dense`, `num_features`). INVALID_ARGUMENT (the buffer unchanged) when it does
  // not fit: another layout, inconsistent lengths, more examples than the capacity.
  absl::Status Load(const v1::ReplayBufferState& state, int num_dense, int num_features);

 private:
  struct Example {
    float label = 0;
    float weight = 1;
    std::vector<float> dense;
    std::vector<uint64_t> ids;   // every feature's IDs, concatenated
    std::vector<uint32_t> ends;  // per feature, the end of its IDs in `ids`
  };

  const size_t capacity_;
  std::deque<Example> examples_;
  uint64_t dropped_ = 0;
};

}  // namespace ember::worker

#endif  // EMBER_WORKER_SKEW_REPLAY_BUFFER_H_
