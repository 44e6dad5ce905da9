// Copyright 2026 The Ember Authors.
//
// Shard snapshots: what one PS shard writes for a checkpoint and how a shard imports
// checkpoints back (proto/ember/v1/checkpoint.proto has the on-disk layout).
//
//  * WriteFullSnapshot flushes the store's dirty rows, version and admission sketches
//    to RocksDB, then takes a RocksDB checkpoint (hard links to the immutable SST
//    files, so it costs little time and, until compaction rewrites them, no space).
//  * WriteDeltaSnapshot writes only the rows changed after `base_version` (their
//    current bytes, or a tombstone for a row removed since) plus the shard's meta
//    keys (version, sketches, table configs), read from the store's change log.
//  * ImportSnapshots rebuilds, into an empty backend, every row of the slots a shard
//    now owns from a chain of checkpoints (one full, then deltas in order) taken on any
//    number of shards: slots are key ranges, so a shard scans just its ranges of
//    every source shard. Every file is verified (size, crc32) before it is read.
//
// Callers guarantee that no push is applied while a snapshot is written (the PS
// service holds its store lock; the trainer checkpoints at a step barrier), which is
// what makes the cut consistent: every row's embedding, optimizer state and meta are
// from the same step.
//
// delta.bin layout (little-endian):
//   "EMBDELTA" (8) | format u32 = 1 | base_version u64 | version u64
//   records, each: kind u8 (1 = put, 2 = erase) | space_len u16 | space bytes
//                  | key_len u32 | key bytes | [value_len u32 | value bytes  (put only)]
//     space is a table name, or "" for the shard meta space (kMetaTable)
//   trailer: "EMBDEND." (8) | record count u64
// Records are sorted by (space, key); a key appears at most once.
//
//   EMBER_ASSIGN_OR_RETURN(v1::ShardSnapshot snap,
//       WriteFullSnapshot(*store, *rocksdb, "/ckpt/job/ckpt-000000000100-a1", "shard-0"));
//   ...
//   SnapshotChainLink link{"/ckpt/job/ckpt-000000000100-a1", manifest};
//   EMBER_ASSIGN_OR_RETURN(ImportReport report,
//       ImportSnapshots({link}, [&](uint32_t slot) { return map.Owner(slot) == me; },
//                       *fresh_backend));

#ifndef EMBER_SERVER_CHECKPOINT_SHARD_SNAPSHOT_H_
#define EMBER_SERVER_CHECKPOINT_SHARD_SNAPSHOT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ember/v1/checkpoint.pb.h"
#include "server/store/embedding_store.h"
#include "server/store/rocksdb_backend.h"
#include "server/store/row_backend.h"

namespace ember {

// Every regular file under <checkpoint_dir>/<subdir>, sorted by path, with sizes and
// crc32s; paths are relative to checkpoint_dir. IO errors as UNAVAILABLE.
absl::StatusOr<std::vector<v1::CheckpointFile>> DigestFiles(const std::string& checkpoint_dir,
                                                            const std::string& subdir);

// The crc32 (zlib) and size of one file.
absl::StatusOr<v1::CheckpointFile> DigestFile(const std::string& checkpoint_dir,
                                              const std::string& relative_path);

// OK if every file exists under checkpoint_dir with its size and crc32. DATA_LOSS
// naming the first bad file ("<path>: size 123, manifest says 456" / "crc32 mismatch"
// / "missing") otherwise.
absl::Status VerifyFiles(const std::string& checkpoint_dir,
                         absl::Span<const v1::CheckpointFile> files);

// Writes a FULL snapshot of `store` (opened over `backend`) into
// <checkpoint_dir>/<subdir>/db. The directory <checkpoint_dir>/<subdir> must not exist.
// Fills shard_snapshot fields except shard_id. Errors: ALREADY_EXISTS for an existing
// directory; store flush and IO errors.
absl::StatusOr<v1::ShardSnapshot> WriteFullSnapshot(EmbeddingStore& store, RocksDbBackend& backend,
                                                    const std::string& checkpoint_dir,
                                                    const std::string& subdir);

// Writes a DELTA snapshot: <checkpoint_dir>/<subdir>/delta.bin with every row of
// `store` changed after `base_version`. OUT_OF_RANGE when the store's change log no
// longer holds every change after base_version (the caller takes a full snapshot);
// INVALID_ARGUMENT when base_version is above the store's version.
absl::StatusOr<v1::ShardSnapshot> WriteDeltaSnapshot(EmbeddingStore& store, RowBackend& backend,
                                                     uint64_t base_version,
                                                     const std::string& checkpoint_dir,
                                                     const std::string& subdir);

// One checkpoint of a chain: its directory and what every source shard wrote.
struct SnapshotChainLink {
  std::string checkpoint_dir;
  std::vector<v1::ShardSnapshot> shards;
  // The checkpoint's slot map (owner per slot): a shard's snapshot counts only for the
  // slots it owned then, so rows a half-finished slot migration had copied to a shard
  // that did not own them yet are ignored. Empty: every snapshot counts for every slot.
  std::vector<uint32_t> owners = {};
};

struct ImportReport {
  uint64_t rows = 0;        // rows written to the target
  uint64_t tombstones = 0;  // delta erasures applied
  uint64_t version = 0;     // the highest source version (the restored store's version)
  uint64_t bytes_read = 0;  // checkpoint bytes verified and read
  double seconds = 0;
};

// Imports into `target` (an empty backend) every row whose slot satisfies `owns`
// from chain[0] (every shard FULL) and then each later link (every shard DELTA) in
// order, plus the meta space: table configs, the highest version, and per table the
// admission sketch summed over the source shards (exact when one source shard held
// every imported slot; otherwise it may overcount, never undercount). Verifies every
// file first: DATA_LOSS naming the bad file, before anything is written. Then flushes
// `target`. INVALID_ARGUMENT for an empty chain, a chain not starting FULL or
// continuing with a FULL link.
absl::StatusOr<ImportReport> ImportSnapshots(absl::Span<const SnapshotChainLink> chain,
                                             const std::function<bool(uint32_t slot)>& owns,
                                             RowBackend& target);

}  // namespace ember

#endif  // EMBER_SERVER_CHECKPOINT_SHARD_SNAPSHOT_H_
