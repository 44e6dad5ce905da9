// Copyright 2026 The Ember Authors.

#include "server/ps/ps_service.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster_token.h"
#include "common/float16.h"
#include "common/grpc_status.h"
#include "common/job_name.h"
#include "common/log.h"
#include "common/pull_wire.h"
#include "common/slot.h"
#include "common/status_macros.h"
#include "grpc/grpc.h"
#include "grpcpp/support/server_interceptor.h"
#include "server/ps/request_codec.h"
#include "server/shared/slot_owners.h"

namespace ember {

PsServiceImpl::PsServiceImpl(EmbeddingStore* store, uint32_t shard_id, SlotMap slot_map,
                             uint64_t dedup_window, PsMetrics* metrics, uint32_t max_batch_keys)
    : incarnation_(absl::Uniform<uint64_t>(absl::BitGen(), 1, ~uint64_t{0})),
      shard_id_(shard_id),
      max_batch_keys_(max_batch_keys),
      dedup_window_(dedup_window),
      metrics_(metrics),
      default_job_(new JobStore("", store, dedup_window)),
      slot_map_(std::make_shared<const SlotMap>(std::move(slot_map))),
      slot_load_(new std::atomic<uint64_t>[kNumSlots]) {
  {
    absl::MutexLock lock(&jobs_mu_);
    jobs_[""].reset(default_job_);
  }
  for (uint32_t slot = 0; slot < kNumSlots; ++slot) slot_load_[slot].store(0);
  if (metrics_ != nullptr) metrics_->SetEpoch(slot_map_->epoch());
  owner_ = std::make_unique<ReplicaOwner>(static_cast<ReplicaHost*>(this), shard_id_, incarnation_,
                                          hot_options_.owner, metrics_);
  watch_slots_ = std::make_unique<WatchSlots>(WatchLimits(), shard_id_);
}

void PsServiceImpl::SetInflightLimits(const InflightLimits& limits) {
  InflightLimits mine = limits;
  mine.shard_id = shard_id_;
  inflight_ = std::make_unique<InflightLimiter>(mine);
}

PsServiceImpl::~PsServiceImpl() { owner_->Stop(); }

void PsServiceImpl::SetSlotMap(SlotMap slot_map) {
  const uint64_t before = this->slot_map()->epoch();
  const SlotRanges gained = InstallMap(std::move(slot_map));
  if (gained.empty() && this->slot_map()->epoch() == before) return;
  RecordGainedInOthers(default_job_, gained);
  absl::ReaderMutexLock store(&default_job_->mu);
  RecordGained(*default_job_, gained);
  ReplicasAfterMapChange();
}

void PsServiceImpl::RecordGained(JobStore& job, const SlotRanges& gained) {
  for (const auto& [first, last] : gained) job.store->RecordSlotsGained(first, last);
}

void PsServiceImpl::RecordGainedInOthers(const JobStore* held, const SlotRanges& gained) {
  if (gained.empty()) return;
  for (JobStore* job : AllJobs()) {
    if (job == held) continue;
    absl::ReaderMutexLock lock(&job->mu);
    RecordGained(*job, gained);
  }
}

void PsServiceImpl::EnableJobStores(JobStorageOpener open) { open_job_ = std::move(open); }

absl::Status PsServiceImpl::OpenJobStore(const std::string& job) {
  return FindOrOpenJob(job).status();
}

std::vector<std::string> PsServiceImpl::JobStoreNames() const {
  std::vector<std::string> names;
  absl::ReaderMutexLock lock(&jobs_mu_);
  for (const auto& [name, job] : jobs_) {
    if (!name.empty()) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

uint64_t PsServiceImpl::attempt(const std::string& job) const {
  absl::StatusOr<JobStore*> found = FindJob(job);
  return found.ok() ? (*found)->attempt.load(std::memory_order_acquire) : 0;
}

absl::StatusOr<JobStore*> PsServiceImpl::FindJob(const std::string& job) const {
  if (job.empty()) return default_job_;
  absl::ReaderMutexLock lock(&jobs_mu_);
  auto it = jobs_.find(job);
  if (it != jobs_.end()) return it->second.get();
  EMBER_RETURN_IF_ERROR(CheckJobName(job));
  return absl::NotFoundError(absl::StrCat("shard ", shard_id_, " holds no store of job '", job,
                                          "': its tables are created (CreateTable) or restored "
                                          "(RestoreShard) with the job named first"));
}

absl::StatusOr<JobStore*> PsServiceImpl::FindOrOpenJob(const std::string& job) {
  if (job.empty()) return default_job_;
  EMBER_RETURN_IF_ERROR(CheckJobName(job));
  // Held across the open: two first calls of one job must not open its database twice.
  absl::MutexLock lock(&jobs_mu_);
  auto it = jobs_.find(job);
  if (it != jobs_.end()) return it->second.get();
  if (!open_job_) {
    return absl::FailedPreconditionError(
        absl::StrCat("shard ", shard_id_, " keeps no stores of jobs (a memory-only shard); job '",
                     job, "' can use the default store (no job named)"));
  }
  absl::StatusOr<std::unique_ptr<ShardStorage>> storage = open_job_(job);
  if (!storage.ok()) {
    return absl::Status(storage.status().code(),
                        absl::StrCat("shard ", shard_id_, ": opening the store of job '", job,
                                     "': ", storage.status().message()));
  }
  auto opened = std::make_unique<JobStore>(job, *std::move(storage), dedup_window_);
  JobStore* raw = opened.get();
  jobs_[job] = std::move(opened);
  EMBER_LOG(INFO) << "shard " << shard_id_ << ": opened the store of job '" << job << "' ("
                  << raw->store->ListTables().size() << " tables, version " << raw->store->version()
                  << ")";
  return raw;
}

std::vector<JobStore*> PsServiceImpl::AllJobs() const {
  std::vector<JobStore*> all{default_job_};
  absl::ReaderMutexLock lock(&jobs_mu_);
  for (const auto& [name, job] : jobs_) {
    if (!name.empty()) all.push_back(job.get());
  }
  // Jobs ascending after the default store (metrics, fence answers: a stable order).
  std::sort(all.begin() + 1, all.end(),
            [](const JobStore* a, const JobStore* b) { return a->job < b->job; });
  return all;
}

PsServiceImpl::SlotRanges PsServiceImpl::InstallMap(SlotMap slot_map) {
  auto next = std::make_shared<const SlotMap>(std::move(slot_map));
  absl::MutexLock lock(&map_mu_);
  // Maps only move forward: a heartbeat answer may arrive after InstallSlotMap.
  if (next->epoch() < slot_map_->epoch()) return {};
  // Slots gained from another shard (a move switched them here) are resynced in the
  // update stream at this point of its history: markers after the map is in place.
  // The first assignment (epoch 0 -> N) gains nothing from anyone.
  SlotRanges gained;
  if (slot_map_->epoch() > 0) {
    for (uint32_t slot = 0; slot < kNumSlots; ++slot) {
      if (next->OwnerOf(slot) != shard_id_ || slot_map_->OwnerOf(slot) == shard_id_) continue;
      if (!gained.empty() && gained.back().second + 1 == slot) {
        gained.back().second = slot;
      } else {
        gained.emplace_back(slot, slot);
      }
    }
  }

  // Under the lock, so that racing installs leave the gauge at the installed epoch.
  if (metrics_ != nullptr) metrics_->SetEpoch(next->epoch());
  if (any_fenced_.load()) {
    // A fenced slot that moved away is done migrating: the new map redirects its calls.
    for (uint32_t slot = 0; slot < kNumSlots; ++slot) {
      if (fenced_[slot] && next->OwnerOf(slot) != shard_id_) fenced_[slot] = false;
    }
    any_fenced_.store(fenced_.any());
  }
  slot_map_ = std::move(next);
  return gained;
}

void PsServiceImpl::EnableCheckpoints(ShardStorage* storage) {
  absl::MutexLock lock(&default_job_->mu);
  default_job_->storage = storage;
}

uint64_t PsServiceImpl::version() const { return default_job_->Version(); }

void PsServiceImpl::WithStore(const PsStoreCollector::Visitor& visit) const {
  absl::ReaderMutexLock lock(&default_job_->mu);
  visit(*default_job_->store,
        default_job_->storage != nullptr ? default_job_->storage->rocksdb() : nullptr);
}

void PsServiceImpl::WithEachStore(const PsStoreCollector::Visitor& visit) const {
  for (const JobStore* job : AllJobs()) {
    absl::ReaderMutexLock lock(&job->mu);
    visit(*job->store, job->storage != nullptr ? job->storage->rocksdb() : nullptr);
  }
}

void PsServiceImpl::WithEachJobStore(const PsJobStoresCollector::Visitor& visit) const {
  for (const JobStore* job : AllJobs()) {
    if (job == default_job_) continue;
    absl::ReaderMutexLock lock(&job->mu);
    visit(job->job, *job->store, job->storage != nullptr ? job->storage->rocksdb() : nullptr);
  }
}

absl::Status PsServiceImpl::CheckAttempt(const JobStore& job, uint64_t attempt) const {
  if (attempt == 0) return absl::OkStatus();
  const uint64_t current = job.attempt.load(std::memory_order_acquire);
  if (attempt == current) return absl::OkStatus();
  const std::string of_job = job.job.empty() ? "" : absl::StrCat(" of job '", job.job, "'");
  if (attempt < current) {
    return absl::AbortedError(absl::StrCat("job attempt ", attempt, of_job,
                                           " was rolled back: shard ", shard_id_,
                                           " serves attempt ", current));
  }
  if (attempt > current) {
    // A shard that owns no slot holds no rows of any attempt (a drained shard back
    // under its id, which nothing restores): routing answers the call with a redirect,
    // where a retry would only wait for that restore until its deadline.
    const std::shared_ptr<const SlotMap> map = slot_map();
    if (map->epoch() > 0 && map->SlotsOf(shard_id_).empty()) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat("shard ", shard_id_,
                                               " is not restored for job attempt ", attempt, of_job,
                                               " yet (it serves attempt ", current, ")"));
  }
  return absl::OkStatus();
}

std::shared_ptr<const SlotMap> PsServiceImpl::slot_map() const {
  absl::MutexLock lock(&map_mu_);
  return slot_map_;
}

absl::Status PsServiceImpl::CheckRouting(uint64_t table_seed, absl::Span<const uint64_t> ids,
                                         uint64_t epoch) const {
  const std::shared_ptr<const SlotMap> map = slot_map();
  if (epoch > map->epoch()) {
    // The client has a newer map than this shard (a shard that just started or missed
    // a heartbeat): the shard cannot tell who owns what, so the call is retryable.
    return absl::UnavailableError(absl::StrCat("shard ", shard_id_, "'s slot map (epoch ",
                                               map->epoch(), ") is behind the request's (epoch ",
                                               epoch, "); retry once it catches up"));
  }
  if (epoch != map->epoch()) {
    const uint32_t slot = SlotOf(table_seed, ids[0]);
    return WrongShardError(slot, map->OwnerOf(slot), map->epoch(),
                           absl::StrCat("request epoch ", epoch, " is not the shard's"));
  }
  // One pass: ownership, migration fences (only while some exist, read under map_mu_)
  // and the slot load. A call rejected part-way has counted the keys before the rejected
  // one.
  auto check = [&](const SlotSet* fenced) -> absl::Status {
    for (uint64_t id : ids) {
      const uint32_t slot = SlotOf(table_seed, id);
      const uint32_t owner = map->OwnerOf(slot);
      if (owner != shard_id_) {
        return WrongShardError(slot, owner, map->epoch(),
                               absl::StrCat("id ", id, " is not owned by shard ", shard_id_));
      }
      if (fenced != nullptr && (*fenced)[slot]) {
        return absl::UnavailableError(absl::StrCat("slot ", slot, " of shard ", shard_id_,
                                                   " is switching owners (migration); retry"));
      }
      slot_load_[slot].fetch_add(1, std::memory_order_relaxed);
    }
    return absl::OkStatus();
  };
  if (!any_fenced_.load(std::memory_order_acquire)) return check(nullptr);
  absl::MutexLock fence_lock(&map_mu_);
  return check(&fenced_);
}

absl::Status PsServiceImpl::DoPull(const v1::PullRequest& request, v1::PullResponse* response) {
  std::string* out = response->mutable_values();
  return DoPullInto(request, response, [out](size_t bytes) -> absl::StatusOr<char*> {
    out->resize(bytes);
    return out->data();
  });
}

absl::Status PsServiceImpl::DoPullInto(
    const v1::PullRequest& request, v1::PullResponse* replica_response,
    absl::FunctionRef<absl::StatusOr<char*>(size_t bytes)> allocate) {
  if (request.replica_read()) {
    if (!request.job().empty()) {
      return absl::InvalidArgumentError("Pull: replica_read of a job's store (no replicas yet)");
    }
    absl::ReaderMutexLock lock(&default_job_->mu);
    EMBER_RETURN_IF_ERROR(CheckAttempt(*default_job_, request.attempt()));
    return DoReplicaPull(request, replica_response);
  }
  EMBER_ASSIGN_OR_RETURN(JobStore* const job, FindJob(request.job()));
  absl::ReaderMutexLock lock(&job->mu);
  EmbeddingStore* const store = job->store;
  EMBER_RETURN_IF_ERROR(CheckAttempt(*job, request.attempt()));
  EMBER_ASSIGN_OR_RETURN(const v1::TableConfig config, store->GetTableConfig(request.table()));
  EMBER_ASSIGN_OR_RETURN(const size_t element_bytes, ElementBytes(request.encoding()));
  EMBER_ASSIGN_OR_RETURN(const std::vector<uint64_t> ids,
                         DecodeIds(request.ids(), max_batch_keys_));
  EMBER_RETURN_IF_ERROR(CheckRouting(config.seed(), ids, request.epoch()));
  const size_t elements = ids.size() * config.dim();
  EMBER_ASSIGN_OR_RETURN(char* const out, allocate(elements * element_bytes));
  if (request.encoding() == v1::VALUE_ENCODING_FLOAT32 &&
      reinterpret_cast<uintptr_t>(out) % alignof(float) == 0) {
    // The store writes straight into the response bytes: no staging copy.
    EMBER_RETURN_IF_ERROR(
        store->Pull(request.table(), ids, absl::MakeSpan(reinterpret_cast<float*>(out), elements)));
  } else {
    std::vector<float> values(elements);
    EMBER_RETURN_IF_ERROR(store->Pull(request.table(), ids, absl::MakeSpan(values)));
    if (request.encoding() == v1::VALUE_ENCODING_FLOAT16) {
      EncodeFloat16Bytes(values, out);
    } else {
      std::memcpy(out, values.data(), elements * sizeof(float));
    }
  }
  if (metrics_ != nullptr) metrics_->CountRowsPulled(request.table(), ids.size());
  pulled_keys_.fetch_add(ids.size(), std::memory_order_relaxed);
  // Hot keys are the default store's (its replicas); a job's keys are not counted.
  if (job == default_job_) RecordServed(request.table(), ids);
  return absl::OkStatus();
}

absl::Status PsServiceImpl::DoPush(const v1::PushRequest& request, v1::PushResponse* response,
                                   bool* copy) {
  if (copy != nullptr) *copy = false;
  EMBER_ASSIGN_OR_RETURN(JobStore* const job, FindJob(request.job()));
  absl::ReaderMutexLock lock(&job->mu);
  EmbeddingStore* const store = job->store;
  EMBER_RETURN_IF_ERROR(CheckAttempt(*job, request.attempt()));
  EMBER_ASSIGN_OR_RETURN(const v1::TableConfig config, store->GetTableConfig(request.table()));
  EMBER_ASSIGN_OR_RETURN(const size_t element_bytes, ElementBytes(request.encoding()));
  EMBER_ASSIGN_OR_RETURN(const std::vector<uint64_t> ids,
                         DecodeIds(request.ids(), max_batch_keys_));
  const size_t elements = ids.size() * config.dim();
  if (request.grads().size() != elements * element_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("grads length ", request.grads().size(),
                                                   " != ids ", ids.size(), " * dim ", config.dim(),
                                                   " * ", element_bytes));
  }
  std::vector<float> grads(elements);
  if (request.encoding() == v1::VALUE_ENCODING_FLOAT16) {
    DecodeFloat16Bytes(request.grads(), absl::MakeSpan(grads));
  } else {
    DecodeFloat32Bytes(request.grads(), absl::MakeSpan(grads));
  }

  EMBER_ASSIGN_OR_RETURN(
      const PushDedup::Ticket ticket,
      job->dedup.Begin(request.worker_id(), request.sequence(), PushDigest(request)));
  // Hot rows (copied to replica holders by the handler) are the default store's.
  const bool may_copy = copy != nullptr && job == default_job_;
  if (ticket.duplicate) {
    if (metrics_ != nullptr) metrics_->CountPushDuplicate();
    response->set_version(ticket.version);
    // The first try may have failed to copy its hot rows: copy them (again).
    if (may_copy) *copy = true;
    return absl::OkStatus();
  }
  // Routing is checked after dedup: a retry of a push this shard applied must get
  // its original answer even if the slot has moved since (the response was lost).
  if (absl::Status routed = CheckRouting(config.seed(), ids, request.epoch()); !routed.ok()) {
    job->dedup.Finish(request.worker_id(), request.sequence(), /*ok=*/false, 0);
    return routed;
  }
  const absl::Status status = store->Push(request.table(), ids, grads, request.step());
  // Read after the push: at or after every version this push's rows took.
  const uint64_t version = store->version();
  job->dedup.Finish(request.worker_id(), request.sequence(), status.ok(), version);
  if (status.ok()) {
    response->set_version(version);
    if (metrics_ != nullptr) metrics_->CountRowsPushed(request.table(), ids.size());
    pushed_keys_.fetch_add(ids.size(), std::memory_order_relaxed);
    if (may_copy) *copy = true;
  }
  return status;
}

absl::Status PsServiceImpl::DoCreateTable(const v1::CreateTableRequest& request,
                                          v1::CreateTableResponse* response) {
  EMBER_ASSIGN_OR_RETURN(JobStore* const job, FindOrOpenJob(request.job()));
  absl::ReaderMutexLock lock(&job->mu);
  EMBER_RETURN_IF_ERROR(job->store->CreateTable(request.config()));
  EMBER_ASSIGN_OR_RETURN(*response->mutable_config(),
                         job->store->GetTableConfig(request.config().name()));
  return absl::OkStatus();
}

absl::Status PsServiceImpl::DoGetShardInfo(const v1::GetShardInfoRequest& request,
                                           v1::GetShardInfoResponse* response) {
  EMBER_ASSIGN_OR_RETURN(JobStore* const job, FindJob(request.job()));
  for (std::string& name : JobStoreNames()) response->add_jobs(std::move(name));
  absl::ReaderMutexLock lock(&job->mu);
  const EmbeddingStore* const store = job->store;
  const std::shared_ptr<const SlotMap> map = slot_map();
  response->set_shard_id(shard_id_);
  response->set_epoch(map->epoch());
  response->set_owned_slots(static_cast<uint32_t>(map->SlotsOf(shard_id_).size()));
  response->set_version(store->version());
  for (std::string& name : store->ListTables()) response->add_tables(std::move(name));
  response->set_incarnation(incarnation_);
  response->set_attempt(job->attempt.load());
  response->set_restores(restores_.load());
  response->set_stream_id(job->stream_id);
  response->set_stream_start_version(job->stream_start_version);
  response->set_stream_restored_from(job->stream_restored_from);
  response->set_stream_parent_id(job->stream_parent_id);
  response->set_stream_parent_version(job->stream_parent_version);
  const StoreStats stats = store->Stats();
  response->set_stored_rows(store->EstimatedStoredRows());
  response->set_rows_in_memory(static_cast<uint64_t>(stats.rows_in_memory));
  response->set_memory_bytes(static_cast<uint64_t>(stats.memory_held_bytes));
  response->set_disk_bytes(static_cast<uint64_t>(stats.disk_bytes));
  response->set_requests(data_calls_.load());
  uint64_t cumulative = 0;
  for (size_t i = 0; i < latency_counts_.size(); ++i) {
    cumulative += latency_counts_[i].load(std::memory_order_relaxed);
    if (i < kLatencyBoundsMs.size()) response->add_latency_bounds_ms(kLatencyBoundsMs[i]);
    response->add_latency_counts(cumulative);
  }
  response->set_pulled_keys(pulled_keys_.load(std::memory_order_relaxed));
  response->set_pushed_keys(pushed_keys_.load(std::memory_order_relaxed));
  response->set_replica_pulled_keys(replica_pulled_keys_.load(std::memory_order_relaxed));
  response->set_replica_rows(replicas_.size());
  response->set_hot_set_version(owner_->view()->version());
  *response->mutable_hot_keys() = HotKeyReport(hot_options_.shard_info_top_n);
  absl::MutexLock lock_map(&map_mu_);
  for (uint32_t slot = 0; slot < kNumSlots; ++slot) {
    if (fenced_[slot]) response->add_fenced_slots(slot);
  }
  return absl::OkStatus();
}

void PsServiceImpl::RecordDataCall(int64_t micros) {
  data_calls_.fetch_add(1, std::memory_order_relaxed);
  const double ms = static_cast<double>(micros) / 1000.0;
  size_t bucket = 0;
  while (bucket < kLatencyBoundsMs.size() && ms > kLatencyBoundsMs[bucket]) ++bucket;
  latency_counts_[bucket].fetch_add(1, std::memory_order_relaxed);
}

absl::Status PsServiceImpl::DoChecksum(const v1::ChecksumRequest& request,
                                       v1::ChecksumResponse* response) {
  EMBER_ASSIGN_OR_RETURN(JobStore* const job, FindJob(request.job()));
  absl::ReaderMutexLock lock(&job->mu);
  EmbeddingStore* const store = job->store;
  // Durable first, so that what is digested survives a crash (fault tests compare
  // digests before and after one).
  EMBER_RETURN_IF_ERROR(store->Flush());
  std::vector<std::string> tables;
  if (request.table().empty()) {
    tables = store->ListTables();
    std::sort(tables.begin(), tables.end());
  } else {
    tables.push_back(request.table());
  }
  // Only the slots this shard owns: a move in flight has copied rows to its target, and
  // a finished one leaves them on the source until its cleanup. Before any map (epoch
  // 0) every row counts.
  const std::shared_ptr<const SlotMap> map = slot_map();
  SlotFilter owned = nullptr;
  if (map->epoch() > 0) {
    owned = [&map, this](uint32_t slot) { return map->OwnerOf(slot) == shard_id_; };
  }
  response->set_epoch(map->epoch());
  for (const std::string& name : tables) {
    EMBER_ASSIGN_OR_RETURN(TableChecksum sum, store->Checksum(name, owned));
    v1::ChecksumResponse::Table* t = response->add_tables();
    t->set_table(sum.table);
    t->set_rows(sum.rows);
    t->set_digest(sum.digest);
  }
  return absl::OkStatus();
}

absl::Status PsServiceImpl::DoCheckpointShard(const v1::CheckpointShardRequest& request,
                                              v1::CheckpointShardResponse* response) {
  if (request.dir().empty() || request.name().empty()) {
    return absl::InvalidArgumentError("CheckpointShard needs a dir and a name");
  }
  EMBER_ASSIGN_OR_RETURN(JobStore* const job, FindJob(request.job()));
  EvictionReport evicted;
  {
    absl::MutexLock admin(&job->admin_mu);
    // Exclusive: no push is applied while the snapshot is cut.
    absl::MutexLock lock(&job->mu);
    // A job's cut is of this attempt's rows: a shard that restarted and has not been
    // restored for the attempt holds other rows (UNAVAILABLE), one restored for a later
    // attempt has moved on (ABORTED).
    EMBER_RETURN_IF_ERROR(CheckAttempt(*job, request.attempt()));
    if (job->storage == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("shard ", shard_id_, " has no checkpoint storage (memory-only shard)"));
    }
    EMBER_ASSIGN_OR_RETURN(
        *response->mutable_snapshot(),
        job->storage->Checkpoint(shard_id_, request.dir(), request.name(), request.base_name(),
                                 request.base_version(), request.step(), &evicted));
    response->mutable_snapshot()->set_stream_id(job->stream_id);
  }
  if (evicted.rows_removed > 0 || evicted.rows_decayed > 0) {
    EMBER_LOG(INFO) << "shard " << shard_id_ << ": eviction in " << job->Describe() << " at step "
                    << request.step() << " removed " << evicted.rows_removed << " of "
                    << evicted.rows_scanned << " rows (" << evicted.rows_decayed << " decayed)";
  }
  if (evicted.rows_removed > 0 && job == default_job_) {
    // Evicted rows read as their init vectors now: their replicas must follow before
    // the checkpoint is answered (a BSP job resumes pulling only after it), so that
    // replica reads stay exact. Waited for outside the store lock the copies read under.
    owner_->RefillAll();
    if (!owner_->WaitSettled(absl::Seconds(10))) {
      return absl::UnavailableError(absl::StrCat(
          "shard ", shard_id_, ": replicas of evicted hot rows not refreshed within 10 s"));
    }
  }
  return absl::OkStatus();
}

