// Copyright 2026 The Ember Authors.
//
// ServingCluster (serving_cluster.h): the processes of the `serving` suite.

#include "tools/bench/serving_cluster.h"

#include <filesystem>
#include <system_error>

#include "common/status_macros.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace ember::bench::serving {

ServingCluster::~ServingCluster() {
  if (serving != nullptr) serving->Stop(absl::Seconds(5)).IgnoreError();
  for (auto& p : ps) p->Kill().IgnoreError();
  if (coordinator != nullptr) coordinator->Stop(absl::Seconds(5)).IgnoreError();
}

absl::StatusOr<std::unique_ptr<Process>> ServingCluster::Spawn(
    const std::string& name, const std::vector<std::string>& args) {
  return Process::Start(absl::StrCat(bin, "/", name), args, "listening on ", kStartTimeout);
}

// The coordinator and shards 0 and 1, once both serve the first slot map.
absl::Status ServingCluster::Start() {
  const std::string checkpoints = absl::StrCat(dir, "/checkpoints");
  std::error_code ec;
  std::filesystem::create_directories(checkpoints, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("mkdir ", checkpoints, ": ", ec.message()));
  EMBER_ASSIGN_OR_RETURN(
      coordinator, Spawn("ember-coordinator",
                         {absl::StrCat("--data_dir=", dir, "/coord"), "--port=0",
                          "--expected_shards=2", absl::StrCat("--checkpoint_dir=", checkpoints)}));
  for (int id = 0; id < 2; ++id) {
    EMBER_ASSIGN_OR_RETURN(
        std::unique_ptr<Process> p,
        Spawn("ember-ps", {absl::StrCat("--data_dir=", dir, "/ps-", id), "--port=0",
                           absl::StrCat("--shard_id=", id),
                           absl::StrCat("--coordinator=", coordinator->ready_text()),
                           absl::StrCat("--memory_budget_mb=", kMemoryBudgetMb)}));
    ps_stubs.push_back(v1::PsService::NewStub(
        grpc::CreateChannel(p->ready_text(), grpc::InsecureChannelCredentials())));
    ps.push_back(std::move(p));
  }
  return PollUntil(
      [&]() -> absl::StatusOr<bool> {
        EMBER_ASSIGN_OR_RETURN(const std::vector<v1::GetShardInfoResponse> infos, ShardInfos());
        for (const auto& info : infos) {
          if (info.epoch() == 0) return false;
        }
        return true;
      },
      kStartTimeout, "shards 0 and 1 to serve the first slot map");
}

absl::Status ServingCluster::StartServing() {
  const std::string checkpoints = absl::StrCat(dir, "/checkpoints");  // the coordinator's
  EMBER_ASSIGN_OR_RETURN(
      serving, Spawn("ember-serving", {absl::StrCat("--coordinator=", coordinator->ready_text()),
                                       absl::StrCat("--checkpoint_dir=", checkpoints),
                                       absl::StrCat("--data_dir=", dir, "/serving"), "--port=0"}));
  serving_stub = v1::ServingService::NewStub(
      grpc::CreateChannel(serving->ready_text(), grpc::InsecureChannelCredentials()));
  return absl::OkStatus();
}

// GetShardInfo of each shard, in shard order.
absl::StatusOr<std::vector<v1::GetShardInfoResponse>> ServingCluster::ShardInfos() {
  std::vector<v1::GetShardInfoResponse> infos(ps_stubs.size());
  for (size_t i = 0; i < ps_stubs.size(); ++i) {
    EMBER_RETURN_IF_ERROR(Call([&](grpc::ClientContext* c) {
      return ps_stubs[i]->GetShardInfo(c, v1::GetShardInfoRequest(), &infos[i]);
    }));
  }
  return infos;
}

// The newest version of each shard, summed.
absl::StatusOr<uint64_t> ServingCluster::PsVersions() {
  EMBER_ASSIGN_OR_RETURN(const std::vector<v1::GetShardInfoResponse> infos, ShardInfos());
  uint64_t sum = 0;
  for (const auto& info : infos) sum += info.version();
  return sum;
}

absl::StatusOr<v1::ServingStatus> ServingCluster::FollowerStatus() {
  v1::ServingStatus status;
  EMBER_RETURN_IF_ERROR(Call([&](grpc::ClientContext* c) {
    return serving_stub->GetServingStatus(c, v1::GetServingStatusRequest(), &status);
  }));
  return status;
}

// Waits until the follower is ready and has applied, on every shard, at least the
// version the shard had when the wait began.
absl::Status ServingCluster::WaitCaughtUp() {
  EMBER_ASSIGN_OR_RETURN(const std::vector<v1::GetShardInfoResponse> target, ShardInfos());
  return PollUntil(
      [&]() -> absl::StatusOr<bool> {
        EMBER_ASSIGN_OR_RETURN(const v1::ServingStatus status, FollowerStatus());
        if (!status.ready() || status.shards_size() != static_cast<int>(target.size())) {
          return false;
        }
        for (const v1::ShardFollowState& s : status.shards()) {
          if (s.shard_id() >= target.size() ||
              s.applied_version() < target[s.shard_id()].version()) {
            return false;
          }
        }
        return true;
      },
      kCatchUpBound, "the follower to apply every shard's newest version");
}

// "train"'s (rows, digest) on the follower.
absl::StatusOr<PsClient::TableDigest> ServingCluster::FollowerDigest() {
  v1::ChecksumRequest request;
  request.set_table(kTable);
  v1::ChecksumResponse response;
  EMBER_RETURN_IF_ERROR(
      Call([&](grpc::ClientContext* c) { return serving_stub->Checksum(c, request, &response); }));
  if (response.tables_size() != 1) return absl::InternalError("follower Checksum: no table");
  return PsClient::TableDigest{response.tables(0).rows(), response.tables(0).digest()};
}

}  // namespace ember::bench::serving
