// Copyright 2026 The Ember Authors.

#include "server/coordinator/job_manager.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/clip.h"
#include "common/grpc_status.h"
#include "common/job_name.h"
#include "common/log.h"
#include "common/proto_diff.h"
#include "common/status_macros.h"
#include "ember/v1/model.pb.h"
#include "grpcpp/client_context.h"
#include "server/coordinator/run_parallel.h"
#include "server/shared/slot_owners.h"

namespace ember {
namespace {

constexpr char kJobIndexKey[] = "jobs/index";
constexpr char kLastAttemptKey[] = "jobs/last_attempt";

std::string JobKey(const std::string& job) { return absl::StrCat("job/", job); }
// The running attempt's shard incarnations ("shard:incarnation,..."), kept beside the
// record so that a restarted coordinator still notices a shard that restarts.
std::string IncarnationsKey(const std::string& job) { return absl::StrCat("job-shards/", job); }

std::string EncodeIncarnations(const std::map<uint32_t, uint64_t>& incarnations) {
  return absl::StrJoin(incarnations, ",", [](std::string* out, const auto& entry) {
    absl::StrAppend(out, entry.first, ":", entry.second);
  });
}

bool DecodeIncarnations(absl::string_view text, std::map<uint32_t, uint64_t>* incarnations) {
  for (absl::string_view entry : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> parts = absl::StrSplit(entry, ':');
    uint32_t shard = 0;
    uint64_t incarnation = 0;
    if (!absl::SimpleAtoi(parts.first, &shard) || !absl::SimpleAtoi(parts.second, &incarnation)) {
      return false;
    }
    (*incarnations)[shard] = incarnation;
  }
  return true;
}

bool Contains(const google::protobuf::RepeatedField<uint32_t>& values, uint32_t v) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

}  // namespace

JobManager::JobManager(CoordinatorState* state, JobManagerOptions options, StubFactory stubs)
    : state_(state),
      options_(std::move(options)),
      stubs_(std::move(stubs)),
      catalog_(options_.checkpoint_dir) {}

JobManager::~JobManager() { Stop(); }

// The alive shards that own slots, or UNAVAILABLE naming a slot owner that is not alive.
absl::StatusOr<std::vector<v1::ShardInfo>> JobManager::SlotOwners(const CoordinatorState& state) {
  const SlotMap map = state.slot_map();
  if (map.epoch() == 0) return absl::UnavailableError("slots are not assigned yet");
  std::vector<v1::ShardInfo> owners;
  for (const v1::ShardInfo& shard : state.Shards()) {
    if (map.SlotsOf(shard.shard_id()).empty()) continue;
    if (shard.state() != v1::ShardInfo::ALIVE) {
      return absl::UnavailableError(
          absl::StrCat("shard ", shard.shard_id(), " (", shard.address(), ") is not alive"));
    }
    owners.push_back(shard);
  }
  return owners;
}

absl::Status JobManager::Start() {
  absl::MutexLock lock(&mu_);
  if (std::optional<std::string> last = state_->KvGet(kLastAttemptKey); last.has_value()) {
    if (!absl::SimpleAtoi(*last, &last_attempt_)) {
      return absl::DataLossError(absl::StrCat("bad ", kLastAttemptKey, ": '", *last, "'"));
    }
  }
  if (std::optional<std::string> index = state_->KvGet(kJobIndexKey); index.has_value()) {
    for (absl::string_view name : absl::StrSplit(*index, '\n', absl::SkipEmpty())) {
      std::optional<std::string> bytes = state_->KvGet(JobKey(std::string(name)));
      Job job;
      if (!bytes.has_value() || !job.record.ParseFromString(*bytes)) {
        return absl::DataLossError(
            absl::StrCat("job record of '", name, "' is missing or corrupt"));
      }
      if (!job.record.restored_from().empty()) {
        // The state the running attempt's workers resume from (a joining worker needs it).
        absl::StatusOr<v1::CheckpointManifest> m =
            catalog_.ReadManifest(job.record.job(), job.record.restored_from());
        absl::StatusOr<v1::WorkerState> ws =
            m.ok() ? catalog_.ReadWorkerState(*m) : absl::StatusOr<v1::WorkerState>(m.status());
        if (ws.ok()) {
          job.restored_state = *std::move(ws);
        } else if (job.record.phase() == v1::GetJobResponse::RUNNING) {
          FailLocked(job, absl::StrCat(
                              "checkpoint ", job.record.restored_from(),
                              " unreadable after a coordinator restart: ", ws.status().message()));
        }
      }
      if (job.record.phase() == v1::GetJobResponse::RUNNING) {
        // Without the shards' incarnations a shard that restarts (and loses the
        // attempt's rows held in memory) would go unnoticed for the rest of the attempt.
        std::optional<std::string> known = state_->KvGet(IncarnationsKey(std::string(name)));
        if (!known.has_value() || !DecodeIncarnations(*known, &job.incarnations)) {
          FailLocked(job,
                     "the running attempt's shard incarnations are not on record after a "
                     "coordinator restart");
        }
      }
      jobs_.emplace(std::string(name), std::move(job));
    }
  }
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void JobManager::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status JobManager::PersistLocked(const Job& job) {
  EMBER_RETURN_IF_ERROR(
      state_->KvPut(IncarnationsKey(job.record.job()), EncodeIncarnations(job.incarnations)));
  EMBER_RETURN_IF_ERROR(state_->KvPut(JobKey(job.record.job()), job.record.SerializeAsString()));
  std::vector<std::string> names;
  for (const auto& [name, unused] : jobs_) names.push_back(name);
  if (!jobs_.contains(job.record.job())) names.push_back(job.record.job());
  return state_->KvPut(kJobIndexKey, absl::StrJoin(names, "\n"));
}

absl::StatusOr<uint64_t> JobManager::NextAttemptLocked() {
  const uint64_t next = last_attempt_ + 1;
  EMBER_RETURN_IF_ERROR(state_->KvPut(kLastAttemptKey, absl::StrCat(next)));
  last_attempt_ = next;
  return next;
}

void JobManager::FailLocked(Job& job, const std::string& reason) {
  EMBER_LOG(WARNING) << "job " << job.record.job() << " attempt " << job.record.attempt()
                     << " ended: " << reason;
  job.record.set_failure(reason);
  if (options_.checkpoint_dir.empty()) {
    job.record.set_phase(v1::GetJobResponse::FAILED);
    job.record.set_failure(
        absl::StrCat(reason, " (no --checkpoint_dir on the coordinator: cannot roll back)"));
  } else {
    job.record.set_phase(v1::GetJobResponse::RECOVERING);
    job.record.set_recoveries(job.record.recoveries() + 1);
  }
  job.record.clear_joined();
  job.record.clear_joined_processes();
  if (job.record.members_size() > 0) {
    // The next formation waits (up to the settle time) for the attempt's members.
    *job.record.mutable_expected() = job.record.members();
    job.record.clear_members();
  }
  PersistLocked(job).IgnoreError();  // the in-memory phase rules; the next write retries
}

absl::Status JobManager::StartRunLocked(const v1::JoinJobRequest& request) {
  EMBER_RETURN_IF_ERROR(CheckStartRowsLocked(request, !request.resume_from().empty()));
  std::string resume;
  if (!request.resume_from().empty()) {
    if (options_.checkpoint_dir.empty()) {
      return absl::FailedPreconditionError(
          "resume_from needs checkpoints: the coordinator runs without --checkpoint_dir");
    }
    if (request.resume_from() == "latest") {
      EMBER_ASSIGN_OR_RETURN(CheckpointListing listing, catalog_.List(request.job()));
      if (listing.valid.empty()) {
        return absl::NotFoundError(absl::StrCat("job '", ClipForMessage(request.job()),
                                                "' has no valid checkpoint to resume from"));
      }
      resume = listing.valid.back().name();
    } else {
      EMBER_RETURN_IF_ERROR(catalog_.ReadManifest(request.job(), request.resume_from()).status());
      resume = request.resume_from();
    }
  }
  Job job;
  auto previous = jobs_.find(request.job());
  if (previous != jobs_.end()) *job.record.mutable_runs() = previous->second.record.runs();
  if (!request.run_id().empty()) {
    v1::RunIdRecord* run = job.record.add_runs();
    run->set_run_id(request.run_id());
    run->set_generation(request.generation());
    constexpr int kKeptRuns = 32;
    if (job.record.runs_size() > kKeptRuns) {
      job.record.mutable_runs()->DeleteSubrange(0, job.record.runs_size() - kKeptRuns);
    }
  }
  job.record.set_job(request.job());
  job.record.set_generation(request.generation());
  job.record.set_phase(v1::GetJobResponse::RECOVERING);
  job.record.set_world_size(request.world_size());
  job.record.set_min_workers(request.min_workers());
  job.record.set_max_workers(request.max_workers());
  job.record.set_resume_from(resume);
  job.record.set_rows(request.rows());
  job.record.set_own_tables(request.own_tables());
  job.record.set_config_digest(request.config_digest());
  job.record.set_config(request.config());
  EMBER_RETURN_IF_ERROR(PersistLocked(job));
  EMBER_LOG(INFO) << "job " << request.job() << " generation " << request.generation()
                  << ": new run of "
                  << (request.max_workers() > 0
                          ? absl::StrCat(request.min_workers(), " to ", request.max_workers())
                          : absl::StrCat(request.world_size()))
                  << " worker(s)"
                  << (!resume.empty() ? absl::StrCat(" from checkpoint ", resume)
                      : request.rows() == v1::JoinJobRequest::START_ROWS_FRESH
                          ? std::string(" from empty tables")
                          : std::string(" from the shards' rows"))
                  << (request.own_tables() ? ", on tables of its own" : "");
  jobs_[request.job()] = std::move(job);
  return absl::OkStatus();
}

absl::Status JobManager::CheckNoOtherRunLocked(const v1::JoinJobRequest& request) const {
  const std::string& name = request.job();
  if (request.own_tables()) return absl::OkStatus();
  for (const auto& [other, job] : jobs_) {
    const v1::GetJobResponse::Phase phase = job.record.phase();
    if (other == name || job.record.own_tables() ||
        (phase != v1::GetJobResponse::RUNNING && phase != v1::GetJobResponse::RECOVERING)) {
      continue;
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "job '", ClipForMessage(name), "' cannot start: job '", other, "' (generation ",
        job.record.generation(), ") is ", v1::GetJobResponse::Phase_Name(phase),
        " on the shared tables of this PS cluster, which serve one training job at a time "
        "(their attempt fence is the shared store's); give '",
        ClipForMessage(name), "' tables of its own (--own_tables), wait for '", other,
        "' to end, or stop it if its workers are gone ('emberctl jobs stop ", other, "')"));
  }
  return absl::OkStatus();
}

absl::Status JobManager::CheckStartRowsLocked(const v1::JoinJobRequest& request,
                                              bool resumes) const {
  if (resumes) {
    if (request.rows() == v1::JoinJobRequest::START_ROWS_FRESH) {
      return absl::InvalidArgumentError(
          "rows=fresh with resume_from: the checkpoint's rows replace the shards' anyway; "
          "give one of them");
    }
    return absl::OkStatus();  // the checkpoint's rows replace the shards'
  }
  // A run whose rows the shards may hold in the store this run uses: for the shared
  // tables, any run on them (no other job runs on them: CheckNoOtherRunLocked refused
  // the join first, so a fresh start empties no one else's tables); for tables of the
  // job's own, an earlier run of the job (its store may hold rows of any of them).
  const v1::JobRecord* earlier = nullptr;
  for (const auto& [name, job] : jobs_) {
    if (request.own_tables() ? name == request.job() : !job.record.own_tables()) {
      earlier = &job.record;
    }
  }
  if (request.rows() != v1::JoinJobRequest::START_ROWS_UNSPECIFIED || earlier == nullptr) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "a new run of job '", ClipForMessage(request.job()), "' (generation ", request.generation(),
      ") would train on the rows an earlier run left on the shards (job '", earlier->job(),
      "' generation ", earlier->generation(), ", ",
      v1::GetJobResponse::Phase_Name(earlier->phase()),
      "): say which with --rows=continue (train on from them), --rows=fresh (empty every "
      "table first) or --resume_from=NAME|latest (start from a checkpoint)"));
}

