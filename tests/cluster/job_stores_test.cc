// Copyright 2026 The Ember Authors.
//
// Jobs' own stores on one real ember-ps process over gRPC (docs/ARCHITECTURE.md
// "Several jobs per PS cluster", server/ps/job_store.h): a call naming a job is served
// by that job's store, with its own tables, rows, attempt fence, checkpoints, restores
// and update stream; a restore or a fresh start of one job leaves the other jobs and
// the default store bitwise as they were; the stores come back after a restart; and the
// slot-migration calls read and write the store they name, the fence draining them all.

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/float16.h"
#include "common/grpc_status.h"
#include "common/slot.h"
#include "common/slot_map.h"
#include "common/status_macros.h"
#include "ember/v1/ps.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "server/shared/slot_owners.h"
#include "tests/support/deadline.h"
#include "tests/support/http_get.h"
#include "tests/support/ports.h"
#include "tests/support/ps_wire.h"
#include "tests/support/scratch_dir.h"
#include "tools/harness/process.h"

#ifndef EMBER_PS_BINARY
#error "EMBER_PS_BINARY must name the ember-ps binary"
#endif

namespace ember {
namespace {

constexpr uint32_t kDim = 8;

class JobStoresTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServer(); }
  void TearDown() override { StopServer(); }

  // With `metrics`, on metrics_port_ (its shutdown takes ~2 s more: only where read).
  void StartServer(bool metrics = false) {
    std::vector<std::string> flags = {absl::StrCat("--data_dir=", dir_, "/db"), "--port=0",
                                      "--shard_id=0", "--num_shards=1", "--memory_budget_mb=32"};
    if (metrics) {
      metrics_port_ = FreePort();
      flags.push_back(absl::StrCat("--metrics_port=", metrics_port_));
    }
    absl::StatusOr<std::unique_ptr<Process>> p =
        Process::Start(EMBER_PS_BINARY, flags, "listening on ", absl::Seconds(30));
    ASSERT_TRUE(p.ok()) << p.status();
    process_ = std::move(*p);
    stub_ = v1::PsService::NewStub(
        grpc::CreateChannel(process_->ready_text(), grpc::InsecureChannelCredentials()));
  }

  void StopServer() {
    stub_.reset();
    if (process_ == nullptr) return;
    absl::StatusOr<int> code = process_->Stop(absl::Seconds(10));
    EXPECT_TRUE(code.ok() && *code == 0) << "ember-ps did not exit cleanly";
    process_.reset();
  }

  template <typename Request, typename Response>
  absl::Status Call(grpc::Status (v1::PsService::Stub::*method)(grpc::ClientContext*,
                                                                const Request&, Response*),
                    const Request& request, Response* response) {
    grpc::ClientContext context;
    SetDeadline(&context);
    return FromGrpcStatus(((*stub_).*method)(&context, request, response), &context);
  }

