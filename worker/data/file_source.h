// Copyright 2026 The Ember Authors.
//
// LineSource: reads one data file line by line, plain or gzip (zlib's gzread detects
// gzip by content and passes plain files through), with one reusable buffer.
//
//   EMBER_ASSIGN_OR_RETURN(std::unique_ptr<LineSource> source, LineSource::Open(path));
//   absl::string_view line;
//   while (true) {
//     EMBER_ASSIGN_OR_RETURN(bool more, source->Next(&line));
//     if (!more) break;
//     ...  // `line` is valid until the next call
//   }
//
// Also: ListDataFiles, the sorted file list of a dataset path.
//
// Thread-safety: none.

#ifndef EMBER_WORKER_DATA_FILE_SOURCE_H_
#define EMBER_WORKER_DATA_FILE_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct gzFile_s;  // zlib's gzFile is gzFile_s*; zlib.h stays out of this header

namespace ember::worker {

// The files of a dataset: `path` itself when it is a file, else every regular file
// (symlinks followed) directly in the directory `path` whose name does not start with
// '.', sorted by name, as "path/name". NOT_FOUND for a missing path or a directory
// without such files; the IO error otherwise.
absl::StatusOr<std::vector<std::string>> ListDataFiles(const std::string& path);

class LineSource {
 public:
  // Lines longer than this are an error (a corrupt or binary file).
  static constexpr size_t kMaxLineBytes = size_t{64} << 20;

  // Opens `path`. NOT_FOUND when it is missing; the IO error otherwise.
  static absl::StatusOr<std::unique_ptr<LineSource>> Open(const std::string& path);
  ~LineSource();
  LineSource(const LineSource&) = delete;
  LineSource& operator=(const LineSource&) = delete;

  // Sets `*line` to the next line without its "\n" (and a "\r" before it); the last
  // line may lack the "\n". `*line` stays valid until the next call. Returns false at
  // the end of the file. DATA_LOSS for corrupt or truncated gzip data;
  // INVALID_ARGUMENT for a line over kMaxLineBytes; the IO error otherwise. After an
  // error the source is unusable.
  absl::StatusOr<bool> Next(absl::string_view* line);

  // The 1-based number of the line the next Next() returns.
  uint64_t next_line() const { return next_line_; }
  const std::string& path() const { return path_; }

 private:
  LineSource(std::string path, gzFile_s* file);
  // Reads more bytes after end_; sets eof_ at the end of the file.
  absl::Status Fill();

  const std::string path_;
  gzFile_s* const file_;
  std::unique_ptr<char[]> buf_;
  size_t capacity_ = 0;
  size_t begin_ = 0;  // first unread byte
  size_t end_ = 0;    // end of the valid bytes
  bool eof_ = false;
  uint64_t next_line_ = 1;
};

}  // namespace ember::worker

#endif  // EMBER_WORKER_DATA_FILE_SOURCE_H_
