// Copyright 2026 The Ember Authors.
//
// SlotMap: which PS shard owns each slot, plus the epoch of that assignment.
//
// The coordinator is the only writer; it bumps the epoch on every change and
// publishes the whole map. Shards and clients hold copies. A value type: copy it,
// compare epochs, never mutate a shared one without external synchronization.
//
// Example:
//   SlotMap map = SlotMap::Even({0, 1, 2}, /*epoch=*/1);
//   uint32_t shard = map.OwnerOf(SlotOf(seed, id));

#ifndef EMBER_COMMON_SLOT_MAP_H_
#define EMBER_COMMON_SLOT_MAP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/slot.h"

namespace ember {

inline constexpr uint32_t kNoShard = 0xffffffffu;

class SlotMap {
 public:
  // A map with every slot unowned, epoch 0.
  SlotMap();

  // Assigns slots to `shard_ids` in contiguous, equal-sized runs (sizes differ by at
  // most one). REQUIRES: shard_ids non-empty and without duplicates.
  static SlotMap Even(const std::vector<uint32_t>& shard_ids, uint64_t epoch);

  // Rebuilds a map from per-slot owners. Returns INVALID_ARGUMENT unless
  // owners.size() == kNumSlots.
  static absl::StatusOr<SlotMap> FromOwners(std::vector<uint32_t> owners, uint64_t epoch);

  uint32_t OwnerOf(uint32_t slot) const { return owners_[slot & (kNumSlots - 1)]; }
  uint64_t epoch() const { return epoch_; }
  const std::vector<uint32_t>& owners() const { return owners_; }

  // Sets the owner of one slot and the epoch. The caller (the coordinator) decides
  // the new epoch; it must be greater than the current one.
  void SetOwner(uint32_t slot, uint32_t shard) { owners_[slot & (kNumSlots - 1)] = shard; }
  void set_epoch(uint64_t epoch) { epoch_ = epoch; }

  // Slots owned by `shard`, ascending.
  std::vector<uint32_t> SlotsOf(uint32_t shard) const;

  // Distinct owners, ascending (kNoShard excluded).
  std::vector<uint32_t> Shards() const;

 private:
  std::vector<uint32_t> owners_;  // size kNumSlots
  uint64_t epoch_ = 0;
};

}  // namespace ember

#endif  // EMBER_COMMON_SLOT_MAP_H_
