// Copyright 2026 The Ember Authors.
//
// Deterministic initialization (docs/ARCHITECTURE.md invariant 1): a never-stored ID's vector is a
// pure function of (table seed, id, initializer), computed with a counter-based
// generator, so any shard, replica, follower or restore produces the same bits
// without storing anything.

#ifndef EMBER_SERVER_STORE_INITIALIZER_H_
#define EMBER_SERVER_STORE_INITIALIZER_H_

#include <cstdint>

#include "ember/v1/table.pb.h"

namespace ember {

// Writes the `dim` init values of `id` to out[0, dim). REQUIRES: `init` normalized
// (NormalizeTableConfig). Thread-safe.
void InitEmbedding(const v1::InitializerConfig& init, uint64_t table_seed, uint64_t id, float* out,
                   uint32_t dim);

}  // namespace ember

#endif  // EMBER_SERVER_STORE_INITIALIZER_H_
