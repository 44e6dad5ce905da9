// Copyright 2026 The Ember Authors.
//
// Bad input at ember-bench's command line, the real binary: every case exits 2 with a
// first line that names the flag or argument and the range it expected, before any
// benchmark starts; --help exits 0 and lists the suites and flags.

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
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
  const std::vector<std::pair<std::string, std::string>> cases = {
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
  for (const auto& [args, message] : cases) {
    const RunResult r = RunBinary(EMBER_BENCH_BINARY, args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    const std::string first_line = r.output.substr(0, r.output.find('\n'));
    EXPECT_TRUE(absl::StartsWith(first_line, "ember-bench: ")) << args << ": " << first_line;
    EXPECT_TRUE(absl::StrContains(first_line, message)) << args << ": " << first_line;
    // One line naming the problem, then only a hint: the help does not push it away.
    EXPECT_TRUE(absl::EndsWith(r.output, "\nsee 'ember-bench --help'\n")) << args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 2) << args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace ember