absl::Status PsServiceImpl::DoRestoreShard(const v1::RestoreShardRequest& request,
                                           v1::RestoreShardResponse* response) {
  if (request.attempt() == 0) return absl::InvalidArgumentError("RestoreShard needs attempt >= 1");
  if (request.clear() && request.chain_size() > 0) {
    return absl::InvalidArgumentError("RestoreShard: clear with a checkpoint chain");
  }
  if (request.chain_size() != request.chain_dirs_size()) {
    return absl::InvalidArgumentError(absl::StrCat("RestoreShard: ", request.chain_size(),
                                                   " manifests but ", request.chain_dirs_size(),
                                                   " directories"));
  }
  EMBER_ASSIGN_OR_RETURN(SlotMap map, UnpackSlotOwners(request.slot_owners(), request.epoch()));
  EMBER_ASSIGN_OR_RETURN(JobStore* const job, FindOrOpenJob(request.job()));
  const std::string in_job = job->job.empty() ? "" : absl::StrCat(" in job '", job->job, "'");
  absl::MutexLock admin(&job->admin_mu);
  if (request.attempt() < job->attempt.load()) {
    return absl::FailedPreconditionError(
        absl::StrCat("shard ", shard_id_, " serves attempt ", job->attempt.load(), in_job,
                     "; refusing to go back to ", request.attempt()));
  }
  SlotRanges gained;
  {
    absl::MutexLock lock(&job->mu);
    // Counted before the rows change (also when it fails half-way): a slot move that
    // read or wrote this store's rows before sees it at its next call.
    if (request.chain_size() > 0 || request.clear()) restores_.fetch_add(1);
    if (request.chain_size() > 0) {
      if (job->storage == nullptr) {
        return absl::FailedPreconditionError(
            absl::StrCat("shard ", shard_id_, " has no checkpoint storage (memory-only shard)"));
      }
      const std::vector<v1::CheckpointManifest> chain(request.chain().begin(),
                                                      request.chain().end());
      const std::vector<std::string> dirs(request.chain_dirs().begin(), request.chain_dirs().end());
      const uint32_t me = shard_id_;
      absl::StatusOr<ShardRestoreReport> report = job->storage->Restore(
          chain, dirs, [&map, me](uint32_t slot) { return map.OwnerOf(slot) == me; });
      if (!report.ok()) {
        // A failure past the swap reopened a database: the old store object is gone, and
        // the reopened one has a new change log, so followers start a new stream.
        if (job->storage->store() != job->store) {
          job->store = job->storage->store();
          job->StartNewStream();
        }
        return report.status();
      }
      job->store = job->storage->store();
      job->BeginStreamAfterRestore(request, map, shard_id_);
      response->set_rows(report->rows);
      response->set_seconds(report->seconds);
    } else if (request.clear()) {
      if (job->storage == nullptr) {
        return absl::FailedPreconditionError(absl::StrCat(
            "shard ", shard_id_, " cannot empty its tables for a fresh run: memory-only shard"));
      }
      const absl::Status cleared = job->storage->Clear();
      // A new store even when it failed (the old one reopened): a new stream either way.
      job->store = job->storage->store();
      job->StartNewStream();
      job->stream_origin_empty = cleared.ok();
      EMBER_RETURN_IF_ERROR(cleared);
      EMBER_LOG(INFO) << "shard " << shard_id_ << ": tables" << in_job
                      << " emptied for a fresh run (attempt " << request.attempt() << ")";
    }
    // Pushes deduplicated before the rollback say nothing about the restored rows.
    job->dedup.Clear();
    if (map.epoch() >= slot_map()->epoch()) {
      gained = InstallMap(std::move(map));
      RecordGained(*job, gained);
    }
    job->attempt.store(request.attempt(), std::memory_order_release);
    if (job == default_job_) {
      // Replicas (the default store's): copies made for an older attempt go; this
      // shard's own hot rows changed.
      const uint64_t restored = request.attempt();
      replicas_.DropIf([restored](absl::string_view, uint64_t, const ReplicaMeta& meta) {
        return meta.source.owner_attempt < restored;
      });
      if (metrics_ != nullptr) metrics_->SetReplicaRows(replicas_.size());
      default_job_->mu.AssertHeld();  // it is `job`'s, held above
      ReplicasAfterMapChange();
    }
    response->set_version(job->store->version());
  }
  // Other stores record the gained slots under their own locks (never two stores' at
  // once: restores of two jobs run concurrently).
  RecordGainedInOthers(job, gained);
  response->set_incarnation(incarnation_);
  return absl::OkStatus();
}

