// Copyright 2026 The Ember Authors.
//
// PsClient's control-plane methods: tables, checksums, the cluster map and the hot set
// (the data path, Pull and Push, is in ps_client.cc).

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/ps_client.h"
#include "common/ps_client_impl.h"
#include "grpcpp/client_context.h"

namespace ember {

absl::Status PsClient::AddTable(const v1::TableConfig& config) {
  if (config.seed() == 0 || config.dim() == 0 || config.dim() > 4096 || config.name().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("PsClient::AddTable: table '", config.name(),
                                                   "' is not normalized (seed ", config.seed(),
                                                   ", dim ", config.dim(), ")"));
  }
  absl::MutexLock lock(&impl_->tables_mu);
  impl_->tables[config.name()] = config;
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, PsClient::TableDigest>> PsClient::Checksum(
    absl::string_view table) {
  const absl::Time deadline = absl::Now() + impl_->options.deadline;
  const bool coordinated = impl_->coordinator != nullptr;
  v1::ChecksumRequest request;
  request.set_table(std::string(table));
  request.set_job(impl_->options.job);
  absl::Duration backoff = impl_->options.initial_backoff;
  while (true) {
    const Impl::View view = impl_->Snapshot();
    const uint64_t map_epoch = view.map->epoch();
    // The shards that own slots in the client's map (before any map: every shard it
    // knows). A shard that owns none, such as one removed from the cluster, counts
    // nothing and is not asked.
    std::vector<uint32_t> asked;
    if (map_epoch == 0) {
      for (const auto& [shard, conn] : *view.shards) asked.push_back(shard);
    } else {
      asked = view.map->Shards();
    }
    std::map<std::string, TableDigest> sums;
    std::map<uint64_t, std::vector<uint32_t>> epochs;  // slot-map epoch -> shards
    std::vector<uint32_t> unknown;                     // owners without an address
    for (const uint32_t shard : asked) {
      const auto it = view.shards->find(shard);
      if (it == view.shards->end()) {
        unknown.push_back(shard);
        continue;
      }
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(deadline));
      v1::ChecksumResponse response;
      absl::Status s =
          FromGrpcStatus(it->second.stub->Checksum(&context, request, &response), &context);
      if (!s.ok()) return WithShardContext(s, shard, it->second.address);
      epochs[response.epoch()].push_back(shard);
      for (const v1::ChecksumResponse::Table& t : response.tables()) {
        TableDigest& sum = sums[t.table()];
        sum.rows += t.rows();
        sum.digest += t.digest();
      }
    }
    if (!unknown.empty() && !coordinated) {
      return absl::FailedPreconditionError(
          absl::StrCat("Checksum: shard(s) ", absl::StrJoin(unknown, ","),
                       " own slots but the client has no address for them"));
    }
    // A consistent cut: every owner counted the slots of one map. With a coordinator,
    // the client's map (the shards that were asked) must be that map too.
    const bool one_map = epochs.size() <= 1 && unknown.empty();
    if (one_map && (!coordinated || epochs.empty() || epochs.begin()->first == map_epoch)) {
      return sums;
    }
    if (absl::Now() + backoff >= deadline) {
      std::string seen;
      for (const auto& [epoch, ids] : epochs) {
        absl::StrAppend(&seen, seen.empty() ? "" : "; ", "epoch ", epoch, ": shard(s) ",
                        absl::StrJoin(ids, ","));
      }
      if (!unknown.empty()) {
        absl::StrAppend(&seen, "; no address for shard(s) ", absl::StrJoin(unknown, ","));
      }
      return absl::AbortedError(
          absl::StrCat("Checksum: the slot map changed during every try (", seen,
                       "; the client's map is at epoch ", map_epoch,
                       "): slots were moving; ask again once the moves have switched"));
    }
    // Moves are switching: a newer map, then the shards again.
    if (coordinated) RefreshClusterMap().IgnoreError();
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, impl_->options.max_backoff);
  }
}

absl::Status PsClient::CreateTableEverywhere(const v1::TableConfig& config) {
  const absl::Time deadline = absl::Now() + impl_->options.deadline;
  if (impl_->coordinator != nullptr) {
    // The coordinator persists the table and forwards it to every shard.
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    v1::CoordinatorCreateTableRequest request;
    *request.mutable_config() = config;
    request.set_job(impl_->options.job);
    v1::CoordinatorCreateTableResponse response;
    absl::Status s =
        FromGrpcStatus(impl_->coordinator->CreateTable(&context, request, &response), &context);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("coordinator CreateTable: ", s.message()));
    }
    return AddTable(response.config());
  }
  v1::CreateTableRequest request;
  *request.mutable_config() = config;
  request.set_job(impl_->options.job);
  std::string first;
  v1::TableConfig normalized;
  const std::shared_ptr<const Impl::Shards> shards = impl_->Snapshot().shards;
  for (const auto& [shard, address] : impl_->options.shard_addresses) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    v1::CreateTableResponse response;
    absl::Status s =
        FromGrpcStatus(shards->at(shard).stub->CreateTable(&context, request, &response), &context);
    if (!s.ok()) return WithShardContext(s, shard, address);
    std::string bytes;
    response.config().SerializeToString(&bytes);  // deterministic enough for equal messages
    if (first.empty()) {
      first = std::move(bytes);
      normalized = response.config();
    } else if (bytes != first) {
      return absl::InternalError(absl::StrCat("CreateTable: shard ", shard, " (", address,
                                              ") normalized table '", config.name(),
                                              "' differently"));
    }
  }
  return AddTable(normalized);
}

absl::StatusOr<v1::TableConfig> PsClient::GetTable(absl::string_view table) const {
  absl::MutexLock lock(&impl_->tables_mu);
  auto it = impl_->tables.find(table);
  if (it == impl_->tables.end()) {
    return absl::NotFoundError(absl::StrCat("PsClient: table '", table, "' not registered"));
  }
  return it->second;
}

SlotMap PsClient::slot_map() const { return *impl_->Map(); }

absl::Status PsClient::RefreshClusterMap() {
  return impl_->Refresh(absl::Now() + impl_->options.coordinator_deadline,
                        /*rate_limited=*/false);
}

std::shared_ptr<const HotSetView> PsClient::hot_set() const { return impl_->hot_set->Current(); }

absl::Status PsClient::RefreshHotSet() {
  return impl_->hot_set->Refresh(absl::Now() + impl_->options.coordinator_deadline);
}

PsClient::ReplicaStats PsClient::replica_stats() const {
  ReplicaStats stats;
  stats.replica_keys = impl_->replica_keys.load(std::memory_order_relaxed);
  stats.replica_missing = impl_->replica_missing.load(std::memory_order_relaxed);
  stats.fallbacks = impl_->replica_fallbacks.load(std::memory_order_relaxed);
  return stats;
}

}  // namespace ember
