// Copyright 2026 The Ember Authors.
//
// ember-bench: Ember's benchmark driver.
//
//   ember-bench SUITE [--json] [--rows_small=N] [--rows_large=N] [--budget_fraction=F]
//                     [--zipf=S] [--dir=PATH] [--min_time=SECONDS] [--warmup=SECONDS]
//                     [--repetitions=N] [--seed=N]
//
// Runs one suite (see suite.h) and prints its figures: a table, or with --json exactly
// one JSON object on stdout. Progress and Google Benchmark's own table go to stderr.
// Exit status: 0 on success, 1 if the suite failed, 2 for a usage error.

#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "benchmark/benchmark.h"
#include "tools/bench/suite.h"

namespace ember::bench {
namespace {

struct Flag {
  std::string_view name;
  std::string_view help;
  // Parses and validates the value into the options; false if it is bad.
  std::function<bool(const std::string& value, BenchOptions& options)> parse;
};

template <typename T>
std::function<bool(const std::string&, BenchOptions&)> Number(T BenchOptions::*field, T lo, T hi) {
  return [field, lo, hi](const std::string& value, BenchOptions& options) {
    T parsed;
    bool ok;
    if constexpr (std::is_floating_point_v<T>) {
      ok = absl::SimpleAtod(value, &parsed);
    } else {
      ok = absl::SimpleAtoi(value, &parsed);
    }
    if (!ok || !(parsed >= lo && parsed <= hi)) return false;
    options.*field = parsed;
    return true;
  };
}

const std::vector<Flag>& Flags() {
  static const auto* flags = new std::vector<Flag>{
      {"rows_small", "rows of the all-in-memory table and gather array, >= 1000 [1000000]",
       Number<int64_t>(&BenchOptions::rows_small, 1000, int64_t{1} << 32)},
      {"rows_large", "rows of the tiered RocksDB-backed table, >= 1000 [10000000]",
       Number<int64_t>(&BenchOptions::rows_large, 1000, int64_t{1} << 34)},
      {"budget_fraction", "share of rows_large the memory tier holds, (0, 1] [0.1]",
       [](const std::string& value, BenchOptions& options) {
         double f;
         if (!absl::SimpleAtod(value, &f) || !(f > 0 && f <= 1)) return false;
         options.budget_fraction = f;
         return true;
       }},
      {"zipf", "Zipf exponent of skewed key streams, (0, 20] [1.1]",
       [](const std::string& value, BenchOptions& options) {
         double s;
         if (!absl::SimpleAtod(value, &s) || !(s > 0 && s <= 20)) return false;
         options.zipf = s;
         return true;
       }},
      {"dir",
       "database directory, kept and reused by later runs with the same rows "
       "(default: a fresh /tmp/ember-bench-XXXXXX, removed at the end)",
       [](const std::string& value, BenchOptions& options) {
         if (value.empty()) return false;
         std::filesystem::path path = std::filesystem::path(value).lexically_normal();
         if (!path.has_filename()) path = path.parent_path();  // "a/b/" is "a/b"
         std::error_code ec;
         // An existing directory, or a new one whose parent exists.
         if (std::filesystem::exists(path, ec)) {
           if (!std::filesystem::is_directory(path, ec)) return false;
         } else {
           const std::filesystem::path parent =
               path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
           if (!std::filesystem::is_directory(parent, ec)) return false;
         }
         options.dir = value;
         return true;
       }},
      {"min_time", "minimum measured seconds per benchmark repetition, (0, 600] [1]",
       [](const std::string& value, BenchOptions& options) {
         double t;
         if (!absl::SimpleAtod(value, &t) || !(t > 0 && t <= 600)) return false;
         options.min_time_s = t;
         return true;
       }},
      {"warmup", "seconds each benchmark runs before it is measured, [0, 600] [2]",
       Number<double>(&BenchOptions::warmup_s, 0, 600)},
      {"repetitions", "repetitions per benchmark (figures are medians), [1, 100] [5]",
       Number<int>(&BenchOptions::repetitions, 1, 100)},
      {"train_examples", "training examples of the training suite's data, >= 10000 [1000000]",
       Number<int64_t>(&BenchOptions::train_examples, 10000, int64_t{1} << 32)},
      {"seed", "seed of the key and gradient streams [1]",
       Number<uint64_t>(&BenchOptions::seed, 0, ~uint64_t{0})},
  };
  return *flags;
}

void PrintUsage(std::FILE* out) {
  std::fprintf(out,
               "usage: ember-bench SUITE [--json] [--FLAG=VALUE ...]\n"
               "       ember-bench --help\n\n"
               "Runs one benchmark suite and prints its figures (docs/PERFORMANCE.md).\n"
               "With --json, stdout carries exactly one JSON object; progress goes to "
               "stderr.\n\nsuites:\n");
  for (const Suite* suite : AllSuites()) {
    std::fprintf(out, "  %-12s %s\n", suite->name.c_str(), suite->description.c_str());
  }
  std::fprintf(out, "\nflags:\n  --%-16s %s\n", "json", "print one JSON object");
  for (const Flag& flag : Flags()) {
    std::fprintf(out, "  --%-16s %s\n", std::string(flag.name).c_str(),
                 std::string(flag.help).c_str());
  }
  std::fprintf(out, "  --%-16s %s\n", "help", "print this help");
}

int UsageError(const std::string& message) {
  std::fprintf(stderr, "ember-bench: %s\n(ember-bench --help lists suites and flags)\n",
               message.c_str());
  return 2;
}

std::vector<std::string> SuiteNames() {
  std::vector<std::string> names;
  for (const Suite* suite : AllSuites()) names.push_back(suite->name);
  return names;
}

int Main(int argc, char** argv) {
  BenchOptions options;
  const Suite* suite = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      PrintUsage(stdout);
      return 0;
    }
    if (arg == "--json") {
      options.json = true;
      continue;
    }
    if (arg.rfind("--", 0) == 0) {
      const size_t eq = arg.find('=');
      const std::string name = arg.substr(2, eq == std::string::npos ? eq : eq - 2);
      const Flag* flag = nullptr;
      for (const Flag& f : Flags()) {
        if (f.name == name) flag = &f;
      }
      if (name == "json") return UsageError("--json takes no value");
      if (flag == nullptr) return UsageError(absl::StrCat("unknown flag --", name));
      if (eq == std::string::npos) {
        return UsageError(absl::StrCat("--", name, " needs a value: --", name, "=VALUE"));
      }
      if (!flag->parse(arg.substr(eq + 1), options)) {
        return UsageError(
            absl::StrCat("bad value in ", arg, " (expected ", std::string(flag->help), ")"));
      }
      continue;
    }
    if (suite != nullptr) {
      return UsageError(absl::StrCat("one suite per run; got '", suite->name, "' and '", arg, "'"));
    }
    suite = FindSuite(arg);
    if (suite == nullptr) {
      return UsageError(
          absl::StrCat("unknown suite '", arg, "'; known: ", absl::StrJoin(SuiteNames(), ", ")));
    }
  }
  if (suite == nullptr) {
    return UsageError(absl::StrCat("no suite given; known: ", absl::StrJoin(SuiteNames(), ", ")));
  }

  // Debian's Abseil checks every Mutex acquisition for lock-order cycles (~40 ns each
  // and a global lock); production binaries turn that off, and so does the benchmark.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  // Google Benchmark sees none of our flags. Repetitions of the cases of one group run
  // in random interleaved order, so a slow spell on a shared machine spreads over every
  // case instead of skewing the ratio of two of them.
  char interleave[] = "--benchmark_enable_random_interleaving=true";
  char* bench_argv[] = {argv[0], interleave, nullptr};
  int bench_argc = 2;
  benchmark::Initialize(&bench_argc, bench_argv);
  absl::StatusOr<Figures> figures = suite->run(options);
  benchmark::Shutdown();
  if (!figures.ok()) {
    std::fprintf(stderr, "ember-bench %s: failed: %s\n", suite->name.c_str(),
                 figures.status().ToString().c_str());
    return 1;
  }
  if (options.json) {
    std::cout << figures->ToJson() << std::endl;
  } else {
    std::cout << figures->ToTable() << std::flush;
  }
  return 0;
}

}  // namespace
}  // namespace ember::bench

int main(int argc, char** argv) { return ember::bench::Main(argc, argv); }
