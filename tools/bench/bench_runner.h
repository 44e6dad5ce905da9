// Copyright 2026 The Ember Authors.
//
// Runs batch operations under Google Benchmark and returns their keys/s.
//
// A BenchCase is one operation on one batch of keys (a pull of 1000 IDs, a gather
// of 1000 rows ...). RunCases registers each case with benchmark::RegisterBenchmark,
// runs them on this thread (real time, warm-up, repetitions; main.cc turns on Google
// Benchmark's random interleaving of repetitions), captures the results
// with a reporter that echoes Google Benchmark's table to stderr, and returns the
// median keys/s of each case. The registry is cleared afterwards, so a suite can
// build a fixture, run its cases, tear the fixture down and run the next group.
//
// Example:
//   std::vector<BenchCase> cases = {{"pull", kBatch, [&] { return store->Pull(...); }}};
//   EMBER_ASSIGN_OR_RETURN(auto results, RunCases(cases, config));
//   double keys_per_sec = results["pull"].keys_per_sec;

#ifndef EMBER_TOOLS_BENCH_BENCH_RUNNER_H_
#define EMBER_TOOLS_BENCH_BENCH_RUNNER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ember::bench {

struct BenchCase {
  std::string name;
  // Keys handled by one call of `batch`.
  int64_t keys_per_batch = 0;
  // One batch. A non-OK status stops the case and fails RunCases.
  std::function<absl::Status()> batch;
  // Optional: the CPU seconds used so far by the process serving the batches (e.g.
  // ProcessCpuSeconds(server_pid)), for Measurement::server_cpu_us_per_batch.
  std::function<double()> server_cpu_seconds;
};

struct RunConfig {
  double min_time_s = 1.0;  // per repetition
  double warmup_s = 0.0;    // once per case, before the first repetition
  int repetitions = 1;
};

struct Measurement {
  double keys_per_sec = 0;  // median over repetitions
  double cv = 0;            // coefficient of variation over repetitions (0 for one)
  int64_t iterations = 0;   // batches of the median repetition (or of the only one)
  // CPU microseconds per batch over every batch the case ran (warm-up included): of
  // this process (the client and its gRPC threads) and of the server (0 without
  // BenchCase::server_cpu_seconds). Unlike keys/s, CPU per batch barely moves when
  // other work shares the machine, so before/after comparisons read best here.
  double client_cpu_us_per_batch = 0;
  double server_cpu_us_per_batch = 0;
};

// CPU seconds (user + system) used so far by process `pid` (/proc; 10 ms ticks), or
// NaN if it cannot be read.
double ProcessCpuSeconds(int pid);
// The same for this process (getrusage; microseconds).
double SelfCpuSeconds();

// Runs every case in order; returns name -> Measurement.
// Errors: the first failed batch's status, annotated with the case name.
absl::StatusOr<absl::flat_hash_map<std::string, Measurement>> RunCases(
    absl::Span<const BenchCase> cases, const RunConfig& config);

}  // namespace ember::bench

#endif  // EMBER_TOOLS_BENCH_BENCH_RUNNER_H_
