// Copyright 2026 The Ember Authors.

#include "worker/eval/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"

namespace ember::worker {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Example {
  float score;
  float weight;
  int bucket;  // -1: none
  bool positive;
};

absl::Status Check(absl::Span<const float> scores, absl::Span<const float> labels,
                   absl::Span<const int> buckets, int num_buckets,
                   absl::Span<const float> weights) {
  if (labels.size() != scores.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics: ", scores.size(), " scores but ", labels.size(), " labels"));
  }
  if (!weights.empty() && weights.size() != scores.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics: ", scores.size(), " scores but ", weights.size(), " weights"));
  }
  if (!buckets.empty() && buckets.size() != scores.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics: ", scores.size(), " scores but ", buckets.size(), " buckets"));
  }
  for (size_t i = 0; i < scores.size(); ++i) {
    if (std::isnan(scores[i])) {
      return absl::InvalidArgumentError(absl::StrCat("metrics: score ", i, " is NaN"));
    }
    if (!(labels[i] >= 0.0f && labels[i] <= 1.0f)) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics: label ", i, " is ", labels[i], "; want 0..1"));
    }
    if (!weights.empty() && !(weights[i] >= 0.0f && std::isfinite(weights[i]))) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics: weight ", i, " is ", weights[i], "; want a finite value >= 0"));
    }
    if (!buckets.empty() && buckets[i] >= num_buckets) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics: bucket ", i, " is ", buckets[i], "; want < ", num_buckets));
    }
  }
  return absl::OkStatus();
}

// The float's bits as an unsigned key in the floats' order (-0 just before +0).
uint32_t OrderedKey(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return (u & 0x80000000u) != 0 ? ~u : u | 0x80000000u;
}

// Stable LSD radix sort by score, three passes of 11 bits: several times faster than a
// comparison sort at a million examples.
void RadixSortByScore(std::vector<Example>& examples) {
  constexpr int kBits = 11;
  constexpr uint32_t kMask = (1u << kBits) - 1;
  std::vector<Example> out(examples.size());
  std::vector<size_t> start(kMask + 2);
  for (int shift = 0; shift < 32; shift += kBits) {
    std::fill(start.begin(), start.end(), 0);
    for (const Example& e : examples) ++start[((OrderedKey(e.score) >> shift) & kMask) + 1];
    for (uint32_t d = 0; d <= kMask; ++d) start[d + 1] += start[d];
    for (const Example& e : examples) out[start[(OrderedKey(e.score) >> shift) & kMask]++] = e;
    examples.swap(out);
  }
}

// The examples sorted by score (ties in input order, so the result is reproducible).
std::vector<Example> SortedExamples(absl::Span<const float> scores, absl::Span<const float> labels,
                                    absl::Span<const int> buckets,
                                    absl::Span<const float> weights) {
  std::vector<Example> examples(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) {
    examples[i] = {scores[i], weights.empty() ? 1.0f : weights[i],
                   buckets.empty() ? -1 : buckets[i], labels[i] >= 0.5f};
  }
  RadixSortByScore(examples);
  return examples;
}

// AUC of examples sorted by score. Each run of equal scores is one group: its
// positives beat every negative of the groups below and tie with the negatives of
// their own group. Double sums are exact for unit weights up to ~10^8 examples.
BucketAuc AucOfSorted(const Example* begin, const Example* end) {
  BucketAuc result;
  result.count = end - begin;
  double negatives_below = 0, pairs = 0, total_positive = 0;
  for (const Example* group = begin; group != end;) {
    double positive = 0, negative = 0;
    const Example* it = group;
    for (; it != end && it->score == group->score; ++it) {
      if (it->positive) {
        positive += it->weight;
        ++result.positives;
      } else {
        negative += it->weight;
      }
    }
    pairs += positive * (negatives_below + 0.5 * negative);
    negatives_below += negative;
    total_positive += positive;
    group = it;
  }
  if (total_positive > 0 && negatives_below > 0) {
    result.auc = pairs / (total_positive * negatives_below);
    result.defined = true;
  } else {
    result.auc = kNaN;
  }
  return result;
}

// AUC per bucket of examples sorted by score: a stable counting sort by bucket keeps
// each bucket sorted by score.
std::vector<BucketAuc> BucketAucsOfSorted(const std::vector<Example>& sorted, int num_buckets) {
  std::vector<size_t> start(num_buckets + 1, 0);
  for (const Example& e : sorted) {
    if (e.bucket >= 0) ++start[e.bucket + 1];
  }
  for (int k = 0; k < num_buckets; ++k) start[k + 1] += start[k];
  std::vector<Example> by_bucket(start[num_buckets]);
  std::vector<size_t> next(start.begin(), start.end() - 1);
  for (const Example& e : sorted) {
    if (e.bucket >= 0) by_bucket[next[e.bucket]++] = e;
  }
  std::vector<BucketAuc> result(num_buckets);
  for (int k = 0; k < num_buckets; ++k) {
    result[k] = AucOfSorted(by_bucket.data() + start[k], by_bucket.data() + start[k + 1]);
  }
  return result;
}

