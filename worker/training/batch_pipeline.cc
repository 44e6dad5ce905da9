// Copyright 2026 The Ember Authors.

#include "worker/training/batch_pipeline.h"

#include <algorithm>
#include <utility>

namespace ember::worker {

BatchPipeline::BatchPipeline(std::unique_ptr<DatasetReader> reader, SparseLayout layout,
                             int batch_size, int epochs, int depth,
                             std::optional<ResumePoint> resume)
    : layout_(std::move(layout)),
      batch_size_(batch_size),
      epochs_(epochs),
      depth_(depth),
      resume_(std::move(resume)),
      reader_(std::move(reader)) {
  thread_ = std::thread([this] { Load(); });
}

BatchPipeline::~BatchPipeline() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void BatchPipeline::Load() {
  const int first = resume_.has_value() ? resume_->epoch : 0;
  for (int epoch = first; epoch < epochs_; ++epoch) {
    if (epoch > first || resume_.has_value()) {
      absl::Status s = epoch == first ? reader_->Resume(resume_->progress, resume_->position)
                                      : reader_->Rewind();
      if (!s.ok()) {
        absl::MutexLock lock(&mu_);
        error_ = s;
        done_ = true;
        return;
      }
    }
    while (true) {
      std::unique_ptr<PreparedBatch> batch;
      {
        absl::MutexLock lock(&mu_);
        auto room = [this, epoch]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || static_cast<int>(ready_.size()) < depth_ ||
                 skip_through_epoch_ >= epoch;
        };
        mu_.Await(absl::Condition(&room));
        if (stopping_) return;
        if (skip_through_epoch_ >= epoch) break;  // the consumer skipped this epoch
        if (!free_.empty()) {
          batch = std::move(free_.back());
          free_.pop_back();
        }
      }
      if (batch == nullptr) batch = std::make_unique<PreparedBatch>(layout_);
      batch->start = reader_->position();
      absl::StatusOr<bool> more = reader_->Next(batch_size_, &batch->examples);
      absl::MutexLock lock(&mu_);
      stats_ = reader_->stats();
      if (!more.ok()) {
        error_ = more.status();
        done_ = true;
        return;
      }
      if (!*more) break;
      if (skip_through_epoch_ >= epoch) break;
      batch->epoch = epoch;
      batch->sparse.Build(batch->examples);
      batch->prepared = false;
      batch->read_size = batch->examples.size;
      batch->cold.clear();
      batch->cold_count = 0;
      ready_.push_back(std::move(batch));
    }
  }
  absl::MutexLock lock(&mu_);
  done_ = true;
}

absl::StatusOr<PreparedBatch*> BatchPipeline::Peek() {
  absl::MutexLock lock(&mu_);
  auto known = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !ready_.empty() || done_; };
  mu_.Await(absl::Condition(&known));
  if (!ready_.empty()) return ready_.front().get();
  if (!error_.ok()) return error_;
  return nullptr;
}

std::unique_ptr<PreparedBatch> BatchPipeline::Pop() {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<PreparedBatch> batch = std::move(ready_.front());
  ready_.pop_front();
  return batch;
}

void BatchPipeline::Recycle(std::unique_ptr<PreparedBatch> batch) {
  absl::MutexLock lock(&mu_);
  free_.push_back(std::move(batch));
}

absl::Status BatchPipeline::SkipEpoch(int epoch) {
  absl::MutexLock lock(&mu_);
  skip_through_epoch_ = std::max(skip_through_epoch_, epoch);
  while (true) {
    while (!ready_.empty() && ready_.front()->epoch <= epoch) {
      free_.push_back(std::move(ready_.front()));
      ready_.pop_front();
    }
    if (!ready_.empty() || done_) return error_;
    // Wait for the loader to produce a batch of a later epoch or finish.
    auto progressed = [this]()
                          ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !ready_.empty() || done_; };
    mu_.Await(absl::Condition(&progressed));
  }
}

ReaderStats BatchPipeline::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace ember::worker
