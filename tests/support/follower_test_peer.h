// Copyright 2026 The Ember Authors.
//
// FollowerTestPeer: reaches a Follower's (server/serving/follower.h) private parts for
// tests that drive it without its control loop: a follower opened on its own data
// directory with nothing connecting to a coordinator or a shard, its tables and shards
// added by hand, stream messages fed straight to Apply. Used by the serving fuzz target
// (tests/fuzz/serving_fuzz.cc) and tests/server/serving/follower_apply_test.cc; a
// header only, so that just the tests linking ember_serving see it.
//
//   absl::StatusOr<std::unique_ptr<Follower>> f = FollowerTestPeer::Open(options);
//   ASSERT_TRUE(f.ok()) << f.status();
//   FollowerTestPeer::AddShard(**f, 0);
//   EXPECT_TRUE(FollowerTestPeer::Apply(**f, 0, batch).ok());

#ifndef EMBER_TESTS_SUPPORT_FOLLOWER_TEST_PEER_H_
#define EMBER_TESTS_SUPPORT_FOLLOWER_TEST_PEER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "ember/v1/ps.pb.h"
#include "ember/v1/table.pb.h"
#include "server/serving/follower.h"

namespace ember {

class FollowerTestPeer {
 public:
  // A follower opened (its store, its persisted state) without its control loop.
  static absl::StatusOr<std::unique_ptr<Follower>> Open(const FollowerOptions& options) {
    std::unique_ptr<Follower> follower(new Follower(options));
    EMBER_RETURN_IF_ERROR(follower->Open());
    return follower;
  }
  // Creates `config` in the store and in the follower's view of the cluster map.
  static absl::Status AddTable(Follower& f, const v1::TableConfig& config) {
    {
      absl::ReaderMutexLock store(&f.store_mu_);
      EMBER_RETURN_IF_ERROR(f.storage_->store()->CreateTable(config));
    }
    absl::MutexLock lock(&f.mu_);
    f.map_tables_[config.name()] = config;
    return absl::OkStatus();
  }
  // A followed shard at position (0, 0).
  static void AddShard(Follower& f, uint32_t id) {
    absl::MutexLock lock(&f.mu_);
    auto& shard = f.shards_[id];
    if (shard == nullptr) shard = std::make_unique<Follower::ShardState>();
    shard->id = id;
  }
  // The table's config with defaults filled in, as the store has it.
  static absl::StatusOr<v1::TableConfig> Table(Follower& f, const std::string& name) {
    absl::ReaderMutexLock store(&f.store_mu_);
    return f.storage_->store()->GetTableConfig(name);
  }
  // The shard's position: (stream, version).
  static std::pair<uint64_t, uint64_t> Position(Follower& f, uint32_t shard) {
    absl::MutexLock lock(&f.mu_);
    const Follower::ShardState& s = *f.shards_.at(shard);
    return {s.stream_id, s.version};
  }
  static uint64_t SlotEpoch(Follower& f, uint32_t slot) {
    absl::MutexLock lock(&f.mu_);
    return f.slot_epoch_[slot];
  }
  // One stream call per message: the position rules of a fresh connection.
  static absl::Status Apply(Follower& f, uint32_t shard, const v1::UpdateBatch& batch) {
    uint64_t generation = 0;
    {
      absl::MutexLock lock(&f.mu_);
      generation = f.generation_;
    }
    uint64_t call_stream = 0;
    return f.Apply(shard, generation, batch, &call_stream);
  }
  static absl::Status Persist(Follower& f) { return f.PersistState(); }
  // Follower::sync_point_: set before any Apply runs.
  static void SetSyncPoint(Follower& f, std::function<void(const char*, uint32_t)> hook) {
    f.sync_point_ = std::move(hook);
  }
};

}  // namespace ember

#endif  // EMBER_TESTS_SUPPORT_FOLLOWER_TEST_PEER_H_
