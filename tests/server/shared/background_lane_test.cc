// Copyright 2026 The Ember Authors.
//
// BackgroundLane (server/shared/background_lane.h): the work runs on a thread of its own at the
// asked priority (read back from the kernel inside the task), in submission order, and the lane
// runs everything submitted before it goes; the caller's own thread keeps its priority.

#include "server/shared/background_lane.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace ember {
namespace {

pid_t ThreadId() { return static_cast<pid_t>(syscall(SYS_gettid)); }

TEST(BackgroundLaneTest, LowRunsTasksInOrderOnOneThreadAtNice19) {
  const int caller_nice = CurrentThreadNice();
  ASSERT_LT(caller_nice, 19) << "the test process already runs at nice 19";
  absl::Mutex mu;
  std::vector<int> order;
  std::vector<pid_t> threads;
  std::vector<int> nices;
  {
    BackgroundLane lane({.priority = BackgroundPriority::kLow, .name = "test-lane"});
    EXPECT_TRUE(lane.lowered());
    for (int i = 0; i < 20; ++i) {
      lane.Submit([&, i] {
        absl::MutexLock lock(&mu);
        order.push_back(i);
        threads.push_back(ThreadId());
        nices.push_back(CurrentThreadNice());
      });
    }
  }  // the destructor runs all 20 before it joins
  ASSERT_EQ(order.size(), 20u);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(order[i], i);
    EXPECT_EQ(nices[i], 19);
    EXPECT_EQ(threads[i], threads[0]);
  }
  EXPECT_NE(threads[0], ThreadId());
  EXPECT_EQ(CurrentThreadNice(), caller_nice);
  EXPECT_FALSE(CurrentThreadIsIdlePolicy());
}

TEST(BackgroundLaneTest, IdleRunsTasksUnderSchedIdle) {
  std::atomic<bool> idle{false};
  std::atomic<int> nice{0};
  absl::Notification ran;
  BackgroundLane lane({.priority = BackgroundPriority::kIdle, .name = "test-idle"});
  EXPECT_TRUE(lane.lowered());
  lane.Submit([&] {
    idle = CurrentThreadIsIdlePolicy();
    nice = CurrentThreadNice();
    ran.Notify();
  });
  ASSERT_TRUE(ran.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_TRUE(idle);
  EXPECT_EQ(nice, 19);
  EXPECT_FALSE(CurrentThreadIsIdlePolicy());
}

TEST(BackgroundLaneTest, ATaskMaySubmitTheNextOne) {
  absl::Notification second;
  BackgroundLane lane({.priority = BackgroundPriority::kLow, .name = "test-chain"});
  lane.Submit([&] { lane.Submit([&] { second.Notify(); }); });
  EXPECT_TRUE(second.WaitForNotificationWithTimeout(absl::Seconds(30)));
}

TEST(BackgroundPriorityTest, FlagWordsNameEveryPriority) {
  std::vector<std::string> words;
  for (const auto& [word, priority] : BackgroundPriorityWords()) {
    EXPECT_EQ(BackgroundPriorityName(priority), word);
    words.push_back(word);
  }
  EXPECT_EQ(words, (std::vector<std::string>{"normal", "low", "idle"}));
}

}  // namespace
}  // namespace ember
