// Copyright 2026 The Ember Authors.
//
// PsServiceImpl, part 2: the slot-migration RPCs (ps.proto, "Online slot migration").
// The coordinator's SlotMigrator (server/coordinator/slot_migrator.h) drives them; the
// shard only checks that each call is safe on its own:
//  * export and fence only slots it owns, import and drop only slots it does not own,
//    so a late or repeated call can never overwrite or delete the rows of a live owner;
//  * every call names the process, job attempt and count of restores it expects, so a
//    copy that spans a restart or a checkpoint restore of any store fails (ABORTED)
//    instead of mixing two histories;
//  * a call names the store it reads or writes (`job`); the fence drains every store
//    and answers each one's version and tables, so that the migrator can check it
//    copied them all.

#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/admin_auth.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/slot_ranges.h"
#include "common/status_macros.h"
#include "server/ps/ps_service.h"
#include "server/shared/row_block.h"
#include "server/shared/slot_owners.h"

namespace ember {
namespace {

constexpr uint32_t kDefaultExportRows = 4096;
constexpr uint32_t kMaxExportRows = 65536;
constexpr uint32_t kDefaultMaxChanges = 65536;

// The slots of `ranges` (common/slot_ranges.h validates them) as a set.
absl::StatusOr<std::bitset<kNumSlots>> SlotsOf(
    const google::protobuf::RepeatedPtrField<v1::SlotRange>& ranges) {
  if (ranges.empty()) return absl::InvalidArgumentError("no slot ranges");
  EMBER_ASSIGN_OR_RETURN(const std::vector<uint32_t> list, FromRanges(ranges));
  std::bitset<kNumSlots> slots;
  for (uint32_t slot : list) slots[slot] = true;
  return slots;
}

}  // namespace

void PsServiceImpl::CrashOnMigrationCall(std::string method, int count) {
  absl::MutexLock lock(&crash_mu_);
  crash_method_ = std::move(method);
  crash_countdown_ = count;
}

void PsServiceImpl::MaybeCrash(absl::string_view method) {
  absl::MutexLock lock(&crash_mu_);
  if (crash_countdown_ <= 0 || method != crash_method_) return;
  if (--crash_countdown_ == 0) {
    EMBER_LOG(WARNING) << "test hook: crashing on " << method;
    kill(getpid(), SIGKILL);
  }
}

absl::Status PsServiceImpl::AuthorizeAdmin(const grpc::CallbackServerContext* context) const {
  if (!admin_policy_.enabled()) return absl::OkStatus();
  std::string who;
  absl::Status status = ember::AuthorizeAdmin(*context, admin_policy_, &who);
  if (!status.ok()) EMBER_LOG(WARNING) << "refused an admin call: " << status.message();
  return status;
}

absl::Status PsServiceImpl::CheckExpected(const JobStore& store, uint64_t incarnation,
                                          uint64_t attempt, uint64_t restores) const {
  if (incarnation != 0 && incarnation != incarnation_) {
    return absl::AbortedError(absl::StrCat("shard ", shard_id_, " restarted (incarnation ",
                                           incarnation_, ", the call expects ", incarnation, ")"));
  }
  if (incarnation != 0 && restores != restores_.load()) {
    return absl::AbortedError(absl::StrCat("shard ", shard_id_, " restored a store since (",
                                           restores_.load(), " restores, the call expects ",
                                           restores, ")"));
  }
  const uint64_t current = store.attempt.load(std::memory_order_acquire);
  if (attempt != 0 && attempt != current) {
    return absl::AbortedError(absl::StrCat("shard ", shard_id_, " was restored (attempt ", current,
                                           " of ", store.Describe(), ", the call expects ", attempt,
                                           ")"));
  }
  return absl::OkStatus();
}

absl::Status PsServiceImpl::CheckOwnership(const SlotSet& slots, bool owned) const {
  const std::shared_ptr<const SlotMap> map = slot_map();
  for (uint32_t slot = 0; slot < kNumSlots; ++slot) {
    if (!slots[slot]) continue;
    if ((map->OwnerOf(slot) == shard_id_) != owned) {
      return absl::FailedPreconditionError(absl::StrCat(
          "shard ", shard_id_, (owned ? " does not own" : " owns"), " slot ", slot, " at epoch ",
          map->epoch(), (owned ? ": nothing to export" : ": refusing to overwrite a live owner")));
    }
  }
  return absl::OkStatus();
}

absl::Status PsServiceImpl::DoExportRows(const v1::ExportRowsRequest& request,
                                         v1::ExportRowsResponse* response) {
  google::protobuf::RepeatedPtrField<v1::SlotRange> range;
  *range.Add() = request.range();
  EMBER_ASSIGN_OR_RETURN(const SlotSet slots, SlotsOf(range));
  if (request.max_rows() > kMaxExportRows) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_rows ", request.max_rows(), " exceeds ", kMaxExportRows));
  }
  EMBER_ASSIGN_OR_RETURN(JobStore* const job, FindJob(request.job()));
  absl::ReaderMutexLock lock(&job->mu);
  EmbeddingStore* const store = job->store;
  EMBER_RETURN_IF_ERROR(
      CheckExpected(*job, request.incarnation(), request.attempt(), request.restores()));
  EMBER_RETURN_IF_ERROR(CheckOwnership(slots, /*owned=*/true));
  if (request.cursor().empty()) {
    // Every change after this version is in the change log; the pages below hold each
    // row as of this version or newer.
    response->set_version(store->version());
  }
  EMBER_ASSIGN_OR_RETURN(
      RowPage page,
      store->ExportSlotRows(request.table(), request.range().first(), request.range().last(),
                            request.cursor(),
                            request.max_rows() == 0 ? kDefaultExportRows : request.max_rows()));
  v1::RowBlock* block = response->mutable_block();
  block->set_table(request.table());
  AppendRows(page.rows, block);
  response->set_next_cursor(std::move(page.next_cursor));
  return absl::OkStatus();
}

