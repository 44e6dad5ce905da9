// Copyright 2026 The Ember Authors.
//
// 64-bit integer mixing used for slot placement, striping and deterministic init.
// The functions are part of Ember's persistent format: changing them moves every row
// to a different slot and changes every cold ID's init vector. Do not change them.

#ifndef EMBER_COMMON_HASH_H_
#define EMBER_COMMON_HASH_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace ember {

// The splitmix64 finalizer: a bijection on 64-bit integers whose output bits each
// depend on every input bit, so sequential IDs spread like random ones.
constexpr uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// A second, independent mixer (different constants), for uses that must not
// correlate with the slot hash (memory-tier stripes, sketch rows).
constexpr uint64_t Mix64Alt(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

// A stable 64-bit hash of a byte string (the HASH id encoding of string features in
// the data readers; persistent like the mixers above). Each 8-byte chunk, read
// little-endian byte by byte (so the result does not depend on the platform's byte
// order or alignment), is folded in with Mix64, then the zero-padded tail; the length
// seeds the state, so strings differing only in trailing zero bytes differ.
//   h = Mix64(0x9e3779b97f4a7c15 ^ size)
//   for each full chunk c: h = Mix64(h ^ c)
//   return Mix64(h ^ tail)   (tail: the last size % 8 bytes, little-endian)
inline uint64_t HashBytes(absl::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t n = bytes.size();
  uint64_t h = Mix64(0x9e3779b97f4a7c15ULL ^ static_cast<uint64_t>(n));
  for (; n >= 8; n -= 8, p += 8) {
    const uint64_t chunk = uint64_t{p[0]} | uint64_t{p[1]} << 8 | uint64_t{p[2]} << 16 |
                           uint64_t{p[3]} << 24 | uint64_t{p[4]} << 32 | uint64_t{p[5]} << 40 |
                           uint64_t{p[6]} << 48 | uint64_t{p[7]} << 56;
    h = Mix64(h ^ chunk);
  }
  uint64_t tail = 0;
  for (size_t i = 0; i < n; ++i) tail |= uint64_t{p[i]} << (8 * i);
  return Mix64(h ^ tail);
}

}  // namespace ember

#endif  // EMBER_COMMON_HASH_H_
