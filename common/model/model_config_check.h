// Copyright 2026 The Ember Authors.
//
// Private to common/model/model_config.cc: the validation of a model config whose
// defaults are filled (NormalizeModelConfig's second half), and the constants both
// halves need. Callers use model_config.h.

#ifndef EMBER_COMMON_MODEL_MODEL_CONFIG_CHECK_H_
#define EMBER_COMMON_MODEL_MODEL_CONFIG_CHECK_H_

#include <string>

#include "absl/status/status.h"
#include "ember/v1/model.pb.h"

namespace ember::model::internal {

// Criteo's TSV layout: label, I1..I13 (dense), C1..C26 (categorical).
inline constexpr int kCriteoDense = 13;
inline constexpr int kCriteoCategorical = 26;

// OK, or INVALID_ARGUMENT "origin: field: message" for the first field out of its
// range or inconsistent with another (columns, tables, features, the dense tower,
// tasks, training, evaluation, skew). REQUIRES: the defaults are filled.
absl::Status CheckModelConfig(const v1::ModelConfig& config, const std::string& origin);

}  // namespace ember::model::internal

#endif  // EMBER_COMMON_MODEL_MODEL_CONFIG_CHECK_H_
