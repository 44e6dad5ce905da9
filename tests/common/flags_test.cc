// Copyright 2026 The Ember Authors.
//
// The declarative flag set (common/flags.h): defaults and ranges in the usage, the
// parser's errors (bad values, out of range, unknown flags, missing required flags),
// environment fallbacks, and RunMain's exit codes for --help, --version, usage errors
// and failed runs.

#include "common/flags.h"

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "common/build_info.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ember {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

enum class Color { kRed, kGreen };

struct Options {
  std::string dir;
  uint32_t port = 7000;
  int64_t budget_mb = 1024;
  double share = 0.25;
  bool wal = true;
  bool verbose = false;
  Color color = Color::kGreen;
  absl::Duration grace = absl::Seconds(5);
  std::optional<uint32_t> batch;
  std::string method;
};

void Declare(FlagSet& flags, Options& o) {
  flags.Synopsis("--dir=DIR [--flag=value ...]");
  flags.String("dir", &o.dir, "DIR", "the directory").Required();
  flags.Number("port", &o.port, "N", "port to bind").Max(65535);
  flags.Number("budget_mb", &o.budget_mb, "N", "memory budget").Range(0, int64_t{1} << 40);
  flags.Number("share", &o.share, "F", "least share").RangeAbove(0, 1);
  flags.Bool("wal", &o.wal, "write-ahead log");
  flags.Bool("verbose", &o.verbose, "say more");
  flags.Section("More:");
  flags.Choice<Color>("color", &o.color, {{"red", Color::kRed}, {"green", Color::kGreen}},
                      "the color");
  flags.Millis("grace_ms", &o.grace, "grace period").Min(0);
  flags.Number("batch", &o.batch, "N", "override of the batch size");
  flags.Custom("method", "M", "a method name", [&o](const Flag& flag) {
    if (flag.value == "bad") return absl::InvalidArgumentError("--method: 'bad' is bad");
    o.method = std::string(flag.value);
    return absl::OkStatus();
  });
}

