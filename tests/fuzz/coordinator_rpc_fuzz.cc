// Copyright 2026 The Ember Authors.
//
// Fuzz target: the coordinator's RPC handlers (CoordinatorService and AdminService,
// server/coordinator/), driven through a real gRPC server in this process (an
// in-process channel: the handlers, their validation, the job manager and the slot
// migrator run as in ember-coordinator) with arbitrary request bytes.
//
// Input: a sequence of [method byte][length byte][request bytes]. Requests that do not
// parse as the method's message are skipped (gRPC itself would refuse them). The
// method byte's high bit sends an admin call without the admin token. Two harness
// choices keep a run on this machine and fast: every shard address in a RegisterShard
// becomes 127.0.0.1:1 (a closed port, so calls the coordinator forwards to shards fail
// at once instead of reaching the network), and every call has a 100 ms deadline (a
// KvGet or JoinJob that waits gives up). The coordinator is made once per process and
// its state carries over from input to input, as a long-lived server's would.
// Invariants: no crash or sanitizer finding; no handler answers INTERNAL or UNKNOWN;
// afterwards the coordinator still answers GetClusterMap.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "common/admin_auth.h"
#include "ember/v1/admin.grpc.pb.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "google/protobuf/stubs/logging.h"
#include "grpcpp/grpcpp.h"
#include "server/coordinator/admin_service.h"
#include "server/coordinator/coordinator_service.h"
#include "server/coordinator/coordinator_state.h"
#include "server/coordinator/hot_set_publisher.h"
#include "server/coordinator/job_manager.h"
#include "server/coordinator/slot_migrator.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using namespace ember;  // NOLINT: a fuzz target's whole job is this one namespace

constexpr char kToken[] = "fuzz-admin-token";

// The coordinator of ember-coordinator's Run, without ports, signals or metrics.
struct Coordinator {
  Coordinator() {
    google::protobuf::SetLogHandler(nullptr);
    dir = ProcessScratchDir("coord-fuzz");
    CoordinatorOptions options;
    options.data_dir = (dir / "state").string();
    options.expected_shards = 2;
    state = std::move(*CoordinatorState::Open(options));
    AdminPolicy policy;
    policy.token = kToken;
    CoordinatorServiceOptions service_options;
    service_options.admin_token = kToken;
    service_options.forward_timeout = absl::Milliseconds(50);
    service_options.max_kv_wait = absl::Milliseconds(50);
    service = std::make_unique<CoordinatorServiceImpl>(state.get(), service_options);
    admin = std::make_unique<AdminServiceImpl>(state.get(), policy);
    auto stubs = [this](const std::string& address) { return service->StubFor(address); };
    JobManagerOptions job_options;
    job_options.checkpoint_dir = (dir / "checkpoints").string();
    job_options.topology_mu = &topology_mu;
    jobs = std::make_unique<JobManager>(state.get(), job_options, stubs);
    FUZZ_CHECK(jobs->Start().ok());
    service->SetJobManager(jobs.get());
    admin->SetJobManager(jobs.get());
    migrator = std::make_unique<SlotMigrator>(
        state.get(), SlotMigratorOptions(), stubs, &topology_mu,
        [this](uint32_t target, uint64_t incarnation) { jobs->AdoptShard(target, incarnation); });
    admin->SetMigrator(migrator.get(), stubs);
    hot_set = std::make_unique<HotSetPublisher>(HotSetOptions());
    service->SetHotSetPublisher(hot_set.get());
    grpc::ServerBuilder builder;
    builder.RegisterService(service.get());
    builder.RegisterService(admin.get());
    server = builder.BuildAndStart();
    FUZZ_CHECK(server != nullptr);
    FUZZ_CHECK(migrator->Start().ok());
    channel = server->InProcessChannel(grpc::ChannelArguments());
    coordinator = v1::CoordinatorService::NewStub(channel);
    admin_stub = v1::AdminService::NewStub(channel);
  }

  std::filesystem::path dir;
  absl::Mutex topology_mu;
  std::unique_ptr<CoordinatorState> state;
  std::unique_ptr<CoordinatorServiceImpl> service;
  std::unique_ptr<AdminServiceImpl> admin;
  std::unique_ptr<JobManager> jobs;
  std::unique_ptr<SlotMigrator> migrator;
  std::unique_ptr<HotSetPublisher> hot_set;
  std::unique_ptr<grpc::Server> server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::CoordinatorService::Stub> coordinator;
  std::unique_ptr<v1::AdminService::Stub> admin_stub;
};

void Check(const grpc::Status& status) {
  FUZZ_CHECK(status.error_code() != grpc::StatusCode::INTERNAL);
  FUZZ_CHECK(status.error_code() != grpc::StatusCode::UNKNOWN);
}

void Prepare(grpc::ClientContext* context, bool with_token) {
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
  if (with_token) context->AddMetadata(kAdminTokenMetadataKey, kToken);
}

