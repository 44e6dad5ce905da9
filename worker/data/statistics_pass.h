// Copyright 2026 The Ember Authors.
//
// The statistics pass of a job's feature transforms (common/model/column_statistics.h):
// reads a sample of the training data and fills the statistics the config lacks (the
// mean and std of `standardize` DENSE columns, the boundaries of `quantiles` BUCKETIZED
// columns).
//
//   EMBER_ASSIGN_OR_RETURN(v1::ModelConfig filled, ComputeStatistics(config));
//
// The sample is the first config.statistics_max_examples() examples of the training
// data: every file of data.train_path in sorted order, whatever the job's partitioning
// (so every worker computes the same numbers from the same files, with no exchange),
// malformed lines skipped and counted against data.max_malformed_fraction as in
// training. DENSE values are taken after the missing value, the transform and clipping.

#ifndef EMBER_WORKER_DATA_STATISTICS_PASS_H_
#define EMBER_WORKER_DATA_STATISTICS_PASS_H_

#include "absl/status/statusor.h"
#include "ember/v1/model.pb.h"

namespace ember::worker {

// Returns `config` (normalized) with every missing statistic filled; `config` itself
// when none is missing (the data is not read). Errors: the reader's (NOT_FOUND for a
// missing train_path, INVALID_ARGUMENT for a header without a column or too many
// malformed lines, IO errors), FAILED_PRECONDITION naming the column when the sample
// has no value to compute from (model::FillStatistics).
absl::StatusOr<v1::ModelConfig> ComputeStatistics(const v1::ModelConfig& config);

}  // namespace ember::worker

#endif  // EMBER_WORKER_DATA_STATISTICS_PASS_H_
