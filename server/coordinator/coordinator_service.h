// Copyright 2026 The Ember Authors.
//
// CoordinatorServiceImpl: the gRPC CoordinatorService (proto/ember/v1/coordinator.proto)
// over a CoordinatorState.
//
// Handlers never block a gRPC thread on another party: CreateTable forwards the
// table to every alive shard with async PsService calls (each with a deadline, the
// caller's deadline or `forward_timeout`, whichever is sooner) and finishes when all
// have answered; KvGet waits for a key through KvWaiters and finishes from Notify or
// the timer thread. RocksDB writes of the state run inline (small, rare). Heartbeats
// feed the shards' hot-key reports to the HotSetPublisher and carry newer hot sets
// back; GetHotSet answers from it.
//
//   CoordinatorServiceImpl service(state.get(), CoordinatorServiceOptions());
//   builder.RegisterService(&service);
//   ...
//   service.Shutdown();  // completes waiting KvGets so the server can drain
//   server->Shutdown(deadline);
//
// Thread-safety: all methods may be called concurrently. `state` must outlive the
// service; the service must outlive the server it is registered with.

#ifndef EMBER_SERVER_COORDINATOR_COORDINATOR_SERVICE_H_
#define EMBER_SERVER_COORDINATOR_COORDINATOR_SERVICE_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/admin_auth.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "ember/v1/ps.grpc.pb.h"
#include "grpcpp/security/credentials.h"
#include "server/coordinator/coordinator_state.h"
#include "server/coordinator/hot_set_publisher.h"
#include "server/coordinator/job_manager.h"
#include "server/coordinator/kv_waiters.h"
#include "server/coordinator/shard_policy.h"

namespace ember {

struct CoordinatorServiceOptions {
  // Deadline of each CreateTable forwarded to a shard (capped by the caller's).
  // Default: 5 s
  absl::Duration forward_timeout = absl::Seconds(5);
  // Longest KvGet wait, whatever wait_ms asks. Default: 60 s
  absl::Duration max_kv_wait = absl::Seconds(60);
  // The admin token, sent with every call to a shard (StubFor): shards started with
  // the same token require it on migration, checkpoint and restore calls.
  // Default: none
  std::string admin_token;
  // Credentials of the channels to shards (common/tls.h); null: insecure.
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials;
  // When set (the coordinator runs with TLS), RegisterShard, Heartbeat and LeaveCluster
  // need an admin credential of this policy (common/admin_auth.h: the token, which
  // shards send when they have one, or an admin certificate): a worker's certificate
  // must not register a shard address or forge a shard's heartbeat. Default: none
  std::optional<AdminPolicy> shard_registration;
  // Plaintext only (common/cluster_token.h): when not empty, RegisterShard, Heartbeat,
  // LeaveCluster, CreateTable and KvPut need this token or an admin credential of
  // `admin`; StubFor's calls carry it (shards with the token require it of the
  // CreateTable forwarded to them). Empty: any caller (the cluster's shape is open).
  // Default: empty
  std::string cluster_token;
  AdminPolicy admin;
};

class CoordinatorServiceImpl final : public v1::CoordinatorService::CallbackService {
 public:
  CoordinatorServiceImpl(CoordinatorState* state, const CoordinatorServiceOptions& options);
  ~CoordinatorServiceImpl() override;

  // Serves the job RPCs (JoinJob, FinishJob, Checkpoint, GetJob, ReportProgress) with `jobs` (not
  // owned, outlives the service) and reports shard registrations and heartbeats to
  // it. Without one they fail with UNIMPLEMENTED. Call before the server starts.
  void SetJobManager(JobManager* jobs) { jobs_ = jobs; }

  // Takes the shards' hot-key reports from heartbeats into `hot_set` (not owned,
  // outlives the service), hands its newer versions to shards in heartbeat responses
  // and serves GetHotSet from it. Without one GetHotSet answers version 0 (no hot set)
  // and heartbeats carry none. Call before the server starts.
  void SetHotSetPublisher(HotSetPublisher* hot_set) { hot_set_ = hot_set; }

