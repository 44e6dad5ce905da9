// Copyright 2026 The Ember Authors.
//
// Multi-task heads end to end (model.proto DenseTowerConfig.tasks): real ember-datagen
// data with planted conversions, a real coordinator and PS shard, and ember-worker
// processes. Pinned here:
//  - a one-worker ESMM job (configs/quickstart_esmm.pbtxt) reports both tasks in
//    result.json ("tasks": click and ctcvr, with AUC, logloss, oracle AUC), the click
//    task's figures equal to the top-level ones, and both tasks learn;
//  - a two-worker job does too (the extra task's scores ride in the evaluation shards);
//  - --device=cuda refuses a multi-task config before any rendezvous (exit 2).

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/local_cluster.h"
#include "tests/support/usage_errors.h"
#include "tools/harness/process.h"
#include "tools/harness/result_json.h"

namespace ember {
namespace {

namespace fs = std::filesystem;

const std::string kConfig = std::string(EMBER_SOURCE_DIR) + "/configs/quickstart_esmm.pbtxt";

double Number(const std::string& json, const std::string& key) {
  const std::string v = JsonValue(json, key);
  return v.empty() || v == "null" ? -1 : std::stod(v);
}

// The JSON object of task `name` inside result.json's "tasks" ("" when absent).
std::string TaskJson(const std::string& json, const std::string& name) {
  const size_t at = json.find("\"" + name + "\": {");
  if (at == std::string::npos) return "";
  const size_t end = json.find('}', at);
  return json.substr(at, end - at + 1);
}

class MultiTaskTrainingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_dir_ = new std::string(
        (fs::temp_directory_path() / absl::StrCat("ember-multitask-data-", getpid())).string());
    const std::string cmd = absl::StrCat(
        EMBER_DATAGEN_BINARY, " --out=", *data_dir_,
        " --train_examples=60000 --test_examples=10000 --train_files=2 --users=3000",
        " --items=2000 --categories=60 --shops=300 --seed=5 --conversions > /dev/null");
    const int status = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd;
  }
  static void TearDownTestSuite() {
    fs::remove_all(*data_dir_);
    delete data_dir_;
  }
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            absl::StrCat("ember-multitask-", getpid(), "-",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    LocalClusterOptions options;
    options.dir = dir_ + "/cluster";
    options.shards = 1;
    cluster_ = std::make_unique<LocalCluster>(std::move(options));
    ASSERT_TRUE(cluster_->Start().ok());
  }
  void TearDown() override {
    if (cluster_ != nullptr) cluster_->StopAll().IgnoreError();
    fs::remove_all(dir_);
  }

  // Runs a `world`-worker job of the ESMM config; rank 0's result.json.
  std::string RunJob(int world) {
    const std::string run_dir = absl::StrCat(dir_, "/run", world);
    std::vector<std::unique_ptr<Process>> workers;
    const int generation = ++generation_;  // the same on every rank
    for (int r = 0; r < world; ++r) {
      absl::StatusOr<std::unique_ptr<Process>> w =
          Process::Start(EMBER_WORKER_BINARY,
                         {"--config=" + kConfig, absl::StrCat("--train=", *data_dir_, "/train"),
                          absl::StrCat("--test=", *data_dir_, "/test"),
                          absl::StrCat("--coordinator=", cluster_->coordinator_address()),
                          absl::StrCat("--rank=", r), absl::StrCat("--world_size=", world),
                          absl::StrCat("--run_dir=", run_dir), "--batch_size=256",
                          "--metrics_port=-1", absl::StrCat("--generation=", generation)},
                         "worker ", absl::Seconds(60));
      if (!w.ok()) {
        ADD_FAILURE() << w.status();
        return "";
      }
      workers.push_back(std::move(*w));
    }
    for (size_t r = 0; r < workers.size(); ++r) {
      absl::StatusOr<int> code = workers[r]->Wait(absl::Minutes(5));
      EXPECT_TRUE(code.ok()) << code.status();
      if (code.ok()) {
        EXPECT_EQ(*code, 0) << "worker " << r;
      }
    }
    return ReadFile(run_dir + "/result.json");
  }

  void ExpectBothTasks(const std::string& json) {
    const std::string click = TaskJson(json, "click");
    const std::string ctcvr = TaskJson(json, "ctcvr");
    ASSERT_FALSE(click.empty()) << json;
    ASSERT_FALSE(ctcvr.empty()) << json;
    EXPECT_EQ(JsonValue(click, "test_auc"), JsonValue(json, "test_auc"));
    EXPECT_EQ(JsonValue(click, "test_logloss"), JsonValue(json, "test_logloss"));
    EXPECT_EQ(JsonValue(ctcvr, "kind"), "\"ESMM_CTCVR\"");
    EXPECT_GT(Number(json, "test_auc"), 0.65);
    // The planted CTCVR is learnable well above chance; its oracle is above the model.
    const double auc = Number(ctcvr, "test_auc");
    const double oracle = Number(ctcvr, "oracle_auc");
    EXPECT_GT(auc, 0.65) << ctcvr;
    EXPECT_GT(oracle, auc) << ctcvr;
    EXPECT_GT(Number(ctcvr, "test_positives"), 0);
    // The CVR head over the clicked examples learns too, below its oracle.
    const double cvr = Number(ctcvr, "cvr_auc_clicked");
    EXPECT_GT(cvr, 0.55) << ctcvr;
    EXPECT_GT(Number(ctcvr, "cvr_oracle_auc_clicked"), cvr) << ctcvr;
  }

  static std::string* data_dir_;
  std::string dir_;
  std::unique_ptr<LocalCluster> cluster_;
  int generation_ = 0;
};

std::string* MultiTaskTrainingTest::data_dir_ = nullptr;

TEST_F(MultiTaskTrainingTest, OneWorkerEsmmJobReportsBothTasks) { ExpectBothTasks(RunJob(1)); }

TEST_F(MultiTaskTrainingTest, TwoWorkerEsmmJobReportsBothTasks) { ExpectBothTasks(RunJob(2)); }

TEST(MultiTaskFlagsTest, CudaRefusesMultiTaskHeadsBeforeAnyRendezvous) {
  ExpectUsageErrors(EMBER_WORKER_BINARY,
                    {{"--config=" + kConfig + " --coordinator=127.0.0.1:1 --device=cuda",
                      "multi-task heads are not on CUDA yet; use --device=cpu"}},
                    UsageErrorChecks().MessageAnywhere());
}

}  // namespace
}  // namespace ember
