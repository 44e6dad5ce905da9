// Copyright 2026 The Ember Authors.
//
// Bad input at ember-serving's door, the real binary: --help, every kind of bad flag
// (exit 2, the flag named on the first line, a hint to --help after it), and a data
// directory it must not start from: a corrupt follower state (exit 1 with DATA_LOSS
// naming the directory, and the state left as it was: nothing bootstraps over it) and
// a --data_dir that is a file. The serving RPCs' bad input is in serving_cluster_test
// (LookupRefusesBadInput) and tests/fuzz/serving_fuzz.cc.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/store/rocksdb_backend.h"
#include "tests/support/usage_errors.h"
#include "tools/harness/process.h"

#ifndef EMBER_SERVING_BINARY
#error "EMBER_SERVING_BINARY must name the ember-serving binary"
#endif

namespace ember {
namespace {

// Flags that pass on their own; a case adds or overrides one. 127.0.0.1:1 is a closed
// port: nothing in these tests reaches a coordinator.
std::string Required(const std::string& dir) {
  return absl::StrCat("--coordinator=127.0.0.1:1 --checkpoint_dir=", dir, "/ckpt --data_dir=", dir,
                      "/data");
}

class ServingBadInputTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(testing::TempDir(), "/serving_bad_input.", getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ + "/ckpt");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
};

TEST_F(ServingBadInputTest, HelpPrintsUsageAndExitsZero) {
  for (const char* flag : {"--help", "-h"}) {
    const RunResult r = RunBinary(EMBER_SERVING_BINARY, flag);
    EXPECT_EQ(r.exit_code, 0) << flag;
    EXPECT_TRUE(absl::StartsWith(r.output, "usage: ember-serving")) << r.output;
    EXPECT_TRUE(absl::StrContains(r.output, "--unknown_ids")) << r.output;
  }
}

TEST_F(ServingBadInputTest, BadFlagsExitTwoNamingTheFlag) {
  const std::string ok = Required(dir_);
  // Each: the arguments, and what the first line of the message must contain.
  const std::vector<UsageErrorCase> cases = {
      {"--checkpoint_dir=/c --data_dir=/d", "--coordinator is required"},
      {"--coordinator=127.0.0.1:1 --data_dir=/d", "--checkpoint_dir is required"},
      {"--coordinator=127.0.0.1:1 --checkpoint_dir=/c", "--data_dir is required"},
      {ok + " --port=abc", "--port: bad number 'abc'"},
      {ok + " --port=70000", "--port must be <= 65535"},
      {ok + " --unknown_ids=maybe", "--unknown_ids: expected init or zeros, got 'maybe'"},
      {ok + " --max_batch_keys=0", "--max_batch_keys must be >= 1"},
      {ok + " --max_batch_keys=-3", "--max_batch_keys: bad number '-3'"},
      {ok + " --max_staleness_steps=x", "--max_staleness_steps: bad number 'x'"},
      {ok + " --memory_budget_mb=-1", "--memory_budget_mb must be in [0, 2^40]"},
      {ok + " --persist_interval_ms=0", "--persist_interval_ms must be >= 1"},
      {ok + " --progress_interval_ms=0", "--progress_interval_ms must be in [1, 60000]"},
      {ok + " --progress_interval_ms=60001", "--progress_interval_ms must be in [1, 60000]"},
      {ok + " --metrics_port=-2", "--metrics_port must be in [-1, 65535]"},
      {ok + " --shutdown_grace_ms=-1", "--shutdown_grace_ms must be >= 0"},
      {ok + " --admin_token=a --admin_token_file=/f", "not both"},
      {ok + " --port", "--port needs =value"},
      {ok + " --no_such_flag=1", "unknown flag --no_such_flag"},
      {ok + " stray", "unexpected argument 'stray'"},
  };
  ExpectUsageErrors(
      EMBER_SERVING_BINARY, cases,
      UsageErrorChecks().FirstLinePrefix("ember-serving: ").HintOnly("see 'ember-serving --help'"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/data")) << "a refused start creates nothing";
}

TEST_F(ServingBadInputTest, CorruptFollowerStateIsRefusedAndKept) {
  // A follower's store whose persisted positions are not a FollowerState.
  const std::string store = dir_ + "/data/store";
  std::filesystem::create_directories(dir_ + "/data");
  const std::string garbage = "\x0a\xff\xff\xff\xff not a FollowerState";
  {
    RocksDbOptions options;
    options.path = store;
    absl::StatusOr<std::unique_ptr<RocksDbBackend>> db = RocksDbBackend::Open(options);
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE((*db)->Write({{kMetaTable, "serving/state", garbage, false}}).ok());
    ASSERT_TRUE((*db)->Flush().ok());
  }
  const RunResult r = RunBinary(EMBER_SERVING_BINARY, Required(dir_));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "DATA_LOSS")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "corrupt follower state in " + dir_ + "/data"))
      << r.output;
  // Nothing bootstrapped over it: the state is still the bytes written.
  RocksDbOptions options;
  options.path = store;
  absl::StatusOr<std::unique_ptr<RocksDbBackend>> db = RocksDbBackend::Open(options);
  ASSERT_TRUE(db.ok()) << db.status();
  std::vector<std::string> values;
  std::vector<bool> found;
  ASSERT_TRUE((*db)->MultiGet(kMetaTable, {"serving/state"}, &values, &found).ok());
  ASSERT_TRUE(found[0]);
  EXPECT_EQ(values[0], garbage);
}

TEST_F(ServingBadInputTest, DataDirThatIsAFileIsRefused) {
  std::ofstream(dir_ + "/data") << "a file, not a directory\n";
  const RunResult r = RunBinary(EMBER_SERVING_BINARY, Required(dir_));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "cannot create --data_dir " + dir_ + "/data"))
      << r.output;
  std::ifstream in(dir_ + "/data");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "a file, not a directory");
}

TEST_F(ServingBadInputTest, SeveralJobsWithoutJobAreNamed) {
  // Two jobs checkpoint into the directory: which one to serve is the operator's call.
  std::filesystem::create_directories(dir_ + "/ckpt/ctr");
  std::filesystem::create_directories(dir_ + "/ckpt/search");
  const RunResult r = RunBinary(EMBER_SERVING_BINARY, Required(dir_));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output,
                                "holds the checkpoints of 2 jobs (ctr, search): pass "
                                "--job to say which one to serve"))
      << r.output;
}

}  // namespace
}  // namespace ember
