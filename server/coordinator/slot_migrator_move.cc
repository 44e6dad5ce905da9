// Copyright 2026 The Ember Authors.
//
// SlotMigrator, part 2: the protocol of one move (slot_migrator.h describes it).

#include <algorithm>
#include <future>
#include <memory>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "grpcpp/client_context.h"
#include "server/coordinator/rebalance_planner.h"
#include "server/coordinator/run_parallel.h"
#include "server/coordinator/slot_migrator.h"
#include "server/shared/slot_owners.h"

namespace ember {
namespace {

// Bytes of a stored row of `dim` floats, bounding optimizer state at 3 floats per
// element (Adam: m and v) plus the meta header.
size_t RowBytesBound(uint32_t dim) { return 24 + size_t{16} * std::max<uint32_t>(dim, 1); }

// Calls `method` on `stub` with a deadline; errors name the shard.
template <typename Request, typename Response>
absl::Status Call(v1::PsService::Stub* stub,
                  grpc::Status (v1::PsService::Stub::*method)(grpc::ClientContext*, const Request&,
                                                              Response*),
                  uint32_t shard_id, const std::string& address, absl::Duration timeout,
                  const Request& request, Response* response) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  const absl::Status s = FromGrpcStatus((stub->*method)(&context, request, response), &context);
  if (s.ok()) return s;
  return absl::Status(s.code(),
                      absl::StrCat("shard ", shard_id, " (", address, "): ", s.message()));
}

// Whether a move's catch-up and syncs visit `store`: the default store always (as
// before stores), a job's store when it has tables.
bool Visits(const std::string& job, size_t tables) { return job.empty() || tables > 0; }

template <typename Request>
void AddRanges(const v1::SlotMove& move, Request* request) {
  for (const v1::SlotRange& range : move.ranges()) *request->add_ranges() = range;
}

}  // namespace

#define EMBER_PS_CALL(shard, Method, request, response)                                          \
  Call(stubs_((shard).address).get(), &v1::PsService::Stub::Method, (shard).id, (shard).address, \
       options_.rpc_timeout, (request), (response))

absl::StatusOr<SlotMigrator::Shard> SlotMigrator::Describe(uint32_t shard_id,
                                                           bool with_job_stores) const {
  Shard shard;
  shard.id = shard_id;
  for (const v1::ShardInfo& info : state_->Shards()) {
    if (info.shard_id() != shard_id) continue;
    if (info.state() != v1::ShardInfo::ALIVE) {
      return absl::UnavailableError(absl::StrCat("shard ", shard_id, " is not alive"));
    }
    shard.address = info.address();
  }
  if (shard.address.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("shard ", shard_id, " is not registered"));
  }
  v1::GetShardInfoResponse info;
  EMBER_RETURN_IF_ERROR(EMBER_PS_CALL(shard, GetShardInfo, v1::GetShardInfoRequest(), &info));
  shard.incarnation = info.incarnation();
  shard.attempt = info.attempt();
  shard.restores = info.restores();
  if (!with_job_stores) return shard;
  for (const std::string& job : info.jobs()) {
    v1::GetShardInfoRequest request;
    request.set_job(job);
    v1::GetShardInfoResponse of_job;
    EMBER_RETURN_IF_ERROR(EMBER_PS_CALL(shard, GetShardInfo, request, &of_job));
    if (of_job.incarnation() != shard.incarnation || of_job.restores() != shard.restores) {
      return absl::AbortedError(
          absl::StrCat("shard ", shard_id, " restarted or restored a store while described"));
    }
    JobStoreInfo store;
    store.job = job;
    store.attempt = of_job.attempt();
    store.tables.assign(of_job.tables().begin(), of_job.tables().end());
    shard.job_stores.push_back(std::move(store));
  }
  return shard;
}

absl::StatusOr<std::vector<SlotMigrator::StoreCopy>> SlotMigrator::PlanStores(const Shard& source,
                                                                              const Shard& target) {
  std::vector<StoreCopy> stores(1);
  stores[0].attempt = source.attempt;
  // The shared tables: every one the coordinator knows (the shard agents create them).
  v1::GetClusterMapResponse shared = state_->ClusterMap();
  for (v1::TableConfig& table : *shared.mutable_tables()) {
    stores[0].tables.push_back(std::move(table));
  }
  // Each job store of the source, with the tables it holds (all created through the
  // coordinator, which has their configs); the target's store gets them first.
  for (const JobStoreInfo& job : source.job_stores) {
    StoreCopy& store = stores.emplace_back();
    store.job = job.job;
    store.attempt = job.attempt;
    for (const std::string& name : job.tables) {
      absl::StatusOr<v1::TableConfig> config = state_->DescribeTable(name, job.job);
      if (!config.ok()) {
        return absl::FailedPreconditionError(
            absl::StrCat("shard ", source.id, " holds table '", name, "' of job '", job.job,
                         "', which the coordinator does not know: ", config.status().message()));
      }
      v1::CreateTableRequest create;
      create.set_job(job.job);
      *create.mutable_config() = *config;
      v1::CreateTableResponse created;
      EMBER_RETURN_IF_ERROR(EMBER_PS_CALL(target, CreateTable, create, &created));
      store.tables.push_back(*std::move(config));
    }
  }
  return stores;
}

