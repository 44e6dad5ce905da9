// Copyright 2026 The Ember Authors.

#include "worker/job/job_client.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/tls.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace ember::worker {
namespace {

// Repeats `call` (given a fresh context with a deadline) while it fails with
// UNAVAILABLE, until `deadline`; sleeps between tries (pacing, not ordering).
template <typename Call>
absl::Status Retry(absl::Time deadline, absl::Duration per_call, const Call& call) {
  absl::Duration backoff = absl::Milliseconds(100);
  while (true) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(std::min(deadline, absl::Now() + per_call)));
    absl::Status s = FromGrpcStatus(call(&context), &context);
    if (s.ok() || s.code() != absl::StatusCode::kUnavailable) return s;
    if (absl::Now() + backoff >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("coordinator unreachable until the deadline: ", s.message()));
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(1));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<JobClient>> JobClient::Create(
    const std::string& address, std::shared_ptr<grpc::ChannelCredentials> credentials) {
  if (address.empty()) return absl::InvalidArgumentError("a coordinator address is required");
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);  // worker state carries the dense model
  args.SetMaxSendMessageSize(256 << 20);
  return std::unique_ptr<JobClient>(new JobClient(v1::CoordinatorService::NewStub(
      grpc::CreateCustomChannel(address, OrInsecure(credentials), args))));
}

absl::StatusOr<v1::JoinJobResponse> JobClient::Join(v1::JoinJobRequest request,
                                                    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  request.set_wait_ms(5000);
  while (true) {
    v1::JoinJobResponse response;
    absl::Status s = Retry(deadline, absl::Seconds(10), [&](grpc::ClientContext* context) {
      return stub_->JoinJob(context, request, &response);
    });
    if (!s.ok()) return s;
    if (response.ready()) return response;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "job '", request.job(), "' did not recover within ", absl::FormatDuration(timeout)));
    }
    // Later calls of this loop are not new failures of the attempt it already ended.
  }
}

absl::StatusOr<v1::CheckpointManifest> JobClient::Checkpoint(const v1::CheckpointRequest& request,
                                                             absl::Duration timeout) {
  v1::CheckpointResponse response;
  absl::Status s = Retry(absl::Now() + timeout, timeout, [&](grpc::ClientContext* context) {
    return stub_->Checkpoint(context, request, &response);
  });
  if (!s.ok()) return s;
  return response.manifest();
}

absl::StatusOr<v1::GetJobResponse> JobClient::GetJob(const std::string& job,
                                                     absl::Duration timeout) {
  v1::GetJobRequest request;
  request.set_job(job);
  v1::GetJobResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  absl::Status s = FromGrpcStatus(stub_->GetJob(&context, request, &response), &context);
  if (!s.ok()) return s;
  return response;
}

absl::Status JobClient::Finish(const v1::FinishJobRequest& request, absl::Duration timeout) {
  v1::FinishJobResponse response;
  return Retry(absl::Now() + timeout, timeout, [&](grpc::ClientContext* context) {
    return stub_->FinishJob(context, request, &response);
  });
}

}  // namespace ember::worker
