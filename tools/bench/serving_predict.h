// Copyright 2026 The Ember Authors.
//
// The Predict part of `ember-bench serving` (serving_bench.cc): a served model for the
// follower to score with, and Predict's latency and rows/s at a batch size, against the
// Lookups the same rows need as the same-run baseline.
//
//   EMBER_ASSIGN_OR_RETURN(PredictData data, TrainServedModel(bin, coordinator, dir, seed));
//   ...wait for the follower to serve its checkpoint (data.steps)...
//   EMBER_RETURN_IF_ERROR(MeasurePredict(stub, data, 100, seconds, "100row_loaded", &figures));

#ifndef EMBER_TOOLS_BENCH_SERVING_PREDICT_H_
#define EMBER_TOOLS_BENCH_SERVING_PREDICT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ember/v1/serving.grpc.pb.h"
#include "tools/bench/figures.h"

namespace ember::bench {

// The rows Predict scores: the test set of the served model's data.
struct PredictData {
  std::vector<std::string> header;  // the test file's columns
  std::vector<std::string> lines;   // its data lines
  uint64_t steps = 0;               // the job's last checkpoint is at this step
};

// Trains the served model on the cluster of `coordinator` (which checkpoints): ember-datagen
// data under `dir` (20000 training and 2000 test examples), then a one-worker quickstart
// job (configs/quickstart.pbtxt) of 50 steps, which checkpoints at its end. Errors: a
// binary that fails, or a test file that cannot be read.
absl::StatusOr<PredictData> TrainServedModel(const std::string& bin, const std::string& coordinator,
                                             const std::string& dir, uint64_t seed);

// Predicts every test line once, 100 per call: the follower's memory tier then holds
// every row the test lines need (rows the stream applied go to its RocksDB first).
// Errors: a failed call, or a row Predict refused.
absl::Status WarmUpPredict(v1::ServingService::Stub& stub, const PredictData& data);

// Calls Predict with `batch_rows` consecutive test lines per call (cycling), one call in
// flight, for `seconds`; then as long the Lookups the same rows need (one per table of
// the batch's unique IDs, in turn), the baseline. Adds predict_rows_per_sec_<suffix>,
// predict_p50_ms_<suffix>, predict_p99_ms_<suffix>, lookups_p50_ms_<suffix>,
// lookups_p99_ms_<suffix> and ratio_predict_vs_lookups_p50_<suffix>. Errors: a failed
// call, or a row Predict refused.
absl::Status MeasurePredict(v1::ServingService::Stub& stub, const PredictData& data, int batch_rows,
                            double seconds, const std::string& suffix, Figures* figures);

}  // namespace ember::bench

#endif  // EMBER_TOOLS_BENCH_SERVING_PREDICT_H_
