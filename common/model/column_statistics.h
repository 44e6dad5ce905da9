// Copyright 2026 The Ember Authors.
//
// Data statistics of the feature transforms (model.proto ColumnConfig): the mean and
// std of a `standardize` DENSE column and the boundaries of a `quantiles` BUCKETIZED
// column. A job computes the missing ones once, before training, from a sample of its
// training data (worker/data/statistics_pass.h), writes them into its config, and from
// then on the config carries them: every checkpoint stores it (WorkerState.config), a
// resumed job copies them from its checkpoint instead of computing them again, and
// ember-serving's parser, built from the checkpoint's config, applies the same ones.
//
//   if (NeedsStatistics(config)) {
//     ColumnSample sample = ...;  // the values of every column that needs statistics
//     EMBER_RETURN_IF_ERROR(FillStatistics(sample, &config));
//   }
//   EMBER_RETURN_IF_ERROR(CheckStatistics(config, "model config"));  // a parser needs them

#ifndef EMBER_COMMON_MODEL_COLUMN_STATISTICS_H_
#define EMBER_COMMON_MODEL_COLUMN_STATISTICS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "ember/v1/model.pb.h"

namespace ember::model {

// Whether column `c` needs statistics it lacks: a DENSE column with standardize and no
// mean/std, or a BUCKETIZED column with quantiles and no boundaries.
bool ColumnNeedsStatistics(const v1::ColumnConfig& c);
// Whether any column of `config` does.
bool NeedsStatistics(const v1::ModelConfig& config);

// OK when no column of `config` needs statistics it lacks; else INVALID_ARGUMENT naming
// the first such column: "origin: data.columns[3] (price): standardize needs mean and
// std, which this config lacks (...)".
absl::Status CheckStatistics(const v1::ModelConfig& config, absl::string_view origin);

// Copies into `*to` the statistics its columns need (ColumnNeedsStatistics) from the
// columns of the same name in `from` (e.g. a checkpoint's stored config). Columns that
// do not need any are left as they are. INVALID_ARGUMENT naming `from_name` and the
// column when `from` lacks one (the column is missing there, or has no statistics).
absl::Status CopyStatistics(const v1::ModelConfig& from, absl::string_view from_name,
                            v1::ModelConfig* to);

// The sampled values of the columns that need statistics, by column name: for a DENSE
// column the value after the missing value, the transform and clipping (what would be
// standardized); for a BUCKETIZED column its non-empty values.
using ColumnSample = std::map<std::string, std::vector<float>>;

// Fills every column of `*config` that needs statistics from `sample`. The mean and the
// (population) std are computed in double over the values in order and rounded to
// float; a std of 0 (a constant column) becomes 1. Quantile boundaries: QuantileBoundaries.
// FAILED_PRECONDITION naming the column when its sample is empty (no training examples,
// or no non-empty value of a BUCKETIZED column).
absl::Status FillStatistics(const ColumnSample& sample, v1::ModelConfig* config);

// The boundaries of `quantiles` equal-frequency buckets of `values` (not empty): with
// the values sorted, s[floor(i * m / quantiles)] for i = 1..quantiles-1 (m values),
// duplicates removed. Exact, and independent of the order of `values`.
std::vector<float> QuantileBoundaries(std::vector<float> values, uint32_t quantiles);

}  // namespace ember::model

#endif  // EMBER_COMMON_MODEL_COLUMN_STATISTICS_H_
