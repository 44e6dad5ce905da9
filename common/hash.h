// Copyright 2026 The Ember Authors.
//
// 64-bit integer mixing used for slot placement, striping and deterministic init.
// The functions are part of Ember's persistent format: changing them moves every row
// to a different slot and changes every cold ID's init vector. Do not change them.

#ifndef EMBER_COMMON_HASH_H_
#define EMBER_COMMON_HASH_H_

#include <cstdint>

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

}  // namespace ember

#endif  // EMBER_COMMON_HASH_H_
