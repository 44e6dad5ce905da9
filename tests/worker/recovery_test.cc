// Copyright 2026 The Ember Authors.
//
// Fault tests of checkpoints and recovery (DESIGN.md invariant 5): real ember-datagen
// data, a real coordinator with --checkpoint_dir, real PS shards and ember-worker
// processes over loopback; the test plays the supervisor (a StatefulSet, or
// deploy/local/cluster.sh) that restarts every process that dies.
//
// Pinned here:
//  - a BSP job whose PS shards are SIGKILLed three times (once in the middle of a
//    checkpoint) ends with bitwise the model of the same job without faults: no
//    sample was lost or counted twice;
//  - the same for a killed and restarted worker, and for a restarted coordinator;
//  - a corrupt newest checkpoint is refused during a recovery, which falls back to the
//    checkpoint before it (and still ends with the fault-free model);
//  - an operator's RequestCheckpoint (AdminService) is taken by a running job;
//  - a checkpoint taken on 2 shards restores onto 3 and onto 1 shard with identical
//    rows and dense weights (checksums).

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ember/v1/admin.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/cluster/process.h"
#include "tests/worker/result_json.h"

namespace ember {
namespace {

namespace fs = std::filesystem;

constexpr int kWorkers = 2;
constexpr int kSteps = 240;

// One loopback cluster: coordinator (with checkpoints), shards and workers, every
// process restartable in place.
class Cluster {
 public:
  Cluster(std::string dir, std::string checkpoints) : dir_(std::move(dir)), ckpt_(std::move(checkpoints)) {}
  ~Cluster() {
    for (auto& w : workers_) w.reset();
    for (auto& s : shards_) s.reset();
    coordinator_.reset();
  }

  void StartCoordinator(int shards, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {
        absl::StrCat("--data_dir=", dir_, "/coordinator"), absl::StrCat("--port=", port_),
        absl::StrCat("--expected_shards=", shards), "--heartbeat_timeout_ms=1500",
        absl::StrCat("--checkpoint_dir=", ckpt_), "--keep_checkpoints=3",
        "--checkpoint_full_every=3"};
    args.insert(args.end(), extra.begin(), extra.end());
    absl::StatusOr<std::unique_ptr<Process>> c =
        Process::Start(EMBER_COORDINATOR_BINARY, args, "listening on ", absl::Seconds(30));
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = std::move(*c);
    address_ = coordinator_->ready_text();
    port_ = address_.substr(address_.rfind(':') + 1);
  }

  void StartShard(int i, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {absl::StrCat("--data_dir=", dir_, "/ps-", i), "--port=0",
                                     absl::StrCat("--shard_id=", i), "--heartbeat_ms=200",
                                     absl::StrCat("--coordinator=", address_)};
    args.insert(args.end(), extra.begin(), extra.end());
    absl::StatusOr<std::unique_ptr<Process>> ps =
        Process::Start(EMBER_PS_BINARY, args, "listening on ", absl::Seconds(30));
    ASSERT_TRUE(ps.ok()) << ps.status();
    if (shards_.size() <= static_cast<size_t>(i)) shards_.resize(i + 1);
    shards_[i] = std::move(*ps);
  }

  void StartWorker(int rank, const std::vector<std::string>& flags) {
    std::vector<std::string> args = {
        absl::StrCat("--config=", EMBER_SOURCE_DIR, "/configs/quickstart.pbtxt"),
        absl::StrCat("--train=", data_, "/train"),
        absl::StrCat("--coordinator=", address_), absl::StrCat("--rank=", rank),
        absl::StrCat("--world_size=", kWorkers), absl::StrCat("--run_dir=", dir_, "/run"),
        "--batch_size=128", "--epochs=4", "--skip_eval", "--generation=1", "--ps_deadline_ms=4000",
        "--collective_timeout_ms=8000", "--log_every_steps=20"};
    args.insert(args.end(), flags.begin(), flags.end());
    absl::StatusOr<std::unique_ptr<Process>> w =
        Process::Start(EMBER_WORKER_BINARY, args, "worker ", absl::Seconds(60));
    ASSERT_TRUE(w.ok()) << w.status();
    if (workers_.size() <= static_cast<size_t>(rank)) workers_.resize(rank + 1);
    workers_[rank] = std::move(*w);
  }

