// Copyright 2026 The Ember Authors.
//
// PsClient::Impl: the state a PsClient shares with its calls in flight (PsHandle::Op
// holds it by shared_ptr): options, channels, the slot map, tables, the hot set and
// the replica-read counters. Private to common/ps_client*.cc.
//
// Thread-safety: every member may be used concurrently (mutexes and atomics as
// annotated; the map and shards are replaced whole, copy-on-write).

#ifndef EMBER_COMMON_PS_CLIENT_IMPL_H_
#define EMBER_COMMON_PS_CLIENT_IMPL_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/cluster_token.h"
#include "common/ps_client.h"
#include "common/ps_client_cluster.h"
#include "common/ps_client_hot_set.h"
#include "common/slot_map.h"
#include "common/tls.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "ember/v1/ps.grpc.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace ember {

struct PsClient::Impl {
  // Pull is called raw (its answer's rows are copied straight out of the received
  // slices, common/pull_wire.h); the other methods through the typed stub.
  using PullStub = grpc::TemplatedGenericStub<v1::PullRequest, grpc::ByteBuffer>;
  static constexpr char kPullMethod[] = "/ember.v1.PsService/Pull";

  struct Shard {
    std::string address;
    std::shared_ptr<v1::PsService::Stub> stub;
    std::shared_ptr<PullStub> pull;  // the same channel as `stub`
  };
  using Shards = absl::flat_hash_map<uint32_t, Shard>;

  PsClientOptions options;
  grpc::ChannelArguments channel_args;
  std::unique_ptr<v1::CoordinatorService::Stub> coordinator;  // null without one
  // Declared after `coordinator`, which its fetches use: destroyed first.
  std::unique_ptr<HotSetCache> hot_set;
  std::atomic<uint64_t> next_sequence{1};
  // Pulls started: spreads hot keys over their readers (ps_client.cc Split).
  std::atomic<uint64_t> pulls{0};
  // PsClient::ReplicaStats.
  std::atomic<uint64_t> replica_keys{0};
  std::atomic<uint64_t> replica_missing{0};
  std::atomic<uint64_t> replica_fallbacks{0};

  // Both replaced whole (copy-on-write), never mutated: readers copy the pointers and
  // drop the lock. Shards are only ever added or re-addressed, never removed.
  mutable absl::Mutex map_mu;
  std::shared_ptr<const SlotMap> slot_map ABSL_GUARDED_BY(map_mu);
  std::shared_ptr<const Shards> shards ABSL_GUARDED_BY(map_mu);
  absl::Time last_refresh ABSL_GUARDED_BY(map_mu) = absl::InfinitePast();
  bool refreshing ABSL_GUARDED_BY(map_mu) = false;

  mutable absl::Mutex tables_mu;
  absl::flat_hash_map<std::string, v1::TableConfig> tables ABSL_GUARDED_BY(tables_mu);

  struct View {
    std::shared_ptr<const SlotMap> map;
    std::shared_ptr<const Shards> shards;
  };

  View Snapshot() const {
    absl::MutexLock lock(&map_mu);
    return View{slot_map, shards};
  }

  std::shared_ptr<const SlotMap> Map() const {
    absl::MutexLock lock(&map_mu);
    return slot_map;
  }

  Shard NewShard(const std::string& address) const {
    std::shared_ptr<grpc::Channel> channel;
    if (options.shard_interceptors) {
      auto interceptors = options.shard_interceptors();
      for (auto& token : ClusterTokenInterceptors(options.cluster_token)) {
        interceptors.push_back(std::move(token));
      }
      channel = grpc::experimental::CreateCustomChannelWithInterceptors(
          address, OrInsecure(options.channel_credentials), channel_args, std::move(interceptors));
    } else {
      channel = CreateClusterChannel(address, options.channel_credentials, options.cluster_token,
                                     channel_args);
    }
    return Shard{address, v1::PsService::NewStub(channel), std::make_shared<PullStub>(channel)};
  }

  // Records a redirect: `slot` is owned by `owner` at `epoch` (never moves back).
  void ApplyRedirect(const v1::WrongShard& w) {
    absl::MutexLock lock(&map_mu);
    if (w.epoch() < slot_map->epoch()) return;  // a stale shard: keep our newer view
    auto next = std::make_shared<SlotMap>(*slot_map);
    next->SetOwner(w.slot(), w.owner());
    next->set_epoch(w.epoch());
    slot_map = std::move(next);
  }

  // Installs `cluster` unless the client already has a newer map. Stubs of shards whose
  // address is unchanged are kept.
  void Install(const ClusterMap& cluster) {
    std::shared_ptr<const Shards> old;
    {
      absl::MutexLock lock(&map_mu);
      old = shards;
    }
    // Channels are made outside the lock (creating one does no IO, but it is not free).
    auto next = std::make_shared<Shards>(*old);
    for (const auto& [id, address] : cluster.addresses) {
      auto it = next->find(id);
      if (it != next->end() && it->second.address == address) continue;
      (*next)[id] = NewShard(address);
    }
    {
      absl::MutexLock lock(&map_mu);
      if (cluster.slot_map.epoch() < slot_map->epoch()) return;
      // Shards added by a concurrent Install since `old` are kept too.
      for (const auto& [id, shard] : *shards) {
        if (cluster.addresses.find(id) == cluster.addresses.end()) next->try_emplace(id, shard);
      }
      shards = std::move(next);
      slot_map = std::make_shared<const SlotMap>(cluster.slot_map);
    }
    absl::MutexLock lock(&tables_mu);
    for (const v1::TableConfig& config : cluster.tables) tables[config.name()] = config;
  }

  // Reloads the cluster map from the coordinator, by `deadline` at the latest. With
  // `rate_limited`, skips (returns OK, map unchanged) when another reload runs or the
  // last one started less than min_refresh_interval ago, unless a shard named an epoch
  // (`seen_epoch`) newer than the client's map: that reload has news, so it runs.
  // Returns the coordinator's error; the current map is kept then.
  absl::Status Refresh(absl::Time deadline, bool rate_limited, uint64_t seen_epoch = 0) {
    if (coordinator == nullptr) {
      return absl::FailedPreconditionError("PsClient: no coordinator_address");
    }
    const absl::Time now = absl::Now();
    const bool news = seen_epoch > Map()->epoch();
    {
      absl::MutexLock lock(&map_mu);
      if (rate_limited &&
          (refreshing || (!news && now - last_refresh < options.min_refresh_interval))) {
        return absl::OkStatus();
      }
      refreshing = true;
      last_refresh = now;
    }
    absl::StatusOr<ClusterMap> cluster = FetchClusterMap(
        *coordinator, std::min(deadline, now + options.coordinator_deadline), options.job);
    if (cluster.ok()) {
      Install(*cluster);
      // Holders may have come or gone with the map: look for a newer hot set too.
      hot_set->Kick();
    }
    absl::MutexLock lock(&map_mu);
    refreshing = false;
    return cluster.status();
  }

  std::string AddressOf(uint32_t shard) const {
    std::shared_ptr<const Shards> s = Snapshot().shards;
    auto it = s->find(shard);
    return it == s->end() ? "?" : it->second.address;
  }
};

// `s` with the shard's id and address in front of its message (payloads kept).
inline absl::Status WithShardContext(const absl::Status& s, uint32_t shard,
                                     const std::string& address) {
  absl::Status out(s.code(), absl::StrCat("ps shard ", shard, " (", address, "): ", s.message()));
  s.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

}  // namespace ember

#endif  // EMBER_COMMON_PS_CLIENT_IMPL_H_