absl::StatusOr<uint64_t> JobManager::GenerationOfRunLocked(const v1::JoinJobRequest& request) {
  auto it = jobs_.find(request.job());
  if (it == jobs_.end()) return uint64_t{1};
  const v1::JobRecord& record = it->second.record;
  for (int i = record.runs_size() - 1; i >= 0; --i) {
    if (record.runs(i).run_id() != request.run_id()) continue;
    if (record.runs(i).generation() < record.generation()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job '", request.job(), "' run '", request.run_id(), "' (generation ",
          record.runs(i).generation(), ") was superseded by generation ", record.generation()));
    }
    return record.runs(i).generation();
  }
  return record.generation() + 1;  // a run id not seen: a new run
}

absl::StatusOr<v1::JoinJobResponse> JobManager::JoinJob(const v1::JoinJobRequest& asked,
                                                        const std::string& who) {
  v1::JoinJobRequest request = asked;  // with run_id resolved into its generation below
  if (!request.run_id().empty() && request.generation() != 0) {
    return absl::InvalidArgumentError(
        "a worker gives its run's run_id or its generation, not both");
  }
  if (request.run_id().size() > 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("run_id has ", request.run_id().size(), " bytes; at most 128"));
  }
  EMBER_RETURN_IF_ERROR(CheckJobName(request.job()));
  const bool elastic = request.max_workers() > 0;
  EMBER_RETURN_IF_ERROR(CheckElasticRequest(request));
  if (!elastic && (request.world_size() == 0 || request.rank() >= request.world_size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", request.rank(), " is not in [0, world_size ", request.world_size(), ")"));
  }
  const std::string who_is = elastic ? absl::StrCat("worker '", request.member(), "'")
                                     : absl::StrCat("worker ", request.rank());
  absl::MutexLock lock(&mu_);
  if (!request.run_id().empty()) {
    EMBER_ASSIGN_OR_RETURN(const uint64_t generation, GenerationOfRunLocked(request));
    request.set_generation(generation);
  }
  auto it = jobs_.find(request.job());
  if (it == jobs_.end() || request.generation() > it->second.record.generation()) {
    EMBER_RETURN_IF_ERROR(CheckNoOtherRunLocked(request));
    EMBER_RETURN_IF_ERROR(StartRunLocked(request));
    it = jobs_.find(request.job());
  }
  Job& job = it->second;
  if (request.generation() < job.record.generation()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job '", request.job(), "' generation ", request.generation(),
                     " was superseded by generation ", job.record.generation()));
  }
  EMBER_RETURN_IF_ERROR(CheckSameMode(job, request));
  if (request.config_digest() != 0 && job.record.config_digest() != 0 &&
      request.config_digest() != job.record.config_digest()) {
    v1::ModelConfig mine, run;
    std::string fields;
    if (mine.ParseFromString(request.config()) && run.ParseFromString(job.record.config()) &&
        !request.config().empty() && !job.record.config().empty()) {
      fields = DescribeDifference(mine, run, 3, "this worker", "the run");
    }
    return absl::InvalidArgumentError(
        absl::StrCat(who_is, " has another model config than the run of job '", request.job(), "'",
                     fields.empty() ? "" : absl::StrCat(": ", fields),
                     "; every worker of a run needs the same config (a new run, with a larger "
                     "--generation, may change it)"));
  }
  // A member of an elastic run's attempt has the rank the formation gave it; a worker
  // that is none waits for a place.
  const int member_rank = elastic ? RankOf(job, request.member()) : -1;
  if (job.record.phase() == v1::GetJobResponse::RUNNING) {
    const bool in_attempt = !elastic || member_rank >= 0;
    if (in_attempt && request.after_attempt() >= job.record.attempt()) {
      FailLocked(job, absl::StrCat(who_is, " failed: ", request.reason()));
    } else if (!elastic && Contains(job.record.joined(), request.rank())) {
      FailLocked(job, absl::StrCat(who_is, " restarted (", who, ")"));
    } else if (elastic && member_rank >= 0 &&
               Contains(job.record.joined(), static_cast<uint32_t>(member_rank)) &&
               RestartedLocked(job, request)) {
      FailLocked(job, absl::StrCat(who_is, " restarted (it joined again from another process)"));
    }
  }
  if (elastic && RankOf(job, request.member()) < 0) WaitForPlaceLocked(job, request);
  const absl::Duration wait = absl::Milliseconds(std::min<uint32_t>(request.wait_ms(), 60000));
  auto settled = [this, &job, &request, elastic]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (stopping_) return true;
    if (!elastic || job.record.phase() != v1::GetJobResponse::RUNNING) {
      return job.record.phase() != v1::GetJobResponse::RECOVERING;
    }
    return RankOf(job, request.member()) >= 0;
  };
  mu_.AwaitWithTimeout(absl::Condition(&settled), wait);
  if (stopping_) return absl::UnavailableError("coordinator is shutting down");
  v1::JoinJobResponse response;
  response.set_generation(job.record.generation());
  response.set_tables_job(TablesJob(job.record));
  const int rank = elastic ? RankOf(job, request.member()) : static_cast<int>(request.rank());
  switch (job.record.phase()) {
    case v1::GetJobResponse::RECOVERING:
      response.set_ready(false);
      response.set_waiting_for(job.waiting_for);
      return response;
    case v1::GetJobResponse::RUNNING:
      if (rank < 0) {
        if (job.waiting.contains(request.member())) {
          job.waiting[request.member()].last_seen = absl::Now();
        }
        response.set_ready(false);
        response.set_waiting_for(WaitingForLocked(job, request.member()));
        return response;
      }
      break;
    case v1::GetJobResponse::FINISHED:
      return absl::FailedPreconditionError(
          absl::StrCat("job '", request.job(), "' generation ", job.record.generation(),
                       " has finished; start a new run with a larger --generation (or a new "
                       "--run_id)"));
    case v1::GetJobResponse::FAILED:
      return absl::FailedPreconditionError(
          absl::StrCat("job '", request.job(), "' failed: ", job.record.failure()));
    default:
      break;
  }
  if (!Contains(job.record.joined(), static_cast<uint32_t>(rank))) {
    job.record.add_joined(static_cast<uint32_t>(rank));
    if (elastic) (*job.record.mutable_joined_processes())[request.member()] = request.process();
    EMBER_RETURN_IF_ERROR(PersistLocked(job));
  } else if (!elastic) {
    return absl::AlreadyExistsError(absl::StrCat("another worker ", rank, " joined attempt ",
                                                 job.record.attempt(), " of job '", request.job(),
                                                 "'"));
  }
  // (An elastic member asking again, its answer lost, gets the same answer.)
  response.set_ready(true);
  response.set_rank(static_cast<uint32_t>(rank));
  response.set_world_size(job.record.world_size());
  response.set_attempt(job.record.attempt());
  response.set_checkpoint(job.record.restored_from());
  response.set_checkpoints(!options_.checkpoint_dir.empty());
  if (!job.record.restored_from().empty()) *response.mutable_state() = job.restored_state;
  return response;
}

