// Copyright 2026 The Ember Authors.
//
// What a binary was built from, compiled in by CMake at configure time: the version
// (the top CMakeLists.txt's project(... VERSION ...)) and the git commit of the source
// tree (`git rev-parse --short HEAD`; "unknown" outside a git checkout). Every binary
// prints them for --version (common/flags.h), and every metrics endpoint exports them
// as ember_build_info{version="...",commit="..."} 1 (common/metrics.h).

#ifndef EMBER_COMMON_BUILD_INFO_H_
#define EMBER_COMMON_BUILD_INFO_H_

#include "absl/strings/string_view.h"

namespace ember {

// "0.2.0".
absl::string_view BuildVersion();
// "a78bb8c", or "unknown".
absl::string_view BuildCommit();

}  // namespace ember

#endif  // EMBER_COMMON_BUILD_INFO_H_
