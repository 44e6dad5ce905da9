// Copyright 2026 The Ember Authors.
//
// CheckpointCatalog: the checkpoints of every job under one root directory, as the
// coordinator writes, lists, verifies, chains and retires them (layout and MANIFEST
// format: proto/ember/v1/checkpoint.proto).
//
// A checkpoint exists only once its MANIFEST is in place: WriteManifest writes it to
// a temporary file, fsyncs it, renames it over MANIFEST and fsyncs the directory, so
// after a crash at any moment the directory either has the complete manifest or none.
// Everything the manifest names (shard files, worker_state.bin) is written before it.
//
//   CheckpointCatalog catalog("/data/ember/checkpoints");
//   const std::string name = CheckpointCatalog::Name(/*step=*/1200, /*attempt=*/3);
//   ... shards write into catalog.Dir("ctr", name) ...
//   EMBER_ASSIGN_OR_RETURN(v1::CheckpointFile ws, catalog.WriteWorkerState("ctr", name, state));
//   EMBER_RETURN_IF_ERROR(catalog.WriteManifest(manifest));
//   EMBER_ASSIGN_OR_RETURN(CheckpointListing all, catalog.List("ctr"));
//
// Thread-safety: the catalog holds no state besides its root; concurrent calls on
// different checkpoints are safe. The coordinator serializes writes per job.

#ifndef EMBER_SERVER_CHECKPOINT_CHECKPOINT_CATALOG_H_
#define EMBER_SERVER_CHECKPOINT_CHECKPOINT_CATALOG_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ember/v1/checkpoint.pb.h"

namespace ember {

struct CheckpointListing {
  // Checkpoints with a valid MANIFEST, oldest first: ascending by (attempt, step)
  // (attempts only grow, across a job's runs too).
  std::vector<v1::CheckpointManifest> valid;
  // Directories whose MANIFEST is missing or does not parse, with the reason.
  std::vector<std::pair<std::string, absl::Status>> invalid;
};

class CheckpointCatalog {
 public:
  // `root` need not exist yet (it is created by the first write).
  explicit CheckpointCatalog(std::string root);

  const std::string& root() const { return root_; }
  // <root>/<job> and <root>/<job>/<name>.
  std::string JobDir(const std::string& job) const;
  std::string Dir(const std::string& job, const std::string& name) const;

  // "ckpt-<step, 12 digits>-a<attempt>": names sort by step.
  static std::string Name(uint64_t step, uint64_t attempt);

  // Creates <root>/<job>/<name>, first removing a directory of that name without a
  // valid MANIFEST (an interrupted attempt). ALREADY_EXISTS if it has a valid one.
  absl::Status Prepare(const std::string& job, const std::string& name);

  // Writes worker_state.bin of the checkpoint (fsynced); returns its file entry.
  absl::StatusOr<v1::CheckpointFile> WriteWorkerState(const std::string& job,
                                                      const std::string& name,
                                                      const v1::WorkerState& state);
  // Reads and verifies (size, crc32) the manifest's worker_state.bin. NOT_FOUND when
  // the manifest has none; DATA_LOSS naming the file on a mismatch or parse failure.
  absl::StatusOr<v1::WorkerState> ReadWorkerState(const v1::CheckpointManifest& manifest) const;

  // Writes MANIFEST atomically (see above) into Dir(manifest.job(), manifest.name()).
  absl::Status WriteManifest(const v1::CheckpointManifest& manifest);
  // NOT_FOUND when the checkpoint or its MANIFEST does not exist; DATA_LOSS when the
  // MANIFEST is truncated, has a bad magic, format or crc, or does not parse.
  absl::StatusOr<v1::CheckpointManifest> ReadManifest(const std::string& job,
                                                      const std::string& name) const;

  // Every checkpoint directory of `job` (none: empty listing, not an error).
  absl::StatusOr<CheckpointListing> List(const std::string& job) const;

  // The manifests needed to restore `name`, full first, then the deltas in order up to
  // `name` itself. Errors of ReadManifest for any link (the message names it);
  // DATA_LOSS for a chain that loops or whose first link is incremental.
  absl::StatusOr<std::vector<v1::CheckpointManifest>> Chain(const std::string& job,
                                                            const std::string& name) const;

  // Verifies every file of the chain of `name` (sizes and crc32s) and its worker
  // state. DATA_LOSS naming the first bad file.
  absl::Status Verify(const std::string& job, const std::string& name) const;

  // Deletes every checkpoint of `job` except the newest `keep` valid ones and the
  // links their chains need, and every directory without a valid MANIFEST except
  // `in_progress`. Returns the names deleted. REQUIRES: keep >= 1.
  absl::StatusOr<std::vector<std::string>> Retain(const std::string& job, size_t keep,
                                                  const std::string& in_progress);

 private:
  std::string root_;
};

}  // namespace ember

#endif  // EMBER_SERVER_CHECKPOINT_CHECKPOINT_CATALOG_H_
