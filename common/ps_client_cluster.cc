// Copyright 2026 The Ember Authors.

#include "common/ps_client_cluster.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "grpcpp/client_context.h"

namespace ember {

absl::StatusOr<SlotMap> DecodeSlotOwners(absl::string_view packed, uint64_t epoch) {
  if (packed.size() != size_t{kNumSlots} * sizeof(uint32_t)) {
    return absl::InvalidArgumentError(absl::StrCat("cluster map: slot_owners has ", packed.size(),
                                                   " bytes, expected ", kNumSlots * 4));
  }
  std::vector<uint32_t> owners(kNumSlots);
  std::memcpy(owners.data(), packed.data(), packed.size());  // little-endian host
  return SlotMap::FromOwners(std::move(owners), epoch);
}

absl::StatusOr<ClusterMap> FetchClusterMap(v1::CoordinatorService::Stub& stub, absl::Time deadline,
                                           const std::string& job) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  v1::GetClusterMapRequest request;
  request.set_job(job);
  v1::GetClusterMapResponse response;
  const absl::Status s = FromGrpcStatus(stub.GetClusterMap(&context, request, &response), &context);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("coordinator GetClusterMap: ", s.message()));
  }
  if (response.epoch() == 0) {
    return absl::UnavailableError("coordinator has not assigned slots yet (epoch 0)");
  }
  absl::StatusOr<SlotMap> map = DecodeSlotOwners(response.slot_owners(), response.epoch());
  if (!map.ok()) return map.status();
  ClusterMap out;
  out.slot_map = *std::move(map);
  for (const v1::ShardInfo& shard : response.shards()) {
    if (!shard.address().empty()) out.addresses[shard.shard_id()] = shard.address();
  }
  out.tables.assign(response.tables().begin(), response.tables().end());
  return out;
}

}  // namespace ember
