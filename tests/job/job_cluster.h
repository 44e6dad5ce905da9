// Copyright 2026 The Ember Authors.
//
// JobCluster: one loopback training cluster for multi-process tests: a coordinator
// (with checkpoints), PS shards and ember-worker processes, each restartable in place.
// The test plays the supervisor (a StatefulSet, or deploy/local/cluster.sh) that
// restarts whatever dies.

#ifndef EMBER_TESTS_JOB_JOB_CLUSTER_H_
#define EMBER_TESTS_JOB_JOB_CLUSTER_H_

#include <signal.h>
#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "ember/v1/coordinator.pb.h"
#include "gtest/gtest.h"
#include "tests/support/local_cluster.h"
#include "tools/harness/process.h"
#include "tools/harness/result_json.h"

namespace ember {

// Workers and steps of the test job (configs/quickstart.pbtxt, BSP).
inline constexpr int kWorkers = 2;
inline constexpr int kSteps = 240;

// One loopback cluster: coordinator (with checkpoints), shards and workers, every
// process restartable in place (a LocalCluster with the job's flags). Set data_ and
// ckpt_ before the coordinator starts.
class Cluster {
 public:
  Cluster(std::string dir, std::string checkpoints)
      : dir_(std::move(dir)), ckpt_(std::move(checkpoints)) {}

  // Starts the coordinator expecting `shards` shards, checkpointing to ckpt_, plus
  // `extra`; a restart reuses its port and directory (and needs the same `shards`).
  void StartCoordinator(int shards, const std::vector<std::string>& extra = {}) {
    if (local_ == nullptr) {
      LocalClusterOptions cluster_options;
      cluster_options.dir = dir_;
      cluster_options.shards = shards;
      cluster_options.coordinator_flags = {"--heartbeat_timeout_ms=1500",
                                           absl::StrCat("--checkpoint_dir=", ckpt_),
                                           "--keep_checkpoints=3", "--checkpoint_full_every=3"};
      cluster_options.shard_flags = {"--heartbeat_ms=200"};
      cluster_options.worker_flags = {
          absl::StrCat("--config=", EMBER_SOURCE_DIR, "/configs/quickstart.pbtxt"),
          absl::StrCat("--train=", data_, "/train"),
          absl::StrCat("--run_dir=", dir_, "/run"),
          "--batch_size=128",
          "--epochs=4",
          "--skip_eval",
          "--generation=1",
          "--ps_deadline_ms=4000",
          "--collective_timeout_ms=8000",
          "--log_every_steps=20"};
      // An elastic run's workers get their ranks and world size from the coordinator.
      if (!elastic_)
        cluster_options.worker_flags.push_back(absl::StrCat("--world_size=", kWorkers));
      local_ = std::make_unique<LocalCluster>(std::move(cluster_options));
    }
    ASSERT_EQ(shards, local_->options().shards) << "a restart expects the same shards";
    const absl::Status started = local_->StartCoordinator(extra);
    ASSERT_TRUE(started.ok()) << started;
    address_ = local_->coordinator_address();
  }

  // Starts (or restarts, on a fresh port) shard `i` with `extra` flags; a retired
  // shard is supervised again.
  void StartShard(int i, const std::vector<std::string>& extra = {}) {
    ASSERT_NE(local_, nullptr) << "start the coordinator first";
    retired_.erase(i);
    const absl::Status started = local_->StartShard(i, extra);
    ASSERT_TRUE(started.ok()) << started;
  }

  // Starts (or restarts) worker `rank` of the job with `flags` after the job's own.
  void StartWorker(int rank, const std::vector<std::string>& flags) {
    ASSERT_NE(local_, nullptr) << "start the coordinator first";
    const absl::Status started = local_->StartWorker(rank, flags);
    ASSERT_TRUE(started.ok()) << started;
  }

