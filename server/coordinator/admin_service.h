// Copyright 2026 The Ember Authors.
//
// AdminServiceImpl: the operator RPCs (proto/ember/v1/admin.proto) over a
// CoordinatorState. Every call is authenticated first: the metadata entry
// kAdminTokenMetadataKey must equal the configured token, otherwise the call fails with
// UNAUTHENTICATED and does nothing. An empty configured token disables admin (every
// call is UNAUTHENTICATED). Changes are audited with "peer=<peer> token=<TokenId>";
// the token itself is never stored or logged.
//
//   AdminServiceImpl admin(state.get(), token);
//   builder.RegisterService(&admin);
//
// Thread-safety: all methods may be called concurrently. `state` must outlive it.

#ifndef EMBER_SERVER_COORDINATOR_ADMIN_SERVICE_H_
#define EMBER_SERVER_COORDINATOR_ADMIN_SERVICE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "ember/v1/admin.grpc.pb.h"
#include "server/coordinator/job_manager.h"
#include "server/coordinator/coordinator_state.h"

namespace ember {

inline constexpr char kAdminTokenMetadataKey[] = "ember-admin-token";

// A short, stable, non-secret name of `token` for audit entries: "tok-" + 8 hex digits
// of a 64-bit FNV-1a hash.
std::string TokenId(absl::string_view token);

class AdminServiceImpl final : public v1::AdminService::CallbackService {
 public:
  AdminServiceImpl(CoordinatorState* state, std::string token);
  // Serves RequestCheckpoint with `jobs` (not owned); without it UNIMPLEMENTED.
  void SetJobManager(JobManager* jobs) { jobs_ = jobs; }

  grpc::ServerUnaryReactor* ListShards(grpc::CallbackServerContext* context,
                                       const v1::ListShardsRequest* request,
                                       v1::ListShardsResponse* response) override;
  grpc::ServerUnaryReactor* GetAuditLog(grpc::CallbackServerContext* context,
                                        const v1::GetAuditLogRequest* request,
                                        v1::GetAuditLogResponse* response) override;
  grpc::ServerUnaryReactor* SetSlotOwner(grpc::CallbackServerContext* context,
                                         const v1::SetSlotOwnerRequest* request,
                                         v1::SetSlotOwnerResponse* response) override;
  grpc::ServerUnaryReactor* RequestCheckpoint(grpc::CallbackServerContext* context,
                                              const v1::RequestCheckpointRequest* request,
                                              v1::RequestCheckpointResponse* response) override;

 private:
  // OK if the call carries the right token; UNAUTHENTICATED otherwise.
  absl::Status Authenticate(const grpc::CallbackServerContext* context) const;
  // The audit "who" of an authenticated call.
  std::string Who(const grpc::CallbackServerContext* context) const;

  CoordinatorState* const state_;
  JobManager* jobs_ = nullptr;
  const std::string token_;
  const std::string token_id_;
};

}  // namespace ember

#endif  // EMBER_SERVER_COORDINATOR_ADMIN_SERVICE_H_
