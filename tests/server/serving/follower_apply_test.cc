// Copyright 2026 The Ember Authors.
//
// Follower::Apply (server/serving/follower_stream.cc) across shards: the stale-row filter
// of a slot resync (invariant 9) against a message of the slot's older owner that is
// being applied while the resync arrives. A follower opened without its control loop
// (tests/support/follower_test_peer.h) is fed the two shards' messages on two threads;
// the follower's sync points order them, so nothing sleeps.

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/slot.h"
#include "ember/v1/ps.pb.h"
#include "gtest/gtest.h"
#include "server/serving/follower.h"
#include "server/shared/row_block.h"
#include "server/store/row_layout.h"
#include "server/store/table_config.h"
#include "tests/support/follower_test_peer.h"
#include "tests/support/scratch_dir.h"

namespace ember {
namespace {

constexpr uint32_t kNewOwner = 0;
constexpr uint32_t kOldOwner = 2;
constexpr uint64_t kId = 8743;

class FollowerApplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok()) << dir_.error();
    FollowerOptions options;
    options.coordinator = "127.0.0.1:1";  // never asked: no control loop
    options.checkpoint_root = dir_.path() + "/checkpoints";
    options.data_dir = dir_.path() + "/follower";
    absl::StatusOr<std::unique_ptr<Follower>> follower = FollowerTestPeer::Open(options);
    ASSERT_TRUE(follower.ok()) << follower.status();
    follower_ = *std::move(follower);
    v1::TableConfig user;
    user.set_name("user");
    user.set_dim(4);
    ASSERT_TRUE(FollowerTestPeer::AddTable(*follower_, user).ok());
    absl::StatusOr<v1::TableConfig> config = FollowerTestPeer::Table(*follower_, "user");
    ASSERT_TRUE(config.ok()) << config.status();
    config_ = *config;
    slot_ = SlotOf(config_.seed(), kId);
    FollowerTestPeer::AddShard(*follower_, kNewOwner);
    FollowerTestPeer::AddShard(*follower_, kOldOwner);
  }

  // A stored row of kId whose every float is `value`, trained at `step`.
  EncodedRow Row(float value, int64_t step) const {
    const uint32_t floats =
        config_.dim() + OptimizerStateFloats(config_.optimizer(), config_.dim());
    EncodedRow row;
    row.id = kId;
    row.value.resize(RowBytes(floats));
    RowMeta meta;
    meta.version = 1;
    meta.last_seen_step = step;
    meta.count = 1;
    std::memcpy(row.value.data(), &meta, sizeof(meta));
    for (uint32_t i = 0; i < floats; ++i) {
      std::memcpy(row.value.data() + sizeof(meta) + i * sizeof(float), &value, sizeof(float));
    }
    return row;
  }

  // A message of `shard`'s stream covering (from, to], read at `epoch`, with `rows`.
  static v1::UpdateBatch Batch(uint32_t shard, uint64_t from, uint64_t to, uint64_t epoch,
                               const std::vector<EncodedRow>& rows) {
    v1::UpdateBatch batch;
    batch.set_shard_id(shard);
    batch.set_stream_id(shard + 100);
    batch.set_from_version(from);
    batch.set_to_version(to);
    batch.set_watermark(to);
    batch.set_epoch(epoch);
    if (!rows.empty()) {
      v1::RowBlock* block = batch.add_blocks();
      block->set_table("user");
      AppendRows(rows, block);
    }
    return batch;
  }

  // The embedding the follower serves for kId.
  std::vector<float> Served() {
    std::vector<float> out;
    const uint64_t ids[] = {kId};
    absl::StatusOr<uint32_t> unknown = follower_->Lookup("user", ids, &out, nullptr);
    EXPECT_TRUE(unknown.ok()) << unknown.status();
    EXPECT_EQ(unknown.value_or(1), 0u);
    return out;
  }

  ScratchDir dir_{"follower_apply_test"};
  std::unique_ptr<Follower> follower_;
  v1::TableConfig config_;
  uint32_t slot_ = 0;
};

// Soak round 1 of 2026-12-07: the old owner's message, read before the slot moved
// (epoch 6), passed the filter; the new owner's resync (epoch 7) raised the slot's epoch
// and imported the row's newer value; then the old message's import landed on top and
// the follower served the value from before the move for good. Now the resync waits for
// the import in flight and replaces it.
TEST_F(FollowerApplyTest, AnOlderOwnersMessageInFlightDoesNotLandAfterAResync) {
  v1::UpdateBatch old_message = Batch(kOldOwner, 0, 5, 6, {Row(1.0f, 10)});
  v1::UpdateBatch resync_rows = Batch(kNewOwner, 0, 0, 7, {Row(2.0f, 20)});
  resync_rows.mutable_resync()->set_first(slot_);
  resync_rows.mutable_resync()->set_last(slot_);
  v1::UpdateBatch resync_done = Batch(kNewOwner, 0, 3, 7, {});
  *resync_done.mutable_resync() = resync_rows.resync();
  resync_done.set_resync_done(true);
  resync_done.set_resync_sweep(true);

  absl::Mutex mu;
  bool resync_waits = false;     // the resync found the old message's import in flight
  bool resync_returned = false;  // ... or it was applied before that import
  absl::Status resync_status, done_status;
  std::thread resync;
  FollowerTestPeer::SetSyncPoint(*follower_, [&](const char* point, uint32_t shard) {
    if (std::string(point) == "Apply:ResyncWaits") {
      absl::MutexLock lock(&mu);
      resync_waits = true;
      return;
    }
    if (std::string(point) != "Apply:Filtered" || shard != kOldOwner) return;
    // The old message passed the filter and is about to import: the resync arrives.
    resync = std::thread([&] {
      absl::Status rows = FollowerTestPeer::Apply(*follower_, kNewOwner, resync_rows);
      absl::Status done = FollowerTestPeer::Apply(*follower_, kNewOwner, resync_done);
      absl::MutexLock lock(&mu);
      resync_status = rows;
      done_status = done;
      resync_returned = true;
    });
    auto arrived = [&] { return resync_waits || resync_returned; };
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(&arrived));
  });

  const absl::Status old_status = FollowerTestPeer::Apply(*follower_, kOldOwner, old_message);
  ASSERT_TRUE(resync.joinable());
  resync.join();
  EXPECT_TRUE(old_status.ok()) << old_status;
  EXPECT_TRUE(resync_status.ok()) << resync_status;
  EXPECT_TRUE(done_status.ok()) << done_status;
  EXPECT_EQ(FollowerTestPeer::SlotEpoch(*follower_, slot_), 7u);
  EXPECT_EQ(FollowerTestPeer::Position(*follower_, kOldOwner),
            std::make_pair(uint64_t{102}, uint64_t{5}));
  EXPECT_EQ(FollowerTestPeer::Position(*follower_, kNewOwner),
            std::make_pair(uint64_t{100}, uint64_t{3}));
  EXPECT_EQ(Served(), std::vector<float>(config_.dim(), 2.0f))
      << "the follower serves the row as the old owner read it before the move";

  // A later message of the old owner read at the old epoch is left out as before.
  FollowerTestPeer::SetSyncPoint(*follower_, nullptr);
  ASSERT_TRUE(
      FollowerTestPeer::Apply(*follower_, kOldOwner, Batch(kOldOwner, 5, 6, 6, {Row(3.0f, 11)}))
          .ok());
  EXPECT_EQ(Served(), std::vector<float>(config_.dim(), 2.0f));
}

}  // namespace
}  // namespace ember
