// Copyright 2026 The Ember Authors.
//
// A slot map raises a shard's job attempt (InstallSlotMapRequest.attempt) only when the
// shard owns no slots: a new or drained shard taking over slots of a running job. A
// shard that owns slots under a lower attempt holds rows that are not the attempt's (it
// restarted, losing what it held in memory, or missed a restore): it keeps its attempt,
// so the job's calls get UNAVAILABLE until it is restored. (The soak of 2026-12-07 had
// a restarted shard raised by a slot move, and a job that went on with its stale rows.)

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

TEST_F(AttemptRaiseTest, AShardThatOwnsSlotsUnderALowerAttemptIsNotRaised) {
  ASSERT_EQ(shards_[0].service->attempt(), 0u);
  Install(0, 7);
  EXPECT_EQ(shards_[0].service->attempt(), 0u);
}

}  // namespace
}  // namespace ember
