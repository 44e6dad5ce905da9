// Copyright 2026 The Ember Authors.
//
// The Trainer's checkpoints (trainer_internal.h): taking one at a step barrier, and
// restoring the worker's part of one (dense model, counters, skew state).

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/model/model_config.h"
#include "common/proto_diff.h"
#include "common/status_macros.h"
#include "worker/training/trainer_internal.h"

namespace ember::worker::trainer_internal {

absl::Status Trainer::Restore(const v1::WorkerState& state) {
  const auto fail = [&](absl::string_view why) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", join_.checkpoint(), " does not fit this job: ", why));
  };
  if (state.world_size() == 0 || state.cursors_size() != static_cast<int>(state.world_size())) {
    return fail(absl::StrCat("it has ", state.cursors_size(), " worker cursors for ",
                             state.world_size(), " workers"));
  }
  const bool same_world = state.world_size() == static_cast<uint32_t>(options_.world_size);
  if (!same_world) {
    // Another world size continues the data from the checkpoint's per-file (or per
    // hash partition) progress (trainer_data.cc); older checkpoints lack it.
    const std::string at_own = absl::StrCat(": resume it with --world_size=", state.world_size());
    if (!state.has_data()) {
      return fail(absl::StrCat("it has ", state.world_size(), " workers, the job ",
                               options_.world_size,
                               ", and it predates the data positions another worker count "
                               "resumes from",
                               at_own));
    }
    for (const v1::WorkerCursor& c : state.cursors()) {
      if (c.has_skew()) {
        return fail(absl::StrCat("it has ", state.world_size(), " workers, the job ",
                                 options_.world_size,
                                 ", and per-worker skew state (skew.cold_* options), which "
                                 "does not carry over to another worker count",
                                 at_own));
      }
    }
  }
  if (state.config_digest() != model::ConfigDigest(config_)) {
    v1::ModelConfig saved;
    std::string fields;
    if (!state.config().empty() && saved.ParseFromString(state.config())) {
      fields = DescribeDifference(model::DigestedConfig(config_), saved, 3, "this job",
                                  "the checkpoint");
    }
    return fail(
        absl::StrCat("another model config", fields.empty() ? "" : absl::StrCat(": ", fields)));
  }
  absl::Span<float> params = tower_->parameters();
  if (state.dense_parameters().size() != params.size() * sizeof(float)) {
    return fail(absl::StrCat(state.dense_parameters().size() / sizeof(float),
                             " dense parameters, the tower has ", params.size()));
  }
  std::memcpy(params.data(), state.dense_parameters().data(), state.dense_parameters().size());
  EMBER_RETURN_IF_ERROR(InStage(tower_->SyncParametersToDevice(), "dense parameters"));
  std::vector<float> opt(state.dense_optimizer_state().size() / sizeof(float));
  std::memcpy(opt.data(), state.dense_optimizer_state().data(), opt.size() * sizeof(float));
  EMBER_RETURN_IF_ERROR(InStage(optimizer_->LoadState(opt), "dense optimizer state"));
  if (absl::Status s =
          skew_->Load(same_world ? state.cursors(options_.rank).skew() : v1::WorkerSkewState());
      !s.ok()) {
    return fail(s.message());
  }
  SkewHandler::Totals& totals = skew_->totals();
  totals.cold_examples = state.cold_examples();
  totals.resampled_examples = state.resampled_examples();
  totals.hot_cache_hits = state.hot_cache_hits();
  totals.hot_cache_lookups = state.hot_cache_lookups();
  step_ = state.step();
  examples_ = state.examples();
  epoch_ = static_cast<int>(state.epoch());
  epoch_examples_.assign(state.epoch_examples().begin(), state.epoch_examples().end());
  checkpoint_step_ = step_;
  if (rank0()) {
    log_ << "resuming from checkpoint " << join_.checkpoint() << " at step " << step_
         << " (attempt " << join_.attempt() << ")" << std::endl;
  }
  return absl::OkStatus();
}

bool Trainer::CheckpointWanted() {
  if (!join_.checkpoints()) return false;
  const absl::Time now = absl::Now();
  const uint32_t every_seconds = config_.checkpoint().every_seconds();
  if (every_seconds > 0 && now - last_checkpoint_ >= absl::Seconds(every_seconds)) return true;
  // The poll runs inside a step: at most once a second, and an unreachable coordinator
  // (a restart) is asked again only after 10 s, so it costs the step loop little.
  if (now < next_poll_) return false;
  absl::StatusOr<v1::GetJobResponse> job = jobs_->GetJob(config_.name(), absl::Milliseconds(200));
  next_poll_ = now + (job.ok() ? absl::Seconds(1) : absl::Seconds(10));
  if (job.ok()) NotePending(*job);
  return job.ok() && job->checkpoint_requested();
}

