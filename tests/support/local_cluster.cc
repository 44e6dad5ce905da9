// Copyright 2026 The Ember Authors.

#include "tests/support/local_cluster.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "ember/v1/ps.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "tests/support/deadline.h"
#include "tests/support/eventually.h"

namespace ember {
namespace {

// The port of "HOST:PORT".
int PortOf(const std::string& address) { return std::stoi(address.substr(address.rfind(':') + 1)); }

}  // namespace

absl::StatusOr<std::unique_ptr<Process>> StartFollowerProcess(const std::string& binary,
                                                              const std::string& coordinator,
                                                              const std::string& data_dir,
                                                              const std::vector<std::string>& extra,
                                                              absl::Duration timeout) {
  std::vector<std::string> args = {absl::StrCat("--coordinator=", coordinator),
                                   absl::StrCat("--data_dir=", data_dir), "--port=0"};
  args.insert(args.end(), extra.begin(), extra.end());
  return Process::Start(binary, args, "listening on ", timeout);
}

LocalCluster::LocalCluster(LocalClusterOptions options) : options_(std::move(options)) {}

LocalCluster::~LocalCluster() {
  // Clients first, the coordinator last (Process's destructor kills and reaps).
  workers_.clear();
  followers_.clear();
  shards_.clear();
  coordinator_.reset();
}

absl::Status LocalCluster::StartInto(const std::string& kind, const std::string& binary,
                                     std::vector<std::string> args,
                                     const std::vector<std::string>& flags,
                                     const std::vector<std::string>& extra,
                                     const std::string& ready_prefix, absl::Duration timeout,
                                     std::unique_ptr<Process>* slot) {
  if (binary.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no ", kind, " binary: the test target lists none (ember_test BINARIES)"));
  }
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), extra.begin(), extra.end());
  // The old process, if any, is reaped before its successor starts (same port).
  slot->reset();
  absl::StatusOr<std::unique_ptr<Process>> p = Process::Start(binary, args, ready_prefix, timeout);
  if (!p.ok()) {
    return absl::Status(p.status().code(), absl::StrCat(kind, ": ", p.status().message()));
  }
  *slot = std::move(*p);
  return absl::OkStatus();
}

