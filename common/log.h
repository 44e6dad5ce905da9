// Copyright 2026 The Ember Authors.
//
// Logging in one place: every binary's diagnostics go to stderr as one line per
// statement, with the time (RFC 3339, UTC, millisecond precision), the level and the
// component (the binary's short name, set once by InitLogging in main):
//
//   EMBER_LOG(INFO) << "shard " << id << " registered";
//
//   text: 2026-12-02T05:40:12.123Z INFO ps: shard 1 registered
//   json: {"time":"2026-12-02T05:40:12.123Z","level":"INFO","component":"ps","msg":"shard 1
//   registered"}
//
// Levels: DEBUG, INFO, WARNING, ERROR; every level is written (there is no threshold).
// A trailing newline of the message is dropped; in json the message is escaped (quotes,
// backslashes, newlines and other control characters), in text it is written as is.
//
// Thread-safety: EMBER_LOG may be used from any thread; each line is written whole (one
// write(2) of the finished line), so lines from several threads never interleave.
// Readiness and protocol lines on stdout ("listening on ...") and a command's own output
// are not log lines and do not go through here.

#ifndef EMBER_COMMON_LOG_H_
#define EMBER_COMMON_LOG_H_

#include <sstream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ember {

enum class LogLevel { kDebug, kInfo, kWarning, kError };
enum class LogFormat { kText, kJson };

// "text" or "json"; INVALID_ARGUMENT naming the value otherwise.
absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view text);

// Called once in main before anything logs (the shared main does it): the component is
// the binary's short name ("ps", "coordinator", "serving", "worker", "emberctl",
// "datagen", "bench"). Before it is called: text format, component "ember".
// Thread-safe (a later call changes the lines written after it).
void InitLogging(absl::string_view component, LogFormat format);

// `text` as the inside of a JSON string (without the quotes): quotes, backslashes and
// control characters escaped. The logger's JSON lines and ember-bench's figures use it.
std::string JsonEscape(absl::string_view text);

namespace log_internal {

// "DEBUG", "INFO", "WARNING" or "ERROR".
absl::string_view LevelName(LogLevel level);

// The finished line for `message` (ending in '\n'), as EMBER_LOG writes it. Exposed for
// tests; a trailing '\n' of `message` is dropped.
std::string FormatLine(LogFormat format, absl::Time time, LogLevel level,
                       absl::string_view component, absl::string_view message);

// One log statement: collects the message and writes the whole line to stderr when
// destroyed (at the end of the full expression). Not for direct use: use EMBER_LOG.
class LogMessage {
 public:
  explicit LogMessage(LogLevel level) : level_(level) {}
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  ~LogMessage();

  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

inline constexpr LogLevel kLevelDEBUG = LogLevel::kDebug;
inline constexpr LogLevel kLevelINFO = LogLevel::kInfo;
inline constexpr LogLevel kLevelWARNING = LogLevel::kWarning;
inline constexpr LogLevel kLevelERROR = LogLevel::kError;

}  // namespace log_internal
}  // namespace ember

// EMBER_LOG(INFO|WARNING|ERROR|DEBUG) << ...;   one line to stderr per statement.
#define EMBER_LOG(level) \
  ::ember::log_internal::LogMessage(::ember::log_internal::kLevel##level).stream()

#endif  // EMBER_COMMON_LOG_H_