absl::Status SlotMigrator::RunMove(v1::Migration& op, const v1::SlotMove& move) {
  EMBER_RETURN_IF_ERROR(CheckCancelled(op.op_id()));
  EMBER_ASSIGN_OR_RETURN(const std::vector<uint32_t> slots, FromRanges(move.ranges()));
  const SlotMap map = state_->slot_map();
  size_t on_source = 0;
  size_t on_target = 0;
  for (uint32_t slot : slots) {
    on_source += map.OwnerOf(slot) == move.source();
    on_target += map.OwnerOf(slot) == move.target();
  }
  // Switched before an interruption (the map is the truth): only the cleanup is left.
  if (on_target == slots.size()) return Cleanup(op, move, map.epoch());
  if (on_source != slots.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("slots of the move from shard ", move.source(), " to ", move.target(),
                     " changed owner outside the migration (epoch ", map.epoch(), ")"));
  }
  EMBER_ASSIGN_OR_RETURN(const Shard source, Describe(move.source(), /*with_job_stores=*/true));
  EMBER_ASSIGN_OR_RETURN(const Shard target, Describe(move.target()));
  // Both serve the coordinator's current map before anything is checked against it (a
  // shard may lag a heartbeat behind, e.g. right after the cluster started).
  EMBER_RETURN_IF_ERROR(InstallMap(target, source, /*raise_target=*/false));
  EMBER_ASSIGN_OR_RETURN(std::vector<StoreCopy> stores, PlanStores(source, target));

  // Roll back what an interrupted or failed try left: a fence on the source and
  // half-copied rows on the target. Also done when this try fails before the switch.
  auto roll_back = [&] {
    v1::FenceSlotsRequest unfence;
    AddRanges(move, &unfence);
    v1::FenceSlotsResponse unfenced;
    EMBER_PS_CALL(source, FenceSlots, unfence, &unfenced).IgnoreError();
    v1::DropSlotsRequest drop;
    AddRanges(move, &drop);
    v1::DropSlotsResponse dropped;
    return EMBER_PS_CALL(target, DropSlots, drop, &dropped);
  };
  EMBER_RETURN_IF_ERROR(roll_back());
  bool switched = false;
  absl::Cleanup undo = [&] {
    if (!switched) roll_back().IgnoreError();
  };

  SetPhase(op, v1::Migration::COPYING);
  EMBER_RETURN_IF_ERROR(Copy(op, move, source, target, stores));
  SetPhase(op, v1::Migration::CATCHING_UP);
  EMBER_RETURN_IF_ERROR(CatchUp(op, move, source, target, stores, {}));
  MaybeCrash("catching_up");
  const absl::Status status = Switch(op, move, source, target, stores);
  // The map decides, also after a failure past the commit point (no roll-back then).
  switched = state_->slot_map().OwnerOf(slots.front()) == move.target();
  EMBER_RETURN_IF_ERROR(status);
  return Cleanup(op, move, op.epoch_after());
}

