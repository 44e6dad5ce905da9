// Copyright 2026 The Ember Authors.

#include "server/shared/graceful_shutdown.h"

#include <signal.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpc/grpc.h"
#include "grpcpp/support/server_interceptor.h"

namespace ember {
namespace {

// Counts one call from its arrival at the service until gRPC destroys the call's
// context, which happens after the reactor's OnDone. It also gives an unparsable
// request its status (issue 28 item 1.6): gRPC answers a request message that does not
// parse with UNIMPLEMENTED and no message (callback services) or INTERNAL and no
// message (sync services), before any handler runs; this says INVALID_ARGUMENT,
// naming the method.
class CountingInterceptor final : public grpc::experimental::Interceptor {
 public:
  CountingInterceptor(ServerCallTracker* calls, grpc::experimental::ServerRpcInfo* info)
      : calls_(calls),
        info_(info),
        // The request of a unary or server-streaming call is parsed before its handler
        // runs; a client-streaming read that ends the stream also reads as "no message".
        parsed_up_front_(info->type() == grpc::experimental::ServerRpcInfo::Type::UNARY ||
                         info->type() ==
                             grpc::experimental::ServerRpcInfo::Type::SERVER_STREAMING) {
    calls_->Enter();
  }
  ~CountingInterceptor() override { calls_->Leave(); }
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (parsed_up_front_ &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      if (!seen_request_) unparsable_ = methods->GetRecvMessage() == nullptr;
      seen_request_ = true;
    }
    if (unparsable_ &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      methods->ModifySendStatus(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("the request bytes of ", info_->method() == nullptr ? "" : info_->method(),
                       " do not parse as its request message (malformed protobuf)")));
    }
    methods->Proceed();
  }

 private:
  ServerCallTracker* const calls_;
  grpc::experimental::ServerRpcInfo* const info_;  // the call's; outlives this
  const bool parsed_up_front_;
  bool seen_request_ = false;
  bool unparsable_ = false;
};

class CountingInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit CountingInterceptorFactory(ServerCallTracker* calls) : calls_(calls) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new CountingInterceptor(calls_, info);
  }

 private:
  ServerCallTracker* const calls_;
};

}  // namespace

void ServerCallTracker::Install(grpc::ServerBuilder* builder) {
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> factories;
  factories.push_back(std::make_unique<CountingInterceptorFactory>(this));
  builder->experimental().SetInterceptorCreators(std::move(factories));
}

int64_t ServerCallTracker::in_flight() const {
  absl::MutexLock lock(&mu_);
  return in_flight_;
}

bool ServerCallTracker::WaitIdle(absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ == 0; };
  return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

void ServerCallTracker::Enter() {
  absl::MutexLock lock(&mu_);
  ++in_flight_;
}

void ServerCallTracker::Leave() {
  absl::MutexLock lock(&mu_);
  --in_flight_;
}

void ShutdownServer(grpc::Server* server, const ServerCallTracker* calls, absl::Time deadline) {
  // Begin gRPC's graceful shutdown ourselves (Server::Shutdown would block until every
  // connection is gone): from here on no call reaches a service, so the count of
  // calls in progress only falls. shutdown_and_notify may be called more than once
  // (Server::Shutdown below calls it again); every tag completes when shutdown does.
  // A core completion queue, not a grpc::CompletionQueue: that one expects its tags to
  // be grpc::internal::CompletionQueueTag objects.
  grpc_completion_queue* shutdown_cq = grpc_completion_queue_create_for_next(nullptr);
  grpc_server_shutdown_and_notify(server->c_server(), shutdown_cq, /*tag=*/nullptr);
  calls->WaitIdle(deadline);
  // What is left is idle connections (and, past the deadline, calls that overran it).
  grpc_server_cancel_all_calls(server->c_server());
  server->Shutdown(absl::ToChronoTime(absl::Now()));
  server->Wait();
  // Shutdown has completed, so the tag is queued: this drains it without waiting.
  grpc_completion_queue_shutdown(shutdown_cq);
  while (
      grpc_completion_queue_next(shutdown_cq, gpr_inf_future(GPR_CLOCK_REALTIME), nullptr).type !=
      GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(shutdown_cq);
}

namespace {

sigset_t StopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  return signals;
}

}  // namespace

void BlockStopSignals() {
  const sigset_t signals = StopSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

int WaitForStopSignal() {
  const sigset_t signals = StopSignals();
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  return signal_number;
}

}  // namespace ember
