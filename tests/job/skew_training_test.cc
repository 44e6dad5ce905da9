// Copyright 2026 The Ember Authors.
//
// Skew features under a real BSP training job (coordinator, PS shards and
// ember-worker processes over loopback; tests/job/job_cluster.h):
//
//  - hot-key read replication (proto/ember/v1/hotkeys.proto) with synchronous refresh
//    leaves the model bitwise identical to the unreplicated reference run, while
//    replicas really answered pulls (docs/ARCHITECTURE.md invariants 5-6 hold with replication);
//  - eviction policies run at checkpoints (CheckpointShardRequest.step): a job with a
//    TTL and count decay on its user table ends with fewer rows than the reference,
//    and a PS SIGKILL with recovery from those checkpoints ends bitwise equal to the
//    same job without faults (the evictions and decayed counts are part of the cut
//    and of delta checkpoints).

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "ember/v1/ps.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/job/job_cluster.h"
#include "tests/support/deadline.h"
#include "tools/harness/result_json.h"

namespace ember {
namespace {

class SkewTrainingTest : public JobClusterTest {
 protected:
  static void SetUpTestSuite() { SetUpData("ember-skew"); }
  static void TearDownTestSuite() { TearDownData(); }

  // GetShardInfo of a running shard process.
  static v1::GetShardInfoResponse ShardInfo(Process& shard) {
    auto stub = v1::PsService::NewStub(
        grpc::CreateChannel(shard.ready_text(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    SetDeadline(&context, absl::Seconds(5));
    v1::GetShardInfoResponse info;
    const grpc::Status status = stub->GetShardInfo(&context, {}, &info);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return info;
  }

  // configs/quickstart.pbtxt with an eviction policy on the user table: rows unseen
  // for 30 steps are removed, counts decay by 0.8 at every checkpoint.
  static std::string EvictionConfig() {
    const std::string source =
        ReadFile(absl::StrCat(EMBER_SOURCE_DIR, "/configs/quickstart.pbtxt"));
    const std::string user = R"(name: "user" dim: 16)";
    EXPECT_NE(source.find(user), std::string::npos);
    const std::string config = absl::StrReplaceAll(
        source, {{user, absl::StrCat(user, " eviction { ttl_steps: 30 count_decay: 0.8 }")}});
    const std::string path = *root_ + "/eviction.pbtxt";
    std::ofstream(path) << config;
    return path;
  }
};

TEST_F(SkewTrainingTest, ReplicatedHotKeysLeaveTheBspModelBitwiseIdentical) {
  std::unique_ptr<Cluster> c = NewCluster("replicated");
  // Every shard holds a replica of every hot key; a small share threshold and fast
  // publication make the hot set non-trivial within the first steps.
  ASSERT_NO_FATAL_FAILURE(
      c->StartCoordinator(3, {"--hot_replicas=2", "--hot_keys_per_table=64",
                              "--hot_min_share=0.0005", "--hot_publish_interval_ms=200"}));
  for (int i = 0; i < 3; ++i) ASSERT_NO_FATAL_FAILURE(c->StartShard(i));
  for (int r = 0; r < kWorkers; ++r) ASSERT_NO_FATAL_FAILURE(c->StartWorker(r, Flags()));
  const std::string result = c->Finish();
  ExpectSameModel(result);  // 3 replicated shards == 2 plain shards, bit for bit
  uint64_t replica_keys = 0, hot_set_version = 0;
  for (int i = 0; i < c->shard_count(); ++i) {
    const v1::GetShardInfoResponse info = ShardInfo(*c->shard(i));
    replica_keys += info.replica_pulled_keys();
    hot_set_version = std::max(hot_set_version, info.hot_set_version());
  }
  EXPECT_GE(hot_set_version, 1u) << "no hot set was published";
  EXPECT_GT(replica_keys, 0u) << "no pull was answered by a replica";
}

TEST_F(SkewTrainingTest, EvictionAtCheckpointsIsPartOfTheCutAndSurvivesRecovery) {
  const std::string config = EvictionConfig();
  const std::vector<std::string> flags = {absl::StrCat("--config=", config),
                                          absl::StrCat("--max_steps=", kSteps),
                                          "--checkpoint_every_steps=20"};
  std::unique_ptr<Cluster> plain = NewCluster("evict-plain");
  ASSERT_NO_FATAL_FAILURE(plain->StartCoordinator(2));
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(plain->StartShard(i));
  for (int r = 0; r < kWorkers; ++r) ASSERT_NO_FATAL_FAILURE(plain->StartWorker(r, flags));
  const std::string evicted = plain->Finish();
  ASSERT_EQ(JsonValue(evicted, "steps"), absl::StrCat(kSteps)) << evicted;
  // The policy removed rows: fewer than the reference (same data, no eviction).
  EXPECT_LT(std::stoull(JsonValue(evicted, "sparse_rows")),
            std::stoull(JsonValue(*reference_, "sparse_rows")));
  EXPECT_NE(JsonValue(evicted, "model_checksum"), JsonValue(*reference_, "model_checksum"));

  // The same job with shard 1 SIGKILLed once the job is past step 100: it rolls back
  // to a checkpoint (taken after its evictions) and ends with the same model.
  std::unique_ptr<Cluster> c = NewCluster("evict-kill");
  ASSERT_NO_FATAL_FAILURE(c->StartCoordinator(2));
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(c->StartShard(i));
  for (int r = 0; r < kWorkers; ++r) ASSERT_NO_FATAL_FAILURE(c->StartWorker(r, flags));
  bool killed = false;
  const std::string result = c->Finish([&](absl::Duration) {
    if (!killed && c->NewestCheckpointStep() >= 100) {
      killed = true;
      ASSERT_TRUE(c->shard(1)->Kill().ok());
      ASSERT_NO_FATAL_FAILURE(c->StartShard(1));
    }
  });
  EXPECT_TRUE(killed);
  EXPECT_EQ(JsonValue(result, "steps"), absl::StrCat(kSteps));
  EXPECT_EQ(JsonValue(result, "sparse_rows"), JsonValue(evicted, "sparse_rows"));
  EXPECT_EQ(JsonValue(result, "model_checksum"), JsonValue(evicted, "model_checksum"));
}

}  // namespace
}  // namespace ember