  // The committed checkpoints (with a MANIFEST), oldest first.
  std::vector<std::string> CommittedCheckpoints() const {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(ckpt_ + "/quickstart", ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("ckpt-", 0) == 0 && fs::exists(entry.path() / "MANIFEST")) {
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
    for (size_t i = 0; i < shards_.size(); ++i) {
      if (shards_[i]->Wait(absl::ZeroDuration()).ok()) {
        ASSERT_NO_FATAL_FAILURE(StartShard(static_cast<int>(i)));
        ++restarts_;
      }
    }
  }

  // Waits (supervising) until every worker exited; returns rank 0's result.json.
  std::string Finish(const std::function<void(absl::Duration elapsed)>& faults = nullptr) {
    const absl::Time start = absl::Now();
    std::vector<bool> done(workers_.size(), false);
    while (std::count(done.begin(), done.end(), true) < static_cast<long>(done.size())) {
      if (absl::Now() - start > absl::Minutes(4)) {
        ADD_FAILURE() << "the job did not finish";
        return "";
      }
      if (faults) faults(absl::Now() - start);
      Supervise();
      for (size_t r = 0; r < workers_.size(); ++r) {
        if (done[r]) continue;
        absl::StatusOr<int> code = workers_[r]->Wait(absl::ZeroDuration());
        if (!code.ok()) continue;
        EXPECT_EQ(*code, 0) << "worker " << r;
        done[r] = true;
      }
      absl::SleepFor(absl::Milliseconds(50));  // polling pace, not event ordering
    }
    return ReadFile(dir_ + "/run/result.json");
  }

  std::string dir_, ckpt_, data_, address_, port_ = "0";
  int restarts_ = 0;
  std::unique_ptr<Process> coordinator_;
  std::vector<std::unique_ptr<Process>> shards_;
  std::vector<std::unique_ptr<Process>> workers_;
};

class RecoveryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(
        (fs::temp_directory_path() / absl::StrCat("ember-recovery-", getpid())).string());
    fs::remove_all(*root_);
    const std::string cmd = absl::StrCat(
        EMBER_DATAGEN_BINARY, " --out=", *root_, "/data",
        " --train_examples=24000 --test_examples=1000 --train_files=4 --users=3000",
        " --items=2000 --categories=50 --shops=200 --seed=11 > /dev/null");
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    // The reference: the same job, no faults.
    Cluster reference(*root_ + "/reference", *root_ + "/reference-ckpt");
    reference.data_ = *root_ + "/data";
    ASSERT_NO_FATAL_FAILURE(reference.StartCoordinator(2));
    for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(reference.StartShard(i));
    for (int r = 0; r < kWorkers; ++r) ASSERT_NO_FATAL_FAILURE(reference.StartWorker(r, Flags()));
    reference_ = new std::string(reference.Finish());
    ASSERT_EQ(JsonValue(*reference_, "steps"), absl::StrCat(kSteps)) << *reference_;
  }
  static void TearDownTestSuite() {
    fs::remove_all(*root_);
    delete root_;
    delete reference_;
  }

  static std::vector<std::string> Flags() {
    return {absl::StrCat("--max_steps=", kSteps), "--checkpoint_every_steps=20"};
  }

  std::unique_ptr<Cluster> NewCluster(const std::string& name) {
    auto c = std::make_unique<Cluster>(*root_ + "/" + name, *root_ + "/" + name + "-ckpt");
    c->data_ = *root_ + "/data";
    return c;
  }

  static void ExpectSameModel(const std::string& result) {
    ASSERT_FALSE(result.empty());
    EXPECT_EQ(JsonValue(result, "steps"), absl::StrCat(kSteps)) << result;
    EXPECT_EQ(JsonValue(result, "sparse_rows"), JsonValue(*reference_, "sparse_rows"));
    EXPECT_EQ(JsonValue(result, "sparse_checksum"), JsonValue(*reference_, "sparse_checksum"));
    EXPECT_EQ(JsonValue(result, "dense_checksum"), JsonValue(*reference_, "dense_checksum"));
    EXPECT_EQ(JsonValue(result, "model_checksum"), JsonValue(*reference_, "model_checksum"));
  }