// Sets logloss, mean_score, mean_label of `result`.
void Means(absl::Span<const float> scores, absl::Span<const float> labels,
           absl::Span<const float> weights, EvalResult& result) {
  double loss = 0, score = 0, label = 0, total = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    const double w = weights.empty() ? 1.0 : weights[i];
    const double p = std::clamp<double>(scores[i], kLogLossEpsilon, 1.0 - kLogLossEpsilon);
    const double y = labels[i];
    loss -= w * (y * std::log(p) + (1.0 - y) * std::log1p(-p));
    score += w * scores[i];
    label += w * y;
    total += w;
  }
  if (total > 0) {
    result.logloss = loss / total;
    result.mean_score = score / total;
    result.mean_label = label / total;
  } else {
    result.logloss = result.mean_score = result.mean_label = kNaN;
  }
}

}  // namespace

absl::StatusOr<double> RocAuc(absl::Span<const float> scores, absl::Span<const float> labels,
                              absl::Span<const float> weights) {
  if (absl::Status s = Check(scores, labels, {}, 0, weights); !s.ok()) return s;
  const std::vector<Example> sorted = SortedExamples(scores, labels, {}, weights);
  return AucOfSorted(sorted.data(), sorted.data() + sorted.size()).auc;
}

absl::StatusOr<double> LogLoss(absl::Span<const float> scores, absl::Span<const float> labels,
                               absl::Span<const float> weights) {
  if (absl::Status s = Check(scores, labels, {}, 0, weights); !s.ok()) return s;
  EvalResult result;
  Means(scores, labels, weights, result);
  return result.logloss;
}

absl::StatusOr<std::vector<BucketAuc>> BucketedAuc(absl::Span<const float> scores,
                                                   absl::Span<const float> labels,
                                                   absl::Span<const int> buckets, int num_buckets,
                                                   absl::Span<const float> weights) {
  if (num_buckets < 0) {
    return absl::InvalidArgumentError(absl::StrCat("metrics: num_buckets is ", num_buckets));
  }
  if (buckets.size() != scores.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics: ", scores.size(), " scores but ", buckets.size(), " buckets"));
  }
  if (absl::Status s = Check(scores, labels, buckets, num_buckets, weights); !s.ok()) return s;
  return BucketAucsOfSorted(SortedExamples(scores, labels, buckets, weights), num_buckets);
}

EvalAccumulator::EvalAccumulator(int num_buckets) : num_buckets_(std::max(num_buckets, 0)) {}

absl::Status EvalAccumulator::Add(absl::Span<const float> scores, absl::Span<const float> labels,
                                  absl::Span<const int> buckets, absl::Span<const float> weights) {
  if (absl::Status s = Check(scores, labels, buckets, num_buckets_, weights); !s.ok()) return s;
  const size_t old_size = scores_.size();
  scores_.insert(scores_.end(), scores.begin(), scores.end());
  labels_.insert(labels_.end(), labels.begin(), labels.end());
  // buckets_ / weights_ stay empty until some batch has them, then cover every example.
  if (!buckets.empty() || !buckets_.empty()) {
    buckets_.resize(old_size, -1);
    if (buckets.empty()) {
      buckets_.resize(scores_.size(), -1);
    } else {
      buckets_.insert(buckets_.end(), buckets.begin(), buckets.end());
    }
  }
  if (!weights.empty() || !weights_.empty()) {
    weights_.resize(old_size, 1.0f);
    if (weights.empty()) {
      weights_.resize(scores_.size(), 1.0f);
    } else {
      weights_.insert(weights_.end(), weights.begin(), weights.end());
    }
  }
  return absl::OkStatus();
}

EvalResult EvalAccumulator::Finalize() const {
  EvalResult result;
  const std::vector<Example> sorted = SortedExamples(scores_, labels_, buckets_, weights_);
  const BucketAuc all = AucOfSorted(sorted.data(), sorted.data() + sorted.size());
  result.count = all.count;
  result.positives = all.positives;
  result.auc = all.auc;
  Means(scores_, labels_, weights_, result);
  if (num_buckets_ > 0) result.buckets = BucketAucsOfSorted(sorted, num_buckets_);
  return result;
}

void EvalAccumulator::Clear() {
  scores_.clear();
  labels_.clear();
  buckets_.clear();
  weights_.clear();
}

}  // namespace ember::worker
