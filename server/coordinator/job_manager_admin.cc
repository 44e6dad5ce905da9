// Copyright 2026 The Ember Authors.
//
// JobManager, part 2: what operators see and do (AdminService): job and checkpoint
// listings, stopping a job, restoring a stopped job's checkpoint, shards that take
// over slots.

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/clip.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "server/coordinator/job_manager.h"

namespace ember {

void JobManager::AdoptShard(uint32_t shard_id, uint64_t incarnation) {
  if (incarnation == 0) return;
  absl::MutexLock lock(&mu_);
  for (auto& [name, job] : jobs_) {
    if (job.record.phase() != v1::GetJobResponse::RUNNING) continue;
    if (job.incarnations.try_emplace(shard_id, incarnation).second) {
      PersistLocked(job).IgnoreError();  // the next write retries
    }
  }
}

absl::StatusOr<v1::GetJobResponse> JobManager::StopJob(const std::string& name,
                                                       const std::string& reason) {
  if (reason.size() > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("the reason has ", reason.size(), " bytes; at most 256"));
  }
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(name);
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown job '", ClipForMessage(name), "'"));
  }
  Job& job = it->second;
  const v1::GetJobResponse::Phase phase = job.record.phase();
  if (phase != v1::GetJobResponse::RUNNING && phase != v1::GetJobResponse::RECOVERING) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job '", name, "' is ", v1::GetJobResponse::Phase_Name(phase), ": nothing to stop"));
  }
  job.record.set_phase(v1::GetJobResponse::FAILED);
  job.record.set_failure(absl::StrCat("stopped by an operator",
                                      reason.empty() ? std::string() : absl::StrCat(": ", reason)));
  job.record.clear_joined();
  job.record.clear_joined_processes();
  job.waiting.clear();
  job.waiting_for.clear();
  EMBER_RETURN_IF_ERROR(PersistLocked(job));
  EMBER_LOG(WARNING) << "job " << name << " generation " << job.record.generation() << " attempt "
                     << job.record.attempt() << " " << job.record.failure();
  return DescribeLocked(name);
}

std::vector<v1::GetJobResponse> JobManager::ListJobs() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::GetJobResponse> out;
  for (const auto& [name, job] : jobs_) out.push_back(DescribeLocked(name));
  return out;
}

absl::StatusOr<std::vector<v1::CheckpointSummary>> JobManager::ListCheckpoints(
    const std::string& job) const {
  if (options_.checkpoint_dir.empty()) {
    return absl::FailedPreconditionError("the coordinator runs without --checkpoint_dir");
  }
  EMBER_ASSIGN_OR_RETURN(const CheckpointListing listing, catalog_.List(job));
  std::vector<v1::CheckpointSummary> out;
  for (const v1::CheckpointManifest& manifest : listing.valid) {
    v1::CheckpointSummary summary;
    summary.set_name(manifest.name());
    summary.set_step(manifest.step());
    summary.set_attempt(manifest.attempt());
    summary.set_incremental(manifest.incremental());
    summary.set_parent(manifest.parent());
    summary.set_created_unix_ms(manifest.created_unix_ms());
    uint64_t bytes = 0;
    for (const v1::ShardSnapshot& shard : manifest.shards()) bytes += shard.bytes();
    summary.set_bytes(bytes);
    summary.set_shards(static_cast<uint32_t>(manifest.shards_size()));
    out.push_back(std::move(summary));
  }
  for (const auto& [dir, status] : listing.invalid) {
    v1::CheckpointSummary summary;
    summary.set_name(dir);
    summary.set_error(std::string(status.message()));
    out.push_back(std::move(summary));
  }
  if (out.empty())
    return absl::NotFoundError(absl::StrCat("job '", ClipForMessage(job), "' has no checkpoints"));
  return out;
}

absl::StatusOr<v1::RestoreCheckpointResponse> JobManager::RestoreCheckpoint(
    const std::string& job, const std::string& name) {
  if (options_.checkpoint_dir.empty()) {
    return absl::FailedPreconditionError("the coordinator runs without --checkpoint_dir");
  }
  std::string checkpoint = name;
  if (checkpoint.empty()) {
    EMBER_ASSIGN_OR_RETURN(const CheckpointListing listing, catalog_.List(job));
    if (listing.valid.empty()) {
      return absl::NotFoundError(
          absl::StrCat("job '", ClipForMessage(job), "' has no valid checkpoint"));
    }
    checkpoint = listing.valid.back().name();
  }
  // Into the store the checkpoint was cut from.
  EMBER_ASSIGN_OR_RETURN(const v1::CheckpointManifest manifest,
                         catalog_.ReadManifest(job, checkpoint));
  uint64_t attempt = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(job);
    if (it != jobs_.end() && (it->second.record.phase() == v1::GetJobResponse::RUNNING ||
                              it->second.record.phase() == v1::GetJobResponse::RECOVERING)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job '", job, "' is ", v1::GetJobResponse::Phase_Name(it->second.record.phase()),
          ": stop it before restoring a checkpoint"));
    }
    EMBER_ASSIGN_OR_RETURN(attempt, NextAttemptLocked());
  }
  std::map<uint32_t, uint64_t> incarnations;
  EMBER_RETURN_IF_ERROR(
      RestoreShards(job, manifest.tables_job(), checkpoint, attempt, &incarnations));
  {
    // The job's record says what its shards now hold (`emberctl status` showed the
    // attempt before the restore); the job stays stopped, and a new run starts anew.
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(job);
    if (it != jobs_.end()) {
      it->second.record.set_attempt(attempt);
      it->second.record.set_restored_from(checkpoint);
      PersistLocked(it->second).IgnoreError();
    }
  }
  EMBER_LOG(INFO) << "job " << job << ": shards restored to checkpoint " << checkpoint
                  << " (attempt " << attempt << ") by an operator";
  v1::RestoreCheckpointResponse response;
  response.set_name(checkpoint);
  response.set_attempt(attempt);
  return response;
}

}  // namespace ember
