// Copyright 2026 The Ember Authors.
//
// BceWithLogits and ClickProbability (declared in dense_tower.h).

#include <cassert>
#include <cmath>

#include "common/model/dense_tower.h"

namespace ember::model {

// Per example, with x the logit and y the label:
//   bce = max(x, 0) - x y + log1p(exp(-|x|))   (never overflows)
//   d bce / dx = sigmoid(x) - y, sigmoid from exp(-|x|) for the same reason.
// An empty `weights` means every weight is 1. The sum is taken in double.
float BceWithLogits(absl::Span<const float> logits, absl::Span<const float> labels,
                    absl::Span<const float> weights, float scale, absl::Span<float> dlogits) {
  assert(labels.size() == logits.size());
  assert(weights.empty() || weights.size() == logits.size());
  assert(dlogits.size() == logits.size());
  double loss = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double x = logits[i];
    const double y = labels[i];
    const double w = weights.empty() ? 1.0 : weights[i];
    const double e = std::exp(-std::fabs(x));
    const double sigmoid = x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
    loss += w * (std::fmax(x, 0.0) - x * y + std::log1p(e));
    dlogits[i] = static_cast<float>(w * (sigmoid - y) * scale);
  }
  return static_cast<float>(loss * scale);
}

// The evaluator's formula since its first version; a change changes every score.
float ClickProbability(float logit) { return 1.0f / (1.0f + std::exp(-logit)); }

}  // namespace ember::model
