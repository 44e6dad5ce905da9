// Copyright 2026 The Ember Authors.
//
// Distributed evaluation end to end (docs/ARCHITECTURE.md "Training loop"): real
// ember-datagen data, a real coordinator with checkpoints, PS shards and ember-worker
// processes over loopback, and in-process evaluations of the same final model.
//
// Pinned here:
//  - the final evaluation of a 2-worker BSP job (each rank scoring its batches) gives
//    bitwise the metrics and the --eval_scores_file of one rank evaluating the same
//    final model (the PS rows and the dense weights of the job's final checkpoint), and
//    so do 3 ranks, also with eval_max_examples cutting the test set short;
//  - a final evaluation that fails on one rank (its test data is missing) fails every
//    rank clearly, naming the rank, within the deadlines (no rank hangs or rejoins);
//  - a PS shard killed (and restarted by the supervisor) once the final checkpoint is
//    committed, during the final evaluation, ends with every rank finishing OK and the
//    fault-free job's model, metrics and scores (every rank rejoined the rolled-back
//    attempt; ranks above 0 do not report success before rank 0 finished the job).

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/model/model_config.h"
#include "common/ps_client.h"
#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_catalog.h"
#include "tests/job/job_cluster.h"
#include "tools/harness/process.h"
#include "tools/harness/result_json.h"
#include "worker/collective/collective.h"
#include "worker/eval/evaluator.h"
#include "worker/training/sparse_features.h"

