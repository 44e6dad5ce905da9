// Copyright 2026 The Ember Authors.
//
// JobManager's checkpoints (job_manager.h; docs/ARCHITECTURE.md "Checkpoints"): the
// Checkpoint RPC, the cut over every slot owner under the topology lock, and the delta
// bases of each shard's snapshot.

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/clip.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "grpcpp/client_context.h"
#include "server/coordinator/job_manager.h"
#include "server/coordinator/run_parallel.h"
#include "server/shared/slot_owners.h"

namespace ember {

absl::StatusOr<v1::CheckpointResponse> JobManager::Checkpoint(
    const v1::CheckpointRequest& request) {
  const absl::Time start = absl::Now();
  const std::string& name_of_job = request.job();
  std::string parent;
  std::string tables_job;  // the store the shards cut (JoinJobResponse.tables_job)
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(name_of_job);
    if (it == jobs_.end())
      return absl::NotFoundError(absl::StrCat("unknown job '", ClipForMessage(name_of_job), "'"));
    Job& job = it->second;
    if (job.record.generation() != request.generation() ||
        job.record.attempt() != request.attempt() ||
        job.record.phase() != v1::GetJobResponse::RUNNING) {
      return absl::AbortedError(absl::StrCat("attempt ", request.attempt(), " of job '",
                                             name_of_job, "' is not running"));
    }
    if (options_.checkpoint_dir.empty()) {
      return absl::FailedPreconditionError("the coordinator runs without --checkpoint_dir");
    }
    if (request.resize() && job.record.max_workers() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job '", name_of_job, "' has a fixed world size: only an elastic run resizes"));
    }
    for (uint32_t rank : request.leaving_ranks()) {
      if (!request.resize() || rank >= static_cast<uint32_t>(job.record.members_size())) {
        return absl::InvalidArgumentError(
            absl::StrCat("leaving rank ", rank, " is not a member of attempt ", request.attempt(),
                         request.resize() ? "" : " (leaving ranks need resize)"));
      }
    }
    if (job.checkpointing) return absl::UnavailableError("a checkpoint of the job is running");
    job.checkpointing = true;
    tables_job = TablesJob(job.record);
    if (request.allow_incremental() && options_.full_every > 1 &&
        job.record.checkpoints_size() > 0 &&
        job.record.checkpoints().rbegin()[0] != job.record.restored_from()) {
      parent = job.record.checkpoints().rbegin()[0];
    }
  }
  const std::string name = CheckpointCatalog::Name(request.state().step(), request.attempt());
  absl::StatusOr<v1::CheckpointManifest> manifest = absl::UnknownError("not written");
  {
    // Whatever happens below, the job may checkpoint again afterwards.
    absl::Cleanup done = [this, &name_of_job] {
      absl::MutexLock lock(&mu_);
      jobs_[name_of_job].checkpointing = false;
    };
    manifest = WriteCheckpoint(request, name, parent, tables_job);
  }
  if (!manifest.ok()) {
    EMBER_LOG(ERROR) << "job " << name_of_job << ": checkpoint " << name
                     << " failed: " << manifest.status().message();
    return manifest.status();
  }
  manifest->set_seconds(absl::ToDoubleSeconds(absl::Now() - start));
  {
    absl::MutexLock lock(&mu_);
    Job& job = jobs_[name_of_job];
    if (job.record.generation() == request.generation()) {
      job.record.add_checkpoints(name);
      while (job.record.checkpoints_size() > kMaxRecordedCheckpoints) {
        job.record.mutable_checkpoints()->erase(job.record.mutable_checkpoints()->begin());
      }
      job.checkpoint_requested = false;
      PersistLocked(job).IgnoreError();
      if (request.resize() && job.record.max_workers() > 0 &&
          job.record.attempt() == request.attempt() &&
          job.record.phase() == v1::GetJobResponse::RUNNING) {
        ResizeLocked(job, request);
      }
    }
  }
  absl::StatusOr<std::vector<std::string>> deleted =
      catalog_.Retain(name_of_job, options_.keep_checkpoints, "");
  if (!deleted.ok()) {
    EMBER_LOG(WARNING) << "job " << name_of_job
                       << ": retention failed: " << deleted.status().message();
  }
  uint64_t bytes = 0;
  for (const v1::ShardSnapshot& s : manifest->shards()) bytes += s.bytes();
  EMBER_LOG(INFO) << "job " << name_of_job << ": checkpoint " << name << " at step "
                  << manifest->step()
                  << (manifest->incremental() ? " (delta of " + parent + ")" : " (full)") << ", "
                  << bytes << " bytes, " << manifest->seconds() << " s";
  v1::CheckpointResponse response;
  *response.mutable_manifest() = *std::move(manifest);
  return response;
}