absl::Status JobManager::FinishJob(const v1::FinishJobRequest& request) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(request.job());
  if (it == jobs_.end())
    return absl::NotFoundError(absl::StrCat("unknown job '", ClipForMessage(request.job()), "'"));
  Job& job = it->second;
  if (job.record.generation() == request.generation() &&
      job.record.attempt() == request.attempt() &&
      job.record.phase() == v1::GetJobResponse::FINISHED) {
    return absl::OkStatus();  // a retry of a FinishJob whose answer was lost
  }
  if (job.record.generation() != request.generation() ||
      job.record.attempt() != request.attempt() ||
      job.record.phase() != v1::GetJobResponse::RUNNING) {
    return absl::AbortedError(absl::StrCat("attempt ", request.attempt(), " of job '",
                                           request.job(), "' is not running"));
  }
  job.record.set_phase(v1::GetJobResponse::FINISHED);
  EMBER_LOG(INFO) << "job " << request.job() << " finished (attempt " << request.attempt() << ", "
                  << job.record.recoveries() << " recoveries)";
  return PersistLocked(job);
}

absl::StatusOr<v1::GetJobResponse> JobManager::GetJob(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  if (!jobs_.contains(name))
    return absl::NotFoundError(absl::StrCat("unknown job '", ClipForMessage(name), "'"));
  return DescribeLocked(name);
}

