// Copyright 2026 The Ember Authors.
//
// The run directory of a training job (written by rank 0):
//   result.json   the final figures (docs/ARCHITECTURE.md "Command-line contract")
//   metrics.tsv   one line per progress point: step, examples, train loss, test AUC
//   training.svg  training loss and test AUC over steps (a self-contained SVG)

#ifndef EMBER_WORKER_JOB_RUN_REPORT_H_
#define EMBER_WORKER_JOB_RUN_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ember/v1/model.pb.h"
#include "worker/training/trainer.h"

namespace ember::worker {

// One point of the training curves.
struct CurvePoint {
  uint64_t step = 0;
  uint64_t examples = 0;
  double loss = 0;  // mean training loss since the previous point; 0 = none (eval only)
  std::optional<double> test_auc;  // when an evaluation ran at this step
  std::optional<double> test_logloss;
};

// The result as a JSON object (keys documented in docs/OPERATIONS.md "The run directory").
std::string ResultJson(const v1::ModelConfig& config, const TrainerOptions& options,
                       const TrainResult& result);

// The curves as a small SVG document: loss (left axis) and test AUC (right axis).
std::string CurvesSvg(const std::string& title, const std::vector<CurvePoint>& points);

// Writes result.json, metrics.tsv and training.svg into `run_dir` (created if
// missing), each through a temporary file and a rename. IO errors are returned.
absl::Status WriteRunDirectory(const std::string& run_dir, const v1::ModelConfig& config,
                               const TrainerOptions& options, const TrainResult& result,
                               const std::vector<CurvePoint>& points);

// Writes `content` to `path` atomically (temporary file, then rename).
absl::Status WriteFileAtomically(const std::string& path, const std::string& content);

}  // namespace ember::worker

#endif  // EMBER_WORKER_JOB_RUN_REPORT_H_
