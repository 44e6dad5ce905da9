// Copyright 2026 The Ember Authors.
//
// Collective: the CPU collectives of a training job's workers (Gloo over TCP), with
// the rendezvous done through the coordinator's key-value store (KvPut/KvGet), not a
// shared file, so workers on different machines find each other.
//
//   CollectiveOptions options;
//   options.coordinator_address = "127.0.0.1:6000";
//   options.job = "ctr";  options.generation = 0;
//   options.rank = 1;  options.world_size = 2;
//   absl::StatusOr<std::unique_ptr<Collective>> c = Collective::Connect(options);
//   EMBER_RETURN_IF_ERROR((*c)->AllReduceSum(absl::MakeSpan(gradients)));
//
// Every operation is deterministic: for the same inputs every rank gets bitwise the
// same result on every run with the same world_size (fixed reduction order). Every
// operation has a deadline (options.timeout): a dead or stuck peer makes it fail with
// DEADLINE_EXCEEDED or UNAVAILABLE naming the operation, never hang. (The timeout bounds
// each wait inside an operation: an operation fails at most `timeout` after its last
// progress. A peer that closed its connections is noticed at once: UNAVAILABLE.) After
// an error the collective is broken: it closes its connections (so its peers fail fast
// too) and every later call fails with FAILED_PRECONDITION; a job reconnects with a new
// generation.
// Gloo's exceptions are translated to absl::Status in this module only. Gloo's TCP
// writes could raise SIGPIPE when a peer vanishes; every Gloo call runs with SIGPIPE
// blocked in the calling thread (and Gloo's event-loop thread), so the process's
// SIGPIPE disposition is left alone.
//
// Rendezvous: rank r publishes its addresses under "rdzv/<job>/<generation>/gloo/rank_<r>"
// in the coordinator (values over 64 KiB split over several keys) and reads every other
// rank's. Keys are never deleted, so a generation must not be reused.
//
// Thread-safety: one operation at a time (callers serialize). Every rank must issue the
// same sequence of operations.

#ifndef EMBER_WORKER_COLLECTIVE_COLLECTIVE_H_
#define EMBER_WORKER_COLLECTIVE_COLLECTIVE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "grpcpp/security/credentials.h"

namespace ember::worker {

struct CollectiveOptions {
  // The coordinator whose KvPut/KvGet hold the rendezvous. Required when world_size > 1.
  std::string coordinator_address;
  // Credentials of the coordinator channel (common/tls.h); null: insecure. Gloo's own
  // TCP connections between workers are not encrypted (see docs/SECURITY.md).
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials;
  // The cluster token (common/cluster_token.h), sent with the rendezvous KvPut: a
  // plaintext coordinator with one requires it. Default: none.
  std::string cluster_token;
  // Job name and generation: rendezvous keys are "rdzv/<job>/<generation>/...", so a
  // restarted job (new generation) never meets stale entries. Default: "ember", 0.
  std::string job = "ember";
  uint64_t generation = 0;
  int rank = 0;        // 0 <= rank < world_size
  int world_size = 1;  // >= 1; 1 needs no coordinator and no network
  // The local address peers connect to (Gloo TCP device hostname): a name or a numeric
  // address of this machine. Default: loopback.
  std::string host = "127.0.0.1";
  // Deadline of the rendezvous and of every operation; finite, >= 1 ms. Default: 60 s.
  absl::Duration timeout = absl::Seconds(60);
};

class Collective {
 public:
  // Rendezvous with the other ranks and connect the full mesh. INVALID_ARGUMENT for
  // bad options (including a job name outside [A-Za-z0-9._-]{1,128} and a host that does
  // not resolve to an address of this machine); DEADLINE_EXCEEDED when not every rank
  // showed up within the timeout (naming the missing ranks when it can tell); UNAVAILABLE
  // when the coordinator could not be reached before the timeout (it is retried until
  // then). world_size 1 needs neither coordinator nor network.
  static absl::StatusOr<std::unique_ptr<Collective>> Connect(const CollectiveOptions& options);
  virtual ~Collective() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // In-place elementwise sum over ranks; every rank gets the same bits. The first call
  // with a given data.size() checks that every rank passes that size (one extra small
  // exchange): INVALID_ARGUMENT on every rank when they differ, and the collective stays
  // usable. Empty data: OK, nothing is summed.
  virtual absl::Status AllReduceSum(absl::Span<float> data) = 0;
  // Returns when every rank has called it (or fails on the deadline).
  virtual absl::Status Barrier() = 0;
  // Personalized all-to-all of byte strings: send[j] goes to rank j (send.size() ==
  // world_size; send[rank] is returned to self); returns recv with recv[j] = what rank
  // j sent to this rank. Sizes may differ per pair, including 0. INVALID_ARGUMENT (the
  // collective stays usable) when send.size() != world_size.
  virtual absl::StatusOr<std::vector<std::string>> AllToAll(
      const std::vector<std::string>& send) = 0;
};

}  // namespace ember::worker

#endif  // EMBER_WORKER_COLLECTIVE_COLLECTIVE_H_
