// Copyright 2026 The Ember Authors.

#include "server/checkpoint/delta_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ember {
namespace {

constexpr char kMagic[] = "EMBDELTA";
constexpr char kTrailerMagic[] = "EMBDEND.";
constexpr uint32_t kFormat = 1;
constexpr uint8_t kPut = 1;
constexpr uint8_t kErase = 2;
constexpr size_t kMagicSize = 8;
constexpr size_t kHeaderSize = kMagicSize + 4 + 8 + 8;
constexpr size_t kTrailerSize = kMagicSize + 8;
// Bytes buffered before a write(2): large sequential writes, bounded memory.
constexpr size_t kWriteBuffer = size_t{1} << 20;

template <typename T>
void AppendLe(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

absl::Status IoError(const std::string& what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

absl::Status SyncDirectoryOf(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return IoError("open directory", dir);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return IoError("fsync directory", dir);
  return absl::OkStatus();
}

// Buffered little-endian reads of one file; every short read is DATA_LOSS naming it.
class Reader {
 public:
  Reader(std::FILE* file, const std::string& path) : file_(file), path_(path) {
    std::setvbuf(file_, nullptr, _IOFBF, kWriteBuffer);
  }

  absl::Status Bytes(size_t n, std::string* out, const char* what) {
    out->resize(n);
    if (n > 0 && std::fread(out->data(), 1, n, file_) != n) return Short(what);
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status Number(T* v, const char* what) {
    if (std::fread(v, sizeof(T), 1, file_) != 1) return Short(what);
    return absl::OkStatus();
  }

  absl::Status Corrupt(const std::string& message) const {
    return absl::DataLossError(absl::StrCat(path_, ": ", message));
  }

 private:
  absl::Status Short(const char* what) const {
    if (std::ferror(file_)) return IoError("read", path_);
    return Corrupt(absl::StrCat("truncated at ", what));
  }

  std::FILE* file_;
  const std::string& path_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DeltaWriter>> DeltaWriter::Create(const std::string& path,
                                                                 uint64_t base_version,
                                                                 uint64_t version) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("create", tmp);
  std::unique_ptr<DeltaWriter> writer(new DeltaWriter(path, fd));
  writer->buffer_.reserve(kWriteBuffer + 4096);
  writer->buffer_.append(kMagic, kMagicSize);
  AppendLe(writer->buffer_, kFormat);
  AppendLe(writer->buffer_, base_version);
  AppendLe(writer->buffer_, version);
  return writer;
}

DeltaWriter::~DeltaWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!finished_) ::unlink((path_ + ".tmp").c_str());
}

absl::Status DeltaWriter::Put(std::string_view space, std::string_view key,
                              std::string_view value) {
  return Append(false, space, key, value);
}

absl::Status DeltaWriter::Erase(std::string_view space, std::string_view key) {
  return Append(true, space, key, "");
}

absl::Status DeltaWriter::Append(bool erase, std::string_view space, std::string_view key,
                                 std::string_view value) {
  if (finished_) return absl::FailedPreconditionError("delta file already finished");
  if (space.size() > std::numeric_limits<uint16_t>::max() ||
      key.size() > std::numeric_limits<uint32_t>::max() ||
      value.size() > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("delta record in space '", std::string(space),
                                                   "' is too large for the format"));
  }
  const int by_space = std::string_view(last_space_).compare(space);
  if (records_ > 0 && !(by_space < 0 || (by_space == 0 && std::string_view(last_key_) < key))) {
    return absl::InternalError(
        absl::StrCat("delta records out of order in space '", std::string(space), "'"));
  }
  last_space_.assign(space);
  last_key_.assign(key);
  buffer_.push_back(static_cast<char>(erase ? kErase : kPut));
  AppendLe(buffer_, static_cast<uint16_t>(space.size()));
  buffer_.append(space);
  AppendLe(buffer_, static_cast<uint32_t>(key.size()));
  buffer_.append(key);
  if (!erase) {
    AppendLe(buffer_, static_cast<uint32_t>(value.size()));
    buffer_.append(value);
  }
  ++records_;
  if (buffer_.size() >= kWriteBuffer) return Drain();
  return absl::OkStatus();
}

absl::Status DeltaWriter::Drain() {
  size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError("write", path_ + ".tmp");
    }
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
  return absl::OkStatus();
}