absl::Status PsServiceImpl::DoExportChanges(const v1::ExportChangesRequest& request,
                                            v1::ExportChangesResponse* response) {
  EMBER_ASSIGN_OR_RETURN(const SlotSet slots, SlotsOf(request.ranges()));
  EMBER_ASSIGN_OR_RETURN(JobStore* const job, FindJob(request.job()));
  absl::ReaderMutexLock lock(&job->mu);
  EmbeddingStore* const store = job->store;
  EMBER_RETURN_IF_ERROR(
      CheckExpected(*job, request.incarnation(), request.attempt(), request.restores()));
  EMBER_RETURN_IF_ERROR(CheckOwnership(slots, /*owned=*/true));
  const size_t max = request.max_changes() == 0 ? kDefaultMaxChanges : request.max_changes();
  EMBER_ASSIGN_OR_RETURN(const ChangeBatch batch, store->ReadChanges(request.after_version(), max));
  // Fewer entries than asked for: everything up to the watermark was read.
  uint64_t through = batch.changes.size() < max ? batch.watermark : batch.changes.back().version;
  // The changed rows of the ranges, once each, per table; their current values are
  // read below (newer than `through` is fine: a later read sends them again).
  std::vector<std::vector<uint64_t>> ids(batch.table_names.size());
  std::vector<uint64_t> seeds(batch.table_names.size());
  std::vector<bool> known(batch.table_names.size(), false);
  absl::flat_hash_set<std::pair<uint32_t, uint64_t>> seen;
  for (const Change& change : batch.changes) {
    if (change.table >= batch.table_names.size()) continue;
    if (!known[change.table]) {
      EMBER_ASSIGN_OR_RETURN(const v1::TableConfig config,
                             store->GetTableConfig(batch.table_names[change.table]));
      seeds[change.table] = config.seed();
      known[change.table] = true;
    }
    if (!slots[SlotOf(seeds[change.table], change.id)]) continue;
    if (seen.insert({change.table, change.id}).second) ids[change.table].push_back(change.id);
    if (request.max_rows() > 0 && seen.size() >= request.max_rows()) {
      through = change.version;  // versions are consecutive: the next read starts after it
      break;
    }
  }
  for (size_t t = 0; t < ids.size(); ++t) {
    if (ids[t].empty()) continue;
    EMBER_ASSIGN_OR_RETURN(const std::vector<EncodedRow> rows,
                           store->ReadEncodedRows(batch.table_names[t], ids[t]));
    v1::RowBlock* block = response->add_blocks();
    block->set_table(batch.table_names[t]);
    AppendRows(rows, block);
  }
  response->set_version(through);
  response->set_caught_up(through >= store->version());
  return absl::OkStatus();
}

