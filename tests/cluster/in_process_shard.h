// Copyright 2026 The Ember Authors.
//
// InProcessShard: one PS shard hosted in a test's process: a real PsServiceImpl over
// its own RocksDB (ShardStorage) behind its own gRPC server on an ephemeral loopback
// port, so that clients reach it over gRPC while the test calls its Do* handlers
// directly (slot maps installed on one shard at a time, hot sets, checksums).
//
//   absl::StatusOr<InProcessShard> shard = InProcessShard::Start(dir, 0, map, options);
//   ... shard->address, shard->stub, shard->service->DoInstallSlotMap(...) ...
//   EXPECT_TRUE(shard->Stop().ok());

#ifndef EMBER_TESTS_CLUSTER_IN_PROCESS_SHARD_H_
#define EMBER_TESTS_CLUSTER_IN_PROCESS_SHARD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/slot_map.h"
#include "ember/v1/ps.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "prometheus/registry.h"
#include "server/ps/ps_metrics.h"
#include "server/ps/ps_service.h"
#include "server/shared/shard_storage.h"

namespace ember {

struct InProcessShard {
  std::unique_ptr<prometheus::Registry> registry;
  std::unique_ptr<PsMetrics> metrics;
  std::unique_ptr<ShardStorage> storage;
  std::unique_ptr<PsServiceImpl> service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1::PsService::Stub> stub;
  std::string address;  // 127.0.0.1:port

  // Opens <dir>/shard-<id> with a memory tier of `memory_budget_bytes`, makes the
  // service under `map`, lets `configure` set it up (checkpoints, hot keys; may be
  // null) and starts serving.
  static absl::StatusOr<InProcessShard> Start(
      const std::string& dir, uint32_t id, const SlotMap& map, int64_t memory_budget_bytes,
      const std::function<void(PsServiceImpl&, ShardStorage&)>& configure = nullptr) {
    InProcessShard shard;
    ShardStorageOptions options;
    options.rocksdb.path = absl::StrCat(dir, "/shard-", id);
    options.store.memory_budget_bytes = memory_budget_bytes;
    absl::StatusOr<std::unique_ptr<ShardStorage>> storage = ShardStorage::Open(options);
    if (!storage.ok()) return storage.status();
    shard.storage = std::move(*storage);
    shard.registry = std::make_unique<prometheus::Registry>();
    shard.metrics = std::make_unique<PsMetrics>(*shard.registry);
    shard.service = std::make_unique<PsServiceImpl>(
        shard.storage->store(), id, map, PsServiceImpl::kDefaultDedupWindow, shard.metrics.get());
    if (configure) configure(*shard.service, *shard.storage);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(shard.service.get());
    shard.server = builder.BuildAndStart();
    if (shard.server == nullptr || port == 0) {
      return absl::UnavailableError(absl::StrCat("shard ", id, ": cannot serve on 127.0.0.1"));
    }
    shard.address = absl::StrCat("127.0.0.1:", port);
    shard.stub = v1::PsService::NewStub(
        grpc::CreateChannel(shard.address, grpc::InsecureChannelCredentials()));
    return shard;
  }

  // Stops serving (5 s for calls in flight), then closes the store.
  absl::Status Stop() {
    if (server == nullptr) return absl::OkStatus();
    server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    server.reset();
    service.reset();
    return storage->Close();
  }
};

}  // namespace ember

#endif  // EMBER_TESTS_CLUSTER_IN_PROCESS_SHARD_H_