  static std::string* root_;
  static std::string* reference_;
};

std::string* RecoveryTest::root_ = nullptr;
std::string* RecoveryTest::reference_ = nullptr;

TEST_F(RecoveryTest, PsKillsIncludingOneDuringACheckpointLeaveTheModelBitwiseIdentical) {
  std::unique_ptr<Cluster> c = NewCluster("ps-kills");
  ASSERT_NO_FATAL_FAILURE(c->StartCoordinator(2));
  // Shard 1 dies right after writing its 3rd checkpoint snapshot, before answering.
  ASSERT_NO_FATAL_FAILURE(c->StartShard(0));
  ASSERT_NO_FATAL_FAILURE(c->StartShard(1, {"--test_crash_after_checkpoints=3"}));
  for (int r = 0; r < kWorkers; ++r) ASSERT_NO_FATAL_FAILURE(c->StartWorker(r, Flags()));
  // Two more SIGKILLs of random shards at seeded random moments once the job got past
  // step 80 and step 160 (progress read from the committed checkpoints).
  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed());
  const std::vector<uint64_t> after_step = {80, 160};
  size_t next = 0;
  absl::Time kill_at = absl::InfiniteFuture();
  const std::string result = c->Finish([&](absl::Duration) {
    if (next >= after_step.size()) return;
    if (kill_at == absl::InfiniteFuture() && c->NewestCheckpointStep() >= after_step[next]) {
      kill_at = absl::Now() + absl::Milliseconds(std::uniform_int_distribution<int>(0, 400)(rng));
    }
    if (absl::Now() >= kill_at) {
      // Kill() reaps the process: the supervisor's restart happens here.
      const int victim = std::uniform_int_distribution<int>(0, 1)(rng);
      ASSERT_TRUE(c->shards_[victim]->Kill().ok());
      ASSERT_NO_FATAL_FAILURE(c->StartShard(victim));
      ++c->restarts_;
      kill_at = absl::InfiniteFuture();
      ++next;
    }
  });
  EXPECT_GE(c->restarts_, 3);
  ExpectSameModel(result);
}

TEST_F(RecoveryTest, AKilledAndRestartedWorkerLeavesTheModelBitwiseIdentical) {
  std::unique_ptr<Cluster> c = NewCluster("worker-kill");
  ASSERT_NO_FATAL_FAILURE(c->StartCoordinator(2));
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(c->StartShard(i));
  for (int r = 0; r < kWorkers; ++r) ASSERT_NO_FATAL_FAILURE(c->StartWorker(r, Flags()));
  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed());
  const uint64_t at = std::uniform_int_distribution<int>(3, 8)(rng) * 20;
  bool killed = false;
  const std::string result = c->Finish([&](absl::Duration) {
    if (!killed && c->NewestCheckpointStep() >= at) {
      killed = true;
      ASSERT_TRUE(c->workers_[1]->Kill().ok());
      ASSERT_NO_FATAL_FAILURE(c->StartWorker(1, Flags()));
    }
  });
  EXPECT_TRUE(killed);
  ExpectSameModel(result);
}

TEST_F(RecoveryTest, ARestartedCoordinatorDoesNotDisturbTraining) {
  std::unique_ptr<Cluster> c = NewCluster("coordinator-kill");
  ASSERT_NO_FATAL_FAILURE(c->StartCoordinator(2));
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(c->StartShard(i));
  for (int r = 0; r < kWorkers; ++r) ASSERT_NO_FATAL_FAILURE(c->StartWorker(r, Flags()));
  bool restarted = false;
  const std::string result = c->Finish([&](absl::Duration) {
    if (!restarted && c->NewestCheckpointStep() >= 60) {
      restarted = true;
      ASSERT_TRUE(c->coordinator_->Kill().ok());
      ASSERT_NO_FATAL_FAILURE(c->StartCoordinator(2));  // same port, same directory
    }
  });
  EXPECT_TRUE(restarted);
  ExpectSameModel(result);
}

