// Copyright 2026 The Ember Authors.

#include "server/shared/background_lane.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "common/log.h"

namespace ember {
namespace {

constexpr int kLowestNice = 19;

pid_t ThreadId() { return static_cast<pid_t>(syscall(SYS_gettid)); }

}  // namespace

std::vector<std::pair<std::string, BackgroundPriority>> BackgroundPriorityWords() {
  return {{"normal", BackgroundPriority::kNormal},
          {"low", BackgroundPriority::kLow},
          {"idle", BackgroundPriority::kIdle}};
}

absl::string_view BackgroundPriorityName(BackgroundPriority priority) {
  switch (priority) {
    case BackgroundPriority::kNormal:
      return "normal";
    case BackgroundPriority::kLow:
      return "low";
    case BackgroundPriority::kIdle:
      return "idle";
  }
  return "unknown";
}

int CurrentThreadNice() {
  errno = 0;
  return getpriority(PRIO_PROCESS, static_cast<id_t>(ThreadId()));
}

bool CurrentThreadIsIdlePolicy() { return sched_getscheduler(0) == SCHED_IDLE; }

bool LowerCurrentThreadPriority(BackgroundPriority priority, absl::string_view what) {
  int failed = 0;
  switch (priority) {
    case BackgroundPriority::kNormal:
      return true;
    case BackgroundPriority::kLow:
      if (setpriority(PRIO_PROCESS, static_cast<id_t>(ThreadId()), kLowestNice) != 0)
        failed = errno;
      break;
    case BackgroundPriority::kIdle: {
      // Nice 19 as well: a kernel that ignores SCHED_IDLE's weight still sees the lowest.
      setpriority(PRIO_PROCESS, static_cast<id_t>(ThreadId()), kLowestNice);
      const sched_param param{};
      failed = pthread_setschedparam(pthread_self(), SCHED_IDLE, &param);
      break;
    }
  }
  if (failed == 0) return true;
  EMBER_LOG(WARNING) << what << ": could not lower the thread to priority "
                     << BackgroundPriorityName(priority) << " (" << std::strerror(failed)
                     << "); it runs at the process's";
  return false;
}

BackgroundLane::BackgroundLane(BackgroundLaneOptions options)
    : options_(std::move(options)), thread_([this] { Run(); }) {}

BackgroundLane::~BackgroundLane() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void BackgroundLane::Submit(absl::AnyInvocable<void() &&> task) {
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
}

bool BackgroundLane::lowered() const {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&started_));
  return lowered_;
}

bool BackgroundLane::HasWork() const { return stopping_ || !tasks_.empty(); }

void BackgroundLane::Run() {
  pthread_setname_np(pthread_self(), options_.name.substr(0, 15).c_str());
  const bool lowered = LowerCurrentThreadPriority(options_.priority, options_.name);
  {
    absl::MutexLock lock(&mu_);
    lowered_ = lowered;
    started_ = true;
  }
  for (;;) {
    absl::AnyInvocable<void() &&> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &BackgroundLane::HasWork));
      if (tasks_.empty()) return;  // stopping, and every task ran
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    std::move(task)();
  }
}

}  // namespace ember
