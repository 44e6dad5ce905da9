// Copyright 2026 The Ember Authors.
//
// A PS shard paused (SIGSTOP) past the coordinator's heartbeat timeout in the middle
// of a slot move, then continued (SIGCONT), between real processes on loopback (the
// MigrationTest fixture: a coordinator with a 1.5 s heartbeat timeout, two shards).
//
// Pinned here, for the source and for the target of the move:
//  - the coordinator reports the paused shard DEAD, and no slot of the move changes
//    owner while it is paused (an owner change needs the source's fence and the
//    target's synced rows);
//  - after SIGCONT the shard is ALIVE again and the move ends DONE;
//  - pushes running throughout are applied exactly once (exact dyadic arithmetic);
//  - the former owner refuses a push for a slot it lost, with the epoch it had
//    before the move and with the current one (FAILED_PRECONDITION, wrong shard),
//    and holds no row of the moved slots: no split brain.

#include <signal.h>

#include "tests/cluster/migration_fixture.h"

namespace ember {
namespace {

constexpr absl::Duration kPauseAfterDead = absl::Milliseconds(500);

struct Pause {
  std::string name;
  int victim;  // 0: the source of the move; 1: its target
};

class MigrationPauseTest : public MigrationTest, public ::testing::WithParamInterface<Pause> {
 protected:
  v1::ShardInfo::State StateOf(int shard) {
    const v1::GetClusterMapResponse map = Map();
    for (const v1::ShardInfo& info : map.shards()) {
      if (info.shard_id() == static_cast<uint32_t>(shard)) return info.state();
    }
    return v1::ShardInfo::DEAD;
  }

  v1::Migration::Phase PhaseOf(const std::string& op_id) {
    v1::GetMigrationRequest request;
    request.set_op_id(op_id);
    v1::Migration op;
    Call(admin_.get(), &v1::AdminService::Stub::GetMigration, request, &op, true);
    return op.phase();
  }

