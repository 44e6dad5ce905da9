// Copyright 2026 The Ember Authors.
//
// Cold-example handling (ModelConfig.skew: loss weighting and re-sampling of cold
// examples, worker/skew/skew_handler.h) under a real BSP training job: coordinator with
// checkpoints, PS shards and ember-worker processes over loopback
// (tests/job/job_cluster.h).
//
// Pinned here:
//  - a job with cold_loss_weight 2 and re-sampling judges examples cold, replays some of
//    them, reports both in result.json (replays counted as trained examples), and
//    still learns;
//  - with every option off the model is bitwise that of the same config without a skew
//    section (the off path changes nothing);
//  - a worker SIGKILLed and restarted mid-job resumes from a checkpoint that holds its
//    frequency tracker and replay buffer, and the job ends bitwise equal to the same job
//    without the fault (docs/ARCHITECTURE.md invariant 5 with skew handling on);
//  - an SSP job with the hot-row cache (skew.hot_cache_steps) on a cluster that has a
//    hot set serves hot rows from the cache and reports its hit ratio.

#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/job/job_cluster.h"
#include "tests/support/deadline.h"
#include "tests/support/eventually.h"
#include "tools/harness/result_json.h"

namespace ember {
namespace {

constexpr int kColdSteps = 120;

double Number(const std::string& json, const std::string& key) {
  const std::string v = JsonValue(json, key);
  return v.empty() || v == "null" ? -1 : std::stod(v);
}

// The version of the coordinator's hot set once it has one with keys (0 when none
// came within 30 s).
uint64_t WaitForHotSet(const std::string& coordinator) {
  auto stub = v1::CoordinatorService::NewStub(
      grpc::CreateChannel(coordinator, grpc::InsecureChannelCredentials()));
  uint64_t version = 0;
  Eventually(
      [&] {
        grpc::ClientContext context;
        SetDeadline(&context, absl::Seconds(2));
        v1::GetHotSetResponse response;
        const grpc::Status s = stub->GetHotSet(&context, {}, &response);
        if (!s.ok() || response.hot_set().tables_size() == 0) return false;
        version = response.hot_set().version();
        return true;
      },
      absl::Seconds(30), absl::Milliseconds(100));
  return version;
}

class ColdTrainingTest : public JobClusterTest {
 protected:
  static void SetUpTestSuite() {
    ASSERT_NO_FATAL_FAILURE(GenerateData("ember-cold"));
    // configs/quickstart.pbtxt without its skew section.
    const std::string source =
        ReadFile(absl::StrCat(EMBER_SOURCE_DIR, "/configs/quickstart.pbtxt"));
    const size_t begin = source.find("\nskew {");
    ASSERT_NE(begin, std::string::npos);
    const size_t end = source.find("\n}\n", begin);
    ASSERT_NE(end, std::string::npos);
    std::ofstream(*root_ + "/no-skew.pbtxt") << source.substr(0, begin) << source.substr(end + 2);
    plain_ =
        new std::string(RunJob("plain", {absl::StrCat("--config=", *root_, "/no-skew.pbtxt")}));
    cold_ = new std::string(RunJob("cold", ColdFlags()));
  }
  static void TearDownTestSuite() {
    delete plain_;
    delete cold_;
    TearDownData();
  }

  // Loss weight 2 for cold examples, and up to a tenth of each batch replayed.
  static std::vector<std::string> ColdFlags() {
    return {"--cold_loss_weight=2", "--cold_resample_fraction=0.1"};
  }

  // The job's worker flags: kColdSteps steps, a checkpoint every 20, a final test
  // evaluation, then `flags`.
  static std::vector<std::string> JobFlags(const std::vector<std::string>& flags) {
    std::vector<std::string> all = {absl::StrCat("--max_steps=", kColdSteps),
                                    "--checkpoint_every_steps=20", "--skip_eval=false",
                                    absl::StrCat("--test=", *root_, "/data/test")};
    all.insert(all.end(), flags.begin(), flags.end());
    return all;
  }

  // Runs the job with JobFlags(flags) on a fresh cluster of 2 shards; `faults` is
  // called while it runs (as in Cluster::Finish). Returns rank 0's result.json.
  static std::string RunJob(const std::string& name, const std::vector<std::string>& flags,
                            const std::function<void(Cluster&)>& faults = nullptr) {
    Cluster c(*root_ + "/" + name, *root_ + "/" + name + "-ckpt");
    c.data_ = *root_ + "/data";
    c.StartCoordinator(2);
    for (int i = 0; i < 2; ++i) c.StartShard(i);
    for (int r = 0; r < kWorkers; ++r) c.StartWorker(r, JobFlags(flags));
    const std::string result = c.Finish([&](absl::Duration) {
      if (faults) faults(c);
    });
    EXPECT_EQ(JsonValue(result, "steps"), absl::StrCat(kColdSteps)) << name << ": " << result;
    return result;
  }

  // The two runs trained bitwise the same model on the same examples.
  static void ExpectBitwiseEqual(const std::string& a, const std::string& b) {
    ASSERT_FALSE(a.empty());
    ASSERT_FALSE(b.empty());
    for (const char* key : {"steps", "examples", "sparse_rows", "sparse_checksum", "dense_checksum",
                            "model_checksum", "cold_examples", "resampled_examples"}) {
      EXPECT_EQ(JsonValue(a, key), JsonValue(b, key)) << key;
    }
  }

