// Copyright 2026 The Ember Authors.

#include "server/ps/job_store.h"

#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "common/slot.h"
#include "server/shared/slot_owners.h"

namespace ember {

absl::Status StreamGoneError(uint32_t shard, uint64_t stream, uint64_t version) {
  return absl::OutOfRangeError(absl::StrCat(
      "shard ", shard, ": position (stream ", stream, ", version ", version,
      ") is not on the shard's current stream (it restarted or restored a checkpoint): "
      "re-bootstrap from a checkpoint"));
}

JobStore::JobStore(std::string job_name, EmbeddingStore* the_store, uint64_t dedup_window)
    : job(std::move(job_name)), store(the_store), dedup(PushDedupOptions{.window = dedup_window}) {
  stream_id = absl::Uniform<uint64_t>(absl::BitGen(), 1, ~uint64_t{0});
  stream_origin_empty = store->version() == 0;
  stream_start_version = store->version();
  last_version.store(store->version(), std::memory_order_relaxed);
}

JobStore::JobStore(std::string job_name, std::unique_ptr<ShardStorage> own, uint64_t dedup_window)
    : JobStore(std::move(job_name), own->store(), dedup_window) {
  storage = own.get();
  owned_storage = std::move(own);
}

std::string JobStore::Describe() const {
  return job.empty() ? std::string("the default store") : absl::StrCat("job '", job, "'");
}

uint64_t JobStore::Version() const {
  if (!mu.ReaderTryLock()) return last_version.load(std::memory_order_relaxed);
  const uint64_t version = store->version();
  mu.ReaderUnlock();
  last_version.store(version, std::memory_order_relaxed);
  return version;
}

absl::StatusOr<StreamStart> JobStore::ResolveStreamPosition(const v1::WatchUpdatesRequest& request,
                                                            uint32_t shard_id) const {
  const uint64_t after = request.after_version();
  const uint64_t watermark = store->version();
  const bool on_stream = request.any_stream() || request.stream_id() == stream_id ||
                         (request.stream_id() == 0 && after == 0 && stream_origin_empty) ||
                         (stream_parent_id != 0 && request.stream_id() == stream_parent_id &&
                          after == stream_parent_version);
  if (!on_stream) return StreamGoneError(shard_id, request.stream_id(), after);
  if (after > watermark) {
    return absl::InvalidArgumentError(absl::StrCat("WatchUpdates: after_version ", after,
                                                   " is above shard ", shard_id,
                                                   "'s newest version ", watermark));
  }
  return StreamStart{stream_id, after};
}

absl::Status JobStore::SyncBackend() {
  return storage != nullptr ? storage->rocksdb()->Flush() : store->Flush();
}

void JobStore::StartNewStream() {
  const uint64_t previous = stream_id;
  stream_id = absl::Uniform<uint64_t>(absl::BitGen(), 1, ~uint64_t{0});
  if (stream_id == previous) ++stream_id;
  stream_origin_empty = false;
  stream_parent_id = 0;
  stream_parent_version = 0;
  stream_start_version = store->version();
  stream_restored_from.clear();
}

void JobStore::BeginStreamAfterRestore(const v1::RestoreShardRequest& request, const SlotMap& map,
                                       uint32_t shard_id) {
  StartNewStream();
  stream_restored_from = request.chain(request.chain_size() - 1).name();
  // The restored rows are exactly this shard's state at the cut when the last link
  // holds this shard's own snapshot, the shard owns the same slots as then and no other
  // snapshot contributed a newer version: then the new stream continues that one.
  const v1::CheckpointManifest& last = request.chain(request.chain_size() - 1);
  const v1::ShardSnapshot* mine = nullptr;
  for (const v1::ShardSnapshot& snap : last.shards()) {
    if (snap.shard_id() == shard_id) mine = &snap;
  }
  if (mine == nullptr || mine->stream_id() == 0 || mine->version() != store->version()) return;
  absl::StatusOr<SlotMap> then = UnpackSlotOwners(last.slot_owners(), last.epoch());
  if (!then.ok()) return;
  for (uint32_t slot = 0; slot < kNumSlots; ++slot) {
    if ((then->OwnerOf(slot) == shard_id) != (map.OwnerOf(slot) == shard_id)) return;
  }
  stream_parent_id = mine->stream_id();
  stream_parent_version = mine->version();
}

}  // namespace ember
