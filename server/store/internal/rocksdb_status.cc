// Copyright 2026 The Ember Authors.

#include "server/store/internal/rocksdb_status.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace ember {
namespace {

absl::StatusCode CodeOf(const rocksdb::Status& s) {
  switch (s.code()) {
    case rocksdb::Status::kOk:
      return absl::StatusCode::kOk;
    case rocksdb::Status::kNotFound:
      return absl::StatusCode::kNotFound;
    case rocksdb::Status::kCorruption:
      return absl::StatusCode::kDataLoss;
    case rocksdb::Status::kInvalidArgument:
      return absl::StatusCode::kInvalidArgument;
    case rocksdb::Status::kIOError:
      // SpaceLimit is the SstFileManager's configured cap: the same condition as a
      // full disk from the caller's point of view.
      if (s.subcode() == rocksdb::Status::kNoSpace || s.subcode() == rocksdb::Status::kSpaceLimit) {
        return absl::StatusCode::kResourceExhausted;
      }
      return absl::StatusCode::kUnavailable;
    case rocksdb::Status::kIncomplete:
    case rocksdb::Status::kTimedOut:
    case rocksdb::Status::kBusy:
    case rocksdb::Status::kTryAgain:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

absl::Status FromRocksDb(const rocksdb::Status& s, std::string_view context) {
  const absl::StatusCode code = CodeOf(s);
  if (code == absl::StatusCode::kOk) return absl::OkStatus();
  // Debian's Abseil is built with its own string_view type, not std::string_view.
  return absl::Status(
      code, absl::StrCat(absl::string_view(context.data(), context.size()), ": ", s.ToString()));
}

}  // namespace ember
