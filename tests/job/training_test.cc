// Copyright 2026 The Ember Authors.
//
// End-to-end training tests: real ember-datagen data, a real coordinator and PS
// shards, and ember-worker processes talking gRPC and Gloo over loopback.
//
// Pinned here:
//  - docs/ARCHITECTURE.md invariant 6: a BSP job ends with bitwise the same model (sparse rows,
//    optimizer state and dense weights) on 1 and on 3 PS shards;
//  - training learns (test AUC well above chance) and writes its run directory;
//  - SSP and ASP jobs finish and learn;
//  - a worker killed mid-job makes the others fail clearly within the collective
//    deadline instead of hanging;
//  - a plaintext cluster with a cluster token trains workers that hold it and refuses
//    one that does not;
//  - bad flags and a bad config are rejected with exit code 2.

#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "tests/support/local_cluster.h"
#include "tests/support/ports.h"
#include "tests/support/usage_errors.h"
#include "tools/harness/process.h"
#include "tools/harness/result_json.h"

namespace ember {
namespace {

namespace fs = std::filesystem;

double JsonNumber(const std::string& json, const std::string& key) {
  const std::string v = JsonValue(json, key);
  return v.empty() || v == "null" ? -1 : std::stod(v);
}

int RunCommand(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

class TrainingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_dir_ = new std::string(
        (fs::temp_directory_path() / absl::StrCat("ember-training-data-", getpid())).string());
    const std::string cmd =
        absl::StrCat(EMBER_DATAGEN_BINARY, " --out=", *data_dir_,
                     " --train_examples=40000 --test_examples=8000 --train_files=4 --users=4000",
                     " --items=3000 --categories=60 --shops=300 --seed=7 > /dev/null");
    ASSERT_EQ(RunCommand(cmd), 0) << cmd;
  }
  static void TearDownTestSuite() {
    fs::remove_all(*data_dir_);
    delete data_dir_;
  }

  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            absl::StrCat("ember-training-", getpid(), "-",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    workers_.clear();
    StopCluster();
    fs::remove_all(dir_);
  }

  // A coordinator and `shards` shards under dir_/`name`, with no flags of their own.
  void StartCluster(int shards, const std::string& name) {
    LocalClusterOptions cluster_options;
    cluster_options.dir = absl::StrCat(dir_, "/", name);
    cluster_options.shards = shards;
    cluster_ = std::make_unique<LocalCluster>(std::move(cluster_options));
    const absl::Status started = cluster_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  void StopCluster() {
    if (cluster_ != nullptr) cluster_->StopAll().IgnoreError();
    cluster_.reset();
  }

  // Starts `world` workers with `flags` (plus data, coordinator, rank and run_dir).
  void StartWorkers(int world, const std::string& run_dir, const std::vector<std::string>& flags) {
    for (int r = 0; r < world; ++r) {
      std::vector<std::string> args = {
          absl::StrCat("--config=", EMBER_SOURCE_DIR, "/configs/quickstart.pbtxt"),
          absl::StrCat("--train=", *data_dir_, "/train"),
          absl::StrCat("--test=", *data_dir_, "/test"),
          absl::StrCat("--coordinator=", cluster_->coordinator_address()),
          absl::StrCat("--rank=", r), absl::StrCat("--world_size=", world),
          absl::StrCat("--run_dir=", run_dir), "--log_every_steps=10",
          // Every job on a coordinator rendezvouses under its own generation, and the
          // jobs of a suite train on from each other's rows (--rows: a choice is required).
          absl::StrCat("--generation=", generation_), "--rows=continue"};
      args.insert(args.end(), flags.begin(), flags.end());
      absl::StatusOr<std::unique_ptr<Process>> w =
          Process::Start(EMBER_WORKER_BINARY, args, "worker ", absl::Seconds(60));
      ASSERT_TRUE(w.ok()) << w.status();
      workers_.push_back(std::move(*w));
    }
  }

  // Runs a whole job and returns rank 0's result.json.
  std::string RunJob(int world, const std::string& run_dir, const std::vector<std::string>& flags) {
    StartWorkers(world, run_dir, flags);
    for (size_t r = 0; r < workers_.size(); ++r) {
      absl::StatusOr<int> code = workers_[r]->Wait(absl::Minutes(5));
      EXPECT_TRUE(code.ok()) << code.status();
      if (code.ok()) {
        EXPECT_EQ(*code, 0) << "worker " << r;
      }
    }
    workers_.clear();
    ++generation_;
    return ReadFile(run_dir + "/result.json");
  }

  // The flags of a one-off ember-worker run against cluster_: the quickstart config, the
  // coordinator and a new generation, then `extra`.
  std::string OneOffWorker(const std::string& extra) {
    return absl::StrCat("--config=", EMBER_SOURCE_DIR,
                        "/configs/quickstart.pbtxt --coordinator=", cluster_->coordinator_address(),
                        " --generation=", ++generation_, " --rows=continue ", extra);
  }

  static std::string* data_dir_;
  std::string dir_;
  std::unique_ptr<LocalCluster> cluster_;
  std::vector<std::unique_ptr<Process>> workers_;
  int generation_ = 0;
};

std::string* TrainingTest::data_dir_ = nullptr;

TEST_F(TrainingTest, BspModelIsIdenticalOnOneAndThreeShards) {
  const std::vector<std::string> flags = {"--batch_size=256", "--max_steps=40", "--skip_eval"};
  ASSERT_NO_FATAL_FAILURE(StartCluster(1, "one"));
  const std::string one = RunJob(2, dir_ + "/run-one", flags);
  StopCluster();
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, "three"));
  const std::string three = RunJob(2, dir_ + "/run-three", flags);

