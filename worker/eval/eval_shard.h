// Copyright 2026 The Ember Authors.
//
// The per-example results of a test-set evaluation, and how the ranks of a job combine
// their shares of it exactly (docs/ARCHITECTURE.md "Training loop").
//
// Semantics. The test set is cut into the same batches whatever the world size:
// `batch_size` examples each, in test-file order, the last one short, the whole capped at
// eval_max_examples. Batch k is scored by rank k % world_size, so every example's score
// is computed in exactly the batch one rank evaluating everything computes it in. Each
// rank keeps its batches' results in an EvalShard; rank 0 gathers the shards,
// MergeShards puts the batches back in test-file order, and SummarizeExamples computes
// the metrics from those arrays, as one rank would: the same values in the same order,
// so the same AUC, logloss, bucket AUCs, oracle figures and counts, bitwise.
//
//   EvalShard shard;  // on each rank: its batches (AppendBatch), total_batches, digest
//   std::string wire = EncodeShard(shard);            // sent to rank 0
//   // rank 0:
//   std::vector<EvalShard> shards = ...;              // DecodeShard of each rank's bytes
//   EMBER_ASSIGN_OR_RETURN(EvalExamples all, MergeShards(shards));
//   EMBER_ASSIGN_OR_RETURN(TestSetResult result, SummarizeExamples(all));
//
// The wire form is the host's byte order (every worker of a job runs the same build on
// the same kind of machine). Thread-safety: pure functions and plain structs.

#ifndef EMBER_WORKER_EVAL_EVAL_SHARD_H_
#define EMBER_WORKER_EVAL_EVAL_SHARD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ember::worker {

// The metrics of one evaluation (rank 0's; other ranks only fill scored_examples and
// seconds).
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
  // Multi-task models: one per extra task (DenseTowerConfig.tasks order), its AUC and
  // logloss of the task's probability (TaskProbability) against its label, and the
  // oracle AUC when the task has a true_prob_column.
  struct Task {
    double auc = 0;
    double logloss = 0;
    std::optional<double> oracle_auc;
    uint64_t positives = 0;
    // ESMM_CTCVR: the CVR head's own p(conversion | click) over the clicked examples (click
    // label 1) against the task's label, and its oracle from the true p(conversion | click).
    std::optional<double> cvr_auc_clicked, cvr_oracle_auc_clicked;
    uint64_t clicked = 0;
  };
  std::vector<Task> tasks;
  uint64_t scored_examples = 0;  // scored by this rank (its share)
  double read_seconds = 0;       // this rank's reading and parsing of the whole test set
  double seconds = 0;
};

// The results of consecutive test examples, one entry each.
struct EvalExamples {
  // Which EVAL columns the data has (EvalConfig names them); the same for every shard.
  bool has_item_count = false;
  bool has_cold_user = false;
  bool has_true_prob = false;
  std::vector<float> scores;  // predicted click probability
  std::vector<float> labels;
  // Item-frequency bucket: 0 hot, 1 warm, 2 cold; -1 everywhere without the column.
  std::vector<int> item_buckets;
  // 0 for a cold-start user, else -1 (-1 everywhere without the column).
  std::vector<int> user_buckets;
  std::vector<float> true_probs;  // the data's true probability; empty without the column
  // Multi-task models: one per extra task, each column [size()] (true_probs only with
  // has_true_prob). Empty for a single-task model.
  struct Task {
    bool has_true_prob = false;
    std::vector<float> scores;  // the task's probability
    std::vector<float> labels;
    std::vector<float> true_probs;
    // ESMM_CTCVR only (has_head): the head's own probability, and with has_true_prob the
    // true p(conversion | click) (true_probs holds the CTCVR product).
    bool has_head = false;
    std::vector<float> head_scores;
    std::vector<float> head_true_probs;
  };
  std::vector<Task> tasks;

  size_t size() const { return scores.size(); }
  // Appends `count` entries of `other` from `offset`. REQUIRES: same columns, in range.
  void Append(const EvalExamples& other, size_t offset, size_t count);
};

// One rank's share: the batches it scored, in ascending batch order.
struct EvalShard {
  // A digest of what defines the cut (the test path, batch size, cap and EVAL config):
  // every rank must have the same (EvalSettingsDigest in evaluator.cc).
  uint64_t settings_digest = 0;
  uint64_t total_batches = 0;  // batches in the whole (capped) test set
  std::vector<uint64_t> batch_index;
  std::vector<uint32_t> batch_size;  // examples of each batch
  EvalExamples examples;             // the batches' examples, concatenated
};

// The shard as bytes, and back. DecodeShard: DATA_LOSS for bytes that are not a whole
// shard (wrong magic, truncated, sizes that do not add up, a bucket out of range).
std::string EncodeShard(const EvalShard& shard);
absl::StatusOr<EvalShard> DecodeShard(absl::string_view bytes);

// A status as bytes ("" for OK), and back (DecodeStatus: INTERNAL for bytes that are not
// a status). Carries a rank's failure to rank 0 and rank 0's outcome back.
std::string EncodeStatus(const absl::Status& status);
absl::Status DecodeStatus(absl::string_view bytes);

// The examples of every batch of `shards` (shards[r] from rank r) in batch order.
// FAILED_PRECONDITION when the ranks disagree on the cut (settings digest, total
// batches or columns: naming the first rank that differs from rank 0); INTERNAL when a
// batch is missing, duplicated, or held by a rank other than index % shards.size().
absl::StatusOr<EvalExamples> MergeShards(const std::vector<EvalShard>& shards);

// The metrics of `examples` (seconds and scored_examples not set; tasks: one per
// examples.tasks entry). NOT_FOUND when
// empty; INVALID_ARGUMENT for a NaN score or true probability or a label outside [0, 1]
// (metrics.h).
absl::StatusOr<TestSetResult> SummarizeExamples(const EvalExamples& examples);

}  // namespace ember::worker

#endif  // EMBER_WORKER_EVAL_EVAL_SHARD_H_
