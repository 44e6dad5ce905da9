// Copyright 2026 The Ember Authors.

#include "common/build_info.h"

#ifndef EMBER_BUILD_VERSION
#error "EMBER_BUILD_VERSION must be defined by CMake (common/CMakeLists.txt)"
#endif
#ifndef EMBER_BUILD_COMMIT
#error "EMBER_BUILD_COMMIT must be defined by CMake (common/CMakeLists.txt)"
#endif

namespace ember {

absl::string_view BuildVersion() { return EMBER_BUILD_VERSION; }
absl::string_view BuildCommit() { return EMBER_BUILD_COMMIT; }

}  // namespace ember
