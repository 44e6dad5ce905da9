// Copyright 2026 The Ember Authors.
//
// Elastic runs (docs/ARCHITECTURE.md "Elastic runs"): a run declares a worker range
// [min, max]; the coordinator forms each attempt's world from the workers waiting for
// a place and assigns their ranks; a resize ends an attempt at a checkpoint, and the
// next attempt starts from that cut at the new world size.

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/clip.h"
#include "common/log.h"
#include "server/coordinator/job_manager.h"

namespace ember {

absl::Status JobManager::CheckElasticRequest(const v1::JoinJobRequest& request) const {
  if (request.max_workers() == 0) {
    if (request.min_workers() != 0) {
      return absl::InvalidArgumentError(absl::StrCat("min_workers ", request.min_workers(),
                                                     " without max_workers: give both (elastic)"));
    }
    return absl::OkStatus();
  }
  constexpr uint32_t kMaxWorkers = 4096;
  if (request.min_workers() < 1 || request.min_workers() > request.max_workers() ||
      request.max_workers() > kMaxWorkers) {
    return absl::InvalidArgumentError(absl::StrCat("worker range [", request.min_workers(), ", ",
                                                   request.max_workers(),
                                                   "] is not 1 <= min <= max <= ", kMaxWorkers));
  }
  if (request.rank() != 0 || request.world_size() != 0) {
    return absl::InvalidArgumentError(
        "an elastic worker (max_workers > 0) leaves rank and world_size to the coordinator");
  }
  if (request.member().empty() || request.member().size() > 128) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an elastic worker needs a member id of 1..128 bytes (has ", request.member().size(), ")"));
  }
  if (options_.checkpoint_dir.empty()) {
    return absl::FailedPreconditionError(
        "an elastic run changes its world size at checkpoints: the coordinator runs without "
        "--checkpoint_dir");
  }
  return absl::OkStatus();
}

absl::Status JobManager::CheckSameMode(const Job& job, const v1::JoinJobRequest& request) const {
  auto describe = [](uint32_t min, uint32_t max, uint32_t world) {
    return max == 0 ? absl::StrCat("a fixed world of ", world, " worker(s)")
                    : absl::StrCat("elastic workers [", min, ", ", max, "]");
  };
  const v1::JobRecord& r = job.record;
  if (r.max_workers() != request.max_workers() || r.min_workers() != request.min_workers()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job '", request.job(), "' runs ",
        describe(r.min_workers(), r.max_workers(), r.world_size()), "; this worker says ",
        describe(request.min_workers(), request.max_workers(), request.world_size()),
        " (every worker of a run declares the same --workers range)"));
  }
  if (r.max_workers() == 0 && request.world_size() != r.world_size()) {
    return absl::InvalidArgumentError(absl::StrCat("job '", request.job(), "' runs ",
                                                   r.world_size(), " workers; this one says ",
                                                   request.world_size()));
  }
  if (r.own_tables() != request.own_tables()) {
    auto tables = [](bool own) { return own ? "tables of its own" : "the shared tables"; };
    return absl::InvalidArgumentError(absl::StrCat(
        "job '", request.job(), "' runs on ", tables(r.own_tables()), "; this worker asks for ",
        tables(request.own_tables()), " (every worker of a run says the same --own_tables)"));
  }
  return absl::OkStatus();
}

bool JobManager::RestartedLocked(const Job& job, const v1::JoinJobRequest& request) {
  if (request.process() == 0) return false;  // a worker that does not say
  const auto& joined = job.record.joined_processes();
  auto it = joined.find(request.member());
  return it != joined.end() && it->second != 0 && it->second != request.process();
}

int JobManager::RankOf(const Job& job, const std::string& member) {
  const auto& members = job.record.members();
  auto it = std::find(members.begin(), members.end(), member);
  return it == members.end() ? -1 : static_cast<int>(it - members.begin());
}

void JobManager::WaitForPlaceLocked(Job& job, const v1::JoinJobRequest& request) {
  const absl::Time now = absl::Now();
  auto [it, added] = job.waiting.try_emplace(request.member());
  it->second.join_at_step = request.join_at_step();
  it->second.last_seen = now;
  if (added) {
    job.last_arrival = now;
    EMBER_LOG(INFO) << "job " << job.record.job() << ": worker '" << request.member()
                    << "' waits for a place"
                    << (request.join_at_step() > 0
                            ? absl::StrCat(" (from step ", request.join_at_step(), ")")
                            : std::string());
  }
  FormLocked(job, now);
}