absl::Status PsServiceImpl::DoImportRows(const v1::ImportRowsRequest& request,
                                         v1::ImportRowsResponse* response) {
  EMBER_ASSIGN_OR_RETURN(JobStore* const job, FindJob(request.job()));
  absl::ReaderMutexLock lock(&job->mu);
  EmbeddingStore* const store = job->store;
  EMBER_RETURN_IF_ERROR(
      CheckExpected(*job, request.incarnation(), request.attempt(), request.restores()));
  // Decode and check everything before the first write.
  std::vector<std::vector<EncodedRow>> decoded;
  SlotSet slots;
  for (const v1::RowBlock& block : request.blocks()) {
    EMBER_ASSIGN_OR_RETURN(const v1::TableConfig config, store->GetTableConfig(block.table()));
    EMBER_ASSIGN_OR_RETURN(std::vector<EncodedRow> rows, DecodeRows(block));
    for (const EncodedRow& row : rows) slots[SlotOf(config.seed(), row.id)] = true;
    decoded.push_back(std::move(rows));
  }
  EMBER_RETURN_IF_ERROR(CheckOwnership(slots, /*owned=*/false));
  uint64_t imported = 0;
  for (int i = 0; i < request.blocks_size(); ++i) {
    EMBER_RETURN_IF_ERROR(store->ImportRows(request.blocks(i).table(), decoded[i]));
    imported += decoded[i].size();
  }
  if (request.sync()) {
    // Imported rows go straight to the backend (rows of slots a shard does not own are
    // never in its memory tier: DropSlots cleared them and routing keeps them out), so
    // making the backend durable is enough, and cheap inside the migration's fence.
    EMBER_RETURN_IF_ERROR(job->SyncBackend());
  }
  response->set_rows(imported);
  return absl::OkStatus();
}

absl::Status PsServiceImpl::DoFenceSlots(const v1::FenceSlotsRequest& request,
                                         v1::FenceSlotsResponse* response) {
  EMBER_ASSIGN_OR_RETURN(const SlotSet slots, SlotsOf(request.ranges()));
  if (!request.fence()) {
    absl::MutexLock lock(&map_mu_);
    fenced_ &= ~slots;
    any_fenced_.store(fenced_.any());
    return absl::OkStatus();
  }
  EMBER_RETURN_IF_ERROR(
      CheckExpected(*default_job_, request.incarnation(), request.attempt(), request.restores()));
  {
    absl::MutexLock lock(&map_mu_);
    // Checked under map_mu_: an install between the check and the fence cannot slip in.
    for (uint32_t slot = 0; slot < kNumSlots; ++slot) {
      if (slots[slot] && slot_map_->OwnerOf(slot) != shard_id_) {
        return absl::FailedPreconditionError(absl::StrCat(
            "shard ", shard_id_, " does not own slot ", slot, " at epoch ", slot_map_->epoch()));
      }
    }
    fenced_ |= slots;
    any_fenced_.store(true, std::memory_order_release);
  }
  // Calls that passed routing before the fence hold their store's lock shared: taking
  // each exclusively waits for them, and every later call sees the fence. A store
  // opened after this list holds no row of the fenced slots (only a restore, which
  // waits for the move's switch, would bring some).
  for (JobStore* job : AllJobs()) {
    absl::MutexLock drain(&job->mu);
    v1::FencedStore* fenced = response->add_stores();
    fenced->set_job(job->job);
    fenced->set_version(job->store->version());
    for (std::string& table : job->store->ListTables()) fenced->add_tables(std::move(table));
    if (job == default_job_) response->set_version(fenced->version());
  }
  // A restore that ran between the check above and the drain replaced rows the copy
  // read: the fence stays until the migrator lifts it (its roll-back).
  return CheckExpected(*default_job_, request.incarnation(), request.attempt(), request.restores());
}

absl::Status PsServiceImpl::DoDropSlots(const v1::DropSlotsRequest& request,
                                        v1::DropSlotsResponse* response) {
  EMBER_ASSIGN_OR_RETURN(const SlotSet slots, SlotsOf(request.ranges()));
  // Every store: a job's store may hold rows of the slots (restored from a checkpoint
  // cut before they moved).
  uint64_t removed = 0;
  for (JobStore* job : AllJobs()) {
    absl::ReaderMutexLock lock(&job->mu);
    const uint64_t epoch = slot_map()->epoch();
    if (epoch < request.min_epoch()) {
      return absl::UnavailableError(absl::StrCat("shard ", shard_id_, " is at epoch ", epoch,
                                                 ", the drop needs ", request.min_epoch()));
    }
    EMBER_RETURN_IF_ERROR(CheckOwnership(slots, /*owned=*/false));
    for (const v1::SlotRange& range : request.ranges()) {
      EMBER_ASSIGN_OR_RETURN(const uint64_t rows,
                             job->store->DropSlots(range.first(), range.last()));
      removed += rows;
    }
    // Durable: dropped rows must not come back after a crash as rows of slots the shard
    // does not own. The backend's deletes are all there is to make durable (the memory
    // tier's copies were removed first).
    EMBER_RETURN_IF_ERROR(job->SyncBackend());
  }
  response->set_rows(removed);
  return absl::OkStatus();
}

