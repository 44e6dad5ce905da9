// Copyright 2026 The Ember Authors.
//
// Feature transforms end to end (docs/OPERATIONS.md "Feature transforms"): a job whose
// config standardizes and clips a dense column, bucketizes one by quantiles from the
// data and crosses user x item trains on a loopback cluster with checkpoints; the
// checkpoint's stored config carries the statistics the job computed (the same as a
// statistics pass over the same data), a parser rebuilt from it gives the examples the
// job's config gives, bit for bit, and a resumed run uses the stored statistics even
// after the training data changed.

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/base/casts.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/model/model_config.h"
#include "ember/v1/checkpoint.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_catalog.h"
#include "tests/support/local_cluster.h"
#include "tests/support/usage_errors.h"
#include "tools/harness/process.h"
#include "worker/data/reader.h"
#include "worker/data/statistics_pass.h"

namespace ember {
namespace {

namespace fs = std::filesystem;

// configs/quickstart.pbtxt with transforms: price LOG1P, clipped to [0, 4.5] and
// standardized from the data; user_age bucketized into 8 quantile buckets from the data
// and session_depth into given buckets; user_id x item_id crossed. One new table holds
// the three new features.
v1::ModelConfig TransformsConfig(const std::string& data) {
  std::ifstream in(std::string(EMBER_SOURCE_DIR) + "/configs/quickstart.pbtxt");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  v1::ModelConfig config;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &config));
  config.set_name("transforms");
  v1::DataConfig* d = config.mutable_data();
  d->set_train_path(data + "/train");
  d->set_test_path(data + "/test");
  for (v1::ColumnConfig& c : *d->mutable_columns()) {
    if (c.name() == "price") {
      c.set_clip_min(0);
      c.set_clip_max(4.5);
      c.set_standardize(true);
    } else if (c.name() == "user_age") {
      c.set_kind(v1::ColumnConfig::BUCKETIZED);
      c.set_quantiles(8);
    } else if (c.name() == "session_depth") {
      c.set_kind(v1::ColumnConfig::BUCKETIZED);
      c.clear_transform();
      for (float b : {1.f, 2.f, 4.f, 8.f}) c.add_boundaries(b);
    }
  }
  v1::ColumnConfig* cross = d->add_columns();
  cross->set_name("user_x_item");
  cross->set_kind(v1::ColumnConfig::CROSS);
  cross->add_cross_of("user_id");
  cross->add_cross_of("item_id");
  v1::TableConfig* table = config.add_tables();
  *table = config.tables(0);
  table->set_name("transformed");
  for (const char* column : {"user_age", "session_depth", "user_x_item"}) {
    v1::FeatureConfig* f = config.add_features();
    f->set_column(column);
    f->set_table("transformed");
  }
  config.mutable_training()->set_batch_size(256);
  return config;
}

