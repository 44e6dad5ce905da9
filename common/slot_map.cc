// Copyright 2026 The Ember Authors.

#include "common/slot_map.h"

#include <algorithm>
#include <cassert>

#include "absl/strings/str_cat.h"

namespace ember {

SlotMap::SlotMap() : owners_(kNumSlots, kNoShard) {}

SlotMap SlotMap::Even(const std::vector<uint32_t>& shard_ids, uint64_t epoch) {
  assert(!shard_ids.empty());
  SlotMap map;
  map.epoch_ = epoch;
  const size_t n = shard_ids.size();
  for (size_t i = 0; i < n; ++i) {
    const uint32_t begin = static_cast<uint32_t>(i * kNumSlots / n);
    const uint32_t end = static_cast<uint32_t>((i + 1) * kNumSlots / n);
    for (uint32_t s = begin; s < end; ++s) map.owners_[s] = shard_ids[i];
  }
  return map;
}

absl::StatusOr<SlotMap> SlotMap::FromOwners(std::vector<uint32_t> owners, uint64_t epoch) {
  if (owners.size() != kNumSlots) {
    return absl::InvalidArgumentError(
        absl::StrCat("slot map has ", owners.size(), " slots; expected ", kNumSlots));
  }
  SlotMap map;
  map.owners_ = std::move(owners);
  map.epoch_ = epoch;
  return map;
}

std::vector<uint32_t> SlotMap::SlotsOf(uint32_t shard) const {
  std::vector<uint32_t> slots;
  for (uint32_t s = 0; s < kNumSlots; ++s) {
    if (owners_[s] == shard) slots.push_back(s);
  }
  return slots;
}

std::vector<uint32_t> SlotMap::Shards() const {
  std::vector<uint32_t> shards;
  for (uint32_t owner : owners_) {
    if (owner != kNoShard) shards.push_back(owner);
  }
  std::sort(shards.begin(), shards.end());
  shards.erase(std::unique(shards.begin(), shards.end()), shards.end());
  return shards;
}

}  // namespace ember
