// Copyright 2026 The Ember Authors.

#include "common/log.h"

#include <unistd.h>

#include <cerrno>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace ember {
namespace {

// The settings InitLogging sets: the only global state of logging.
struct Settings {
  absl::Mutex mu;
  std::string component ABSL_GUARDED_BY(mu) = "ember";
  LogFormat format ABSL_GUARDED_BY(mu) = LogFormat::kText;
  // Held across a line's write, so that a long line (over PIPE_BUF) or a short write is
  // never interleaved with another thread's line.
  absl::Mutex write_mu;
};

Settings& GetSettings() {
  static Settings* const settings = new Settings();  // never destroyed: logs at exit work
  return *settings;
}

// Writes all of `line` to stderr, retrying on EINTR and short writes. Errors are
// dropped: there is nowhere left to report them.
void WriteToStderr(absl::string_view line) {
  absl::MutexLock lock(&GetSettings().write_mu);
  const char* data = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace

absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view text) {
  if (text == "text") return LogFormat::kText;
  if (text == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(
      absl::StrCat("log format must be text or json, not '", text, "'"));
}

void InitLogging(absl::string_view component, LogFormat format) {
  Settings& settings = GetSettings();
  absl::MutexLock lock(&settings.mu);
  settings.component = std::string(component);
  settings.format = format;
}

std::string JsonEscape(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out;
}

namespace log_internal {

absl::string_view LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarning:
      return "WARNING";
    case LogLevel::kError:
      return "ERROR";
  }
  return "INFO";
}

std::string FormatLine(LogFormat format, absl::Time time, LogLevel level,
                       absl::string_view component, absl::string_view message) {
  while (!message.empty() && message.back() == '\n') message.remove_suffix(1);
  const std::string when = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", time, absl::UTCTimeZone());
  if (format == LogFormat::kJson) {
    return absl::StrCat("{\"time\":\"", when, "\",\"level\":\"", LevelName(level),
                        "\",\"component\":\"", JsonEscape(component), "\",\"msg\":\"",
                        JsonEscape(message), "\"}\n");
  }
  return absl::StrCat(when, " ", LevelName(level), " ", component, ": ", message, "\n");
}

LogMessage::~LogMessage() {
  const absl::Time now = absl::Now();
  std::string component;
  LogFormat format;
  {
    Settings& settings = GetSettings();
    absl::MutexLock lock(&settings.mu);
    component = settings.component;
    format = settings.format;
  }
  WriteToStderr(FormatLine(format, now, level_, component, stream_.str()));
}

}  // namespace log_internal
}  // namespace ember
