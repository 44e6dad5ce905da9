// Copyright 2026 The Ember Authors.
//
// FrequencyTracker: a worker's counts of the IDs of its cold features (ModelConfig.skew,
// docs/ARCHITECTURE.md "Skew"), and the judgement of which training examples are cold.
//
// Counting is exact, per (feature, ID), in a hash map bounded by `max_ids` pairs, and
// saturates at the feature's cold threshold: the tracker only needs to tell counts
// below the threshold apart. A pair first seen when the map is full is not counted
// (its count stays 0: the ID stays cold) and adds to untracked(). An ID is cold while
// its count is below its feature's threshold; the caller derives the threshold from
// the cluster-wide bound (skew.cold_max_count) and the estimate it uses (local count x
// workers, see SkewHandler).
//
//   FrequencyTracker tracker({{/*sparse_index=*/0, /*threshold=*/10},
//                             {/*sparse_index=*/1, /*threshold=*/10}}, 1000000);
//   std::vector<uint8_t> cold;
//   tracker.Classify(batch, &cold);   // counts of the batch's earlier examples included
//   ...train...
//   tracker.Count(batch);             // then count the batch itself
//
// An example's bucket is decided from the counts before the example is counted:
// Classify walks the batch in order and sees the tracker's counts plus the batch's
// earlier examples, without changing the tracker; Count then adds the batch. So a
// batch judged twice (before and after a checkpoint) is judged the same, and the
// result depends only on the data order.
//
// Thread-safety: none (the trainer thread owns it).

#ifndef EMBER_WORKER_SKEW_FREQUENCY_TRACKER_H_
#define EMBER_WORKER_SKEW_FREQUENCY_TRACKER_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/model/example_batch.h"
#include "ember/v1/checkpoint.pb.h"

namespace ember::worker {

class FrequencyTracker {
 public:
  struct Feature {
    int sparse_index = 0;    // the feature's column in model::ExampleBatch.sparse
    uint32_t threshold = 1;  // an ID with a count below this is cold; >= 1
  };

  // REQUIRES: every threshold >= 1, max_ids >= 1.
  FrequencyTracker(std::vector<Feature> features, uint64_t max_ids);

  // Writes cold[i] = 1 when example i of `batch` has, in any tracked feature, an ID
  // whose count (the tracker's plus its occurrences in examples 0..i-1 of the batch)
  // is below the feature's threshold, else 0. Does not change the counts.
  // REQUIRES: batch.sparse has every tracked feature's column.
  void Classify(const model::ExampleBatch& batch, std::vector<uint8_t>* cold);

  // Counts every tracked ID of the first `examples` examples of `batch`, in order.
  void Count(const model::ExampleBatch& batch, int examples);

  // One feature's count of `id` (saturated at the threshold; 0 for an unknown ID).
  uint32_t CountOf(int feature, uint64_t id) const;
  // Adds one occurrence; false when the pair is not tracked (the map is full).
  bool Add(int feature, uint64_t id);

  int num_features() const { return static_cast<int>(features_.size()); }
  const Feature& feature(int f) const { return features_[f]; }
  uint64_t tracked_ids() const { return tracked_; }
  uint64_t untracked() const { return untracked_; }

  // The counts as a checkpoint message (IDs ascending per feature: deterministic).
  void Save(v1::FrequencyTrackerState* state) const;
  // Replaces the counts with a Save()d state. INVALID_ARGUMENT (the tracker unchanged)
  // when it does not fit: another number of features, mismatched lengths, IDs not
  // ascending, a count of 0 or above the threshold, more pairs than max_ids.
  absl::Status Load(const v1::FrequencyTrackerState& state);

 private:
  const std::vector<Feature> features_;
  const uint64_t max_ids_;
  std::vector<absl::flat_hash_map<uint64_t, uint32_t>> counts_;  // per feature
  uint64_t tracked_ = 0;                                         // pairs held, over features
  uint64_t untracked_ = 0;
  // Classify's scratch: per feature, the batch's occurrences so far.
  std::vector<absl::flat_hash_map<uint64_t, uint32_t>> batch_counts_;
};

}  // namespace ember::worker

#endif  // EMBER_WORKER_SKEW_FREQUENCY_TRACKER_H_
