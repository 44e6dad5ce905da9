// Copyright 2026 The Ember Authors.
//
// Test helpers for ember-serving: start a follower process of a cluster and ask it
// for its status and row digests (header-only; tests define EMBER_SERVING_BINARY).
//
//   std::unique_ptr<Process> f = StartServing(coordinator, checkpoints, dir + "/f1");
//   auto stub = ServingStub(*f);
//   EXPECT_EQ(ServingDigests(*stub), shard_digests);

#ifndef EMBER_TESTS_SERVING_SERVING_CLIENT_H_
#define EMBER_TESTS_SERVING_SERVING_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "ember/v1/serving.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/support/local_cluster.h"
#include "tools/harness/process.h"

namespace ember {

// table -> (rows, digest), as ChecksumResponse reports them.
using TableDigests = std::map<std::string, std::pair<uint64_t, uint64_t>>;

// Starts ember-serving on an ephemeral port with `data_dir`, positions persisted every
// `persist_ms`, plus `extra` flags; waits for its "listening on" line. Null (and a test
// failure) if it did not start.
inline std::unique_ptr<Process> StartServing(const std::string& coordinator,
                                             const std::string& checkpoint_dir,
                                             const std::string& data_dir, int persist_ms,
                                             const std::vector<std::string>& extra = {}) {
  std::vector<std::string> flags = {absl::StrCat("--checkpoint_dir=", checkpoint_dir),
                                    absl::StrCat("--persist_interval_ms=", persist_ms)};
  flags.insert(flags.end(), extra.begin(), extra.end());
  absl::StatusOr<std::unique_ptr<Process>> p =
      StartFollowerProcess(EMBER_SERVING_BINARY, coordinator, data_dir, flags);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? std::move(*p) : nullptr;
}

inline std::unique_ptr<v1::ServingService::Stub> ServingStub(const Process& p) {
  return v1::ServingService::NewStub(
      grpc::CreateChannel(p.ready_text(), grpc::InsecureChannelCredentials()));
}

// GetServingStatus (an empty status if the call fails).
inline v1::ServingStatus ServingStatusOf(v1::ServingService::Stub& stub) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ServingStatus status;
  stub.GetServingStatus(&context, v1::GetServingStatusRequest(), &status);
  return status;
}

// The follower's per-table row count and digest (a test failure if the call fails).
inline TableDigests ServingDigests(v1::ServingService::Stub& stub) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::ChecksumResponse response;
  const grpc::Status status = stub.Checksum(&context, v1::ChecksumRequest(), &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  TableDigests out;
  for (const auto& t : response.tables()) out[t.table()] = {t.rows(), t.digest()};
  return out;
}

}  // namespace ember

#endif  // EMBER_TESTS_SERVING_SERVING_CLIENT_H_