  // A scale-down: sends shard `i` SIGTERM (with --drain_on_sigterm it drains, then
  // exits) without waiting, and stops supervising it: Supervise does not restart it.
  // Its exit code is shard(i)->Wait's.
  void Retire(int i) {
    ASSERT_NE(shard(i), nullptr);
    retired_.insert(i);
    ASSERT_EQ(::kill(shard(i)->pid(), SIGTERM), 0);
  }

  // The processes (null before their start).
  Process* coordinator() const { return local_ == nullptr ? nullptr : local_->coordinator(); }
  Process* shard(int i) const { return local_ == nullptr ? nullptr : local_->shard(i); }
  Process* worker(int rank) const { return local_ == nullptr ? nullptr : local_->worker(rank); }
  int shard_count() const { return local_ == nullptr ? 0 : local_->shard_count(); }

  // The committed checkpoints (with a MANIFEST), oldest first.
  std::vector<std::string> CommittedCheckpoints() const {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(ckpt_ + "/quickstart", ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("ckpt-", 0) == 0 && std::filesystem::exists(entry.path() / "MANIFEST")) {
        names.push_back(name);
      }
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  // The step of the newest committed checkpoint (0 when none).
  uint64_t NewestCheckpointStep() const {
    const std::vector<std::string> names = CommittedCheckpoints();
    return names.empty() ? 0 : std::stoull(names.back().substr(5, 12));
  }

  // Restarts every shard or coordinator process that died (the supervisor's job).
  void Supervise() {
    for (int i = 0; i < shard_count(); ++i) {
      if (retired_.contains(i)) continue;
      if (shard(i) != nullptr && shard(i)->Wait(absl::ZeroDuration()).ok()) {
        ASSERT_NO_FATAL_FAILURE(StartShard(i));
        ++restarts_;
      }
    }
  }

  // The coordinator's view of the job "quickstart".
  v1::GetJobResponse GetJob() const {
    absl::StatusOr<v1::GetJobResponse> job = local_ == nullptr
                                                 ? absl::FailedPreconditionError("no cluster")
                                                 : local_->GetJob("quickstart");
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : v1::GetJobResponse();
  }

  // Waits (supervising) until every worker exited; returns rank 0's result.json.
  std::string Finish(const std::function<void(absl::Duration elapsed)>& faults = nullptr) {
    const absl::Time start = absl::Now();
    const int workers = local_ == nullptr ? 0 : local_->worker_count();
    std::vector<bool> done(workers, false);
    while (std::count(done.begin(), done.end(), true) < static_cast<long>(done.size())) {
      if (absl::Now() - start > absl::Minutes(4)) {
        ADD_FAILURE() << "the job did not finish";
        return "";
      }
      if (faults) faults(absl::Now() - start);
      Supervise();
      for (int r = 0; r < workers; ++r) {
        if (done[r]) continue;
        absl::StatusOr<int> code = worker(r)->Wait(absl::ZeroDuration());
        if (!code.ok()) continue;
        EXPECT_EQ(*code, 0) << "worker " << r;
        done[r] = true;
      }
      absl::SleepFor(absl::Milliseconds(50));  // polling pace, not event ordering
    }
    return ReadFile(dir_ + "/run/result.json");
  }

  std::string dir_, ckpt_, data_, address_;
  int restarts_ = 0;
  // Workers without --world_size (the test gives --workers=MIN:MAX). Set before the
  // coordinator starts.
  bool elastic_ = false;

 private:
  // Created at the first StartCoordinator; its destructor kills what still runs.
  std::unique_ptr<LocalCluster> local_;
  std::set<int> retired_;  // shards Supervise leaves alone
};

// configs/quickstart.pbtxt partitioned by `partition_by` ("file" or a column), epochs
// ending with the last worker (training.epoch_end LAST_OUT), written into `dir`; its path.
inline std::string WriteLastOutConfig(const std::string& dir, const std::string& partition_by) {
  std::ifstream in(std::string(EMBER_SOURCE_DIR) + "/configs/quickstart.pbtxt");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text = absl::StrReplaceAll(
      text, {{"partition_by: \"file\"", absl::StrCat("partition_by: \"", partition_by, "\"")},
             {"training {", "training {\n  epoch_end: LAST_OUT"}});
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/last-out.pbtxt";
  std::ofstream(path) << text;
  return path;
}

// Data lines (headers excluded) of the files in `train_dir`.
inline uint64_t TrainLines(const std::string& train_dir) {
  uint64_t lines = 0;
  for (const auto& entry : std::filesystem::directory_iterator(train_dir)) {
    std::ifstream in(entry.path());
    std::string line;
    bool header = true;
    while (std::getline(in, line)) {
      if (!header && !line.empty()) ++lines;
      header = false;
    }
  }
  return lines;
}

// Whether result.json `result` has examples_per_epoch `list` ("[a, b]").
inline bool HasEpochExamples(const std::string& result, const std::string& list) {
  return result.find(absl::StrCat("\"examples_per_epoch\": ", list, ",")) != std::string::npos;
}

// Base of the job tests: the data and the reference run (the same job on 2 shards,
// no faults, no moves) shared by every test of a suite.
class JobClusterTest : public ::testing::Test {
 protected:
  // Generates the data under a temp root named after `name` and runs the reference.
  static void SetUpData(const std::string& name) {
    ASSERT_NO_FATAL_FAILURE(GenerateData(name));
    Cluster reference(*root_ + "/reference", *root_ + "/reference-ckpt");
    reference.data_ = *root_ + "/data";
    ASSERT_NO_FATAL_FAILURE(reference.StartCoordinator(2));
    for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(reference.StartShard(i));
    for (int r = 0; r < kWorkers; ++r) ASSERT_NO_FATAL_FAILURE(reference.StartWorker(r, Flags()));
    reference_ = new std::string(reference.Finish());
    ASSERT_EQ(JsonValue(*reference_, "steps"), absl::StrCat(kSteps)) << *reference_;
  }

