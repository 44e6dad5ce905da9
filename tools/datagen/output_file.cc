// Copyright 2026 The Ember Authors.

#include "tools/datagen/output_file.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ember::datagen {
namespace {

constexpr size_t kBufferBytes = 1 << 20;

absl::Status IoError(const std::string& what, const std::string& path, int error) {
  const std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(error));
  return error == ENOENT                     ? absl::NotFoundError(message)
         : error == EACCES || error == EPERM ? absl::PermissionDeniedError(message)
         : error == ENOSPC                   ? absl::ResourceExhaustedError(message)
                                             : absl::InternalError(message);
}

}  // namespace

absl::StatusOr<std::unique_ptr<OutputFile>> OutputFile::Open(const std::string& path, bool gzip) {
  errno = 0;
  void* handle = nullptr;
  if (gzip) {
    // Level 1: TSV compresses well even so, and level 6 would triple the run time.
    handle = gzopen(path.c_str(), "wb1");
  } else {
    handle = std::fopen(path.c_str(), "wb");
  }
  if (handle == nullptr) return IoError("cannot create", path, errno != 0 ? errno : EIO);
  std::unique_ptr<OutputFile> file(new OutputFile(path, handle, gzip));
  file->buffer_.reserve(kBufferBytes);
  return file;
}

OutputFile::~OutputFile() {
  if (handle_ == nullptr) return;
  if (gzip_) {
    gzclose(static_cast<gzFile>(handle_));
  } else {
    std::fclose(static_cast<FILE*>(handle_));
  }
}

absl::Status OutputFile::Append(absl::string_view data) {
  buffer_.append(data.data(), data.size());
  if (buffer_.size() >= kBufferBytes) return Flush();
  return absl::OkStatus();
}

absl::Status OutputFile::Flush() {
  if (buffer_.empty()) return absl::OkStatus();
  errno = 0;
  bool ok;
  if (gzip_) {
    ok = gzwrite(static_cast<gzFile>(handle_), buffer_.data(),
                 static_cast<unsigned>(buffer_.size())) == static_cast<int>(buffer_.size());
  } else {
    ok = std::fwrite(buffer_.data(), 1, buffer_.size(), static_cast<FILE*>(handle_)) ==
         buffer_.size();
  }
  buffer_.clear();
  if (!ok) return IoError("cannot write", path_, errno != 0 ? errno : EIO);
  return absl::OkStatus();
}

absl::Status OutputFile::Close() {
  absl::Status status = Flush();
  errno = 0;
  const bool closed = gzip_ ? gzclose(static_cast<gzFile>(handle_)) == Z_OK
                            : std::fclose(static_cast<FILE*>(handle_)) == 0;
  handle_ = nullptr;
  if (!closed && status.ok()) status = IoError("cannot close", path_, errno != 0 ? errno : EIO);
  return status;
}

}  // namespace ember::datagen
