// Copyright 2026 The Ember Authors.

#include "server/shared/slot_owners.h"

#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ember {

// Both functions assume a little-endian host, like the PS wire code (float16.cc).

std::string PackSlotOwners(const SlotMap& map) {
  const std::vector<uint32_t>& owners = map.owners();
  return std::string(reinterpret_cast<const char*>(owners.data()),
                     owners.size() * sizeof(uint32_t));
}

absl::StatusOr<SlotMap> UnpackSlotOwners(absl::string_view packed, uint64_t epoch) {
  if (packed.size() != size_t{kNumSlots} * sizeof(uint32_t)) {
    return absl::InvalidArgumentError(
        absl::StrCat("slot_owners holds ", packed.size(), " bytes, want ", kNumSlots * 4));
  }
  std::vector<uint32_t> owners(kNumSlots);
  std::memcpy(owners.data(), packed.data(), packed.size());
  return SlotMap::FromOwners(std::move(owners), epoch);
}

}  // namespace ember
