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
// Exit status (common/flags.h): 0 on success, 1 if the suite failed, 2 for a usage error.

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
#include "common/flags.h"
#include "tools/bench/suite.h"

namespace ember::bench {
namespace {

// The command line: the suite and its options.
struct BenchMain {
  BenchOptions options;
  std::vector<std::string> words;  // the suite's name
  const Suite* suite = nullptr;    // from words
};

// --dir: an existing directory, or a new one whose parent exists.
absl::Status CheckDir(const Flag& flag) {
  std::filesystem::path path = std::filesystem::path(std::string(flag.value)).lexically_normal();
  if (!path.has_filename()) path = path.parent_path();  // "a/b/" is "a/b"
  std::error_code ec;
  const bool ok =
      std::filesystem::exists(path, ec)
          ? std::filesystem::is_directory(path, ec)
          : std::filesystem::is_directory(path.has_parent_path() ? path.parent_path() : ".", ec);
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--dir: '", flag.value, "' is not a directory and cannot be created"));
}

std::vector<std::string> SuiteNames() {
  std::vector<std::string> names;
  for (const Suite* suite : AllSuites()) names.push_back(suite->name);
  return names;
}

void DeclareFlags(FlagSet& flags, BenchMain& m) {
  BenchOptions& o = m.options;
  flags.Synopsis("SUITE [--json] [--FLAG=VALUE ...]");
  std::string suites;
  for (const Suite* suite : AllSuites()) {
    absl::StrAppend(&suites, absl::StrFormat("  %-12s %s\n", suite->name, suite->description));
  }
  flags.Description(absl::StrCat(
      "Runs one benchmark suite and prints its figures (docs/PERFORMANCE.md).\n"
      "With --json, stdout carries exactly one JSON object; progress goes to stderr.\n\n"
      "suites:\n",
      suites));
  flags.Positionals(&m.words);
  flags.Bool("json", &o.json, "print one JSON object");
  flags.Number("rows_small", &o.rows_small, "N", "rows of the all-in-memory table and gather array")
      .Range(1000, int64_t{1} << 32);
  flags.Number("rows_large", &o.rows_large, "N", "rows of the tiered RocksDB-backed table")
      .Range(1000, int64_t{1} << 34);
  flags
      .Number("budget_fraction", &o.budget_fraction, "F",
              "share of rows_large the memory tier holds")
      .RangeAbove(0, 1);
  flags.Number("zipf", &o.zipf, "S", "Zipf exponent of skewed key streams").RangeAbove(0, 20);
  flags.Bool("frequency_admission", &o.frequency_admission,
             "storage: the tiered store admits pulled rows by frequency (TinyLFU-style); "
             "default false: plain CLOCK, every row read enters");
  flags.Bool("background_priorities", &o.background_priorities,
             "rebalance: the shards run compaction and the migration copy at their default "
             "priorities; false: both at normal priority (--compaction_priority=normal "
             "--migration_copy_priority=normal), as before 2026-12-07");
  flags.Choice<std::string>("compaction_priority", &o.compaction_priority,
                            {{"normal", "normal"}, {"low", "low"}, {"idle", "idle"}},
                            "rebalance: the shards' --compaction_priority (default: theirs)");
  flags.Choice<std::string>("migration_copy_priority", &o.migration_copy_priority,
                            {{"normal", "normal"}, {"low", "low"}, {"idle", "idle"}},
                            "rebalance: the shards' --migration_copy_priority (default: theirs)");
  flags
      .String("dir", &o.dir, "PATH",
              "database directory, kept and reused by later runs with the same rows")
      .NonEmpty()
      .Check(CheckDir)
      .DefaultText("a fresh /tmp/ember-bench-XXXXXX, removed at the end");
  flags
      .Number("min_time", &o.min_time_s, "SECONDS",
              "minimum measured seconds per benchmark repetition")
      .RangeAbove(0, 600);
  flags
      .Number("warmup", &o.warmup_s, "SECONDS", "seconds each benchmark runs before it is measured")
      .Range(0, 600);
  flags
      .Number("repetitions", &o.repetitions, "N", "repetitions per benchmark (figures are medians)")
      .Range(1, 100);
  flags
      .Number("train_examples", &o.train_examples, "N",
              "training examples of the training suite's data")
      .Range(10000, int64_t{1} << 32);
  flags.Number("seed", &o.seed, "N", "seed of the key and gradient streams");
}

// The suite: exactly one, known.
absl::Status FinishFlags(BenchMain& m) {
  const std::string known = absl::StrJoin(SuiteNames(), ", ");
  if (m.words.empty())
    return absl::InvalidArgumentError(absl::StrCat("no suite given; known: ", known));
  if (m.words.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("one suite per run; got '", m.words[0], "' and '", m.words[1], "'"));
  }
  m.suite = FindSuite(m.words[0]);
  if (m.suite == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown suite '", m.words[0], "'; known: ", known));
  }
  return absl::OkStatus();
}

absl::Status Run(const BenchMain& m) {
  // Google Benchmark sees none of our flags. Repetitions of the cases of one group run
  // in random interleaved order, so a slow spell on a shared machine spreads over every
  // case instead of skewing the ratio of two of them.
  static char program[] = "ember-bench";
  char interleave[] = "--benchmark_enable_random_interleaving=true";
  char* bench_argv[] = {program, interleave, nullptr};
  int bench_argc = 2;
  benchmark::Initialize(&bench_argc, bench_argv);
  absl::StatusOr<Figures> figures = m.suite->run(m.options);
  benchmark::Shutdown();
  if (!figures.ok()) {
    return absl::Status(figures.status().code(),
                        absl::StrCat(m.suite->name, ": failed: ", figures.status().message()));
  }
  if (m.options.json) {
    std::cout << figures->ToJson() << std::endl;
  } else {
    std::cout << figures->ToTable() << std::flush;
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace ember::bench

// RunMain turns Abseil's lock-order checks off (~40 ns per Mutex acquisition and a
// global lock in Debian's build), as every production binary does.
int main(int argc, char** argv) {
  return ember::RunMain<ember::bench::BenchMain>(
      {"ember-bench", "bench", ember::bench::DeclareFlags, ember::bench::FinishFlags,
       ember::bench::Run},
      argc, argv);
}
