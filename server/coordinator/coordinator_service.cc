// Copyright 2026 The Ember Authors.

#include "server/coordinator/coordinator_service.h"
#include "common/keepalive.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/admin_auth.h"
#include "common/clip.h"
#include "common/cluster_token.h"
#include "common/grpc_status.h"
#include "common/job_name.h"
#include "common/log.h"
#include "common/tls.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace ember {
namespace {

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context,
                                    const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status, context));
  return reactor;
}

// The audit name of a caller: its address, and its certificate's name over mTLS.
std::string Who(const grpc::CallbackServerContext* context) {
  const std::string name = PeerCommonName(*context);
  return absl::StrCat("peer=", context->peer(), name.empty() ? "" : " cert=", name);
}

// One CreateTable forwarded to all alive shards: finishes the caller's reactor when the
// last shard call completes. Owned by the shard calls' callbacks (shared_ptr).
struct FanOut {
  grpc::ServerUnaryReactor* reactor = nullptr;
  v1::CoordinatorCreateTableResponse* response = nullptr;
  absl::Mutex mu;
  size_t remaining ABSL_GUARDED_BY(mu) = 0;
  std::vector<uint32_t> pending ABSL_GUARDED_BY(mu);
};

struct ShardCall {
  uint32_t shard_id = 0;
  std::shared_ptr<v1::PsService::Stub> stub;  // keeps the channel alive for the call
  grpc::ClientContext context;
  v1::CreateTableRequest request;
  v1::CreateTableResponse response;
};

// Waits for a key through KvWaiters; completes exactly once (KvWaiters guarantees
// one callback), and deletes itself when gRPC is done with the call.
class KvGetReactor final : public grpc::ServerUnaryReactor {
 public:
  KvGetReactor(KvWaiters* waiters, v1::KvGetResponse* response)
      : waiters_(waiters), response_(response) {}

  // Registers the waiter and returns its id. The reactor may be finished from another
  // thread at once, but gRPC runs OnDone (which deletes it) only after the method
  // handler has returned it, so the handler may still use it until then.
  uint64_t Wait(const std::string& key, absl::Time deadline) {
    const uint64_t id = waiters_->Add(key, deadline, [this](absl::StatusOr<std::string> value) {
      if (value.ok()) response_->set_value(*std::move(value));
      Finish(ToGrpcStatus(value.status(), nullptr));
    });
    id_.store(id);
    return id;
  }

  void OnCancel() override { waiters_->Cancel(id_.load()); }
  void OnDone() override { delete this; }

 private:
  KvWaiters* const waiters_;
  v1::KvGetResponse* const response_;
  std::atomic<uint64_t> id_{0};
};

}  // namespace

CoordinatorServiceImpl::CoordinatorServiceImpl(CoordinatorState* state,
                                               const CoordinatorServiceOptions& options)
    : state_(state), options_(options) {}

CoordinatorServiceImpl::~CoordinatorServiceImpl() { waiters_.Shutdown(); }

std::shared_ptr<v1::PsService::Stub> CoordinatorServiceImpl::StubFor(const std::string& address) {
  absl::MutexLock lock(&stubs_mu_);
  std::shared_ptr<v1::PsService::Stub>& stub = stubs_[address];
  if (stub == nullptr) {
    // Migration pages and checkpoint answers can exceed gRPC's 4 MiB default.
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(256 << 20);
    args.SetMaxSendMessageSize(256 << 20);
    SetClientKeepalive(&args);
    // The admin token for the shards' admin calls, the cluster token for the
    // CreateTable this coordinator forwards.
    stub = v1::PsService::NewStub(grpc::experimental::CreateCustomChannelWithInterceptors(
        address, OrInsecure(options_.channel_credentials), args,
        AdminAndClusterTokenInterceptors(options_.admin_token, options_.cluster_token)));
  }
  return stub;
}

