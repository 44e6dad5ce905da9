// Copyright 2026 The Ember Authors.
//
// The delta file reader refuses what its writer never produces: records out of
// (space, key) order (a file that was corrupted, or spliced from two files).

#include "server/checkpoint/delta_file.h"

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ember {
namespace {

void AppendLe(std::string* out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// A put record in the file's layout: kind 1, space length (u16), space, key length
// (u32), key, value length (u32), value.
std::string Put(const std::string& space, const std::string& key, const std::string& value) {
  std::string out(1, '\x01');
  AppendLe(&out, space.size(), 2);
  out += space;
  AppendLe(&out, key.size(), 4);
  out += key;
  AppendLe(&out, value.size(), 4);
  out += value;
  return out;
}

std::string File(const std::vector<std::string>& records) {
  std::string out = "EMBDELTA";
  AppendLe(&out, 1, 4);   // format
  AppendLe(&out, 10, 8);  // base version
  AppendLe(&out, 20, 8);  // version
  for (const std::string& r : records) out += r;
  out += "EMBDEND.";
  AppendLe(&out, records.size(), 8);
  return out;
}

absl::Status Read(const std::string& bytes, int* seen) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/delta_file_test.", getpid());
  std::ofstream(path, std::ios::binary) << bytes;
  *seen = 0;
  absl::Status s = ReadDeltaFile(path, {10, 20}, [&](const DeltaRecord&) {
    ++*seen;
    return absl::OkStatus();
  });
  std::remove(path.c_str());
  return s;
}

TEST(DeltaFileTest, OrderedRecordsAreRead) {
  int seen = 0;
  ASSERT_TRUE(
      Read(File({Put("", "version", "x"), Put("t", "a", "1"), Put("t", "b", "2")}), &seen).ok());
  EXPECT_EQ(seen, 3);
}

TEST(DeltaFileTest, RecordsOutOfOrderAreDataLoss) {
  int seen = 0;
  for (const std::vector<std::string>& records :
       {std::vector<std::string>{Put("t", "b", "2"), Put("t", "a", "1")},     // keys backwards
        std::vector<std::string>{Put("t", "a", "1"), Put("t", "a", "1")},     // repeated
        std::vector<std::string>{Put("u", "a", "1"), Put("t", "z", "1")}}) {  // spaces backwards
    const absl::Status s = Read(File(records), &seen);
    EXPECT_TRUE(absl::IsDataLoss(s)) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "out of order")) << s;
    EXPECT_EQ(seen, 1);  // the first record only: nothing after the fault
  }
}

}  // namespace
}  // namespace ember
