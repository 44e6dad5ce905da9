// Copyright 2026 The Ember Authors.
//
// The cluster map as a PS client sees it (slot map, shard addresses, tables) and its
// one source, CoordinatorService.GetClusterMap. Used by PsClient to load and reload
// its routing; kept apart so the decoding can be tested without a cluster.
//
//   auto stub = v1::CoordinatorService::NewStub(channel);
//   EMBER_ASSIGN_OR_RETURN(ClusterMap map, FetchClusterMap(*stub, absl::Now() + d));

#ifndef EMBER_COMMON_PS_CLIENT_CLUSTER_H_
#define EMBER_COMMON_PS_CLIENT_CLUSTER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/slot_map.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "ember/v1/table.pb.h"

namespace ember {

struct ClusterMap {
  SlotMap slot_map;                           // epoch >= 1
  std::map<uint32_t, std::string> addresses;  // every registered shard (alive or not)
  std::vector<v1::TableConfig> tables;        // normalized
};

// Decodes GetClusterMapResponse.slot_owners (kNumSlots little-endian uint32) at
// `epoch`. INVALID_ARGUMENT for a wrong length.
absl::StatusOr<SlotMap> DecodeSlotOwners(absl::string_view packed, uint64_t epoch);

// Calls GetClusterMap with `deadline`. Errors: the RPC's (UNAVAILABLE when the
// coordinator is down, DEADLINE_EXCEEDED); UNAVAILABLE while slots are not assigned
// (epoch 0); INVALID_ARGUMENT for a malformed map.
// `job`: the tables are that job's own (coordinator.proto JobTables); empty: the shared ones.
absl::StatusOr<ClusterMap> FetchClusterMap(v1::CoordinatorService::Stub& stub, absl::Time deadline,
                                           const std::string& job = "");

}  // namespace ember

#endif  // EMBER_COMMON_PS_CLIENT_CLUSTER_H_
