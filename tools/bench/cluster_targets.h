// Copyright 2026 The Ember Authors.
//
// The ratios and targets of the cluster suite (cluster_bench.cc), computed from its
// measured rates. Targets are issue 25's (docs/PERFORMANCE.md, "Cluster"): a ratio or
// rate `x` with a target adds `x_target` and `x_met` (x >= target; false when x is
// missing or not a number).
//
//   Figures f;  // ember_pull_keys_per_sec, ember_pull8_keys_per_sec, ... measured
//   AddClusterRatios(f, /*in_flight=*/8, /*redis_pipeline=*/4);
//   f.Number("pull4_vs_redis4");  // Ember and Redis with 4 calls outstanding each

#ifndef EMBER_TOOLS_BENCH_CLUSTER_TARGETS_H_
#define EMBER_TOOLS_BENCH_CLUSTER_TARGETS_H_

#include <cstddef>

#include "tools/bench/figures.h"

namespace ember::bench::cluster {

// Targets (issue 25, 2026-12-04).
inline constexpr double kPullVsRedisTarget = 8.0;         // first round; 1 in flight each
inline constexpr double kPull8VsNoopTarget = 0.85;        // was 0.7
inline constexpr double kPull8KeysPerSecTarget = 2.4e6;   // about 1.2x ps-lite
inline constexpr double kPull8KeysPerSecStretch = 3.0e6;  // about 1.5x ps-lite
inline constexpr double kPullKeysPerSecTarget = 1.3e6;    // ahead of ps-lite (1.23 M)

// Adds to `figures`, from the `*_keys_per_sec` rates it holds (names with the
// depths: ember_pull<in_flight>, ember_pull<redis_pipeline>, redis_mget<redis_pipeline>,
// noop_grpc_pull<in_flight>, ember_push<in_flight>_sgd, noop_grpc_push<in_flight>):
//   pull_vs_redis             ember_pull / redis_mget, target 8
//   pull<P>_vs_redis<P>       ember_pull<P> / redis_mget<P> (equal concurrency)
//   pull<N>_vs_redis<P>       ember_pull<N> / redis_mget<P>
//   pull<N>_vs_noop_grpc      target 0.85
//   pull_vs_noop_grpc, push<N>_vs_noop_grpc
//   targets on ember_pull<N>_keys_per_sec (2.4e6; stretch 3.0e6 as
//   ember_pull<N>_stretch_target / _met) and ember_pull_keys_per_sec (1.3e6).
// A ratio whose rates are missing or whose denominator is 0 is NaN (JSON null).
void AddClusterRatios(Figures& figures, size_t in_flight, size_t redis_pipeline);

}  // namespace ember::bench::cluster

#endif  // EMBER_TOOLS_BENCH_CLUSTER_TARGETS_H_
