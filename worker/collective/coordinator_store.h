// Copyright 2026 The Ember Authors.
//
// CoordinatorStore: a gloo::rendezvous::Store over the coordinator's key-value store
// (CoordinatorService KvPut/KvGet), so Gloo's connectFullMesh can exchange addresses
// between workers on different machines. Private to worker/collective.
//
// Every key is stored as `prefix + key`. Every call ends by the store's deadline: RPCs
// carry it, waits are KvGets with wait_ms up to it, and an unreachable coordinator is
// retried (backoff) until it. Values larger than one coordinator value (64 KiB) are split
// over several keys, the head written last, so a reader never sees half a value.
//
// Gloo's Store interface can only report errors by throwing: the virtual methods throw
// StoreError carrying the absl::Status, which the collective's single translation
// helper turns back into the status. The Status-returning methods never throw.
//
// Thread-safety: one thread at a time.

#ifndef EMBER_WORKER_COLLECTIVE_COORDINATOR_STORE_H_
#define EMBER_WORKER_COLLECTIVE_COORDINATOR_STORE_H_

#include <chrono>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "gloo/rendezvous/store.h"
#include "grpcpp/channel.h"

namespace ember::worker {

// Thrown by CoordinatorStore's gloo::rendezvous::Store methods; never leaves
// worker/collective.
class StoreError : public std::runtime_error {
 public:
  explicit StoreError(absl::Status status)
      : std::runtime_error(status.ToString()), status_(std::move(status)) {}
  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
};

class CoordinatorStore final : public gloo::rendezvous::Store {
 public:
  // The largest value one coordinator key holds (KvPut's limit).
  static constexpr size_t kMaxValueBytes = 64 * 1024;

  // `channel` reaches the coordinator at `address` (named in errors). REQUIRES:
  // `prefix + key` plus a few bytes stays within the coordinator's 256-byte key limit.
  CoordinatorStore(std::shared_ptr<grpc::Channel> channel, std::string address, std::string prefix,
                   absl::Time deadline);

  // Stores `value` under `key` (overwrites). UNAVAILABLE when the coordinator could not
  // be reached before the deadline; DEADLINE_EXCEEDED when the deadline passed during
  // a call; the coordinator's error otherwise (e.g. INVALID_ARGUMENT for a long key).
  absl::Status Set(const std::string& key, absl::string_view value);

  // Waits until `key` exists (or min(deadline, the store's deadline) passes) and returns
  // its value. DEADLINE_EXCEEDED naming the key when it did not appear in time;
  // UNAVAILABLE as for Set.
  absl::StatusOr<std::string> Get(const std::string& key, absl::Time deadline);

  // Whether `key` exists now (no waiting). Calls end by `deadline`, which may be after
  // the store's deadline (used to diagnose a rendezvous that timed out).
  absl::StatusOr<bool> Contains(const std::string& key, absl::Time deadline);

  // gloo::rendezvous::Store. Throw StoreError on failure. wait() fetches the values
  // (get() then answers from them without another RPC); its timeout is capped by the
  // store's deadline.
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  // One KvPut of the full key, retried on UNAVAILABLE until the store's deadline.
  absl::Status Put(const std::string& full_key, std::string value);
  // KvGet of the full key, waiting until `deadline` for it to appear; retried on
  // UNAVAILABLE. `deadline` may pass the store's deadline only for Contains.
  absl::StatusOr<std::string> Fetch(const std::string& full_key, absl::Time deadline, bool wait);

  const std::unique_ptr<v1::CoordinatorService::Stub> stub_;
  const std::string address_;
  const std::string prefix_;
  const absl::Time deadline_;
  std::map<std::string, std::string> fetched_;  // key (without prefix) -> value, by wait()
};

}  // namespace ember::worker

#endif  // EMBER_WORKER_COLLECTIVE_COORDINATOR_STORE_H_
