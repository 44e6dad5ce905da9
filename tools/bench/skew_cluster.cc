// Copyright 2026 The Ember Authors.

#include "tools/bench/skew_cluster.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "ember/v1/ps.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace ember::bench {
namespace {

constexpr absl::Duration kStartTimeout = absl::Seconds(60);

std::unique_ptr<v1::PsService::Stub> StubOf(const std::string& address) {
  return v1::PsService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

std::vector<uint64_t> Served(const std::vector<ShardLoad>& before,
                             const std::vector<ShardLoad>& after) {
  std::vector<uint64_t> out;
  for (size_t i = 0; i < after.size(); ++i) {
    out.push_back(after[i].served() - (i < before.size() ? before[i].served() : 0));
  }
  return out;
}

}  // namespace

std::vector<double> LoadOverMean(const std::vector<ShardLoad>& before,
                                 const std::vector<ShardLoad>& after) {
  const std::vector<uint64_t> served = Served(before, after);
  double mean = 0;
  for (uint64_t v : served) mean += static_cast<double>(v);
  mean /= std::max<size_t>(1, served.size());
  std::vector<double> out;
  for (uint64_t v : served) out.push_back(mean > 0 ? v / mean : 0);
  return out;
}

double MaxOverMean(const std::vector<ShardLoad>& before, const std::vector<ShardLoad>& after) {
  const std::vector<double> ratios = LoadOverMean(before, after);
  return ratios.empty() ? 0 : *std::max_element(ratios.begin(), ratios.end());
}

SkewCluster::SkewCluster(std::string bin, std::string dir)
    : bin_(std::move(bin)), dir_(std::move(dir)) {
  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_);
}

SkewCluster::~SkewCluster() { Stop(); }

absl::Status SkewCluster::Start(int shards, const std::vector<std::string>& coordinator_flags,
                                const std::vector<std::string>& shard_flags) {
  std::vector<std::string> args = {absl::StrCat("--data_dir=", dir_, "/coordinator"), "--port=0",
                                   absl::StrCat("--expected_shards=", shards),
                                   absl::StrCat("--checkpoint_dir=", dir_, "/checkpoints")};
  args.insert(args.end(), coordinator_flags.begin(), coordinator_flags.end());
  EMBER_ASSIGN_OR_RETURN(coordinator_, Process::Start(bin_ + "/ember-coordinator", args,
                                                      "listening on ", kStartTimeout));
  coordinator_address_ = coordinator_->ready_text();
  for (int i = 0; i < shards; ++i) {
    std::vector<std::string> ps_args = {absl::StrCat("--data_dir=", dir_, "/ps-", i), "--port=0",
                                        absl::StrCat("--shard_id=", i), "--heartbeat_ms=200",
                                        absl::StrCat("--coordinator=", coordinator_address_)};
    ps_args.insert(ps_args.end(), shard_flags.begin(), shard_flags.end());
    EMBER_ASSIGN_OR_RETURN(
        std::unique_ptr<Process> ps,
        Process::Start(bin_ + "/ember-ps", ps_args, "listening on ", kStartTimeout));
    shards_.push_back(std::move(ps));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> SkewCluster::Train(const std::string& config, const std::string& data,
                                               int workers,
                                               const std::vector<std::string>& worker_flags) {
  const std::string run_dir = absl::StrCat(dir_, "/job-", ++jobs_);
  std::vector<std::unique_ptr<Process>> running;
  for (int r = 0; r < workers; ++r) {
    std::vector<std::string> args = {absl::StrCat("--config=", config),
                                     absl::StrCat("--train=", data, "/train"),
                                     absl::StrCat("--test=", data, "/test"),
                                     absl::StrCat("--coordinator=", coordinator_address_),
                                     absl::StrCat("--rank=", r),
                                     absl::StrCat("--world_size=", workers),
                                     absl::StrCat("--run_dir=", run_dir),
                                     absl::StrCat("--generation=", jobs_),
                                     "--eval_every_steps=0"};
    args.insert(args.end(), worker_flags.begin(), worker_flags.end());
    EMBER_ASSIGN_OR_RETURN(std::unique_ptr<Process> w,
                           Process::Start(bin_ + "/ember-worker", args, "worker ", kStartTimeout));
    running.push_back(std::move(w));
  }
  for (int r = 0; r < workers; ++r) {
    EMBER_ASSIGN_OR_RETURN(int code, running[r]->Wait(absl::Minutes(30)));
    if (code != 0) {
      return absl::InternalError(
          absl::StrCat("ember-worker ", r, " exited ", code, " (logs under ", dir_, ")"));
    }
  }
  std::ifstream in(run_dir + "/result.json");
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().empty()) return absl::InternalError(absl::StrCat("no ", run_dir, "/result.json"));
  return text.str();
}

absl::StatusOr<std::vector<ShardLoad>> SkewCluster::Load() const {
  std::vector<ShardLoad> out;
  for (const auto& shard : shards_) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    v1::GetShardInfoResponse info;
    EMBER_RETURN_IF_ERROR(
        FromGrpcStatus(StubOf(shard->ready_text())->GetShardInfo(&context, {}, &info), &context));
    ShardLoad load;
    load.shard_id = info.shard_id();
    load.pulled_keys = info.pulled_keys();
    load.pushed_keys = info.pushed_keys();
    load.replica_pulled_keys = info.replica_pulled_keys();
    load.hot_set_version = info.hot_set_version();
    out.push_back(load);
  }
  std::sort(out.begin(), out.end(),
            [](const ShardLoad& a, const ShardLoad& b) { return a.shard_id < b.shard_id; });
  return out;
}

absl::StatusOr<std::map<std::string, uint64_t>> SkewCluster::RowsPerTable() const {
  std::map<std::string, uint64_t> rows;
  for (const auto& shard : shards_) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    v1::ChecksumResponse response;
    EMBER_RETURN_IF_ERROR(
        FromGrpcStatus(StubOf(shard->ready_text())->Checksum(&context, {}, &response), &context));
    for (const auto& t : response.tables()) rows[t.table()] += t.rows();
  }
  return rows;
}

void SkewCluster::Stop() {
  for (auto& s : shards_) {
    if (s != nullptr) s->Stop(absl::Seconds(10)).IgnoreError();
  }
  shards_.clear();
  if (coordinator_ != nullptr) coordinator_->Stop(absl::Seconds(10)).IgnoreError();
  coordinator_.reset();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("ps-", 0) == 0 || name == "checkpoints") std::filesystem::remove_all(entry, ec);
  }
}

}  // namespace ember::bench