  // Generates the data under a temp root named after `name` (no reference run).
  static void GenerateData(const std::string& name) {
    root_ = new std::string(
        (std::filesystem::temp_directory_path() / absl::StrCat(name, "-", getpid())).string());
    std::filesystem::remove_all(*root_);
    const std::string cmd =
        absl::StrCat(EMBER_DATAGEN_BINARY, " --out=", *root_, "/data",
                     " --train_examples=24000 --test_examples=1000 --train_files=4 --users=3000",
                     " --items=2000 --categories=50 --shops=200 --seed=11 > /dev/null");
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }

  static void TearDownData() {
    std::filesystem::remove_all(*root_);
    delete root_;
    delete reference_;
    reference_ = nullptr;
  }

  // The job's worker flags: kSteps steps, a checkpoint every 20.
  static std::vector<std::string> Flags() {
    return {absl::StrCat("--max_steps=", kSteps), "--checkpoint_every_steps=20"};
  }

  std::unique_ptr<Cluster> NewCluster(const std::string& name) {
    auto c = std::make_unique<Cluster>(*root_ + "/" + name, *root_ + "/" + name + "-ckpt");
    c->data_ = *root_ + "/data";
    return c;
  }

  // The model of `result` is bitwise the reference's.
  static void ExpectSameModel(const std::string& result) {
    ASSERT_FALSE(result.empty());
    EXPECT_EQ(JsonValue(result, "steps"), absl::StrCat(kSteps)) << result;
    EXPECT_EQ(JsonValue(result, "sparse_rows"), JsonValue(*reference_, "sparse_rows"));
    EXPECT_EQ(JsonValue(result, "sparse_checksum"), JsonValue(*reference_, "sparse_checksum"));
    EXPECT_EQ(JsonValue(result, "dense_checksum"), JsonValue(*reference_, "dense_checksum"));
    EXPECT_EQ(JsonValue(result, "model_checksum"), JsonValue(*reference_, "model_checksum"));
  }

  inline static std::string* root_ = nullptr;
  inline static std::string* reference_ = nullptr;
};

}  // namespace ember

#endif  // EMBER_TESTS_JOB_JOB_CLUSTER_H_