v1::GetJobResponse JobManager::DescribeLocked(const std::string& name) const {
  const Job& job = jobs_.at(name);
  v1::GetJobResponse r;
  r.set_job(name);
  r.set_generation(job.record.generation());
  r.set_attempt(job.record.attempt());
  r.set_phase(job.record.phase());
  r.set_world_size(job.record.world_size());
  r.set_checkpoint_requested(job.checkpoint_requested);
  if (job.record.checkpoints_size() > 0)
    r.set_latest_checkpoint(job.record.checkpoints().rbegin()[0]);
  r.set_recoveries(job.record.recoveries());
  r.set_failure(job.record.failure());
  r.set_tables_job(TablesJob(job.record));
  r.set_restored_from(job.record.restored_from());
  if (std::optional<v1::JobProgress> progress = ProgressLocked(job, absl::Now())) {
    *r.mutable_progress() = *std::move(progress);
  }
  r.set_min_workers(job.record.min_workers());
  r.set_max_workers(job.record.max_workers());
  *r.mutable_members() = job.record.members();
  for (const auto& [member, w] : job.waiting) {
    v1::PendingWorker* p = r.add_pending();
    p->set_member(member);
    p->set_join_at_step(w.join_at_step);
  }
  r.set_resizes(job.record.resizes());
  return r;
}

