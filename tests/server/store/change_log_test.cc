// Copyright 2026 The Ember Authors.
//
// ChangeLog (server/store/internal/change_log.h): the committed-prefix watermark, the Reset floor,
// commit stamps, WaitAbove and what the ring retains once it overflows.

#include "server/store/internal/change_log.h"

#include <cstdint>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace ember {
namespace {

// Reserves `n` versions and returns their entries (id = version * 10, table 1).
std::vector<Change> ReserveRun(ChangeLog& log, uint32_t n) {
  const uint64_t first = log.Reserve(n);
  std::vector<Change> run(n);
  for (uint32_t i = 0; i < n; ++i) {
    run[i].version = first + i;
    run[i].id = (first + i) * 10;
    run[i].table = 1;
  }
  return run;
}

void CommitRun(ChangeLog& log, uint32_t n) { log.Commit(ReserveRun(log, n)); }

// Read must return exactly the versions (after, last], each with the entry that was
// committed for it.
void ExpectEntries(const ChangeLog& log, uint64_t after, uint64_t last) {
  absl::StatusOr<std::vector<Change>> read = log.Read(after, 1000);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), last - after);
  for (uint64_t v = after + 1; v <= last; ++v) {
    const Change& c = (*read)[v - after - 1];
    EXPECT_EQ(c.version, v);
    EXPECT_EQ(c.id, v * 10) << "entry for version " << v << " is not the one committed";
    EXPECT_EQ(c.table, 1u);
  }
}

TEST(ChangeLogTest, ReadsOnlyTheCommittedPrefix) {
  ChangeLog log(16);
  const std::vector<Change> first = ReserveRun(log, 2);   // 1, 2
  const std::vector<Change> second = ReserveRun(log, 3);  // 3..5
  EXPECT_EQ(log.reserved(), 5u);
  log.Commit(second);
  EXPECT_EQ(log.watermark(), 0u);  // 1 and 2 are still in flight
  EXPECT_TRUE(log.Read(0, 10)->empty());
  log.Commit(first);
  EXPECT_EQ(log.watermark(), 5u);
  ExpectEntries(log, 0, 5);
  ExpectEntries(log, 3, 5);
  EXPECT_EQ(log.Read(0, 2)->size(), 2u);  // `max` caps the read
  EXPECT_TRUE(log.Read(5, 10)->empty());
}

TEST(ChangeLogTest, ResetFloorMakesOlderVersionsUnreadable) {
  ChangeLog log(8);
  CommitRun(log, 5);  // versions 1..5 in the ring
  log.Reset(10);      // a reopen: versions <= 10 are history the log does not hold
  EXPECT_EQ(log.watermark(), 10u);
  EXPECT_EQ(log.oldest_retained(), 11u);
  for (uint64_t after : {0, 3, 9}) {
    EXPECT_EQ(log.Read(after, 100).status().code(), absl::StatusCode::kOutOfRange) << after;
  }
  EXPECT_TRUE(log.Read(10, 100)->empty());
  CommitRun(log, 2);  // 11, 12
  EXPECT_EQ(log.watermark(), 12u);
  ExpectEntries(log, 10, 12);
  EXPECT_EQ(log.Read(9, 100).status().code(), absl::StatusCode::kOutOfRange);
}

TEST(ChangeLogTest, ResetBackwardsNeverReturnsEntriesOfTheOldNumbering) {
  ChangeLog log(8);
  for (int i = 0; i < 20; ++i) {  // versions 1..20 with other ids
    const uint64_t v = log.Reserve(1);
    log.Commit({Change{.version = v, .id = 999, .table = 7}});
  }
  log.Reset(12);  // a restore of an older snapshot: 13.. are numbered again
  EXPECT_TRUE(log.Read(12, 100)->empty());
  EXPECT_EQ(log.Read(11, 100).status().code(), absl::StatusCode::kOutOfRange);
  CommitRun(log, 3);  // 13..15
  ExpectEntries(log, 12, 15);
}

TEST(ChangeLogTest, CommitStampsTheCommitTime) {
  ChangeLog log(8);
  const std::vector<Change> run = ReserveRun(log, 3);
  const int64_t before = absl::ToUnixMicros(absl::Now());
  log.Commit(run);
  const int64_t after = absl::ToUnixMicros(absl::Now());
  absl::StatusOr<std::vector<Change>> read = log.Read(0, 10);
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(read->size(), 3u);
  for (const Change& c : *read) {
    EXPECT_GE(c.commit_micros, before);
    EXPECT_LE(c.commit_micros, after);
  }
}

TEST(ChangeLogTest, WaitAboveReturnsOnCommit) {
  ChangeLog log(8);
  uint64_t seen = 0;
  // Whichever runs first, the waiter must return the committed watermark long before
  // its (generous) timeout.
  std::thread waiter([&] { seen = log.WaitAbove(0, absl::Seconds(60)); });
  CommitRun(log, 2);
  waiter.join();
  EXPECT_EQ(seen, 2u);
  // Already above: returns at once.
  EXPECT_EQ(log.WaitAbove(1, absl::Seconds(60)), 2u);
}

TEST(ChangeLogTest, WaitAboveReturnsOnTimeout) {
  ChangeLog log(8);
  CommitRun(log, 1);
  EXPECT_EQ(log.WaitAbove(1, absl::Milliseconds(20)), 1u);
  // A reserved but uncommitted version does not count.
  ReserveRun(log, 1);
  EXPECT_EQ(log.WaitAbove(1, absl::Milliseconds(20)), 1u);
}

TEST(ChangeLogTest, OldestRetainedAfterOverflow) {
  ChangeLog log(4);
  EXPECT_EQ(log.oldest_retained(), 1u);  // empty: watermark + 1
  CommitRun(log, 3);
  EXPECT_EQ(log.oldest_retained(), 1u);
  CommitRun(log, 7);  // 4..10: only 7..10 fit
  EXPECT_EQ(log.oldest_retained(), 7u);
  EXPECT_EQ(log.Read(5, 100).status().code(), absl::StatusCode::kOutOfRange);
  ExpectEntries(log, 6, 10);
}

// A writer that reserved early but commits after later writers wrapped the ring must
// not overwrite their newer entries with its own (older, no longer retained) ones.
TEST(ChangeLogTest, LateCommitOfAnOverwrittenVersionKeepsNewerEntries) {
  ChangeLog log(4);
  const std::vector<Change> slow = ReserveRun(log, 1);  // 1
  const std::vector<Change> fast = ReserveRun(log, 6);  // 2..7: wraps the ring
  log.Commit(fast);
  log.Commit(slow);
  EXPECT_EQ(log.watermark(), 7u);
  EXPECT_EQ(log.oldest_retained(), 4u);
  ExpectEntries(log, 3, 7);
  // Runs in one Commit, out of order, across the ring boundary.
  const std::vector<Change> a = ReserveRun(log, 3);  // 8..10
  const std::vector<Change> b = ReserveRun(log, 2);  // 11, 12
  std::vector<Change> both = b;
  both.insert(both.end(), a.begin(), a.end());
  log.Commit(both);
  EXPECT_EQ(log.watermark(), 12u);
  ExpectEntries(log, 8, 12);
}

}  // namespace
}  // namespace ember
