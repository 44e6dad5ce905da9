// Copyright 2026 The Ember Authors.
//
// Reading another process's /proc/PID/status (Linux): its resident memory, for tests
// that bound a server's memory under load.
//
//   absl::StatusOr<int64_t> rss = ResidentBytes(shard->pid());

#ifndef EMBER_TESTS_SUPPORT_PROC_STATUS_H_
#define EMBER_TESTS_SUPPORT_PROC_STATUS_H_

#include <sys/types.h>

#include <cstdint>

#include "absl/status/statusor.h"

namespace ember {

// VmRSS of `pid` in bytes. NOT_FOUND if the process is gone; INTERNAL if the file has
// no VmRSS line.
absl::StatusOr<int64_t> ResidentBytes(pid_t pid);

}  // namespace ember

#endif  // EMBER_TESTS_SUPPORT_PROC_STATUS_H_
