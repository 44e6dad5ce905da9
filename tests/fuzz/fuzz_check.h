// Copyright 2026 The Ember Authors.
//
// Shared by the fuzz targets. FUZZ_CHECK: an invariant of a fuzz target; a violation
// prints the condition and aborts, which libFuzzer (and the replay driver's caller)
// reports as a finding. ProcessScratchDir: the directory of a target whose servers
// live for the whole process.

#ifndef EMBER_TESTS_FUZZ_FUZZ_CHECK_H_
#define EMBER_TESTS_FUZZ_FUZZ_CHECK_H_

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#define FUZZ_CHECK(condition)                                                                 \
  do {                                                                                        \
    if (!(condition)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                           \
    }                                                                                         \
  } while (false)

// <tmp>/ember-<name>-<pid>, made empty and removed when the process exits normally
// (a crash leaves it, with the state that crashed). Call once per process.
inline std::filesystem::path ProcessScratchDir(const std::string& name) {
  static std::filesystem::path* const dir = new std::filesystem::path(
      std::filesystem::temp_directory_path() / ("ember-" + name + "-" + std::to_string(getpid())));
  std::error_code ignored;
  std::filesystem::remove_all(*dir, ignored);
  std::filesystem::create_directories(*dir, ignored);
  std::atexit([] {
    std::error_code ignored;
    std::filesystem::remove_all(*dir, ignored);
  });
  return *dir;
}

#endif  // EMBER_TESTS_FUZZ_FUZZ_CHECK_H_