namespace ember {
namespace {

namespace fs = std::filesystem;
using worker::TestSetResult;

constexpr int kMaxSteps = 80;
// The metric keys of result.json that the evaluation fills.
const char* const kMetricKeys[] = {"test_auc",
                                   "test_logloss",
                                   "oracle_auc",
                                   "oracle_logloss",
                                   "auc_hot",
                                   "auc_warm",
                                   "auc_cold",
                                   "auc_cold_users",
                                   "test_examples",
                                   "test_examples_hot",
                                   "test_examples_warm",
                                   "test_examples_cold",
                                   "test_examples_cold_users"};

std::string Number(const std::optional<double>& v) {
  return v.has_value() ? absl::StrFormat("%.6g", *v) : "null";  // as result.json writes it
}

// Bitwise equality of doubles and of optional ones.
bool Same(double a, double b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }
bool Same(const std::optional<double>& a, const std::optional<double>& b) {
  return a.has_value() == b.has_value() && (!a.has_value() || Same(*a, *b));
}

void ExpectSameResult(const TestSetResult& a, const TestSetResult& b) {
  EXPECT_EQ(a.examples, b.examples);
  EXPECT_TRUE(Same(a.auc, b.auc)) << a.auc << " vs " << b.auc;
  EXPECT_TRUE(Same(a.logloss, b.logloss)) << a.logloss << " vs " << b.logloss;
  EXPECT_TRUE(Same(a.oracle_auc, b.oracle_auc));
  EXPECT_TRUE(Same(a.oracle_logloss, b.oracle_logloss));
  EXPECT_TRUE(Same(a.auc_hot, b.auc_hot));
  EXPECT_TRUE(Same(a.auc_warm, b.auc_warm));
  EXPECT_TRUE(Same(a.auc_cold, b.auc_cold));
  EXPECT_TRUE(Same(a.auc_cold_users, b.auc_cold_users));
  EXPECT_EQ(a.examples_hot, b.examples_hot);
  EXPECT_EQ(a.examples_warm, b.examples_warm);
  EXPECT_EQ(a.examples_cold, b.examples_cold);
  EXPECT_EQ(a.examples_cold_users, b.examples_cold_users);
}

// The result.json values of an in-process evaluation, by key.
std::map<std::string, std::string> AsJson(const TestSetResult& r) {
  return {{"test_auc", Number(r.auc)},
          {"test_logloss", Number(r.logloss)},
          {"oracle_auc", Number(r.oracle_auc)},
          {"oracle_logloss", Number(r.oracle_logloss)},
          {"auc_hot", Number(r.auc_hot)},
          {"auc_warm", Number(r.auc_warm)},
          {"auc_cold", Number(r.auc_cold)},
          {"auc_cold_users", Number(r.auc_cold_users)},
          {"test_examples", absl::StrCat(r.examples)},
          {"test_examples_hot", absl::StrCat(r.examples_hot)},
          {"test_examples_warm", absl::StrCat(r.examples_warm)},
          {"test_examples_cold", absl::StrCat(r.examples_cold)},
          {"test_examples_cold_users", absl::StrCat(r.examples_cold_users)}};
}

// The probabilities of an --eval_scores_file ("%.9g" lines: float32 exactly).
std::vector<float> ReadScores(const std::string& path) {
  std::vector<float> scores;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) scores.push_back(std::strtof(line.c_str(), nullptr));
  return scores;
}

class DistributedEvalTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(
        (fs::temp_directory_path() / absl::StrCat("ember-disteval-", getpid())).string());
    fs::remove_all(*root_);
    // 20000 test examples: 157 evaluation batches of 128, so the final evaluation
    // outlasts the supervisor's reaction to the final checkpoint.
    const std::string cmd =
        absl::StrCat(EMBER_DATAGEN_BINARY, " --out=", *root_, "/data",
                     " --train_examples=24000 --test_examples=20000 --train_files=4 --users=3000",
                     " --items=2000 --categories=50 --shops=200 --seed=11 > /dev/null");
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    // The fault-free reference job; its cluster stays up for the in-process evaluations.
    reference_ = NewCluster("reference").release();
    ASSERT_NO_FATAL_FAILURE(reference_->StartCoordinator(2));
    for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(reference_->StartShard(i));
    for (int r = 0; r < kWorkers; ++r) {
      ASSERT_NO_FATAL_FAILURE(reference_->StartWorker(r, JobFlags(*reference_)));
    }
    reference_result_ = new std::string(reference_->Finish());
    ASSERT_EQ(JsonValue(*reference_result_, "steps"), absl::StrCat(kMaxSteps))
        << *reference_result_;
  }

  static void TearDownTestSuite() {
    delete reference_;
    delete reference_result_;
    fs::remove_all(*root_);
    delete root_;
  }

  static std::unique_ptr<Cluster> NewCluster(const std::string& name) {
    auto c = std::make_unique<Cluster>(*root_ + "/" + name, *root_ + "/" + name + "-ckpt");
    c->data_ = *root_ + "/data";
    return c;
  }

  // The test job's flags after Cluster's own (which skip evaluation; these turn it on):
  // kMaxSteps steps, a checkpoint every 20, an evaluation every 30 and at the end (step
  // 80: the final evaluation is no periodic one).
  static std::vector<std::string> JobFlags(const Cluster& c) {
    return {absl::StrCat("--test=", *root_, "/data/test"),
            "--skip_eval=false",
            absl::StrCat("--max_steps=", kMaxSteps),
            "--checkpoint_every_steps=20",
            "--eval_every_steps=30",
            absl::StrCat("--eval_scores_file=", c.dir_, "/scores.txt")};
  }

  // The test job's config, as the workers normalize it.
  static v1::ModelConfig JobConfig(uint64_t eval_max_examples) {
    absl::StatusOr<v1::ModelConfig> config =
        model::LoadModelConfig(absl::StrCat(EMBER_SOURCE_DIR, "/configs/quickstart.pbtxt"));
    EXPECT_TRUE(config.ok()) << config.status();
    config->mutable_data()->set_test_path(*root_ + "/data/test");
    config->mutable_training()->set_batch_size(128);
    config->mutable_training()->set_eval_max_examples(eval_max_examples);
    absl::StatusOr<v1::ModelConfig> normalized =
        model::NormalizeModelConfig(*std::move(config), "test");
    EXPECT_TRUE(normalized.ok()) << normalized.status();
    return *normalized;
  }

  struct Evaluation {
    TestSetResult result;
    std::vector<float> scores;
  };

  // Evaluates the reference job's final model (the PS rows it left, the dense weights of
  // its newest checkpoint) in this process as `world` ranks, one thread each, meeting
  // under rendezvous generation `generation` on the reference coordinator, with
  // training.eval_max_examples `cap` (0: all).
  static Evaluation EvaluateInProcess(int world, uint64_t generation, uint64_t cap = 0) {
    const v1::ModelConfig config = JobConfig(cap);
    CheckpointCatalog catalog(reference_->ckpt_);
    absl::StatusOr<CheckpointListing> listing = catalog.List("quickstart");
    EXPECT_TRUE(listing.ok() && !listing->valid.empty()) << listing.status();
    if (!listing.ok() || listing->valid.empty()) return {};
    EXPECT_EQ(listing->valid.back().step(), static_cast<uint64_t>(kMaxSteps));
    absl::StatusOr<v1::WorkerState> state = catalog.ReadWorkerState(listing->valid.back());
    EXPECT_TRUE(state.ok()) << state.status();
    if (!state.ok()) return {};

    PsClientOptions ps;
    ps.coordinator_address = reference_->address_;
    absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(ps);
    EXPECT_TRUE(client.ok()) << client.status();
    if (!client.ok()) return {};
    for (const v1::TableConfig& table : config.tables()) {
      EXPECT_TRUE((*client)->CreateTableEverywhere(table).ok());
    }
    const worker::SparseLayout layout = worker::SparseLayout::FromConfig(config);
    const int num_dense = static_cast<int>(model::DenseColumns(config).size());

    std::vector<absl::StatusOr<TestSetResult>> results(world, absl::UnknownError("not run"));
    Evaluation evaluation;
    std::vector<std::thread> ranks;
    for (int r = 0; r < world; ++r) {
      ranks.emplace_back([&, r] {
        absl::StatusOr<std::unique_ptr<model::DenseTower>> tower =
            model::DenseTower::Create(config.dense(), num_dense, layout.FeatureDims());
        if (!tower.ok()) {
          results[r] = tower.status();
          return;
        }
        const absl::Span<float> params = (*tower)->parameters();
        if (state->dense_parameters().size() != params.size() * sizeof(float)) {
          results[r] = absl::InternalError("dense parameters do not fit the tower");
          return;
        }
        std::memcpy(params.data(), state->dense_parameters().data(), params.size() * sizeof(float));
        worker::CollectiveOptions options;
        options.coordinator_address = reference_->address_;
        options.job = "disteval-test";
        options.generation = generation;
        options.rank = r;
        options.world_size = world;
        absl::StatusOr<std::unique_ptr<worker::Collective>> collective =
            worker::Collective::Connect(options);
        if (!collective.ok()) {
          results[r] = collective.status();
          return;
        }
        results[r] = worker::Evaluate(config, layout, **client, **tower, **collective,
                                      r == 0 ? &evaluation.scores : nullptr);
      });
    }
    for (std::thread& t : ranks) t.join();
    for (int r = 0; r < world; ++r)
      EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status();
    if (results[0].ok()) evaluation.result = *results[0];
    return evaluation;
  }

  inline static std::string* root_ = nullptr;
  inline static Cluster* reference_ = nullptr;
  inline static std::string* reference_result_ = nullptr;
};

