// Copyright 2026 The Ember Authors.
//
// Fuzz target: the checkpoint catalog's readers (server/checkpoint/checkpoint_catalog.h)
// over a checkpoint directory the input makes, as a restore, `emberctl checkpoints` or
// the coordinator's retention finds it on disk after a crash or a bad copy.
//
// Input: [control byte][up to 4 x (u16 length, bytes)]. Each chunk is a MANIFEST body
// (a CheckpointManifest); bit k of the control byte chooses how chunk k lands:
// 0: parsed and written by WriteManifest under its own job/name (valid framing, crc,
// atomic rename: this is how fuzzed fields reach Chain, Verify and ReadWorkerState);
// 1: written as raw bytes to job "j" checkpoint "ckpt-00000000000k-a1" (the header,
// length and crc checks). Bits 4..7 pick sizes of stray files some manifests name.
// Then every reader runs: List, ReadManifest, Chain, Verify, ReadWorkerState, Retain.
// Invariants: no crash, no hang (chains terminate); errors are NOT_FOUND, DATA_LOSS,
// INVALID_ARGUMENT or FAILED_PRECONDITION, never INTERNAL / UNKNOWN; a chain starts
// with a full checkpoint, ends at the one asked for, and each link names the previous
// as its parent.

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ember/v1/checkpoint.pb.h"
#include "google/protobuf/stubs/logging.h"
#include "server/checkpoint/checkpoint_catalog.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

namespace fs = std::filesystem;

void CheckCode(const absl::Status& status) {
  FUZZ_CHECK(status.code() != absl::StatusCode::kInternal);
  FUZZ_CHECK(status.code() != absl::StatusCode::kUnknown);
}

void WriteFile(const fs::path& path, const std::string& bytes) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);  // parse failures are expected here
    return true;
  }();
  (void)quiet;
  static const fs::path root =
      fs::temp_directory_path() / absl::StrCat("ember-manifest-fuzz-", getpid());
  std::error_code ec;
  fs::remove_all(root, ec);
  fs::create_directories(root, ec);
  if (size == 0) return 0;
  const uint8_t control = data[0];
  size_t at = 1;

  ember::CheckpointCatalog catalog(root.string());
  std::set<std::string> jobs = {"j"};
  for (int k = 0; k < 4 && at + 2 <= size; ++k) {
    const size_t length = std::min<size_t>(data[at] | (data[at + 1] << 8), size - at - 2);
    const std::string body(reinterpret_cast<const char*>(data + at + 2), length);
    at += 2 + length;
    if ((control >> k) & 1) {
      WriteFile(root / "j" / ember::CheckpointCatalog::Name(k, 1) / "MANIFEST", body);
      continue;
    }
    ember::v1::CheckpointManifest manifest;
    if (!manifest.ParseFromString(body)) continue;
    // Files the manifest names exist, at a size of the input's choosing, so Verify gets
    // past "missing" to the size and crc checks.
    const absl::Status prepared = catalog.Prepare(manifest.job(), manifest.name());
    CheckCode(prepared);
    if (!prepared.ok()) continue;
    const fs::path dir = catalog.Dir(manifest.job(), manifest.name());
    for (const ember::v1::ShardSnapshot& shard : manifest.shards()) {
      for (const ember::v1::CheckpointFile& file : shard.files()) {
        const std::string& path = file.path();
        if (path.empty() || path.size() > 64 || path.find("..") != std::string::npos ||
            path[0] == '/') {
          continue;
        }
        WriteFile(dir / path, std::string((control >> 4) * 3, 'x'));
      }
    }
    CheckCode(catalog.WriteManifest(manifest));
    jobs.insert(manifest.job());
  }

  for (const std::string& job : jobs) {
    const absl::StatusOr<ember::CheckpointListing> listing = catalog.List(job);
    CheckCode(listing.status());
    if (!listing.ok()) continue;
    for (const auto& [name, why] : listing->invalid) {
      FUZZ_CHECK(!why.ok());
      CheckCode(why);
    }
    for (const ember::v1::CheckpointManifest& manifest : listing->valid) {
      CheckCode(catalog.ReadManifest(job, manifest.name()).status());
      const absl::StatusOr<std::vector<ember::v1::CheckpointManifest>> chain =
          catalog.Chain(job, manifest.name());
      CheckCode(chain.status());
      if (chain.ok()) {
        FUZZ_CHECK(!chain->empty());
        FUZZ_CHECK(!chain->front().incremental());
        FUZZ_CHECK(chain->back().name() == manifest.name());
        for (size_t i = 1; i < chain->size(); ++i) {
          FUZZ_CHECK((*chain)[i].parent() == (*chain)[i - 1].name());
        }
      }
      CheckCode(catalog.Verify(job, manifest.name()));
      CheckCode(catalog.ReadWorkerState(manifest).status());
    }
    const absl::StatusOr<std::vector<std::string>> removed = catalog.Retain(job, 1, "");
    CheckCode(removed.status());
  }
  fs::remove_all(root, ec);
  return 0;
}