  ASSERT_FALSE(one.empty());
  ASSERT_FALSE(three.empty());
  EXPECT_EQ(JsonValue(one, "steps"), "40");
  EXPECT_GT(JsonNumber(one, "sparse_rows"), 1000);
  EXPECT_EQ(JsonValue(one, "sparse_rows"), JsonValue(three, "sparse_rows"));
  EXPECT_EQ(JsonValue(one, "sparse_checksum"), JsonValue(three, "sparse_checksum"));
  EXPECT_EQ(JsonValue(one, "dense_checksum"), JsonValue(three, "dense_checksum"));
  EXPECT_EQ(JsonValue(one, "model_checksum"), JsonValue(three, "model_checksum"));
}

TEST_F(TrainingTest, LearnsAndWritesTheRunDirectory) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(2, "c"));
  const std::string run = dir_ + "/run";
  const std::string result =
      RunJob(1, run, {"--batch_size=256", "--epochs=2", "--eval_every_steps=100"});
  ASSERT_FALSE(result.empty());
  const double auc = JsonNumber(result, "test_auc");
  const double oracle = JsonNumber(result, "oracle_auc");
  EXPECT_GT(auc, 0.65) << result;
  EXPECT_GT(oracle, auc - 0.01) << result;  // nothing beats the truth by much
  EXPECT_GT(JsonNumber(result, "test_logloss"), 0) << result;
  EXPECT_GT(JsonNumber(result, "examples_per_sec"), 0) << result;
  EXPECT_EQ(JsonNumber(result, "examples"), 80000) << result;  // 2 epochs of 40000
  EXPECT_GE(JsonNumber(result, "auc_hot"), 0) << result;
  EXPECT_GE(JsonNumber(result, "auc_cold_users"), 0) << result;
  EXPECT_THAT(ReadFile(run + "/training.svg"), ::testing::HasSubstr("<polyline"));
  const std::string tsv = ReadFile(run + "/metrics.tsv");
  EXPECT_GT(std::count(tsv.begin(), tsv.end(), '\n'), 10) << tsv;

  // Rank 0 reported the run's progress to the coordinator, the last report with the
  // final evaluation (emberctl jobs, the ember_job_* metrics).
  absl::StatusOr<v1::GetJobResponse> got = cluster_->GetJob("quickstart");
  ASSERT_TRUE(got.ok()) << got.status();
  const v1::GetJobResponse& job = *got;
  EXPECT_EQ(job.phase(), v1::GetJobResponse::FINISHED);
  ASSERT_TRUE(job.has_progress());
  EXPECT_EQ(absl::StrCat(job.progress().step()), JsonValue(result, "steps"));
  EXPECT_EQ(job.progress().examples(), 80000u);
  EXPECT_GT(job.progress().estimated_steps(), 0u);
  EXPECT_DOUBLE_EQ(job.progress().progress_ratio(), 1.0);
  EXPECT_DOUBLE_EQ(job.progress().eta_seconds(), 0.0);
  EXPECT_GT(job.progress().examples_per_sec(), 0);
  ASSERT_TRUE(job.progress().has_test_auc());
  EXPECT_NEAR(job.progress().test_auc(), auc, 1e-6);  // result.json has 6 decimals
}