absl::Status Trainer::TakeCheckpoint() {
  // Every push is applied before the cut: in BSP the step's all-reduce already waited
  // for every worker's pushes; otherwise drain them and meet.
  EMBER_RETURN_IF_ERROR(DrainPushes(0));
  if (training_.consistency() != TrainingConfig::BSP) {
    EMBER_RETURN_IF_ERROR(InStage(collective_->Barrier(), "checkpoint barrier"));
  }
  // This worker's cursor: the next batch it will train on.
  v1::WorkerCursor cursor;
  cursor.set_rank(static_cast<uint32_t>(options_.rank));
  absl::StatusOr<PreparedBatch*> head = pipeline_->Peek();
  if (!head.ok()) return InStage(head.status(), "training data");
  if (*head == nullptr) {
    cursor.set_epoch(training_.epochs());
  } else {
    cursor.set_epoch(static_cast<uint32_t>((*head)->epoch));
    cursor.set_file_index((*head)->start.file_index);
    cursor.set_line((*head)->start.line);
  }
  if (skew_->cold_active()) skew_->Save(cursor.mutable_skew());
  cursor.set_leaving(resize_next_ && leave_next_);
  std::vector<std::string> send(static_cast<size_t>(options_.world_size));
  send[0] = cursor.SerializeAsString();
  absl::StatusOr<std::vector<std::string>> cursors = collective_->AllToAll(send);
  if (!cursors.ok()) return InStage(cursors.status(), "checkpoint cursors");

  absl::Status failed;
  if (rank0()) {
    v1::CheckpointRequest request;
    request.set_job(config_.name());
    request.set_generation(options_.generation);
    request.set_attempt(join_.attempt());
    request.set_allow_incremental(true);
    request.set_resize(resize_next_);
    v1::WorkerState* state = request.mutable_state();
    state->set_step(step_);
    state->set_examples(examples_);
    state->set_world_size(static_cast<uint32_t>(options_.world_size));
    state->set_epoch(static_cast<uint32_t>(epoch_));
    SaveDataPosition(state);
    state->set_config_digest(model::ConfigDigest(config_));
    *state->mutable_config() = model::DigestedConfig(config_).SerializeAsString();
    const SkewHandler::Totals& totals = skew_->totals();
    state->set_cold_examples(totals.cold_examples);
    state->set_resampled_examples(totals.resampled_examples);
    state->set_hot_cache_hits(totals.hot_cache_hits);
    state->set_hot_cache_lookups(totals.hot_cache_lookups);
    const absl::Span<const float> params = tower_->parameters();
    state->set_dense_parameters(params.data(), params.size() * sizeof(float));
    const std::vector<float> opt = optimizer_->SaveState();
    state->set_dense_optimizer_state(opt.data(), opt.size() * sizeof(float));
    EMBER_RETURN_IF_ERROR(InStage(tower_->status(), "dense parameters"));
    EMBER_RETURN_IF_ERROR(InStage(optimizer_->status(), "dense optimizer state"));
    for (const std::string& bytes : *cursors) {
      v1::WorkerCursor* c = state->add_cursors();
      if (!c->ParseFromString(bytes)) {
        return absl::InternalError("a worker's checkpoint cursor does not parse");
      }
      if (c->leaving()) request.add_leaving_ranks(c->rank());
    }
    absl::StatusOr<v1::CheckpointManifest> manifest =
        jobs_->Checkpoint(request, options_.recovery_timeout);
    if (manifest.ok()) {
      uint64_t bytes = 0;
      for (const v1::ShardSnapshot& shard : manifest->shards()) bytes += shard.bytes();
      log_ << absl::StrFormat("checkpoint %s at step %d (%s, %.1f MB, %.2fs)", manifest->name(),
                              step_, manifest->incremental() ? "delta" : "full", bytes / 1e6,
                              manifest->seconds())
           << (resize_next_ ? absl::StrCat(": the run resizes (", request.leaving_ranks_size(),
                                           " of ", options_.world_size, " worker(s) leave)")
                            : std::string())
           << std::endl;
    } else {
      failed = manifest.status();
    }
  }
  // Every worker learns whether it worked: a failed checkpoint ends the attempt.
  std::array<float, 1> flag = {failed.ok() ? 0.0f : 1.0f};
  EMBER_RETURN_IF_ERROR(InStage(collective_->AllReduceSum(absl::MakeSpan(flag)), "checkpoint"));
  if (!failed.ok()) return InStage(failed, absl::StrCat("checkpoint at step ", step_));
  if (flag[0] > 0.5f) {
    return absl::AbortedError(absl::StrCat("checkpoint at step ", step_, " failed on rank 0"));
  }
  last_checkpoint_ = absl::Now();
  checkpoint_step_ = step_;
  ++result_.checkpoints;
  return absl::OkStatus();
}

}  // namespace ember::worker::trainer_internal
