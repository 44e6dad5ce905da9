// Copyright 2026 The Ember Authors.
//
// common/log.h: the text and json lines, their RFC 3339 UTC timestamps, json escaping,
// levels, the component, and whole lines from several threads.

#include "common/log.h"

#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace ember {
namespace {

using log_internal::FormatLine;

// 2026-12-02T05:40:12.123Z
absl::Time Fixed() {
  return absl::FromCivil(absl::CivilSecond(2026, 12, 2, 5, 40, 12), absl::UTCTimeZone()) +
         absl::Milliseconds(123) + absl::Microseconds(456);
}

const char kTimePattern[] = "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z";

// Lines that `body` writes to stderr, each without its '\n'; restores the default
// settings after.
template <typename Body>
std::vector<std::string> CaptureLines(Body body) {
  testing::internal::CaptureStderr();
  body();
  std::string out = testing::internal::GetCapturedStderr();
  InitLogging("ember", LogFormat::kText);
  EXPECT_TRUE(out.empty() || out.back() == '\n') << out;
  std::vector<std::string> lines = absl::StrSplit(out, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

TEST(ParseLogFormatTest, TextAndJson) {
  EXPECT_EQ(*ParseLogFormat("text"), LogFormat::kText);
  EXPECT_EQ(*ParseLogFormat("json"), LogFormat::kJson);
}

TEST(ParseLogFormatTest, OtherValuesAreInvalidAndNamed) {
  for (absl::string_view bad : {"", "JSON", "xml", "text "}) {
    absl::StatusOr<LogFormat> format = ParseLogFormat(bad);
    ASSERT_FALSE(format.ok()) << bad;
    EXPECT_EQ(format.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(format.status().message().find(absl::StrCat("'", bad, "'")), std::string::npos)
        << format.status();
  }
}

TEST(FormatLineTest, Text) {
  EXPECT_EQ(FormatLine(LogFormat::kText, Fixed(), LogLevel::kInfo, "ps", "shard 1 registered"),
            "2026-12-02T05:40:12.123Z INFO ps: shard 1 registered\n");
}

TEST(FormatLineTest, Json) {
  EXPECT_EQ(FormatLine(LogFormat::kJson, Fixed(), LogLevel::kInfo, "ps", "shard 1 registered"),
            "{\"time\":\"2026-12-02T05:40:12.123Z\",\"level\":\"INFO\",\"component\":\"ps\","
            "\"msg\":\"shard 1 registered\"}\n");
}

TEST(FormatLineTest, TimeIsUtcWithMillisecondsTruncated) {
  // Midnight rollover and zero padding; sub-millisecond digits are cut, not rounded.
  absl::Time t = absl::FromCivil(absl::CivilSecond(2027, 1, 5, 0, 0, 7), absl::UTCTimeZone()) +
                 absl::Microseconds(9999);
  EXPECT_EQ(FormatLine(LogFormat::kText, t, LogLevel::kInfo, "c", "m"),
            "2027-01-05T00:00:07.009Z INFO c: m\n");
  EXPECT_EQ(FormatLine(LogFormat::kText, absl::UnixEpoch(), LogLevel::kInfo, "c", "m"),
            "1970-01-01T00:00:00.000Z INFO c: m\n");
}

TEST(FormatLineTest, Levels) {
  const std::pair<LogLevel, const char*> levels[] = {{LogLevel::kDebug, "DEBUG"},
                                                     {LogLevel::kInfo, "INFO"},
                                                     {LogLevel::kWarning, "WARNING"},
                                                     {LogLevel::kError, "ERROR"}};
  for (const auto& [level, name] : levels) {
    EXPECT_EQ(FormatLine(LogFormat::kText, Fixed(), level, "ps", "m"),
              absl::StrCat("2026-12-02T05:40:12.123Z ", name, " ps: m\n"));
    EXPECT_EQ(FormatLine(LogFormat::kJson, Fixed(), level, "ps", "m"),
              absl::StrCat("{\"time\":\"2026-12-02T05:40:12.123Z\",\"level\":\"", name,
                           "\",\"component\":\"ps\",\"msg\":\"m\"}\n"));
  }
}

TEST(FormatLineTest, TrailingNewlinesAreDropped) {
  EXPECT_EQ(FormatLine(LogFormat::kText, Fixed(), LogLevel::kInfo, "ps", "done\n\n"),
            "2026-12-02T05:40:12.123Z INFO ps: done\n");
  EXPECT_EQ(FormatLine(LogFormat::kJson, Fixed(), LogLevel::kInfo, "ps", "done\n"),
            "{\"time\":\"2026-12-02T05:40:12.123Z\",\"level\":\"INFO\",\"component\":\"ps\","
            "\"msg\":\"done\"}\n");
}

TEST(JsonEscapeTest, QuotesBackslashesNewlinesAndControlCharacters) {
  EXPECT_EQ(JsonEscape("plain text: 1/2"), "plain text: 1/2");
  EXPECT_EQ(JsonEscape("say \"hi\""), "say \\\"hi\\\"");
  EXPECT_EQ(JsonEscape("C:\\dir"), "C:\\\\dir");
  EXPECT_EQ(JsonEscape("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(JsonEscape("\b\f"), "\\b\\f");
  EXPECT_EQ(JsonEscape(std::string("\x01\x1f\x7f", 3)), "\\u0001\\u001f\\u007f");
  EXPECT_EQ(JsonEscape(std::string("nul\0end", 7)), "nul\\u0000end");
  EXPECT_EQ(JsonEscape("caf\xc3\xa9"), "caf\xc3\xa9");  // UTF-8 passes through
}

TEST(FormatLineTest, JsonEscapesMessageAndComponent) {
  EXPECT_EQ(
      FormatLine(LogFormat::kJson, Fixed(), LogLevel::kError, "p\"s", "bad \"key\"\nnext\x02"),
      "{\"time\":\"2026-12-02T05:40:12.123Z\",\"level\":\"ERROR\",\"component\":\"p\\\"s\","
      "\"msg\":\"bad \\\"key\\\"\\nnext\\u0002\"}\n");
}

TEST(EmberLogTest, DefaultsToTextAndComponentEmber) {
  std::vector<std::string> lines = CaptureLines([] { EMBER_LOG(INFO) << "hello " << 42; });
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(
      std::regex_match(lines[0], std::regex(absl::StrCat(kTimePattern, " INFO ember: hello 42"))))
      << lines[0];
}

TEST(EmberLogTest, TextLineWithComponentAndLevel) {
  std::vector<std::string> lines = CaptureLines([] {
    InitLogging("ps", LogFormat::kText);
    EMBER_LOG(INFO) << "shard " << 1 << " registered";
    EMBER_LOG(WARNING) << "slow";
    EMBER_LOG(ERROR) << absl::InternalError("boom");
    EMBER_LOG(DEBUG) << "detail";
  });
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_TRUE(std::regex_match(
      lines[0], std::regex(absl::StrCat(kTimePattern, " INFO ps: shard 1 registered"))))
      << lines[0];
  EXPECT_TRUE(
      std::regex_match(lines[1], std::regex(absl::StrCat(kTimePattern, " WARNING ps: slow"))))
      << lines[1];
  EXPECT_TRUE(std::regex_match(lines[2],
                               std::regex(absl::StrCat(kTimePattern, " ERROR ps: INTERNAL: boom"))))
      << lines[2];
  EXPECT_TRUE(
      std::regex_match(lines[3], std::regex(absl::StrCat(kTimePattern, " DEBUG ps: detail"))))
      << lines[3];
}

TEST(EmberLogTest, JsonLine) {
  std::vector<std::string> lines = CaptureLines([] {
    InitLogging("coordinator", LogFormat::kJson);
    EMBER_LOG(WARNING) << "job \"a\"\nfailed";
  });
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(std::regex_match(
      lines[0], std::regex(absl::StrCat("\\{\"time\":\"", kTimePattern,
                                        "\",\"level\":\"WARNING\",\"component\":\"coordinator\","
                                        "\"msg\":\"job \\\\\"a\\\\\"\\\\nfailed\"\\}"))))
      << lines[0];
}

TEST(EmberLogTest, TimeIsNowInUtc) {
  absl::Time before = absl::Now() - absl::Milliseconds(1);
  std::vector<std::string> lines = CaptureLines([] { EMBER_LOG(INFO) << "now"; });
  absl::Time after = absl::Now();
  ASSERT_EQ(lines.size(), 1u);
  std::string stamp = lines[0].substr(0, lines[0].find(' '));
  absl::Time t;
  std::string error;
  ASSERT_TRUE(absl::ParseTime("%Y-%m-%dT%H:%M:%E*SZ", stamp, absl::UTCTimeZone(), &t, &error))
      << stamp << ": " << error;
  EXPECT_GE(t, before);
  EXPECT_LE(t, after);
}

TEST(EmberLogTest, LinesFromSeveralThreadsAreWhole) {
  constexpr int kThreads = 8;
  constexpr int kLines = 200;
  const std::string filler(6000, 'x');  // longer than PIPE_BUF
  std::vector<std::string> lines = CaptureLines([&] {
    InitLogging("worker", LogFormat::kText);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([t, &filler] {
        for (int i = 0; i < kLines; ++i) {
          EMBER_LOG(INFO) << "thread " << t << " line " << i << " " << filler << " end";
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
  });
  ASSERT_EQ(lines.size(), static_cast<size_t>(kThreads * kLines));
  const std::regex whole(
      absl::StrCat(kTimePattern, " INFO worker: thread ([0-9]+) line ([0-9]+) ", filler, " end"));
  std::vector<int> next(kThreads, 0);  // each thread's lines come in its order
  for (const std::string& line : lines) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, whole)) << line.substr(0, 200);
    int t = std::stoi(m[1].str());
    ASSERT_LT(t, kThreads);
    EXPECT_EQ(std::stoi(m[2].str()), next[t]);
    ++next[t];
  }
}

}  // namespace
}  // namespace ember
