// Copyright 2026 The Ember Authors.
//
// ChangeLog: the shard's ordered record of which rows changed at which version
// (docs/ARCHITECTURE.md invariant 4). Entries name rows, not values: a follower reading "after
// version V" fetches the current value of each named row, so repeated updates of one
// row coalesce. Tombstones record removals.
//
// Writers reserve a range of versions, update their rows, then commit the range.
// Readers see only the committed prefix: every version <= watermark() is committed,
// so a reader never observes a gap even when concurrent writers commit out of order.
// The log keeps the newest `capacity` versions in memory.
//
// Thread-safe.

#ifndef EMBER_SERVER_STORE_INTERNAL_CHANGE_LOG_H_
#define EMBER_SERVER_STORE_INTERNAL_CHANGE_LOG_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace ember {

// Change::table of an entry that names no row: the shard gained the slots
// [id >> 32, id & 0xffffffff] (a slot move switched them to it). Readers that want
// rows skip it; the update stream resyncs the slots there.
inline constexpr uint32_t kSlotsGainedMarker = 0xffffffffu;

struct Change {
  uint64_t version = 0;
  uint64_t id = 0;
  uint32_t table = 0;  // the store's table index (EmbeddingStore::ReadChanges names it)
  bool tombstone = false;
  // When the entry was committed (unix microseconds); set by ChangeLog::Commit.
  int64_t commit_micros = 0;
};

struct ChangeBatch {
  std::vector<Change> changes;  // ascending, consecutive versions
  // The shard's committed version when read: a reader that consumed every batch
  // up to one with an empty `changes` is caught up to `watermark`.
  uint64_t watermark = 0;
  std::vector<std::string> table_names;  // indexed by Change::table
};

class ChangeLog {
 public:
  // REQUIRES: capacity >= 1.
  explicit ChangeLog(size_t capacity);

  // Restarts numbering after a reopen: the next reserved version is `version + 1`
  // and the watermark is `version`; versions up to `version` are not in the log
  // (Read after an older version is OUT_OF_RANGE). REQUIRES: no writer in flight.
  void Reset(uint64_t version);

  // Reserves `n` consecutive versions and returns the first. Every reserved version
  // must later be committed, or the watermark stops there: callers reserve only once
  // they cannot fail (after validation and IO).
  uint64_t Reserve(uint32_t n);

  // Publishes `entries`: one or more whole reserved ranges, each as a run of
  // consecutive versions, runs in any order. Stamps their commit time.
  void Commit(absl::Span<const Change> entries);

  // Up to `max` entries with version > after, ascending, all <= watermark().
  // OUT_OF_RANGE if some of them were already dropped from memory.
  absl::StatusOr<std::vector<Change>> Read(uint64_t after, size_t max) const;

  uint64_t watermark() const;

  // Blocks until the watermark is above `version` or `timeout` passed; returns the
  // watermark.
  uint64_t WaitAbove(uint64_t version, absl::Duration timeout) const;

  // The oldest version Read can still return (watermark() + 1 when none is held).
  uint64_t oldest_retained() const;
  // Versions reserved so far (>= watermark()).
  uint64_t reserved() const;

 private:
  uint64_t OldestLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::vector<Change> ring_ ABSL_GUARDED_BY(mu_);      // version % capacity_
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 1;             // next version to reserve
  uint64_t watermark_ ABSL_GUARDED_BY(mu_) = 0;        // committed prefix
  uint64_t highest_written_ ABSL_GUARDED_BY(mu_) = 0;  // newest version in ring_
  uint64_t base_ ABSL_GUARDED_BY(mu_) = 0;             // Reset's version: not in ring_
  std::map<uint64_t, uint64_t> pending_
      ABSL_GUARDED_BY(mu_);  // committed [first, end) above watermark
};

}  // namespace ember

#endif  // EMBER_SERVER_STORE_INTERNAL_CHANGE_LOG_H_
