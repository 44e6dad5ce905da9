// Copyright 2026 The Ember Authors.

#include "tools/bench/bench_runner.h"

#include <iostream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"

namespace ember::bench {
namespace {

constexpr char kKeysCounter[] = "keys/s";

// Echoes Google Benchmark's console table to stderr and keeps every run.
class CapturingReporter : public benchmark::ConsoleReporter {
 public:
  CapturingReporter() : ConsoleReporter(OO_Tabular) {
    SetOutputStream(&std::cerr);
    SetErrorStream(&std::cerr);
  }

  // The machine context (CPU, caches, load) once per process, not once per group.
  bool ReportContext(const Context& context) override {
    static bool printed = false;
    if (printed) {
      name_field_width_ = context.name_field_width;
      return true;
    }
    printed = true;
    return ConsoleReporter::ReportContext(context);
  }

  void ReportRuns(const std::vector<Run>& runs) override {
    runs_.insert(runs_.end(), runs.begin(), runs.end());
    ConsoleReporter::ReportRuns(runs);
  }

  const std::vector<Run>& runs() const { return runs_; }

 private:
  std::vector<Run> runs_;
};

double KeysPerSec(const benchmark::BenchmarkReporter::Run& run) {
  auto it = run.counters.find(kKeysCounter);
  return it == run.counters.end() ? 0.0 : it->second.value;
}

}  // namespace

absl::StatusOr<absl::flat_hash_map<std::string, Measurement>> RunCases(
    absl::Span<const BenchCase> cases, const RunConfig& config) {
  // The first error of each case; Google Benchmark only keeps its message.
  absl::flat_hash_map<std::string, absl::Status> errors;
  for (const BenchCase& c : cases) {
    benchmark::RegisterBenchmark(c.name.c_str(),
                                 [&c, &errors](benchmark::State& state) {
                                   for (auto _ : state) {
                                     absl::Status status = c.batch();
                                     if (!status.ok()) {
                                       errors.emplace(c.name, status);
                                       state.SkipWithError(status.ToString().c_str());
                                       break;
                                     }
                                   }
                                   state.counters[kKeysCounter] =
                                       benchmark::Counter(static_cast<double>(state.iterations()) *
                                                              static_cast<double>(c.keys_per_batch),
                                                          benchmark::Counter::kIsRate);
                                 })
        ->UseRealTime()
        ->MinTime(config.min_time_s)
        ->MinWarmUpTime(config.warmup_s)
        ->Repetitions(config.repetitions)
        ->ReportAggregatesOnly(config.repetitions > 1);
  }
  CapturingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::ClearRegisteredBenchmarks();

  absl::flat_hash_map<std::string, Measurement> results;
  for (const auto& run : reporter.runs()) {
    const std::string& name = run.run_name.function_name;
    if (run.error_occurred) {
      auto it = errors.find(name);
      absl::Status status =
          it != errors.end() ? it->second : absl::InternalError(run.error_message);
      return absl::Status(status.code(), absl::StrCat(name, ": ", status.message()));
    }
    Measurement& m = results[name];
    if (run.run_type == benchmark::BenchmarkReporter::Run::RT_Iteration) {
      m.keys_per_sec = KeysPerSec(run);
      m.iterations = run.iterations;
    } else if (run.aggregate_name == "median") {
      m.keys_per_sec = KeysPerSec(run);
      m.iterations = run.iterations;
    } else if (run.aggregate_name == "cv") {
      m.cv = KeysPerSec(run);
    }
  }
  for (const BenchCase& c : cases) {
    if (!results.contains(c.name)) {
      return absl::InternalError(absl::StrCat(c.name, ": no result from Google Benchmark"));
    }
  }
  return results;
}

}  // namespace ember::bench