absl::StatusOr<v1::CheckpointManifest> JobManager::WriteCheckpoint(
    const v1::CheckpointRequest& request, const std::string& name, const std::string& parent,
    const std::string& tables_job) {
  const std::string& job = request.job();
  // The cut and its slot map: no migration switches owners meanwhile.
  std::optional<absl::MutexLock> topology;
  if (options_.topology_mu != nullptr) topology.emplace(options_.topology_mu);
  if (absl::Status prepared = catalog_.Prepare(job, name); !prepared.ok()) {
    // A retry of a checkpoint that was committed (the answer was lost): the same one.
    if (absl::IsAlreadyExists(prepared)) return catalog_.ReadManifest(job, name);
    return prepared;
  }
  const std::string dir = catalog_.Dir(job, name);
  const std::map<uint32_t, uint64_t> base_versions = DeltaBases(job, parent);
  EMBER_ASSIGN_OR_RETURN(std::vector<v1::ShardInfo> owners, SlotOwners(*state_));
  const SlotMap map = state_->slot_map();
  std::vector<v1::ShardSnapshot> snapshots(owners.size());
  auto snapshot = [&](size_t i, bool delta) -> absl::Status {
    v1::CheckpointShardRequest r;
    r.set_dir(dir);
    r.set_name(name);
    r.set_step(request.state().step());  // eviction policies run at this cut
    r.set_attempt(request.attempt());    // a restarted, unrestored shard refuses
    r.set_job(tables_job);
    auto base = base_versions.find(owners[i].shard_id());
    if (delta && base != base_versions.end()) {
      r.set_base_name(parent);
      r.set_base_version(base->second);
    }
    EMBER_ASSIGN_OR_RETURN(snapshots[i], SnapshotShard(owners[i], r));
    return absl::OkStatus();
  };
  const bool want_delta = !base_versions.empty();
  for (const absl::Status& s :
       RunParallel(owners.size(), [&](size_t i) { return snapshot(i, want_delta); })) {
    EMBER_RETURN_IF_ERROR(s);
  }
  // A checkpoint is all deltas or all full: a shard that could not write a delta (it
  // restarted since the parent) makes the others write full snapshots too.
  bool all_delta = want_delta;
  for (const v1::ShardSnapshot& s : snapshots) all_delta &= s.kind() == v1::ShardSnapshot::DELTA;
  if (want_delta && !all_delta) {
    for (size_t i = 0; i < owners.size(); ++i) {
      if (snapshots[i].kind() == v1::ShardSnapshot::DELTA)
        EMBER_RETURN_IF_ERROR(snapshot(i, false));
    }
  }
  std::sort(snapshots.begin(), snapshots.end(),
            [](const v1::ShardSnapshot& a, const v1::ShardSnapshot& b) {
              return a.shard_id() < b.shard_id();
            });

  v1::CheckpointManifest manifest;
  manifest.set_format(1);
  manifest.set_name(name);
  manifest.set_job(job);
  manifest.set_step(request.state().step());
  manifest.set_attempt(request.attempt());
  manifest.set_created_unix_ms(absl::ToUnixMillis(absl::Now()));
  manifest.set_incremental(all_delta);
  if (all_delta) manifest.set_parent(parent);
  manifest.set_epoch(map.epoch());
  manifest.set_slot_owners(PackSlotOwners(map));
  manifest.set_tables_job(tables_job);
  const v1::GetClusterMapResponse cluster = state_->ClusterMap(tables_job);
  for (const v1::TableConfig& t : cluster.tables()) *manifest.add_tables() = t;
  for (v1::ShardSnapshot& s : snapshots) *manifest.add_shards() = std::move(s);
  EMBER_ASSIGN_OR_RETURN(*manifest.mutable_worker_state(),
                         catalog_.WriteWorkerState(job, name, request.state()));
  EMBER_RETURN_IF_ERROR(catalog_.WriteManifest(manifest));
  return manifest;
}

std::map<uint32_t, uint64_t> JobManager::DeltaBases(const std::string& job,
                                                    const std::string& parent) {
  std::map<uint32_t, uint64_t> base_versions;
  if (parent.empty()) return base_versions;
  absl::StatusOr<std::vector<v1::CheckpointManifest>> chain = catalog_.Chain(job, parent);
  const SlotMap now = state_->slot_map();
  if (chain.ok() && static_cast<uint32_t>(chain->size()) < options_.full_every &&
      chain->back().epoch() == now.epoch()) {
    for (const v1::ShardSnapshot& s : chain->back().shards()) {
      base_versions[s.shard_id()] = s.version();
    }
  }
  return base_versions;
}

absl::StatusOr<v1::ShardSnapshot> JobManager::SnapshotShard(
    const v1::ShardInfo& owner, const v1::CheckpointShardRequest& request) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.shard_timeout));
  v1::CheckpointShardResponse response;
  absl::Status s = FromGrpcStatus(
      stubs_(owner.address())->CheckpointShard(&context, request, &response), &context);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("shard ", owner.shard_id(), " (", owner.address(),
                                               "): ", s.message()));
  }
  return response.snapshot();
}

}  // namespace ember