absl::Status CoordinatorServiceImpl::Authorize(const grpc::CallbackServerContext* context,
                                               const char* method, bool shard_call,
                                               std::string* who) const {
  *who = Who(context);
  const absl::Status allowed =
      shard_call && options_.shard_registration.has_value()
          ? AuthorizeAdmin(*context, *options_.shard_registration, who)
          : AuthorizeMember(*context, options_.cluster_token, options_.admin, method, who);
  if (!allowed.ok()) {
    EMBER_LOG(WARNING) << "refused " << method << " from " << context->peer() << ": "
                       << allowed.message();
  }
  return allowed;
}

grpc::ServerUnaryReactor* CoordinatorServiceImpl::RegisterShard(
    grpc::CallbackServerContext* context, const v1::RegisterShardRequest* request,
    v1::RegisterShardResponse* response) {
  std::string who;
  if (absl::Status s = Authorize(context, "RegisterShard", /*shard_call=*/true, &who); !s.ok()) {
    return FinishNow(context, s);
  }
  absl::StatusOr<v1::RegisterShardResponse> result =
      state_->RegisterShard(request->shard_id(), request->address(), who);
  if (result.ok()) *response = *std::move(result);
  if (result.ok() && jobs_ != nullptr)
    jobs_->OnShardSeen(request->shard_id(), request->incarnation());
  if (result.ok() && policy_ != nullptr) {
    policy_->OnShardSeen(request->shard_id(), request->incarnation());
  }
  if (result.ok() && hot_set_ != nullptr) {
    hot_set_->ShardRegistered(request->shard_id(), request->incarnation());
  }
  return FinishNow(context, result.status());
}

grpc::ServerUnaryReactor* CoordinatorServiceImpl::Heartbeat(grpc::CallbackServerContext* context,
                                                            const v1::HeartbeatRequest* request,
                                                            v1::HeartbeatResponse* response) {
  // A forged heartbeat could report a shard restart (ending the job's attempt) or
  // fake hot keys.
  std::string who;
  if (absl::Status s = Authorize(context, "Heartbeat", /*shard_call=*/true, &who); !s.ok()) {
    return FinishNow(context, s);
  }
  absl::StatusOr<v1::HeartbeatResponse> result = state_->Heartbeat(*request);
  if (result.ok()) *response = *std::move(result);
  if (result.ok() && jobs_ != nullptr)
    jobs_->OnShardSeen(request->shard_id(), request->incarnation());
  if (result.ok() && policy_ != nullptr) {
    policy_->OnShardSeen(request->shard_id(), request->incarnation());
  }
  if (result.ok() && hot_set_ != nullptr) {
    hot_set_->Report(request->shard_id(), request->incarnation(), request->hot_keys(),
                     request->hot_set_version());
    v1::HotSet hot_set = hot_set_->Get(request->hot_set_version());
    // Only a newer set: a shard ahead of a restarted coordinator keeps its own until
    // the coordinator publishes above it.
    if (hot_set.version() > request->hot_set_version()) {
      *response->mutable_hot_set() = std::move(hot_set);
    }
  }
  return FinishNow(context, result.status());
}

