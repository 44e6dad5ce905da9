// Copyright 2026 The Ember Authors.

#include "server/coordinator/audit_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace ember {
namespace {

void AppendJsonString(std::string* out, const std::string& text) {
  out->push_back('"');
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20) {
          absl::StrAppendFormat(out, "\\u%04x", c);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

// The sequence of the file's last complete line; 0 for an empty file. Sets *torn when
// the file ends in a partial line (a crash while appending).
absl::StatusOr<uint64_t> LastSequence(const std::string& path, bool* torn) {
  std::ifstream in(path, std::ios::binary);
  std::string line;
  std::string last;
  *torn = false;
  while (std::getline(in, line)) {
    if (in.eof()) {  // no newline after it
      *torn = !line.empty();
      break;
    }
    if (!line.empty()) last = line;
  }
  if (last.empty()) return 0;
  constexpr absl::string_view kKey = "{\"sequence\":";
  const size_t end = last.find(',');
  uint64_t sequence = 0;
  if (!absl::StartsWith(last, kKey) || end == std::string::npos ||
      !absl::SimpleAtoi(absl::string_view(last).substr(kKey.size(), end - kKey.size()),
                        &sequence)) {
    return absl::DataLossError(
        absl::StrCat("audit log '", path, "': the last line is not an audit entry"));
  }
  return sequence;
}

}  // namespace

absl::StatusOr<std::unique_ptr<AuditFile>> AuditFile::Open(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "a");
  if (file == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--audit_log: cannot open '", path, "': ", std::strerror(errno)));
  }
  bool torn = false;
  absl::StatusOr<uint64_t> last = LastSequence(path, &torn);
  if (!last.ok()) {
    std::fclose(file);
    return last.status();
  }
  auto out = std::unique_ptr<AuditFile>(new AuditFile(path, file, *last));
  out->torn_ = torn;
  return out;
}

AuditFile::~AuditFile() { std::fclose(file_); }

std::string AuditFile::Line(const v1::AuditEntry& entry) {
  std::string out =
      absl::StrCat("{\"sequence\":", entry.sequence(), ",\"time\":\"",
                   absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ",
                                    absl::FromUnixMicros(entry.unix_micros()), absl::UTCTimeZone()),
                   "\",\"who\":");
  AppendJsonString(&out, entry.who());
  out.append(",\"what\":");
  AppendJsonString(&out, entry.what());
  absl::StrAppend(&out, ",\"epoch_before\":", entry.epoch_before(),
                  ",\"epoch_after\":", entry.epoch_after(), "}");
  return out;
}

absl::Status AuditFile::Append(const std::vector<v1::AuditEntry>& entries) {
  std::string text = torn_ ? "\n" : "";  // ends a torn line; readers skip it
  uint64_t last = last_sequence_;
  for (const v1::AuditEntry& entry : entries) {
    if (entry.sequence() <= last) continue;
    absl::StrAppend(&text, Line(entry), "\n");
    last = entry.sequence();
  }
  if (last == last_sequence_) return absl::OkStatus();
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0 ||
      fsync(fileno(file_)) != 0) {
    return absl::InternalError(
        absl::StrCat("audit log '", path_, "': write failed: ", std::strerror(errno)));
  }
  last_sequence_ = last;
  torn_ = false;
  return absl::OkStatus();
}

}  // namespace ember
