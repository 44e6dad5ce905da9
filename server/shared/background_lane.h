// Copyright 2026 The Ember Authors.
//
// Background priorities, and BackgroundLane: bulk work that takes only the CPU that
// the foreground does not want. An online slot migration copies every row of the
// moving slots (ExportRows pages on the source, ImportRows pages on the target, the
// coordinator's relay between them) and RocksDB compacts what the copy wrote and what
// the sources dropped, while training keeps pulling and pushing on the same machines;
// at the same priority that work cost half of a loaded two-core machine's training
// throughput (issue 25: `ember-bench rebalance`, examples/s during the move 0.50 of
// before). At a background priority the scheduler gives training calls the cores first
// under contention, and on an idle machine the work still runs at full speed.
//
//   BackgroundLane lane({.priority = BackgroundPriority::kLow, .name = "ps0-copy"});
//   lane.Submit([reactor, request, response] { ...; reactor->Finish(...); });
//
// Linux keeps the nice value and the scheduling policy per thread. Caveats: threads
// created by a lane's thread inherit its priority (keep thread pools started
// elsewhere: ember-ps opens RocksDB, whose background threads start at Open, on its
// main thread); an unprivileged process cannot raise a priority again, which is why a
// lane keeps its own thread instead of lowering a caller's. Priorities shape only CPU
// time: a task that holds a lock others need still holds it while it waits for the
// CPU, so lane tasks must not hold a lock the foreground takes exclusively for long
// (the migration RPCs take the store lock shared).
//
// Thread-safety: Submit may be called from any thread. The destructor runs every task
// already submitted, then joins.

#ifndef EMBER_SERVER_SHARED_BACKGROUND_LANE_H_
#define EMBER_SERVER_SHARED_BACKGROUND_LANE_H_

#include <deque>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace ember {

enum class BackgroundPriority {
  kNormal,  // the process's priority: no change
  kLow,     // nice 19: about 1.5% of a core against each busy normal thread
  kIdle,    // SCHED_IDLE: runs when nothing else wants the core; preempted at once
};

// The flag words of the priorities: "normal", "low", "idle" (a Choice flag's list).
std::vector<std::pair<std::string, BackgroundPriority>> BackgroundPriorityWords();
absl::string_view BackgroundPriorityName(BackgroundPriority priority);

// Lowers the calling thread to `priority` (kNormal: no change). Returns false, and
// logs `what`, when the kernel refused.
bool LowerCurrentThreadPriority(BackgroundPriority priority, absl::string_view what);

struct BackgroundLaneOptions {
  BackgroundPriority priority = BackgroundPriority::kLow;
  // The thread's name (at most 15 characters are kept), seen in top -H and gdb.
  std::string name = "ember-lane";
};

class BackgroundLane {
 public:
  explicit BackgroundLane(BackgroundLaneOptions options);
  ~BackgroundLane();
  BackgroundLane(const BackgroundLane&) = delete;
  BackgroundLane& operator=(const BackgroundLane&) = delete;

  // Runs `task` on the lane's thread, after the tasks submitted before it.
  void Submit(absl::AnyInvocable<void() &&> task);

  // Whether the lane's thread runs at its priority (false: the kernel refused, and it
  // runs at the process's; logged). Waits for the thread to start.
  bool lowered() const;

 private:
  void Run();
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const BackgroundLaneOptions options_;
  mutable absl::Mutex mu_;
  std::deque<absl::AnyInvocable<void() &&>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool lowered_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started after the rest is constructed
};

// The calling thread's nice value and whether its policy is SCHED_IDLE (tests).
int CurrentThreadNice();
bool CurrentThreadIsIdlePolicy();

}  // namespace ember

#endif  // EMBER_SERVER_SHARED_BACKGROUND_LANE_H_