void PsServiceImpl::RaiseAttempt(JobStore& job, uint64_t to) {
  if (to == 0 || job.attempt.load() >= to) return;
  // The raise is for a shard taking over slots of a running job (a move's target). A
  // store of a process that owns slots but was never restored for any attempt
  // (attempt 0: it restarted since) holds rows that are not the attempt's: the ones it
  // held only in memory are gone. Raising it would let the job go on with them; it
  // keeps attempt 0, so the job's calls get UNAVAILABLE until a restore, and the job
  // rolls back.
  std::shared_ptr<const SlotMap> current_map = slot_map();
  if (job.attempt.load() == 0 && current_map->epoch() > 0 &&
      !current_map->SlotsOf(shard_id_).empty()) {
    EMBER_LOG(WARNING) << "shard " << shard_id_ << " serves attempt 0 for " << job.Describe()
                       << " and owns slots: not raised to attempt " << to
                       << " by a slot map (it must be restored for it)";
    return;
  }
  uint64_t current = job.attempt.load();
  while (current < to && !job.attempt.compare_exchange_weak(current, to)) {
  }
}

absl::Status PsServiceImpl::DoInstallSlotMap(const v1::InstallSlotMapRequest& request,
                                             v1::InstallSlotMapResponse* response) {
  if (request.epoch() == 0) return absl::InvalidArgumentError("InstallSlotMap needs epoch >= 1");
  EMBER_ASSIGN_OR_RETURN(SlotMap map, UnpackSlotOwners(request.slot_owners(), request.epoch()));
  RaiseAttempt(*default_job_, request.attempt());
  for (const auto& [name, attempt] : request.job_attempts()) {
    absl::StatusOr<JobStore*> job = FindJob(name);
    if (job.ok() && !name.empty()) RaiseAttempt(**job, attempt);
  }
  SetSlotMap(std::move(map));
  response->set_epoch(slot_map()->epoch());
  return absl::OkStatus();
}

absl::Status PsServiceImpl::DoGetSlotStats(v1::GetSlotStatsResponse* response) {
  // Rows of every store: a move carries them all.
  std::vector<uint64_t> rows;
  for (JobStore* job : AllJobs()) {
    absl::ReaderMutexLock lock(&job->mu);
    EMBER_ASSIGN_OR_RETURN(const std::vector<uint64_t> of_job, job->store->RowsPerSlot());
    if (rows.size() < of_job.size()) rows.resize(of_job.size(), 0);
    for (size_t i = 0; i < of_job.size(); ++i) rows[i] += of_job[i];
  }
  std::string* packed_rows = response->mutable_rows();
  std::string* packed_load = response->mutable_load();
  packed_rows->resize(kNumSlots * sizeof(uint64_t));
  packed_load->resize(kNumSlots * sizeof(uint64_t));
  for (uint32_t slot = 0; slot < kNumSlots; ++slot) {
    const uint64_t r = slot < rows.size() ? rows[slot] : 0;
    const uint64_t l = slot_load_[slot].load(std::memory_order_relaxed);
    std::memcpy(packed_rows->data() + slot * sizeof(uint64_t), &r, sizeof(r));  // little-endian
    std::memcpy(packed_load->data() + slot * sizeof(uint64_t), &l, sizeof(l));
  }
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* PsServiceImpl::FinishNamed(grpc::CallbackServerContext* context,
                                                     absl::string_view method, int64_t start_micros,
                                                     const absl::Status& status,
                                                     const google::protobuf::Message& request,
                                                     const google::protobuf::Message& response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  FinishOn(reactor, context, method, start_micros, status, request, response);
  return reactor;
}

void PsServiceImpl::FinishOn(grpc::ServerUnaryReactor* reactor,
                             grpc::CallbackServerContext* context, absl::string_view method,
                             int64_t start_micros, const absl::Status& status,
                             const google::protobuf::Message& request,
                             const google::protobuf::Message& response) {
  if (metrics_ != nullptr) {
    metrics_->method(method).Record(status.code(), metrics_->clock()->NowMicros() - start_micros);
    metrics_->CountBytes(method, request.ByteSizeLong(), status.ok() ? response.ByteSizeLong() : 0);
  }
  reactor->Finish(ToGrpcStatus(status, context));
}

template <typename Request, typename Response>
grpc::ServerUnaryReactor* PsServiceImpl::OnCopyLane(
    grpc::CallbackServerContext* context, absl::string_view method, int64_t start_micros,
    const Request* request, Response* response,
    absl::Status (PsServiceImpl::*run)(const Request&, Response*)) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  copy_lane_->Submit([=, this] {
    FinishOn(reactor, context, method, start_micros, (this->*run)(*request, response), *request,
             *response);
  });
  return reactor;
}

