// Copyright 2026 The Ember Authors.
//
// Evaluate: test-set metrics of the current model (PS rows + a dense tower): AUC and
// logloss overall, AUC by item-frequency bucket (hot / warm / cold by the example's
// item training count) and for cold-start users, and the oracle AUC/logloss when the
// data carries the true click probability (EvalConfig names those columns).
//
// Every rank of a job evaluates its share (worker/eval/eval_shard.h): the test set is cut
// into batches of training.batch_size examples whatever the world size, rank r scores
// the batches k with k % world_size == r, and rank 0 gathers the per-example results
// and computes the metrics exactly as one rank evaluating everything would (bitwise).
// Every rank reads (parses) the whole test file to find its batches; only the pulls
// and the forward pass are divided.

#ifndef EMBER_WORKER_EVAL_EVALUATOR_H_
#define EMBER_WORKER_EVAL_EVALUATOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/dense_tower.h"
#include "common/ps_client.h"
#include "ember/v1/model.pb.h"
#include "worker/collective/collective.h"
#include "worker/eval/eval_shard.h"
#include "worker/training/sparse_features.h"

namespace ember::worker {

// Reads config.data().test_path() (whole, capped at training.eval_max_examples), pulls
// the rows of this rank's batches and runs `tower` forward on them, then combines the
// shares of every rank over `collective`. Every rank of the collective must call it at
// the same point (two collective operations: a gather to rank 0 and rank 0's outcome
// back). Returns on rank 0 the metrics of the whole test set, on the other ranks only
// scored_examples and seconds; `scores`, when not null, receives on rank 0 every
// example's probability in test-file order (empty elsewhere).
// Every rank returns the same status: a rank's own failure (reader, PS, NOT_FOUND for no
// test examples; the message names the rank, the code is kept, so a PS cluster's
// ABORTED / UNAVAILABLE stays recoverable), FAILED_PRECONDITION when the ranks cut the
// test set differently, or the collective's error (every rank fails then too).
// REQUIRES: config normalized; tables registered on `client`.
absl::StatusOr<TestSetResult> Evaluate(const v1::ModelConfig& config, const SparseLayout& layout,
                                       PsClient& client, model::DenseTower& tower,
                                       Collective& collective,
                                       std::vector<float>* scores = nullptr);

// Writes `scores` to `path`, one "%.9g" per line (round-trips float32 exactly),
// through a temporary file and a rename. IO errors are returned.
absl::Status WriteScoresFile(const std::string& path, const std::vector<float>& scores);

}  // namespace ember::worker

#endif  // EMBER_WORKER_EVAL_EVALUATOR_H_
