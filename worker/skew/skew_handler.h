// Copyright 2026 The Ember Authors.
//
// SkewHandler: the worker side of ModelConfig.skew (docs/ARCHITECTURE.md "Skew") for one training
// attempt: which examples are cold (FrequencyTracker), their loss weight, their replay
// (ReplayBuffer) and the hot-row cache on pulls (HotRowCache).
//
// A batch goes through it in three calls, in training order:
//
//   skew.StartPulls(client, step, hot_set, batch, &handles);  // Prepare + pulls
//   WaitAll(&handles);  skew.FinishPulls(batch);
//   skew.Commit(*batch);                                      // before the next Prepare
//
//  - Prepare (inside StartPulls; once per batch) judges the read examples against the
//    counts of every batch committed before it, multiplies the weights of cold ones by
//    cold_loss_weight and appends up to floor(cold_resample_fraction x batch_size)
//    buffered examples (rebuilding the batch's unique IDs). It changes no state, so a
//    prepared batch that is dropped (a prefetch at the end of an epoch) leaves none
//    behind, and a batch prepared ahead (SSP/ASP prefetch) sees what it would have
//    seen when trained.
//  - Commit counts the batch's read examples, removes its replays from the buffer and
//    buffers its cold examples. The state after Commit of step s is what a checkpoint
//    at step s holds (Save / Load), so a restored run judges and replays exactly like
//    one that never stopped.
//
// The number of examples a batch trains with (PlannedSize) is known before it is
// prepared: the replays it will take depend only on the buffer after the last commit.
// With every option off (active() false) StartPulls is worker::StartPulls and the
// rest does nothing: training is bitwise the same as without the handler.
//
// Thread-safety: none (the trainer thread owns it).

#ifndef EMBER_WORKER_SKEW_SKEW_HANDLER_H_
#define EMBER_WORKER_SKEW_SKEW_HANDLER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "common/hot_set.h"
#include "common/ps_client.h"
#include "ember/v1/checkpoint.pb.h"
#include "ember/v1/model.pb.h"
#include "worker/skew/frequency_tracker.h"
#include "worker/skew/hot_row_cache.h"
#include "worker/skew/replay_buffer.h"
#include "worker/training/batch_pipeline.h"
#include "worker/training/sparse_features.h"

namespace ember::worker {

class SkewHandler {
 public:
  // Totals over every worker of the job since it started (the trainer sums each
  // step's StepCounts over workers; checkpoints keep them).
  struct Totals {
    uint64_t cold_examples = 0;       // read examples judged cold
    uint64_t resampled_examples = 0;  // replayed examples trained
    uint64_t hot_cache_hits = 0;
    uint64_t hot_cache_lookups = 0;
  };
  // This worker's counts since the last TakeStepCounts, in Totals order, as floats
  // (exact: each is at most a few batches' examples or IDs).
  using StepCounts = std::array<float, 4>;

  // `config` normalized (skew checked by model::NormalizeModelConfig); `layout` its sparse
  // layout; `world_size` the job's workers (the count estimate's multiplier).
  SkewHandler(const v1::ModelConfig& config, const SparseLayout& layout, int world_size);

  // Cold-example handling (loss weight or replay) on.
  bool cold_active() const { return tracker_ != nullptr; }
  // The hot-row cache on.
  bool cache_active() const { return cache_ != nullptr; }
  bool active() const { return cold_active() || cache_active(); }

  // The examples `batch` trains with: the read ones plus the replays it takes (or
  // took, once prepared).
  int PlannedSize(const PreparedBatch& batch) const;

  // Judges, weights and extends `batch` (see above); a prepared batch is left alone.
  void Prepare(PreparedBatch* batch);

  // Prepares `batch`, then starts the pulls of its rows for training step `step` into
  // its sparse tables: through the hot cache when it is on (the hot keys of `hot`,
  // which may be null: nothing hot), else worker::StartPulls. `batch` must stay alive
  // and unchanged until FinishPulls.
  void StartPulls(PsClient& client, uint64_t step, const HotSetView* hot, PreparedBatch* batch,
                  std::vector<PsHandle>* handles);
  // After every handle of StartPulls succeeded: fills the rows the cache kept out of
  // the pulls and caches the pulled hot rows.
  void FinishPulls(PreparedBatch* batch);

  // Applies a trained batch to the state (see above). REQUIRES: `batch` prepared
  // after the previous Commit.
  void Commit(const PreparedBatch& batch);

  // This worker's counts since the last call (cold, replayed, cache hits, lookups).
  StepCounts TakeStepCounts();
  Totals& totals() { return totals_; }
  const Totals& totals() const { return totals_; }

  // The state a checkpoint keeps (tracker and replay buffer; empty when cold handling
  // is off).
  void Save(v1::WorkerSkewState* state) const;
  // Restores a Save()d state. Nothing to do when cold handling is off (the state is
  // ignored, so checkpoints without one load). INVALID_ARGUMENT when it does not fit.
  absl::Status Load(const v1::WorkerSkewState& state);

  // Buffered examples waiting for replay, and pairs the tracker counts (tests, logs).
  size_t buffered() const { return replay_ ? replay_->size() : 0; }
  const FrequencyTracker* tracker() const { return tracker_.get(); }

 private:
  const SparseLayout layout_;
  const int num_dense_;
  float cold_loss_weight_ = 1;
  size_t max_replay_ = 0;  // replays per batch
  std::unique_ptr<FrequencyTracker> tracker_;
  std::unique_ptr<ReplayBuffer> replay_;  // with resampling only
  std::unique_ptr<HotRowCache> cache_;
  Totals totals_;
  StepCounts pending_ = {0, 0, 0, 0};
  uint64_t reported_hits_ = 0, reported_lookups_ = 0;
};

}  // namespace ember::worker

#endif  // EMBER_WORKER_SKEW_SKEW_HANDLER_H_
