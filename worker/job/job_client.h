// Copyright 2026 The Ember Authors.
//
// JobClient: a worker's calls to the coordinator's job RPCs (coordinator.proto
// JoinJob, Checkpoint, GetJob, FinishJob, ReportProgress), with the waiting and
// retrying they need: joining waits out a recovery and a coordinator restart; a
// checkpoint is retried while the coordinator is unreachable (it is idempotent: same
// step, same attempt); a progress report never waits and is never retried (the next
// one supersedes it).
//
//   EMBER_ASSIGN_OR_RETURN(std::unique_ptr<JobClient> jobs, JobClient::Create(address));
//   v1::JoinJobRequest join;  join.set_job("ctr");  join.set_rank(0);  ...
//   EMBER_ASSIGN_OR_RETURN(v1::JoinJobResponse attempt, jobs->Join(join, JobClient::JoinWait{}));
//
// Thread-safety: all methods may be called concurrently.

#ifndef EMBER_WORKER_JOB_JOB_CLIENT_H_
#define EMBER_WORKER_JOB_JOB_CLIENT_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "grpcpp/security/credentials.h"

namespace ember::worker {

class JobClient {
 public:
  // INVALID_ARGUMENT for an empty address. Connects lazily.
  // `credentials` null: insecure (common/tls.h).
  static absl::StatusOr<std::unique_ptr<JobClient>> Create(
      const std::string& coordinator_address,
      std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr);

  // How Join waits, and what it says while it does.
  struct JoinWait {
    // Longest wait for an attempt to be ready (a recovery: shards coming back and
    // restoring a checkpoint). DEADLINE_EXCEEDED after it.
    absl::Duration timeout = absl::Minutes(10);
    // Longest wait for the first answer of a coordinator this client never reached:
    // a wrong address or a TLS mismatch does not fix itself. UNAVAILABLE after it, with
    // a TLS hint. A coordinator that answered once and then restarts is waited for
    // until `timeout`.
    absl::Duration unreachable_timeout = absl::Minutes(1);
    // Called with one line of what the join waits for: at once when it starts waiting
    // for something new, then every `report_every` while it still does. Null: silent.
    std::function<void(const std::string&)> report;
    absl::Duration report_every = absl::Seconds(10);
  };

  // Joins the job: repeats JoinJob (and retries an unreachable coordinator) until an
  // attempt is ready, within `wait`. The coordinator's other errors (a superseded or
  // failed run, a bad rank) as they are.
  absl::StatusOr<v1::JoinJobResponse> Join(v1::JoinJobRequest request, const JoinWait& wait);

  // Runs a checkpoint, retrying UNAVAILABLE (the coordinator restarting) until
  // `timeout`.
  absl::StatusOr<v1::CheckpointManifest> Checkpoint(const v1::CheckpointRequest& request,
                                                    absl::Duration timeout);

  absl::StatusOr<v1::GetJobResponse> GetJob(const std::string& job, absl::Duration timeout);
  // Records the run's end (FinishJob), retrying UNAVAILABLE until `timeout`. ABORTED when
  // the attempt is no longer running (it was rolled back).
  absl::Status Finish(const v1::FinishJobRequest& request, absl::Duration timeout);

  // A worker other than rank 0, done with `attempt` of run `generation`: polls GetJob
  // until rank 0 recorded the run's end (OK), or the attempt was rolled back (ABORTED:
  // a newer attempt started, or the job is recovering; rejoin), the job failed or a
  // newer run superseded it (FAILED_PRECONDITION), or `timeout` passed
  // (DEADLINE_EXCEEDED, naming the last phase seen). An unreachable coordinator is
  // polled again until then.
  absl::Status AwaitFinished(const std::string& job, uint64_t generation, uint64_t attempt,
                             absl::Duration timeout);

  // Sends rank 0's progress (ReportProgress) without waiting for the answer, with
  // deadline `timeout`. Returns false, sending nothing, while the previous report is
  // still in flight after `wait_for_previous` (default: no wait): progress is advisory
  // and a training step never waits for it; the run's last report waits a little.
  bool ReportProgressAsync(const v1::ReportProgressRequest& request,
                           absl::Duration timeout = absl::Seconds(5),
                           absl::Duration wait_for_previous = absl::ZeroDuration());
  // Waits up to `timeout` for a report in flight; returns the answer to the last
  // report that finished (OK before any), DEADLINE_EXCEEDED while one is still in flight.
  absl::Status AwaitProgressReport(absl::Duration timeout) const;

  // Waits (bounded by the report's deadline) for a report in flight.
  ~JobClient();

 private:
  JobClient(std::unique_ptr<v1::CoordinatorService::Stub> stub, std::string address, bool tls)
      : stub_(std::move(stub)), address_(std::move(address)), tls_(tls) {}

  const std::unique_ptr<v1::CoordinatorService::Stub> stub_;
  const std::string address_;
  const bool tls_;

  // Shared with a report's callback, which may finish after ~JobClient stopped waiting
  // (it still holds the mutex when it signals).
  struct Progress {
    mutable absl::Mutex mu;
    bool in_flight ABSL_GUARDED_BY(mu) = false;
    absl::Status status ABSL_GUARDED_BY(mu);
  };
  const std::shared_ptr<Progress> progress_ = std::make_shared<Progress>();
};

}  // namespace ember::worker

#endif  // EMBER_WORKER_JOB_JOB_CLIENT_H_
