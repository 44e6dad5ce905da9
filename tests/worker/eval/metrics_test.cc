// Copyright 2026 The Ember Authors.
//
// Tests of the evaluation metrics (worker/eval/metrics.cc): AUC on known cases and
// against a brute-force pair count, log loss, AUC per bucket, the accumulator.

#include "worker/eval/metrics.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace ember::worker {
namespace {

double Auc(const std::vector<float>& scores, const std::vector<float>& labels,
           const std::vector<float>& weights = {}) {
  absl::StatusOr<double> auc = RocAuc(scores, labels, weights);
  EXPECT_TRUE(auc.ok()) << auc.status();
  return auc.ok() ? *auc : -1;
}

// O(n^2): sum over (positive, negative) pairs of w_p w_n [s_p > s_n] (+ half on ties).
double BruteForceAuc(const std::vector<float>& scores, const std::vector<float>& labels,
                     const std::vector<float>& weights) {
  double pairs = 0, total = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (labels[i] < 0.5f) continue;
    for (size_t j = 0; j < scores.size(); ++j) {
      if (labels[j] >= 0.5f) continue;
      const double w = weights.empty() ? 1.0 : double{weights[i]} * weights[j];
      total += w;
      if (scores[i] > scores[j]) pairs += w;
      if (scores[i] == scores[j]) pairs += 0.5 * w;
    }
  }
  return pairs / total;
}

TEST(RocAucTest, KnownCases) {
  EXPECT_DOUBLE_EQ(Auc({0.1f, 0.2f, 0.8f, 0.9f}, {0, 0, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(Auc({0.9f, 0.8f, 0.2f, 0.1f}, {0, 0, 1, 1}), 0.0);
  EXPECT_DOUBLE_EQ(Auc({0.3f, 0.3f, 0.3f, 0.3f, 0.3f}, {0, 1, 0, 1, 1}), 0.5);
  // Pairs: (0.4 vs 0.1) 1, (0.4 vs 0.4) 1/2, (0.8 vs both) 2: 3.5 / 4.
  EXPECT_DOUBLE_EQ(Auc({0.1f, 0.4f, 0.4f, 0.8f}, {0, 1, 0, 1}), 0.875);
  // Negative scores (logits) sort below positive ones; -0 ties with +0.
  EXPECT_DOUBLE_EQ(Auc({-1.0f, -0.0f, 0.0f, 2.0f}, {0, 1, 0, 1}), 0.875);
  EXPECT_DOUBLE_EQ(Auc({-3.0f, -2.0f, 5.0f, 1e-30f}, {0, 0, 1, 1}), 1.0);
  // One positive ranked in the middle of three negatives: 2 of 3 pairs.
  EXPECT_DOUBLE_EQ(Auc({0.1f, 0.5f, 0.2f, 0.9f}, {0, 1, 0, 0}), 2.0 / 3.0);
}

TEST(RocAucTest, OneClassIsNaN) {
  EXPECT_TRUE(std::isnan(Auc({0.1f, 0.2f}, {1, 1})));
  EXPECT_TRUE(std::isnan(Auc({0.1f, 0.2f}, {0, 0})));
  EXPECT_TRUE(std::isnan(Auc({}, {})));
  // Positives with zero weight do not count.
  EXPECT_TRUE(std::isnan(Auc({0.1f, 0.2f}, {1, 0}, {0.0f, 1.0f})));
}

TEST(RocAucTest, MatchesBruteForceOnRandomData) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    const int n = 1 + trial * 37;
    // Few distinct scores in odd trials: many ties.
    const int levels = trial % 2 ? 7 : 1 << 20;
    std::uniform_int_distribution<int> level(0, levels - 1);
    std::bernoulli_distribution click(0.3);
    std::uniform_real_distribution<float> weight(0.0f, 3.0f);
    std::vector<float> scores(n), labels(n), weights(n);
    for (int i = 0; i < n; ++i) {
      labels[i] = click(rng) ? 1.0f : 0.0f;
      // Scores correlated with labels, so the AUC is not ~0.5.
      scores[i] = static_cast<float>(level(rng) + labels[i] * levels / 3) / levels - 0.5f;
      weights[i] = weight(rng);
    }
    const double expected = BruteForceAuc(scores, labels, {});
    const double expected_weighted = BruteForceAuc(scores, labels, weights);
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(Auc(scores, labels)));
      continue;
    }
    EXPECT_NEAR(Auc(scores, labels), expected, 1e-12) << "trial " << trial;
    EXPECT_NEAR(Auc(scores, labels, weights), expected_weighted, 1e-9) << "trial " << trial;
  }
}

