// Copyright 2026 The Ember Authors.
//
// Resuming a job at another worker count (docs/ARCHITECTURE.md "Resuming at another
// worker count"): real ember-datagen data, a coordinator with checkpoints, PS shards and
// ember-worker processes on loopback (job_cluster.h).
//
// Pinned here, for data partitioned by file and by a column (user_id), with
// training.epoch_end LAST_OUT:
//  - the same with 2, then 3, then 1 worker(s) in one epoch (two changes);
//  - an SSP job of 3 workers with uneven shares trains every example of each epoch;
//  - a 2-worker run stopped mid-epoch (its final checkpoint at --max_steps) and resumed
//    by 3 workers, and (from a copy of the same checkpoint) by 1 worker, trains every
//    example of each epoch exactly once by count: result.json examples_per_epoch equals
//    the data's line count for both epochs;
//  - a resume whose training files changed since the checkpoint is refused, naming the
//    new file.

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "tests/job/job_cluster.h"
#include "tools/harness/process.h"
#include "tools/harness/result_json.h"

namespace ember {
namespace {

namespace fs = std::filesystem;

// Steps of the first (2-worker) run: past the first file of each rank, mid-epoch.
constexpr int kFirstSteps = 55;
constexpr int kBatch = 128;  // the Cluster's --batch_size

class ElasticResumeTest : public JobClusterTest, public ::testing::WithParamInterface<std::string> {
 protected:
  static void SetUpTestSuite() { GenerateData("ember-elastic"); }
  static void TearDownTestSuite() { TearDownData(); }

  std::string WriteConfig(const std::string& dir) { return WriteLastOutConfig(dir, GetParam()); }
  static uint64_t TrainLines() { return ember::TrainLines(*root_ + "/data/train"); }

