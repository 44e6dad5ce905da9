// Copyright 2026 The Ember Authors.
//
// Checkpoint file digests (shard_snapshot.h): sizes and zlib crc32s of the files a
// shard wrote, and their verification before a restore reads them.

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/checkpoint/shard_snapshot.h"

namespace ember {
namespace {

constexpr size_t kReadChunk = size_t{1} << 20;

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

// NOT_FOUND when the file is absent, so VerifyFiles can report it as missing.
absl::Status OpenError(const std::string& path) {
  const int error = errno;
  const std::string message = absl::StrCat("open ", path, ": ", std::strerror(error));
  return error == ENOENT ? absl::NotFoundError(message) : absl::UnavailableError(message);
}

}  // namespace

absl::StatusOr<v1::CheckpointFile> DigestFile(const std::string& checkpoint_dir,
                                              const std::string& relative_path) {
  const std::string path = (std::filesystem::path(checkpoint_dir) / relative_path).string();
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (file == nullptr) return OpenError(path);
  // One buffer per call: checkpoints digest a few files, each read straight through.
  std::vector<unsigned char> buffer(kReadChunk);
  uLong crc = crc32(0L, Z_NULL, 0);
  uint64_t size = 0;
  while (true) {
    const size_t n = std::fread(buffer.data(), 1, buffer.size(), file.get());
    if (n > 0) {
      crc = crc32(crc, buffer.data(), static_cast<uInt>(n));
      size += n;
    }
    if (n < buffer.size()) break;
  }
  if (std::ferror(file.get())) {
    return absl::UnavailableError(absl::StrCat("read ", path, ": ", std::strerror(errno)));
  }
  v1::CheckpointFile digest;
  digest.set_path(relative_path);
  digest.set_size(size);
  digest.set_crc32(static_cast<uint32_t>(crc));
  return digest;
}

absl::StatusOr<std::vector<v1::CheckpointFile>> DigestFiles(const std::string& checkpoint_dir,
                                                            const std::string& subdir) {
  const std::filesystem::path root(checkpoint_dir);
  std::vector<std::string> paths;
  std::error_code error;
  std::filesystem::recursive_directory_iterator it(root / subdir, error), end;
  for (; !error && it != end; it.increment(error)) {
    if (!it->is_regular_file(error) || error) continue;
    paths.push_back(it->path().lexically_relative(root).generic_string());
  }
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("list ", (root / subdir).string(), ": ", error.message()));
  }
  std::sort(paths.begin(), paths.end());
  std::vector<v1::CheckpointFile> files;
  files.reserve(paths.size());
  for (const std::string& path : paths) {
    absl::StatusOr<v1::CheckpointFile> digest = DigestFile(checkpoint_dir, path);
    // A file that vanished between listing and reading is an IO problem here.
    if (!digest.ok()) return absl::UnavailableError(digest.status().message());
    files.push_back(*std::move(digest));
  }
  return files;
}

absl::Status VerifyFiles(const std::string& checkpoint_dir,
                         absl::Span<const v1::CheckpointFile> files) {
  for (const v1::CheckpointFile& expected : files) {
    const std::string where = absl::StrCat(checkpoint_dir, "/", expected.path());
    std::error_code error;
    const uintmax_t size =
        std::filesystem::file_size(std::filesystem::path(checkpoint_dir) / expected.path(), error);
    if (error) {
      if (error == std::errc::no_such_file_or_directory) {
        return absl::DataLossError(absl::StrCat(where, ": missing"));
      }
      return absl::UnavailableError(absl::StrCat("stat ", where, ": ", error.message()));
    }
    // The size first: a truncated file is caught without reading it.
    if (size != expected.size()) {
      return absl::DataLossError(
          absl::StrCat(where, ": size ", size, ", manifest says ", expected.size()));
    }
    absl::StatusOr<v1::CheckpointFile> actual = DigestFile(checkpoint_dir, expected.path());
    if (absl::IsNotFound(actual.status())) {
      return absl::DataLossError(absl::StrCat(where, ": missing"));
    }
    EMBER_RETURN_IF_ERROR(actual.status());
    if (actual->size() != expected.size()) {
      return absl::DataLossError(
          absl::StrCat(where, ": size ", actual->size(), ", manifest says ", expected.size()));
    }
    if (actual->crc32() != expected.crc32()) {
      return absl::DataLossError(absl::StrCat(where, ": crc32 mismatch"));
    }
  }
  return absl::OkStatus();
}

}  // namespace ember