TEST_F(TrainingTest, SspAndAspJobsFinishAndLearn) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(2, "c"));
  for (const std::string mode : {"ssp", "asp"}) {
    const std::string result =
        RunJob(2, dir_ + "/run-" + mode, {"--batch_size=256", "--consistency=" + mode});
    EXPECT_GT(JsonNumber(result, "test_auc"), 0.6) << mode << ": " << result;
    EXPECT_EQ(JsonValue(result, "consistency"), "\"" + absl::AsciiStrToUpper(mode) + "\"");
  }
}

TEST_F(TrainingTest, AKilledWorkerFailsTheOthersWithinTheDeadline) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(1, "c"));
  ASSERT_NO_FATAL_FAILURE(StartWorkers(
      2, dir_ + "/run",
      {"--batch_size=64", "--epochs=1000", "--skip_eval", "--collective_timeout_ms=3000"}));
  ASSERT_TRUE(workers_[1]->Kill().ok());
  const absl::Time killed = absl::Now();
  absl::StatusOr<int> code = workers_[0]->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << "the surviving worker hung: " << code.status();
  EXPECT_EQ(*code, 1);
  EXPECT_LT(absl::Now() - killed, absl::Seconds(30));
}

// A metrics address the worker cannot serve fails the worker once, saying why; it used
// to count as a recoverable attempt failure and loop through recoveries.
// A plaintext cluster with a cluster token (docs/SECURITY.md): a two-worker job whose
// workers hold it trains (its table creation and rendezvous KvPut carry the token); a
// worker without it is refused at table creation, naming the flag.
TEST_F(TrainingTest, AClusterWithATokenTrainsWorkersThatHoldIt) {
  const std::string token = absl::StrCat("--cluster_token_file=", dir_, "/cluster_token");
  std::ofstream(dir_ + "/cluster_token") << "training-test-token\n";
  LocalClusterOptions cluster_options;
  cluster_options.dir = dir_ + "/t";
  cluster_options.shards = 2;
  cluster_options.coordinator_flags = {token};
  cluster_options.shard_flags = {token};
  cluster_ = std::make_unique<LocalCluster>(std::move(cluster_options));
  const absl::Status started = cluster_->Start();
  ASSERT_TRUE(started.ok()) << started;

  const std::string result =
      RunJob(2, dir_ + "/run", {"--batch_size=256", "--max_steps=40", "--skip_eval", token});
  EXPECT_EQ(JsonValue(result, "steps"), "40") << result;

  const RunResult refused = RunBinary(
      EMBER_WORKER_BINARY,
      OneOffWorker(absl::StrCat("--train=", *data_dir_, "/train --max_steps=1 --skip_eval ",
                                "--max_recoveries=0 --run_dir=", dir_, "/refused")));
  EXPECT_NE(refused.exit_code, 0) << refused.output;
  EXPECT_THAT(refused.output, ::testing::HasSubstr("CreateTable")) << refused.output;
  EXPECT_THAT(refused.output, ::testing::HasSubstr("--cluster_token_file")) << refused.output;
}

TEST_F(TrainingTest, AnUnservableMetricsAddressFailsTheWorkerOnce) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(1, "m"));
  // 192.0.2.1 (TEST-NET-1) is no address of this machine: the bind fails.
  const RunResult run = RunBinary(
      EMBER_WORKER_BINARY,
      OneOffWorker("--metrics_host=192.0.2.1 --metrics_port=0 --max_recoveries=3 --skip_eval"));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.output, ::testing::HasSubstr("cannot serve metrics"));
  EXPECT_THAT(run.output, ::testing::Not(::testing::HasSubstr("rejoining")));
}

// A worker pointed at an address nothing serves says what it waits for at once and
// fails within --collective_timeout_ms naming the address; it used to wait in silence
// for --recovery_timeout_ms (10 minutes).
TEST_F(TrainingTest, AnUnreachableCoordinatorIsNamedAndFailsWithinTheCollectiveTimeout) {
  const int port = FreePort();
  ASSERT_GT(port, 0);
  const absl::Time start = absl::Now();
  const RunResult run =
      RunBinary(EMBER_WORKER_BINARY,
                absl::StrCat("--config=", EMBER_SOURCE_DIR,
                             "/configs/quickstart.pbtxt --coordinator=", "127.0.0.1:", port,
                             " --collective_timeout_ms=2000 --metrics_port=-1"));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_LT(absl::Now() - start, absl::Seconds(20)) << run.output;
  const std::string address = absl::StrCat("127.0.0.1:", port);
  EXPECT_THAT(run.output, ::testing::HasSubstr(absl::StrCat("joining job 'quickstart' at ", address,
                                                            ": coordinator unreachable")));
  EXPECT_THAT(run.output,
              ::testing::HasSubstr(absl::StrCat("coordinator ", address, " unreachable for 2s")));
}