absl::Status JobManager::RequestCheckpoint(const std::string& name) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(name);
  if (it == jobs_.end())
    return absl::NotFoundError(absl::StrCat("unknown job '", ClipForMessage(name), "'"));
  if (options_.checkpoint_dir.empty()) {
    return absl::FailedPreconditionError("the coordinator runs without --checkpoint_dir");
  }
  const v1::GetJobResponse::Phase phase = it->second.record.phase();
  if (phase == v1::GetJobResponse::FINISHED || phase == v1::GetJobResponse::FAILED) {
    // No worker is left to take it; every run ends with a checkpoint of its own.
    return absl::FailedPreconditionError(
        absl::StrCat("job '", name, "' is ", v1::GetJobResponse::Phase_Name(phase),
                     ": no worker is left to take a checkpoint (every run ends with one: see "
                     "'emberctl checkpoint list')"));
  }
  it->second.checkpoint_requested = true;
  return absl::OkStatus();
}

void JobManager::OnShardSeen(uint32_t shard_id, uint64_t incarnation) {
  if (incarnation == 0) return;
  // A shard that owns no slots holds none of the attempt's rows (a drained shard that
  // restarts under its id): its restart loses nothing, and it stops counting until a
  // migration gives it slots again (AdoptShard).
  const bool owns_slots = !state_->slot_map().SlotsOf(shard_id).empty();
  absl::MutexLock lock(&mu_);
  for (auto& [name, job] : jobs_) {
    if (job.record.phase() != v1::GetJobResponse::RUNNING) continue;
    auto it = job.incarnations.find(shard_id);
    if (it == job.incarnations.end() || it->second == incarnation) continue;
    if (owns_slots) {
      FailLocked(job, absl::StrCat("shard ", shard_id, " restarted"));
    } else {
      job.incarnations.erase(it);
      PersistLocked(job).IgnoreError();  // the next write retries
    }
  }
}

