// Copyright 2026 The Ember Authors.
//
// OutputFile: a buffered file writer, plain or gzip (zlib), for ember-datagen's
// large outputs.
//
//   EMBER_ASSIGN_OR_RETURN(std::unique_ptr<OutputFile> file,
//                          OutputFile::Open("/data/train/part-00000.tsv.gz", /*gzip=*/true));
//   EMBER_RETURN_IF_ERROR(file->Append("label\tuser_id\n"));
//   EMBER_RETURN_IF_ERROR(file->Close());
//
// The gzip stream carries no file name and a zero mtime, so equal content gives equal
// bytes (for a given zlib version). Thread-compatible: one thread per file.

#ifndef EMBER_TOOLS_DATAGEN_OUTPUT_FILE_H_
#define EMBER_TOOLS_DATAGEN_OUTPUT_FILE_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ember::datagen {

class OutputFile {
 public:
  // Creates or truncates `path`. Errors: the IO error (code from errno, message with
  // the path) when it cannot be opened.
  static absl::StatusOr<std::unique_ptr<OutputFile>> Open(const std::string& path, bool gzip);

  // Closes without reporting errors if Close was not called.
  ~OutputFile();

  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Buffers `data`, writing out whenever the buffer is full. The IO error on failure.
  absl::Status Append(absl::string_view data);

  // Writes what is buffered and closes; the IO error on failure. Call once.
  absl::Status Close();

  const std::string& path() const { return path_; }

 private:
  OutputFile(std::string path, void* handle, bool gzip)
      : path_(std::move(path)), handle_(handle), gzip_(gzip) {}
  absl::Status Flush();

  std::string path_;
  void* handle_;  // FILE* or gzFile
  bool gzip_;
  std::string buffer_;
};

}  // namespace ember::datagen

#endif  // EMBER_TOOLS_DATAGEN_OUTPUT_FILE_H_