// The usage with its wrapped lines joined: runs of whitespace as one space.
std::string OneLine(const std::string& usage) {
  std::string out;
  for (char c : usage) {
    if (c == ' ' || c == '\n') {
      if (out.empty() || out.back() != ' ') out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// Parses `args` (no program name) into *o.
absl::Status Parse(std::vector<std::string> args, Options* o) {
  FlagSet flags("ember-test");
  Declare(flags, *o);
  std::vector<char*> argv = {const_cast<char*>("ember-test")};
  for (std::string& a : args) argv.push_back(a.data());
  bool help = false, version = false;
  return flags.ParseCommandLine(static_cast<int>(argv.size()), argv.data(), &help, &version);
}

std::string Message(std::vector<std::string> args) {
  Options o;
  return std::string(Parse(std::move(args), &o).message());
}

TEST(FlagSetTest, UsageShowsEveryFlagWithItsDefaultAndRange) {
  Options o;
  FlagSet flags("ember-test");
  Declare(flags, o);
  const std::string usage = OneLine(flags.Usage());
  EXPECT_THAT(flags.Usage(), StartsWith("usage: ember-test --dir=DIR [--flag=value ...]\n"));
  EXPECT_THAT(usage, HasSubstr("--dir=DIR"));
  EXPECT_THAT(usage, HasSubstr("the directory. Required."));
  EXPECT_THAT(usage, HasSubstr("port to bind. Range: <= 65535. Default: 7000."));
  EXPECT_THAT(usage, HasSubstr("Range: [0, 2^40]. Default: 1024."));
  EXPECT_THAT(usage, HasSubstr("Range: (0, 1]. Default: 0.25."));
  EXPECT_THAT(usage, HasSubstr("--wal=true|false"));
  EXPECT_THAT(usage, HasSubstr("--verbose "));
  EXPECT_THAT(flags.Usage(), HasSubstr("\nMore:\n"));
  EXPECT_THAT(usage, HasSubstr("--color=red|green"));
  EXPECT_THAT(usage, HasSubstr("the color. Default: green."));
  EXPECT_THAT(usage, HasSubstr("grace period. Range: >= 0. Default: 5000."));
  EXPECT_THAT(usage, HasSubstr("--method=M"));
  // The default is the field's value when declared.
  Options changed;
  changed.port = 8080;
  FlagSet other("ember-test");
  Declare(other, changed);
  EXPECT_THAT(other.Usage(), HasSubstr("Default: 8080."));
}

TEST(FlagSetTest, ParsesIntoTheFields) {
  Options o;
  ASSERT_TRUE(Parse({"--dir=/d", "--port=65535", "--budget_mb=0", "--share=1", "--wal=false",
                     "--verbose", "--color=red", "--grace_ms=250", "--batch=64", "--method=Pull"},
                    &o)
                  .ok());
  EXPECT_EQ(o.dir, "/d");
  EXPECT_EQ(o.port, 65535u);
  EXPECT_EQ(o.budget_mb, 0);
  EXPECT_EQ(o.share, 1.0);
  EXPECT_FALSE(o.wal);
  EXPECT_TRUE(o.verbose);
  EXPECT_EQ(o.color, Color::kRed);
  EXPECT_EQ(o.grace, absl::Milliseconds(250));
  EXPECT_EQ(o.batch, 64u);
  EXPECT_EQ(o.method, "Pull");
}

TEST(FlagSetTest, UnsetFlagsKeepTheirDefaults) {
  Options o;
  ASSERT_TRUE(Parse({"--dir=/d"}, &o).ok());
  const Options defaults;
  EXPECT_EQ(o.port, defaults.port);
  EXPECT_EQ(o.grace, defaults.grace);
  EXPECT_FALSE(o.batch.has_value());
}

TEST(FlagSetTest, RangesAreChecked) {
  EXPECT_EQ(Message({"--dir=/d", "--port=65536"}), "--port must be <= 65535, not 65536");
  EXPECT_EQ(Message({"--dir=/d", "--budget_mb=-1"}), "--budget_mb must be in [0, 2^40], not -1");
  EXPECT_EQ(Message({"--dir=/d", "--share=0"}), "--share must be in (0, 1], not 0");
  EXPECT_EQ(Message({"--dir=/d", "--share=1.5"}), "--share must be in (0, 1], not 1.5");
  EXPECT_EQ(Message({"--dir=/d", "--grace_ms=-1"}), "--grace_ms must be >= 0, not -1");
}

TEST(FlagSetTest, BadValuesNameTheFlag) {
  EXPECT_EQ(Message({"--dir=/d", "--port=abc"}), "--port: bad number 'abc'");
  EXPECT_EQ(Message({"--dir=/d", "--port=-1"}), "--port: bad number '-1'");
  EXPECT_EQ(Message({"--dir=/d", "--port=1e3"}), "--port: bad number '1e3'");
  EXPECT_EQ(Message({"--dir=/d", "--port="}), "--port: bad number ''");
  EXPECT_EQ(Message({"--dir=/d", "--port"}), "--port needs =value");
  EXPECT_EQ(Message({"--dir=/d", "--wal=maybe"}), "--wal: expected true or false");
  EXPECT_EQ(Message({"--dir=/d", "--color=blue"}), "--color: expected red or green, got 'blue'");
  EXPECT_EQ(Message({"--dir=/d", "--method=bad"}), "--method: 'bad' is bad");
}

TEST(FlagSetTest, UnknownFlagsStrayArgumentsAndMissingRequiredOnes) {
  EXPECT_EQ(Message({"--dir=/d", "--no_such_flag=1"}), "unknown flag --no_such_flag");
  EXPECT_EQ(Message({"--dir=/d", "stray"}), "unexpected argument 'stray'");
  EXPECT_EQ(Message({"--port=1"}), "--dir is required");
}

TEST(FlagSetTest, ForCommandNamesTheCommandInItsErrors) {
  uint32_t to = 0;
  bool dry_run = false;
  FlagSet flags("emberctl");
  flags.ForCommand("slots move");
  flags.Number("to", &to, "N", "target").Required();
  flags.Bool("dry_run", &dry_run, "plan only");
  EXPECT_EQ(flags.Parse({Flag{"bogus", "1", true}}).message(),
            "unknown flag --bogus for 'slots move'");
  EXPECT_EQ(flags.Parse({Flag{"dry_run", "", false}}).message(), "'slots move' needs --to");
}

TEST(FlagSetTest, FlagsSynopsisListsRequiredFlagsFirst) {
  uint32_t to = 0;
  bool dry_run = false;
  std::string slots;
  FlagSet flags("emberctl");
  flags.Bool("dry_run", &dry_run, "plan only");
  flags.Number("to", &to, "N", "target").Required();
  flags.String("slots", &slots, "LIST", "which").Required();
  EXPECT_EQ(flags.FlagsSynopsis(), "--to=N --slots=LIST [--dry_run]");
}

TEST(FlagSetTest, EnvironmentFillsFlagsNotGiven) {
  setenv("EMBER_FLAGS_TEST_DIR", "/from/env", 1);
  FlagSet with_env("ember-test");
  Options e;
  with_env.String("dir", &e.dir, "DIR", "the directory").Required().Env({"EMBER_FLAGS_TEST_DIR"});
  with_env.Number("port", &e.port, "N", "port").Max(65535).Env({"EMBER_FLAGS_TEST_PORT"});
  ASSERT_TRUE(with_env.Parse({}).ok());
  EXPECT_EQ(e.dir, "/from/env");
  EXPECT_THAT(OneLine(with_env.Usage()), HasSubstr("Required; default: $EMBER_FLAGS_TEST_DIR."));
  EXPECT_THAT(OneLine(with_env.Usage()), HasSubstr("Default: $EMBER_FLAGS_TEST_PORT, else 7000."));
  // The flag wins over the variable; a bad variable is named.
  Options f;
  FlagSet again("ember-test");
  again.String("dir", &f.dir, "DIR", "").Required().Env({"EMBER_FLAGS_TEST_DIR"});
  again.Number("port", &f.port, "N", "").Max(65535).Env({"EMBER_FLAGS_TEST_PORT"});
  setenv("EMBER_FLAGS_TEST_PORT", "99999", 1);
  const absl::Status s = again.Parse({Flag{"dir", "/flag", true}});
  EXPECT_EQ(s.message(), "$EMBER_FLAGS_TEST_PORT=99999: --port must be <= 65535, not 99999");
  unsetenv("EMBER_FLAGS_TEST_DIR");
  unsetenv("EMBER_FLAGS_TEST_PORT");
  FlagSet none("ember-test");
  Options g;
  none.String("dir", &g.dir, "DIR", "").Required().Env({"EMBER_FLAGS_TEST_DIR"});
  EXPECT_EQ(none.Parse({}).message(), "--dir (or $EMBER_FLAGS_TEST_DIR) is required");
}

// RunMain with `args`; sets *out and *err to what it printed.
int RunTest(std::vector<std::string> args, std::string* out, std::string* err,
            absl::Status run_status = absl::OkStatus()) {
  std::vector<char*> argv = {const_cast<char*>("ember-test")};
  for (std::string& a : args) argv.push_back(a.data());
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  const int code = RunMain<Options>(
      {"ember-test", "test", Declare, nullptr, [run_status](const Options&) { return run_status; }},
      static_cast<int>(argv.size()), argv.data());
  *out = testing::internal::GetCapturedStdout();
  *err = testing::internal::GetCapturedStderr();
  return code;
}

TEST(RunMainTest, HelpPrintsTheUsageAndExitsZero) {
  std::string out, err;
  for (const char* flag : {"--help", "-h"}) {
    EXPECT_EQ(RunTest({flag}, &out, &err), 0);
    EXPECT_THAT(out, StartsWith("usage: ember-test"));
    EXPECT_THAT(out, HasSubstr("--version"));
    EXPECT_THAT(out, HasSubstr("--log_format=text|json"));
    EXPECT_EQ(err, "");
  }
}

TEST(RunMainTest, VersionPrintsTheBuildAndExitsZero) {
  std::string out, err;
  // Even without the required flags.
  EXPECT_EQ(RunTest({"--version"}, &out, &err), 0);
  EXPECT_EQ(out, absl::StrCat("ember-test ", BuildVersion(), " (commit ", BuildCommit(), ")\n"));
  EXPECT_FALSE(BuildVersion().empty());
  EXPECT_FALSE(BuildCommit().empty());
}

TEST(RunMainTest, UsageErrorsPrintOneLineAndAHintAndExitTwo) {
  std::string out, err;
  EXPECT_EQ(RunTest({"--dir=/d", "--port=x"}, &out, &err), 2);
  EXPECT_EQ(err, "ember-test: --port: bad number 'x'\nsee 'ember-test --help'\n");
  EXPECT_EQ(out, "");
  EXPECT_EQ(RunTest({"--dir=/d", "--log_format=xml"}, &out, &err), 2);
  EXPECT_THAT(err, StartsWith("ember-test: --log_format"));
}

TEST(RunMainTest, RunsAndMapsTheOutcome) {
  std::string out, err;
  EXPECT_EQ(RunTest({"--dir=/d", "--log_format=json"}, &out, &err), 0);
  EXPECT_EQ(RunTest({"--dir=/d"}, &out, &err, absl::UnavailableError("down")), 1);
  EXPECT_EQ(err, "ember-test: UNAVAILABLE: down\n");
}

}  // namespace
}  // namespace ember
