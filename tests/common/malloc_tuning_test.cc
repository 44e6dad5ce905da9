// Copyright 2026 The Ember Authors.
//
// KeepFreedBuffers (common/malloc_tuning.h): freed RPC-sized buffers are reused, not
// handed back to the kernel and faulted in again; the environment can opt out.

#include "common/malloc_tuning.h"

#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace ember {
namespace {

int64_t MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// One "call": four 1 MiB buffers (a Push's request, decoded gradients, gRPC's slices),
// written through, then freed together, as a shard's handler does.
void OneCall() {
  constexpr size_t kBytes = size_t{1} << 20;
  std::vector<char*> buffers;
  for (int i = 0; i < 4; ++i) {
    char* b = static_cast<char*>(std::malloc(kBytes));
    ASSERT_NE(b, nullptr);
    std::memset(b, i + 1, kBytes);
    buffers.push_back(b);
  }
  for (char* b : buffers) std::free(b);
}

TEST(MallocTuningTest, TheEnvironmentDecides) {
  EXPECT_FALSE(EnvironmentSetsMallocThresholds(nullptr, nullptr, nullptr, nullptr));
  EXPECT_FALSE(
      EnvironmentSetsMallocThresholds("glibc.malloc.arena_max=2", nullptr, nullptr, nullptr));
  EXPECT_TRUE(EnvironmentSetsMallocThresholds("glibc.malloc.trim_threshold=131072", nullptr,
                                              nullptr, nullptr));
  EXPECT_TRUE(EnvironmentSetsMallocThresholds(
      "glibc.malloc.arena_max=2:glibc.malloc.mmap_threshold=4096", nullptr, nullptr, nullptr));
  EXPECT_TRUE(EnvironmentSetsMallocThresholds(nullptr, "131072", nullptr, nullptr));
  EXPECT_TRUE(EnvironmentSetsMallocThresholds(nullptr, nullptr, "131072", nullptr));
  EXPECT_TRUE(EnvironmentSetsMallocThresholds(nullptr, nullptr, nullptr, "1"));
  EXPECT_FALSE(EnvironmentSetsMallocThresholds(nullptr, nullptr, nullptr, "0"));
  EXPECT_FALSE(EnvironmentSetsMallocThresholds(nullptr, nullptr, nullptr, ""));
}

// With glibc's defaults every such call gives its 4 MiB back (the free top passes the
// trim threshold, 2 MiB once the first 1 MiB mapping was freed) and the next call
// faults in about a thousand pages again; kept, the calls after the first fault in none.
TEST(MallocTuningTest, BuffersOfACallAreReusedByTheNext) {
  if (EnvironmentSetsMallocThresholds(
          std::getenv("GLIBC_TUNABLES"), std::getenv("MALLOC_TRIM_THRESHOLD_"),
          std::getenv("MALLOC_MMAP_THRESHOLD_"), std::getenv("EMBER_MALLOC_DEFAULTS"))) {
    GTEST_SKIP() << "the environment sets malloc's thresholds";
  }
  ASSERT_NE(KeepFreedBuffers(), "");
  for (int i = 0; i < 3; ++i) OneCall();  // the arena grows to its working size
  const int64_t before = MinorFaults();
  constexpr int kCalls = 50;
  for (int i = 0; i < kCalls; ++i) OneCall();
  const int64_t faults = MinorFaults() - before;
  // 4 MiB is 1024 pages per call; allow a page per call of noise (gtest's own output).
  EXPECT_LT(faults, kCalls) << faults << " page faults in " << kCalls << " calls";
}

}  // namespace
}  // namespace ember
