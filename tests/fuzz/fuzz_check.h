// Copyright 2026 The Ember Authors.
//
// FUZZ_CHECK: an invariant of a fuzz target. A violation prints the condition and
// aborts, which libFuzzer (and the replay driver's caller) reports as a finding.

#ifndef EMBER_TESTS_FUZZ_FUZZ_CHECK_H_
#define EMBER_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(condition)                                                                 \
  do {                                                                                        \
    if (!(condition)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                           \
    }                                                                                         \
  } while (false)

#endif  // EMBER_TESTS_FUZZ_FUZZ_CHECK_H_
