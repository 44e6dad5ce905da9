// Copyright 2026 The Ember Authors.
//
// Train (worker/training/trainer.h): a worker's attempts at a job. Each attempt joins
// the job (coordinator.proto JoinJob), runs a Trainer (trainer_internal.h) and ends in
// the run's end, a failure that a rollback repairs (the worker rejoins the restored
// attempt), or (elastic runs) a resize at a checkpoint, after which the staying workers
// rejoin at the new world size and the leaving ones return.

#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/model/column_statistics.h"
#include "common/model/model_config.h"
#include "common/status_macros.h"
#include "worker/cuda/context_lost.h"
#include "worker/data/file_source.h"
#include "worker/data/statistics_pass.h"
#include "worker/training/trainer_internal.h"

namespace ember::worker {

static bool Recoverable(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kCancelled:
      return true;
    default:
      return false;
  }
}

// The config an attempt trains with: `options.config` with the statistics of its
// feature transforms (common/model/column_statistics.h), taken from the restored
// checkpoint's config when the attempt has one (a resumed or recovered job applies the
// statistics it trained with, whatever the data holds now), else computed from the
// training data once per process (`*computed`). Every rank computes the same numbers
// from the same files (worker/data/statistics_pass.h). INVALID_ARGUMENT when the
// checkpoint's config lacks a statistic the job needs; the statistics pass's errors.
static absl::StatusOr<v1::ModelConfig> AttemptConfig(const TrainerOptions& options,
                                                     const v1::JoinJobResponse& attempt,
                                                     std::optional<v1::ModelConfig>* computed,
                                                     std::ostream& log) {
  if (!model::NeedsStatistics(options.config)) return options.config;
  if (!attempt.checkpoint().empty()) {
    v1::ModelConfig saved;
    const std::string name = absl::StrCat("checkpoint ", attempt.checkpoint());
    if (!saved.ParseFromString(attempt.state().config())) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": its model config does not parse"));
    }
    v1::ModelConfig filled = options.config;
    EMBER_RETURN_IF_ERROR(model::CopyStatistics(saved, name, &filled));
    if (options.rank == 0) {
      log << "feature statistics: from " << name << " (not computed again)" << std::endl;
    }
    return filled;
  }
  if (!computed->has_value()) {
    absl::StatusOr<v1::ModelConfig> filled = ComputeStatistics(options.config);
    if (!filled.ok()) {
      return trainer_internal::InStage(filled.status(), "feature statistics pass");
    }
    *computed = *std::move(filled);
    if (options.rank == 0) {
      log << "feature statistics: computed from the first "
          << options.config.statistics_max_examples() << " training examples (at most)"
          << std::endl;
    }
  }
  return **computed;
}

