// Copyright 2026 The Ember Authors.

#include "worker/job/job_client.h"
#include "common/keepalive.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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
  SetClientKeepalive(&args);
  const bool tls = credentials != nullptr;
  return std::unique_ptr<JobClient>(
      new JobClient(v1::CoordinatorService::NewStub(
                        grpc::CreateCustomChannel(address, OrInsecure(credentials), args)),
                    address, tls));
}

absl::StatusOr<v1::JoinJobResponse> JobClient::Join(v1::JoinJobRequest request,
                                                    const JoinWait& wait) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + wait.timeout;
  request.set_wait_ms(5000);
  bool reached = false;  // the coordinator answered once
  std::string waiting_for;
  absl::Time reported = absl::InfinitePast();
  // Says what the join waits for when it changes, and again every report_every.
  auto report = [&](const std::string& what) {
    const absl::Time now = absl::Now();
    if (what == waiting_for && now - reported < wait.report_every) return;
    waiting_for = what;
    reported = now;
    if (wait.report) {
      wait.report(
          absl::StrCat("joining job '", request.job(), "' at ", address_, ": ", what,
                       absl::StrFormat(" (%.0fs so far)", absl::ToDoubleSeconds(now - start))));
    }
  };
  absl::Duration backoff = absl::Milliseconds(100);
  while (true) {
    v1::JoinJobResponse response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(std::min(deadline, absl::Now() + absl::Seconds(10))));
    const absl::Status s = FromGrpcStatus(stub_->JoinJob(&context, request, &response), &context);
    if (s.ok() && response.ready()) return response;
    if (!s.ok() && s.code() != absl::StatusCode::kUnavailable) return s;
    const absl::Time now = absl::Now();
    if (s.ok()) {
      reached = true;
      backoff = absl::Milliseconds(100);
      // An elastic worker waiting for a place is not waiting for a recovery.
      report(response.waiting_for().empty() ? std::string("the job is recovering")
             : request.max_workers() > 0
                 ? response.waiting_for()
                 : absl::StrCat("the job is recovering: ", response.waiting_for()));
      if (now >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "job '", request.job(), "' did not recover within ", absl::FormatDuration(wait.timeout),
            response.waiting_for().empty() ? "" : absl::StrCat(" (", response.waiting_for(), ")")));
      }
      continue;  // JoinJob itself waited; later calls are not new failures of the attempt
    }
    // A refused connection is no TLS mismatch: nothing listens there.
    const std::string hint = absl::StrContains(s.message(), "Connection refused")
                                 ? std::string(" (nothing listens there?)")
                                 : TlsHintForUnavailable(tls_);
    const std::string unreachable = absl::StrCat("coordinator unreachable: ", s.message(), hint);
    if (!reached && now - start >= wait.unreachable_timeout) {
      return absl::UnavailableError(absl::StrCat("coordinator ", address_, " unreachable for ",
                                                 absl::FormatDuration(wait.unreachable_timeout),
                                                 " (check --coordinator): ", s.message(), hint));
    }
    if (now + backoff >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("coordinator ", address_, " unreachable until the deadline: ", s.message()));
    }
    report(reached ? absl::StrCat(unreachable, "; waiting for it to come back")
                   : absl::StrCat(unreachable, "; retrying for up to ",
                                  absl::FormatDuration(wait.unreachable_timeout)));
    absl::SleepFor(backoff);  // retry pacing, not event ordering
    backoff = std::min(backoff * 2, absl::Seconds(1));
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

absl::Status JobClient::AwaitFinished(const std::string& job, uint64_t generation, uint64_t attempt,
                                      absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::string answered;  // what the last answer said
  std::string last = "the coordinator did not answer";
  while (true) {
    absl::StatusOr<v1::GetJobResponse> r = GetJob(
        job, std::min(absl::Seconds(5), std::max(deadline - absl::Now(), absl::Milliseconds(1))));
    if (r.ok()) {
      if (r->generation() != generation) {
        return absl::FailedPreconditionError(absl::StrCat("job '", job, "' generation ", generation,
                                                          " was superseded by generation ",
                                                          r->generation(), " before it finished"));
      }
      switch (r->phase()) {
        case v1::GetJobResponse::FINISHED:
          return absl::OkStatus();
        case v1::GetJobResponse::FAILED:
          return absl::FailedPreconditionError(
              absl::StrCat("job '", job, "' failed: ", r->failure()));
        default:
          break;
      }
      if (r->attempt() != attempt || r->phase() == v1::GetJobResponse::RECOVERING) {
        return absl::AbortedError(absl::StrCat(
            "attempt ", attempt, " of job '", job, "' was rolled back before rank 0 finished it",
            r->failure().empty() ? "" : absl::StrCat(" (", r->failure(), ")")));
      }
      answered = last = absl::StrCat("attempt ", attempt, " still running");
    } else if (answered.empty()) {
      last = std::string(r.status().message());
    } else {
      // A poll cut short by the deadline (or lost) does not hide what the job said.
      last = absl::StrCat(answered, "; the last poll: ", r.status().message());
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("rank 0 did not finish job '", job,
                                                      "' within ", absl::FormatDuration(timeout),
                                                      " (", last, ")"));
    }
    absl::SleepFor(absl::Milliseconds(100));  // polling pace, not event ordering
  }
}

bool JobClient::ReportProgressAsync(const v1::ReportProgressRequest& request,
                                    absl::Duration timeout, absl::Duration wait_for_previous) {
  {
    Progress& p = *progress_;
    absl::MutexLock lock(&p.mu);
    if (p.in_flight) {
      p.mu.AwaitWithTimeout(absl::Condition(
                                +[](bool* in_flight) { return !*in_flight; }, &p.in_flight),
                            wait_for_previous);
    }
    if (p.in_flight) return false;
    p.in_flight = true;
  }
  // The call's state lives until its callback, which runs on a gRPC thread.
  struct Call {
    grpc::ClientContext context;
    v1::ReportProgressRequest request;
    v1::ReportProgressResponse response;
  };
  auto* call = new Call;
  call->request = request;
  call->context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  stub_->async()->ReportProgress(&call->context, &call->request, &call->response,
                                 [progress = progress_, call](grpc::Status status) {
                                   absl::Status s = FromGrpcStatus(status, &call->context);
                                   delete call;
                                   absl::MutexLock lock(&progress->mu);
                                   progress->status = std::move(s);
                                   progress->in_flight = false;
                                 });
  return true;
}

absl::Status JobClient::AwaitProgressReport(absl::Duration timeout) const {
  Progress& p = *progress_;
  absl::MutexLock lock(&p.mu);
  if (!p.mu.AwaitWithTimeout(absl::Condition(
                                 +[](bool* in_flight) { return !*in_flight; }, &p.in_flight),
                             timeout)) {
    return absl::DeadlineExceededError("the progress report is still in flight");
  }
  return p.status;
}

JobClient::~JobClient() {
  Progress& p = *progress_;
  absl::MutexLock lock(&p.mu);
  p.mu.Await(absl::Condition(
      +[](bool* in_flight) { return !*in_flight; }, &p.in_flight));
}

}  // namespace ember::worker
