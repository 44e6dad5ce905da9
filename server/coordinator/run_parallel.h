// Copyright 2026 The Ember Authors.
//
// RunParallel: the coordinator's fan-out to shards (checkpoints, restores, map
// installs), one thread per shard; shard counts are small.

#ifndef EMBER_SERVER_COORDINATOR_RUN_PARALLEL_H_
#define EMBER_SERVER_COORDINATOR_RUN_PARALLEL_H_

#include <functional>
#include <thread>
#include <vector>

#include "absl/status/status.h"

namespace ember {

// Runs fn(i) for i in [0, n) on n threads and returns their statuses.
inline std::vector<absl::Status> RunParallel(size_t n,
                                             const std::function<absl::Status(size_t)>& fn) {
  std::vector<absl::Status> out(n);
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (size_t i = 0; i < n; ++i) threads.emplace_back([&, i] { out[i] = fn(i); });
  for (std::thread& t : threads) t.join();
  return out;
}

}  // namespace ember

#endif  // EMBER_SERVER_COORDINATOR_RUN_PARALLEL_H_