absl::Status SlotMigrator::Copy(v1::Migration& op, const v1::SlotMove& move, const Shard& source,
                                const Shard& target, std::vector<StoreCopy>& stores) {
  bool imported = false;
  // The import of one page runs while the next page is exported (a two-stage pipeline:
  // the source reads while the target writes). Only one import is in flight, and `op`
  // is touched by it alone until it is joined.
  std::future<absl::Status> importing;
  auto join = [&]() -> absl::Status {
    if (!importing.valid()) return absl::OkStatus();
    absl::Status s = importing.get();
    if (s.ok() && !imported) {
      imported = true;
      MaybeCrash("copying");
    }
    return s;
  };
  // Background pages while the copy keeps its floor rate (SlotMigratorOptions); the
  // bytes are counted here as exported (`op` belongs to the import in flight).
  const absl::Time copy_start = absl::Now();
  uint64_t exported_bytes = 0;
  auto background = [&] {
    const double seconds = absl::ToDoubleSeconds(absl::Now() - copy_start);
    if (options_.background_floor_bytes_per_sec == 0 || seconds < 1) return true;
    return static_cast<double>(exported_bytes) / seconds >=
           static_cast<double>(options_.background_floor_bytes_per_sec);
  };
  for (StoreCopy& store : stores) {
    bool first = true;
    for (const v1::TableConfig& table : store.tables) {
      const uint32_t page_rows = static_cast<uint32_t>(
          std::clamp<size_t>(options_.page_bytes / RowBytesBound(table.dim()), 16, 65536));
      for (const v1::SlotRange& range : move.ranges()) {
        std::string cursor;
        do {
          v1::ExportRowsRequest request;
          request.set_job(store.job);
          request.set_table(table.name());
          *request.mutable_range() = range;
          request.set_cursor(cursor);
          request.set_max_rows(page_rows);
          request.set_incarnation(source.incarnation);
          request.set_attempt(store.attempt);
          request.set_restores(source.restores);
          request.set_background(background());
          v1::ExportRowsResponse response;
          const absl::Status exported = EMBER_PS_CALL(source, ExportRows, request, &response);
          EMBER_RETURN_IF_ERROR(join());
          EMBER_RETURN_IF_ERROR(exported);
          EMBER_RETURN_IF_ERROR(Throttle(op));
          // The store's oldest start: its changes after it are caught up.
          if (first) store.version = response.version();
          first = false;
          if (response.block().count() > 0) {
            exported_bytes += response.block().ByteSizeLong();
            auto import = std::make_shared<v1::ImportRowsRequest>();
            import->set_job(store.job);
            *import->add_blocks() = std::move(*response.mutable_block());
            import->set_background(request.background());
            importing = std::async(std::launch::async, [this, &op, &target, import] {
              return Import(op, target, *import);
            });
          }
          cursor = response.next_cursor();
        } while (!cursor.empty());
      }
    }
  }
  return join();
}

absl::Status SlotMigrator::CatchUp(v1::Migration& op, const v1::SlotMove& move, const Shard& source,
                                   const Shard& target, std::vector<StoreCopy>& stores,
                                   const std::map<std::string, uint64_t>& through) {
  size_t max_row_bytes = RowBytesBound(1);
  for (const StoreCopy& store : stores) {
    for (const v1::TableConfig& table : store.tables) {
      max_row_bytes = std::max(max_row_bytes, RowBytesBound(table.dim()));
    }
  }
  const bool fenced = !through.empty();
  // A page's rows at most, out of up to 65,536 log entries read per call: on a busy
  // shard most entries are of other slots, and a call bounded by entries alone (as
  // before 2026-12-07) read about 3 ms of training per call, so the catch-up ran out of
  // rounds behind and the fenced round had hundreds of milliseconds of changes left.
  const uint32_t max_rows =
      static_cast<uint32_t>(std::clamp<size_t>(options_.page_bytes / max_row_bytes, 64, 65536));
  // One call on one store: its changes after its version, imported on the target.
  auto round = [&](StoreCopy& store, uint64_t* rows, bool* caught_up) -> absl::Status {
    v1::ExportChangesRequest request;
    AddRanges(move, &request);
    request.set_job(store.job);
    request.set_after_version(store.version);
    request.set_max_changes(65536);
    request.set_max_rows(max_rows);
    request.set_incarnation(source.incarnation);
    request.set_attempt(store.attempt);
    request.set_restores(source.restores);
    v1::ExportChangesResponse response;
    EMBER_RETURN_IF_ERROR(EMBER_PS_CALL(source, ExportChanges, request, &response));
    uint64_t copied = 0;
    v1::ImportRowsRequest import;
    import.set_job(store.job);
    for (v1::RowBlock& block : *response.mutable_blocks()) {
      copied += block.count();
      *import.add_blocks() = std::move(block);
    }
    if (copied > 0) EMBER_RETURN_IF_ERROR(Import(op, target, import));
    store.version = std::max(store.version, response.version());
    *rows += copied;
    *caught_up = response.caught_up();
    return absl::OkStatus();
  };
  if (fenced) {
    // Nothing can stop the copy halfway but a shard error.
    for (StoreCopy& store : stores) {
      auto it = through.find(store.job);
      if (it == through.end() || !Visits(store.job, store.tables.size())) continue;
      while (store.version < it->second) {
        uint64_t rows = 0;
        bool caught_up = false;
        EMBER_RETURN_IF_ERROR(round(store, &rows, &caught_up));
      }
    }
    return absl::OkStatus();
  }
  for (int call = 0;; ++call) {
    EMBER_RETURN_IF_ERROR(Throttle(op));
    uint64_t rows = 0;
    bool all_caught_up = true;
    for (StoreCopy& store : stores) {
      // A job store with no table: nothing to copy (the fence checks it stays so).
      if (!Visits(store.job, store.tables.size())) continue;
      bool caught_up = false;
      EMBER_RETURN_IF_ERROR(round(store, &rows, &caught_up));
      all_caught_up = all_caught_up && caught_up;
    }
    if ((all_caught_up && rows <= options_.fence_below_rows) ||
        call + 1 >= options_.max_catch_up_rounds) {
      return absl::OkStatus();
    }
  }
}