absl::Status LocalCluster::Start() {
  if (absl::Status s = StartCoordinator(); !s.ok()) return s;
  for (int i = 0; i < options_.shards; ++i) {
    if (absl::Status s = StartShard(i); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status LocalCluster::StartCoordinator(const std::vector<std::string>& extra) {
  absl::Status s = StartInto("ember-coordinator", options_.binaries.coordinator,
                             {absl::StrCat("--data_dir=", options_.dir, "/coordinator"),
                              absl::StrCat("--port=", coordinator_port_),
                              absl::StrCat("--expected_shards=", options_.shards)},
                             options_.coordinator_flags, extra, "listening on ",
                             options_.server_start_timeout, &coordinator_);
  if (!s.ok()) return s;
  coordinator_address_ = coordinator_->ready_text();
  coordinator_port_ = PortOf(coordinator_address_);
  return absl::OkStatus();
}

absl::Status LocalCluster::StartShardOnPort(int i, int port,
                                            const std::vector<std::string>& extra) {
  if (i < 0) return absl::InvalidArgumentError(absl::StrCat("shard ", i));
  if (coordinator_address_.empty()) {
    return absl::FailedPreconditionError("start the coordinator before the shards");
  }
  if (shards_.size() <= static_cast<size_t>(i)) {
    shards_.resize(i + 1);
    shard_addresses_.resize(i + 1);
  }
  absl::Status s = StartInto(
      absl::StrCat("ember-ps ", i), options_.binaries.ps,
      {absl::StrCat("--data_dir=", options_.dir, "/ps-", i), absl::StrCat("--port=", port),
       absl::StrCat("--shard_id=", i), absl::StrCat("--coordinator=", coordinator_address_)},
      options_.shard_flags, extra, "listening on ", options_.server_start_timeout, &shards_[i]);
  if (!s.ok()) return s;
  shard_addresses_[i] = shards_[i]->ready_text();
  return absl::OkStatus();
}

absl::Status LocalCluster::StartShard(int i, const std::vector<std::string>& extra) {
  return StartShardOnPort(i, 0, extra);
}

absl::Status LocalCluster::RestartShard(int i, const std::vector<std::string>& extra) {
  if (i < 0 || static_cast<size_t>(i) >= shard_addresses_.size() || shard_addresses_[i].empty()) {
    return absl::FailedPreconditionError(absl::StrCat("shard ", i, " never started"));
  }
  return StartShardOnPort(i, PortOf(shard_addresses_[i]), extra);
}

absl::Status LocalCluster::StartWorker(int rank, const std::vector<std::string>& extra) {
  if (rank < 0) return absl::InvalidArgumentError(absl::StrCat("rank ", rank));
  if (coordinator_address_.empty()) {
    return absl::FailedPreconditionError("start the coordinator before the workers");
  }
  if (workers_.size() <= static_cast<size_t>(rank)) workers_.resize(rank + 1);
  // An elastic worker (--workers=MIN:MAX) gets its rank from the coordinator.
  auto elastic = [](const std::vector<std::string>& flags) {
    return std::any_of(flags.begin(), flags.end(),
                       [](const std::string& f) { return f.rfind("--workers=", 0) == 0; });
  };
  std::vector<std::string> args = {absl::StrCat("--coordinator=", coordinator_address_)};
  if (!elastic(options_.worker_flags) && !elastic(extra)) {
    args.push_back(absl::StrCat("--rank=", rank));
  }
  return StartInto(absl::StrCat("ember-worker ", rank), options_.binaries.worker, std::move(args),
                   options_.worker_flags, extra, "worker ", options_.client_start_timeout,
                   &workers_[rank]);
}

absl::Status LocalCluster::StartFollower(int i, const std::vector<std::string>& extra) {
  if (i < 0) return absl::InvalidArgumentError(absl::StrCat("follower ", i));
  if (coordinator_address_.empty()) {
    return absl::FailedPreconditionError("start the coordinator before the followers");
  }
  if (options_.binaries.serving.empty()) {
    return absl::FailedPreconditionError(
        "no ember-serving binary: the test target lists none (ember_test BINARIES)");
  }
  if (followers_.size() <= static_cast<size_t>(i)) followers_.resize(i + 1);
  followers_[i].reset();
  std::vector<std::string> flags = options_.follower_flags;
  flags.insert(flags.end(), extra.begin(), extra.end());
  absl::StatusOr<std::unique_ptr<Process>> p = StartFollowerProcess(
      options_.binaries.serving, coordinator_address_, absl::StrCat(options_.dir, "/serving-", i),
      flags, options_.client_start_timeout);
  if (!p.ok()) {
    return absl::Status(p.status().code(),
                        absl::StrCat("ember-serving ", i, ": ", p.status().message()));
  }
  followers_[i] = std::move(*p);
  return absl::OkStatus();
}

std::string LocalCluster::shard_address(int i) const {
  return i >= 0 && static_cast<size_t>(i) < shard_addresses_.size() ? shard_addresses_[i] : "";
}

absl::Status LocalCluster::WaitForSlots(absl::Duration timeout) {
  if (coordinator_address_.empty()) {
    return absl::FailedPreconditionError("no coordinator was started");
  }
  auto coordinator = v1::CoordinatorService::NewStub(
      grpc::CreateChannel(coordinator_address_, grpc::InsecureChannelCredentials()));
  std::vector<std::unique_ptr<v1::PsService::Stub>> shards;
  for (size_t i = 0; i < shards_.size(); ++i) {
    shards.push_back(shards_[i] != nullptr && shards_[i]->running()
                         ? v1::PsService::NewStub(grpc::CreateChannel(
                               shard_addresses_[i], grpc::InsecureChannelCredentials()))
                         : nullptr);
  }
  uint64_t epoch = 0;
  const bool assigned = Eventually(
      [&] {
        grpc::ClientContext context;
        SetDeadline(&context);
        v1::GetClusterMapResponse map;
        if (!coordinator->GetClusterMap(&context, v1::GetClusterMapRequest(), &map).ok()) {
          return false;
        }
        epoch = map.epoch();
        if (epoch == 0) return false;
        for (const auto& stub : shards) {
          if (stub == nullptr) continue;
          grpc::ClientContext shard_context;
          SetDeadline(&shard_context);
          v1::GetShardInfoResponse info;
          if (!stub->GetShardInfo(&shard_context, v1::GetShardInfoRequest(), &info).ok() ||
              info.epoch() != epoch) {
            return false;
          }
        }
        return true;
      },
      timeout);
  if (assigned) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat("the cluster did not assign slots within ",
                                                  absl::FormatDuration(timeout),
                                                  " (last map epoch ", epoch, ")"));
}

absl::Status LocalCluster::StopAll(absl::Duration grace) {
  absl::Status first;
  auto stop = [&](const std::string& kind, std::unique_ptr<Process>& p) {
    if (p == nullptr || !p->running()) return;
    absl::StatusOr<int> code = p->Stop(grace);
    if (!first.ok()) return;
    if (!code.ok()) {
      first = absl::Status(code.status().code(), absl::StrCat(kind, ": ", code.status().message()));
    } else if (*code != 0) {
      first = absl::InternalError(absl::StrCat(kind, " exited with ", *code));
    }
  };
  for (size_t r = 0; r < workers_.size(); ++r) stop(absl::StrCat("ember-worker ", r), workers_[r]);
  for (size_t i = 0; i < followers_.size(); ++i) {
    stop(absl::StrCat("ember-serving ", i), followers_[i]);
  }
  for (size_t i = 0; i < shards_.size(); ++i) stop(absl::StrCat("ember-ps ", i), shards_[i]);
  stop("ember-coordinator", coordinator_);
  return first;
}

absl::StatusOr<v1::GetJobResponse> LocalCluster::GetJob(const std::string& job) const {
  auto stub = v1::CoordinatorService::NewStub(
      grpc::CreateChannel(coordinator_address_, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::GetJobRequest request;
  request.set_job(job);
  v1::GetJobResponse response;
  const grpc::Status got = stub->GetJob(&context, request, &response);
  if (!got.ok()) return absl::UnavailableError(absl::StrCat("GetJob: ", got.error_message()));
  return response;
}

}  // namespace ember