int64_t PsServiceImpl::CallStart() const {
  return metrics_ == nullptr ? 0 : metrics_->clock()->NowMicros();
}

void PsServiceImpl::RecordCall(RpcMethodMetrics& (PsMetrics::*rpc)(), absl::string_view method,
                               int64_t start_micros, const absl::Status& status,
                               const google::protobuf::Message& request,
                               const google::protobuf::Message& response) {
  if (metrics_ == nullptr) return;
  // Message bytes (the bytes fields dominate): no response is sent on error.
  RecordCall(rpc, method, start_micros, status, request.ByteSizeLong(),
             status.ok() ? response.ByteSizeLong() : 0);
}

void PsServiceImpl::RecordCall(RpcMethodMetrics& (PsMetrics::*rpc)(), absl::string_view method,
                               int64_t start_micros, const absl::Status& status,
                               size_t request_bytes, size_t response_bytes) {
  if (metrics_ == nullptr) return;
  (metrics_->*rpc)().Record(status.code(), metrics_->clock()->NowMicros() - start_micros);
  metrics_->CountBytes(method, request_bytes, status.ok() ? response_bytes : 0);
}

grpc::ServerUnaryReactor* PsServiceImpl::FinishCall(grpc::CallbackServerContext* context,
                                                    RpcMethodMetrics& (PsMetrics::*rpc)(),
                                                    absl::string_view method, int64_t start_micros,
                                                    const absl::Status& status,
                                                    const google::protobuf::Message& request,
                                                    const google::protobuf::Message& response) {
  RecordCall(rpc, method, start_micros, status, request, response);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status, context));
  return reactor;
}

