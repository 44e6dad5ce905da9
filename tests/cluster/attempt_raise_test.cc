// Copyright 2026 The Ember Authors.
//
// A slot map raises a shard's job attempt (InstallSlotMapRequest.attempt), as a move's
// target takes over slots of a running job, except a process that owns slots and was
// never restored (attempt 0: it restarted, losing the rows it held only in memory): it
// keeps attempt 0, so the job's calls get UNAVAILABLE until it is restored. (The soak of
// 2026-12-07 had a restarted shard raised by a slot move, and a job that went on with
// its stale rows.)

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/slot_map.h"
#include "gtest/gtest.h"
#include "server/shared/slot_owners.h"
#include "tests/cluster/in_process_shard.h"

namespace ember {
namespace {

class AttemptRaiseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/attempt_raise_test.", getpid());
    std::filesystem::remove_all(dir_);
    map_ = SlotMap::Even({0}, /*epoch=*/1);  // shard 0 owns every slot, shard 1 none
    for (uint32_t id = 0; id < 2; ++id) {
      absl::StatusOr<InProcessShard> shard = InProcessShard::Start(dir_, id, map_, 1 << 20);
      ASSERT_TRUE(shard.ok()) << shard.status();
      shards_.push_back(*std::move(shard));
    }
  }
  void TearDown() override {
    for (InProcessShard& shard : shards_) EXPECT_TRUE(shard.Stop().ok());
    std::filesystem::remove_all(dir_);
  }

  // Installs on `shard` the map that gives slots 0-99 to shard 1, naming `attempt`.
  void Install(uint32_t shard, uint64_t attempt) {
    SlotMap moved = map_;
    for (uint32_t slot = 0; slot < 100; ++slot) moved.SetOwner(slot, 1);
    v1::InstallSlotMapRequest install;
    install.set_epoch(2);
    install.set_slot_owners(PackSlotOwners(moved));
    install.set_attempt(attempt);
    v1::InstallSlotMapResponse installed;
    ASSERT_TRUE(shards_[shard].service->DoInstallSlotMap(install, &installed).ok());
    EXPECT_EQ(installed.epoch(), 2u) << "the map is installed either way";
  }

  std::string dir_;
  SlotMap map_;
  std::vector<InProcessShard> shards_;
};

TEST_F(AttemptRaiseTest, AShardTakingOverSlotsWithNoneOfItsOwnIsRaised) {
  ASSERT_EQ(shards_[1].service->attempt(), 0u);
  Install(1, 7);
  EXPECT_EQ(shards_[1].service->attempt(), 7u);
  Install(1, 5);  // never lowered
  EXPECT_EQ(shards_[1].service->attempt(), 7u);
}

TEST_F(AttemptRaiseTest, AnUnrestoredShardThatOwnsSlotsIsNotRaised) {
  ASSERT_EQ(shards_[0].service->attempt(), 0u);
  Install(0, 7);
  EXPECT_EQ(shards_[0].service->attempt(), 0u);
  // Once restored for an attempt it follows the job's later ones.
  v1::RestoreShardRequest restore;
  restore.set_attempt(3);
  restore.set_epoch(1);
  restore.set_slot_owners(PackSlotOwners(map_));
  v1::RestoreShardResponse restored;
  ASSERT_TRUE(shards_[0].service->DoRestoreShard(restore, &restored).ok());
  Install(0, 7);
  EXPECT_EQ(shards_[0].service->attempt(), 7u);
}

}  // namespace
}  // namespace ember