void JobManager::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
      if (mu_.AwaitWithTimeout(absl::Condition(&stop), options_.tick)) return;
    }
    DetectFailures();
    FormWorlds();
    std::vector<std::string> recovering;
    {
      absl::MutexLock lock(&mu_);
      for (const auto& [name, job] : jobs_) {
        if (job.record.phase() == v1::GetJobResponse::RECOVERING) recovering.push_back(name);
      }
    }
    for (const std::string& name : recovering) Recover(name);
  }
}

void JobManager::DetectFailures() {
  const SlotMap map = state_->slot_map();
  std::vector<uint32_t> dead;
  for (const v1::ShardInfo& shard : state_->Shards()) {
    if (shard.state() == v1::ShardInfo::DEAD && !map.SlotsOf(shard.shard_id()).empty()) {
      dead.push_back(shard.shard_id());
    }
  }
  if (dead.empty()) return;
  absl::MutexLock lock(&mu_);
  for (auto& [name, job] : jobs_) {
    if (job.record.phase() != v1::GetJobResponse::RUNNING) continue;
    FailLocked(job, absl::StrCat("shard ", dead[0], " stopped heartbeating"));
  }
}

void JobManager::Recover(const std::string& name) {
  std::string candidate;
  uint64_t generation = 0;
  {
    absl::MutexLock lock(&mu_);
    Job& job = jobs_[name];
    if (job.record.phase() != v1::GetJobResponse::RECOVERING) return;
    generation = job.record.generation();
    std::vector<std::string> candidates(job.record.checkpoints().rbegin(),
                                        job.record.checkpoints().rend());
    if (!job.record.resume_from().empty()) candidates.push_back(job.record.resume_from());
    bool found = false;
    for (const std::string& c : candidates) {
      if (job.bad_checkpoints.contains(c)) continue;
      candidate = c;
      found = true;
      break;
    }
    if (!found && !candidates.empty()) {
      job.record.set_phase(v1::GetJobResponse::FAILED);
      job.record.set_failure(absl::StrCat("no valid checkpoint left to recover from (refused: ",
                                          absl::StrJoin(job.bad_checkpoints, ", "), ")"));
      EMBER_LOG(ERROR) << "job " << name << " failed: " << job.record.failure();
      PersistLocked(job).IgnoreError();
      return;
    }
  }
  if (absl::Status owners = SlotOwners(*state_).status(); !owners.ok()) {
    absl::MutexLock lock(&mu_);
    jobs_[name].waiting_for = absl::StrCat(owners.message(), "; waiting for it to come back");
    return;  // wait until every slot owner is alive
  }

  // The worker state first: a corrupt one disqualifies the checkpoint before any shard
  // is touched.
  v1::WorkerState worker_state;
  absl::Status status;
  if (!candidate.empty()) {
    absl::StatusOr<v1::CheckpointManifest> manifest = catalog_.ReadManifest(name, candidate);
    absl::StatusOr<v1::WorkerState> ws = manifest.ok()
                                             ? catalog_.ReadWorkerState(*manifest)
                                             : absl::StatusOr<v1::WorkerState>(manifest.status());
    if (ws.ok()) worker_state = *std::move(ws);
    status = ws.status();
  }
  uint64_t attempt = 0;
  if (status.ok()) {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<uint64_t> next = NextAttemptLocked();
    if (!next.ok()) return;
    attempt = *next;
  }
  std::map<uint32_t, uint64_t> incarnations;
  // A fresh run empties the tables at its start, and again if it fails before its
  // first checkpoint (the failed attempt's rows go too).
  bool clear = false;
  std::string tables_job;
  {
    absl::MutexLock lock(&mu_);
    clear = candidate.empty() && jobs_[name].record.rows() == v1::JoinJobRequest::START_ROWS_FRESH;
    tables_job = TablesJob(jobs_[name].record);
  }
  if (status.ok()) {
    status = RestoreShards(name, tables_job, candidate, attempt, &incarnations, clear);
  }

  absl::MutexLock lock(&mu_);
  Job& job = jobs_[name];
  if (job.record.generation() != generation ||
      job.record.phase() != v1::GetJobResponse::RECOVERING) {
    return;
  }
  if (!status.ok()) {
    if (absl::IsDataLoss(status) || absl::IsNotFound(status)) {
      EMBER_LOG(WARNING) << "job " << name << ": checkpoint " << candidate
                         << " refused, falling back to the previous one: " << status.message();
      job.bad_checkpoints.insert(candidate);
    }
    job.waiting_for = absl::StrCat(
        "restoring ",
        candidate.empty() ? std::string("the shards") : absl::StrCat("checkpoint ", candidate),
        ": ", status.message());
    return;  // other errors: retried at the next tick
  }
  job.waiting_for.clear();
  job.record.set_attempt(attempt);
  job.record.set_phase(v1::GetJobResponse::RUNNING);
  job.record.set_restored_from(candidate);
  job.record.clear_joined();
  job.record.clear_joined_processes();
  job.incarnations = std::move(incarnations);
  job.restored_state = std::move(worker_state);
  // Elastic: the settle time counts from the attempt's start at the earliest, so that
  // workers who rejoined during the restore all make the formation.
  job.last_arrival = std::max(job.last_arrival, absl::Now());
  PersistLocked(job).IgnoreError();
  EMBER_LOG(INFO) << "job " << name << " attempt " << attempt << " ready"
                  << (candidate.empty()
                          ? std::string(clear ? " (tables emptied)" : " (shards keep their rows)")
                          : absl::StrCat(" from checkpoint ", candidate));
  FormLocked(job, absl::Now());
}