namespace {

// A Pull's reactor: holds the call's in-flight ticket until gRPC is done with the
// answer (sent, or the call cancelled), so the bound counts the bytes gRPC still holds.
class PullReactor final : public grpc::ServerUnaryReactor {
 public:
  void OnDone() override { delete this; }
  InflightLimiter::Ticket ticket;
};

}  // namespace

grpc::ServerUnaryReactor* PsServiceImpl::Pull(grpc::CallbackServerContext* context,
                                              const grpc::ByteBuffer* request_bytes,
                                              grpc::ByteBuffer* response_bytes) {
  auto* reactor = new PullReactor();
  const int64_t start = CallStart();
  const absl::Time began = absl::Now();
  v1::PullRequest request;
  v1::PullResponse replica_response;
  std::optional<PulledValues> values;
  absl::Status status;
  grpc::ByteBuffer parsed(*request_bytes);  // Deserialize consumes its buffer
  if (!grpc::SerializationTraits<v1::PullRequest>::Deserialize(&parsed, &request).ok()) {
    status = absl::InvalidArgumentError("Pull: the request is not a valid PullRequest");
  }
  if (status.ok()) {
    status = DoPullInto(request, &replica_response,
                        [this, reactor, &values](size_t bytes) -> absl::StatusOr<char*> {
                          if (inflight_ != nullptr) {
                            EMBER_ASSIGN_OR_RETURN(reactor->ticket,
                                                   inflight_->Admit(static_cast<int64_t>(bytes)));
                          }
                          values.emplace(bytes);
                          return values->data();
                        });
  }
  if (status.ok() && values.has_value()) {
    *response_bytes = values->Release();
  } else if (status.ok()) {  // a replica read
    bool own_buffer = false;
    const grpc::Status serialized = grpc::SerializationTraits<v1::PullResponse>::Serialize(
        replica_response, response_bytes, &own_buffer);
    if (!serialized.ok()) {
      status = absl::InternalError(absl::StrCat("Pull: ", serialized.error_message()));
    }
  }
  RecordDataCall(absl::ToInt64Microseconds(absl::Now() - began));
  RecordCall(&PsMetrics::pull, "Pull", start, status, request_bytes->Length(),
             response_bytes->Length());
  reactor->Finish(ToGrpcStatus(status, context));
  return reactor;
}

