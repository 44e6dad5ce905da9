// Copyright 2026 The Ember Authors.

#include "tools/bench/cluster_targets.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace ember::bench::cluster {
namespace {

double NumberOrNan(const Figures& figures, const std::string& name) {
  return figures.Number(name).value_or(NAN);
}

// Adds `name`_target and `name`_met for the value `value`.
void AddTarget(Figures& figures, const std::string& name, double value, double target) {
  figures.AddNumber(name + "_target", target);
  figures.AddBool(name + "_met", value >= target);  // false for NaN
}

// Adds `name` = numerator / denominator (rates named `*_keys_per_sec`), and its
// target unless `target` is NaN.
void AddRatio(Figures& figures, const std::string& name, const std::string& numerator,
              const std::string& denominator, double target) {
  const double num = NumberOrNan(figures, numerator + "_keys_per_sec");
  const double den = NumberOrNan(figures, denominator + "_keys_per_sec");
  const double ratio = den > 0 ? num / den : NAN;
  figures.AddNumber(name, ratio);
  if (!std::isnan(target)) AddTarget(figures, name, ratio, target);
}

}  // namespace

void AddClusterRatios(Figures& figures, size_t in_flight, size_t redis_pipeline) {
  const std::string n = absl::StrCat(in_flight);
  const std::string p = absl::StrCat(redis_pipeline);
  AddRatio(figures, "pull_vs_redis", "ember_pull", "redis_mget", kPullVsRedisTarget);
  AddRatio(figures, absl::StrCat("pull", p, "_vs_redis", p), absl::StrCat("ember_pull", p),
           absl::StrCat("redis_mget", p), NAN);
  AddRatio(figures, absl::StrCat("pull", n, "_vs_redis", p), absl::StrCat("ember_pull", n),
           absl::StrCat("redis_mget", p), NAN);
  AddRatio(figures, absl::StrCat("pull", n, "_vs_noop_grpc"), absl::StrCat("ember_pull", n),
           absl::StrCat("noop_grpc_pull", n), kPull8VsNoopTarget);
  AddRatio(figures, "pull_vs_noop_grpc", "ember_pull", "noop_grpc_pull", NAN);
  AddRatio(figures, absl::StrCat("push", n, "_vs_noop_grpc"), absl::StrCat("ember_push", n, "_sgd"),
           absl::StrCat("noop_grpc_push", n), NAN);

  const std::string pull_n = absl::StrCat("ember_pull", n);
  const double pull_n_rate = NumberOrNan(figures, pull_n + "_keys_per_sec");
  AddTarget(figures, pull_n + "_keys_per_sec", pull_n_rate, kPull8KeysPerSecTarget);
  AddTarget(figures, pull_n + "_stretch", pull_n_rate, kPull8KeysPerSecStretch);
  AddTarget(figures, "ember_pull_keys_per_sec", NumberOrNan(figures, "ember_pull_keys_per_sec"),
            kPullKeysPerSecTarget);
}

}  // namespace ember::bench::cluster