absl::Status SlotMigrator::Switch(v1::Migration& op, const v1::SlotMove& move, const Shard& source,
                                  const Shard& target, std::vector<StoreCopy>& stores) {
  EMBER_ASSIGN_OR_RETURN(const std::vector<uint32_t> slots, FromRanges(move.ranges()));
  // Most rows become durable on the target before the fence, so that the sync inside
  // it (below) has little left to write.
  for (const StoreCopy& store : stores) {
    if (!Visits(store.job, store.tables.size())) continue;
    v1::ImportRowsRequest presync;
    presync.set_job(store.job);
    presync.set_sync(true);
    EMBER_RETURN_IF_ERROR(Import(op, target, presync));
  }
  // No checkpoint is cut and no restore runs while the owner changes.
  absl::MutexLock topology(topology_mu_);
  SetPhase(op, v1::Migration::SWITCHING);
  const absl::Time fence_start = absl::Now();
  v1::FenceSlotsRequest fence;
  AddRanges(move, &fence);
  fence.set_fence(true);
  fence.set_incarnation(source.incarnation);
  fence.set_attempt(source.attempt);
  fence.set_restores(source.restores);
  v1::FenceSlotsResponse fenced;
  EMBER_RETURN_IF_ERROR(EMBER_PS_CALL(source, FenceSlots, fence, &fenced));
  MaybeCrash("fenced");
  // Every store the fence drained must be one this move copied, with no table more
  // (a job store or a table created on the source since the move planned): its rows
  // of the slots would stay behind. Rolled back and started over.
  std::map<std::string, uint64_t> through;
  for (const v1::FencedStore& drained : fenced.stores()) {
    auto copied = std::find_if(stores.begin(), stores.end(),
                               [&](const StoreCopy& s) { return s.job == drained.job(); });
    if (copied == stores.end()) {
      if (drained.tables().empty()) continue;  // opened meanwhile, with no table: no row
      return absl::AbortedError(absl::StrCat("shard ", source.id, " opened the store of job '",
                                             drained.job(), "' with tables during the move"));
    }
    if (!drained.job().empty()) {
      for (const std::string& table : drained.tables()) {
        if (std::none_of(copied->tables.begin(), copied->tables.end(),
                         [&](const v1::TableConfig& t) { return t.name() == table; })) {
          return absl::AbortedError(absl::StrCat("shard ", source.id, " created table '", table,
                                                 "' of job '", drained.job(), "' during the move"));
        }
      }
    }
    through[drained.job()] = drained.version();
  }
  if (fenced.stores().empty()) through[""] = fenced.version();  // a shard before stores
  EMBER_RETURN_IF_ERROR(CatchUp(op, move, source, target, stores, through));
  const absl::Time caught_up = absl::Now();
  // The target must still be the process that received every row, and keeps them.
  for (const StoreCopy& store : stores) {
    v1::ImportRowsRequest check;
    check.set_job(store.job);
    check.set_incarnation(target.incarnation);
    if (store.job.empty()) check.set_attempt(target.attempt);
    check.set_restores(target.restores);
    check.set_sync(true);  // the rows survive a crash of the target after the switch
    v1::ImportRowsResponse checked;
    if (Visits(store.job, store.tables.size())) {
      EMBER_RETURN_IF_ERROR(EMBER_PS_CALL(target, ImportRows, check, &checked));
    }
  }

  EMBER_ASSIGN_OR_RETURN(const uint64_t epoch,
                         state_->MoveSlots(slots, source.id, target.id, op.op_id(), op.who()));
  op.set_epoch_after(epoch);
  SetPhase(op, v1::Migration::CLEANING_UP);
  MaybeCrash("switched");
  const absl::Status installed = InstallMap(target, source, /*raise_target=*/true);
  const double fence_ms = absl::ToDoubleMilliseconds(absl::Now() - fence_start);
  op.set_max_fence_ms(std::max(op.max_fence_ms(), fence_ms));
  if (on_switch_) on_switch_(target.id, target.incarnation);
  EMBER_LOG(INFO) << "migration " << op.op_id() << ": " << slots.size() << " slots from shard "
                  << source.id << " to " << target.id << " at epoch " << epoch << ", fenced "
                  << fence_ms << " ms"
                  << " (" << absl::ToDoubleMilliseconds(caught_up - fence_start)
                  << " ms to the last change)";
  return installed;
}