// Parses the request; if it parses, calls stub->Method with it and checks the status.
#define EMBER_FUZZ_CALL(stub, Method, Request, Response, fix)         \
  {                                                                   \
    v1::Request request;                                              \
    if (!request.ParseFromArray(data, static_cast<int>(size))) break; \
    fix;                                                              \
    v1::Response response;                                            \
    grpc::ClientContext context;                                      \
    Prepare(&context, with_token);                                    \
    Check(c.stub->Method(&context, request, &response));              \
    break;                                                            \
  }

void CallOne(Coordinator& c, uint8_t method, const uint8_t* data, size_t size) {
  const bool with_token = (method & 0x80) == 0;
  switch ((method & 0x7f) % 26) {
    case 0:
      EMBER_FUZZ_CALL(coordinator, RegisterShard, RegisterShardRequest, RegisterShardResponse,
                      request.set_address("127.0.0.1:1"))
    case 1:
      EMBER_FUZZ_CALL(coordinator, Heartbeat, HeartbeatRequest, HeartbeatResponse, {})
    case 2:
      EMBER_FUZZ_CALL(coordinator, GetClusterMap, GetClusterMapRequest, GetClusterMapResponse, {})
    case 3:
      EMBER_FUZZ_CALL(coordinator, GetHotSet, GetHotSetRequest, GetHotSetResponse, {})
    case 4:
      EMBER_FUZZ_CALL(coordinator, CreateTable, CoordinatorCreateTableRequest,
                      CoordinatorCreateTableResponse, {})
    case 5:
      EMBER_FUZZ_CALL(coordinator, DescribeTable, DescribeTableRequest, DescribeTableResponse, {})
    case 6:
      EMBER_FUZZ_CALL(coordinator, KvPut, KvPutRequest, KvPutResponse, {})
    case 7:
      EMBER_FUZZ_CALL(coordinator, KvGet, KvGetRequest, KvGetResponse, {})
    case 8:
      EMBER_FUZZ_CALL(coordinator, JoinJob, JoinJobRequest, JoinJobResponse, {})
    case 9:
      EMBER_FUZZ_CALL(coordinator, FinishJob, FinishJobRequest, FinishJobResponse, {})
    case 10:
      EMBER_FUZZ_CALL(coordinator, Checkpoint, CheckpointRequest, CheckpointResponse, {})
    case 11:
      EMBER_FUZZ_CALL(coordinator, GetJob, GetJobRequest, GetJobResponse, {})
    case 12:
      EMBER_FUZZ_CALL(admin_stub, ListShards, ListShardsRequest, ListShardsResponse, {})
    case 13:
      EMBER_FUZZ_CALL(admin_stub, GetAuditLog, GetAuditLogRequest, GetAuditLogResponse, {})
    case 14:
      EMBER_FUZZ_CALL(admin_stub, SetSlotOwner, SetSlotOwnerRequest, SetSlotOwnerResponse, {})
    case 15:
      EMBER_FUZZ_CALL(admin_stub, RequestCheckpoint, RequestCheckpointRequest,
                      RequestCheckpointResponse, {})
    case 16:
      EMBER_FUZZ_CALL(admin_stub, ListJobs, ListJobsRequest, ListJobsResponse, {})
    case 17:
      EMBER_FUZZ_CALL(admin_stub, CreateTable, AdminCreateTableRequest, AdminCreateTableResponse,
                      {})
    case 18:
      EMBER_FUZZ_CALL(admin_stub, StartMigration, StartMigrationRequest, Migration, {})
    case 19:
      EMBER_FUZZ_CALL(admin_stub, GetMigration, GetMigrationRequest, Migration, {})
    case 20:
      EMBER_FUZZ_CALL(admin_stub, ListMigrations, ListMigrationsRequest, ListMigrationsResponse, {})
    case 21:
      EMBER_FUZZ_CALL(admin_stub, CancelMigration, CancelMigrationRequest, Migration, {})
    case 22:
      EMBER_FUZZ_CALL(admin_stub, PlanRebalance, PlanRebalanceRequest, PlanRebalanceResponse, {})
    case 23:
      EMBER_FUZZ_CALL(admin_stub, RemoveShard, RemoveShardRequest, RemoveShardResponse, {})
    case 24:
      EMBER_FUZZ_CALL(admin_stub, ListCheckpoints, ListCheckpointsRequest, ListCheckpointsResponse,
                      {})
    case 25:
      EMBER_FUZZ_CALL(admin_stub, RestoreCheckpoint, RestoreCheckpointRequest,
                      RestoreCheckpointResponse, {})
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Coordinator* const c = new Coordinator();  // one per process, never destroyed
  size_t at = 0;
  for (int calls = 0; calls < 16 && at + 2 <= size; ++calls) {
    const uint8_t method = data[at];
    const size_t length = std::min<size_t>(data[at + 1], size - at - 2);
    CallOne(*c, method, data + at + 2, length);
    at += 2 + length;
  }
  v1::GetClusterMapResponse map;
  grpc::ClientContext context;
  Prepare(&context, false);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  FUZZ_CHECK(c->coordinator->GetClusterMap(&context, v1::GetClusterMapRequest(), &map).ok());
  return 0;
}
