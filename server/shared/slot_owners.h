// Copyright 2026 The Ember Authors.
//
// The packed wire form of a slot map's owners (coordinator.proto): kNumSlots
// little-endian uint32 shard ids, 4 bytes per slot. Used by the coordinator and by
// the shard agent, so both sides agree on one encoding.
//
//   std::string bytes = PackSlotOwners(map);
//   EMBER_ASSIGN_OR_RETURN(SlotMap copy, UnpackSlotOwners(bytes, epoch));

#ifndef EMBER_SERVER_SHARED_SLOT_OWNERS_H_
#define EMBER_SERVER_SHARED_SLOT_OWNERS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/slot_map.h"

namespace ember {

// The owners of `map`, packed (kNumSlots * 4 bytes).
std::string PackSlotOwners(const SlotMap& map);

// The map with owners `packed` at `epoch`. INVALID_ARGUMENT unless packed holds
// exactly kNumSlots * 4 bytes.
absl::StatusOr<SlotMap> UnpackSlotOwners(absl::string_view packed, uint64_t epoch);

}  // namespace ember

#endif  // EMBER_SERVER_SHARED_SLOT_OWNERS_H_
