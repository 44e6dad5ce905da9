// Copyright 2026 The Ember Authors.

#include "tests/support/proc_status.h"

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"

namespace ember {

absl::StatusOr<int64_t> ResidentBytes(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/status");
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    int64_t kib = 0;
    fields >> kib;  // "VmRSS:     12345 kB"
    return kib * 1024;
  }
  return absl::InternalError(absl::StrCat(path, " has no VmRSS line"));
}

}  // namespace ember