  absl::Status CreateTable(const std::string& job, const std::string& name, uint32_t dim,
                           v1::TableConfig* created = nullptr) {
    v1::CreateTableRequest request;
    request.set_job(job);
    request.mutable_config()->set_name(name);
    request.mutable_config()->set_dim(dim);
    request.mutable_config()->mutable_optimizer()->set_kind(v1::OptimizerConfig::SGD);
    request.mutable_config()->mutable_optimizer()->set_learning_rate(0.5f);
    v1::CreateTableResponse response;
    EMBER_RETURN_IF_ERROR(Call(&v1::PsService::Stub::CreateTable, request, &response));
    if (created != nullptr) *created = response.config();
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<float>> Pull(const std::string& job, const std::string& table,
                                          const std::vector<uint64_t>& ids, uint64_t attempt = 0) {
    v1::PullRequest request;
    request.set_job(job);
    request.set_table(table);
    request.set_ids(PackIds(ids));
    request.set_epoch(1);
    request.set_attempt(attempt);
    v1::PullResponse response;
    EMBER_RETURN_IF_ERROR(Call(&v1::PsService::Stub::Pull, request, &response));
    return UnpackFloat32(response.values());
  }

  absl::Status Push(const std::string& job, const std::string& table,
                    const std::vector<uint64_t>& ids, uint32_t dim, float grad,
                    uint64_t attempt = 0) {
    v1::PushRequest request;
    request.set_job(job);
    request.set_table(table);
    request.set_ids(PackIds(ids));
    request.set_grads(PackFloat32(std::vector<float>(ids.size() * dim, grad)));
    request.set_step(1);
    request.set_worker_id(1);
    request.set_sequence(++sequence_);
    request.set_epoch(1);
    request.set_attempt(attempt);
    v1::PushResponse response;
    return Call(&v1::PsService::Stub::Push, request, &response);
  }

  // The digest of every table of `job`'s store (it flushes first).
  absl::StatusOr<std::string> Digest(const std::string& job) {
    v1::ChecksumRequest request;
    request.set_job(job);
    v1::ChecksumResponse response;
    EMBER_RETURN_IF_ERROR(Call(&v1::PsService::Stub::Checksum, request, &response));
    std::string digest;
    for (const v1::ChecksumResponse::Table& t : response.tables()) {
      absl::StrAppend(&digest, t.table(), ":", t.rows(), ":", t.digest(), ";");
    }
    return digest;
  }

  absl::StatusOr<v1::GetShardInfoResponse> Info(const std::string& job) {
    v1::GetShardInfoRequest request;
    request.set_job(job);
    v1::GetShardInfoResponse response;
    EMBER_RETURN_IF_ERROR(Call(&v1::PsService::Stub::GetShardInfo, request, &response));
    return response;
  }

  absl::Status Restore(const std::string& job, uint64_t attempt, bool clear,
                       const v1::CheckpointManifest* manifest = nullptr,
                       const std::string& manifest_dir = "") {
    v1::RestoreShardRequest request;
    request.set_job(job);
    request.set_attempt(attempt);
    request.set_epoch(1);
    request.set_slot_owners(PackSlotOwners(SlotMap::Even({0}, 1)));
    request.set_clear(clear);
    if (manifest != nullptr) {
      *request.add_chain() = *manifest;
      request.add_chain_dirs(manifest_dir);
    }
    v1::RestoreShardResponse response;
    return Call(&v1::PsService::Stub::RestoreShard, request, &response);
  }

  ScratchDir scratch_{"ember-job-stores"};
  const std::string dir_ = scratch_.path();
  std::unique_ptr<Process> process_;
  std::unique_ptr<v1::PsService::Stub> stub_;
  uint64_t sequence_ = 0;
  int metrics_port_ = 0;
};

TEST_F(JobStoresTest, TablesAndRowsArePerJob) {
  // One table name in the default store and in two jobs, with different shapes.
  ASSERT_TRUE(CreateTable("", "user", kDim).ok());
  ASSERT_TRUE(CreateTable("ctr-a", "user", kDim).ok());
  ASSERT_TRUE(CreateTable("ctr-b", "user", 4).ok());
  const std::vector<uint64_t> ids = {1, 2, 3};
  absl::StatusOr<std::vector<float>> before = Pull("ctr-a", "user", ids);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_EQ(before->size(), ids.size() * kDim);

  ASSERT_TRUE(Push("ctr-a", "user", ids, kDim, 1.0f).ok());
  absl::StatusOr<std::vector<float>> a = Pull("ctr-a", "user", ids);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_NE(*a, *before) << "the push to job ctr-a changed its rows";
  // The default store's table of the same name and config still reads its init rows.
  absl::StatusOr<std::vector<float>> shared = Pull("", "user", ids);
  ASSERT_TRUE(shared.ok()) << shared.status();
  EXPECT_EQ(*shared, *before);
  absl::StatusOr<std::vector<float>> b = Pull("ctr-b", "user", ids);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->size(), ids.size() * 4) << "job ctr-b's user table has its own dim";
  // A push of the wrong shape for ctr-b's table is refused there.
  EXPECT_EQ(Push("ctr-b", "user", ids, kDim, 1.0f).code(), absl::StatusCode::kInvalidArgument);

