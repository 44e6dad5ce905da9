// Copyright 2026 The Ember Authors.

#include "server/ps/shard_agent.h"
#include "common/keepalive.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/admin_auth.h"
#include "common/cluster_token.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/tls.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "server/shared/slot_owners.h"

namespace ember {

ShardAgent::ShardAgent(ShardAgentOptions options, SlotMapCallback on_slot_map,
                       CreateTableCallback create_table, VersionCallback version,
                       HotKeysCallback hot_keys, HotSetCallback on_hot_set)
    : options_(std::move(options)),
      on_slot_map_(std::move(on_slot_map)),
      create_table_(std::move(create_table)),
      version_(std::move(version)),
      hot_keys_(std::move(hot_keys)),
      on_hot_set_(std::move(on_hot_set)) {}

ShardAgent::~ShardAgent() { Stop(); }

absl::Status ShardAgent::Start() {
  if (thread_.joinable() || stop_.HasBeenNotified()) {
    return absl::FailedPreconditionError("shard agent already started");
  }
  if (options_.coordinator_address.empty()) {
    return absl::InvalidArgumentError("shard agent: empty coordinator address");
  }
  if (options_.advertised_address.empty()) {
    return absl::InvalidArgumentError("shard agent: empty advertised address");
  }
  if (options_.heartbeat_interval <= absl::ZeroDuration() ||
      options_.rpc_timeout <= absl::ZeroDuration() ||
      options_.initial_backoff <= absl::ZeroDuration() ||
      options_.max_backoff < options_.initial_backoff) {
    return absl::InvalidArgumentError("shard agent: bad heartbeat, timeout or backoff durations");
  }
  if (!on_slot_map_ || !create_table_) {
    return absl::InvalidArgumentError("shard agent: missing callback");
  }
  // gRPC's default reconnect backoff grows to 120 s; keep it near our own retry pace so
  // a restarted coordinator is found again within a couple of heartbeats.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              static_cast<int>(absl::ToInt64Milliseconds(options_.max_backoff)));
  SetClientKeepalive(&args);
  // The admin token proves to a TLS coordinator that this is a shard (RegisterShard),
  // the cluster token to a plaintext one.
  stub_ = v1::CoordinatorService::NewStub(grpc::experimental::CreateCustomChannelWithInterceptors(
      options_.coordinator_address, OrInsecure(options_.channel_credentials), args,
      AdminAndClusterTokenInterceptors(options_.admin_token, options_.cluster_token)));
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void ShardAgent::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

bool ShardAgent::WaitForEpoch(uint64_t min_epoch, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto reached = [this, min_epoch]()
                     ABSL_SHARED_LOCKS_REQUIRED(mu_) { return epoch_ >= min_epoch; };
  return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

uint64_t ShardAgent::epoch() const {
  absl::MutexLock lock(&mu_);
  return epoch_;
}

bool ShardAgent::connected() const {
  absl::MutexLock lock(&mu_);
  return connected_;
}

uint64_t ShardAgent::hot_set_version() const {
  absl::MutexLock lock(&mu_);
  return hot_set_version_;
}

void ShardAgent::Loop() {
  absl::Duration delay = absl::ZeroDuration();
  absl::Duration backoff = options_.initial_backoff;
  while (!stop_.WaitForNotificationWithTimeout(delay)) {
    if (!registered_) {
      const absl::Status status = Register();
      SetConnected(status.ok(), status);
      if (status.ok()) {
        registered_ = true;
        backoff = options_.initial_backoff;
        delay = options_.heartbeat_interval;
      } else {
        delay = backoff;
        backoff = std::min(backoff * 2, options_.max_backoff);
      }
      continue;
    }
    const absl::Status status = Heartbeat();
    SetConnected(status.ok(), status);
    if (absl::IsNotFound(status)) {
      registered_ = false;  // the coordinator does not know us: register again now
      delay = absl::ZeroDuration();
    } else {
      delay = options_.heartbeat_interval;
    }
  }
}

absl::Status ShardAgent::Register() {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  v1::RegisterShardRequest request;
  request.set_shard_id(options_.shard_id);
  request.set_address(options_.advertised_address);
  request.set_incarnation(options_.incarnation);
  v1::RegisterShardResponse response;
  const absl::Status status =
      FromGrpcStatus(stub_->RegisterShard(&context, request, &response), &context);
  if (!status.ok()) return status;
  Apply(response.assigned() ? response.epoch() : 0, response.slot_owners(), response.tables(),
        response.job_tables());
  return absl::OkStatus();
}

absl::Status ShardAgent::Heartbeat() {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  v1::HeartbeatRequest request;
  request.set_shard_id(options_.shard_id);
  request.set_epoch(epoch());
  request.set_table_count(static_cast<uint32_t>(applied_tables_.size()));
  if (version_) request.set_version(version_());
  request.set_incarnation(options_.incarnation);
  if (hot_keys_) *request.mutable_hot_keys() = hot_keys_();
  const uint64_t hot_set_version = this->hot_set_version();
  request.set_hot_set_version(hot_set_version);
  v1::HeartbeatResponse response;
  const absl::Status status =
      FromGrpcStatus(stub_->Heartbeat(&context, request, &response), &context);
  if (!status.ok()) return status;
  Apply(response.slot_owners().empty() ? 0 : response.epoch(), response.slot_owners(),
        response.tables(), response.job_tables());
  // After the map and tables: the hot set names owners and tables.
  if (on_hot_set_ && response.hot_set().version() > hot_set_version) {
    on_hot_set_(response.hot_set());
    EMBER_LOG(INFO) << "shard agent: shard " << options_.shard_id << " applied hot set version "
                    << response.hot_set().version();
    absl::MutexLock lock(&mu_);
    hot_set_version_ = response.hot_set().version();
  }
  return absl::OkStatus();
}

void ShardAgent::ApplyTable(const std::string& job, const v1::TableConfig& config) {
  // Job names have no '/': "job/name" names a job's table, "name" a shared one.
  const std::string key = job.empty() ? config.name() : absl::StrCat(job, "/", config.name());
  if (applied_tables_.contains(key)) return;
  const absl::Status status = create_table_(job, config);
  if (status.ok()) {
    applied_tables_.insert(key);
    EMBER_LOG(INFO) << "shard agent: table " << key << " created";
  } else {
    EMBER_LOG(ERROR) << "shard agent: cannot create table " << key << ": " << status;
  }
}

void ShardAgent::Apply(uint64_t epoch, const std::string& slot_owners,
                       const google::protobuf::RepeatedPtrField<v1::TableConfig>& tables,
                       const google::protobuf::RepeatedPtrField<v1::JobTables>& job_tables) {
  // Tables first: once the new map is installed, calls for the tables may arrive.
  for (const v1::TableConfig& config : tables) ApplyTable("", config);
  for (const v1::JobTables& of_job : job_tables) {
    for (const v1::TableConfig& config : of_job.tables()) ApplyTable(of_job.job(), config);
  }
  if (epoch == 0 || epoch <= this->epoch()) return;
  absl::StatusOr<SlotMap> map = UnpackSlotOwners(slot_owners, epoch);
  if (!map.ok()) {
    EMBER_LOG(ERROR) << "shard agent: bad slot map from coordinator: " << map.status();
    return;
  }
  on_slot_map_(*map);
  EMBER_LOG(INFO) << "shard agent: shard " << options_.shard_id << " now at epoch " << epoch
                  << " with " << map->SlotsOf(options_.shard_id).size() << " slots";
  absl::MutexLock lock(&mu_);
  epoch_ = epoch;
}

void ShardAgent::SetConnected(bool connected, const absl::Status& why) {
  bool changed = false;
  {
    absl::MutexLock lock(&mu_);
    changed = connected_ != connected;
    connected_ = connected;
  }
  if (!changed) return;
  if (connected) {
    EMBER_LOG(INFO) << "shard agent: connected to coordinator " << options_.coordinator_address;
  } else {
    EMBER_LOG(WARNING) << "shard agent: coordinator " << options_.coordinator_address
                       << " unreachable, serving with epoch " << epoch() << ": " << why;
  }
}

absl::Status ShardAgent::Leave(absl::Time deadline) {
  if (stub_ == nullptr) return absl::FailedPreconditionError("shard agent not started");
  v1::LeaveClusterRequest request;
  request.set_shard_id(options_.shard_id);
  request.set_incarnation(options_.incarnation);
  v1::LeaveClusterResponse last;
  bool answered = false;
  absl::Status last_error;
  std::string logged;
  while (true) {
    grpc::ClientContext context;
    context.set_deadline(
        absl::ToChronoTime(std::min(deadline, absl::Now() + options_.rpc_timeout)));
    v1::LeaveClusterResponse response;
    const absl::Status status =
        FromGrpcStatus(stub_->LeaveCluster(&context, request, &response), &context);
    if (status.ok()) {
      if (response.done()) return absl::OkStatus();
      last = response;
      answered = true;
      // One line per change of what the drain waits for, not one per poll.
      const std::string line =
          absl::StrCat(response.owned_slots(), " slots left: ", response.detail());
      if (line != logged) {
        EMBER_LOG(INFO) << "shard agent: leaving, " << line;
        logged = line;
      }
    } else if (absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status)) {
      last_error = status;  // the coordinator is away: ask again
    } else {
      return status;  // refused
    }
    if (absl::Now() + options_.heartbeat_interval >= deadline) break;
    absl::SleepFor(options_.heartbeat_interval);
  }
  if (!answered) {
    return absl::DeadlineExceededError(absl::StrCat(
        "the coordinator did not answer LeaveCluster in time: ", last_error.ToString()));
  }
  return absl::DeadlineExceededError(absl::StrCat("shard ", options_.shard_id, " still owns ",
                                                  last.owned_slots(), " slots (", last.detail(),
                                                  ")"));
}

}  // namespace ember
