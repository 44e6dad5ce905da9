// Copyright 2026 The Ember Authors.
//
// Importing a chain of shard snapshots into a backend (shard_snapshot.h).
//
// Rows: the owned slot ranges of every FULL source database (opened read-only), then
// the owned records of every DELTA in chain order, so a later link overwrites an
// earlier one. Meta: each source shard's meta keys as of its last link, combined
// across source shards at the end (CombineMeta).

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/slot.h"
#include "common/status_macros.h"
#include "server/checkpoint/delta_file.h"
#include "server/checkpoint/shard_snapshot.h"
#include "server/store/count_min_sketch.h"
#include "server/store/row_layout.h"

namespace ember {
namespace {

// Bytes of keys and values per write into the target: large enough to amortize a
// RocksDB write, small enough to keep the import's memory flat.
constexpr size_t kBatchBytes = size_t{4} << 20;
// Meta keys that EmbeddingStore persists (embedding_store.cc) and that are combined
// rather than copied.
constexpr char kVersionKey[] = "version";
constexpr char kSketchPrefix[] = "sketch/";

// The meta space of one source shard: key -> value.
using MetaMap = std::map<std::string, std::string>;

// [first, last] runs of consecutive owned slots.
using SlotRuns = std::vector<std::pair<uint32_t, uint32_t>>;

SlotRuns OwnedRuns(const std::function<bool(uint32_t slot)>& owns) {
  SlotRuns runs;
  for (uint32_t slot = 0; slot < kNumSlots; ++slot) {
    if (!owns(slot)) continue;
    if (!runs.empty() && runs.back().second + 1 == slot) {
      runs.back().second = slot;
    } else {
      runs.emplace_back(slot, slot);
    }
  }
  return runs;
}

std::string ShardPath(const SnapshotChainLink& link, const v1::ShardSnapshot& shard,
                      const std::string& leaf) {
  return (std::filesystem::path(link.checkpoint_dir) / shard.dir() / leaf).string();
}

// Writes into the target in batches of about kBatchBytes, opening tables on demand.
class BatchedWriter {
 public:
  BatchedWriter(RowBackend& target, ImportReport& report) : target_(target), report_(report) {}

  absl::StatusOr<BackendTable> Table(const std::string& name) {
    auto it = tables_.find(name);
    if (it != tables_.end()) return it->second;
    EMBER_ASSIGN_OR_RETURN(const BackendTable handle, target_.OpenTable(name));
    tables_.emplace(name, handle);
    return handle;
  }

  absl::Status Put(BackendTable table, std::string_view key, std::string_view value) {
    ++report_.rows;
    return Add({table, std::string(key), std::string(value), false});
  }

  absl::Status Erase(BackendTable table, std::string_view key) {
    ++report_.tombstones;
    return Add({table, std::string(key), "", true});
  }

  absl::Status Flush() {
    if (batch_.empty()) return absl::OkStatus();
    EMBER_RETURN_IF_ERROR(target_.Write(batch_));
    batch_.clear();
    bytes_ = 0;
    return absl::OkStatus();
  }

 private:
  absl::Status Add(BackendWrite write) {
    bytes_ += write.key.size() + write.value.size();
    batch_.push_back(std::move(write));
    return bytes_ >= kBatchBytes ? Flush() : absl::OkStatus();
  }

