// Copyright 2026 The Ember Authors.

#include "tests/support/usage_errors.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace ember {

void ExpectUsageErrors(const std::function<RunResult(const std::string& args)>& run,
                       const std::vector<UsageErrorCase>& cases, const UsageErrorChecks& checks) {
  for (const auto& [args, message] : cases) {
    const RunResult r = run(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    const std::string first_line = r.output.substr(0, r.output.find('\n'));
    if (!checks.first_line_prefix.empty()) {
      EXPECT_TRUE(absl::StartsWith(first_line, checks.first_line_prefix))
          << args << ": " << first_line;
    }
    if (checks.message_in_first_line) {
      EXPECT_TRUE(absl::StrContains(first_line, message)) << args << ": " << first_line;
    } else {
      EXPECT_TRUE(absl::StrContains(r.output, message)) << args << ": " << r.output;
    }
    if (!checks.output_contains.empty()) {
      EXPECT_TRUE(absl::StrContains(r.output, checks.output_contains)) << args << ": " << r.output;
    }
    if (!checks.hint_only.empty()) {
      const size_t second = r.output.find('\n') + 1;
      EXPECT_TRUE(absl::StartsWith(absl::string_view(r.output).substr(second), checks.hint_only))
          << args << "\n"
          << r.output;
      EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 2) << args << "\n" << r.output;
    }
  }
}

void ExpectUsageErrors(const std::string& binary, const std::vector<UsageErrorCase>& cases,
                       const UsageErrorChecks& checks) {
  ExpectUsageErrors([&binary](const std::string& args) { return RunBinary(binary, args); }, cases,
                    checks);
}

}  // namespace ember