void JobManager::FormLocked(Job& job, absl::Time now) {
  v1::JobRecord& r = job.record;
  if (r.max_workers() == 0 || r.phase() != v1::GetJobResponse::RUNNING || r.members_size() > 0) {
    return;
  }
  for (auto it = job.waiting.begin(); it != job.waiting.end();) {
    it = now - it->second.last_seen > options_.waiting_expiry ? job.waiting.erase(it) : ++it;
  }
  // The attempt starts at the restored checkpoint's step: workers that asked to join
  // later wait for a resize at or after their step.
  const uint64_t step = r.restored_from().empty() ? 0 : job.restored_state.step();
  std::vector<std::string> eligible;
  for (const auto& [member, w] : job.waiting) {
    if (w.join_at_step <= step) eligible.push_back(member);  // ascending by member id
  }
  bool all_expected = r.expected_size() > 0;
  for (const std::string& m : r.expected()) {
    all_expected &= std::find(eligible.begin(), eligible.end(), m) != eligible.end();
  }
  const size_t n = eligible.size();
  const bool form =
      n >= r.max_workers() ||
      (n >= r.min_workers() && (all_expected || now - job.last_arrival >= options_.elastic_settle));
  if (!form) return;
  // The expected members keep their order (their ranks, less the ones that left); the
  // others follow by member id.
  std::vector<std::string> members;
  for (const std::string& m : r.expected()) {
    if (std::find(eligible.begin(), eligible.end(), m) != eligible.end()) members.push_back(m);
  }
  for (const std::string& m : eligible) {
    if (std::find(members.begin(), members.end(), m) == members.end()) members.push_back(m);
  }
  if (members.size() > r.max_workers()) members.resize(r.max_workers());
  for (const std::string& m : members) {
    job.waiting.erase(m);
    r.add_members(m);
  }
  r.set_world_size(static_cast<uint32_t>(members.size()));
  r.clear_expected();
  r.clear_joined();
  r.clear_joined_processes();
  PersistLocked(job).IgnoreError();
  EMBER_LOG(INFO) << "job " << r.job() << " attempt " << r.attempt() << ": " << members.size()
                  << " worker(s): " << absl::StrJoin(members, ", ")
                  << (job.waiting.empty()
                          ? std::string()
                          : absl::StrCat(" (", job.waiting.size(), " waiting for a later place)"));
}

std::string JobManager::WaitingForLocked(const Job& job, const std::string& member) const {
  const v1::JobRecord& r = job.record;
  if (r.phase() == v1::GetJobResponse::RECOVERING) return job.waiting_for;
  auto it = job.waiting.find(member);
  if (r.members_size() == 0) {
    size_t eligible = 0;
    const uint64_t step = r.restored_from().empty() ? 0 : job.restored_state.step();
    for (const auto& [m, w] : job.waiting) eligible += w.join_at_step <= step;
    return absl::StrCat(eligible, " worker(s) of at least ", r.min_workers(),
                        " have joined attempt ", r.attempt());
  }
  if (it != job.waiting.end() && it->second.join_at_step > 0) {
    return absl::StrCat("waiting to join at the first checkpoint at or after step ",
                        it->second.join_at_step, " (the job runs ", r.world_size(), " of at most ",
                        r.max_workers(), " workers)");
  }
  if (static_cast<uint32_t>(r.members_size()) >= r.max_workers()) {
    return absl::StrCat("the job runs its maximum of ", r.max_workers(),
                        " workers; waiting for a place");
  }
  return absl::StrCat("waiting to join at the job's next checkpoint (it runs ", r.world_size(),
                      " of at most ", r.max_workers(), " workers)");
}

void JobManager::ResizeLocked(Job& job, const v1::CheckpointRequest& request) {
  v1::JobRecord& r = job.record;
  std::vector<std::string> stay, left;
  for (int rank = 0; rank < r.members_size(); ++rank) {
    const bool leaves = std::find(request.leaving_ranks().begin(), request.leaving_ranks().end(),
                                  static_cast<uint32_t>(rank)) != request.leaving_ranks().end();
    (leaves ? left : stay).push_back(r.members(rank));
  }
  r.clear_expected();
  for (const std::string& m : stay) r.add_expected(m);
  r.clear_members();
  r.clear_joined();
  r.clear_joined_processes();
  r.set_resizes(r.resizes() + 1);
  r.set_phase(v1::GetJobResponse::RECOVERING);
  PersistLocked(job).IgnoreError();
  EMBER_LOG(INFO) << "job " << r.job() << " attempt " << r.attempt() << " resizes at step "
                  << request.state().step() << ": " << stay.size() << " stay"
                  << (left.empty() ? std::string()
                                   : absl::StrCat(", ", absl::StrJoin(left, ", "), " leave"))
                  << ", " << job.waiting.size() << " waiting";
}

void JobManager::FormWorlds() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  for (auto& [name, job] : jobs_) FormLocked(job, now);
}

}  // namespace ember