TEST_F(DistributedEvalTest, TwoAndThreeRanksEvaluateBitwiseAsOneRank) {
  const Evaluation one = EvaluateInProcess(/*world=*/1, /*generation=*/100);
  ASSERT_EQ(one.result.examples, 20000u);
  ASSERT_TRUE(one.result.oracle_auc.has_value() && one.result.auc_hot.has_value() &&
              one.result.auc_cold_users.has_value());
  // The job's 2-rank final evaluation (result.json, %.6g) and its scores file (exact).
  for (const auto& [key, value] : AsJson(one.result)) {
    EXPECT_EQ(JsonValue(*reference_result_, key), value) << key;
  }
  const std::vector<float> job_scores = ReadScores(reference_->dir_ + "/scores.txt");
  ASSERT_EQ(job_scores.size(), one.scores.size());
  EXPECT_TRUE(job_scores == one.scores) << "the 2-rank job's scores differ from one rank's";
  // 3 ranks in process: bitwise the one-rank metrics and scores.
  const Evaluation three = EvaluateInProcess(/*world=*/3, /*generation=*/101);
  ExpectSameResult(one.result, three.result);
  EXPECT_TRUE(three.scores == one.scores);
  // And 2 ranks in process, against the job's own (2-rank) figures.
  const Evaluation two = EvaluateInProcess(/*world=*/2, /*generation=*/102);
  ExpectSameResult(one.result, two.result);
  EXPECT_TRUE(two.scores == one.scores);
  // eval_max_examples keeps its meaning: the first 1000 examples (7 batches of 128 and
  // one of 104), whatever the world size.
  const Evaluation capped_one = EvaluateInProcess(/*world=*/1, /*generation=*/103, 1000);
  const Evaluation capped_three = EvaluateInProcess(/*world=*/3, /*generation=*/104, 1000);
  EXPECT_EQ(capped_one.result.examples, 1000u);
  ExpectSameResult(capped_one.result, capped_three.result);
  EXPECT_TRUE(capped_three.scores == capped_one.scores);
}

