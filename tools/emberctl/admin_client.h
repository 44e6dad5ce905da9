// Copyright 2026 The Ember Authors.
//
// AdminClient: emberctl's connection to a cluster. One channel to the coordinator
// (AdminService calls carry the admin token as metadata "ember-admin-token";
// CoordinatorService calls do not) and one channel per PS shard address, created on
// first use. Every call has a deadline of `timeout` from its start.
//
// Errors are the RPC's status (codes as gRPC's), its message prefixed with where it
// went and which method: "coordinator 127.0.0.1:6000: AdminService.ListShards: ...".
// UNAUTHENTICATED answers get a hint on how to pass the token.
//
//   AdminClient client({.coordinator = "127.0.0.1:6000", .admin_token = token});
//   EMBER_ASSIGN_OR_RETURN(v1::ListShardsResponse shards, client.ListShards());
//
// Thread-compatible: one thread at a time.

#ifndef EMBER_TOOLS_EMBERCTL_ADMIN_CLIENT_H_
#define EMBER_TOOLS_EMBERCTL_ADMIN_CLIENT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ember/v1/admin.grpc.pb.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "ember/v1/ps.grpc.pb.h"
#include "grpcpp/security/credentials.h"

namespace ember::ctl {

struct ClientOptions {
  std::string coordinator;  // "host:port"
  // Sent with every AdminService call. Empty: none is sent (the call then fails with
  // UNAUTHENTICATED).
  std::string admin_token;
  // Deadline of one RPC. Default: 10 s.
  absl::Duration timeout = absl::Seconds(10);
  // Credentials of every channel (common/tls.h); null: insecure.
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials;
};

class AdminClient {
 public:
  explicit AdminClient(ClientOptions options);

  const ClientOptions& options() const { return options_; }

  // ---- AdminService (authenticated) ----
  absl::StatusOr<v1::ListShardsResponse> ListShards();
  absl::StatusOr<v1::GetAuditLogResponse> GetAuditLog(uint64_t after_sequence, uint32_t limit);
  absl::StatusOr<v1::RequestCheckpointResponse> RequestCheckpoint(const std::string& job);
  absl::StatusOr<v1::ListJobsResponse> ListJobs();
  absl::StatusOr<v1::GetJobResponse> StopJob(const std::string& job, const std::string& reason);
  absl::StatusOr<v1::AdminCreateTableResponse> CreateTable(const v1::TableConfig& config);
  absl::StatusOr<v1::Migration> StartMigration(const v1::MigrationSpec& spec);
  // Empty op_id: the newest operation.
  absl::StatusOr<v1::Migration> GetMigration(const std::string& op_id);
  absl::StatusOr<v1::ListMigrationsResponse> ListMigrations();
  absl::StatusOr<v1::Migration> CancelMigration(const std::string& op_id);
  absl::StatusOr<v1::PlanRebalanceResponse> PlanRebalance(const v1::PlanRebalanceRequest& request);
  absl::StatusOr<v1::RemoveShardResponse> RemoveShard(uint32_t shard_id);
  absl::StatusOr<v1::ListCheckpointsResponse> ListCheckpoints(const std::string& job);
  absl::StatusOr<v1::RestoreCheckpointResponse> RestoreCheckpoint(const std::string& job,
                                                                  const std::string& name);

  // ---- CoordinatorService ----
  // `job`: its tables are that job's own (coordinator.proto JobTables); empty: shared.
  absl::StatusOr<v1::GetClusterMapResponse> GetClusterMap(const std::string& job = "");
  // The published hot set, in full (known_version 0).
  absl::StatusOr<v1::GetHotSetResponse> GetHotSet();
  absl::StatusOr<v1::DescribeTableResponse> DescribeTable(const std::string& name,
                                                          const std::string& job = "");
  absl::StatusOr<v1::GetJobResponse> GetJob(const std::string& job);

  // ---- PsService of the shard at `address` ----
  // `job`: the shard's store of that job (empty: the default store).
  absl::StatusOr<v1::GetShardInfoResponse> GetShardInfo(const std::string& address,
                                                        const std::string& job = "");
  // Empty table: every table of the shard's store of `job` (empty: the shared one).
  absl::StatusOr<v1::ChecksumResponse> Checksum(const std::string& address,
                                                const std::string& table,
                                                const std::string& job = "");

 private:
  template <typename Stub, typename Request, typename Response>
  absl::StatusOr<Response> Call(
      Stub* stub, grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
      const Request& request, absl::string_view where, absl::string_view method_name, bool admin);
  template <typename Request, typename Response>
  absl::StatusOr<Response> Admin(grpc::Status (v1::AdminService::Stub::*method)(
                                     grpc::ClientContext*, const Request&, Response*),
                                 const Request& request, absl::string_view method_name);
  template <typename Request, typename Response>
  absl::StatusOr<Response> Coordinator(grpc::Status (v1::CoordinatorService::Stub::*method)(
                                           grpc::ClientContext*, const Request&, Response*),
                                       const Request& request, absl::string_view method_name);
  v1::PsService::Stub* Shard(const std::string& address);

  const ClientOptions options_;
  const std::string coordinator_where_;  // "coordinator HOST:PORT"
  std::unique_ptr<v1::AdminService::Stub> admin_;
  std::unique_ptr<v1::CoordinatorService::Stub> coordinator_;
  std::map<std::string, std::unique_ptr<v1::PsService::Stub>> shards_;
};

}  // namespace ember::ctl

#endif  // EMBER_TOOLS_EMBERCTL_ADMIN_CLIENT_H_
