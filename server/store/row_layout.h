// Copyright 2026 The Ember Authors.
//
// The layout of one embedding row, in memory and on disk, and the RocksDB key format.
//
// A row is a RowMeta header followed by `dim` embedding floats and then the
// optimizer's state floats:
//
//   [RowMeta (24 bytes)][embedding: dim x f32][optimizer state: state_floats x f32]
//
// The stored value is exactly these bytes (little-endian host order; Ember targets
// little-endian machines only), so a row evicted to RocksDB and read back is
// bit-identical. Keys are [slot: u16 big-endian][id: u64 big-endian] inside one column
// family per table, so each slot is one contiguous key range.

#ifndef EMBER_SERVER_STORE_ROW_LAYOUT_H_
#define EMBER_SERVER_STORE_ROW_LAYOUT_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "common/slot.h"

namespace ember {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "Ember's row format is little-endian");

struct RowMeta {
  uint64_t version = 0;        // shard version of the last update that changed this row
  int64_t last_seen_step = 0;  // training step of the last push
  float count = 0;             // (decayed) number of times the ID was pushed
  uint32_t flags = 0;          // memory-tier bookkeeping (kRowDirty ...); 0 on disk
};
static_assert(sizeof(RowMeta) == 24);

// Memory-tier flags, kept in RowMeta::flags of resident rows and cleared on write-back.
inline constexpr uint32_t kRowDirty = 1u << 0;       // newer than the backend's copy
inline constexpr uint32_t kRowReferenced = 1u << 1;  // touched since the CLOCK hand passed
inline constexpr uint32_t kRowLive = 1u << 2;        // arena slot holds a row
inline constexpr uint32_t kRowWriteBack = 1u << 3;   // a write-back of this row is in flight

inline constexpr size_t kRowKeySize = 10;

// Bytes of a whole row with `floats` = dim + optimizer state floats.
constexpr size_t RowBytes(size_t floats) { return sizeof(RowMeta) + floats * sizeof(float); }

inline void EncodeRowKey(uint32_t slot, uint64_t id, char* out) {
  out[0] = static_cast<char>((slot >> 8) & 0xff);
  out[1] = static_cast<char>(slot & 0xff);
  for (int i = 0; i < 8; ++i) out[2 + i] = static_cast<char>((id >> (56 - 8 * i)) & 0xff);
}

inline std::string RowKey(uint32_t slot, uint64_t id) {
  std::string key(kRowKeySize, '\0');
  EncodeRowKey(slot, id, key.data());
  return key;
}

// The first key of `slot` (inclusive); RowKey(slot + 1, 0) is the exclusive end.
inline std::string SlotBeginKey(uint32_t slot) { return RowKey(slot, 0); }
// Exclusive end of `slot`'s range; for the last slot a key sorting after every row key.
inline std::string SlotEndKey(uint32_t slot) {
  if (slot + 1 >= kNumSlots) return std::string(kRowKeySize + 1, '\xff');
  return RowKey(slot + 1, 0);
}

// Returns false unless `key` is a well-formed row key.
inline bool DecodeRowKey(std::string_view key, uint32_t* slot, uint64_t* id) {
  if (key.size() != kRowKeySize) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(key.data());
  *slot = (uint32_t{p[0]} << 8) | p[1];
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[2 + i];
  *id = v;
  return *slot < kNumSlots;
}

}  // namespace ember

#endif  // EMBER_SERVER_STORE_ROW_LAYOUT_H_
