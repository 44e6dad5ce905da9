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
      {"storage --json=maybe", "--json: expected true or false"},
      {"storage --rows_small", "--rows_small needs =value"},
      {"storage --rows_small=abc", "--rows_small: bad number 'abc'"},
      {"storage --rows_small=5", "--rows_small must be in [1000, 2^32], not 5"},
      {"storage --rows_large=999", "--rows_large must be in [1000, 2^34], not 999"},
      {"storage --budget_fraction=0", "--budget_fraction must be in (0, 1], not 0"},
      {"storage --budget_fraction=1.5", "--budget_fraction must be in (0, 1], not 1.5"},
      {"storage --zipf=0", "--zipf must be in (0, 20], not 0"},
      {"storage --min_time=601", "--min_time must be in (0, 600], not 601"},
      {"storage --warmup=-1", "--warmup must be in [0, 600], not -1"},
      {"storage --repetitions=0", "--repetitions must be in [1, 100], not 0"},
      {"storage --repetitions=101", "--repetitions must be in [1, 100], not 101"},
      {"training --train_examples=10", "--train_examples must be in [10000, 2^32], not 10"},
      {"storage --seed=x", "--seed: bad number 'x'"},
  };
  ExpectUsageErrors(
      EMBER_BENCH_BINARY, cases,
      UsageErrorChecks().FirstLinePrefix("ember-bench: ").HintOnly("see 'ember-bench --help'"));
}

}  // namespace
}  // namespace ember
