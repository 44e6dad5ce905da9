// Copyright 2026 The Ember Authors.
//
// A new run's rows (docs/OPERATIONS.md "A new run's rows"): once a run trained on a PS
// cluster, the next run says whether it trains on from the rows the shards hold
// (--rows=continue) or empties every table first (--rows=fresh); a run that says
// neither is refused before it touches a row. Real ember-datagen data, a coordinator
// with checkpoints, 2 PS shards and 2 ember-worker processes on loopback
// (job_cluster.h). Pinned:
//  - a second run without --rows exits 1 naming both choices and --resume_from;
//  - a --rows=fresh run ends with the first run's model, bitwise (the same job on a
//    new cluster), although the tables held the first run's rows;
//  - a --rows=continue run starts from those rows: another model.

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/job/job_cluster.h"
#include "tools/harness/result_json.h"

namespace ember {
namespace {

class StartRowsTest : public JobClusterTest {
 protected:
  static void SetUpTestSuite() { GenerateData("ember-start-rows"); }
  static void TearDownTestSuite() { TearDownData(); }

  // Runs both workers of generation `generation` with `extra` flags; rank 0's result.
  static std::string Run(Cluster& c, int generation, const std::vector<std::string>& extra) {
    for (int r = 0; r < kWorkers; ++r) {
      std::vector<std::string> flags = Flags();
      flags.push_back(absl::StrCat("--generation=", generation));
      flags.insert(flags.end(), extra.begin(), extra.end());
      c.StartWorker(r, flags);
      if (::testing::Test::HasFatalFailure()) return "";
    }
    return c.Finish();
  }

  // One worker of a run the coordinator refuses: its exit code; its output in *out.
  static int RunRefused(const Cluster& c, int generation, std::string* out) {
    const std::string log = c.dir_ + "/refused.log";
    const std::string cmd = absl::StrCat(
        EMBER_WORKER_BINARY, " --config=", EMBER_SOURCE_DIR, "/configs/quickstart.pbtxt",
        " --train=", c.data_, "/train --coordinator=", c.address_,
        " --rank=0 --world_size=2 --skip_eval --batch_size=128 --max_steps=10",
        " --run_dir=", c.dir_, "/refused-run --generation=", generation, " > ", log, " 2>&1");
    const int status = std::system(cmd.c_str());
    std::ifstream in(log);
    out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
};

TEST_F(StartRowsTest, ASecondRunSaysWhatToDoWithTheRowsAndFreshEqualsANewCluster) {
  std::unique_ptr<Cluster> c = NewCluster("rows");
  ASSERT_NO_FATAL_FAILURE(c->StartCoordinator(2));
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(c->StartShard(i));
  // The first run on a new cluster needs no choice.
  const std::string first = Run(*c, 1, {});
  ASSERT_EQ(JsonValue(first, "steps"), absl::StrCat(kSteps)) << first;

  // A second run that says nothing is refused.
  std::string refused;
  EXPECT_EQ(RunRefused(*c, 2, &refused), 1) << refused;
  for (const std::string& word : {"--rows=continue", "--rows=fresh", "--resume_from"}) {
    EXPECT_NE(refused.find(word), std::string::npos) << word << " in:\n" << refused;
  }

  // Fresh: the first run's model, bitwise, from tables that held its rows.
  const std::string fresh = Run(*c, 3, {"--rows=fresh"});
  ASSERT_EQ(JsonValue(fresh, "steps"), absl::StrCat(kSteps)) << fresh;
  for (const char* field : {"sparse_rows", "sparse_checksum", "dense_checksum", "model_checksum"}) {
    EXPECT_EQ(JsonValue(fresh, field), JsonValue(first, field)) << field;
  }

  // Continue: trains on from the fresh run's rows, so the sparse side differs.
  const std::string continued = Run(*c, 4, {"--rows=continue"});
  ASSERT_EQ(JsonValue(continued, "steps"), absl::StrCat(kSteps)) << continued;
  EXPECT_NE(JsonValue(continued, "sparse_checksum"), JsonValue(first, "sparse_checksum"));
  EXPECT_NE(JsonValue(continued, "model_checksum"), JsonValue(first, "model_checksum"));
}

}  // namespace
}  // namespace ember