// Elastic runs: what is wrong with the options, before the first join.
static absl::Status CheckElastic(const TrainerOptions& options) {
  if (options.max_workers == 0) {
    if (options.min_workers != 0 || options.join_at_step != 0 || options.leave_at_step != 0) {
      return absl::InvalidArgumentError(
          "a worker range (min..max workers) is needed for join and leave steps");
    }
    return absl::OkStatus();
  }
  if (options.min_workers < 1 || options.min_workers > options.max_workers) {
    return absl::InvalidArgumentError(absl::StrCat("worker range ", options.min_workers, "..",
                                                   options.max_workers, " is not 1 <= min <= max"));
  }
  if (options.rank != 0 || options.world_size != 1) {
    return absl::InvalidArgumentError(
        "an elastic worker's rank and world size are the coordinator's to assign: give a "
        "worker range or a rank and world size, not both");
  }
  if (options.member.empty() || options.member.size() > 128) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an elastic worker needs a member id of 1..128 bytes (has ", options.member.size(), ")"));
  }
  const v1::SkewConfig& skew = options.config.skew();
  if ((skew.has_cold_loss_weight() && skew.cold_loss_weight() != 1.0f) ||
      skew.cold_resample_fraction() > 0) {
    return absl::InvalidArgumentError(
        "skew.cold_loss_weight and skew.cold_resample_fraction keep per-worker state that "
        "does not carry over to another world size: an elastic run cannot use them");
  }
  if (options.config.data().partition_by() == "file") {
    // Every worker reads whole files: a world larger than the file count has ranks
    // without data, which the data path refuses when the run grows to it.
    absl::StatusOr<std::vector<std::string>> files =
        ListDataFiles(options.config.data().train_path());
    if (files.ok() && files->size() < options.max_workers) {
      return absl::InvalidArgumentError(absl::StrCat(
          "worker range ", options.min_workers, "..", options.max_workers,
          ": data.partition_by \"file\" gives every worker whole files, and the training data ",
          options.config.data().train_path(), " has ", files->size(),
          "; use at most that many workers or partition_by a column"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TrainResult> Train(const TrainerOptions& options) {
  using trainer_internal::InStage;
  using trainer_internal::Trainer;
  const bool elastic = options.max_workers > 0;
  EMBER_RETURN_IF_ERROR(CheckElastic(options));
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", options.rank, " is not in [0, world_size ", options.world_size, ")"));
  }
  EMBER_ASSIGN_OR_RETURN(
      std::unique_ptr<JobClient> jobs,
      JobClient::Create(options.coordinator_address, options.channel_credentials));
  std::ostream& log = options.log != nullptr ? *options.log : std::cout;
  v1::JoinJobRequest join;
  join.set_job(options.config.name());
  join.set_generation(options.generation);
  join.set_run_id(options.run_id);
  if (elastic) {
    join.set_min_workers(options.min_workers);
    join.set_max_workers(options.max_workers);
    join.set_member(options.member);
    join.set_join_at_step(options.join_at_step);
    // This process's id for its life: a member joining again from a restarted process
    // (a container's PID 1 under the same host name) ends the attempt it was in.
    static const uint64_t process = absl::Uniform<uint64_t>(absl::BitGen(), 1, ~uint64_t{0});
    join.set_process(process);
  } else {
    join.set_rank(static_cast<uint32_t>(options.rank));
    join.set_world_size(static_cast<uint32_t>(options.world_size));
  }
  join.set_resume_from(options.resume_from);
  join.set_rows(options.start_rows);
  join.set_own_tables(options.own_tables);
  join.set_config_digest(model::ConfigDigest(options.config));
  join.set_config(model::DigestedConfig(options.config).SerializeAsString());
  // How this worker's lines name it: its rank, or (elastic) its member id until an
  // attempt gives it a rank.
  std::string who = elastic ? absl::StrCat("worker '", options.member, "'")
                            : absl::StrCat("worker ", options.rank);
  JobClient::JoinWait wait;
  wait.timeout = options.recovery_timeout;
  // A coordinator never reached in this long is a wrong address or a TLS mismatch.
  wait.unreachable_timeout = options.collective_timeout;
  wait.report = [&log, &who](const std::string& line) { log << who << ": " << line << std::endl; };
  log << (elastic ? who : absl::StrCat(who, "/", options.world_size)) << ": joining job '"
      << options.config.name() << "' ("
      << (options.run_id.empty() ? absl::StrCat("generation ", options.generation)
                                 : absl::StrCat("run '", options.run_id, "'"))
      << (elastic ? absl::StrCat(", ", options.min_workers, " to ", options.max_workers, " workers")
                  : std::string())
      << ") at " << options.coordinator_address << std::endl;
  // The run's generation: given, or allocated for run_id at the first join.
  uint64_t generation = options.generation;
  bool finishing = false;  // some attempt of this worker got past the final barrier
  std::optional<v1::ModelConfig> computed;  // the statistics pass's config (AttemptConfig)
  int recoveries = 0;
  uint64_t resizes = 0;
  bool resized = false;  // the last attempt ended at a resize
  while (true) {
    // An elastic worker waits for its first place as long as it takes (a run at its
    // maximum, a pod started before its run).
    JobClient::JoinWait this_wait = wait;
    if (elastic && resizes == 0 && recoveries == 0) this_wait.timeout = absl::InfiniteDuration();
    absl::StatusOr<v1::JoinJobResponse> attempt = jobs->Join(join, this_wait);
    if (!attempt.ok()) {
      if (elastic && absl::IsFailedPrecondition(attempt.status())) {
        // A worker still waiting for a place when the run ends has nothing to do.
        absl::StatusOr<v1::GetJobResponse> job =
            jobs->GetJob(options.config.name(), absl::Seconds(2));
        if (job.ok() && job->phase() == v1::GetJobResponse::FINISHED &&
            (generation == 0 || job->generation() == generation)) {
          log << who << ": the run finished before this worker got a place" << std::endl;
          TrainResult none;
          none.left = true;
          none.resizes = resizes;
          return none;
        }
      }
      return InStage(attempt.status(), "joining the job");
    }
    if (!join.run_id().empty()) {
      // Rejoins name the run by the generation it was given.
      generation = attempt->generation();
      join.clear_run_id();
      join.set_generation(generation);
      log << who << ": run '" << options.run_id << "' is generation " << generation << std::endl;
    }
    TrainerOptions attempt_options = options;
    if (elastic) {
      attempt_options.rank = static_cast<int>(attempt->rank());
      attempt_options.world_size = static_cast<int>(attempt->world_size());
      if (attempt_options.world_size < 1 || attempt_options.rank >= attempt_options.world_size) {
        return absl::InternalError(absl::StrCat("the coordinator gave rank ", attempt->rank(),
                                                " of ", attempt->world_size()));
      }
      who = absl::StrCat("worker ", attempt->rank(), " ('", options.member, "')");
      log << who << ": attempt " << attempt->attempt() << " has " << attempt->world_size()
          << " worker(s)" << std::endl;
    }
    if (recoveries > 0 && !resized) {
      // What this worker saw is often only the echo (a collective whose peer left); the
      // coordinator recorded the failure that ended the attempt first.
      absl::StatusOr<v1::GetJobResponse> job =
          jobs->GetJob(options.config.name(), absl::Seconds(2));
      if (job.ok() && !job->failure().empty() &&
          !absl::StrContains(job->failure(), join.reason())) {
        log << who << ": attempt " << join.after_attempt() << " was ended by: " << job->failure()
            << std::endl;
      }
    }
    absl::StatusOr<v1::ModelConfig> config =
        AttemptConfig(attempt_options, *attempt, &computed, log);
    if (!config.ok()) return config.status();
    absl::StatusOr<TrainResult> result;
    bool met_nobody = false;
    bool leaves = false;
    resized = false;
    {
      attempt_options.config = *std::move(config);
      attempt_options.generation = generation;
      Trainer trainer(attempt_options, jobs.get(), *attempt, static_cast<uint64_t>(recoveries));
      trainer.set_resizes(resizes);
      result = trainer.Run();
      met_nobody = trainer.rendezvous_failed();
      finishing = finishing || trainer.passed_final_barrier();
      resized = result.ok() && trainer.resized();
      leaves = resized && trainer.leaves();
    }
    if (result.ok()) result->rank = attempt_options.rank;
    if (resized) {
      ++resizes;
      if (leaves) {
        log << who << ": left the run at step " << result->steps << " (attempt "
            << attempt->attempt() << "); the others go on without it" << std::endl;
        result->left = true;
        result->resizes = resizes;
        return result;
      }
      // Not a failure: the next attempt starts from the checkpoint just taken.
      join.set_after_attempt(attempt->attempt());
      join.set_reason("resize");
      continue;
    }
    if (result.ok()) {
      // The run is over only once rank 0 recorded its end (after the final evaluation
      // and checksum): until then a failure rolls the attempt back, and every rank must
      // rejoin the next one. Rank 0 records it; the others wait for it.
      absl::Status end;
      if (attempt_options.rank == 0) {
        v1::FinishJobRequest finish;
        finish.set_job(options.config.name());
        finish.set_generation(generation);
        finish.set_attempt(attempt->attempt());
        end = InStage(jobs->Finish(finish, options.collective_timeout), "recording the job's end");
      } else {
        end = jobs->AwaitFinished(options.config.name(), generation, attempt->attempt(),
                                  options.recovery_timeout);
        // Only a rollback is worth a rejoin: rank 0 will rejoin it too.
        if (!end.ok() && end.code() != absl::StatusCode::kAborted) {
          return InStage(end, "waiting for rank 0 to finish the job");
        }
      }
      if (end.ok()) return result;
      result = end;
    }
    if (!Recoverable(result.status()) || recoveries >= options.max_recoveries) {
      return result.status();
    }
    // A lost CUDA context fails every attempt of this process the same way: only a new
    // process (worker_main exits kExitCudaContextLost for its supervisor) can rejoin.
    if (CudaContextLost()) return result.status();
    if (finishing && met_nobody) {
      // A rejoin after the final barrier met nobody within the collective timeout: the
      // other workers have finished or failed and will not come back.
      return absl::Status(
          result.status().code(),
          absl::StrCat(result.status().message(),
                       "; this worker was past the final barrier, so the missing workers have "
                       "ended (finished or failed) and are not waited for again"));
    }
    log << who << ": attempt " << attempt->attempt()
        << " failed, rejoining: " << result.status().message() << std::endl;
    join.set_after_attempt(attempt->attempt());
    join.set_reason(std::string(result.status().message()));
    ++recoveries;
  }
}

}  // namespace ember::worker