absl::Status JobManager::RestoreShards(const std::string& job, const std::string& tables_job,
                                       const std::string& checkpoint, uint64_t attempt,
                                       std::map<uint32_t, uint64_t>* incarnations, bool clear) {
  // No slot migration switches owners while shards restore for one map.
  std::optional<absl::MutexLock> topology;
  if (options_.topology_mu != nullptr) topology.emplace(options_.topology_mu);
  EMBER_ASSIGN_OR_RETURN(std::vector<v1::ShardInfo> owners, SlotOwners(*state_));
  const SlotMap map = state_->slot_map();
  v1::RestoreShardRequest request;
  request.set_attempt(attempt);
  request.set_epoch(map.epoch());
  request.set_slot_owners(PackSlotOwners(map));
  request.set_clear(clear);
  request.set_job(tables_job);
  if (!checkpoint.empty()) {
    EMBER_ASSIGN_OR_RETURN(std::vector<v1::CheckpointManifest> chain,
                           catalog_.Chain(job, checkpoint));
    for (v1::CheckpointManifest& link : chain) {
      request.add_chain_dirs(catalog_.Dir(job, link.name()));
      *request.add_chain() = std::move(link);
    }
  }
  std::vector<uint64_t> seen(owners.size(), 0);
  std::vector<absl::Status> results = RunParallel(owners.size(), [&](size_t i) -> absl::Status {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + options_.shard_timeout));
    v1::RestoreShardResponse response;
    absl::Status s = FromGrpcStatus(
        stubs_(owners[i].address())->RestoreShard(&context, request, &response), &context);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("shard ", owners[i].shard_id(), " (",
                                                 owners[i].address(), "): ", s.message()));
    }
    seen[i] = response.incarnation();
    return absl::OkStatus();
  });
  // A corrupt checkpoint outranks other failures: it decides the fallback.
  absl::Status first;
  for (const absl::Status& s : results) {
    if (absl::IsDataLoss(s)) return s;
    if (!s.ok() && first.ok()) first = s;
  }
  EMBER_RETURN_IF_ERROR(first);
  for (size_t i = 0; i < owners.size(); ++i) (*incarnations)[owners[i].shard_id()] = seen[i];
  return absl::OkStatus();
}

}  // namespace ember
