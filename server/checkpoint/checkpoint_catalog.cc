// Copyright 2026 The Ember Authors.
//
// CheckpointCatalog (checkpoint_catalog.h): MANIFEST and worker_state.bin IO, listing,
// chains and retention of a job's checkpoints.

#include "server/checkpoint/checkpoint_catalog.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "server/checkpoint/shard_snapshot.h"

namespace ember {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[] = "EMBERCKP";
constexpr size_t kMagicSize = sizeof(kMagic) - 1;
constexpr uint32_t kFormat = 1;
// magic | format u32 | length u32, then the proto bytes, then crc32 u32.
constexpr size_t kHeaderSize = kMagicSize + 4 + 4;
constexpr size_t kTrailerSize = 4;

constexpr char kManifestFile[] = "MANIFEST";
constexpr char kManifestTempFile[] = "MANIFEST.tmp";
constexpr char kWorkerStateFile[] = "worker_state.bin";
constexpr char kCheckpointPrefix[] = "ckpt-";

void PutU32(uint32_t value, std::string* out) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint32_t GetU32(const char* p) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(p[i]);
  return value;
}

uint32_t Crc32(const char* data, size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes uInt lengths: feed huge buffers in pieces.
  while (size > 0) {
    const size_t n = std::min<size_t>(size, size_t{1} << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data), static_cast<uInt>(n));
    data += n;
    size -= n;
  }
  return static_cast<uint32_t>(crc);
}

absl::Status IoError(const std::string& what, const std::string& path, int error) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(error)));
}

absl::Status FsError(const std::string& what, const fs::path& path, const std::error_code& error) {
  return absl::UnavailableError(absl::StrCat(what, " ", path.string(), ": ", error.message()));
}

// Deterministic bytes, so equal messages give equal files (and crcs).
absl::StatusOr<std::string> Serialize(const google::protobuf::MessageLite& message) {
  std::string bytes;
  bool ok;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    ok = message.SerializeToCodedStream(&coded) && !coded.HadError();
  }
  if (!ok)
    return absl::InvalidArgumentError(absl::StrCat("cannot serialize ", message.GetTypeName()));
  return bytes;
}

// Writes `bytes` to `path` (created or truncated) and fsyncs it.
absl::Status WriteFileSynced(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("open", path, errno);
  absl::Status status;
  size_t done = 0;
  while (status.ok() && done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status = IoError("write", path, errno);
    } else {
      done += static_cast<size_t>(n);
    }
  }
  if (status.ok() && ::fsync(fd) != 0) status = IoError("fsync", path, errno);
  if (::close(fd) != 0 && status.ok()) status = IoError("close", path, errno);
  return status;
}

// Makes the directory's entries (a rename, a new file) durable.
absl::Status SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return IoError("open", dir, errno);
  absl::Status status;
  if (::fsync(fd) != 0) status = IoError("fsync", dir, errno);
  ::close(fd);
  return status;
}

// NOT_FOUND when the file (or a directory above it) does not exist, or a file stands
// where a directory should be; UNAVAILABLE for other IO errors.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR) {
      return absl::NotFoundError(absl::StrCat("open ", path, ": ", std::strerror(error)));
    }
    return IoError("open", path, error);
  }
  std::string bytes;
  char buffer[1 << 16];
  absl::Status status;
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) status = IoError("read", path, errno);
    if (n <= 0) break;
    bytes.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  EMBER_RETURN_IF_ERROR(status);
  return bytes;
}

absl::Status CreateDirs(const fs::path& dir) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) return FsError("create", dir, error);
  return absl::OkStatus();
}

// Jobs and checkpoint names are single path components: nothing a name holds may
// lead outside the job's directory (Retain deletes what names point at).
bool IsPathComponent(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

absl::Status CheckNames(const std::string& job, const std::string& name) {
  if (!IsPathComponent(job) || !IsPathComponent(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad checkpoint job/name \"", job, "\"/\"", name, "\""));
  }
  return absl::OkStatus();
}

// A file a manifest names must stay inside the checkpoint's directory.
bool IsSafeRelativePath(const std::string& path) {
  if (path.empty()) return false;
  const fs::path p(path);
  if (p.is_absolute()) return false;
  for (const fs::path& part : p) {
    if (part == "..") return false;
  }
  return true;
}

// The same status code with `context` in front of the message.
absl::Status Annotate(const absl::Status& status, const std::string& context) {
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

// Newer = taken later: attempts only grow (the coordinator persists them), across the
// runs of a job too, so a new run's step 20 is newer than an earlier run's step 3000,
// and an attempt that recovered from an older checkpoint supersedes the abandoned
// checkpoints past it; within an attempt, steps grow.
bool NewerFirst(const v1::CheckpointManifest& a, const v1::CheckpointManifest& b) {
  return std::make_tuple(a.attempt(), a.step(), a.name()) >
         std::make_tuple(b.attempt(), b.step(), b.name());
}

}  // namespace

