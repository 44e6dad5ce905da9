// Copyright 2026 The Ember Authors.
//
// PsClient::Checksum is a cut of one slot map. Two shards, each a real PsServiceImpl
// over its own RocksDB behind its own gRPC server on loopback (hosted in this process
// so the test can install slot maps on one shard at a time, as a move's switch does),
// and a PsClient over gRPC. A move of 4096 slots from shard 0 to shard 1 is staged:
// its rows copied to shard 1, then the new map installed on the target first. While
// the shards answer at different epochs their digests count the moved slots twice;
// the client must ask again and return the model's digest once the source has
// switched too, and fail ABORTED, naming the epochs, if the shards never agree. A
// shard without slots is not asked.

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/ps_client.h"
#include "common/slot_map.h"
#include "ember/v1/ps.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/ps/ps_service.h"
#include "server/shared/shard_storage.h"
#include "server/shared/slot_owners.h"
#include "tests/cluster/in_process_shard.h"

namespace ember {
namespace {

constexpr uint32_t kDim = 4;
constexpr uint32_t kMovedFirst = 0;
constexpr uint32_t kMovedLast = 4095;  // shard 0's first half in the even map

using Shard = InProcessShard;

class ChecksumCutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/checksum_cut_test.", getpid());
    std::filesystem::remove_all(dir_);
    map_ = SlotMap::Even({0, 1}, /*epoch=*/1);
    for (uint32_t id = 0; id < 2; ++id) StartShard(id);
    v1::CreateTableRequest create;
    create.mutable_config()->set_name("item");
    create.mutable_config()->set_dim(kDim);
    v1::TableConfig table;
    for (Shard& shard : shards_) {
      v1::CreateTableResponse created;
      ASSERT_TRUE(shard.service->DoCreateTable(create, &created).ok());
      table = created.config();
    }
    PsClientOptions options;
    options.shard_addresses = {{0, shards_[0].address}, {1, shards_[1].address}};
    options.slot_map = map_;
    options.deadline = absl::Seconds(3);
    options.worker_id = 1;
    absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
    ASSERT_TRUE(client_->AddTable(table).ok());
    std::vector<uint64_t> ids(3000);
    for (uint64_t i = 0; i < ids.size(); ++i) ids[i] = i * 7919 + 1;
    std::vector<float> grads(ids.size() * kDim, 0.5f);
    ASSERT_TRUE(client_->Push("item", ids, grads, /*step=*/1).ok());
  }

  void TearDown() override {
    client_.reset();
    for (Shard& shard : shards_) EXPECT_TRUE(shard.Stop().ok());
    std::filesystem::remove_all(dir_);
  }

  void StartShard(uint32_t id) {
    absl::StatusOr<Shard> shard = Shard::Start(dir_, id, map_, 16 << 20);
    ASSERT_TRUE(shard.ok()) << shard.status();
    shards_.push_back(std::move(*shard));
  }

  // The copy phase of a move of [kMovedFirst, kMovedLast] from shard 0 to shard 1.
  // Returns the rows copied.
  uint64_t CopyMovedRows() {
    uint64_t copied = 0;
    std::string cursor;
    do {
      absl::StatusOr<RowPage> page =
          shards_[0].storage->store()->ExportSlotRows("item", kMovedFirst, kMovedLast, cursor, 512);
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok()) return copied;
      EXPECT_TRUE(shards_[1].storage->store()->ImportRows("item", page->rows).ok());
      copied += page->rows.size();
      cursor = page->next_cursor;
    } while (!cursor.empty());
    return copied;
  }

  // The switch, on one shard: the map that gives the moved slots to shard 1.
  void Switch(uint32_t shard) {
    SlotMap moved = map_;
    for (uint32_t slot = kMovedFirst; slot <= kMovedLast; ++slot) moved.SetOwner(slot, 1);
    v1::InstallSlotMapRequest install;
    install.set_epoch(2);
    install.set_slot_owners(PackSlotOwners(moved));
    v1::InstallSlotMapResponse installed;
    ASSERT_TRUE(shards_[shard].service->DoInstallSlotMap(install, &installed).ok());
    ASSERT_EQ(installed.epoch(), 2u);
  }

  v1::ChecksumResponse ShardChecksum(uint32_t shard) {
    v1::ChecksumResponse response;
    EXPECT_TRUE(shards_[shard].service->DoChecksum(v1::ChecksumRequest(), &response).ok());
    return response;
  }

  std::string dir_;
  SlotMap map_;
  std::vector<Shard> shards_;
  std::unique_ptr<PsClient> client_;
};

TEST_F(ChecksumCutTest, EachShardNamesTheEpochItCountedUnder) {
  EXPECT_EQ(ShardChecksum(0).epoch(), 1u);
  ASSERT_GT(CopyMovedRows(), 0u);
  Switch(1);
  EXPECT_EQ(ShardChecksum(0).epoch(), 1u);
  EXPECT_EQ(ShardChecksum(1).epoch(), 2u);
}

// A shard the client knows but the map gives no slot (one drained and removed, here
// one that is not even running) counts nothing and is not asked.
TEST_F(ChecksumCutTest, AShardThatOwnsNoSlotsIsNotAsked) {
  absl::StatusOr<std::map<std::string, PsClient::TableDigest>> two = client_->Checksum();
  ASSERT_TRUE(two.ok()) << two.status();
  PsClientOptions options;
  options.shard_addresses = {
      {0, shards_[0].address}, {1, shards_[1].address}, {2, "127.0.0.1:1"}};  // closed port
  options.slot_map = map_;
  options.deadline = absl::Seconds(3);
  absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<std::map<std::string, PsClient::TableDigest>> three = (*client)->Checksum();
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(three->at("item").rows, two->at("item").rows);
  EXPECT_EQ(three->at("item").digest, two->at("item").digest);
}

TEST_F(ChecksumCutTest, AnswersAtDifferentEpochsAreAskedAgainUntilTheyAgree) {
  absl::StatusOr<std::map<std::string, PsClient::TableDigest>> before = client_->Checksum();
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_EQ(before->at("item").rows, 3000u);
  const uint64_t copied = CopyMovedRows();
  ASSERT_GT(copied, 0u);
  Switch(1);  // the target has switched, the source not yet: both count the moved slots
  const v1::ChecksumResponse source = ShardChecksum(0), target = ShardChecksum(1);
  ASSERT_EQ(source.tables(0).rows() + target.tables(0).rows(), 3000u + copied)
      << "the staged switch must count the moved rows twice, or the test tests nothing";

  absl::StatusOr<std::map<std::string, PsClient::TableDigest>> during;
  std::thread reader([&] { during = client_->Checksum(); });
  absl::SleepFor(absl::Milliseconds(300));
  Switch(0);
  reader.join();
  ASSERT_TRUE(during.ok()) << during.status();
  EXPECT_EQ(during->at("item").rows, 3000u);
  EXPECT_EQ(during->at("item").digest, before->at("item").digest);
}

TEST_F(ChecksumCutTest, EpochsThatNeverAgreeFailAbortedNamingThem) {
  ASSERT_GT(CopyMovedRows(), 0u);
  Switch(1);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::map<std::string, PsClient::TableDigest>> sums = client_->Checksum();
  EXPECT_TRUE(absl::IsAborted(sums.status())) << sums.status();
  EXPECT_NE(sums.status().message().find("epoch 1: shard(s) 0"), std::string::npos)
      << sums.status();
  EXPECT_NE(sums.status().message().find("epoch 2: shard(s) 1"), std::string::npos)
      << sums.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "bounded by the client's deadline";
}

}  // namespace
}  // namespace ember
