// Copyright 2026 The Ember Authors.
//
// ExportChanges bounded by rows (ExportChangesRequest.max_rows): the migration's
// catch-up reads up to 65,536 change-log entries per call and stops once it has a
// page's rows of the moving slots. Each answer holds at most max_rows rows, its
// `version` is where the next call starts, and reading call after call from 0 until
// caught_up yields every changed row of the ranges exactly as an unbounded read does:
// none lost at a stop, none of another slot. One real shard (PsServiceImpl over
// RocksDB behind gRPC on loopback, hosted in this process) with pushes from a
// PsClient.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/ps_client.h"
#include "common/slot.h"
#include "common/slot_map.h"
#include "ember/v1/ps.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/ps/ps_service.h"
#include "server/shared/row_block.h"
#include "tests/cluster/in_process_shard.h"

namespace ember {
namespace {

constexpr uint32_t kDim = 4;
constexpr uint32_t kFirstSlot = 1000;
constexpr uint32_t kLastSlot = 5095;  // a quarter of the slots
constexpr int kPushes = 4;
constexpr uint64_t kIdsPerPush = 3000;

class ExportChangesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/export_changes_test.", getpid());
    std::filesystem::remove_all(dir_);
    const SlotMap map = SlotMap::Even({0}, /*epoch=*/1);
    absl::StatusOr<InProcessShard> shard = InProcessShard::Start(dir_, 0, map, 16 << 20);
    ASSERT_TRUE(shard.ok()) << shard.status();
    shard_ = std::make_unique<InProcessShard>(std::move(*shard));
    v1::CreateTableRequest create;
    create.mutable_config()->set_name("item");
    create.mutable_config()->set_dim(kDim);
    v1::CreateTableResponse created;
    ASSERT_TRUE(shard_->service->DoCreateTable(create, &created).ok());
    seed_ = created.config().seed();
    PsClientOptions options;
    options.shard_addresses = {{0, shard_->address}};
    options.slot_map = map;
    options.deadline = absl::Seconds(10);
    options.worker_id = 1;
    absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(options);
    ASSERT_TRUE(client.ok()) << client.status();
    ASSERT_TRUE((*client)->AddTable(created.config()).ok());
    // Overlapping pushes: an id changed several times is one row of the answer.
    for (int push = 0; push < kPushes; ++push) {
      std::vector<uint64_t> ids(kIdsPerPush);
      for (uint64_t i = 0; i < ids.size(); ++i) ids[i] = (i + push * 1000) * 7919 + 1;
      std::vector<float> grads(ids.size() * kDim, 0.25f);
      ASSERT_TRUE((*client)->Push("item", ids, grads, /*step=*/push + 1).ok());
      for (uint64_t id : ids) {
        const uint32_t slot = SlotOf(seed_, id);
        if (slot >= kFirstSlot && slot <= kLastSlot) expected_.insert(id);
      }
    }
    ASSERT_GT(expected_.size(), 1000u);
  }

  void TearDown() override {
    if (shard_ != nullptr) EXPECT_TRUE(shard_->Stop().ok());
    std::filesystem::remove_all(dir_);
  }

  // One call from `after`; adds the answer's ids to *ids and returns the answer.
  v1::ExportChangesResponse Read(uint64_t after, uint32_t max_changes, uint32_t max_rows,
                                 std::set<uint64_t>* ids, size_t* rows) {
    v1::ExportChangesRequest request;
    v1::SlotRange* range = request.add_ranges();
    range->set_first(kFirstSlot);
    range->set_last(kLastSlot);
    request.set_after_version(after);
    request.set_max_changes(max_changes);
    request.set_max_rows(max_rows);
    v1::ExportChangesResponse response;
    const absl::Status status = shard_->service->DoExportChanges(request, &response);
    EXPECT_TRUE(status.ok()) << status;
    *rows = 0;
    for (const v1::RowBlock& block : response.blocks()) {
      absl::StatusOr<std::vector<EncodedRow>> decoded = DecodeRows(block);
      EXPECT_TRUE(decoded.ok()) << decoded.status();
      if (!decoded.ok()) continue;
      for (const EncodedRow& row : *decoded) {
        EXPECT_TRUE(ids->insert(row.id).second) << "id " << row.id << " answered twice";
        const uint32_t slot = SlotOf(seed_, row.id);
        EXPECT_TRUE(slot >= kFirstSlot && slot <= kLastSlot) << "id " << row.id << " slot " << slot;
      }
      *rows += decoded->size();
    }
    return response;
  }

