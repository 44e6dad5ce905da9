// Copyright 2026 The Ember Authors.
//
// AuditFile: a JSON-lines mirror of the coordinator's audit log (admin.proto
// AuditEntry, kept durably in the coordinator's RocksDB) for log shippers and
// `tail -f`. One object per line, in sequence order:
//
//   {"sequence":7,"time":"2026-11-30T21:40:02.123456Z","who":"peer=ipv4:10.0.0.7:5123
//    cert=ember-admin","what":"set_slot_owner slot=5 shard=1 (was 0)",
//    "epoch_before":3,"epoch_after":4}
//
// The database is the record; the file follows it. A change is written to the
// database first, then appended here, so a crash between the two leaves the file one
// change short (or with a partial last line, which the next append ends with a newline
// and readers skip): Open reads the last complete sequence in the file and
// CoordinatorState appends what is missing before serving.
//
// Thread-safety: not thread-safe; CoordinatorState calls it under its write lock.

#ifndef EMBER_SERVER_COORDINATOR_AUDIT_FILE_H_
#define EMBER_SERVER_COORDINATOR_AUDIT_FILE_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ember/v1/admin.pb.h"

namespace ember {

class AuditFile {
 public:
  // Opens `path` for appending (creating it), and reads the sequence of its last
  // complete line. INVALID_ARGUMENT naming the path when it cannot be opened;
  // DATA_LOSS when the last line is not an audit line.
  static absl::StatusOr<std::unique_ptr<AuditFile>> Open(const std::string& path);
  ~AuditFile();

  AuditFile(const AuditFile&) = delete;
  AuditFile& operator=(const AuditFile&) = delete;

  // The highest sequence in the file; 0 for an empty file.
  uint64_t last_sequence() const { return last_sequence_; }

  // Appends entries with a sequence above last_sequence() and flushes them to the
  // kernel (and fsyncs). INTERNAL when the write fails.
  absl::Status Append(const std::vector<v1::AuditEntry>& entries);

  // One entry as its JSON line (without the newline).
  static std::string Line(const v1::AuditEntry& entry);

 private:
  AuditFile(std::string path, std::FILE* file, uint64_t last_sequence)
      : path_(std::move(path)), file_(file), last_sequence_(last_sequence) {}

  const std::string path_;
  std::FILE* const file_;
  uint64_t last_sequence_;
  bool torn_ = false;  // the file ends in a partial line
};

}  // namespace ember

#endif  // EMBER_SERVER_COORDINATOR_AUDIT_FILE_H_
