// Copyright 2026 The Ember Authors.

#include "server/ps/replica_sender.h"
#include "common/keepalive.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/admin_auth.h"
#include "common/grpc_status.h"
#include "common/tls.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace ember {
namespace {

bool Retryable(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
      return true;
    default:
      return false;
  }
}

}  // namespace

struct ReplicaSender::Call {
  uint32_t holder = 0;
  std::string address;
  std::shared_ptr<const v1::PutReplicasRequest> request;
  absl::Time deadline;
  Done done;
  std::shared_ptr<v1::PsService::Stub> stub;
  std::unique_ptr<grpc::ClientContext> context;  // one per attempt
  v1::PutReplicasResponse response;
  absl::Duration backoff;
  int attempts = 0;
};

struct ReplicaSender::State {
  State(const ReplicaSenderOptions& options, AttemptObserver observer)
      : options(options), observer(std::move(observer)) {}

  const ReplicaSenderOptions options;
  const AttemptObserver observer;
  absl::Mutex mu;
  bool stopping ABSL_GUARDED_BY(mu) = false;
  int in_flight ABSL_GUARDED_BY(mu) = 0;  // gRPC calls started, not finished
  absl::flat_hash_map<std::string, std::shared_ptr<v1::PsService::Stub>> stubs ABSL_GUARDED_BY(mu);
  std::multimap<absl::Time, std::shared_ptr<Call>> retries ABSL_GUARDED_BY(mu);
};

ReplicaSender::ReplicaSender(const ReplicaSenderOptions& options, AttemptObserver observer)
    : state_(std::make_shared<State>(options, std::move(observer))) {
  timer_ = std::thread([state = state_] { TimerLoop(state); });
}

ReplicaSender::~ReplicaSender() {
  std::multimap<absl::Time, std::shared_ptr<Call>> pending;
  {
    absl::MutexLock lock(&state_->mu);
    state_->stopping = true;
    pending.swap(state_->retries);
  }
  timer_.join();
  for (auto& [when, call] : pending) call->done(absl::CancelledError("replica sender stopped"));
  // Every `done` has run once this returns (calls in flight end by their deadlines).
  absl::MutexLock lock(&state_->mu);
  State* state = state_.get();
  auto idle = [state]() ABSL_SHARED_LOCKS_REQUIRED(state->mu) { return state->in_flight == 0; };
  state_->mu.Await(absl::Condition(&idle));
}

void ReplicaSender::Send(uint32_t holder, const std::string& address,
                         std::shared_ptr<const v1::PutReplicasRequest> request, absl::Time deadline,
                         Done done) {
  auto call = std::make_shared<Call>();
  call->holder = holder;
  call->address = address;
  call->request = std::move(request);
  call->deadline = deadline;
  call->done = std::move(done);
  call->backoff = state_->options.initial_backoff;
  {
    absl::MutexLock lock(&state_->mu);
    std::shared_ptr<v1::PsService::Stub>& stub = state_->stubs[address];
    if (stub == nullptr) {
      grpc::ChannelArguments args;
      args.SetMaxReceiveMessageSize(state_->options.max_message_bytes);
      args.SetMaxSendMessageSize(state_->options.max_message_bytes);
      SetClientKeepalive(&args);
      stub = v1::PsService::NewStub(grpc::experimental::CreateCustomChannelWithInterceptors(
          address, OrInsecure(state_->options.channel_credentials), args,
          AdminTokenInterceptors(state_->options.admin_token)));
    }
    call->stub = stub;
  }
  Start(state_, std::move(call));
}

void ReplicaSender::Start(const std::shared_ptr<State>& state, std::shared_ptr<Call> call) {
  bool stopped = false;
  {
    absl::MutexLock lock(&state->mu);
    stopped = state->stopping;
    if (!stopped) ++state->in_flight;
  }
  if (stopped) {
    call->done(absl::CancelledError("replica sender stopped"));
    return;
  }
  ++call->attempts;
  call->context = std::make_unique<grpc::ClientContext>();
  call->context->set_deadline(
      absl::ToChronoTime(std::min(call->deadline, absl::Now() + state->options.attempt_timeout)));
  call->response.Clear();
  grpc::ClientContext* context = call->context.get();
  const v1::PutReplicasRequest* request = call->request.get();
  v1::PutReplicasResponse* response = &call->response;
  v1::PsService::Stub* stub = call->stub.get();
  stub->async()->PutReplicas(context, request, response,
                             [state, call = std::move(call)](grpc::Status status) mutable {
                               const absl::Status s = FromGrpcStatus(status, call->context.get());
                               Finished(state, std::move(call), s);
                             });
}

void ReplicaSender::Finished(const std::shared_ptr<State>& state, std::shared_ptr<Call> call,
                             const absl::Status& status) {
  if (state->observer != nullptr) state->observer(status.ok(), *call->request);
  bool retried = false;
  if (!status.ok() && Retryable(status.code()) && absl::Now() + call->backoff < call->deadline) {
    absl::MutexLock lock(&state->mu);
    if (!state->stopping) {
      const absl::Time when = absl::Now() + call->backoff;
      call->backoff = std::min(call->backoff * 2, state->options.max_backoff);
      state->retries.emplace(when, call);
      retried = true;
    }
  }
  if (!retried) {
    if (status.ok()) {
      call->done(absl::OkStatus());
    } else {
      call->done(absl::Status(
          status.code(), absl::StrCat("copy of hot rows to replica holder shard ", call->holder,
                                      " (", call->address, ") failed after ", call->attempts,
                                      " attempt(s): ", status.message())));
    }
  }
  absl::MutexLock lock(&state->mu);
  --state->in_flight;
}

void ReplicaSender::TimerLoop(const std::shared_ptr<State>& state) {
  absl::MutexLock lock(&state->mu);
  while (!state->stopping) {
    const absl::Time next =
        state->retries.empty() ? absl::InfiniteFuture() : state->retries.begin()->first;
    const size_t queued = state->retries.size();
    // Wake for stop, a new (maybe earlier) retry, or the earliest one's time.
    State* s = state.get();
    auto wake = [s, queued]() ABSL_SHARED_LOCKS_REQUIRED(s->mu) {
      return s->stopping || s->retries.size() != queued;
    };
    state->mu.AwaitWithDeadline(absl::Condition(&wake), next);
    if (state->stopping) break;
    const absl::Time now = absl::Now();
    std::vector<std::shared_ptr<Call>> due;
    while (!state->retries.empty() && state->retries.begin()->first <= now) {
      due.push_back(std::move(state->retries.begin()->second));
      state->retries.erase(state->retries.begin());
    }
    if (due.empty()) continue;
    state->mu.Unlock();
    for (std::shared_ptr<Call>& call : due) Start(state, std::move(call));
    state->mu.Lock();
  }
}

}  // namespace ember