grpc::ServerUnaryReactor* CoordinatorServiceImpl::GetHotSet(grpc::CallbackServerContext* context,
                                                            const v1::GetHotSetRequest* request,
                                                            v1::GetHotSetResponse* response) {
  if (hot_set_ != nullptr) *response->mutable_hot_set() = hot_set_->Get(request->known_version());
  return FinishNow(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* CoordinatorServiceImpl::GetClusterMap(
    grpc::CallbackServerContext* context, const v1::GetClusterMapRequest* request,
    v1::GetClusterMapResponse* response) {
  if (!request->job().empty()) {
    if (absl::Status s = CheckJobName(request->job()); !s.ok()) return FinishNow(context, s);
  }
  *response = state_->ClusterMap(request->job());
  return FinishNow(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* CoordinatorServiceImpl::DescribeTable(
    grpc::CallbackServerContext* context, const v1::DescribeTableRequest* request,
    v1::DescribeTableResponse* response) {
  absl::StatusOr<v1::TableConfig> config = state_->DescribeTable(request->name(), request->job());
  if (config.ok()) *response->mutable_config() = *std::move(config);
  return FinishNow(context, config.status());
}

grpc::ServerUnaryReactor* CoordinatorServiceImpl::CreateTable(
    grpc::CallbackServerContext* context, const v1::CoordinatorCreateTableRequest* request,
    v1::CoordinatorCreateTableResponse* response) {
  std::string who;
  if (absl::Status s = Authorize(context, "CreateTable", /*shard_call=*/false, &who); !s.ok()) {
    return FinishNow(context, s);
  }
  absl::StatusOr<v1::TableConfig> config =
      state_->CreateTable(request->config(), who, request->job());
  if (!config.ok()) return FinishNow(context, config.status());
  *response->mutable_config() = *config;

  std::vector<v1::ShardInfo> alive;
  for (v1::ShardInfo& shard : state_->Shards()) {
    if (shard.state() == v1::ShardInfo::ALIVE) alive.push_back(std::move(shard));
  }
  if (alive.empty()) return FinishNow(context, absl::OkStatus());

  auto fan_out = std::make_shared<FanOut>();
  fan_out->reactor = context->DefaultReactor();
  fan_out->response = response;
  {
    absl::MutexLock lock(&fan_out->mu);
    fan_out->remaining = alive.size();
  }
  const auto deadline =
      std::min(context->deadline(), absl::ToChronoTime(absl::Now() + options_.forward_timeout));
  for (const v1::ShardInfo& shard : alive) {
    auto call = std::make_shared<ShardCall>();
    call->shard_id = shard.shard_id();
    call->stub = StubFor(shard.address());
    call->context.set_deadline(deadline);
    *call->request.mutable_config() = *config;
    call->request.set_job(request->job());
    call->stub->async()->CreateTable(
        &call->context, &call->request, &call->response, [fan_out, call](grpc::Status status) {
          bool last = false;
          {
            absl::MutexLock lock(&fan_out->mu);
            if (!status.ok()) fan_out->pending.push_back(call->shard_id);
            last = --fan_out->remaining == 0;
            if (last) {
              std::sort(fan_out->pending.begin(), fan_out->pending.end());
              for (uint32_t id : fan_out->pending) fan_out->response->add_pending_shards(id);
            }
          }
          if (last) fan_out->reactor->Finish(grpc::Status::OK);
        });
  }
  return fan_out->reactor;
}

grpc::ServerUnaryReactor* CoordinatorServiceImpl::KvPut(grpc::CallbackServerContext* context,
                                                        const v1::KvPutRequest* request,
                                                        v1::KvPutResponse* response) {
  // Workers trust the rendezvous keys: a forged address would join a stranger to the
  // all-reduce.
  std::string who;
  if (absl::Status s = Authorize(context, "KvPut", /*shard_call=*/false, &who); !s.ok()) {
    return FinishNow(context, s);
  }
  const absl::Status status = state_->KvPut(request->key(), request->value());
  if (status.ok()) waiters_.Notify(request->key(), request->value());
  return FinishNow(context, status);
}

grpc::ServerUnaryReactor* CoordinatorServiceImpl::KvGet(grpc::CallbackServerContext* context,
                                                        const v1::KvGetRequest* request,
                                                        v1::KvGetResponse* response) {
  if (std::optional<std::string> value = state_->KvGet(request->key())) {
    response->set_value(*std::move(value));
    return FinishNow(context, absl::OkStatus());
  }
  if (request->wait_ms() == 0) {
    return FinishNow(context, absl::NotFoundError(
                                  absl::StrCat("no key '", ClipForMessage(request->key()), "'")));
  }
  const absl::Time deadline = std::min(
      {absl::Now() + std::min(absl::Milliseconds(request->wait_ms()), options_.max_kv_wait),
       absl::FromChrono(context->deadline())});
  auto* reactor = new KvGetReactor(&waiters_, response);
  const uint64_t id = reactor->Wait(request->key(), deadline);
  // A put between the first lookup and Wait() notified nobody: look again.
  if (std::optional<std::string> value = state_->KvGet(request->key())) {
    waiters_.Complete(id, *std::move(value));
  }
  return reactor;
}

// JoinJob waits for a recovery and Checkpoint runs shard IO: both run on a thread of
// their own, so they never hold a gRPC callback thread.
grpc::ServerUnaryReactor* CoordinatorServiceImpl::JoinJob(grpc::CallbackServerContext* context,
                                                          const v1::JoinJobRequest* request,
                                                          v1::JoinJobResponse* response) {
  if (jobs_ == nullptr) return FinishNow(context, absl::UnimplementedError("no job manager"));
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  std::thread([this, reactor, request, response, who = Who(context)] {
    absl::StatusOr<v1::JoinJobResponse> result = jobs_->JoinJob(*request, who);
    if (result.ok()) *response = *std::move(result);
    reactor->Finish(ToGrpcStatus(result.status(), nullptr));
  }).detach();
  return reactor;
}

grpc::ServerUnaryReactor* CoordinatorServiceImpl::Checkpoint(grpc::CallbackServerContext* context,
                                                             const v1::CheckpointRequest* request,
                                                             v1::CheckpointResponse* response) {
  if (jobs_ == nullptr) return FinishNow(context, absl::UnimplementedError("no job manager"));
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  std::thread([this, reactor, request, response] {
    absl::StatusOr<v1::CheckpointResponse> result = jobs_->Checkpoint(*request);
    if (result.ok()) *response = *std::move(result);
    reactor->Finish(ToGrpcStatus(result.status(), nullptr));
  }).detach();
  return reactor;
}

grpc::ServerUnaryReactor* CoordinatorServiceImpl::FinishJob(grpc::CallbackServerContext* context,
                                                            const v1::FinishJobRequest* request,
                                                            v1::FinishJobResponse* response) {
  if (jobs_ == nullptr) return FinishNow(context, absl::UnimplementedError("no job manager"));
  return FinishNow(context, jobs_->FinishJob(*request));
}

grpc::ServerUnaryReactor* CoordinatorServiceImpl::GetJob(grpc::CallbackServerContext* context,
                                                         const v1::GetJobRequest* request,
                                                         v1::GetJobResponse* response) {
  if (jobs_ == nullptr) return FinishNow(context, absl::UnimplementedError("no job manager"));
  absl::StatusOr<v1::GetJobResponse> result = jobs_->GetJob(request->job());
  if (result.ok()) *response = *std::move(result);
  return FinishNow(context, result.status());
}

grpc::ServerUnaryReactor* CoordinatorServiceImpl::ReportProgress(
    grpc::CallbackServerContext* context, const v1::ReportProgressRequest* request,
    v1::ReportProgressResponse* /*response*/) {
  if (jobs_ == nullptr) return FinishNow(context, absl::UnimplementedError("no job manager"));
  return FinishNow(context, jobs_->ReportProgress(*request));
}

grpc::ServerUnaryReactor* CoordinatorServiceImpl::LeaveCluster(
    grpc::CallbackServerContext* context, const v1::LeaveClusterRequest* request,
    v1::LeaveClusterResponse* response) {
  // A forged request would drain a healthy shard.
  std::string who;
  if (absl::Status s = Authorize(context, "LeaveCluster", /*shard_call=*/true, &who); !s.ok()) {
    return FinishNow(context, s);
  }
  if (policy_ == nullptr) return FinishNow(context, absl::UnimplementedError("no shard policy"));
  absl::StatusOr<v1::LeaveClusterResponse> result =
      policy_->Leave(request->shard_id(), request->incarnation());
  if (result.ok()) *response = *std::move(result);
  return FinishNow(context, result.status());
}

}  // namespace ember