CheckpointCatalog::CheckpointCatalog(std::string root) : root_(std::move(root)) {}

std::string CheckpointCatalog::JobDir(const std::string& job) const {
  return (fs::path(root_) / job).string();
}

std::string CheckpointCatalog::Dir(const std::string& job, const std::string& name) const {
  return (fs::path(root_) / job / name).string();
}

std::string CheckpointCatalog::Name(uint64_t step, uint64_t attempt) {
  return absl::StrFormat("%s%012d-a%d", kCheckpointPrefix, step, attempt);
}

absl::Status CheckpointCatalog::Prepare(const std::string& job, const std::string& name) {
  EMBER_RETURN_IF_ERROR(CheckNames(job, name));
  const fs::path dir = Dir(job, name);
  std::error_code error;
  const bool exists = fs::exists(dir, error);
  if (error) return FsError("stat", dir, error);
  if (exists) {
    const absl::StatusOr<v1::CheckpointManifest> manifest = ReadManifest(job, name);
    if (manifest.ok()) {
      return absl::AlreadyExistsError(
          absl::StrCat("checkpoint ", dir.string(), " already has a valid MANIFEST"));
    }
    // Only a missing or corrupt MANIFEST marks an interrupted attempt; an IO error
    // says nothing about the checkpoint, so nothing is deleted on one.
    if (!absl::IsNotFound(manifest.status()) && !absl::IsDataLoss(manifest.status())) {
      return manifest.status();
    }
    fs::remove_all(dir, error);
    if (error) return FsError("remove", dir, error);
  }
  EMBER_RETURN_IF_ERROR(CreateDirs(dir));
  return SyncDir(JobDir(job));
}

absl::StatusOr<v1::CheckpointFile> CheckpointCatalog::WriteWorkerState(
    const std::string& job, const std::string& name, const v1::WorkerState& state) {
  EMBER_RETURN_IF_ERROR(CheckNames(job, name));
  const fs::path dir = Dir(job, name);
  EMBER_RETURN_IF_ERROR(CreateDirs(dir));
  EMBER_ASSIGN_OR_RETURN(const std::string bytes, Serialize(state));
  EMBER_RETURN_IF_ERROR(WriteFileSynced((dir / kWorkerStateFile).string(), bytes));
  EMBER_RETURN_IF_ERROR(SyncDir(dir.string()));
  v1::CheckpointFile file;
  file.set_path(kWorkerStateFile);
  file.set_size(bytes.size());
  file.set_crc32(Crc32(bytes.data(), bytes.size()));
  return file;
}

absl::StatusOr<v1::WorkerState> CheckpointCatalog::ReadWorkerState(
    const v1::CheckpointManifest& manifest) const {
  if (!manifest.has_worker_state() || manifest.worker_state().path().empty()) {
    return absl::NotFoundError(
        absl::StrCat("checkpoint ", manifest.job(), "/", manifest.name(), " has no worker state"));
  }
  const v1::CheckpointFile& entry = manifest.worker_state();
  const std::string path = (fs::path(Dir(manifest.job(), manifest.name())) / entry.path()).string();
  if (!IsPathComponent(manifest.job()) || !IsPathComponent(manifest.name()) ||
      !IsSafeRelativePath(entry.path())) {
    return absl::DataLossError(absl::StrCat(path, ": bad path in the manifest"));
  }
  absl::StatusOr<std::string> bytes = ReadWholeFile(path);
  if (absl::IsNotFound(bytes.status())) return absl::DataLossError(absl::StrCat(path, ": missing"));
  EMBER_RETURN_IF_ERROR(bytes.status());
  if (bytes->size() != entry.size()) {
    return absl::DataLossError(
        absl::StrCat(path, ": size ", bytes->size(), ", manifest says ", entry.size()));
  }
  if (Crc32(bytes->data(), bytes->size()) != entry.crc32()) {
    return absl::DataLossError(absl::StrCat(path, ": crc32 mismatch"));
  }
  v1::WorkerState state;
  if (!state.ParseFromString(*bytes)) {
    return absl::DataLossError(absl::StrCat(path, ": does not parse as WorkerState"));
  }
  return state;
}

