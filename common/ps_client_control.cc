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
  v1::ChecksumRequest request;
  request.set_table(std::string(table));
  absl::Duration backoff = impl_->options.initial_backoff;
  while (true) {
    std::map<std::string, TableDigest> sums;
    std::map<uint64_t, std::vector<uint32_t>> epochs;  // slot-map epoch -> shards
    const std::shared_ptr<const Impl::Shards> shards = impl_->Snapshot().shards;
    for (const auto& [shard, conn] : *shards) {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(deadline));
      v1::ChecksumResponse response;
      absl::Status s = FromGrpcStatus(conn.stub->Checksum(&context, request, &response), &context);
      if (!s.ok()) return WithShardContext(s, shard, conn.address);
      epochs[response.epoch()].push_back(shard);
      for (const v1::ChecksumResponse::Table& t : response.tables()) {
        TableDigest& sum = sums[t.table()];
        sum.rows += t.rows();
        sum.digest += t.digest();
      }
    }
    // A consistent cut: every shard counted the slots of one map. With a coordinator
    // that map must also be the client's (a newer one may name shards it does not know).
    const bool coordinated = impl_->coordinator != nullptr;
    if (epochs.size() <= 1 &&
        (!coordinated || epochs.empty() || epochs.begin()->first <= slot_map().epoch())) {
      return sums;
    }
    if (absl::Now() + backoff >= deadline) {
      std::string seen;
      for (const auto& [epoch, ids] : epochs) {
        absl::StrAppend(&seen, seen.empty() ? "" : "; ", "epoch ", epoch, ": shard(s) ",
                        absl::StrJoin(ids, ","));
      }
      return absl::AbortedError(
          absl::StrCat("Checksum: the slot map changed during every try (", seen,
                       "; the client's map is at epoch ", slot_map().epoch(),
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