absl::Status SlotMigrator::Cleanup(v1::Migration& op, const v1::SlotMove& move, uint64_t epoch) {
  if (op.phase() != v1::Migration::CLEANING_UP) SetPhase(op, v1::Migration::CLEANING_UP);
  op.set_epoch_after(std::max(op.epoch_after(), epoch));
  EMBER_ASSIGN_OR_RETURN(const Shard source, Describe(move.source(), /*with_job_stores=*/true));
  EMBER_ASSIGN_OR_RETURN(const Shard target, Describe(move.target()));
  EMBER_RETURN_IF_ERROR(InstallMap(target, source, /*raise_target=*/true));
  if (on_switch_) on_switch_(target.id, target.incarnation);
  v1::DropSlotsRequest drop;
  AddRanges(move, &drop);
  drop.set_min_epoch(epoch);
  v1::DropSlotsResponse dropped;
  return EMBER_PS_CALL(source, DropSlots, drop, &dropped);
}

absl::Status SlotMigrator::InstallMap(const Shard& target, const Shard& source, bool raise_target) {
  const SlotMap map = state_->slot_map();
  v1::InstallSlotMapRequest request;
  request.set_epoch(map.epoch());
  request.set_slot_owners(PackSlotOwners(map));
  v1::InstallSlotMapResponse response;
  // The target first: once the source has the map, clients go to the target.
  if (raise_target) {
    request.set_attempt(source.attempt);
    for (const JobStoreInfo& job : source.job_stores) {
      (*request.mutable_job_attempts())[job.job] = job.attempt;
    }
  }
  EMBER_RETURN_IF_ERROR(EMBER_PS_CALL(target, InstallSlotMap, request, &response));
  request.set_attempt(0);
  request.clear_job_attempts();
  EMBER_RETURN_IF_ERROR(EMBER_PS_CALL(source, InstallSlotMap, request, &response));
  // Everyone else would learn the epoch at its next heartbeat; until then clients with
  // the new map would get UNAVAILABLE from it.
  std::vector<v1::ShardInfo> others;
  for (v1::ShardInfo& shard : state_->Shards()) {
    if (shard.shard_id() != target.id && shard.shard_id() != source.id &&
        shard.state() == v1::ShardInfo::ALIVE) {
      others.push_back(std::move(shard));
    }
  }
  RunParallel(others.size(), [&](size_t i) {
    Shard other;
    other.id = others[i].shard_id();
    other.address = others[i].address();
    v1::InstallSlotMapResponse ignored;
    return EMBER_PS_CALL(other, InstallSlotMap, request, &ignored);
  });
  return absl::OkStatus();
}

absl::Status SlotMigrator::Import(v1::Migration& op, const Shard& target,
                                  v1::ImportRowsRequest& request) {
  request.set_incarnation(target.incarnation);
  // The default store's attempt; a job store's on the target is checked by `restores`
  // alone (the switch raises it: until then it may be anything up to the source's).
  request.set_attempt(request.job().empty() ? target.attempt : 0);
  request.set_restores(target.restores);
  v1::ImportRowsResponse response;
  EMBER_RETURN_IF_ERROR(EMBER_PS_CALL(target, ImportRows, request, &response));
  const uint64_t bytes = request.ByteSizeLong();
  op.set_rows_copied(op.rows_copied() + response.rows());
  op.set_bytes_copied(op.bytes_copied() + bytes);
  run_bytes_ += bytes;
  const absl::Time now = absl::Now();
  if (now - last_publish_ > absl::Milliseconds(250)) {
    last_publish_ = now;
    Publish(op, /*persist=*/false);
  }
  return absl::OkStatus();
}

absl::Status SlotMigrator::Throttle(const v1::Migration& op) {
  const uint64_t rate = op.spec().bytes_per_sec();
  if (rate > 0) {
    const absl::Time due =
        run_started_ + absl::Seconds(static_cast<double>(run_bytes_) / static_cast<double>(rate));
    absl::MutexLock lock(&mu_);
    auto interrupted = [this, &op]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (stopping_) return true;
      auto it = ops_.find(op.op_id());
      return it != ops_.end() && it->second.cancel_requested();
    };
    mu_.AwaitWithDeadline(absl::Condition(&interrupted), due);
  }
  return CheckCancelled(op.op_id());
}

#undef EMBER_PS_CALL

}  // namespace ember