// Rank 0 of 2 with rank 1 never started: it says it waits for the other worker and
// fails once, within the collective timeout, naming the missing rank; it used to
// rejoin through recovery after recovery in silence.
TEST_F(TrainingTest, AMissingRankIsNamedAndFailsTheFirstAttemptWithinTheCollectiveTimeout) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(1, "r"));
  const absl::Time start = absl::Now();
  const RunResult run = RunBinary(
      EMBER_WORKER_BINARY,
      OneOffWorker(absl::StrCat("--rank=0 --world_size=2 --collective_timeout_ms=3000",
                                " --metrics_port=-1 --train=", *data_dir_, "/train --skip_eval")));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_LT(absl::Now() - start, absl::Seconds(30)) << run.output;
  EXPECT_THAT(run.output, ::testing::HasSubstr("waiting for the other 1 worker(s)"));
  EXPECT_THAT(run.output, ::testing::HasSubstr("ranks [1] of 2 did not join"));
  EXPECT_THAT(run.output, ::testing::HasSubstr("--world_size=2"));
  EXPECT_THAT(run.output, ::testing::Not(::testing::HasSubstr("rejoining")));
}

TEST_F(TrainingTest, AWorkerWithAnotherConfigIsToldWhichFieldsDiffer) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(1, "c"));
  const std::string worker = OneOffWorker(
      absl::StrCat("--rank=0 --world_size=1 --metrics_port=-1 --max_steps=2 --skip_eval",
                   " --collective_timeout_ms=3000 --train=", *data_dir_, "/train"));
  const RunResult run = RunBinary(EMBER_WORKER_BINARY, worker + " --batch_size=128");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // The same run (generation) with another batch size: refused, naming the field.
  const RunResult other = RunBinary(EMBER_WORKER_BINARY, worker + " --batch_size=64");
  EXPECT_NE(other.exit_code, 0) << other.output;
  EXPECT_THAT(other.output, ::testing::HasSubstr("has another model config than the run"));
  EXPECT_THAT(other.output,
              ::testing::HasSubstr("training.batch_size (64 this worker, 128 the run)"));
}

TEST_F(TrainingTest, EpochsThatOverfitAreWarnedAbout) {
  // Six passes over this small dataset: the test AUC peaks early and falls after
  // (deterministic in BSP), and rank 0 says so.
  ASSERT_NO_FATAL_FAILURE(StartCluster(1, "o"));
  const RunResult run = RunBinary(
      EMBER_WORKER_BINARY,
      OneOffWorker(absl::StrCat("--rank=0 --world_size=1 --metrics_port=-1 --epochs=6",
                                " --eval_every_steps=40 --train=", *data_dir_,
                                "/train --test=", *data_dir_, "/test --run_dir=", dir_, "/o-run")));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, ::testing::HasSubstr("is below the best of this run"));
  EXPECT_THAT(run.output, ::testing::HasSubstr("further steps overfit"));
}

// A dense model whose checkpointed state (parameters and Adam's two moments) is above
// gRPC's default 4 MiB message: a CROSS tower with a wide top MLP, about 470k dense
// parameters. The step-0 checkpoint reaches the coordinator and the job finishes.
TEST_F(TrainingTest, ACrossTowerAbove4MiBCheckpoints) {
  LocalClusterOptions options;
  options.dir = dir_ + "/big";
  options.shards = 1;
  options.coordinator_flags = {"--checkpoint_dir=" + dir_ + "/big/checkpoints"};
  cluster_ = std::make_unique<LocalCluster>(std::move(options));
  ASSERT_TRUE(cluster_->Start().ok());
  std::ifstream in(absl::StrCat(EMBER_SOURCE_DIR, "/configs/quickstart.pbtxt"));
  std::string text(std::istreambuf_iterator<char>(in), {});
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"interaction: DOT", "interaction: CROSS"},
        {"top_mlp: [64, 32]", "top_mlp: [2048, 64]"}}) {
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  }
  const std::string config = dir_ + "/cross.pbtxt";
  std::ofstream(config) << text;
  const RunResult run = RunBinary(
      EMBER_WORKER_BINARY,
      absl::StrCat("--config=", config, " --coordinator=", cluster_->coordinator_address(),
                   " --generation=", ++generation_, " --rows=continue",
                   " --rank=0 --world_size=1 --metrics_port=-1 --max_steps=3 --batch_size=256",
                   " --skip_eval --train=", *data_dir_, "/train --test=", *data_dir_,
                   "/test --run_dir=", dir_, "/big-run"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, ::testing::HasSubstr("checkpoint ckpt-000000000000"));
  EXPECT_EQ(JsonValue(ReadFile(dir_ + "/big-run/result.json"), "steps"), "3");
}

