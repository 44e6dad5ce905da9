// Copyright 2026 The Ember Authors.

#include "tools/emberctl/admin_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/admin_auth.h"
#include "common/grpc_status.h"
#include "common/tls.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace ember::ctl {
namespace {

// admin.proto: the metadata entry every AdminService call carries.
constexpr int kMaxMessageBytes = 64 << 20;

std::shared_ptr<grpc::Channel> NewChannel(const std::string& address,
                                          const ClientOptions& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  return grpc::CreateCustomChannel(address, OrInsecure(options.channel_credentials), args);
}

}  // namespace

AdminClient::AdminClient(ClientOptions options)
    : options_(std::move(options)), coordinator_where_("coordinator " + options_.coordinator) {
  std::shared_ptr<grpc::Channel> channel = NewChannel(options_.coordinator, options_);
  admin_ = v1::AdminService::NewStub(channel);
  coordinator_ = v1::CoordinatorService::NewStub(channel);
}

template <typename Stub, typename Request, typename Response>
absl::StatusOr<Response> AdminClient::Call(
    Stub* stub, grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
    const Request& request, absl::string_view where, absl::string_view method_name, bool admin) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
  if (admin && !options_.admin_token.empty()) {
    context.AddMetadata(kAdminTokenMetadataKey, options_.admin_token);
  }
  Response response;
  const absl::Status s = FromGrpcStatus((stub->*method)(&context, request, &response), &context);
  if (s.ok()) return response;
  std::string message = absl::StrCat(where, ": ", method_name, ": ", s.message());
  if (s.code() == absl::StatusCode::kUnauthenticated) {
    absl::StrAppend(&message, options_.admin_token.empty()
                                  ? " (no admin token given: pass --admin_token_file=FILE or "
                                    "--admin_token=TOKEN, or set EMBER_ADMIN_TOKEN_FILE)"
                                  : " (check the token in --admin_token_file / --admin_token)");
  } else if (s.code() == absl::StatusCode::kPermissionDenied) {
    absl::StrAppend(&message,
                    " (this certificate is not an admin identity: use an admin "
                    "certificate or the admin token)");
  } else if (s.code() == absl::StatusCode::kUnavailable &&
             options_.channel_credentials == nullptr) {
    absl::StrAppend(&message, TlsHintForUnavailable(/*client_uses_tls=*/false));
  }
  return absl::Status(s.code(), message);
}

template <typename Request, typename Response>
absl::StatusOr<Response> AdminClient::Admin(
    grpc::Status (v1::AdminService::Stub::*method)(grpc::ClientContext*, const Request&, Response*),
    const Request& request, absl::string_view method_name) {
  return Call(admin_.get(), method, request, coordinator_where_,
              absl::StrCat("AdminService.", method_name), /*admin=*/true);
}

template <typename Request, typename Response>
absl::StatusOr<Response> AdminClient::Coordinator(
    grpc::Status (v1::CoordinatorService::Stub::*method)(grpc::ClientContext*, const Request&,
                                                         Response*),
    const Request& request, absl::string_view method_name) {
  return Call(coordinator_.get(), method, request, coordinator_where_,
              absl::StrCat("CoordinatorService.", method_name), /*admin=*/false);
}

v1::PsService::Stub* AdminClient::Shard(const std::string& address) {
  std::unique_ptr<v1::PsService::Stub>& stub = shards_[address];
  if (stub == nullptr) stub = v1::PsService::NewStub(NewChannel(address, options_));
  return stub.get();
}

absl::StatusOr<v1::ListShardsResponse> AdminClient::ListShards() {
  return Admin(&v1::AdminService::Stub::ListShards, v1::ListShardsRequest(), "ListShards");
}

absl::StatusOr<v1::GetAuditLogResponse> AdminClient::GetAuditLog(uint64_t after_sequence,
                                                                 uint32_t limit) {
  v1::GetAuditLogRequest request;
  request.set_after_sequence(after_sequence);
  request.set_limit(limit);
  return Admin(&v1::AdminService::Stub::GetAuditLog, request, "GetAuditLog");
}

absl::StatusOr<v1::RequestCheckpointResponse> AdminClient::RequestCheckpoint(
    const std::string& job) {
  v1::RequestCheckpointRequest request;
  request.set_job(job);
  return Admin(&v1::AdminService::Stub::RequestCheckpoint, request, "RequestCheckpoint");
}

absl::StatusOr<v1::ListJobsResponse> AdminClient::ListJobs() {
  return Admin(&v1::AdminService::Stub::ListJobs, v1::ListJobsRequest(), "ListJobs");
}

