// Copyright 2026 The Ember Authors.
//
// Validation and defaults for v1::TableConfig (proto/ember/v1/table.proto).

#ifndef EMBER_SERVER_STORE_TABLE_CONFIG_H_
#define EMBER_SERVER_STORE_TABLE_CONFIG_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ember/v1/table.pb.h"

namespace ember {

inline constexpr uint32_t kMaxDim = 4096;

// Returns `config` with every unset field replaced by its documented default, or
// INVALID_ARGUMENT naming the first bad field (name charset/length, dim range,
// negative or non-finite rates, decay outside (0, 1], ...).
absl::StatusOr<v1::TableConfig> NormalizeTableConfig(const v1::TableConfig& config);

// The seed used when a config leaves it 0: a stable hash of the table name.
uint64_t DefaultTableSeed(absl::string_view name);

// Floats of optimizer state per row for `optimizer` at `dim`.
uint32_t OptimizerStateFloats(const v1::OptimizerConfig& optimizer, uint32_t dim);

// True if two normalized configs describe the same stored layout and init (name,
// dim, seed, optimizer kind, initializer): rows written under one are valid under
// the other. Learning rates, admission and eviction may differ.
bool SameStoredLayout(const v1::TableConfig& a, const v1::TableConfig& b);

}  // namespace ember

#endif  // EMBER_SERVER_STORE_TABLE_CONFIG_H_
