// Copyright 2026 The Ember Authors.

#include "worker/data/file_source.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ember::worker {
namespace {

constexpr size_t kInitialBufferBytes = size_t{1} << 20;
constexpr unsigned kZlibBufferBytes = 1u << 17;

absl::Status FromErrorCode(const std::error_code& ec, absl::string_view what) {
  return absl::ErrnoToStatus(ec.value(), what);
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ListDataFiles(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    if (ec && ec != std::errc::no_such_file_or_directory) {
      return FromErrorCode(ec, absl::StrCat("cannot stat ", path));
    }
    return absl::NotFoundError(absl::StrCat("data path ", path, " does not exist"));
  }
  if (!fs::is_directory(status)) return std::vector<std::string>{path};

  std::vector<std::string> names;
  fs::directory_iterator it(path, ec);
  if (ec) return FromErrorCode(ec, absl::StrCat("cannot list ", path));
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return FromErrorCode(ec, absl::StrCat("cannot list ", path));
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    std::error_code file_ec;
    if (!it->is_regular_file(file_ec)) continue;  // follows symlinks
    names.push_back(name);
  }
  if (ec) return FromErrorCode(ec, absl::StrCat("cannot list ", path));
  if (names.empty()) {
    return absl::NotFoundError(absl::StrCat("data directory ", path, " has no data files"));
  }
  std::sort(names.begin(), names.end());
  std::vector<std::string> files;
  files.reserve(names.size());
  for (const std::string& name : names) files.push_back((fs::path(path) / name).string());
  return files;
}

absl::StatusOr<std::unique_ptr<LineSource>> LineSource::Open(const std::string& path) {
  errno = 0;
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    const int err = errno;
    if (err == 0) return absl::ResourceExhaustedError(absl::StrCat("gzopen ", path, ": no memory"));
    return absl::ErrnoToStatus(err, absl::StrCat("cannot open ", path));
  }
  gzbuffer(file, kZlibBufferBytes);
  return std::unique_ptr<LineSource>(new LineSource(path, file));
}

LineSource::LineSource(std::string path, gzFile_s* file)
    : path_(std::move(path)),
      file_(file),
      buf_(new char[kInitialBufferBytes]),
      capacity_(kInitialBufferBytes) {}

LineSource::~LineSource() { gzclose(file_); }

absl::Status LineSource::Fill() {
  if (begin_ > 0) {
    std::memmove(buf_.get(), buf_.get() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == capacity_) {
    if (capacity_ >= kMaxLineBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ":", next_line_, ": line longer than ", kMaxLineBytes, " bytes"));
    }
    const size_t capacity = std::min(capacity_ * 2, kMaxLineBytes);
    std::unique_ptr<char[]> buf(new char[capacity]);
    std::memcpy(buf.get(), buf_.get(), end_);
    buf_ = std::move(buf);
    capacity_ = capacity;
  }
  const int n = gzread(file_, buf_.get() + end_, static_cast<unsigned>(capacity_ - end_));
  int code = Z_OK;
  const char* message = nullptr;
  if (n < 0) {
    message = gzerror(file_, &code);
  } else if (n == 0) {
    eof_ = true;
    // A gzip stream cut short reads as a clean end with Z_BUF_ERROR pending.
    message = gzerror(file_, &code);
    if (code == Z_OK) return absl::OkStatus();
  } else {
    end_ += static_cast<size_t>(n);
    return absl::OkStatus();
  }
  if (code == Z_ERRNO) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot read ", path_));
  }
  if (code == Z_MEM_ERROR) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot read ", path_, ": no memory"));
  }
  return absl::DataLossError(
      absl::StrCat(path_, ": corrupt gzip data (", message != nullptr ? message : "unknown", ")"));
}

absl::StatusOr<bool> LineSource::Next(absl::string_view* line) {
  size_t scanned = begin_;  // bytes before this are known to hold no '\n'
  while (true) {
    const char* start = buf_.get() + begin_;
    const void* nl = std::memchr(buf_.get() + scanned, '\n', end_ - scanned);
    size_t len;
    if (nl != nullptr) {
      len = static_cast<const char*>(nl) - start;
      begin_ += len + 1;
    } else if (eof_) {
      if (begin_ == end_) return false;
      len = end_ - begin_;
      begin_ = end_;
    } else {
      scanned = end_ - begin_;  // offset after Fill moves the bytes to the front
      if (absl::Status s = Fill(); !s.ok()) return s;
      scanned += begin_;
      continue;
    }
    if (len > 0 && start[len - 1] == '\r') --len;
    *line = absl::string_view(start, len);
    ++next_line_;
    return true;
  }
}

}  // namespace ember::worker