  // A Push of `id` straight to shard `shard` at `epoch`, bypassing the client's routing.
  grpc::Status RawPush(int shard, uint64_t id, uint64_t epoch) {
    v1::PushRequest request;
    request.set_table("exact");
    request.set_ids(std::string(reinterpret_cast<const char*>(&id), sizeof(id)));
    const std::vector<float> grads(kDim, 0.25f);
    request.set_grads(std::string(reinterpret_cast<const char*>(grads.data()), 4 * kDim));
    request.set_encoding(v1::VALUE_ENCODING_FLOAT32);
    request.set_step(1);
    request.set_worker_id(99);
    request.set_sequence(1);
    request.set_epoch(epoch);
    v1::PushResponse response;
    return Call(ps_stub_[shard].get(), &v1::PsService::Stub::Push, request, &response);
  }
};

TEST_P(MigrationPauseTest, APausedShardLosesNoWriteAndTheMoveEnds) {
  const int victim = GetParam().victim;
  ASSERT_NO_FATAL_FAILURE(StartCluster());
  // Every 32nd id, pushed at most every 5 ms (25k changes/s at most): the source's
  // change log (1M entries) then spans 40 s of the throttled move, which copies the
  // changes made since its start. Back-to-back pushes of more ids outran it on a
  // loaded machine: the copy started over until the move failed.
  std::vector<uint64_t> ids;
  for (size_t k = 0; k < Ids().size(); k += 32) ids.push_back(Ids()[k]);
  std::vector<float> base(ids.size() * kDim);
  ASSERT_TRUE(client_->Pull("exact", ids, absl::MakeSpan(base)).ok());

  // Pushes of those ids, back to back, for the whole test, from a client whose calls
  // outlast the pause (a worker's --ps_deadline_ms, not the fixture's 5 s).
  PsClientOptions options;
  options.coordinator_address = address_;
  options.worker_id = 2;
  options.max_retries = 12;
  options.deadline = absl::Seconds(30);
  absl::StatusOr<std::unique_ptr<PsClient>> pusher = PsClient::Create(options);
  ASSERT_TRUE(pusher.ok()) << pusher.status();
  std::atomic<int> rounds{0};
  std::atomic<bool> stopped{false};
  absl::Status failure;
  pushing_ = true;
  pusher_ = std::thread([&] {
    const std::vector<float> grads(ids.size() * kDim, 0.25f);
    while (pushing_) {
      absl::Status s = (*pusher)->Push("exact", ids, grads, rounds + 1);
      if (!s.ok()) {
        failure = s;
        stopped = true;
        return;
      }
      ++rounds;
      absl::SleepFor(absl::Milliseconds(5));  // paces the change rate (see above)
    }
  });
  ASSERT_TRUE(Eventually([&] { return rounds > 2; }, kWaitBound));

  // A throttled move of 4096 slots from shard 0 to 1 (4 moves of 1024, a few seconds).
  const v1::MigrationSpec spec = MoveSpec(0, 4096, /*bytes_per_sec=*/20000);
  const uint64_t epoch_before = Map().epoch();
  const std::string op_id = Start(spec).op_id();
  ASSERT_TRUE(Eventually(
      [&] {
        const v1::Migration::Phase phase = PhaseOf(op_id);
        return phase == v1::Migration::COPYING || phase == v1::Migration::CATCHING_UP;
      },
      kWaitBound));
  const v1::GetClusterMapResponse before = Map();
  absl::StatusOr<std::vector<uint32_t>> moving = FromRanges(spec.moves(0).ranges());
  ASSERT_TRUE(moving.ok());

  ASSERT_EQ(kill(cluster_->shard(victim)->pid(), SIGSTOP), 0);
  const absl::Time paused = absl::Now();
  bool owners_changed = false;
  const bool dead = Eventually(
      [&] {
        const v1::GetClusterMapResponse map = Map();
        for (uint32_t slot : *moving) owners_changed |= OwnerOf(map, slot) != OwnerOf(before, slot);
        return StateOf(victim) == v1::ShardInfo::DEAD;
      },
      kWaitBound);
  absl::SleepFor(kPauseAfterDead);  // paused past the timeout, not just up to it
  for (uint32_t slot : *moving) owners_changed |= OwnerOf(Map(), slot) != OwnerOf(before, slot);
  const absl::Duration pause = absl::Now() - paused;
  ASSERT_EQ(kill(cluster_->shard(victim)->pid(), SIGCONT), 0);
  EXPECT_TRUE(dead) << "the coordinator never reported the paused shard DEAD";
  EXPECT_FALSE(owners_changed) << "slots changed owner while shard " << victim << " was paused";
  EXPECT_TRUE(Eventually([&] { return StateOf(victim) == v1::ShardInfo::ALIVE; }, kWaitBound));

  const v1::Migration op = WaitForEnd(op_id);
  ASSERT_EQ(op.phase(), v1::Migration::DONE) << op.error();
  const int rounds_at_done = rounds;
  const bool pushes_go_on =
      Eventually([&] { return stopped || rounds > rounds_at_done + 2; }, kWaitBound);
  pushing_ = false;
  pusher_.join();
  ASSERT_TRUE(failure.ok()) << failure;
  ASSERT_TRUE(pushes_go_on) << "no push ended within a minute of the move's end";
  std::cerr << GetParam().name << " paused " << absl::ToDoubleSeconds(pause) << " s; " << rounds
            << " push rounds; longest fence " << op.max_fence_ms() << " ms" << std::endl;

  // Every acknowledged push is in the rows exactly once.
  ExpectPushedExactly(ids, base, rounds);

  // The former owner refuses writes to a slot it lost, at its old epoch and the new.
  const v1::GetClusterMapResponse after = Map();
  uint64_t seed = 0;
  for (const v1::TableConfig& table : after.tables()) {
    if (table.name() == "exact") seed = table.seed();
  }
  uint64_t lost_id = 0;
  for (uint64_t id : Ids()) {
    if (OwnerOf(before, SlotOf(seed, id)) == 0 && OwnerOf(after, SlotOf(seed, id)) == 1) {
      lost_id = id;
      break;
    }
  }
  ASSERT_NE(lost_id, 0u) << "no id of the test moved";
  for (uint64_t epoch : {epoch_before, after.epoch()}) {
    const grpc::Status refused = RawPush(0, lost_id, epoch);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
        << "epoch " << epoch << ": " << refused.error_message();
  }
  ExpectMoved(op.spec());  // no row of a moved slot left on shard 0; digests intact
}

INSTANTIATE_TEST_SUITE_P(SourceAndTarget, MigrationPauseTest,
                         ::testing::Values(Pause{"source", 0}, Pause{"target", 1}),
                         [](const ::testing::TestParamInfo<Pause>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace ember
