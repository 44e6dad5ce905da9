// Copyright 2026 The Ember Authors.
//
// BatchPipeline: a loader thread that reads a worker's partition ahead of training.
// It parses batches and builds their unique IDs (SparseBatch::Build) while the
// trainer computes, keeping up to `depth` batches ready, and walks the epochs.
//
//   BatchPipeline pipeline(std::move(reader), layout, /*batch_size=*/1024,
//                          /*epochs=*/2, /*depth=*/3);
//   while (true) {
//     absl::StatusOr<PreparedBatch*> b = pipeline.Peek();   // blocks
//     if (!b.ok()) return b.status();          // reader error (malformed data, IO)
//     if (*b == nullptr) break;                // every epoch done
//     if ((*b)->epoch != epoch) {...}          // the first batch of the next epoch
//     std::unique_ptr<PreparedBatch> batch = pipeline.Pop();
//     ...train...
//     pipeline.Recycle(std::move(batch));      // reuse its buffers
//   }
//
// SkipEpoch drops the rest of an epoch (workers of a synchronous job end an epoch
// together when the first of them runs out of data).
//
// Thread-safety: Peek/Pop/Recycle/SkipEpoch from one consumer thread.

#ifndef EMBER_WORKER_TRAINING_BATCH_PIPELINE_H_
#define EMBER_WORKER_TRAINING_BATCH_PIPELINE_H_

#include <deque>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/model/example_batch.h"
#include "worker/data/reader.h"
#include "worker/data/reader_position.h"
#include "worker/skew/hot_row_cache.h"
#include "worker/training/sparse_features.h"

namespace ember::worker {

struct PreparedBatch {
  explicit PreparedBatch(const SparseLayout& layout) : sparse(layout) {}
  int epoch = 0;
  ReaderPosition start;  // the reader's position before this batch (a checkpoint cursor)
  model::ExampleBatch examples;
  SparseBatch sparse;

  // Skew handling (worker/skew/skew_handler.h); the loader resets these for every batch.
  bool prepared = false;      // SkewHandler::Prepare ran
  int read_size = 0;          // examples read from the data: examples.size before replays
  std::vector<uint8_t> cold;  // per read example: judged cold (cold-example options on)
  int cold_count = 0;         // read examples judged cold
  uint64_t pull_step = 0;     // the step its rows were pulled for (hot cache)
  std::vector<HotRowCache::TablePull> cache_pulls;  // per table, the hot cache's pull plan
};

class BatchPipeline {
 public:
  // Starts the loader thread. REQUIRES: batch_size >= 1, epochs >= 1, depth >= 1.
  // With `resume`, the loader starts in epoch resume->epoch at resume->position with
  // resume->progress (a checkpoint's data position: DatasetReader::Resume) instead of
  // at the start of epoch 0.
  BatchPipeline(std::unique_ptr<DatasetReader> reader, SparseLayout layout, int batch_size,
                int epochs, int depth, std::optional<ResumePoint> resume = std::nullopt);
  // Stops and joins the loader thread (it finishes the batch it is reading).
  ~BatchPipeline();

  BatchPipeline(const BatchPipeline&) = delete;
  BatchPipeline& operator=(const BatchPipeline&) = delete;

  // The next batch without removing it; nullptr after the last epoch; the reader's
  // error once every batch before it was consumed. Blocks until known.
  absl::StatusOr<PreparedBatch*> Peek();
  // Removes and returns the batch Peek returned. REQUIRES: Peek returned a batch.
  std::unique_ptr<PreparedBatch> Pop();
  // Returns a consumed batch for reuse.
  void Recycle(std::unique_ptr<PreparedBatch> batch);
  // Discards every remaining batch of `epoch` (blocking until the loader moved past it).
  absl::Status SkipEpoch(int epoch);

  // Reader statistics (a copy taken under the lock).
  ReaderStats stats() const;

 private:
  void Load();

  const SparseLayout layout_;
  const int batch_size_;
  const int epochs_;
  const int depth_;
  const std::optional<ResumePoint> resume_;
  std::unique_ptr<DatasetReader> reader_;  // used by the loader thread only

  mutable absl::Mutex mu_;
  std::deque<std::unique_ptr<PreparedBatch>> ready_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<PreparedBatch>> free_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;            // loader finished (all epochs or error)
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;        // destructor running
  int skip_through_epoch_ ABSL_GUARDED_BY(mu_) = -1;  // loader drops batches of epochs <= this
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  ReaderStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace ember::worker

#endif  // EMBER_WORKER_TRAINING_BATCH_PIPELINE_H_
