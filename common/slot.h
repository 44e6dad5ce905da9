// Copyright 2026 The Ember Authors.
//
// Slot placement: the one function that decides which slot an embedding row lives in.
//
// Every (table, id) key maps to one of kNumSlots virtual slots; the cluster's slot map
// (slot_map.h) then maps slots to PS shards. Because the slot count is fixed, moving
// data between shards is a copy of whole slots (contiguous RocksDB key ranges), never a
// rehash of the table. Nothing else in Ember may compute a key's slot.
//
// Example:
//   uint32_t slot = ember::SlotOf(table.seed, feature_id);

#ifndef EMBER_COMMON_SLOT_H_
#define EMBER_COMMON_SLOT_H_

#include <cstdint>

#include "common/hash.h"

namespace ember {

// Fixed for the life of a cluster (part of the on-disk key format).
inline constexpr uint32_t kNumSlots = 16384;
static_assert((kNumSlots & (kNumSlots - 1)) == 0, "kNumSlots must be a power of two");

// Returns the slot of `id` in the table whose seed is `table_seed`.
// Thread-safe, pure: the same inputs give the same slot on every process and version.
constexpr uint32_t SlotOf(uint64_t table_seed, uint64_t id) {
  return static_cast<uint32_t>(Mix64(id ^ table_seed) & (kNumSlots - 1));
}

}  // namespace ember

#endif  // EMBER_COMMON_SLOT_H_
