// Copyright 2026 The Ember Authors.
//
// ScratchDir: a fresh directory of a test's own under ::testing::TempDir(), removed with
// everything in it when the ScratchDir goes out of scope. CTest runs each case of a suite
// as its own process, several at once, so a fixed path under TempDir() is
// shared by every case of the suite and one case's TearDown deletes another's files: each
// case needs a directory no other process can pick (mkdtemp).
//
//   ScratchDir dir("export_format_test");
//   ASSERT_TRUE(dir.ok()) << dir.error();
//   std::ofstream(dir.path() + "/rows.tsv") << ...;

#ifndef EMBER_TESTS_SUPPORT_SCRATCH_DIR_H_
#define EMBER_TESTS_SUPPORT_SCRATCH_DIR_H_

#include <string>

namespace ember {

class ScratchDir {
 public:
  // Creates TempDir()/PREFIX.XXXXXX; ok() is false (and error() says why) if it cannot.
  explicit ScratchDir(const std::string& prefix);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  bool ok() const { return !path_.empty(); }
  const std::string& error() const { return error_; }
  // The directory, without a trailing slash; empty when !ok().
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string error_;
};

}  // namespace ember

#endif  // EMBER_TESTS_SUPPORT_SCRATCH_DIR_H_