// Every example of `path` read with `config` (rank 0 of 1), flattened to text with the
// floats' bits, so equal strings are bitwise-equal examples.
std::string Examples(const v1::ModelConfig& config, const std::string& path) {
  worker::ReaderOptions options;
  absl::StatusOr<std::unique_ptr<worker::DatasetReader>> reader =
      worker::DatasetReader::Open(config, path, options);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return "";
  std::string out;
  model::ExampleBatch batch;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(512, &batch);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    for (float v : batch.dense) absl::StrAppend(&out, absl::bit_cast<uint32_t>(v), " ");
    for (const model::SparseColumn& s : batch.sparse) {
      absl::StrAppend(&out, "|", absl::StrJoin(s.ids, ","), ";", absl::StrJoin(s.offsets, ","));
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

class TransformsTrainingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / absl::StrCat("ember-transforms-", getpid())).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const std::string cmd =
        absl::StrCat(EMBER_DATAGEN_BINARY, " --out=", dir_, "/data",
                     " --train_examples=8000 --test_examples=1000 --train_files=2 --users=1000",
                     " --items=800 --categories=30 --shops=100 --seed=5 > /dev/null");
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    config_ = TransformsConfig(dir_ + "/data");
    config_path_ = dir_ + "/transforms.pbtxt";
    std::string text;
    ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(config_, &text));
    std::ofstream(config_path_) << text;

    LocalClusterOptions options;
    options.dir = dir_ + "/cluster";
    options.shards = 1;
    options.coordinator_flags = {absl::StrCat("--checkpoint_dir=", dir_, "/ckpt")};
    options.worker_flags = {absl::StrCat("--config=", config_path_), "--world_size=2",
                            "--skip_eval", "--checkpoint_every_steps=5",
                            "--collective_timeout_ms=20000"};
    cluster_ = std::make_unique<LocalCluster>(std::move(options));
    const absl::Status started = cluster_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }
  void TearDown() override {
    if (cluster_ != nullptr) cluster_->StopAll().IgnoreError();
    fs::remove_all(dir_);
  }

  // Runs both workers of a run to the end with `flags`.
  void RunJob(const std::vector<std::string>& flags) {
    for (int r = 0; r < 2; ++r) ASSERT_TRUE(cluster_->StartWorker(r, flags).ok());
    for (int r = 0; r < 2; ++r) {
      absl::StatusOr<int> code = cluster_->worker(r)->Wait(absl::Minutes(3));
      ASSERT_TRUE(code.ok()) << code.status();
      ASSERT_EQ(*code, 0) << "worker " << r;
    }
  }

  // The newest checkpoint's worker state.
  v1::WorkerState NewestState() {
    CheckpointCatalog catalog(dir_ + "/ckpt");
    absl::StatusOr<CheckpointListing> listing = catalog.List("transforms");
    EXPECT_TRUE(listing.ok() && !listing->valid.empty()) << listing.status();
    if (!listing.ok() || listing->valid.empty()) return {};
    absl::StatusOr<v1::WorkerState> state = catalog.ReadWorkerState(listing->valid.back());
    EXPECT_TRUE(state.ok()) << state.status();
    return state.ok() ? *state : v1::WorkerState();
  }

  std::string dir_, config_path_;
  v1::ModelConfig config_;
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(TransformsTrainingTest, CheckpointCarriesTheStatisticsAndResumeUsesThem) {
  ASSERT_NO_FATAL_FAILURE(RunJob({"--generation=1", "--max_steps=10"}));
  const v1::WorkerState state = NewestState();
  EXPECT_EQ(state.step(), 10u);
  v1::ModelConfig stored;
  ASSERT_TRUE(stored.ParseFromString(state.config()));

  // The statistics the job stored are those of a statistics pass over the same data.
  absl::StatusOr<v1::ModelConfig> normalized = model::NormalizeModelConfig(config_, "test");
  ASSERT_TRUE(normalized.ok()) << normalized.status();
  absl::StatusOr<v1::ModelConfig> filled = worker::ComputeStatistics(*normalized);
  ASSERT_TRUE(filled.ok()) << filled.status();
  EXPECT_EQ(model::DigestedConfig(*filled).SerializeAsString(), state.config());
  EXPECT_EQ(model::ConfigDigest(*filled), state.config_digest());
  const v1::ColumnConfig* price = nullptr;
  const v1::ColumnConfig* age = nullptr;
  for (const v1::ColumnConfig& c : stored.data().columns()) {
    if (c.name() == "price") price = &c;
    if (c.name() == "user_age") age = &c;
  }
  ASSERT_NE(price, nullptr);
  ASSERT_NE(age, nullptr);
  EXPECT_TRUE(price->has_mean() && price->has_std());
  EXPECT_GT(price->std(), 0);
  EXPECT_GE(age->boundaries_size(), 4) << "8 quantiles of ages, fewer only by ties";

  // A parser rebuilt from the checkpoint's config gives the job's examples, bitwise;
  // the stored config is usable as it is (statistics present).
  const std::string job_examples = Examples(*filled, dir_ + "/data/test");
  ASSERT_FALSE(job_examples.empty());
  EXPECT_EQ(Examples(stored, dir_ + "/data/test"), job_examples);
  // The declared config alone lacks them: refused, naming the column.
  absl::StatusOr<std::unique_ptr<worker::DatasetReader>> lacking =
      worker::DatasetReader::Open(*normalized, dir_ + "/data/test", {});
  ASSERT_FALSE(lacking.ok());
  EXPECT_THAT(std::string(lacking.status().message()),
              ::testing::HasSubstr("(price): standardize needs mean and std"));

  // The training data changes (every price x 10, same lines): a pass over it now gives
  // other statistics, but a resumed run takes the checkpoint's (a recomputed config would
  // not fit the checkpoint: the run would fail) and keeps storing them.
  for (const std::string file : {"/data/train/part-00000.tsv", "/data/train/part-00001.tsv"}) {
    std::ifstream in(dir_ + file);
    ASSERT_TRUE(in.good()) << file;
    std::string line, out;
    int price_field = -1;
    while (std::getline(in, line)) {
      std::vector<std::string> fields = absl::StrSplit(line, '\t');
      if (price_field < 0) {
        price_field =
            static_cast<int>(std::find(fields.begin(), fields.end(), "price") - fields.begin());
      } else if (!fields[price_field].empty()) {
        fields[price_field] = absl::StrCat(std::stod(fields[price_field]) * 10);
      }
      absl::StrAppend(&out, absl::StrJoin(fields, "\t"), "\n");
    }
    in.close();
    std::ofstream(dir_ + file) << out;
  }
  absl::StatusOr<v1::ModelConfig> changed = worker::ComputeStatistics(*normalized);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_NE(model::ConfigDigest(*changed), state.config_digest());

  ASSERT_NO_FATAL_FAILURE(RunJob({"--generation=2", "--max_steps=14", "--resume_from=latest"}));
  const v1::WorkerState resumed = NewestState();
  EXPECT_EQ(resumed.step(), 14u);
  EXPECT_EQ(resumed.config(), state.config());
  EXPECT_EQ(resumed.config_digest(), state.config_digest());

  // A run whose config needs a statistic the checkpoint lacks (a new standardized
  // column, reading user_age) is refused before it trains, naming the checkpoint and the
  // column; the checkpoints are left as they are.
  v1::ModelConfig more = config_;
  v1::ColumnConfig* age_std = more.mutable_data()->add_columns();
  age_std->set_name("user_age_std");
  age_std->set_source("user_age");
  age_std->set_kind(v1::ColumnConfig::DENSE);
  age_std->set_standardize(true);
  std::string text;
  ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(more, &text));
  const std::string more_path = dir_ + "/more.pbtxt";
  std::ofstream(more_path) << text;
  const RunResult refused = RunBinary(
      EMBER_WORKER_BINARY,
      absl::StrCat("--config=", more_path, " --coordinator=", cluster_->coordinator_address(),
                   " --rank=0 --world_size=1 --generation=3 --resume_from=latest --skip_eval"));
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_THAT(refused.output,
              ::testing::HasSubstr("checkpoint ckpt-000000000014-a2 lacks the statistics of "
                                   "data.columns[16] (user_age_std): standardize needs mean "
                                   "and std (its config has no such column)"));
  EXPECT_EQ(NewestState().config(), state.config());
}

