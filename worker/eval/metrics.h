// Copyright 2026 The Ember Authors.
//
// Evaluation metrics of a CTR model: exact ROC AUC (ties count one half), log loss,
// AUC per bucket (e.g. hot / warm / cold items), and an accumulator that collects
// predictions over many batches and computes them all at the end.
//
//   EvalAccumulator eval(/*num_buckets=*/3);
//   for (...) EMBER_RETURN_IF_ERROR(eval.Add(probabilities, labels, buckets));
//   EvalResult result = eval.Finalize();
//   // result.auc, result.logloss, result.buckets[1].auc, ...
//
// Conventions shared by every function here:
//  - `scores` are predicted click probabilities. AUC uses only their order (logits
//    give the same AUC); log loss needs probabilities.
//  - `labels` are in [0, 1]; an example is a positive for AUC when its label >= 0.5.
//    Log loss uses the label value itself (soft labels allowed).
//  - `weights` empty means every weight is 1; otherwise one finite weight >= 0 per
//    example. Weighted AUC counts each (positive, negative) pair with the product of
//    their weights; weighted log loss is sum(w * loss) / sum(w).
//  - A metric that is undefined (AUC without both a positive and a negative, log loss
//    of zero total weight) is NaN, never an error.
//  - INVALID_ARGUMENT when the spans' sizes differ, or on a NaN score, a label outside
//    [0, 1] or a bad weight.
// Cost: one sort, O(n log n); 1M examples take well under a second.
//
// Thread-safety: the functions are pure; EvalAccumulator needs external locking.

#ifndef EMBER_WORKER_EVAL_METRICS_H_
#define EMBER_WORKER_EVAL_METRICS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ember::worker {

// Probabilities are clamped to [kLogLossEpsilon, 1 - kLogLossEpsilon] in LogLoss, so
// one confident mistake costs at most -log(1e-7) ~ 16.1.
inline constexpr double kLogLossEpsilon = 1e-7;

// Exact ROC AUC: the probability that a random positive scores above a random negative,
// ties counted one half (equivalently the Mann-Whitney statistic with average ranks).
absl::StatusOr<double> RocAuc(absl::Span<const float> scores, absl::Span<const float> labels,
                              absl::Span<const float> weights = {});

// Mean binary cross-entropy -(y log p + (1 - y) log(1 - p)) with p clamped.
absl::StatusOr<double> LogLoss(absl::Span<const float> scores, absl::Span<const float> labels,
                               absl::Span<const float> weights = {});

// The AUC of one bucket's examples.
struct BucketAuc {
  int64_t count = 0;      // examples in the bucket
  int64_t positives = 0;  // of which positives (label >= 0.5)
  // NaN when the bucket lacks positives or negatives (then `defined` is false).
  double auc = 0;
  bool defined = false;
};

// AUC per bucket: `buckets[i]` in [0, num_buckets) is example i's bucket; a negative
// value puts the example in no bucket. Returns num_buckets entries. INVALID_ARGUMENT
// also for a bucket >= num_buckets or a negative num_buckets.
absl::StatusOr<std::vector<BucketAuc>> BucketedAuc(absl::Span<const float> scores,
                                                   absl::Span<const float> labels,
                                                   absl::Span<const int> buckets, int num_buckets,
                                                   absl::Span<const float> weights = {});

// Everything EvalAccumulator computes.
struct EvalResult {
  int64_t count = 0;
  int64_t positives = 0;
  double auc = 0;                  // NaN without both classes
  double logloss = 0;              // NaN when empty
  double mean_score = 0;           // (weighted) mean prediction; NaN when empty
  double mean_label = 0;           // (weighted) mean label (the CTR); NaN when empty
  std::vector<BucketAuc> buckets;  // num_buckets entries
};

// Collects (score, label, bucket, weight) over batches; Finalize computes the metrics.
// Memory: 16 bytes per example.
class EvalAccumulator {
 public:
  // `num_buckets` >= 0 (0: no bucketed AUC).
  explicit EvalAccumulator(int num_buckets = 0);

  // Appends one batch. `buckets` empty = no bucket for these examples; `weights` empty
  // = weight 1. On error (see the conventions above; also a bucket >= num_buckets)
  // nothing is appended.
  absl::Status Add(absl::Span<const float> scores, absl::Span<const float> labels,
                   absl::Span<const int> buckets = {}, absl::Span<const float> weights = {});

  // Computes the metrics of everything added so far; may be called again after more Adds.
  EvalResult Finalize() const;

  int64_t size() const { return static_cast<int64_t>(scores_.size()); }
  void Clear();

 private:
  int num_buckets_;
  std::vector<float> scores_;
  std::vector<float> labels_;
  std::vector<int> buckets_;    // empty until the first Add with buckets, then one each
  std::vector<float> weights_;  // empty until the first weighted Add, then one each
};

}  // namespace ember::worker

#endif  // EMBER_WORKER_EVAL_METRICS_H_