// Rank 1 cannot read its test data: the final evaluation fails on every rank with a
// message naming rank 1, and both exit 1 (no rejoin, no wait for a finish).
TEST_F(DistributedEvalTest, AFinalEvaluationFailingOnOneRankFailsEveryRankClearly) {
  std::unique_ptr<Cluster> c = NewCluster("one-rank-fails");
  ASSERT_NO_FATAL_FAILURE(c->StartCoordinator(2));
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(c->StartShard(i));
  const std::string common = absl::StrCat(
      "--config=", EMBER_SOURCE_DIR, "/configs/quickstart.pbtxt --coordinator=", c->address_,
      " --train=", *root_, "/data/train --world_size=2 --batch_size=128 --max_steps=20",
      " --generation=1 --ps_deadline_ms=4000 --collective_timeout_ms=8000",
      " --recovery_timeout_ms=20000 --run_dir=", c->dir_, "/run");
  RunResult ranks[2];
  std::thread rank1([&] {
    ranks[1] = RunBinary(EMBER_WORKER_BINARY,
                         absl::StrCat(common, " --rank=1 --test=", *root_, "/data/missing 2>&1"));
  });
  ranks[0] = RunBinary(EMBER_WORKER_BINARY,
                       absl::StrCat(common, " --rank=0 --test=", *root_, "/data/test 2>&1"));
  rank1.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ranks[r].exit_code, 1) << "rank " << r << ":\n" << ranks[r].output;
    EXPECT_NE(ranks[r].output.find("evaluation on rank 1"), std::string::npos)
        << "rank " << r << ":\n"
        << ranks[r].output;
    EXPECT_NE(ranks[r].output.find("data/missing"), std::string::npos) << ranks[r].output;
    EXPECT_EQ(ranks[r].output.find("rejoining"), std::string::npos) << ranks[r].output;
  }
}

// A PS shard is killed (and restarted, as a StatefulSet would) as soon as the final
// checkpoint is committed: the final evaluation, the checksum or the FinishJob of
// attempt 1 then fails, the coordinator rolls back to the final checkpoint, every rank
// rejoins and the job ends with the fault-free figures.
TEST_F(DistributedEvalTest, APsKilledDuringTheFinalEvaluationEndsEveryRankOk) {
  std::unique_ptr<Cluster> c = NewCluster("final-eval-kill");
  ASSERT_NO_FATAL_FAILURE(c->StartCoordinator(2));
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(c->StartShard(i));
  for (int r = 0; r < kWorkers; ++r) ASSERT_NO_FATAL_FAILURE(c->StartWorker(r, JobFlags(*c)));
  bool killed = false;
  const std::string result = c->Finish([&](absl::Duration) {
    if (killed || c->NewestCheckpointStep() < static_cast<uint64_t>(kMaxSteps)) return;
    killed = true;
    ASSERT_TRUE(c->shard(1)->Kill().ok());
    ASSERT_NO_FATAL_FAILURE(c->StartShard(1));
  });
  EXPECT_TRUE(killed);
  ASSERT_FALSE(result.empty());
  for (const char* key :
       {"steps", "sparse_rows", "sparse_checksum", "dense_checksum", "model_checksum"}) {
    EXPECT_EQ(JsonValue(result, key), JsonValue(*reference_result_, key)) << key;
  }
  for (const char* key : kMetricKeys) {
    EXPECT_EQ(JsonValue(result, key), JsonValue(*reference_result_, key)) << key;
  }
  EXPECT_TRUE(ReadScores(c->dir_ + "/scores.txt") == ReadScores(reference_->dir_ + "/scores.txt"));
}

}  // namespace
}  // namespace ember