TEST(RocAucTest, IntegerWeightsEqualRepetition) {
  const std::vector<float> scores = {0.1f, 0.4f, 0.4f, 0.8f, 0.3f};
  const std::vector<float> labels = {0, 1, 0, 1, 1};
  const std::vector<float> weights = {2, 1, 3, 1, 2};
  std::vector<float> rs, rl;
  for (size_t i = 0; i < scores.size(); ++i) {
    for (int k = 0; k < weights[i]; ++k) {
      rs.push_back(scores[i]);
      rl.push_back(labels[i]);
    }
  }
  EXPECT_NEAR(Auc(scores, labels, weights), Auc(rs, rl), 1e-12);
}

TEST(RocAucTest, BadInput) {
  EXPECT_EQ(RocAuc({0.1f}, {1, 0}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RocAuc({NAN}, {1}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RocAuc({0.1f}, {2}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RocAuc({0.1f}, {1}, {-1.0f}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RocAuc({0.1f}, {1}, {1.0f, 2.0f}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LogLossTest, HandComputed) {
  // -(log 0.8 + log(1 - 0.3)) / 2.
  absl::StatusOr<double> loss = LogLoss({0.8f, 0.3f}, {1, 0});
  ASSERT_TRUE(loss.ok());
  EXPECT_NEAR(*loss, -(std::log(0.8) + std::log(0.7)) / 2, 1e-7);
  // Weighted: (1 * -log 0.8 + 3 * -log 0.7) / 4.
  loss = LogLoss({0.8f, 0.3f}, {1, 0}, {1.0f, 3.0f});
  ASSERT_TRUE(loss.ok());
  EXPECT_NEAR(*loss, -(std::log(0.8) + 3 * std::log(0.7)) / 4, 1e-7);
  // Clamped: a certain mistake costs -log(1e-7), not infinity.
  loss = LogLoss({0.0f, 1.0f}, {1, 0});
  ASSERT_TRUE(loss.ok());
  EXPECT_NEAR(*loss, -std::log(kLogLossEpsilon), 1e-6);
  EXPECT_NEAR(*loss, 16.118, 1e-3);
  // Soft label 0.5 at p = 0.5: log 2.
  loss = LogLoss({0.5f}, {0.5f});
  ASSERT_TRUE(loss.ok());
  EXPECT_NEAR(*loss, std::log(2.0), 1e-7);
  loss = LogLoss({}, {});
  ASSERT_TRUE(loss.ok());
  EXPECT_TRUE(std::isnan(*loss));
}

TEST(BucketedAucTest, PerBucketEqualsSubsetAuc) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  const int n = 3000, num_buckets = 4;
  std::vector<float> scores(n), labels(n);
  std::vector<int> buckets(n);
  for (int i = 0; i < n; ++i) {
    buckets[i] = static_cast<int>(i % 5) - 1;  // -1 (no bucket), 0..3
    labels[i] = u(rng) < 0.4f ? 1.0f : 0.0f;
    scores[i] = 0.5f * u(rng) + 0.3f * labels[i] * (buckets[i] + 1);  // AUC grows by bucket
    if (buckets[i] == 3) labels[i] = 0.0f;                            // one class only
  }
  absl::StatusOr<std::vector<BucketAuc>> result = BucketedAuc(scores, labels, buckets, num_buckets);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->size(), 4u);
  for (int k = 0; k < num_buckets; ++k) {
    std::vector<float> s, l;
    int64_t positives = 0;
    for (int i = 0; i < n; ++i) {
      if (buckets[i] != k) continue;
      s.push_back(scores[i]);
      l.push_back(labels[i]);
      positives += labels[i] > 0.5f;
    }
    const BucketAuc& b = (*result)[k];
    EXPECT_EQ(b.count, static_cast<int64_t>(s.size()));
    EXPECT_EQ(b.positives, positives);
    if (k == 3) {
      EXPECT_FALSE(b.defined);
      EXPECT_TRUE(std::isnan(b.auc));
    } else {
      EXPECT_TRUE(b.defined);
      EXPECT_DOUBLE_EQ(b.auc, Auc(s, l)) << k;
    }
  }
  EXPECT_LT((*result)[0].auc, (*result)[2].auc);

  EXPECT_EQ(BucketedAuc(scores, labels, buckets, 3).status().code(),
            absl::StatusCode::kInvalidArgument);  // bucket 3 >= 3
  EXPECT_EQ(BucketedAuc(scores, labels, {}, 3).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(EvalAccumulatorTest, BatchesEqualOneShot) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  const int n = 1000;
  std::vector<float> scores(n), labels(n), weights(n);
  std::vector<int> buckets(n);
  for (int i = 0; i < n; ++i) {
    labels[i] = u(rng) < 0.2f ? 1.0f : 0.0f;
    scores[i] = std::min(1.0f, 0.6f * u(rng) + 0.3f * labels[i]);
    buckets[i] = i % 3;
    weights[i] = 1.0f;
  }
  EvalAccumulator eval(3);
  for (int start = 0; start < n; start += 128) {
    const int len = std::min(128, n - start);
    // The first batch unweighted, the rest with (unit) weights: the same metrics.
    ASSERT_TRUE(eval.Add(absl::MakeSpan(scores).subspan(start, len),
                         absl::MakeSpan(labels).subspan(start, len),
                         absl::MakeSpan(buckets).subspan(start, len),
                         start == 0 ? absl::Span<const float>()
                                    : absl::MakeSpan(weights).subspan(start, len))
                    .ok());
  }
  EXPECT_EQ(eval.size(), n);
  const EvalResult result = eval.Finalize();
  EXPECT_EQ(result.count, n);
  EXPECT_DOUBLE_EQ(result.auc, Auc(scores, labels));
  EXPECT_NEAR(result.logloss, *LogLoss(scores, labels), 1e-12);
  double mean_score = 0, mean_label = 0;
  for (int i = 0; i < n; ++i) {
    mean_score += double{scores[i]} / n;
    mean_label += double{labels[i]} / n;
  }
  EXPECT_NEAR(result.mean_score, mean_score, 1e-9);
  EXPECT_NEAR(result.mean_label, mean_label, 1e-9);
  const std::vector<BucketAuc> buckets_expected = *BucketedAuc(scores, labels, buckets, 3);
  ASSERT_EQ(result.buckets.size(), 3u);
  for (int k = 0; k < 3; ++k) EXPECT_DOUBLE_EQ(result.buckets[k].auc, buckets_expected[k].auc);
  // Finalize again: the same.
  EXPECT_DOUBLE_EQ(eval.Finalize().auc, result.auc);

  // A bad batch adds nothing.
  const float bad_label = 3.0f, score = 0.5f;
  EXPECT_FALSE(eval.Add(absl::MakeConstSpan(&score, 1), absl::MakeConstSpan(&bad_label, 1)).ok());
  const int bad_bucket = 3;
  const float label = 1.0f;
  EXPECT_FALSE(eval.Add(absl::MakeConstSpan(&score, 1), absl::MakeConstSpan(&label, 1),
                        absl::MakeConstSpan(&bad_bucket, 1))
                   .ok());
  EXPECT_EQ(eval.size(), n);

  eval.Clear();
  EXPECT_EQ(eval.size(), 0);
  const EvalResult empty = eval.Finalize();
  EXPECT_EQ(empty.count, 0);
  EXPECT_TRUE(std::isnan(empty.auc));
  EXPECT_TRUE(std::isnan(empty.logloss));
  ASSERT_EQ(empty.buckets.size(), 3u);
  EXPECT_FALSE(empty.buckets[0].defined);
}

TEST(EvalAccumulatorTest, ExamplesWithoutBucket) {
  // Batches without buckets count in the overall AUC only.
  EvalAccumulator eval(2);
  ASSERT_TRUE(eval.Add({0.1f, 0.9f}, {0, 1}).ok());
  ASSERT_TRUE(eval.Add({0.2f, 0.8f, 0.7f}, {1, 0, 1}, {0, 0, 1}).ok());
  const EvalResult result = eval.Finalize();
  EXPECT_EQ(result.count, 5);
  EXPECT_EQ(result.positives, 3);
  EXPECT_EQ(result.buckets[0].count, 2);
  EXPECT_DOUBLE_EQ(result.buckets[0].auc, 0.0);
  EXPECT_EQ(result.buckets[1].count, 1);
  EXPECT_FALSE(result.buckets[1].defined);
}

TEST(EvalAccumulatorTest, MillionExamples) {
  // Label ~ Bernoulli(p), score = p: the AUC of a calibrated score.
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  const int n = 1 << 20;
  std::vector<float> scores(n), labels(n);
  std::vector<int> buckets(n);
  for (int i = 0; i < n; ++i) {
    scores[i] = u(rng);
    labels[i] = u(rng) < scores[i] ? 1.0f : 0.0f;
    buckets[i] = i % 3;
  }
  EvalAccumulator eval(3);
  ASSERT_TRUE(eval.Add(scores, labels, buckets).ok());
  const auto start = std::chrono::steady_clock::now();
  const EvalResult result = eval.Finalize();
  const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
  std::printf("Finalize of %d examples (3 buckets): %.0f ms\n", n, took.count());
  // For uniform p, AUC = P(p1 > p0) with densities 2p and 2(1 - p): 5/6.
  EXPECT_NEAR(result.auc, 5.0 / 6.0, 3e-3);
  for (const BucketAuc& b : result.buckets) EXPECT_NEAR(b.auc, 5.0 / 6.0, 5e-3);
  // E[logloss] = E over p of the entropy H(p) = 1/2.
  EXPECT_NEAR(result.logloss, 0.5, 3e-3);
}

}  // namespace
}  // namespace ember::worker