absl::StatusOr<v1::GetJobResponse> AdminClient::StopJob(const std::string& job,
                                                        const std::string& reason) {
  v1::StopJobRequest request;
  request.set_job(job);
  request.set_reason(reason);
  return Admin(&v1::AdminService::Stub::StopJob, request, "StopJob");
}

absl::StatusOr<v1::AdminCreateTableResponse> AdminClient::CreateTable(
    const v1::TableConfig& config) {
  v1::AdminCreateTableRequest request;
  *request.mutable_config() = config;
  return Admin(&v1::AdminService::Stub::CreateTable, request, "CreateTable");
}

absl::StatusOr<v1::Migration> AdminClient::StartMigration(const v1::MigrationSpec& spec) {
  v1::StartMigrationRequest request;
  *request.mutable_spec() = spec;
  return Admin(&v1::AdminService::Stub::StartMigration, request, "StartMigration");
}

absl::StatusOr<v1::Migration> AdminClient::GetMigration(const std::string& op_id) {
  v1::GetMigrationRequest request;
  request.set_op_id(op_id);
  return Admin(&v1::AdminService::Stub::GetMigration, request, "GetMigration");
}

absl::StatusOr<v1::ListMigrationsResponse> AdminClient::ListMigrations() {
  return Admin(&v1::AdminService::Stub::ListMigrations, v1::ListMigrationsRequest(),
               "ListMigrations");
}

absl::StatusOr<v1::Migration> AdminClient::CancelMigration(const std::string& op_id) {
  v1::CancelMigrationRequest request;
  request.set_op_id(op_id);
  return Admin(&v1::AdminService::Stub::CancelMigration, request, "CancelMigration");
}

absl::StatusOr<v1::PlanRebalanceResponse> AdminClient::PlanRebalance(
    const v1::PlanRebalanceRequest& request) {
  return Admin(&v1::AdminService::Stub::PlanRebalance, request, "PlanRebalance");
}

absl::StatusOr<v1::RemoveShardResponse> AdminClient::RemoveShard(uint32_t shard_id) {
  v1::RemoveShardRequest request;
  request.set_shard_id(shard_id);
  return Admin(&v1::AdminService::Stub::RemoveShard, request, "RemoveShard");
}

absl::StatusOr<v1::ListCheckpointsResponse> AdminClient::ListCheckpoints(const std::string& job) {
  v1::ListCheckpointsRequest request;
  request.set_job(job);
  return Admin(&v1::AdminService::Stub::ListCheckpoints, request, "ListCheckpoints");
}

absl::StatusOr<v1::RestoreCheckpointResponse> AdminClient::RestoreCheckpoint(
    const std::string& job, const std::string& name) {
  v1::RestoreCheckpointRequest request;
  request.set_job(job);
  request.set_name(name);
  return Admin(&v1::AdminService::Stub::RestoreCheckpoint, request, "RestoreCheckpoint");
}

absl::StatusOr<v1::GetClusterMapResponse> AdminClient::GetClusterMap(const std::string& job) {
  v1::GetClusterMapRequest request;
  request.set_job(job);
  return Coordinator(&v1::CoordinatorService::Stub::GetClusterMap, request, "GetClusterMap");
}

absl::StatusOr<v1::GetHotSetResponse> AdminClient::GetHotSet() {
  return Coordinator(&v1::CoordinatorService::Stub::GetHotSet, v1::GetHotSetRequest(), "GetHotSet");
}

absl::StatusOr<v1::DescribeTableResponse> AdminClient::DescribeTable(const std::string& name,
                                                                     const std::string& job) {
  v1::DescribeTableRequest request;
  request.set_name(name);
  request.set_job(job);
  return Coordinator(&v1::CoordinatorService::Stub::DescribeTable, request, "DescribeTable");
}

absl::StatusOr<v1::GetJobResponse> AdminClient::GetJob(const std::string& job) {
  v1::GetJobRequest request;
  request.set_job(job);
  return Coordinator(&v1::CoordinatorService::Stub::GetJob, request, "GetJob");
}

absl::StatusOr<v1::GetShardInfoResponse> AdminClient::GetShardInfo(const std::string& address,
                                                                   const std::string& job) {
  v1::GetShardInfoRequest request;
  request.set_job(job);
  return Call(Shard(address), &v1::PsService::Stub::GetShardInfo, request, "shard " + address,
              "PsService.GetShardInfo", /*admin=*/false);
}

absl::StatusOr<v1::ChecksumResponse> AdminClient::Checksum(const std::string& address,
                                                           const std::string& table,
                                                           const std::string& job) {
  v1::ChecksumRequest request;
  request.set_table(table);
  request.set_job(job);
  return Call(Shard(address), &v1::PsService::Stub::Checksum, request, "shard " + address,
              "PsService.Checksum", /*admin=*/false);
}

}  // namespace ember::ctl
