// Copyright 2026 The Ember Authors.
//
// Bad input at ember-bench's command line, the real binary: every case exits 2 with a
// first line that names the flag or argument and the range it expected, before any
// benchmark starts; --help exits 0 and lists the suites and flags.

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/support/usage_errors.h"
#include "tools/harness/process.h"

#ifndef EMBER_BENCH_BINARY
#error "EMBER_BENCH_BINARY must name the ember-bench binary"
#endif

namespace ember {
namespace {

TEST(BenchFlagsTest, HelpListsSuitesAndFlags) {
  const RunResult r = RunBinary(EMBER_BENCH_BINARY, "--help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(absl::StartsWith(r.output, "usage: ember-bench SUITE")) << r.output;
  for (const char* word : {"storage", "cluster", "serving", "--rows_small", "--repetitions"}) {
    EXPECT_TRUE(absl::StrContains(r.output, word)) << word;
  }
}

TEST(BenchFlagsTest, BadArgumentsExitTwoNamingThem) {
  // Each: the arguments, and what the first line must contain.
  const std::vector<UsageErrorCase> cases = {
      {"", "no suite given; known: checkpoint, cluster"},
      {"nosuchsuite", "unknown suite 'nosuchsuite'; known:"},
      {"storage cluster", "one suite per run; got 'storage' and 'cluster'"},
      {"storage --bogus", "unknown flag --bogus"},
      {"storage --json=maybe", "--json takes no value"},
      {"storage --rows_small", "--rows_small needs a value"},
      {"storage --rows_small=abc", "bad value in --rows_small=abc (expected"},
      {"storage --rows_small=5", "bad value in --rows_small=5 (expected"},
      {"storage --rows_large=999", "bad value in --rows_large=999 (expected"},
      {"storage --budget_fraction=0", "bad value in --budget_fraction=0 (expected"},
      {"storage --budget_fraction=1.5", "bad value in --budget_fraction=1.5 (expected"},
      {"storage --zipf=0", "bad value in --zipf=0 (expected"},
      {"storage --min_time=601", "bad value in --min_time=601 (expected"},
      {"storage --warmup=-1", "bad value in --warmup=-1 (expected"},
      {"storage --repetitions=0", "bad value in --repetitions=0 (expected"},
      {"storage --repetitions=101", "bad value in --repetitions=101 (expected"},
      {"training --train_examples=10", "bad value in --train_examples=10 (expected"},
      {"storage --seed=x", "bad value in --seed=x (expected"},
  };
  ExpectUsageErrors(EMBER_BENCH_BINARY, cases,
                    UsageErrorChecks()
                        .FirstLinePrefix("ember-bench: ")
                        .OutputContains("ember-bench --help lists suites and flags"));
}

}  // namespace
}  // namespace ember
