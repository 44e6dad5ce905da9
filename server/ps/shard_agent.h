// Copyright 2026 The Ember Authors.
//
// ShardAgent: the PS shard's side of the coordinator protocol (coordinator.proto).
// On its own thread it registers the shard (retrying with exponential backoff until
// the coordinator answers), then heartbeats every `heartbeat_interval`. Whatever the
// coordinator sends back is applied through the callbacks: a newer slot map
// (on_slot_map, e.g. PsServiceImpl::SetSlotMap), tables the shard lacks
// (create_table, e.g. PsServiceImpl::DoCreateTable) and a newer hot set (on_hot_set,
// e.g. PsServiceImpl::ApplyHotSet). Each heartbeat carries the shard's heavy hitters
// (hot_keys, e.g. PsServiceImpl::HotKeyReport) and the hot set version it applied.
//
// The coordinator is not on the data path: while it is unreachable the agent keeps the
// last applied map (the shard keeps serving with it) and retries; when the
// coordinator answers NOT_FOUND (it lost the shard) the agent registers again.
//
//   ShardAgentOptions options;
//   options.coordinator_address = "127.0.0.1:6000";
//   options.shard_id = 3;
//   options.advertised_address = "10.0.0.3:7000";
//   ShardAgent agent(options,
//                    [&](const SlotMap& map) { service.SetSlotMap(map); },
//                    [&](const v1::TableConfig& config) { return CreateLocally(config); });
//   agent.Start();
//   ...
//   agent.Stop();  // prompt: wakes the agent thread, joins it
//
// Every RPC has the deadline rpc_timeout. Callbacks run on the agent thread, one at a
// time, never with an agent lock held.
//
// Thread-safety: Start and Stop from one thread; the accessors from any thread.

#ifndef EMBER_SERVER_PS_SHARD_AGENT_H_
#define EMBER_SERVER_PS_SHARD_AGENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/slot_map.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "ember/v1/hotkeys.pb.h"
#include "ember/v1/table.pb.h"
#include "grpcpp/security/credentials.h"

namespace ember {

struct ShardAgentOptions {
  // host:port of the coordinator. Required.
  std::string coordinator_address;
  // This shard's id. Default: 0
  uint32_t shard_id = 0;
  // host:port where this shard's PsService is reachable by clients. Required.
  std::string advertised_address;
  // Time between heartbeats. Default: 500 ms
  absl::Duration heartbeat_interval = absl::Milliseconds(500);
  // Deadline of every coordinator RPC. Default: 2 s
  absl::Duration rpc_timeout = absl::Seconds(2);
  // Registration retry backoff: starts at initial_backoff, doubles up to max_backoff.
  // Default: 100 ms, 2 s
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(2);
  // This shard process's incarnation (PsServiceImpl::incarnation()), sent with every
  // registration and heartbeat so the coordinator sees a restart. Default: 0 (unknown)
  uint64_t incarnation = 0;
  // Credentials of the coordinator channel (common/tls.h); null: insecure.
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials;
  // The admin token sent with every coordinator call (a TLS coordinator requires an
  // admin credential of RegisterShard). Default: none
  std::string admin_token;
  // The cluster token sent with every coordinator call (a plaintext coordinator with
  // --cluster_token_file requires it of RegisterShard and Heartbeat). Default: none
  std::string cluster_token;
};

class ShardAgent {
 public:
  using SlotMapCallback = std::function<void(const SlotMap&)>;
  // Creates a table: a shared one (`job` empty) or one of that job's own, in the job's
  // store (coordinator.proto JobTables).
  using CreateTableCallback =
      std::function<absl::Status(const std::string& job, const v1::TableConfig&)>;
  // Optional: the shard's newest applied update version, reported in heartbeats.
  using VersionCallback = std::function<uint64_t()>;
  // Optional: the shard's heavy hitters, called for each heartbeat (HeartbeatRequest.
  // hot_keys).
  using HotKeysCallback = std::function<v1::HotKeyReport()>;
  // Optional: called with each hot set newer than the last one applied (versions only
  // grow). Without it the agent reports hot set version 0 and ignores hot sets.
  using HotSetCallback = std::function<void(const v1::HotSet&)>;

  ShardAgent(ShardAgentOptions options, SlotMapCallback on_slot_map,
             CreateTableCallback create_table, VersionCallback version = nullptr,
             HotKeysCallback hot_keys = nullptr, HotSetCallback on_hot_set = nullptr);
  // Stop().
  ~ShardAgent();

  ShardAgent(const ShardAgent&) = delete;
  ShardAgent& operator=(const ShardAgent&) = delete;

  // Validates the options and starts the agent thread. INVALID_ARGUMENT for a missing
  // address or non-positive durations; FAILED_PRECONDITION if already started.
  absl::Status Start();
  // Stops the thread (an RPC in flight is abandoned within rpc_timeout at worst; the
  // sleep between RPCs ends at once). Idempotent.
  void Stop();

  // Waits until a slot map with epoch >= `min_epoch` has been applied or `timeout`
  // passes. Returns whether it was.
  bool WaitForEpoch(uint64_t min_epoch, absl::Duration timeout) const;
  // The epoch of the last applied map (0: none yet).
  uint64_t epoch() const;
  // Whether the last coordinator RPC succeeded.
  bool connected() const;
  // The version of the last hot set handed to on_hot_set (0: none yet).
  uint64_t hot_set_version() const;

  // Asks the coordinator to move this shard's slots away (CoordinatorService.LeaveCluster)
  // and waits until it owns none, asking again every heartbeat interval; heartbeats
  // go on meanwhile, so the shard stays alive and keeps serving. Returns OK once the
  // coordinator answers done; DEADLINE_EXCEEDED (naming the slots left and what the
  // drain waited for) at `deadline`; the coordinator's refusal (FAILED_PRECONDITION:
  // the last shard holding slots, an unknown shard or process) at once. An unreachable
  // coordinator is retried until the deadline. REQUIRES: Start() succeeded.
  absl::Status Leave(absl::Time deadline);

 private:
  void Loop();
  // One registration; applies what it returns.
  absl::Status Register();
  // One heartbeat; applies what it returns.
  absl::Status Heartbeat();
  // Applies a map (if newer than the applied one) and tables the shard lacks.
  void Apply(uint64_t epoch, const std::string& slot_owners,
             const google::protobuf::RepeatedPtrField<v1::TableConfig>& tables,
             const google::protobuf::RepeatedPtrField<v1::JobTables>& job_tables);
  // Creates one table of `job` (empty: shared) unless applied already.
  void ApplyTable(const std::string& job, const v1::TableConfig& config);
  void SetConnected(bool connected, const absl::Status& why);

  const ShardAgentOptions options_;
  const SlotMapCallback on_slot_map_;
  const CreateTableCallback create_table_;
  const VersionCallback version_;
  const HotKeysCallback hot_keys_;
  const HotSetCallback on_hot_set_;
  std::unique_ptr<v1::CoordinatorService::Stub> stub_;

  absl::Notification stop_;
  std::thread thread_;

  // Only the agent thread touches these.
  absl::flat_hash_set<std::string> applied_tables_;
  bool registered_ = false;

  mutable absl::Mutex mu_;
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  bool connected_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t hot_set_version_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ember

#endif  // EMBER_SERVER_PS_SHARD_AGENT_H_
