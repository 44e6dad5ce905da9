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

namespace {

// log(1 + exp(x)) without overflow.
double Softplus(double x) { return std::fmax(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); }

double Sigmoid(double x) {
  const double e = std::exp(-std::fabs(x));
  return x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

}  // namespace

float MultiTaskLoss(absl::Span<const TaskHeadKind> heads, absl::Span<const float> logits,
                    absl::Span<const float> labels, absl::Span<const float> weights, float scale,
                    absl::Span<float> dlogits) {
  const size_t tasks = heads.size() + 1;
  assert(logits.size() % tasks == 0);
  assert(labels.size() == logits.size() && dlogits.size() == logits.size());
  const size_t batch = logits.size() / tasks;
  const absl::Span<const float> click = logits.subspan(0, batch);
  float loss =
      BceWithLogits(click, labels.subspan(0, batch), weights, scale, dlogits.subspan(0, batch));
  for (size_t t = 1; t < tasks; ++t) {
    const TaskHeadKind& head = heads[t - 1];
    const float task_scale = scale * head.loss_weight;
    const size_t at = t * batch;
    if (head.kind != v1::TaskConfig::ESMM_CTCVR) {
      loss += BceWithLogits(logits.subspan(at, batch), labels.subspan(at, batch), weights,
                            task_scale, dlogits.subspan(at, batch));
      continue;
    }
    double sum = 0.0;
    for (size_t i = 0; i < batch; ++i) {
      const double a = click[i];
      const double b = logits[at + i];
      const double y = labels[at + i];
      const double w = weights.empty() ? 1.0 : weights[i];
      const double log_p = -Softplus(-a) - Softplus(-b);
      const double p = std::exp(log_p);
      const double q = std::fmax(-std::expm1(log_p), 1e-12);  // 1 - p
      sum += w * -(y * log_p + (1.0 - y) * std::log(q));
      const double g = w * (p - y) / q * task_scale;
      dlogits[i] += static_cast<float>(g * (1.0 - Sigmoid(a)));
      dlogits[at + i] = static_cast<float>(g * (1.0 - Sigmoid(b)));
    }
    loss += static_cast<float>(sum * task_scale);
  }
  return loss;
}

float TaskProbability(v1::TaskConfig::Kind kind, float click_logit, float task_logit) {
  if (kind == v1::TaskConfig::ESMM_CTCVR) {
    return ClickProbability(click_logit) * ClickProbability(task_logit);
  }
  return ClickProbability(task_logit);
}

// The evaluator's formula since its first version; a change changes every score.
float ClickProbability(float logit) { return 1.0f / (1.0f + std::exp(-logit)); }

}  // namespace ember::model