  RowBackend& target_;
  ImportReport& report_;
  std::map<std::string, BackendTable> tables_;
  BackendWriteBatch batch_;
  size_t bytes_ = 0;
};

// INVALID_ARGUMENT unless chain[0] is all FULL and every later link is all DELTA,
// each delta continuing its shard's previous link (base_version == that version).
absl::Status CheckChain(absl::Span<const SnapshotChainLink> chain) {
  if (chain.empty()) return absl::InvalidArgumentError("empty checkpoint chain");
  if (chain[0].shards.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint ", chain[0].checkpoint_dir, " holds no shard snapshots"));
  }
  for (size_t i = 0; i < chain.size(); ++i) {
    const auto want = i == 0 ? v1::ShardSnapshot::FULL : v1::ShardSnapshot::DELTA;
    for (const v1::ShardSnapshot& shard : chain[i].shards) {
      if (shard.kind() != want) {
        return absl::InvalidArgumentError(
            absl::StrCat("checkpoint ", chain[i].checkpoint_dir, " shard ", shard.shard_id(),
                         " is ", v1::ShardSnapshot::Kind_Name(shard.kind()), " at position ", i,
                         " of the chain; a chain is one FULL checkpoint, then DELTA ones"));
      }
      if (i == 0) continue;
      const auto& parents = chain[i - 1].shards;
      auto parent = std::find_if(parents.begin(), parents.end(),
                                 [&](const auto& p) { return p.shard_id() == shard.shard_id(); });
      if (parent == parents.end() || parent->version() != shard.base_version()) {
        return absl::InvalidArgumentError(
            absl::StrCat("checkpoint ", chain[i].checkpoint_dir, " shard ", shard.shard_id(),
                         " is a delta after version ", shard.base_version(), ", which checkpoint ",
                         chain[i - 1].checkpoint_dir, " does not hold for that shard"));
      }
    }
  }
  return absl::OkStatus();
}

// Copies the owned rows of one FULL source into `writer` and its meta into *meta.
absl::Status ImportFull(const SnapshotChainLink& link, const v1::ShardSnapshot& shard,
                        const SlotRuns& runs, BatchedWriter& writer, MetaMap* meta) {
  RocksDbOptions options;
  options.path = ShardPath(link, shard, "db");
  options.read_only = true;
  options.create_if_missing = false;
  // Scans bypass the block cache; a small one serves index and filter blocks.
  options.block_cache_bytes = int64_t{8} << 20;
  options.enable_statistics = false;
  absl::StatusOr<std::unique_ptr<RocksDbBackend>> source = RocksDbBackend::Open(options);
  if (!source.ok()) {
    return absl::Status(source.status().code(), absl::StrCat("open snapshot ", options.path, ": ",
                                                             source.status().message()));
  }
  EMBER_RETURN_IF_ERROR(
      (*source)->Scan(kMetaTable, "", "", [&](std::string_view key, std::string_view value) {
        (*meta)[std::string(key)] = std::string(value);
        return true;
      }));
  absl::Status write_status;
  const auto put = [&](BackendTable table) {
    return [&, table](std::string_view key, std::string_view value) {
      write_status = writer.Put(table, key, value);
      return write_status.ok();
    };
  };
  for (const std::string& name : (*source)->ListTables()) {
    EMBER_ASSIGN_OR_RETURN(const BackendTable from, (*source)->OpenTable(name));
    EMBER_ASSIGN_OR_RETURN(const BackendTable to, writer.Table(name));
    for (const auto& [first, last] : runs) {
      EMBER_RETURN_IF_ERROR((*source)->Scan(from, SlotBeginKey(first), SlotEndKey(last), put(to)));
      EMBER_RETURN_IF_ERROR(write_status);
    }
  }
  return absl::OkStatus();
}

// Applies the owned records of one DELTA source to `writer` and its meta to *meta.
absl::Status ImportDelta(const SnapshotChainLink& link, const v1::ShardSnapshot& shard,
                         const std::function<bool(uint32_t slot)>& owns, BatchedWriter& writer,
                         MetaMap* meta) {
  const std::string path = ShardPath(link, shard, kDeltaFileName);
  const DeltaHeader expected{shard.base_version(), shard.version()};
  return ReadDeltaFile(path, expected, [&](const DeltaRecord& r) -> absl::Status {
    if (r.space.empty()) {
      if (r.erase) {
        meta->erase(std::string(r.key));
      } else {
        (*meta)[std::string(r.key)] = std::string(r.value);
      }
      return absl::OkStatus();
    }
    uint32_t slot;
    uint64_t id;
    if (!DecodeRowKey(r.key, &slot, &id)) {
      return absl::DataLossError(
          absl::StrCat(path, ": malformed row key in table '", std::string(r.space), "'"));
    }
    if (!owns(slot)) return absl::OkStatus();
    EMBER_ASSIGN_OR_RETURN(const BackendTable table, writer.Table(std::string(r.space)));
    return r.erase ? writer.Erase(table, r.key) : writer.Put(table, r.key, r.value);
  });
}

// The target's meta space from every source shard's (ascending shard id): the highest
// version, summed sketches, and otherwise the lowest shard's value (table configs are
// equal on every shard). Sets *version to the highest version.
absl::StatusOr<BackendWriteBatch> CombineMeta(std::map<uint32_t, MetaMap> by_shard,
                                              uint64_t* version) {
  std::map<std::string, std::vector<std::string>> values;
  for (auto& [shard_id, meta] : by_shard) {
    for (auto& [key, value] : meta) values[key].push_back(std::move(value));
  }
  BackendWriteBatch batch;
  for (auto& [key, all] : values) {
    std::string combined;
    if (key == kVersionKey) {
      for (const std::string& v : all) {
        if (v.size() != 8) return absl::DataLossError("a source shard's version is not 8 bytes");
        uint64_t n;
        std::memcpy(&n, v.data(), 8);
        *version = std::max(*version, n);
      }
      combined.assign(reinterpret_cast<const char*>(version), 8);
    } else if (absl::StartsWith(key, kSketchPrefix)) {
      absl::StatusOr<std::string> merged = CountMinSketch::MergeSerialized(all);
      if (!merged.ok()) {
        return absl::Status(merged.status().code(), absl::StrCat("merge admission sketches '", key,
                                                                 "': ", merged.status().message()));
      }
      combined = *std::move(merged);
    } else {
      combined = std::move(all.front());
    }
    batch.push_back({kMetaTable, key, std::move(combined), false});
  }
  return batch;
}

}  // namespace

absl::StatusOr<ImportReport> ImportSnapshots(absl::Span<const SnapshotChainLink> chain,
                                             const std::function<bool(uint32_t slot)>& owns,
                                             RowBackend& target) {
  const auto start = std::chrono::steady_clock::now();
  EMBER_RETURN_IF_ERROR(CheckChain(chain));
  ImportReport report;
  // Every file of the chain is checked before the first write into the target.
  for (const SnapshotChainLink& link : chain) {
    for (const v1::ShardSnapshot& shard : link.shards) {
      // VerifyFiles takes a span; a repeated proto field is not contiguous.
      const std::vector<v1::CheckpointFile> files(shard.files().begin(), shard.files().end());
      EMBER_RETURN_IF_ERROR(VerifyFiles(link.checkpoint_dir, files));
      for (const v1::CheckpointFile& file : files) report.bytes_read += file.size();
    }
  }

  // The slots a shard's snapshot counts for: the caller's, owned by that shard in the
  // checkpoint's map.
  auto owned_by = [&owns](const SnapshotChainLink& link, uint32_t shard_id) {
    return [&owns, &link, shard_id](uint32_t slot) {
      return owns(slot) && (link.owners.empty() || link.owners[slot] == shard_id);
    };
  };
  BatchedWriter writer(target, report);
  std::map<uint32_t, MetaMap> meta;  // by source shard id
  for (const v1::ShardSnapshot& shard : chain[0].shards) {
    const SlotRuns runs = OwnedRuns(owned_by(chain[0], shard.shard_id()));
    EMBER_RETURN_IF_ERROR(ImportFull(chain[0], shard, runs, writer, &meta[shard.shard_id()]));
  }
  for (size_t i = 1; i < chain.size(); ++i) {
    for (const v1::ShardSnapshot& shard : chain[i].shards) {
      EMBER_RETURN_IF_ERROR(ImportDelta(chain[i], shard, owned_by(chain[i], shard.shard_id()),
                                        writer, &meta[shard.shard_id()]));
    }
  }
  EMBER_RETURN_IF_ERROR(writer.Flush());
  EMBER_ASSIGN_OR_RETURN(const BackendWriteBatch meta_batch,
                         CombineMeta(std::move(meta), &report.version));
  EMBER_RETURN_IF_ERROR(target.Write(meta_batch));
  EMBER_RETURN_IF_ERROR(target.Flush());
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace ember
