// Copyright 2026 The Ember Authors.
//
// delta.bin, the file of a DELTA shard snapshot (layout in shard_snapshot.h): a
// header naming the versions it spans, then put and erase records sorted by
// (space, key), then a trailer with the record count.
//
//   EMBER_ASSIGN_OR_RETURN(std::unique_ptr<DeltaWriter> writer,
//                          DeltaWriter::Create(dir + "/delta.bin", base, version));
//   EMBER_RETURN_IF_ERROR(writer->Put("", "version", bytes));
//   EMBER_RETURN_IF_ERROR(writer->Finish());  // now dir/delta.bin exists, synced
//
//   EMBER_RETURN_IF_ERROR(ReadDeltaFile(path, {base, version}, [&](const DeltaRecord& r) {...}));
//
// Neither class is thread-safe.

#ifndef EMBER_SERVER_CHECKPOINT_DELTA_FILE_H_
#define EMBER_SERVER_CHECKPOINT_DELTA_FILE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ember {

inline constexpr char kDeltaFileName[] = "delta.bin";

struct DeltaHeader {
  uint64_t base_version = 0;
  uint64_t version = 0;
};

// One record as read; the views are valid only during the callback.
struct DeltaRecord {
  bool erase = false;
  std::string_view space;  // a table name, or "" for the meta space
  std::string_view key;
  std::string_view value;  // empty for an erase
};

// Writes a delta file to "<path>.tmp" and, on Finish, renames it to `path`, so a
// reader never sees a partial file under the final name.
class DeltaWriter {
 public:
  // Creates "<path>.tmp" (replacing a stale one) and writes the header.
  // Errors: UNAVAILABLE on IO errors.
  static absl::StatusOr<std::unique_ptr<DeltaWriter>> Create(const std::string& path,
                                                             uint64_t base_version,
                                                             uint64_t version);
  // Removes the temporary file unless Finish succeeded.
  ~DeltaWriter();

  DeltaWriter(const DeltaWriter&) = delete;
  DeltaWriter& operator=(const DeltaWriter&) = delete;

  // Appends a record. REQUIRES: (space, key) above the previous record's (INTERNAL
  // otherwise: the format promises sorted, unique keys). INVALID_ARGUMENT for a space
  // over 65535 bytes; UNAVAILABLE on IO errors.
  absl::Status Put(std::string_view space, std::string_view key, std::string_view value);
  absl::Status Erase(std::string_view space, std::string_view key);

  // Writes the trailer, fsyncs the file, renames it to `path` and fsyncs the directory.
  // Errors: UNAVAILABLE on IO errors.
  absl::Status Finish();

  uint64_t records() const { return records_; }

 private:
  DeltaWriter(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  absl::Status Append(bool erase, std::string_view space, std::string_view key,
                      std::string_view value);
  absl::Status Drain();  // writes buffer_ to the file

  const std::string path_;
  int fd_ = -1;
  std::string buffer_;
  std::string last_space_;
  std::string last_key_;
  uint64_t records_ = 0;
  bool finished_ = false;
};

// Reads the delta file at `path`, whose header must equal `expected`, calling fn for
// every record in file order; stops at fn's first error, which it returns. DATA_LOSS
// naming the file if it is malformed (bad magic or format, other versions than
// expected, a truncated record, a record count that does not match the trailer);
// UNAVAILABLE on IO errors.
absl::Status ReadDeltaFile(const std::string& path, const DeltaHeader& expected,
                           const std::function<absl::Status(const DeltaRecord&)>& fn);

}  // namespace ember

#endif  // EMBER_SERVER_CHECKPOINT_DELTA_FILE_H_
