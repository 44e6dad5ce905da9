// Copyright 2026 The Ember Authors.
//
// The usage-error check every binary's flag test makes: run the binary with bad
// arguments, expect exit code 2 and a message that names the problem.
//
//   ExpectUsageErrors(EMBER_PS_BINARY,
//                     {{"--port=0", "--data_dir is required"},
//                      {"--data_dir=/tmp/x --port=abc", "--port: bad number 'abc'"}},
//                     UsageErrorChecks().FirstLinePrefix("ember-ps: ").HintOnly(
//                         "see 'ember-ps --help'"));
//
// Each failed expectation names the arguments and shows the output.

#ifndef EMBER_TESTS_SUPPORT_USAGE_ERRORS_H_
#define EMBER_TESTS_SUPPORT_USAGE_ERRORS_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tools/harness/process.h"

namespace ember {

// One bad invocation: the arguments (shell text) and what the message must contain
// ("" checks only the exit code).
using UsageErrorCase = std::pair<std::string, std::string>;

// What every case's output must show besides exit code 2.
struct UsageErrorChecks {
  // Where the case's message must appear: the first line of the output (a binary that
  // prints "NAME: problem" and then its usage), or anywhere in it.
  bool message_in_first_line = true;
  // The first line starts with this (e.g. "ember-ps: "); empty: not checked.
  std::string first_line_prefix;
  // The output contains this (e.g. "usage: ember-ps"); empty: not checked.
  std::string output_contains;
  // The output is exactly two lines: the message, then a line starting with this hint
  // (e.g. "see 'ember-ps --help'"), so that the help text never pushes the message off
  // the screen; empty: not checked.
  std::string hint_only;

  // Setters, to state only what a test checks.
  UsageErrorChecks& MessageAnywhere() {
    message_in_first_line = false;
    return *this;
  }
  UsageErrorChecks& FirstLinePrefix(std::string prefix) {
    first_line_prefix = std::move(prefix);
    return *this;
  }
  UsageErrorChecks& OutputContains(std::string text) {
    output_contains = std::move(text);
    return *this;
  }
  UsageErrorChecks& HintOnly(std::string hint) {
    hint_only = std::move(hint);
    return *this;
  }
};

// Runs `run(args)` for each case and expects exit code 2 and the checks above (non-fatal
// gtest expectations). `run` returns the exit code and the output to search.
void ExpectUsageErrors(const std::function<RunResult(const std::string& args)>& run,
                       const std::vector<UsageErrorCase>& cases,
                       const UsageErrorChecks& checks = {});

// The same with `binary args` run through the shell (RunBinary: stdout and stderr).
void ExpectUsageErrors(const std::string& binary, const std::vector<UsageErrorCase>& cases,
                       const UsageErrorChecks& checks = {});

}  // namespace ember

#endif  // EMBER_TESTS_SUPPORT_USAGE_ERRORS_H_
