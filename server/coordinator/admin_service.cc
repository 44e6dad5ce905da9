// Copyright 2026 The Ember Authors.

#include "server/coordinator/admin_service.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/admin_auth.h"
#include "common/grpc_status.h"
#include "common/log.h"

namespace ember {
namespace {

constexpr size_t kMaxAuditEntries = 1000;

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context,
                                    const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status, context));
  return reactor;
}

}  // namespace

AdminServiceImpl::AdminServiceImpl(CoordinatorState* state, AdminPolicy policy)
    : state_(state), policy_(std::move(policy)) {}

absl::Status AdminServiceImpl::Authenticate(const grpc::CallbackServerContext* context) const {
  if (!policy_.enabled()) {
    return absl::UnauthenticatedError(
        "admin is disabled: the coordinator has no --admin_token nor --admin_identities");
  }
  std::string who;
  absl::Status status = AuthorizeAdmin(*context, policy_, &who);
  if (!status.ok()) {
    EMBER_LOG(WARNING) << "refused an admin call from " << context->peer() << ": "
                       << status.message();
  }
  return status;
}

std::string AdminServiceImpl::Who(const grpc::CallbackServerContext* context) const {
  std::string who;
  // Called after Authenticate succeeded, so this succeeds too.
  if (!AuthorizeAdmin(*context, policy_, &who).ok()) who = absl::StrCat("peer=", context->peer());
  return who;
}

grpc::ServerUnaryReactor* AdminServiceImpl::ListShards(grpc::CallbackServerContext* context,
                                                       const v1::ListShardsRequest* request,
                                                       v1::ListShardsResponse* response) {
  if (absl::Status s = Authenticate(context); !s.ok()) return FinishNow(context, s);
  response->set_epoch(state_->slot_map().epoch());
  for (v1::ShardInfo& shard : state_->Shards()) *response->add_shards() = std::move(shard);
  return FinishNow(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* AdminServiceImpl::GetAuditLog(grpc::CallbackServerContext* context,
                                                        const v1::GetAuditLogRequest* request,
                                                        v1::GetAuditLogResponse* response) {
  if (absl::Status s = Authenticate(context); !s.ok()) return FinishNow(context, s);
  const size_t limit = request->limit() == 0 ? kMaxAuditEntries
                                             : std::min<size_t>(request->limit(), kMaxAuditEntries);
  absl::StatusOr<std::vector<v1::AuditEntry>> entries =
      state_->AuditLog(request->after_sequence(), limit);
  if (entries.ok()) {
    for (v1::AuditEntry& entry : *entries) *response->add_entries() = std::move(entry);
  }
  return FinishNow(context, entries.status());
}

grpc::ServerUnaryReactor* AdminServiceImpl::SetSlotOwner(grpc::CallbackServerContext* context,
                                                         const v1::SetSlotOwnerRequest* request,
                                                         v1::SetSlotOwnerResponse* response) {
  if (absl::Status s = Authenticate(context); !s.ok()) return FinishNow(context, s);
  absl::StatusOr<uint64_t> epoch =
      state_->SetSlotOwner(request->slot(), request->shard_id(), Who(context));
  if (epoch.ok()) response->set_epoch(*epoch);
  return FinishNow(context, epoch.status());
}

grpc::ServerUnaryReactor* AdminServiceImpl::RequestCheckpoint(
    grpc::CallbackServerContext* context, const v1::RequestCheckpointRequest* request,
    v1::RequestCheckpointResponse* response) {
  if (absl::Status s = Authenticate(context); !s.ok()) return FinishNow(context, s);
  if (jobs_ == nullptr) return FinishNow(context, absl::UnimplementedError("no job manager"));
  absl::Status status = jobs_->RequestCheckpoint(request->job());
  if (status.ok()) {
    status = state_->Audit(Who(context), absl::StrCat("request_checkpoint job=", request->job()));
  }
  return FinishNow(context, status);
}

grpc::ServerUnaryReactor* AdminServiceImpl::StopJob(grpc::CallbackServerContext* context,
                                                    const v1::StopJobRequest* request,
                                                    v1::GetJobResponse* response) {
  if (absl::Status s = Authenticate(context); !s.ok()) return FinishNow(context, s);
  if (jobs_ == nullptr) return FinishNow(context, absl::UnimplementedError("no job manager"));
  absl::StatusOr<v1::GetJobResponse> stopped = jobs_->StopJob(request->job(), request->reason());
  if (!stopped.ok()) return FinishNow(context, stopped.status());
  *response = *std::move(stopped);
  return FinishNow(context,
                   state_->Audit(Who(context), absl::StrCat("stop_job job=", request->job(),
                                                            " reason=", request->reason())));
}

}  // namespace ember
