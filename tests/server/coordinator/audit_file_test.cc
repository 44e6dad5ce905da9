// Copyright 2026 The Ember Authors.
//
// AuditFile (server/coordinator/audit_file.h) and its use by CoordinatorState: JSON
// lines in sequence order, escaping, the catch-up of entries the file missed, and a
// torn last line.

#include "server/coordinator/audit_file.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/coordinator/coordinator_state.h"

namespace ember {
namespace {

std::string TempDir() {
  const std::string tmpl = absl::StrCat(::testing::TempDir(), "/audit_file_test.XXXXXX");
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  EXPECT_NE(mkdtemp(buf.data()), nullptr);
  return buf.data();
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

v1::AuditEntry Entry(uint64_t sequence, const std::string& what) {
  v1::AuditEntry entry;
  entry.set_sequence(sequence);
  entry.set_unix_micros(1'700'000'000'000'000 + static_cast<int64_t>(sequence));
  entry.set_who("peer=ipv4:127.0.0.1:5 cert=ember-admin");
  entry.set_what(what);
  entry.set_epoch_before(3);
  entry.set_epoch_after(4);
  return entry;
}

TEST(AuditFileTest, LineIsJsonWithEscapes) {
  EXPECT_EQ(AuditFile::Line(Entry(7, "say \"hi\"\n\\ \x01")),
            "{\"sequence\":7,\"time\":\"2023-11-14T22:13:20.000007Z\",\"who\":\"peer=ipv4:"
            "127.0.0.1:5 cert=ember-admin\",\"what\":\"say \\\"hi\\\"\\n\\\\ \\u0001\","
            "\"epoch_before\":3,\"epoch_after\":4}");
}

TEST(AuditFileTest, AppendsOnlyNewEntriesAndResumesAfterReopen) {
  const std::string dir = TempDir();
  const std::string path = dir + "/audit.jsonl";
  {
    absl::StatusOr<std::unique_ptr<AuditFile>> file = AuditFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ((*file)->last_sequence(), 0u);
    ASSERT_TRUE((*file)->Append({Entry(1, "a"), Entry(2, "b")}).ok());
    ASSERT_TRUE((*file)->Append({Entry(2, "b"), Entry(3, "c")}).ok());  // 2 is not repeated
  }
  absl::StatusOr<std::unique_ptr<AuditFile>> file = AuditFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->last_sequence(), 3u);
  ASSERT_TRUE((*file)->Append({Entry(4, "d")}).ok());
  const std::vector<std::string> lines = Lines(path);
  ASSERT_EQ(lines.size(), 4u);
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_TRUE(absl::StartsWith(lines[i], absl::StrCat("{\"sequence\":", i + 1, ","))) << lines[i];
  }
  std::filesystem::remove_all(dir);
}

TEST(AuditFileTest, TornLastLineIsEndedAndSkipped) {
  const std::string dir = TempDir();
  const std::string path = dir + "/audit.jsonl";
  {
    std::ofstream out(path);
    out << AuditFile::Line(Entry(1, "a")) << "\n{\"sequence\":2,\"ti";  // crash mid-append
  }
  absl::StatusOr<std::unique_ptr<AuditFile>> file = AuditFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->last_sequence(), 1u);
  ASSERT_TRUE((*file)->Append({Entry(2, "b")}).ok());
  const std::vector<std::string> lines = Lines(path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1], "{\"sequence\":2,\"ti");
  EXPECT_TRUE(absl::StartsWith(lines[2], "{\"sequence\":2,\"time\":")) << lines[2];
  std::filesystem::remove_all(dir);
}

TEST(AuditFileTest, GarbageLastLineIsDataLoss) {
  const std::string dir = TempDir();
  const std::string path = dir + "/audit.jsonl";
  {
    std::ofstream out(path);
    out << "not an audit line\n";
  }
  absl::StatusOr<std::unique_ptr<AuditFile>> file = AuditFile::Open(path);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(file.status().message(), path));
  const absl::StatusOr<std::unique_ptr<AuditFile>> unopenable = AuditFile::Open(dir + "/no/such");
  EXPECT_EQ(unopenable.status().code(), absl::StatusCode::kInvalidArgument);
  std::filesystem::remove_all(dir);
}

// The coordinator's database is the record: a file that lost its tail (or was
// deleted) is completed from it at the next open.
TEST(AuditFileTest, CoordinatorStateCatchesTheFileUp) {
  const std::string dir = TempDir();
  CoordinatorOptions options;
  options.data_dir = dir + "/db";
  options.audit_log_path = dir + "/audit.jsonl";
  {
    absl::StatusOr<std::unique_ptr<CoordinatorState>> state = CoordinatorState::Open(options);
    ASSERT_TRUE(state.ok()) << state.status();
    ASSERT_TRUE((*state)->Audit("peer=a", "first").ok());
    ASSERT_TRUE((*state)->Audit("peer=b", "second").ok());
  }
  ASSERT_EQ(Lines(options.audit_log_path).size(), 2u);
  std::filesystem::remove(options.audit_log_path);
  {
    absl::StatusOr<std::unique_ptr<CoordinatorState>> state = CoordinatorState::Open(options);
    ASSERT_TRUE(state.ok()) << state.status();
    ASSERT_TRUE((*state)->Audit("peer=c", "third").ok());
  }
  const std::vector<std::string> lines = Lines(options.audit_log_path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_TRUE(absl::StrContains(lines[0], "\"what\":\"first\""));
  EXPECT_TRUE(absl::StrContains(lines[1], "\"what\":\"second\""));
  EXPECT_TRUE(absl::StrContains(lines[2], "\"what\":\"third\""));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ember