absl::Status DeltaWriter::Finish() {
  if (finished_) return absl::FailedPreconditionError("delta file already finished");
  buffer_.append(kTrailerMagic, kMagicSize);
  AppendLe(buffer_, records_);
  EMBER_RETURN_IF_ERROR(Drain());
  const std::string tmp = path_ + ".tmp";
  if (::fsync(fd_) != 0) return IoError("fsync", tmp);
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) return IoError("close", tmp);
  if (::rename(tmp.c_str(), path_.c_str()) != 0) return IoError("rename to", path_);
  finished_ = true;
  // The rename itself must survive a crash before the manifest names the file.
  return SyncDirectoryOf(path_);
}

absl::Status ReadDeltaFile(const std::string& path, const DeltaHeader& expected,
                           const std::function<absl::Status(const DeltaRecord&)>& fn) {
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(path, error);
  if (error) return absl::UnavailableError(absl::StrCat("stat ", path, ": ", error.message()));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  if (file == nullptr) return IoError("open", path);
  Reader in(file.get(), path);
  if (size < kHeaderSize + kTrailerSize) return in.Corrupt("too short for a delta file");

  std::string magic;
  uint32_t format = 0;
  EMBER_RETURN_IF_ERROR(in.Bytes(kMagicSize, &magic, "magic"));
  if (magic != std::string(kMagic, kMagicSize)) return in.Corrupt("not a delta file (bad magic)");
  EMBER_RETURN_IF_ERROR(in.Number(&format, "format"));
  if (format != kFormat) return in.Corrupt(absl::StrCat("unknown delta format ", format));
  DeltaHeader header;
  EMBER_RETURN_IF_ERROR(in.Number(&header.base_version, "base version"));
  EMBER_RETURN_IF_ERROR(in.Number(&header.version, "version"));
  if (header.base_version != expected.base_version || header.version != expected.version) {
    return in.Corrupt(absl::StrCat("spans versions ", header.base_version, "..", header.version,
                                   ", manifest says ", expected.base_version, "..",
                                   expected.version));
  }

  // Records end where the trailer begins: the file size says where that is.
  const uint64_t records_end = size - kTrailerSize;
  uint64_t offset = kHeaderSize;
  uint64_t records = 0;
  std::string space, key, value;
  std::string last_space, last_key;
  while (offset < records_end) {
    uint8_t kind = 0;
    uint16_t space_len = 0;
    uint32_t key_len = 0, value_len = 0;
    EMBER_RETURN_IF_ERROR(in.Number(&kind, "record kind"));
    if (kind != kPut && kind != kErase) {
      return in.Corrupt(absl::StrCat("bad record kind ", kind, " at offset ", offset));
    }
    EMBER_RETURN_IF_ERROR(in.Number(&space_len, "space length"));
    offset += 1 + 2 + space_len + 4;
    if (offset > records_end) return in.Corrupt("record runs into the trailer");
    EMBER_RETURN_IF_ERROR(in.Bytes(space_len, &space, "space"));
    EMBER_RETURN_IF_ERROR(in.Number(&key_len, "key length"));
    offset += key_len;
    if (offset > records_end) return in.Corrupt("record runs into the trailer");
    EMBER_RETURN_IF_ERROR(in.Bytes(key_len, &key, "key"));
    if (kind == kPut) {
      offset += 4;
      if (offset > records_end) return in.Corrupt("record runs into the trailer");
      EMBER_RETURN_IF_ERROR(in.Number(&value_len, "value length"));
      offset += value_len;
      if (offset > records_end) return in.Corrupt("record runs into the trailer");
      EMBER_RETURN_IF_ERROR(in.Bytes(value_len, &value, "value"));
    } else {
      value.clear();
    }
    // The writer emits records in strictly increasing (space, key) order; a file that
    // is not is corrupt (a record repeated or misplaced would apply twice or late).
    const int by_space = last_space.compare(space);
    if (records > 0 && !(by_space < 0 || (by_space == 0 && last_key < key))) {
      return in.Corrupt(absl::StrCat("records out of order at offset ", offset));
    }
    last_space = space;
    last_key = key;
    ++records;
    EMBER_RETURN_IF_ERROR(fn({kind == kErase, space, key, value}));
  }
  if (offset != records_end) return in.Corrupt("record runs into the trailer");
  uint64_t count = 0;
  EMBER_RETURN_IF_ERROR(in.Bytes(kMagicSize, &magic, "trailer"));
  if (magic != std::string(kTrailerMagic, kMagicSize)) return in.Corrupt("bad trailer magic");
  EMBER_RETURN_IF_ERROR(in.Number(&count, "record count"));
  if (count != records) {
    return in.Corrupt(absl::StrCat(records, " records, trailer says ", count));
  }
  return absl::OkStatus();
}

}  // namespace ember