void PsServiceImpl::SetMigrationCopyPriority(BackgroundPriority priority) {
  copy_lane_ = priority == BackgroundPriority::kNormal
                   ? nullptr
                   : std::make_unique<BackgroundLane>(BackgroundLaneOptions{
                         .priority = priority, .name = absl::StrCat("ps", shard_id_, "-copy")});
}

grpc::ServerUnaryReactor* PsServiceImpl::ExportRows(grpc::CallbackServerContext* context,
                                                    const v1::ExportRowsRequest* request,
                                                    v1::ExportRowsResponse* response) {
  MaybeCrash("ExportRows");
  const int64_t start = CallStart();
  absl::Status status = AuthorizeAdmin(context);
  if (status.ok() && request->background() && copy_lane_ != nullptr) {
    return OnCopyLane(context, "ExportRows", start, request, response,
                      &PsServiceImpl::DoExportRows);
  }
  if (status.ok()) status = DoExportRows(*request, response);
  return FinishNamed(context, "ExportRows", start, status, *request, *response);
}

grpc::ServerUnaryReactor* PsServiceImpl::ExportChanges(grpc::CallbackServerContext* context,
                                                       const v1::ExportChangesRequest* request,
                                                       v1::ExportChangesResponse* response) {
  MaybeCrash("ExportChanges");
  const int64_t start = CallStart();
  absl::Status status = AuthorizeAdmin(context);
  if (status.ok()) status = DoExportChanges(*request, response);
  return FinishNamed(context, "ExportChanges", start, status, *request, *response);
}

grpc::ServerUnaryReactor* PsServiceImpl::ImportRows(grpc::CallbackServerContext* context,
                                                    const v1::ImportRowsRequest* request,
                                                    v1::ImportRowsResponse* response) {
  MaybeCrash("ImportRows");
  const int64_t start = CallStart();
  absl::Status status = AuthorizeAdmin(context);
  if (status.ok() && request->background() && copy_lane_ != nullptr) {
    return OnCopyLane(context, "ImportRows", start, request, response,
                      &PsServiceImpl::DoImportRows);
  }
  if (status.ok()) status = DoImportRows(*request, response);
  return FinishNamed(context, "ImportRows", start, status, *request, *response);
}

grpc::ServerUnaryReactor* PsServiceImpl::FenceSlots(grpc::CallbackServerContext* context,
                                                    const v1::FenceSlotsRequest* request,
                                                    v1::FenceSlotsResponse* response) {
  MaybeCrash("FenceSlots");
  const int64_t start = CallStart();
  absl::Status status = AuthorizeAdmin(context);
  if (status.ok()) status = DoFenceSlots(*request, response);
  return FinishNamed(context, "FenceSlots", start, status, *request, *response);
}

grpc::ServerUnaryReactor* PsServiceImpl::DropSlots(grpc::CallbackServerContext* context,
                                                   const v1::DropSlotsRequest* request,
                                                   v1::DropSlotsResponse* response) {
  MaybeCrash("DropSlots");
  const int64_t start = CallStart();
  absl::Status status = AuthorizeAdmin(context);
  if (status.ok()) status = DoDropSlots(*request, response);
  return FinishNamed(context, "DropSlots", start, status, *request, *response);
}

grpc::ServerUnaryReactor* PsServiceImpl::InstallSlotMap(grpc::CallbackServerContext* context,
                                                        const v1::InstallSlotMapRequest* request,
                                                        v1::InstallSlotMapResponse* response) {
  MaybeCrash("InstallSlotMap");
  const int64_t start = CallStart();
  absl::Status status = AuthorizeAdmin(context);
  if (status.ok()) status = DoInstallSlotMap(*request, response);
  return FinishNamed(context, "InstallSlotMap", start, status, *request, *response);
}

grpc::ServerUnaryReactor* PsServiceImpl::GetSlotStats(grpc::CallbackServerContext* context,
                                                      const v1::GetSlotStatsRequest* request,
                                                      v1::GetSlotStatsResponse* response) {
  MaybeCrash("GetSlotStats");
  const int64_t start = CallStart();
  return FinishNamed(context, "GetSlotStats", start, DoGetSlotStats(response), *request, *response);
}

}  // namespace ember