grpc::ServerUnaryReactor* PsServiceImpl::Push(grpc::CallbackServerContext* context,
                                              const v1::PushRequest* request,
                                              v1::PushResponse* response) {
  const int64_t start = CallStart();
  const absl::Time began = absl::Now();
  bool copy = false;
  const absl::Status status = DoPush(*request, response, &copy);
  if (!status.ok() || !copy) {
    RecordDataCall(absl::ToInt64Microseconds(absl::Now() - began));
    return FinishCall(context, &PsMetrics::push, "Push", start, status, *request, *response);
  }
  // Hot rows of this push go to their replica holders first (synchronous mode): the
  // reactor finishes when they acknowledged, on the thread of the last answer. The
  // copies end a little before the client's deadline, so it hears why.
  std::vector<uint64_t> ids(request->ids().size() / sizeof(uint64_t));
  std::memcpy(ids.data(), request->ids().data(), ids.size() * sizeof(uint64_t));
  const absl::Time now = absl::Now();
  absl::Time deadline = now + hot_options_.max_copy_wait;
  const absl::Time client_deadline = absl::FromChrono(context->deadline());
  if (client_deadline < deadline) deadline = now + (client_deadline - now) * 9 / 10;
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  owner_->AfterPush(request->table(), ids, request->step(), deadline,
                    [this, context, reactor, request, response, start, began](absl::Status copied) {
                      RecordDataCall(absl::ToInt64Microseconds(absl::Now() - began));
                      RecordCall(&PsMetrics::push, "Push", start, copied, *request, *response);
                      reactor->Finish(ToGrpcStatus(copied, context));
                    });
  return reactor;
}