absl::Status CheckpointCatalog::WriteManifest(const v1::CheckpointManifest& manifest) {
  EMBER_RETURN_IF_ERROR(CheckNames(manifest.job(), manifest.name()));
  if (manifest.format() != kFormat && manifest.format() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("manifest format ", manifest.format(), ", this build writes ", kFormat));
  }
  v1::CheckpointManifest copy = manifest;
  copy.set_format(kFormat);
  EMBER_ASSIGN_OR_RETURN(const std::string body, Serialize(copy));
  if (body.size() > UINT32_MAX - kHeaderSize - kTrailerSize) {
    return absl::InvalidArgumentError(absl::StrCat("manifest of ", body.size(), " bytes"));
  }
  std::string bytes(kMagic, kMagicSize);
  PutU32(kFormat, &bytes);
  PutU32(static_cast<uint32_t>(body.size()), &bytes);
  bytes += body;
  PutU32(Crc32(body.data(), body.size()), &bytes);

  const fs::path dir = Dir(manifest.job(), manifest.name());
  EMBER_RETURN_IF_ERROR(CreateDirs(dir));
  const fs::path temp = dir / kManifestTempFile;
  const fs::path final_path = dir / kManifestFile;
  EMBER_RETURN_IF_ERROR(WriteFileSynced(temp.string(), bytes));
  if (::rename(temp.c_str(), final_path.c_str()) != 0) {
    return absl::UnavailableError(
        absl::StrCat("rename ", temp.string(), " to MANIFEST: ", std::strerror(errno)));
  }
  return SyncDir(dir.string());
}

absl::StatusOr<v1::CheckpointManifest> CheckpointCatalog::ReadManifest(
    const std::string& job, const std::string& name) const {
  if (!CheckNames(job, name).ok()) {
    return absl::NotFoundError(absl::StrCat("no checkpoint \"", name, "\" of job \"", job, "\""));
  }
  const std::string path = (fs::path(Dir(job, name)) / kManifestFile).string();
  absl::StatusOr<std::string> read = ReadWholeFile(path);
  EMBER_RETURN_IF_ERROR(read.status());
  const std::string& bytes = *read;
  if (bytes.size() < kHeaderSize + kTrailerSize) {
    return absl::DataLossError(absl::StrCat(path, ": truncated (", bytes.size(), " bytes)"));
  }
  if (bytes.compare(0, kMagicSize, kMagic) != 0) {
    return absl::DataLossError(absl::StrCat(path, ": bad magic"));
  }
  const uint32_t format = GetU32(bytes.data() + kMagicSize);
  if (format != kFormat) {
    return absl::DataLossError(absl::StrCat(path, ": format ", format, ", expected ", kFormat));
  }
  const uint64_t length = GetU32(bytes.data() + kMagicSize + 4);
  if (length > static_cast<uint64_t>(INT_MAX)) {
    return absl::DataLossError(absl::StrCat(path, ": length ", length, " is too large"));
  }
  const uint64_t expected_size = kHeaderSize + length + kTrailerSize;
  if (bytes.size() < expected_size) {
    return absl::DataLossError(absl::StrCat(path, ": truncated (", bytes.size(),
                                            " bytes, header says ", expected_size, ")"));
  }
  if (bytes.size() > expected_size) {
    return absl::DataLossError(absl::StrCat(path, ": ", bytes.size() - expected_size,
                                            " bytes after the end the header gives"));
  }
  const char* body = bytes.data() + kHeaderSize;
  if (Crc32(body, length) != GetU32(body + length)) {
    return absl::DataLossError(absl::StrCat(path, ": crc32 mismatch"));
  }
  v1::CheckpointManifest manifest;
  if (!manifest.ParseFromArray(body, static_cast<int>(length))) {
    return absl::DataLossError(absl::StrCat(path, ": does not parse as CheckpointManifest"));
  }
  if (manifest.format() != kFormat) {
    return absl::DataLossError(absl::StrCat(path, ": manifest format ", manifest.format()));
  }
  if (manifest.job() != job || manifest.name() != name) {
    return absl::DataLossError(
        absl::StrCat(path, ": names checkpoint ", manifest.job(), "/", manifest.name()));
  }
  return manifest;
}

absl::StatusOr<CheckpointListing> CheckpointCatalog::List(const std::string& job) const {
  CheckpointListing listing;
  if (!IsPathComponent(job)) return listing;
  const fs::path job_dir = JobDir(job);
  std::vector<std::string> names;
  std::error_code error;
  fs::directory_iterator it(job_dir, error), end;
  if (error == std::errc::no_such_file_or_directory) return listing;
  for (; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (!absl::StartsWith(name, kCheckpointPrefix)) continue;
    std::error_code type_error;
    if (!it->is_directory(type_error) || type_error) continue;
    names.push_back(name);
  }
  if (error) return FsError("list", job_dir, error);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    absl::StatusOr<v1::CheckpointManifest> manifest = ReadManifest(job, name);
    if (manifest.ok()) {
      listing.valid.push_back(*std::move(manifest));
    } else if (absl::IsNotFound(manifest.status()) || absl::IsDataLoss(manifest.status())) {
      listing.invalid.emplace_back(name, manifest.status());
    } else {
      // An IO error says nothing about the checkpoint: reporting it as invalid would
      // let Retain delete a good one.
      return manifest.status();
    }
  }
  std::sort(listing.valid.begin(), listing.valid.end(),
            [](const v1::CheckpointManifest& a, const v1::CheckpointManifest& b) {
              return NewerFirst(b, a);
            });
  return listing;
}