  // Reports registrations and heartbeats to `policy` (not owned, outlives the service)
  // and serves LeaveCluster with it; without one LeaveCluster fails with UNIMPLEMENTED.
  // Call before the server starts.
  void SetShardPolicy(ShardPolicy* policy) { policy_ = policy; }

  // The (cached) PsService stub for `address`.
  std::shared_ptr<v1::PsService::Stub> StubFor(const std::string& address);

  // Completes every waiting KvGet with UNAVAILABLE; later KvGets that would wait fail
  // at once. Call before shutting the server down.
  void Shutdown() { waiters_.Shutdown(); }

  grpc::ServerUnaryReactor* RegisterShard(grpc::CallbackServerContext* context,
                                          const v1::RegisterShardRequest* request,
                                          v1::RegisterShardResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const v1::HeartbeatRequest* request,
                                      v1::HeartbeatResponse* response) override;
  grpc::ServerUnaryReactor* GetClusterMap(grpc::CallbackServerContext* context,
                                          const v1::GetClusterMapRequest* request,
                                          v1::GetClusterMapResponse* response) override;
  grpc::ServerUnaryReactor* GetHotSet(grpc::CallbackServerContext* context,
                                      const v1::GetHotSetRequest* request,
                                      v1::GetHotSetResponse* response) override;
  grpc::ServerUnaryReactor* CreateTable(grpc::CallbackServerContext* context,
                                        const v1::CoordinatorCreateTableRequest* request,
                                        v1::CoordinatorCreateTableResponse* response) override;
  grpc::ServerUnaryReactor* DescribeTable(grpc::CallbackServerContext* context,
                                          const v1::DescribeTableRequest* request,
                                          v1::DescribeTableResponse* response) override;
  grpc::ServerUnaryReactor* KvPut(grpc::CallbackServerContext* context,
                                  const v1::KvPutRequest* request,
                                  v1::KvPutResponse* response) override;
  grpc::ServerUnaryReactor* KvGet(grpc::CallbackServerContext* context,
                                  const v1::KvGetRequest* request,
                                  v1::KvGetResponse* response) override;

  grpc::ServerUnaryReactor* JoinJob(grpc::CallbackServerContext* context,
                                    const v1::JoinJobRequest* request,
                                    v1::JoinJobResponse* response) override;
  grpc::ServerUnaryReactor* FinishJob(grpc::CallbackServerContext* context,
                                      const v1::FinishJobRequest* request,
                                      v1::FinishJobResponse* response) override;
  grpc::ServerUnaryReactor* Checkpoint(grpc::CallbackServerContext* context,
                                       const v1::CheckpointRequest* request,
                                       v1::CheckpointResponse* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const v1::GetJobRequest* request,
                                   v1::GetJobResponse* response) override;
  grpc::ServerUnaryReactor* ReportProgress(grpc::CallbackServerContext* context,
                                           const v1::ReportProgressRequest* request,
                                           v1::ReportProgressResponse* response) override;
  grpc::ServerUnaryReactor* LeaveCluster(grpc::CallbackServerContext* context,
                                         const v1::LeaveClusterRequest* request,
                                         v1::LeaveClusterResponse* response) override;

 private:
  // OK (with *who, the caller's audit name) when the call may go on. A call for a shard
  // (`shard_call`) with options_.shard_registration: by AuthorizeAdmin; otherwise by
  // AuthorizeMember with options_.cluster_token (always OK without one). Refusals are
  // logged with the caller's address.
  absl::Status Authorize(const grpc::CallbackServerContext* context, const char* method,
                         bool shard_call, std::string* who) const;

  CoordinatorState* const state_;
  const CoordinatorServiceOptions options_;
  JobManager* jobs_ = nullptr;
  HotSetPublisher* hot_set_ = nullptr;
  ShardPolicy* policy_ = nullptr;
  KvWaiters waiters_;

  absl::Mutex stubs_mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<v1::PsService::Stub>> stubs_
      ABSL_GUARDED_BY(stubs_mu_);
};

}  // namespace ember

#endif  // EMBER_SERVER_COORDINATOR_COORDINATOR_SERVICE_H_
