// Copyright 2026 The Ember Authors.

#include "tools/bench/bench_runner.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>
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

// CPU seconds and batches a case used over all its runs.
struct CpuTally {
  double client = 0;
  double server = 0;
  int64_t batches = 0;
};

}  // namespace

double ProcessCpuSeconds(int pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(in, line)) return NAN;
  // The command name (field 2) may hold spaces: fields are counted after its ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return NAN;
  std::istringstream fields(line.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::atof(field.c_str());
    if (i == 15) stime = std::atof(field.c_str());
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double SelfCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

absl::StatusOr<absl::flat_hash_map<std::string, Measurement>> RunCases(
    absl::Span<const BenchCase> cases, const RunConfig& config) {
  // The first error of each case; Google Benchmark only keeps its message.
  absl::flat_hash_map<std::string, absl::Status> errors;
  std::vector<CpuTally> cpu(cases.size());  // by case index: stable addresses
  for (size_t i = 0; i < cases.size(); ++i) {
    const BenchCase& c = cases[i];
    CpuTally* tally = &cpu[i];
    benchmark::RegisterBenchmark(
        c.name.c_str(),
        [&c, &errors, tally](benchmark::State& state) {
          const double client0 = SelfCpuSeconds();
          const double server0 = c.server_cpu_seconds ? c.server_cpu_seconds() : 0;
          for (auto _ : state) {
            absl::Status status = c.batch();
            if (!status.ok()) {
              errors.emplace(c.name, status);
              state.SkipWithError(status.ToString().c_str());
              break;
            }
          }
          tally->client += SelfCpuSeconds() - client0;
          if (c.server_cpu_seconds) {
            tally->server += c.server_cpu_seconds() - server0;
          }
          tally->batches += state.iterations();
          state.counters[kKeysCounter] = benchmark::Counter(
              static_cast<double>(state.iterations()) * static_cast<double>(c.keys_per_batch),
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
  for (size_t i = 0; i < cases.size(); ++i) {
    const BenchCase& c = cases[i];
    if (!results.contains(c.name)) {
      return absl::InternalError(absl::StrCat(c.name, ": no result from Google Benchmark"));
    }
    const CpuTally& t = cpu[i];
    if (t.batches > 0) {
      results[c.name].client_cpu_us_per_batch = t.client * 1e6 / static_cast<double>(t.batches);
      results[c.name].server_cpu_us_per_batch = t.server * 1e6 / static_cast<double>(t.batches);
    }
  }
  return results;
}

}  // namespace ember::bench