absl::StatusOr<std::vector<v1::CheckpointManifest>> CheckpointCatalog::Chain(
    const std::string& job, const std::string& name) const {
  std::vector<v1::CheckpointManifest> chain;
  std::set<std::string> seen;
  std::string current = name;
  while (true) {
    if (!seen.insert(current).second) {
      return absl::DataLossError(
          absl::StrCat("chain of ", job, "/", name, " loops back to ", current));
    }
    absl::StatusOr<v1::CheckpointManifest> link = ReadManifest(job, current);
    if (!link.ok()) {
      return Annotate(link.status(), absl::StrCat("chain of ", job, "/", name, ": link ", current));
    }
    const bool incremental = link->incremental();
    std::string parent = link->parent();
    chain.push_back(*std::move(link));
    if (!incremental) break;
    if (!IsPathComponent(parent)) {
      return absl::DataLossError(absl::StrCat("chain of ", job, "/", name, ": incremental link ",
                                              current, " has no valid parent (\"", parent, "\")"));
    }
    current = std::move(parent);
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

absl::Status CheckpointCatalog::Verify(const std::string& job, const std::string& name) const {
  EMBER_ASSIGN_OR_RETURN(const std::vector<v1::CheckpointManifest> chain, Chain(job, name));
  for (const v1::CheckpointManifest& link : chain) {
    const std::string dir = Dir(job, link.name());
    // VerifyFiles takes a span; repeated proto fields are not contiguous.
    std::vector<v1::CheckpointFile> files;
    for (const v1::ShardSnapshot& shard : link.shards()) {
      files.insert(files.end(), shard.files().begin(), shard.files().end());
    }
    // Only the restored checkpoint's worker state is read by a restore.
    if (link.name() == name && link.has_worker_state()) files.push_back(link.worker_state());
    for (const v1::CheckpointFile& file : files) {
      if (!IsSafeRelativePath(file.path())) {
        return absl::DataLossError(
            absl::StrCat(dir, ": bad path \"", file.path(), "\" in the manifest"));
      }
    }
    EMBER_RETURN_IF_ERROR(VerifyFiles(dir, files));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> CheckpointCatalog::Retain(const std::string& job,
                                                                   size_t keep,
                                                                   const std::string& in_progress) {
  if (keep < 1) return absl::InvalidArgumentError("Retain: keep must be at least 1");
  EMBER_ASSIGN_OR_RETURN(CheckpointListing listing, List(job));
  std::map<std::string, const v1::CheckpointManifest*> by_name;
  for (const v1::CheckpointManifest& manifest : listing.valid) by_name[manifest.name()] = &manifest;

  // The newest `keep` and every link of their chains. A chain is followed through the
  // listing (no re-reading); where it breaks (a missing or corrupt parent) the named
  // parent is still kept: it is what the chain needs, and may be repairable.
  std::set<std::string> needed;
  if (!in_progress.empty()) needed.insert(in_progress);
  std::vector<const v1::CheckpointManifest*> newest;
  for (const v1::CheckpointManifest& manifest : listing.valid) newest.push_back(&manifest);
  std::sort(newest.begin(), newest.end(),
            [](const v1::CheckpointManifest* a, const v1::CheckpointManifest* b) {
              return NewerFirst(*a, *b);
            });
  if (newest.size() > keep) newest.resize(keep);
  for (const v1::CheckpointManifest* head : newest) {
    std::set<std::string> seen;
    const v1::CheckpointManifest* link = head;
    while (link != nullptr && seen.insert(link->name()).second) {
      needed.insert(link->name());
      if (!link->incremental() || link->parent().empty()) break;
      const auto parent = by_name.find(link->parent());
      if (parent == by_name.end()) {
        needed.insert(link->parent());
        break;
      }
      link = parent->second;
    }
  }

  std::vector<std::string> candidates;
  for (const v1::CheckpointManifest& manifest : listing.valid)
    candidates.push_back(manifest.name());
  for (const auto& [name, status] : listing.invalid) candidates.push_back(name);
  std::sort(candidates.begin(), candidates.end());
  std::vector<std::string> deleted;
  for (const std::string& name : candidates) {
    if (needed.count(name) > 0) continue;
    const fs::path dir = Dir(job, name);
    std::error_code error;
    fs::remove_all(dir, error);
    if (error) return FsError("remove", dir, error);
    deleted.push_back(name);
  }
  if (!deleted.empty()) EMBER_RETURN_IF_ERROR(SyncDir(JobDir(job)));
  return deleted;
}

}  // namespace ember
