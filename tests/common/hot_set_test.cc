// Copyright 2026 The Ember Authors.

#include "common/hot_set.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ember {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

v1::HotSet MakeSet(std::vector<uint32_t> holders, uint32_t replicas) {
  v1::HotSet set;
  set.set_version(3);
  set.set_replicas(replicas);
  for (uint32_t id : holders) {
    v1::HotSetHolder* h = set.add_holders();
    h->set_shard_id(id);
    h->set_address("127.0.0.1:" + std::to_string(7000 + id));
  }
  v1::HotKeyTable* t = set.add_tables();
  t->set_table("item");
  t->add_keys()->set_id(42);
  t->add_keys()->set_id(7);
  return set;
}

TEST(HotSetViewTest, IndexesKeysPerTable) {
  HotSetView view(MakeSet({0, 1, 2, 3}, 1));
  EXPECT_EQ(view.version(), 3u);
  EXPECT_EQ(view.size(), 2u);
  EXPECT_TRUE(view.IsHot("item", 42));
  EXPECT_TRUE(view.IsHot("item", 7));
  EXPECT_FALSE(view.IsHot("item", 8));
  EXPECT_FALSE(view.IsHot("user", 42));
  EXPECT_EQ(view.HotKeys("user"), nullptr);
  ASSERT_NE(view.HotKeys("item"), nullptr);
  EXPECT_EQ(view.AddressOf(2), "127.0.0.1:7002");
  EXPECT_EQ(view.AddressOf(9), "");
}

TEST(HotSetViewTest, ReplicaHoldersFollowTheOwnerInRingOrder) {
  HotSetView one(MakeSet({0, 1, 2, 3}, 1));
  EXPECT_THAT(one.ReplicaHoldersOf(0), ElementsAre(1));
  EXPECT_THAT(one.ReplicaHoldersOf(3), ElementsAre(0));
  HotSetView two(MakeSet({0, 1, 2, 3}, 2));
  EXPECT_THAT(two.ReplicaHoldersOf(2), ElementsAre(3, 0));
  // More replicas than other holders: every other holder.
  HotSetView all(MakeSet({0, 1, 2, 3}, 99));
  EXPECT_THAT(all.ReplicaHoldersOf(1), ElementsAre(2, 3, 0));
}

TEST(HotSetViewTest, OwnerOutsideTheRingSitsBeforeTheNextLargerId) {
  HotSetView view(MakeSet({0, 2, 4}, 2));
  EXPECT_THAT(view.ReplicaHoldersOf(3), ElementsAre(4, 0));
  EXPECT_THAT(view.ReplicaHoldersOf(9), ElementsAre(0, 2));
}

TEST(HotSetViewTest, NoReplicationWithoutReplicasOrWithOneHolder) {
  EXPECT_THAT(HotSetView(MakeSet({0, 1}, 0)).ReplicaHoldersOf(0), IsEmpty());
  EXPECT_THAT(HotSetView(MakeSet({0}, 3)).ReplicaHoldersOf(0), IsEmpty());
  EXPECT_THAT(HotSetView().ReplicaHoldersOf(0), IsEmpty());
  EXPECT_FALSE(HotSetView().IsHot("item", 1));
}

}  // namespace
}  // namespace ember
