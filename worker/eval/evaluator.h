// Copyright 2026 The Ember Authors.
//
// Evaluate: test-set metrics of the current model (PS rows + a dense tower): AUC and
// logloss overall, AUC by item-frequency bucket (hot / warm / cold by the example's
// item training count) and for cold-start users, and the oracle AUC/logloss when the
// data carries the true click probability (EvalConfig names those columns).

#ifndef EMBER_WORKER_EVAL_EVALUATOR_H_
#define EMBER_WORKER_EVAL_EVALUATOR_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/model/dense_tower.h"
#include "common/ps_client.h"
#include "ember/v1/model.pb.h"
#include "worker/training/sparse_features.h"

namespace ember::worker {

struct TestSetResult {
  uint64_t examples = 0;
  double auc = 0;
  double logloss = 0;
  // Present when the data has the needed EVAL column and the bucket has both labels.
  std::optional<double> oracle_auc, oracle_logloss;
  std::optional<double> auc_hot, auc_warm, auc_cold;
  uint64_t examples_hot = 0, examples_warm = 0, examples_cold = 0;
  std::optional<double> auc_cold_users;
  uint64_t examples_cold_users = 0;
  double seconds = 0;
};

// Reads config.data.test_path (whole, capped at training.eval_max_examples), pulls
// the rows it needs and runs `tower` forward. REQUIRES: config normalized; tables
// registered on `client`. Errors: reader, PS and NOT_FOUND (no test data).
absl::StatusOr<TestSetResult> Evaluate(const v1::ModelConfig& config, const SparseLayout& layout,
                                       PsClient& client, model::DenseTower& tower);

}  // namespace ember::worker

#endif  // EMBER_WORKER_EVAL_EVALUATOR_H_