grpc::ServerUnaryReactor* PsServiceImpl::CreateTable(grpc::CallbackServerContext* context,
                                                     const v1::CreateTableRequest* request,
                                                     v1::CreateTableResponse* response) {
  const int64_t start = CallStart();
  std::string who;
  absl::Status status =
      AuthorizeMember(*context, cluster_token_, admin_policy_, "CreateTable", &who);
  if (!status.ok()) {
    EMBER_LOG(WARNING) << "refused CreateTable from " << context->peer() << ": "
                       << status.message();
  }
  if (status.ok()) status = DoCreateTable(*request, response);
  return FinishCall(context, &PsMetrics::create_table, "CreateTable", start, status, *request,
                    *response);
}

grpc::ServerUnaryReactor* PsServiceImpl::GetShardInfo(grpc::CallbackServerContext* context,
                                                      const v1::GetShardInfoRequest* request,
                                                      v1::GetShardInfoResponse* response) {
  const int64_t start = CallStart();
  return FinishCall(context, &PsMetrics::get_shard_info, "GetShardInfo", start,
                    DoGetShardInfo(*request, response), *request, *response);
}

grpc::ServerUnaryReactor* PsServiceImpl::Checksum(grpc::CallbackServerContext* context,
                                                  const v1::ChecksumRequest* request,
                                                  v1::ChecksumResponse* response) {
  const int64_t start = CallStart();
  return FinishCall(context, &PsMetrics::checksum, "Checksum", start,
                    DoChecksum(*request, response), *request, *response);
}

grpc::ServerUnaryReactor* PsServiceImpl::CheckpointShard(grpc::CallbackServerContext* context,
                                                         const v1::CheckpointShardRequest* request,
                                                         v1::CheckpointShardResponse* response) {
  const int64_t start = CallStart();
  absl::Status status = AuthorizeAdmin(context);
  if (status.ok()) status = DoCheckpointShard(*request, response);
  return FinishCall(context, &PsMetrics::checkpoint_shard, "CheckpointShard", start, status,
                    *request, *response);
}

grpc::ServerUnaryReactor* PsServiceImpl::RestoreShard(grpc::CallbackServerContext* context,
                                                      const v1::RestoreShardRequest* request,
                                                      v1::RestoreShardResponse* response) {
  const int64_t start = CallStart();
  absl::Status status = AuthorizeAdmin(context);
  if (status.ok()) status = DoRestoreShard(*request, response);
  return FinishCall(context, &PsMetrics::restore_shard, "RestoreShard", start, status, *request,
                    *response);
}

}  // namespace ember