  absl::StatusOr<v1::GetShardInfoResponse> info = Info("");
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->jobs_size(), 2);
  EXPECT_EQ(info->jobs(0), "ctr-a");
  EXPECT_EQ(info->jobs(1), "ctr-b");
  absl::StatusOr<v1::GetShardInfoResponse> of_a = Info("ctr-a");
  ASSERT_TRUE(of_a.ok()) << of_a.status();
  EXPECT_GT(of_a->version(), 0u);
  EXPECT_EQ(info->version(), 0u) << "nothing was pushed to the default store";
  EXPECT_NE(of_a->stream_id(), info->stream_id()) << "each store has its own update stream";

  // Jobs without a store here, and names that are not a job's.
  EXPECT_EQ(Pull("ctr-c", "user", ids).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Info("ctr-c").status().code(), absl::StatusCode::kNotFound);
  for (const std::string& bad : std::vector<std::string>{"..", ".", "a/b", std::string(129, 'x')}) {
    EXPECT_EQ(Pull(bad, "user", ids).status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(CreateTable(bad, "user", kDim).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/db.jobs/ctr-c")) << "a failed call opens nothing";
}

TEST_F(JobStoresTest, ARestoreOfOneJobLeavesTheOthersAsTheyWere) {
  v1::TableConfig a_table;
  ASSERT_TRUE(CreateTable("", "user", kDim).ok());
  ASSERT_TRUE(CreateTable("ctr-a", "user", kDim, &a_table).ok());
  ASSERT_TRUE(CreateTable("ctr-b", "user", kDim).ok());
  const std::vector<uint64_t> ids = {10, 11, 12, 13};
  for (const char* job : {"", "ctr-a", "ctr-b"}) {
    ASSERT_TRUE(Push(job, "user", ids, kDim, 0.25f).ok()) << job;
  }
  absl::StatusOr<std::string> default_digest = Digest("");
  absl::StatusOr<std::string> b_digest = Digest("ctr-b");
  ASSERT_TRUE(default_digest.ok() && b_digest.ok());

  // A fresh run of ctr-a: its store is emptied and fenced to attempt 3.
  ASSERT_TRUE(Restore("ctr-a", 3, /*clear=*/true).ok());
  absl::StatusOr<std::string> a_fresh = Digest("ctr-a");
  ASSERT_TRUE(a_fresh.ok()) << a_fresh.status();
  EXPECT_EQ(*a_fresh, "user:0:0;") << "ctr-a's table stays, empty";
  EXPECT_EQ(*Digest("ctr-b"), *b_digest);
  EXPECT_EQ(*Digest(""), *default_digest);

  // Attempts are per store.
  EXPECT_EQ(Pull("ctr-a", "user", ids, /*attempt=*/2).status().code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(Pull("ctr-a", "user", ids, 3).ok());
  EXPECT_EQ(Pull("ctr-b", "user", ids, 3).status().code(), absl::StatusCode::kUnavailable)
      << "ctr-b is not restored for attempt 3";
  EXPECT_EQ(Info("ctr-a")->attempt(), 3u);
  EXPECT_EQ(Info("ctr-b")->attempt(), 0u);
  EXPECT_EQ(Info("")->attempt(), 0u);
  EXPECT_EQ(Restore("ctr-a", 2, false).code(), absl::StatusCode::kFailedPrecondition)
      << "a store's attempts never go back";
  ASSERT_TRUE(Restore("ctr-b", 2, false).ok()) << "another job's attempts are its own";

  // A checkpoint of ctr-a, more training, then a rollback to it: ctr-a's rows are the
  // cut's again, ctr-b's and the default store's untouched.
  ASSERT_TRUE(Push("ctr-a", "user", ids, kDim, 0.5f, 3).ok());
  const std::string cut_digest = *Digest("ctr-a");
  v1::CheckpointShardRequest checkpoint;
  checkpoint.set_job("ctr-a");
  checkpoint.set_dir(absl::StrCat(dir_, "/ckpt-1"));
  checkpoint.set_name("ckpt-1");
  checkpoint.set_attempt(3);
  v1::CheckpointShardResponse written;
  ASSERT_TRUE(Call(&v1::PsService::Stub::CheckpointShard, checkpoint, &written).ok());
  checkpoint.set_attempt(2);
  EXPECT_EQ(Call(&v1::PsService::Stub::CheckpointShard, checkpoint, &written).code(),
            absl::StatusCode::kAborted)
      << "a cut of an attempt ctr-a has left";
  checkpoint.set_attempt(3);
  ASSERT_TRUE(Call(&v1::PsService::Stub::CheckpointShard, checkpoint, &written).ok());
  ASSERT_TRUE(Push("ctr-a", "user", ids, kDim, 1.0f, 3).ok());
  ASSERT_TRUE(Push("ctr-b", "user", ids, kDim, 1.0f, 2).ok());
  b_digest = Digest("ctr-b");
  ASSERT_NE(*Digest("ctr-a"), cut_digest);

  v1::CheckpointManifest manifest;
  manifest.set_format(1);
  manifest.set_name("ckpt-1");
  manifest.set_epoch(1);
  manifest.set_slot_owners(PackSlotOwners(SlotMap::Even({0}, 1)));
  *manifest.add_tables() = a_table;
  *manifest.add_shards() = written.snapshot();
  const absl::Status restored = Restore("ctr-a", 4, false, &manifest, checkpoint.dir());
  ASSERT_TRUE(restored.ok()) << restored;
  EXPECT_EQ(*Digest("ctr-a"), cut_digest);
  EXPECT_EQ(*Digest("ctr-b"), *b_digest);
  EXPECT_EQ(*Digest(""), *default_digest);
  EXPECT_EQ(Info("ctr-b")->attempt(), 2u);
}

TEST_F(JobStoresTest, JobStoresComeBackAfterARestart) {
  ASSERT_TRUE(CreateTable("ctr-a", "user", kDim).ok());
  const std::vector<uint64_t> ids = {5, 6, 7};
  ASSERT_TRUE(Push("ctr-a", "user", ids, kDim, 0.75f).ok());
  ASSERT_TRUE(Restore("ctr-a", 6, false).ok());
  absl::StatusOr<std::string> digest = Digest("ctr-a");
  ASSERT_TRUE(digest.ok()) << digest.status();
  absl::StatusOr<std::vector<float>> rows = Pull("ctr-a", "user", ids);
  ASSERT_TRUE(rows.ok());

  StopServer();
  StartServer();
  absl::StatusOr<v1::GetShardInfoResponse> info = Info("");
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->jobs_size(), 1);
  EXPECT_EQ(info->jobs(0), "ctr-a");
  EXPECT_GT(Info("ctr-a")->version(), 0u) << "the job's rows are back";
  // Tables are declared again after a restart (by the job's workers), as in the
  // default store; the rows were kept.
  ASSERT_TRUE(CreateTable("ctr-a", "user", kDim).ok());
  EXPECT_EQ(*Digest("ctr-a"), *digest);
  EXPECT_EQ(*Pull("ctr-a", "user", ids), *rows);
  // A restarted process serves no attempt until restored (as the default store).
  EXPECT_EQ(Info("ctr-a")->attempt(), 0u);
  EXPECT_EQ(Pull("ctr-a", "user", ids, 6).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Pull("", "user", ids).status().code(), absl::StatusCode::kNotFound)
      << "the default store never had the job's table";
}

TEST_F(JobStoresTest, UpdateStreamsArePerJob) {
  ASSERT_TRUE(CreateTable("", "user", kDim).ok());
  ASSERT_TRUE(CreateTable("ctr-a", "user", kDim).ok());
  ASSERT_TRUE(Push("ctr-a", "user", {1, 2, 3, 4, 5}, kDim, 0.5f).ok());
  ASSERT_TRUE(Push("", "user", {9}, kDim, 0.5f).ok());
  auto rows_streamed = [this](const std::string& job) -> absl::StatusOr<uint64_t> {
    v1::WatchUpdatesRequest request;
    request.set_job(job);
    request.set_stop_when_caught_up(true);
    grpc::ClientContext context;
    SetDeadline(&context);
    std::unique_ptr<grpc::ClientReader<v1::UpdateBatch>> reader =
        stub_->WatchUpdates(&context, request);
    uint64_t rows = 0;
    v1::UpdateBatch batch;
    while (reader->Read(&batch)) {
      for (const v1::RowBlock& block : batch.blocks()) rows += block.count();
    }
    EMBER_RETURN_IF_ERROR(FromGrpcStatus(reader->Finish(), &context));
    return rows;
  };
  EXPECT_EQ(*rows_streamed("ctr-a"), 5u);
  EXPECT_EQ(*rows_streamed(""), 1u);
  EXPECT_EQ(rows_streamed("ctr-c").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobStoresTest, TheMigrationCallsReadTheStoreTheyNameAndTheFenceDrainsEveryStore) {
  ASSERT_TRUE(CreateTable("", "user", kDim).ok());
  ASSERT_TRUE(CreateTable("ctr-a", "user", kDim).ok());
  ASSERT_TRUE(Push("", "user", {1}, kDim, 1.0f).ok());
  ASSERT_TRUE(Push("ctr-a", "user", {1, 2, 3}, kDim, 1.0f).ok());
  absl::StatusOr<v1::GetShardInfoResponse> shared = Info("");
  absl::StatusOr<v1::GetShardInfoResponse> of_a = Info("ctr-a");
  ASSERT_TRUE(shared.ok() && of_a.ok());
  EXPECT_EQ(shared->restores(), of_a->restores()) << "the count is the shard's";

  // A snapshot page of each store: its own rows, as of its own version.
  auto export_rows = [&](const std::string& job,
                         uint64_t restores) -> absl::StatusOr<v1::ExportRowsResponse> {
    v1::ExportRowsRequest request;
    request.set_job(job);
    request.set_table("user");
    request.mutable_range()->set_first(0);
    request.mutable_range()->set_last(kNumSlots - 1);
    request.set_incarnation(shared->incarnation());
    request.set_restores(restores);
    v1::ExportRowsResponse response;
    EMBER_RETURN_IF_ERROR(Call(&v1::PsService::Stub::ExportRows, request, &response));
    return response;
  };
  absl::StatusOr<v1::ExportRowsResponse> page = export_rows("ctr-a", shared->restores());
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->block().count(), 3u);
  EXPECT_EQ(page->version(), of_a->version());
  page = export_rows("", shared->restores());
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->block().count(), 1u);
  EXPECT_EQ(page->version(), shared->version());
  EXPECT_EQ(export_rows("ctr-c", shared->restores()).status().code(), absl::StatusCode::kNotFound);

  // The changes of one store after a version are that store's.
  ASSERT_TRUE(Push("ctr-a", "user", {4}, kDim, 1.0f).ok());
  v1::ExportChangesRequest changes;
  v1::SlotRange* all = changes.add_ranges();
  all->set_first(0);
  all->set_last(kNumSlots - 1);
  changes.set_job("ctr-a");
  changes.set_after_version(of_a->version());
  v1::ExportChangesResponse changed;
  ASSERT_TRUE(Call(&v1::PsService::Stub::ExportChanges, changes, &changed).ok());
  ASSERT_EQ(changed.blocks_size(), 1);
  EXPECT_EQ(changed.blocks(0).count(), 1u) << "row 4 of job ctr-a";
  EXPECT_TRUE(changed.caught_up());
  changes.set_job("");
  changes.set_after_version(shared->version());
  ASSERT_TRUE(Call(&v1::PsService::Stub::ExportChanges, changes, &changed).ok());
  EXPECT_EQ(changed.blocks_size(), 0) << "nothing changed in the default store";

  // The fence drains every store and answers each one's version and tables.
  v1::FenceSlotsRequest fence;
  v1::SlotRange* range = fence.add_ranges();
  range->set_first(0);
  range->set_last(9);
  fence.set_fence(true);
  fence.set_incarnation(shared->incarnation());
  fence.set_restores(shared->restores());
  v1::FenceSlotsResponse fenced;
  ASSERT_TRUE(Call(&v1::PsService::Stub::FenceSlots, fence, &fenced).ok());
  ASSERT_EQ(fenced.stores_size(), 2);
  EXPECT_EQ(fenced.stores(0).job(), "");
  EXPECT_EQ(fenced.stores(0).version(), fenced.version());
  EXPECT_EQ(fenced.stores(1).job(), "ctr-a");
  EXPECT_EQ(fenced.stores(1).version(), of_a->version() + 1);
  ASSERT_EQ(fenced.stores(1).tables_size(), 1);
  EXPECT_EQ(fenced.stores(1).tables(0), "user");
  fence.set_fence(false);
  ASSERT_TRUE(Call(&v1::PsService::Stub::FenceSlots, fence, &fenced).ok());

  // A restore of any store counts: a move that read rows before it starts over.
  ASSERT_TRUE(Restore("ctr-a", 1, /*clear=*/true).ok());
  const absl::Status stale = export_rows("", shared->restores()).status();
  EXPECT_EQ(stale.code(), absl::StatusCode::kAborted) << stale;
  absl::StatusOr<v1::GetShardInfoResponse> after = Info("");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->restores(), shared->restores() + 1);
  fence.set_fence(true);
  EXPECT_EQ(Call(&v1::PsService::Stub::FenceSlots, fence, &fenced).code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(Info("")->fenced_slots_size(), 0) << "a refused fence fences nothing";
  EXPECT_TRUE(export_rows("", after->restores()).ok());

  // An import names an existing store (this shard owns every slot: a job without a
  // store here is refused first).
  v1::ImportRowsRequest import;
  import.set_job("ctr-c");
  import.add_blocks()->set_table("user");
  v1::ImportRowsResponse imported;
  EXPECT_EQ(Call(&v1::PsService::Stub::ImportRows, import, &imported).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(JobStoresTest, EachJobsStoreHasItsOwnMetrics) {
  StopServer();
  ASSERT_NO_FATAL_FAILURE(StartServer(/*metrics=*/true));
  absl::StatusOr<std::string> body = HttpGet(metrics_port_, "/metrics");
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_FALSE(absl::StrContains(*body, "ember_job_store_")) << "no job store yet";

  ASSERT_TRUE(CreateTable("ctr-a", "user", kDim).ok());
  ASSERT_TRUE(CreateTable("ctr-b", "user", kDim).ok());
  ASSERT_TRUE(Push("ctr-a", "user", {1, 2, 3}, kDim, 1.0f).ok());
  ASSERT_TRUE(Push("ctr-b", "user", {1}, kDim, 1.0f).ok());
  absl::StatusOr<v1::GetShardInfoResponse> of_a = Info("ctr-a");
  ASSERT_TRUE(of_a.ok());
  body = HttpGet(metrics_port_, "/metrics");
  ASSERT_TRUE(body.ok()) << body.status();
  for (const std::string& line :
       {absl::StrCat("ember_job_store_version{job=\"ctr-a\"} ", of_a->version()),
        std::string("ember_job_store_memory_rows{job=\"ctr-a\"} 3"),
        std::string("ember_job_store_memory_rows{job=\"ctr-b\"} 1"),
        std::string("ember_job_store_memory_bytes{job=\"ctr-a\"} "),
        std::string("ember_job_store_disk_bytes{job=\"ctr-b\"} "),
        std::string("ember_job_store_rows{job=\"ctr-a\"} ")}) {
    EXPECT_TRUE(absl::StrContains(*body, line)) << line << "\n" << *body;
  }
  // The default store's figures stay unlabelled (nothing pushed there).
  EXPECT_TRUE(absl::StrContains(*body, "\nember_store_version 0")) << *body;
}

}  // namespace
}  // namespace ember
