// Copyright 2026 The Ember Authors.

#include "tests/support/scratch_dir.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "gtest/gtest.h"

namespace ember {

ScratchDir::ScratchDir(const std::string& prefix) {
  std::string base = ::testing::TempDir();
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  std::string pattern = base + "/" + prefix + ".XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) == nullptr) {
    error_ = "mkdtemp " + pattern + ": " + std::strerror(errno);
    return;
  }
  path_ = buffer.data();
}

ScratchDir::~ScratchDir() {
  if (path_.empty()) return;
  std::error_code ignored;  // a test that failed half-way may leave it unremovable
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace ember