TEST(WorkerFlagsTest, BadFlagsAndBadConfigsExitWithUsageErrors) {
  const std::string bin = EMBER_WORKER_BINARY;
  const std::string config = absl::StrCat(EMBER_SOURCE_DIR, "/configs/quickstart.pbtxt");
  EXPECT_EQ(RunCommand(bin + " --help > /dev/null"), 0);
  const std::string base = "--config=" + config + " --coordinator=127.0.0.1:1";
  const std::string bad = (fs::temp_directory_path() / "ember-bad-config.pbtxt").string();
  std::ofstream(bad) << "name: \"x\"\ntables { name: \"t\" dim: 8 }\nfeatures { column: \"c\" "
                        "table: \"missing\" }\n";
  const std::string cross = (fs::temp_directory_path() / "ember-cross-config.pbtxt").string();
  {
    std::ifstream in(config);
    std::string text(std::istreambuf_iterator<char>(in), {});
    const size_t at = text.find("interaction: DOT");
    ASSERT_NE(at, std::string::npos);
    std::ofstream(cross) << text.replace(at, 16, "interaction: CROSS");
  }
  // Each exits 2 (only the exit code is pinned here).
  ExpectUsageErrors(
      EMBER_WORKER_BINARY,
      {
          {"--coordinator=127.0.0.1:1", ""},  // no --config
          {base + " --rank=2 --world_size=2", ""},
          {base + " --consistency=eventual", ""},
          {"--config=/nonexistent.pbtxt --coordinator=127.0.0.1:1", ""},
          // Skew overrides are checked like the config: the hot-row cache needs SSP or
          // ASP, a cold loss weight must be > 0, a bad number is a usage error.
          {base + " --hot_cache_steps=2", ""},
          {base + " --cold_loss_weight=0", ""},
          {base + " --cold_loss_weight=-1", ""},
          {base + " --cold_resample_fraction=x", ""},
          {base + " --cold_features=user_id,nope --cold_loss_weight=2", ""},
          // Transport flags: TLS needs all three files, readable; the all-reduce address
          // must not be empty.
          {base + " --tls_ca=/nonexistent/ca.pem", ""},
          {base + " --tls_ca=/no/ca.pem --tls_cert=/no/c.pem --tls_key=/no/c.key", ""},
          {base + " --collective_host=", ""},
          // The run is named once: by its generation or by its id.
          {base + " --run_id=abc --generation=3", "--run_id"},
          {base + " --run_id=", ""},
          {base + " --run_id=" + std::string(129, 'r'), "--run_id"},
          // A new run's rows: one of two words, and not fresh with a checkpoint.
          {base + " --rows=maybe", "--rows"},
          {base + " --rows=fresh --resume_from=latest", "--rows=fresh with --resume_from"},
          // Elastic runs: a range MIN:MAX with 1 <= MIN <= MAX, not with a rank or world
          // size; the elastic flags need it; no per-worker skew state.
          {base + " --workers=3:2", "--workers"},
          {base + " --workers=0:2", "--workers"},
          {base + " --workers=2", "--workers"},
          {base + " --workers=1:2 --rank=0", "--rank/--world_size"},
          {base + " --member=a", "--workers"},
          {base + " --leave_at_step=9", "--workers"},
          {base + " --workers=1:2 --cold_features=user_id --cold_loss_weight=2", "elastic"},
          // The scores file's directory must exist before a run spends its time.
          {base + " --eval_scores_file=/nonexistent/dir/scores.txt", "--eval_scores_file"},
          {"--config=" + bad + " --coordinator=127.0.0.1:1", ""},
          // A CROSS tower on CUDA (no cross kernels yet), on any machine.
          {"--config=" + cross + " --coordinator=127.0.0.1:1 --device=cuda", ""},
      });
  fs::remove(bad);
  fs::remove(cross);
}

}  // namespace
}  // namespace ember
