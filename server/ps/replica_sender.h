// Copyright 2026 The Ember Authors.
//
// ReplicaSender: the owner side's transport for PsService.PutReplicas. Send never
// blocks: it starts an async gRPC call and returns; a failed attempt is retried with
// exponential backoff (a timer thread starts the next attempt) until the copy's
// deadline, then `done` gets the last error. That lets a Push reactor wait for its
// copies without holding a gRPC callback thread (two shards copying to each other
// must never wait on each other's threads).
//
//   ReplicaSender sender({});
//   sender.Send(/*holder=*/2, "10.0.0.2:7000", request, absl::Now() + absl::Seconds(5),
//               [](absl::Status s) { ... });   // called exactly once
//
// Retried: UNAVAILABLE, DEADLINE_EXCEEDED of one attempt, RESOURCE_EXHAUSTED, NOT_FOUND
// (the holder may not have the table yet), INTERNAL and UNKNOWN (a broken
// connection). Not retried: INVALID_ARGUMENT, ABORTED (the holder serves another job
// attempt), FAILED_PRECONDITION and the rest. Each attempt has its own deadline
// (attempt_timeout, at most the copy's deadline).
//
// `done` runs on a gRPC callback thread or the timer thread, never inside Send: it
// must not block.
//
// Thread-safety: all methods may be called concurrently. The destructor fails pending
// retries with CANCELLED and waits for calls in flight (each bounded by its attempt
// deadline).

#ifndef EMBER_SERVER_PS_REPLICA_SENDER_H_
#define EMBER_SERVER_PS_REPLICA_SENDER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "ember/v1/ps.grpc.pb.h"
#include "grpcpp/security/credentials.h"

namespace ember {

struct ReplicaSenderOptions {
  // Deadline of one attempt (capped by the copy's deadline). Default: 2 s.
  absl::Duration attempt_timeout = absl::Seconds(2);
  // Backoff between attempts: starts here, doubles up to max_backoff.
  // Default: 10 ms, 500 ms.
  absl::Duration initial_backoff = absl::Milliseconds(10);
  absl::Duration max_backoff = absl::Milliseconds(500);
  // Largest message to a holder. Default: 256 MiB.
  int max_message_bytes = 256 << 20;
  // The admin token (common/admin_auth.h) sent with every call: holders that require
  // one refuse PutReplicas without it. Default: none.
  std::string admin_token;
  // Credentials of the channels to holders (common/tls.h); null: insecure.
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials;
};

class ReplicaSender {
 public:
  using Done = std::function<void(absl::Status)>;
  // Called after every attempt with whether it succeeded (metrics); may be null.
  using AttemptObserver = std::function<void(bool ok, const v1::PutReplicasRequest& request)>;

  explicit ReplicaSender(const ReplicaSenderOptions& options, AttemptObserver observer = nullptr);
  ~ReplicaSender();

  ReplicaSender(const ReplicaSender&) = delete;
  ReplicaSender& operator=(const ReplicaSender&) = delete;

  // Sends `request` to holder `holder` at `address` (see above). The error given to
  // `done` names the holder and its address. After the destructor started, `done`
  // gets CANCELLED at once.
  void Send(uint32_t holder, const std::string& address,
            std::shared_ptr<const v1::PutReplicasRequest> request, absl::Time deadline, Done done);

 private:
  struct Call;
  struct State;  // shared with the calls' callbacks, so it outlives every one of them

  static void Start(const std::shared_ptr<State>& state, std::shared_ptr<Call> call);
  static void Finished(const std::shared_ptr<State>& state, std::shared_ptr<Call> call,
                       const absl::Status& status);
  static void TimerLoop(const std::shared_ptr<State>& state);

  const std::shared_ptr<State> state_;
  std::thread timer_;
};

}  // namespace ember

#endif  // EMBER_SERVER_PS_REPLICA_SENDER_H_
