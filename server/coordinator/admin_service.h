// Copyright 2026 The Ember Authors.
//
// AdminServiceImpl: the operator RPCs (proto/ember/v1/admin.proto) over a
// CoordinatorState. Every call is authorized first (common/admin_auth.h): it must
// carry the admin token or come from an admin certificate identity, otherwise it fails
// with UNAUTHENTICATED or PERMISSION_DENIED and does nothing. A policy without token
// and identities disables admin (every call is UNAUTHENTICATED). Every change is
// audited (CoordinatorState::AuditLog) with "peer=<peer> cert=<name>" or
// "peer=<peer> token=<TokenId>"; the token itself is never stored or logged.
//
//   AdminServiceImpl admin(state.get(), AdminPolicy{token, {"ember-admin"}});
//   builder.RegisterService(&admin);
//
// Thread-safety: all methods may be called concurrently. `state` must outlive it.

#ifndef EMBER_SERVER_COORDINATOR_ADMIN_SERVICE_H_
#define EMBER_SERVER_COORDINATOR_ADMIN_SERVICE_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/admin_auth.h"
#include "ember/v1/admin.grpc.pb.h"
#include "server/coordinator/coordinator_state.h"
#include "server/coordinator/job_manager.h"
#include "server/coordinator/slot_migrator.h"

namespace ember {

class AdminServiceImpl final : public v1::AdminService::CallbackService {
 public:
  AdminServiceImpl(CoordinatorState* state, AdminPolicy policy);
  // Serves RequestCheckpoint and the job/checkpoint RPCs with `jobs` (not owned);
  // without it UNIMPLEMENTED.
  void SetJobManager(JobManager* jobs) { jobs_ = jobs; }
  // Serves the migration RPCs with `migrator` (not owned), and reaches shards through
  // `stubs` (PlanRebalance's slot statistics, CreateTable's fan-out).
  void SetMigrator(SlotMigrator* migrator, SlotMigrator::StubFactory stubs) {
    migrator_ = migrator;
    stubs_ = std::move(stubs);
  }

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
  grpc::ServerUnaryReactor* StopJob(grpc::CallbackServerContext* context,
                                    const v1::StopJobRequest* request,
                                    v1::GetJobResponse* response) override;
  // admin_service_cluster.cc:
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const v1::ListJobsRequest* request,
                                     v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* CreateTable(grpc::CallbackServerContext* context,
                                        const v1::AdminCreateTableRequest* request,
                                        v1::AdminCreateTableResponse* response) override;
  grpc::ServerUnaryReactor* StartMigration(grpc::CallbackServerContext* context,
                                           const v1::StartMigrationRequest* request,
                                           v1::Migration* response) override;
  grpc::ServerUnaryReactor* GetMigration(grpc::CallbackServerContext* context,
                                         const v1::GetMigrationRequest* request,
                                         v1::Migration* response) override;
  grpc::ServerUnaryReactor* ListMigrations(grpc::CallbackServerContext* context,
                                           const v1::ListMigrationsRequest* request,
                                           v1::ListMigrationsResponse* response) override;
  grpc::ServerUnaryReactor* CancelMigration(grpc::CallbackServerContext* context,
                                            const v1::CancelMigrationRequest* request,
                                            v1::Migration* response) override;
  grpc::ServerUnaryReactor* PlanRebalance(grpc::CallbackServerContext* context,
                                          const v1::PlanRebalanceRequest* request,
                                          v1::PlanRebalanceResponse* response) override;
  grpc::ServerUnaryReactor* RemoveShard(grpc::CallbackServerContext* context,
                                        const v1::RemoveShardRequest* request,
                                        v1::RemoveShardResponse* response) override;
  grpc::ServerUnaryReactor* ListCheckpoints(grpc::CallbackServerContext* context,
                                            const v1::ListCheckpointsRequest* request,
                                            v1::ListCheckpointsResponse* response) override;
  grpc::ServerUnaryReactor* RestoreCheckpoint(grpc::CallbackServerContext* context,
                                              const v1::RestoreCheckpointRequest* request,
                                              v1::RestoreCheckpointResponse* response) override;

 private:
  // OK if the call carries the right token; UNAUTHENTICATED otherwise.
  absl::Status Authenticate(const grpc::CallbackServerContext* context) const;
  // The audit "who" of an authenticated call.
  std::string Who(const grpc::CallbackServerContext* context) const;

  // Runs `body` on its own thread (it calls shards or restores: it may take long, and
  // callback handlers must not block) and finishes the call with its status.
  grpc::ServerUnaryReactor* RunDetached(grpc::CallbackServerContext* context,
                                        std::function<absl::Status()> body);
  // Slot weights for a plan: rows or load per slot from each slot's owner.
  absl::StatusOr<std::vector<uint64_t>> SlotWeights(v1::PlanRebalanceRequest::By by,
                                                    const SlotMap& map);

  CoordinatorState* const state_;
  JobManager* jobs_ = nullptr;
  SlotMigrator* migrator_ = nullptr;
  SlotMigrator::StubFactory stubs_;
  const AdminPolicy policy_;
};

}  // namespace ember

#endif  // EMBER_SERVER_COORDINATOR_ADMIN_SERVICE_H_