  // One call of ReadUntilCaughtUp, for its per-call checks.
  struct Call {
    uint64_t after = 0, version = 0;
    size_t rows = 0;
    bool caught_up = false;
  };
  struct ReadAll {
    std::set<uint64_t> ids;  // over every call
    int calls = 0;
    uint64_t version = 0;  // the last answer's
  };
  // Calls from version 0, each after the previous answer's version, until one is
  // caught up (at most 1000 calls).
  ReadAll ReadUntilCaughtUp(uint32_t max_changes, uint32_t max_rows,
                            const std::function<void(const Call&)>& check) {
    ReadAll all;
    for (Call call; all.calls < 1000 && !call.caught_up; call.after = call.version) {
      std::set<uint64_t> ids;
      const v1::ExportChangesResponse response =
          Read(call.after, max_changes, max_rows, &ids, &call.rows);
      ++all.calls;
      EXPECT_GE(response.version(), call.after);
      call.version = response.version();
      call.caught_up = response.caught_up();
      check(call);
      all.ids.insert(ids.begin(), ids.end());
      all.version = call.version;
    }
    return all;
  }

  std::string dir_;
  std::unique_ptr<InProcessShard> shard_;
  uint64_t seed_ = 0;
  std::set<uint64_t> expected_;
};

TEST_F(ExportChangesTest, UnboundedReadAnswersEveryChangedRowOfTheRangesOnce) {
  std::set<uint64_t> ids;
  size_t rows = 0;
  const v1::ExportChangesResponse response = Read(0, 0, 0, &ids, &rows);
  EXPECT_TRUE(response.caught_up());
  EXPECT_EQ(response.version(), shard_->storage->store()->version());
  EXPECT_EQ(ids, expected_);
}

TEST_F(ExportChangesTest, ReadsBoundedByRowsStopAndResumeWithoutLosingAChange) {
  constexpr uint32_t kMaxRows = 100;
  // A read of every entry (65,536 > the log): only the rows bound it.
  const ReadAll all = ReadUntilCaughtUp(65536, kMaxRows, [&](const Call& call) {
    EXPECT_LE(call.rows, kMaxRows);
    if (!call.caught_up) EXPECT_EQ(call.rows, kMaxRows) << "stopped early, not caught up";
  });
  EXPECT_EQ(all.ids, expected_);
  // An id changed by several pushes may be answered by several calls: at least the
  // distinct rows' worth of calls.
  EXPECT_GE(all.calls, static_cast<int>(expected_.size() / kMaxRows));
  EXPECT_EQ(all.version, shard_->storage->store()->version());
}

TEST_F(ExportChangesTest, EntriesBoundTheReadWhenRowsDoNot) {
  // 1,000 entries per call, no row bound: the calls needed are the log's length over
  // 1,000, whatever share of the entries is of the ranges.
  const ReadAll all = ReadUntilCaughtUp(
      1000, 0, [&](const Call& call) { EXPECT_LE(call.version - call.after, 1000u); });
  EXPECT_EQ(all.ids, expected_);
  EXPECT_GE(all.calls, kPushes * static_cast<int>(kIdsPerPush) / 1000);
  EXPECT_EQ(all.version, shard_->storage->store()->version());
}

}  // namespace
}  // namespace ember