  // Starts `world` workers with `flags` (after the job's own) and returns rank 0's result.
  static std::string Resume(Cluster* c, int world, const std::vector<std::string>& flags) {
    for (int r = 0; r < world; ++r) {
      std::vector<std::string> f = flags;
      f.push_back(absl::StrCat("--world_size=", world));
      c->StartWorker(r, f);
      if (::testing::Test::HasFatalFailure()) return "";
    }
    return c->Finish();
  }
};

TEST_P(ElasticResumeTest, TwoWorkersResumedByThreeAndByOneTrainEveryExampleOnce) {
  const uint64_t lines = TrainLines();
  ASSERT_EQ(lines, 24000u);
  std::unique_ptr<Cluster> c = NewCluster(absl::StrCat("elastic-", GetParam()));
  const std::string config = WriteConfig(c->dir_);
  const std::vector<std::string> job = {absl::StrCat("--config=", config), "--epochs=2",
                                        "--checkpoint_every_steps=20"};
  ASSERT_NO_FATAL_FAILURE(c->StartCoordinator(2));
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(c->StartShard(i));
  std::vector<std::string> first = job;
  first.push_back(absl::StrCat("--max_steps=", kFirstSteps));
  for (int r = 0; r < 2; ++r) ASSERT_NO_FATAL_FAILURE(c->StartWorker(r, first));
  const std::string stopped = c->Finish();
  ASSERT_EQ(JsonValue(stopped, "steps"), absl::StrCat(kFirstSteps)) << stopped;
  // Every step of the first run had a full batch on both workers.
  EXPECT_TRUE(HasEpochExamples(stopped, absl::StrCat("[", kFirstSteps * 2 * kBatch, "]")))
      << stopped;
  ASSERT_EQ(c->NewestCheckpointStep(), static_cast<uint64_t>(kFirstSteps));
  const std::string checkpoint = c->CommittedCheckpoints().back();
  // A copy of the checkpoints for the 1-worker resume (the 3-worker run's retention
  // deletes the original).
  const std::string copy = c->ckpt_ + "-copy";
  fs::copy(c->ckpt_, copy, fs::copy_options::recursive);

  const std::string expected = absl::StrCat("[", lines, ", ", lines, "]");
  // 3 workers: a new run of the job, from the checkpoint.
  std::vector<std::string> resume = job;
  resume.push_back("--resume_from=latest");
  resume.push_back("--generation=2");
  const std::string three = Resume(c.get(), 3, resume);
  EXPECT_EQ(JsonValue(three, "workers"), "3") << three;
  EXPECT_EQ(JsonValue(three, "resumed_from"), absl::StrCat("\"", checkpoint, "\"")) << three;
  EXPECT_TRUE(HasEpochExamples(three, expected)) << three;

  // 1 worker, on a fresh cluster (3 shards) from the copy.
  std::unique_ptr<Cluster> one_cluster = NewCluster(absl::StrCat("elastic-one-", GetParam()));
  one_cluster->ckpt_ = copy;
  ASSERT_NO_FATAL_FAILURE(one_cluster->StartCoordinator(3));
  for (int i = 0; i < 3; ++i) ASSERT_NO_FATAL_FAILURE(one_cluster->StartShard(i));
  std::vector<std::string> resume_one = job;
  resume_one.push_back("--resume_from=latest");
  const std::string one = Resume(one_cluster.get(), 1, resume_one);
  EXPECT_EQ(JsonValue(one, "workers"), "1") << one;
  EXPECT_EQ(JsonValue(one, "resumed_from"), absl::StrCat("\"", checkpoint, "\"")) << one;
  EXPECT_TRUE(HasEpochExamples(one, expected)) << one;
}

// Two changes in one epoch: 2 workers to step 55, 3 to step 65 (still in epoch 0: their
// checkpoint holds the first change's progress under their own cursors), then 1 to the
// end. With a column, the second change stacks a second layer.
TEST_P(ElasticResumeTest, TwoThenThreeThenOneWorkersInOneEpochTrainEveryExampleOnce) {
  std::unique_ptr<Cluster> c = NewCluster(absl::StrCat("twice-", GetParam()));
  const std::string config = WriteConfig(c->dir_);
  const std::vector<std::string> job = {absl::StrCat("--config=", config), "--epochs=2",
                                        "--checkpoint_every_steps=20"};
  ASSERT_NO_FATAL_FAILURE(c->StartCoordinator(2));
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(c->StartShard(i));
  const std::vector<std::pair<int, int>> runs = {{2, kFirstSteps}, {3, kFirstSteps + 10}, {1, 0}};
  // The last run on a fresh cluster over the same checkpoints (Cluster::Finish waits for
  // every rank a cluster ever started).
  std::unique_ptr<Cluster> last = NewCluster(absl::StrCat("twice-last-", GetParam()));
  last->ckpt_ = c->ckpt_;
  std::string result;
  for (size_t i = 0; i < runs.size(); ++i) {
    std::vector<std::string> flags = job;
    flags.push_back(absl::StrCat("--generation=", i + 1));
    if (runs[i].second > 0) flags.push_back(absl::StrCat("--max_steps=", runs[i].second));
    if (i > 0) flags.push_back("--resume_from=latest");
    if (i + 1 == runs.size()) {
      c.reset();  // its processes are stopped
      ASSERT_NO_FATAL_FAILURE(last->StartCoordinator(2));
      for (int s = 0; s < 2; ++s) ASSERT_NO_FATAL_FAILURE(last->StartShard(s));
    }
    Cluster* on = i + 1 == runs.size() ? last.get() : c.get();
    result = Resume(on, runs[i].first, flags);
    ASSERT_FALSE(result.empty());
    if (runs[i].second > 0) {
      ASSERT_EQ(on->NewestCheckpointStep(), static_cast<uint64_t>(runs[i].second)) << result;
      // Still in the first epoch.
      EXPECT_EQ(result.find("\"examples_per_epoch\": [24000"), std::string::npos) << result;
    }
  }
  const uint64_t lines = TrainLines();
  EXPECT_TRUE(HasEpochExamples(result, absl::StrCat("[", lines, ", ", lines, "]"))) << result;
}

// SSP (the next batch's pulls prefetched during a step) with 3 workers over 4 files: rank 0
// reads two files, ranks 1 and 2 one each and then take empty steps until rank 0 is out.
TEST_P(ElasticResumeTest, AnSspJobWithUnevenSharesTrainsEveryExampleOfEachEpoch) {
  std::unique_ptr<Cluster> c = NewCluster(absl::StrCat("ssp-", GetParam()));
  const std::string config = WriteConfig(c->dir_);
  ASSERT_NO_FATAL_FAILURE(c->StartCoordinator(2));
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(c->StartShard(i));
  const std::string result =
      Resume(c.get(), 3, {absl::StrCat("--config=", config), "--epochs=2", "--consistency=ssp"});
  const uint64_t lines = TrainLines();
  EXPECT_TRUE(HasEpochExamples(result, absl::StrCat("[", lines, ", ", lines, "]"))) << result;
}

INSTANTIATE_TEST_SUITE_P(ByFileAndByColumn, ElasticResumeTest,
                         ::testing::Values("file", "user_id"));

class ElasticFilesTest : public JobClusterTest {
 protected:
  static void SetUpTestSuite() { GenerateData("ember-elastic-files"); }
  static void TearDownTestSuite() { TearDownData(); }
};

// The checkpoint read 4 files; the data path now holds a fifth: the resume (at the
// same worker count) is refused (exit 1, no retry) with a message naming the new file.
TEST_F(ElasticFilesTest, AResumeWhoseTrainingFilesChangedIsRefusedNamingTheChange) {
  std::unique_ptr<Cluster> c = NewCluster("elastic-files");
  // Its own copy of the data (data.train_path is part of the config digest: the files
  // change under the same path).
  c->data_ = c->dir_ + "/data";
  fs::create_directories(c->data_);
  fs::copy(*root_ + "/data/train", c->data_ + "/train", fs::copy_options::recursive);
  ASSERT_NO_FATAL_FAILURE(c->StartCoordinator(1));
  ASSERT_NO_FATAL_FAILURE(c->StartShard(0));
  ASSERT_NO_FATAL_FAILURE(c->StartWorker(0, {"--world_size=1", "--max_steps=5"}));
  c->Finish();
  ASSERT_EQ(c->NewestCheckpointStep(), 5u);
  const std::string changed = c->data_ + "/train";
  fs::copy_file(changed + "/part-00000.tsv", changed + "/part-00009.tsv");
  const RunResult run = RunBinary(
      EMBER_WORKER_BINARY,
      absl::StrCat("--config=", EMBER_SOURCE_DIR,
                   "/configs/quickstart.pbtxt --coordinator=", c->address_, " --train=", changed,
                   " --world_size=1 --rank=0 --batch_size=128 --epochs=4 --skip_eval",
                   " --generation=2 --resume_from=latest --ps_deadline_ms=4000",
                   " --collective_timeout_ms=8000 2>&1"));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("the training data changed since the checkpoint: it had 4 files, "
                            "the data path has 5; new: part-00009.tsv"),
            std::string::npos)
      << run.output;
}

}  // namespace
}  // namespace ember