  inline static std::string* plain_ = nullptr;
  inline static std::string* cold_ = nullptr;
};

TEST_F(ColdTrainingTest, ColdExamplesAreWeightedReplayedCountedAndTheJobLearns) {
  const std::string& r = *cold_;
  ASSERT_FALSE(r.empty());
  const double cold = Number(r, "cold_examples");
  const double resampled = Number(r, "resampled_examples");
  // Both jobs read the same examples; the cold one trains its replays on top.
  const double read = Number(*plain_, "examples");
  EXPECT_GT(read, 0) << *plain_;
  EXPECT_EQ(Number(r, "examples"), read + resampled) << r;
  EXPECT_GT(cold, 0) << r;
  EXPECT_LT(cold, read) << r;
  EXPECT_GT(resampled, 0) << r;
  // At most floor(0.1 x 128) replays per worker and step, and only cold examples.
  EXPECT_LE(resampled, 12.0 * kWorkers * kColdSteps) << r;
  EXPECT_LE(resampled, cold) << r;
  EXPECT_EQ(JsonValue(r, "hot_cache_hit_ratio"), "null") << r;
  // It learns about as well as the plain job (this small run has most examples cold).
  EXPECT_GT(Number(r, "test_auc"), 0.65) << r;
  EXPECT_GT(Number(r, "test_auc"), Number(*plain_, "test_auc") - 0.03) << r;
  // The plain job judges nothing and replays nothing.
  EXPECT_EQ(JsonValue(*plain_, "cold_examples"), "0") << *plain_;
  EXPECT_EQ(JsonValue(*plain_, "resampled_examples"), "0") << *plain_;
  EXPECT_NE(JsonValue(r, "model_checksum"), JsonValue(*plain_, "model_checksum"));
}

TEST_F(ColdTrainingTest, WithEveryOptionOffTheModelIsBitwiseThePlainOne) {
  // quickstart.pbtxt has a skew section (cold features named, every option off).
  ExpectBitwiseEqual(RunJob("off", {"--cold_loss_weight=1", "--cold_resample_fraction=0",
                                    "--hot_cache_steps=0", "--cold_max_count=5"}),
                     *plain_);
}

TEST_F(ColdTrainingTest, AKilledWorkerResumesWithItsTrackerAndReplayBufferBitwise) {
  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed());
  const uint64_t at = std::uniform_int_distribution<int>(2, 4)(rng) * 20;
  bool killed = false;
  const std::string result = RunJob("kill", ColdFlags(), [&](Cluster& c) {
    if (!killed && c.NewestCheckpointStep() >= at) {
      killed = true;
      ASSERT_TRUE(c.worker(1)->Kill().ok());
      ASSERT_NO_FATAL_FAILURE(c.StartWorker(1, JobFlags(ColdFlags())));
    }
  });
  EXPECT_TRUE(killed);
  EXPECT_NE(JsonValue(result, "resumed_from"), "\"\"") << result;
  ExpectBitwiseEqual(result, *cold_);
}

TEST_F(ColdTrainingTest, AnSspJobServesHotRowsFromItsCache) {
  Cluster c(*root_ + "/hot", *root_ + "/hot-ckpt");
  c.data_ = *root_ + "/data";
  // Workers deduplicate a batch's IDs, so no key of a training job reaches the default
  // 1% share of the load: a lower threshold makes the most pulled keys hot.
  ASSERT_NO_FATAL_FAILURE(c.StartCoordinator(2, {"--hot_min_share=0.0005"}));
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(c.StartShard(i));
  // A first job's pulls make the shards report heavy hitters, from which the
  // coordinator publishes a hot set; the second job finds it from its first step.
  for (int r = 0; r < kWorkers; ++r) {
    ASSERT_NO_FATAL_FAILURE(c.StartWorker(r, JobFlags({"--consistency=ssp"})));
  }
  const std::string first = c.Finish();
  EXPECT_EQ(JsonValue(first, "hot_cache_hit_ratio"), "null") << first;
  ASSERT_GT(WaitForHotSet(c.address_), 0u) << "no hot set was published";
  for (int r = 0; r < kWorkers; ++r) {
    ASSERT_NO_FATAL_FAILURE(c.StartWorker(r, JobFlags({"--consistency=ssp", "--hot_cache_steps=2",
                                                       "--generation=2", "--rows=continue"})));
  }
  const std::string result = c.Finish();
  ASSERT_EQ(JsonValue(result, "steps"), absl::StrCat(kColdSteps)) << result;
  const double lookups = Number(result, "hot_cache_lookups");
  const double hits = Number(result, "hot_cache_hits");
  EXPECT_GT(lookups, 0) << result;
  EXPECT_GT(hits, 0) << result;
  EXPECT_LE(hits, lookups) << result;
  EXPECT_NEAR(Number(result, "hot_cache_hit_ratio"), hits / lookups, 1e-5) << result;
  EXPECT_GT(Number(result, "test_auc"), 0.6) << result;
}

}  // namespace
}  // namespace ember