TEST_F(RecoveryTest, ACorruptNewestCheckpointIsRefusedAndTheJobRollsBackFurther) {
  std::unique_ptr<Cluster> c = NewCluster("corrupt");
  ASSERT_NO_FATAL_FAILURE(c->StartCoordinator(2));
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(c->StartShard(i));
  for (int r = 0; r < kWorkers; ++r) ASSERT_NO_FATAL_FAILURE(c->StartWorker(r, Flags()));
  std::string corrupted, previous;
  const std::string result = c->Finish([&](absl::Duration) {
    if (!corrupted.empty() || c->NewestCheckpointStep() < 100) return;
    // Kill a shard (the attempt ends; no checkpoint commits without it), flip a byte of
    // the newest checkpoint's largest shard-0 file, then let the shard restart.
    ASSERT_TRUE(c->shards_[1]->Kill().ok());
    const std::vector<std::string> names = c->CommittedCheckpoints();
    ASSERT_GE(names.size(), 2u);
    corrupted = names.back();
    previous = names[names.size() - 2];
    fs::path victim;
    uintmax_t largest = 0;
    for (const auto& e : fs::recursive_directory_iterator(
             fs::path(c->ckpt_) / "quickstart" / corrupted / "shard-0")) {
      if (e.is_regular_file() && e.file_size() > largest) largest = e.file_size(), victim = e.path();
    }
    ASSERT_GT(largest, 0u);
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(largest / 2));
    char byte = 0;
    f.get(byte);
    f.seekp(static_cast<std::streamoff>(largest / 2));
    f.put(static_cast<char>(byte ^ 0x10));
    f.close();
    ASSERT_NO_FATAL_FAILURE(c->StartShard(1));
  });
  ASSERT_FALSE(corrupted.empty());
  ExpectSameModel(result);
  // The final attempt started from the checkpoint before the corrupt one.
  EXPECT_EQ(JsonValue(result, "resumed_from"), "\"" + previous + "\"") << corrupted;
}

TEST_F(RecoveryTest, AnOperatorRequestedCheckpointIsTakenAtTheNextStep) {
  std::unique_ptr<Cluster> c = NewCluster("requested");
  ASSERT_NO_FATAL_FAILURE(c->StartCoordinator(2, {"--admin_token=secret"}));
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(c->StartShard(i));
  // No periodic checkpoints: only step 0, then what the operator asks for.
  for (int r = 0; r < kWorkers; ++r) {
    ASSERT_NO_FATAL_FAILURE(c->StartWorker(r, {"--max_steps=100000", "--epochs=1000"}));
  }
  auto admin = v1::AdminService::NewStub(
      grpc::CreateChannel(c->address_, grpc::InsecureChannelCredentials()));
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  bool requested = false;
  while (absl::Now() < deadline && c->NewestCheckpointStep() == 0) {
    if (!requested && !c->CommittedCheckpoints().empty()) {  // the job runs
      grpc::ClientContext context;
      context.AddMetadata("ember-admin-token", "secret");
      v1::RequestCheckpointRequest request;
      request.set_job("quickstart");
      v1::RequestCheckpointResponse response;
      const grpc::Status s = admin->RequestCheckpoint(&context, request, &response);
      ASSERT_TRUE(s.ok()) << s.error_message();
      requested = true;
    }
    absl::SleepFor(absl::Milliseconds(50));  // polling pace, not event ordering
  }
  EXPECT_TRUE(requested);
  EXPECT_GT(c->NewestCheckpointStep(), 0u) << "no checkpoint after the request";
  EXPECT_EQ(c->CommittedCheckpoints().size(), 2u);  // step 0 and the requested one
}

TEST_F(RecoveryTest, ACheckpointOnTwoShardsRestoresOntoThreeAndOntoOne) {
  // The reference job's last checkpoint (taken at step kSteps on 2 shards), restored
  // by a run of 0 further steps on other shard counts: same rows, same dense weights.
  for (int shards : {3, 1}) {
    SCOPED_TRACE(absl::StrCat(shards, " shards"));
    std::unique_ptr<Cluster> c = NewCluster(absl::StrCat("restore-", shards));
    c->ckpt_ = *root_ + "/reference-ckpt";
    ASSERT_NO_FATAL_FAILURE(c->StartCoordinator(shards));
    for (int i = 0; i < shards; ++i) ASSERT_NO_FATAL_FAILURE(c->StartShard(i));
    for (int r = 0; r < kWorkers; ++r) {
      ASSERT_NO_FATAL_FAILURE(c->StartWorker(
          r, {absl::StrCat("--max_steps=", kSteps), "--resume_from=latest"}));
    }
    ExpectSameModel(c->Finish());
  }
}

}  // namespace
}  // namespace ember
