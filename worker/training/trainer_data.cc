// Copyright 2026 The Ember Authors.
//
// The Trainer's data position (trainer_internal.h): what a checkpoint keeps of where the
// workers read (the dataset's files, the epoch's progress under earlier world sizes, each
// rank's cursor), where a resume continues at its own or another world size
// (worker/data/reader_position.h), the empty steps of training.epoch_end LAST_OUT, and the
// examples of each epoch.

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/model/model_config.h"
#include "common/status_macros.h"
#include "worker/data/file_source.h"
#include "worker/data/reader_position.h"
#include "worker/training/trainer_internal.h"

namespace ember::worker::trainer_internal {

absl::Status Trainer::ListTrainingFiles() {
  absl::StatusOr<std::vector<std::string>> files = ListDataFiles(config_.data().train_path());
  if (!files.ok()) return InStage(files.status(), "training data");
  data_files_.clear();
  for (const std::string& path : *files) {
    data_files_.push_back(std::filesystem::path(path).filename().string());
  }
  return absl::OkStatus();
}

absl::StatusOr<ResumePoint> Trainer::DataResumePoint(const v1::WorkerState& state) {
  const std::string checkpoint = absl::StrCat("checkpoint ", join_.checkpoint());
  if (state.data().files_size() > 0) {
    const std::vector<std::string> saved(state.data().files().begin(), state.data().files().end());
    if (absl::Status same = CheckSameFiles(saved, data_files_); !same.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(checkpoint, " does not fit this job: ", same.message(), " (data.train_path ",
                       config_.data().train_path(), ")"));
    }
  }
  SavedReading saved;
  saved.epoch = static_cast<int>(state.epoch());
  saved.world_size = static_cast<int>(state.world_size());
  saved.progress = FromProto(state.data());
  for (const v1::WorkerCursor& c : state.cursors()) {
    saved.cursors.push_back(
        RankCursor{static_cast<int>(c.epoch()), ReaderPosition{c.file_index(), c.line()}});
  }
  DataShape shape;
  shape.by_file = config_.data().partition_by() == "file";
  shape.num_files = static_cast<int>(data_files_.size());
  shape.first_out = training_.epoch_end() == TrainingConfig::FIRST_OUT;
  shape.epochs = static_cast<int>(training_.epochs());
  absl::StatusOr<ResumePoint> point =
      ResumePointFor(saved, shape, options_.world_size, options_.rank);
  if (!point.ok()) return InStage(point.status(), checkpoint);
  // Rank 0 saves this at every checkpoint of the attempt: the progress of the saved
  // world size's tenure, or the one this world size starts from.
  data_progress_ = options_.world_size == saved.world_size ? saved.progress : point->progress;
  if (rank0() && options_.world_size != saved.world_size) {
    log_ << "resuming " << checkpoint << " of " << saved.world_size << " worker(s) with "
         << options_.world_size << " in epoch " << point->epoch << " (" << data_files_.size()
         << " files, partitioned by " << config_.data().partition_by() << ")" << std::endl;
  }
  return point;
}

void Trainer::SaveDataPosition(v1::WorkerState* state) const {
  v1::DataProgress* data = state->mutable_data();
  if (data_progress_.epoch >= epoch_) {
    ToProto(data_progress_, data);
  } else {
    EpochProgress fresh;  // an epoch this world size began: nothing from earlier ones
    fresh.epoch = epoch_;
    ToProto(fresh, data);
  }
  for (const std::string& name : data_files_) data->add_files(name);
  for (uint64_t examples : epoch_examples_) state->add_epoch_examples(examples);
}

std::unique_ptr<PreparedBatch> Trainer::EmptyBatch() const {
  auto batch = std::make_unique<PreparedBatch>(layout_);
  batch->epoch = epoch_;
  batch->examples.Reset(static_cast<int>(model::DenseColumns(config_).size()),
                        config_.features_size(), 0);
  batch->sparse.Build(batch->examples);
  // Nothing to classify or replay: the step plans no example (the agreement counted 0).
  batch->prepared = true;
  batch->read_size = 0;
  return batch;
}

bool Trainer::EpochOver(float workers_with_data, int world) const {
  if (workers_with_data < 0.5f) return true;
  return training_.epoch_end() == TrainingConfig::FIRST_OUT &&
         workers_with_data < static_cast<float>(world) - 0.5f;
}

void Trainer::CountEpochExamples(double global_examples, uint64_t resampled_before) {
  const uint64_t all = static_cast<uint64_t>(global_examples);
  const uint64_t replays = skew_->totals().resampled_examples - resampled_before;
  if (epoch_examples_.size() <= static_cast<size_t>(epoch_)) {
    epoch_examples_.resize(static_cast<size_t>(epoch_) + 1, 0);
  }
  epoch_examples_[static_cast<size_t>(epoch_)] += all > replays ? all - replays : 0;
}

}  // namespace ember::worker::trainer_internal
