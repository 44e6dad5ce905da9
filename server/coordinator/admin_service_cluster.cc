// Copyright 2026 The Ember Authors.
//
// AdminServiceImpl, part 2: cluster changes (tables, shards, slot migrations and
// rebalance plans) and the job/checkpoint views emberctl shows.

#include <algorithm>
#include <cstring>
#include <iostream>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grpc_status.h"
#include "common/slot.h"
#include "common/status_macros.h"
#include "grpcpp/client_context.h"
#include "server/coordinator/admin_service.h"
#include "server/coordinator/rebalance_planner.h"
#include "server/coordinator/run_parallel.h"

namespace ember {
namespace {

grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* context, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status, context));
  return reactor;
}

constexpr absl::Duration kShardCallTimeout = absl::Seconds(60);

}  // namespace

grpc::ServerUnaryReactor* AdminServiceImpl::RunDetached(grpc::CallbackServerContext* context,
                                                        std::function<absl::Status()> body) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  std::thread([reactor, context, body = std::move(body)] {
    reactor->Finish(ToGrpcStatus(body(), context));
  }).detach();
  return reactor;
}

grpc::ServerUnaryReactor* AdminServiceImpl::ListJobs(grpc::CallbackServerContext* context,
                                                     const v1::ListJobsRequest* request,
                                                     v1::ListJobsResponse* response) {
  if (absl::Status s = Authenticate(context); !s.ok()) return Reply(context, s);
  if (jobs_ != nullptr) {
    for (v1::GetJobResponse& job : jobs_->ListJobs()) *response->add_jobs() = std::move(job);
  }
  return Reply(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* AdminServiceImpl::CreateTable(grpc::CallbackServerContext* context,
                                                        const v1::AdminCreateTableRequest* request,
                                                        v1::AdminCreateTableResponse* response) {
  if (absl::Status s = Authenticate(context); !s.ok()) return Reply(context, s);
  const std::string who = Who(context);
  return RunDetached(context, [this, request, response, who]() -> absl::Status {
    EMBER_ASSIGN_OR_RETURN(const v1::TableConfig config,
                           state_->CreateTable(request->config(), who));
    *response->mutable_config() = config;
    // Alive shards get it now; the others (and any that fail) with their next
    // heartbeat.
    std::vector<v1::ShardInfo> shards = state_->Shards();
    std::vector<absl::Status> results = RunParallel(shards.size(), [&](size_t i) -> absl::Status {
      if (shards[i].state() != v1::ShardInfo::ALIVE || !stubs_) {
        return absl::UnavailableError("not alive");
      }
      grpc::ClientContext call;
      call.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
      v1::CreateTableRequest forward;
      *forward.mutable_config() = config;
      v1::CreateTableResponse ignored;
      return FromGrpcStatus(stubs_(shards[i].address())->CreateTable(&call, forward, &ignored),
                            &call);
    });
    for (size_t i = 0; i < shards.size(); ++i) {
      if (!results[i].ok()) response->add_pending_shards(shards[i].shard_id());
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* AdminServiceImpl::StartMigration(grpc::CallbackServerContext* context,
                                                           const v1::StartMigrationRequest* request,
                                                           v1::Migration* response) {
  if (absl::Status s = Authenticate(context); !s.ok()) return Reply(context, s);
  if (migrator_ == nullptr) return Reply(context, absl::UnimplementedError("no slot migrator"));
  absl::StatusOr<v1::Migration> op = migrator_->StartMigration(request->spec(), Who(context));
  if (op.ok()) *response = *std::move(op);
  return Reply(context, op.status());
}

grpc::ServerUnaryReactor* AdminServiceImpl::GetMigration(grpc::CallbackServerContext* context,
                                                         const v1::GetMigrationRequest* request,
                                                         v1::Migration* response) {
  if (absl::Status s = Authenticate(context); !s.ok()) return Reply(context, s);
  if (migrator_ == nullptr) return Reply(context, absl::UnimplementedError("no slot migrator"));
  absl::StatusOr<v1::Migration> op = migrator_->Get(request->op_id());
  if (op.ok()) *response = *std::move(op);
  return Reply(context, op.status());
}

grpc::ServerUnaryReactor* AdminServiceImpl::ListMigrations(grpc::CallbackServerContext* context,
                                                           const v1::ListMigrationsRequest* request,
                                                           v1::ListMigrationsResponse* response) {
  if (absl::Status s = Authenticate(context); !s.ok()) return Reply(context, s);
  if (migrator_ == nullptr) return Reply(context, absl::UnimplementedError("no slot migrator"));
  for (v1::Migration& op : migrator_->List()) *response->add_migrations() = std::move(op);
  return Reply(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* AdminServiceImpl::CancelMigration(
    grpc::CallbackServerContext* context, const v1::CancelMigrationRequest* request,
    v1::Migration* response) {
  if (absl::Status s = Authenticate(context); !s.ok()) return Reply(context, s);
  if (migrator_ == nullptr) return Reply(context, absl::UnimplementedError("no slot migrator"));
  absl::StatusOr<v1::Migration> op = migrator_->Cancel(request->op_id(), Who(context));
  if (op.ok()) *response = *std::move(op);
  return Reply(context, op.status());
}

absl::StatusOr<std::vector<uint64_t>> AdminServiceImpl::SlotWeights(v1::PlanRebalanceRequest::By by,
                                                                    const SlotMap& map) {
  std::vector<uint64_t> weights(kNumSlots, 1);
  if (by == v1::PlanRebalanceRequest::SLOTS) return weights;
  std::vector<v1::ShardInfo> owners;
  for (v1::ShardInfo& shard : state_->Shards()) {
    if (!map.SlotsOf(shard.shard_id()).empty()) owners.push_back(std::move(shard));
  }
  std::vector<v1::GetSlotStatsResponse> stats(owners.size());
  for (const absl::Status& s : RunParallel(owners.size(), [&](size_t i) -> absl::Status {
         grpc::ClientContext call;
         call.set_deadline(absl::ToChronoTime(absl::Now() + kShardCallTimeout));
         absl::Status status = FromGrpcStatus(
             stubs_(owners[i].address())->GetSlotStats(&call, v1::GetSlotStatsRequest(), &stats[i]),
             &call);
         if (status.ok() && (stats[i].rows().size() != kNumSlots * sizeof(uint64_t) ||
                             stats[i].load().size() != kNumSlots * sizeof(uint64_t))) {
           status = absl::InternalError("malformed slot statistics");
         }
         if (status.ok()) return status;
         return absl::Status(status.code(),
                             absl::StrCat("shard ", owners[i].shard_id(), ": ", status.message()));
       })) {
    EMBER_RETURN_IF_ERROR(s);
  }
  for (size_t i = 0; i < owners.size(); ++i) {
    const std::string& packed =
        by == v1::PlanRebalanceRequest::LOAD ? stats[i].load() : stats[i].rows();
    for (uint32_t slot : map.SlotsOf(owners[i].shard_id())) {
      std::memcpy(&weights[slot], packed.data() + slot * sizeof(uint64_t), sizeof(uint64_t));
    }
  }
  return weights;
}

grpc::ServerUnaryReactor* AdminServiceImpl::PlanRebalance(grpc::CallbackServerContext* context,
                                                          const v1::PlanRebalanceRequest* request,
                                                          v1::PlanRebalanceResponse* response) {
  if (absl::Status s = Authenticate(context); !s.ok()) return Reply(context, s);
  if (!stubs_) return Reply(context, absl::UnimplementedError("no shard stubs"));
  return RunDetached(context, [this, request, response]() -> absl::Status {
    RebalanceInput input;
    input.map = state_->slot_map();
    if (input.map.epoch() == 0) return absl::FailedPreconditionError("slots are not assigned yet");
    input.drain.assign(request->drain().begin(), request->drain().end());
    for (const v1::ShardInfo& shard : state_->Shards()) {
      const bool drained =
          std::find(input.drain.begin(), input.drain.end(), shard.shard_id()) != input.drain.end();
      if (shard.state() == v1::ShardInfo::ALIVE && !drained)
        input.shards.push_back(shard.shard_id());
    }
    if (request->tolerance() > 0) input.tolerance = request->tolerance();
    const v1::PlanRebalanceRequest::By by =
        request->by() == v1::PlanRebalanceRequest::BY_UNSPECIFIED ? v1::PlanRebalanceRequest::ROWS
                                                                  : request->by();
    EMBER_ASSIGN_OR_RETURN(input.slot_weight, SlotWeights(by, input.map));
    EMBER_ASSIGN_OR_RETURN(*response, ::ember::PlanRebalance(input));
    response->set_epoch(input.map.epoch());
    std::string reason =
        absl::StrCat("rebalance by ", absl::AsciiStrToLower(v1::PlanRebalanceRequest::By_Name(by)));
    if (!input.drain.empty())
      reason = absl::StrCat("drain shard ", absl::StrJoin(input.drain, ","));
    response->mutable_spec()->set_reason(reason);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* AdminServiceImpl::RemoveShard(grpc::CallbackServerContext* context,
                                                        const v1::RemoveShardRequest* request,
                                                        v1::RemoveShardResponse* response) {
  if (absl::Status s = Authenticate(context); !s.ok()) return Reply(context, s);
  return Reply(context, state_->RemoveShard(request->shard_id(), Who(context)));
}

grpc::ServerUnaryReactor* AdminServiceImpl::ListCheckpoints(
    grpc::CallbackServerContext* context, const v1::ListCheckpointsRequest* request,
    v1::ListCheckpointsResponse* response) {
  if (absl::Status s = Authenticate(context); !s.ok()) return Reply(context, s);
  if (jobs_ == nullptr) return Reply(context, absl::UnimplementedError("no job manager"));
  return RunDetached(context, [this, request, response]() -> absl::Status {
    EMBER_ASSIGN_OR_RETURN(std::vector<v1::CheckpointSummary> list,
                           jobs_->ListCheckpoints(request->job()));
    for (v1::CheckpointSummary& c : list) *response->add_checkpoints() = std::move(c);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* AdminServiceImpl::RestoreCheckpoint(
    grpc::CallbackServerContext* context, const v1::RestoreCheckpointRequest* request,
    v1::RestoreCheckpointResponse* response) {
  if (absl::Status s = Authenticate(context); !s.ok()) return Reply(context, s);
  if (jobs_ == nullptr) return Reply(context, absl::UnimplementedError("no job manager"));
  const std::string who = Who(context);
  return RunDetached(context, [this, request, response, who]() -> absl::Status {
    EMBER_ASSIGN_OR_RETURN(*response, jobs_->RestoreCheckpoint(request->job(), request->name()));
    return state_->Audit(who, absl::StrCat("restore_checkpoint job=", request->job(), " name=",
                                           response->name(), " attempt=", response->attempt()));
  });
}

}  // namespace ember