TEST_F(TransformsTrainingTest, WorkersWithOtherStatisticsFailTheJob) {
  // Two workers join with configs that differ only in statistics_max_examples (not in
  // the join digest), so their statistics passes sample different rows: the ranks
  // compare their filled configs after the rendezvous and both fail, naming the cause,
  // instead of training different dense replicas.
  v1::ModelConfig fewer = config_;
  fewer.set_statistics_max_examples(100);
  std::string text;
  ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(fewer, &text));
  const std::string fewer_path = dir_ + "/fewer.pbtxt";
  std::ofstream(fewer_path) << text;
  ASSERT_TRUE(cluster_->StartWorker(1, {"--generation=1"}).ok());
  const RunResult rank0 = RunBinary(
      EMBER_WORKER_BINARY,
      absl::StrCat("--config=", fewer_path, " --coordinator=", cluster_->coordinator_address(),
                   " --rank=0 --world_size=2 --generation=1 --skip_eval"));
  EXPECT_EQ(rank0.exit_code, 1) << rank0.output;
  EXPECT_THAT(rank0.output, ::testing::HasSubstr("worker 1 trains with another model config "
                                                 "than worker 0"));
  absl::StatusOr<int> rank1 = cluster_->worker(1)->Wait(absl::Minutes(2));
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  EXPECT_EQ(*rank1, 1);
}

TEST(TransformsConfigTest, BadTransformsExitWithUsageErrors) {
  // docs/BAD_INPUT.md: a bad transform in the config is refused before anything starts,
  // with exit code 2 and the field named.
  const std::string dir =
      (fs::temp_directory_path() / absl::StrCat("ember-bad-transforms-", getpid())).string();
  fs::create_directories(dir);
  const std::string head =
      "data { columns { name: \"label\" kind: LABEL } "
      "columns { name: \"u\" kind: CATEGORICAL } columns { name: \"r\" kind: MULTI_HOT } ";
  const std::string tail =
      " } tables { name: \"t\" dim: 16 } features { column: \"u\" table: \"t\" }";
  const std::vector<std::pair<std::string, std::string>> configs = {
      {"columns { name: \"p\" kind: DENSE transform: SQRT }", "Unknown enumeration value"},
      {"columns { name: \"h\" kind: BUCKETIZED boundaries: [ 6, 3 ] }",
       "data.columns[3] (h): boundaries must be strictly increasing"},
      {"columns { name: \"x\" kind: CROSS cross_of: [ \"u\", \"r\" ] }",
       "data.columns[3] (x).cross_of[1]: column 'r' is MULTI_HOT"},
      {"columns { name: \"x\" kind: CROSS cross_of: [ \"u\", \"nope\" ] }",
       "data.columns[3] (x).cross_of[1]: 'nope' is not in data.columns"},
      {"columns { name: \"p\" kind: DENSE standardize: true mean: 1 }",
       "data.columns[3] (p): give both mean and std"},
  };
  std::vector<UsageErrorCase> cases;
  for (size_t i = 0; i < configs.size(); ++i) {
    const std::string path = absl::StrCat(dir, "/bad-", i, ".pbtxt");
    std::ofstream(path) << head << configs[i].first << tail;
    cases.push_back(
        {absl::StrCat("--config=", path, " --coordinator=127.0.0.1:1"), configs[i].second});
  }
  ExpectUsageErrors(EMBER_WORKER_BINARY, cases, UsageErrorChecks().MessageAnywhere());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ember
