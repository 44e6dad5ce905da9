// Copyright 2026 The Ember Authors.

#include "tests/support/ports.h"

#include "gtest/gtest.h"

namespace ember {

int FreePort() {
  absl::StatusOr<int> port = FreeLoopbackPort();
  EXPECT_TRUE(port.ok()) << port.status();
  return port.ok() ? *port : -1;
}

}  // namespace ember
