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

// The defaults a table gets for what its config leaves out. They are the settings that
// learned best across four datasets of different structure in the defaults sweep
// (tools/sweeps/optimizer_sweep.py; docs/PERFORMANCE.md "Defaults that learn"): Adagrad
// at learning rate 0.1 with a near-zero initial accumulator, so a row's step shrinks
// with its own gradient history (rare IDs keep large steps; TensorFlow's 0.1 accumulator
// cost 0.04-0.10 test AUC), and small uniform init vectors.
inline constexpr float kDefaultInitialAccumulator = 1e-6f;
inline constexpr float kDefaultUniformScale = 0.05f;
// The default learning rate of each optimizer kind: ADAGRAD 0.1, ADAM 0.01, SGD 3, FTRL
// 0.1 (a row's gradient is a mean over the batch's examples, so SGD needs a large step;
// no SGD or FTRL rate came near Adagrad on every dataset of the sweep).
float DefaultLearningRate(v1::OptimizerConfig::Kind kind);

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
