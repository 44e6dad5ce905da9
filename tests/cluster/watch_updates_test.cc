// Copyright 2026 The Ember Authors.
//
// PsService.WatchUpdates (proto/ember/v1/ps.proto) against real ember-ps processes on
// loopback, and against an in-process service where only the store can trigger the
// change (eviction tombstones). Every received message goes through a Follower, which
// checks etcd-style watch guarantees before applying it: contiguous (from_version is
// the previous to_version, also across a resume), bounded by the watermark, watermark
// and epoch never going back, one stream id, each row at most once per message. A
// follower that caught up must hold exactly the rows the shard exports.

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/float16.h"
#include "common/grpc_status.h"
#include "common/slot.h"
#include "common/slot_map.h"
#include "common/status_macros.h"
#include "ember/v1/ps.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"
#include "server/ps/ps_service.h"
#include "server/shared/row_block.h"
#include "server/shared/slot_owners.h"
#include "server/store/embedding_store.h"
#include "server/store/in_memory_backend.h"
#include "tests/support/deadline.h"
#include "tests/support/eventually.h"
#include "tools/harness/process.h"

#ifndef EMBER_PS_BINARY
#error "EMBER_PS_BINARY must name the ember-ps binary"
#endif

namespace ember {
namespace {

constexpr uint32_t kDim = 4;
constexpr absl::Duration kCallDeadline = absl::Seconds(10);
constexpr absl::Duration kStreamDeadline = absl::Seconds(60);
// Bound of every wait for a condition (a failing test fails after this, not hangs).
constexpr absl::Duration kWaitBound = absl::Seconds(15);

// Rows of one table: id -> stored row bytes.
using Rows = std::map<uint64_t, std::string>;

std::string PackIds(const std::vector<uint64_t>& ids) {
  return std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * 8);
}

// ---------------------------------------------------------------- Follower

// One follower's view of a shard's update stream, over one or more WatchUpdates calls
// (a resume continues where the last one stopped). Apply() validates each message,
// records every violation, then applies the rows. Thread-safe.
class Follower {
 public:
  // `after`: the version the first call starts after. `tables`: the only tables a
  // message may carry (empty: any).
  explicit Follower(uint64_t after = 0, std::set<std::string> tables = {})
      : position_(after), tables_(std::move(tables)) {}

  void Apply(const v1::UpdateBatch& batch) {
    absl::MutexLock lock(&mu_);
    Validate(batch);
    for (const v1::RowBlock& block : batch.blocks()) {
      absl::StatusOr<std::vector<EncodedRow>> rows = DecodeRows(block);
      if (!rows.ok()) {
        Violation(batch, absl::StrCat("undecodable block: ", rows.status().ToString()));
        continue;
      }
      Rows& table = rows_[block.table()];
      for (EncodedRow& row : *rows) {
        if (row.value.empty()) {
          tombstones_[block.table()].insert(row.id);
          table.erase(row.id);
        } else {
          table[row.id] = std::move(row.value);
        }
      }
    }
    if (batch.blocks_size() == 0) marks_.push_back(batch);
    position_ = batch.to_version();
    ++messages_;
  }

  // Starts from rows read elsewhere (a checkpoint), before any message.
  void Bootstrap(const std::string& table, Rows rows) {
    absl::MutexLock lock(&mu_);
    rows_[table] = std::move(rows);
  }

  // A call of this follower ended.
  void Ended() {
    absl::MutexLock lock(&mu_);
    ++calls_ended_;
  }

  // Polls (bounded) until `done` holds; returns false once `timeout` passed or a call
  // ended without `done` holding.
  bool WaitUntil(const std::function<bool(const Follower&)>& done,
                 absl::Duration timeout = kWaitBound) const {
    const size_t ended = calls_ended();
    Eventually([&] { return done(*this) || calls_ended() > ended; }, timeout,
               absl::Milliseconds(2));
    return done(*this);
  }
  bool WaitForPosition(uint64_t version) const {
    return WaitUntil([version](const Follower& f) { return f.position() >= version; });
  }

  uint64_t position() const { return Get(&Follower::position_); }
  uint64_t stream_id() const { return Get(&Follower::stream_id_); }
  size_t messages() const { return Get(&Follower::messages_); }
  size_t calls_ended() const { return Get(&Follower::calls_ended_); }
  std::vector<std::string> violations() const { return Get(&Follower::violations_); }
  // The messages without rows (progress marks).
  std::vector<v1::UpdateBatch> marks() const { return Get(&Follower::marks_); }
  Rows rows(const std::string& table) const {
    absl::MutexLock lock(&mu_);
    auto it = rows_.find(table);
    return it == rows_.end() ? Rows() : it->second;
  }
  // Ids of `table` that arrived with an empty value at least once.
  std::set<uint64_t> tombstones(const std::string& table) const {
    absl::MutexLock lock(&mu_);
    auto it = tombstones_.find(table);
    return it == tombstones_.end() ? std::set<uint64_t>() : it->second;
  }

 private:
  template <typename T>
  T Get(T Follower::*field) const {
    absl::MutexLock lock(&mu_);
    return this->*field;
  }

  void Violation(const v1::UpdateBatch& batch, absl::string_view what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    violations_.push_back(absl::StrCat("message ", messages_, " (", batch.from_version(), ", ",
                                       batch.to_version(), "]: ", what));
  }

  void Validate(const v1::UpdateBatch& b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (b.stream_id() == 0) Violation(b, "stream_id 0");
    if (stream_id_ == 0) stream_id_ = b.stream_id();
    if (b.stream_id() != stream_id_) {
      Violation(b, absl::StrCat("stream_id ", b.stream_id(), " after ", stream_id_));
    }
    if (messages_ > 0 && b.shard_id() != shard_id_) Violation(b, "shard_id changed");
    shard_id_ = b.shard_id();
    if (b.from_version() != position_) {
      Violation(b, absl::StrCat(b.from_version() < position_ ? "overlap" : "gap",
                                ": expected from_version ", position_));
    }
    if (b.to_version() < b.from_version()) Violation(b, "to_version below from_version");
    if (b.blocks_size() == 0 && b.to_version() < last_mark_) {
      Violation(b, absl::StrCat("progress mark behind the previous one (", last_mark_, ")"));
    }
    if (b.blocks_size() == 0) last_mark_ = b.to_version();
    if (b.to_version() > b.watermark()) Violation(b, "to_version above the watermark");
    if (b.watermark() < watermark_) {
      Violation(b, absl::StrCat("watermark went back from ", watermark_));
    }
    watermark_ = std::max(watermark_, b.watermark());
    if (b.epoch() < epoch_) Violation(b, absl::StrCat("epoch went back from ", epoch_));
    epoch_ = std::max(epoch_, b.epoch());
    std::set<std::string> tables;
    std::set<std::pair<std::string, uint64_t>> keys;
    for (const v1::RowBlock& block : b.blocks()) {
      if (!tables.insert(block.table()).second) Violation(b, "two blocks of one table");
      if (!tables_.empty() && !tables_.contains(block.table())) {
        Violation(b, absl::StrCat("rows of unwatched table ", block.table()));
      }
      if (block.count() == 0) Violation(b, "empty block");
      absl::StatusOr<std::vector<EncodedRow>> rows = DecodeRows(block);
      if (!rows.ok()) continue;  // reported by Apply
      for (const EncodedRow& row : *rows) {
        if (!keys.insert({block.table(), row.id}).second) {
          Violation(b, absl::StrCat("row ", row.id, " of ", block.table(), " twice"));
        }
      }
    }
  }

  mutable absl::Mutex mu_;
  uint64_t position_ ABSL_GUARDED_BY(mu_);
  const std::set<std::string> tables_;
  uint64_t stream_id_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t shard_id_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t watermark_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t last_mark_ ABSL_GUARDED_BY(mu_) = 0;
  size_t messages_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> violations_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Rows> rows_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::set<uint64_t>> tombstones_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::UpdateBatch> marks_ ABSL_GUARDED_BY(mu_);
  size_t calls_ended_ ABSL_GUARDED_BY(mu_) = 0;
};

// One WatchUpdates call, read by its own thread into a Follower.
class Watch {
 public:
  Watch(v1::PsService::Stub* stub, const v1::WatchUpdatesRequest& request, Follower* follower)
      : follower_(follower) {
    SetDeadline(&context_, kStreamDeadline);
    thread_ = std::thread([this, stub, request] {
      std::unique_ptr<grpc::ClientReader<v1::UpdateBatch>> reader =
          stub->WatchUpdates(&context_, request);
      v1::UpdateBatch batch;
      while (reader->Read(&batch)) follower_->Apply(batch);
      absl::Status status = FromGrpcStatus(reader->Finish(), &context_);
      {
        absl::MutexLock lock(&mu_);
        status_ = status;
        done_ = true;
      }
      follower_->Ended();
    });
  }
  ~Watch() {
    context_.TryCancel();
    thread_.join();
  }

  void Cancel() { context_.TryCancel(); }

  // The call's status once it ended (bounded wait); DEADLINE_EXCEEDED if it still runs.
  absl::Status Wait(absl::Duration timeout = kWaitBound) {
    absl::MutexLock lock(&mu_);
    if (!mu_.AwaitWithTimeout(absl::Condition(&done_), timeout)) {
      return absl::DeadlineExceededError("the stream is still open");
    }
    return status_;
  }

 private:
  Follower* const follower_;
  grpc::ClientContext context_;
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

v1::WatchUpdatesRequest WatchFrom(uint64_t stream_id, uint64_t after) {
  v1::WatchUpdatesRequest request;
  request.set_stream_id(stream_id);
  request.set_after_version(after);
  request.set_progress_interval_ms(50);
  return request;
}

// The first status a WatchUpdates call ends with (for calls expected to fail).
absl::Status WatchStatus(v1::PsService::Stub* stub, const v1::WatchUpdatesRequest& request) {
  Follower follower(request.after_version());
  Watch watch(stub, request, &follower);
  return watch.Wait();
}

// ---------------------------------------------------------------- Shard access

// A synchronous client of one shard: every call has a deadline.
class Shard {
 public:
  explicit Shard(const std::string& address)
      : stub_(v1::PsService::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {}

  v1::PsService::Stub* stub() { return stub_.get(); }

  // Any unary call: Call(&v1::PsService::Stub::GetShardInfo, request, &response).
  template <typename Request, typename Response>
  absl::Status Call(grpc::Status (v1::PsService::Stub::*method)(grpc::ClientContext*,
                                                                const Request&, Response*),
                    const Request& request, Response* response) {
    grpc::ClientContext context;
    SetDeadline(&context, kCallDeadline);
    return FromGrpcStatus((stub_.get()->*method)(&context, request, response), &context);
  }

  // Creates an SGD table; returns its config with the defaults filled in.
  absl::StatusOr<v1::TableConfig> CreateTable(const std::string& name, uint32_t dim = kDim) {
    v1::CreateTableRequest request;
    request.mutable_config()->set_name(name);
    request.mutable_config()->set_dim(dim);
    request.mutable_config()->mutable_optimizer()->set_learning_rate(0.125f);
    v1::CreateTableResponse response;
    EMBER_RETURN_IF_ERROR(Call(&v1::PsService::Stub::CreateTable, request, &response));
    return response.config();
  }

  // Pushes a gradient of (id % 8 + worker) / 8 per element, at step 1.
  absl::Status Push(const std::string& table, const std::vector<uint64_t>& ids, uint64_t worker,
                    uint64_t sequence, uint32_t dim = kDim) {
    std::vector<float> grads;
    for (uint64_t id : ids) grads.insert(grads.end(), dim, static_cast<float>(id % 8 + worker) / 8);
    v1::PushRequest request;
    request.set_table(table);
    request.set_ids(PackIds(ids));
    AppendFloat32Bytes(grads, request.mutable_grads());
    request.set_step(1);
    request.set_worker_id(worker);
    request.set_sequence(sequence);
    request.set_epoch(1);
    v1::PushResponse response;
    return Call(&v1::PsService::Stub::Push, request, &response);
  }

  absl::StatusOr<uint64_t> Version() {
    v1::GetShardInfoResponse response;
    EMBER_RETURN_IF_ERROR(
        Call(&v1::PsService::Stub::GetShardInfo, v1::GetShardInfoRequest(), &response));
    return response.version();
  }

  // Every stored row of `table` (the shard owns every slot), by ExportRows pages.
  absl::StatusOr<Rows> ExportAll(const std::string& table) {
    Rows rows;
    v1::ExportRowsRequest request;
    request.set_table(table);
    request.mutable_range()->set_last(kNumSlots - 1);
    do {
      v1::ExportRowsResponse response;
      EMBER_RETURN_IF_ERROR(Call(&v1::PsService::Stub::ExportRows, request, &response));
      EMBER_ASSIGN_OR_RETURN(std::vector<EncodedRow> page, DecodeRows(response.block()));
      for (EncodedRow& row : page) rows[row.id] = std::move(row.value);
      request.set_cursor(response.next_cursor());
    } while (!request.cursor().empty());
    return rows;
  }

  // Flushes the shard (its version becomes durable): the Checksum RPC.
  absl::Status Flush() {
    v1::ChecksumResponse response;
    return Call(&v1::PsService::Stub::Checksum, v1::ChecksumRequest(), &response);
  }

 private:
  std::unique_ptr<v1::PsService::Stub> stub_;
};

// Pushes `pushes` single-push batches of 3 ids (from `id_space` ids) as `worker`,
// sequences first_sequence.. . Returns the first error.
absl::Status PushPattern(Shard& shard, const std::string& table, uint64_t worker, int pushes,
                         uint64_t id_space, uint64_t first_sequence = 1) {
  for (int i = 0; i < pushes; ++i) {
    const uint64_t base = static_cast<uint64_t>(i) * 7 + worker * 3;
    const std::vector<uint64_t> ids = {base % id_space, (base + 11) % id_space,
                                       (base + 29) % id_space};
    EMBER_RETURN_IF_ERROR(shard.Push(table, ids, worker, first_sequence + i));
  }
  return absl::OkStatus();
}

void ExpectNoViolations(const Follower& follower) {
  for (const std::string& v : follower.violations()) ADD_FAILURE() << v;
}

// ---------------------------------------------------------------- Fixture

class WatchUpdatesTest : public ::testing::Test {
 protected:
  // A fresh directory per test: tests of one binary run one at a time.
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/watch_updates_test.", getpid(), ".",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::error_code error;
    std::filesystem::remove_all(dir_, error);
    ASSERT_TRUE(std::filesystem::create_directories(dir_, error)) << dir_ << ": " << error;
  }

  void TearDown() override {
    shard_.reset();
    if (process_ != nullptr) {
      EXPECT_EQ(process_->Stop(absl::Seconds(20)).value_or(-1), 0) << "ember-ps exit code";
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // Starts (or restarts, on the same data) a standalone shard owning every slot.
  void StartShard(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {absl::StrCat("--data_dir=", dir_, "/db"), "--port=0",
                                     "--num_shards=1", "--shard_id=0", "--memory_budget_mb=64"};
    args.insert(args.end(), extra.begin(), extra.end());
    absl::StatusOr<std::unique_ptr<Process>> p =
        Process::Start(EMBER_PS_BINARY, args, "listening on ", absl::Seconds(30));
    ASSERT_TRUE(p.ok()) << p.status();
    process_ = std::move(*p);
    shard_ = std::make_unique<Shard>(process_->ready_text());
  }

  // Opens a stream at (0, 0) on the fresh shard and returns the stream id from its
  // first message (the shard started empty, so that position is accepted).
  uint64_t LearnStreamId() {
    Follower follower;
    Watch watch(shard_->stub(), WatchFrom(0, 0), &follower);
    EXPECT_TRUE(follower.WaitUntil([](const Follower& f) { return f.messages() > 0; }));
    ExpectNoViolations(follower);
    return follower.stream_id();
  }

  // Waits until `follower` reached the shard's version, then compares its rows of
  // `table` with the shard's export.
  void ExpectConverged(const Follower& follower, const std::string& table) {
    absl::StatusOr<uint64_t> version = shard_->Version();
    ASSERT_TRUE(version.ok()) << version.status();
    ASSERT_TRUE(follower.WaitForPosition(*version))
        << "follower at " << follower.position() << ", shard at " << *version;
    absl::StatusOr<Rows> exported = shard_->ExportAll(table);
    ASSERT_TRUE(exported.ok()) << exported.status();
    ASSERT_FALSE(exported->empty());
    const Rows followed = follower.rows(table);
    EXPECT_EQ(followed.size(), exported->size());
    EXPECT_TRUE(followed == *exported) << "the follower's rows differ from the shard's";
    ExpectNoViolations(follower);
  }

  std::string dir_;
  std::unique_ptr<Process> process_;
  std::unique_ptr<Shard> shard_;
};

// Two workers push concurrently while a follower watches from the empty start: the
// follower ends with exactly the shard's rows, and no message broke a guarantee.
TEST_F(WatchUpdatesTest, ConcurrentPushesConverge) {
  StartShard();
  ASSERT_TRUE(shard_->CreateTable("item").ok());
  Follower follower;
  Watch watch(shard_->stub(), WatchFrom(0, 0), &follower);
  ASSERT_TRUE(follower.WaitUntil([](const Follower& f) { return f.messages() > 0; }));
  absl::Status results[2];
  {
    std::vector<std::thread> workers;
    for (uint64_t w = 1; w <= 2; ++w) {
      workers.emplace_back([&, w] { results[w - 1] = PushPattern(*shard_, "item", w, 1200, 500); });
    }
    for (std::thread& t : workers) t.join();
  }
  ASSERT_TRUE(results[0].ok()) << results[0];
  ASSERT_TRUE(results[1].ok()) << results[1];
  ExpectConverged(follower, "item");
  EXPECT_GT(follower.stream_id(), 0u);
}

// A follower cancelled halfway resumes at (stream_id, last to_version): the two calls
// together are one contiguous stream and converge.
TEST_F(WatchUpdatesTest, ResumeAfterCancelContinuesTheStream) {
  StartShard();
  ASSERT_TRUE(shard_->CreateTable("item").ok());
  Follower follower;
  absl::Status pushed[2];
  std::vector<std::thread> workers;
  {
    Watch first(shard_->stub(), WatchFrom(0, 0), &follower);
    for (uint64_t w = 1; w <= 2; ++w) {
      workers.emplace_back([&, w] { pushed[w - 1] = PushPattern(*shard_, "item", w, 800, 300); });
    }
    // Halfway: about a third of the versions the pushes take.
    ASSERT_TRUE(follower.WaitForPosition(1500));
    first.Cancel();
    EXPECT_EQ(first.Wait().code(), absl::StatusCode::kCancelled);
  }
  const uint64_t stopped_at = follower.position();
  Watch second(shard_->stub(), WatchFrom(follower.stream_id(), stopped_at), &follower);
  for (std::thread& t : workers) t.join();
  ASSERT_TRUE(pushed[0].ok()) << pushed[0];
  ASSERT_TRUE(pushed[1].ok()) << pushed[1];
  ExpectConverged(follower, "item");
  EXPECT_GT(follower.position(), stopped_at);
}

// An idle follower gets progress marks that say it is caught up to the watermark.
TEST_F(WatchUpdatesTest, IdleStreamSendsProgressMarks) {
  StartShard();
  ASSERT_TRUE(shard_->CreateTable("item").ok());
  ASSERT_TRUE(PushPattern(*shard_, "item", 1, 20, 50).ok());
  const uint64_t version = *shard_->Version();
  Follower follower;
  Watch watch(shard_->stub(), WatchFrom(0, 0), &follower);
  ASSERT_TRUE(follower.WaitUntil([version](const Follower& f) {
    size_t caught_up = 0;
    for (const v1::UpdateBatch& mark : f.marks()) caught_up += mark.to_version() == version;
    return caught_up >= 3;
  })) << "fewer than 3 progress marks at version "
      << version;
  for (const v1::UpdateBatch& mark : follower.marks()) {
    if (mark.to_version() < version) continue;  // a mark sent while still catching up
    EXPECT_EQ(mark.to_version(), mark.watermark());
    EXPECT_EQ(mark.from_version(), mark.to_version());
    EXPECT_EQ(mark.watermark(), version);
  }
  ExpectConverged(follower, "item");
}

// A SIGKILLed and restarted shard starts a new stream: the old position and the empty
// start both end with OUT_OF_RANGE telling the follower to re-bootstrap.
TEST_F(WatchUpdatesTest, RestartEndsTheStream) {
  StartShard();
  ASSERT_TRUE(shard_->CreateTable("item").ok());
  ASSERT_TRUE(PushPattern(*shard_, "item", 1, 50, 100).ok());
  Follower follower;
  {
    Watch watch(shard_->stub(), WatchFrom(0, 0), &follower);
    ASSERT_TRUE(follower.WaitForPosition(*shard_->Version()));
  }
  ASSERT_TRUE(shard_->Flush().ok());  // the rows and the version survive the crash
  shard_.reset();
  ASSERT_TRUE(process_->Kill().ok());
  process_.reset();
  StartShard();
  for (const v1::WatchUpdatesRequest& request :
       {WatchFrom(follower.stream_id(), follower.position()), WatchFrom(0, 0)}) {
    const absl::Status status = WatchStatus(shard_->stub(), request);
    EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange) << status;
    EXPECT_NE(status.message().find("re-bootstrap"), absl::string_view::npos) << status;
  }
  ExpectNoViolations(follower);
}

// A restore of the shard's own snapshot (same slots) starts a new stream that continues
// the old one at the snapshot's position: a follower bootstrapped from the checkpoint
// resumes there; a follower past it (versions the restore rolled back) must
// re-bootstrap, and so must an open stream.
TEST_F(WatchUpdatesTest, RestoreOfOwnSnapshotContinuesAtTheSnapshot) {
  StartShard();
  absl::StatusOr<v1::TableConfig> table = shard_->CreateTable("item");
  ASSERT_TRUE(table.ok()) << table.status();
  Follower live;
  Watch open(shard_->stub(), WatchFrom(0, 0), &live);
  ASSERT_TRUE(PushPattern(*shard_, "item", 1, 40, 60).ok());
  v1::CheckpointShardRequest checkpoint;
  checkpoint.set_dir(absl::StrCat(dir_, "/ckpt-1"));
  checkpoint.set_name("ckpt-1");
  v1::CheckpointShardResponse written;
  ASSERT_TRUE(shard_->Call(&v1::PsService::Stub::CheckpointShard, checkpoint, &written).ok());
  const v1::ShardSnapshot& snapshot = written.snapshot();
  ASSERT_TRUE(live.WaitForPosition(snapshot.version()));
  EXPECT_EQ(snapshot.stream_id(), live.stream_id());
  ASSERT_TRUE(PushPattern(*shard_, "item", 1, 40, 60, /*first_sequence=*/41).ok());
  ASSERT_TRUE(live.WaitForPosition(*shard_->Version()));

  v1::RestoreShardRequest restore;
  restore.set_attempt(1);
  restore.set_epoch(1);
  restore.set_slot_owners(PackSlotOwners(SlotMap::Even({0}, 1)));
  v1::CheckpointManifest* manifest = restore.add_chain();
  manifest->set_format(1);
  manifest->set_name("ckpt-1");
  manifest->set_epoch(1);
  manifest->set_slot_owners(restore.slot_owners());
  *manifest->add_tables() = *table;
  *manifest->add_shards() = snapshot;
  restore.add_chain_dirs(checkpoint.dir());
  v1::RestoreShardResponse restored;
  const absl::Status status = shard_->Call(&v1::PsService::Stub::RestoreShard, restore, &restored);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(restored.version(), snapshot.version());
  EXPECT_EQ(open.Wait().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(WatchStatus(shard_->stub(), WatchFrom(live.stream_id(), live.position())).code(),
            absl::StatusCode::kOutOfRange);
  ExpectNoViolations(live);

  // Bootstrapped from the checkpoint (the shard's rows right after the restore).
  Follower resumed(snapshot.version());
  absl::StatusOr<Rows> bootstrap = shard_->ExportAll("item");
  ASSERT_TRUE(bootstrap.ok()) << bootstrap.status();
  resumed.Bootstrap("item", *bootstrap);
  Watch watch(shard_->stub(), WatchFrom(snapshot.stream_id(), snapshot.version()), &resumed);
  ASSERT_TRUE(PushPattern(*shard_, "item", 2, 40, 90).ok());
  ExpectConverged(resumed, "item");
  EXPECT_NE(resumed.stream_id(), snapshot.stream_id());
}

// Once the change log dropped versions a follower still needs, its call ends with
// OUT_OF_RANGE instead of skipping them.
TEST_F(WatchUpdatesTest, OverflowedChangeLogIsOutOfRange) {
  // The flag is validated: 0 entries is a usage error (the process exits first).
  EXPECT_FALSE(Process::Start(EMBER_PS_BINARY,
                              {absl::StrCat("--data_dir=", dir_, "/bad"), "--change_log_entries=0"},
                              "listening on ", absl::Seconds(30))
                   .ok());
  StartShard({"--change_log_entries=64"});
  ASSERT_TRUE(shard_->CreateTable("item").ok());
  const uint64_t stream = LearnStreamId();
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(shard_->Push("item", {static_cast<uint64_t>(i % 97)}, 1, i + 1).ok());
  }
  const absl::Status status = WatchStatus(shard_->stub(), WatchFrom(0, 0));
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange) << status;
  EXPECT_NE(status.message().find("re-bootstrap"), absl::string_view::npos) << status;
  // A follower within the retained versions still reads them.
  const uint64_t version = *shard_->Version();
  Follower recent(version - 10);
  Watch watch(shard_->stub(), WatchFrom(stream, version - 10), &recent);
  EXPECT_TRUE(recent.WaitForPosition(version));
  ExpectNoViolations(recent);
}

TEST_F(WatchUpdatesTest, BadPositionsAndTables) {
  StartShard();
  ASSERT_TRUE(shard_->CreateTable("item").ok());
  ASSERT_TRUE(shard_->CreateTable("user").ok());
  const uint64_t stream = LearnStreamId();
  ASSERT_TRUE(PushPattern(*shard_, "item", 1, 30, 40).ok());
  ASSERT_TRUE(PushPattern(*shard_, "user", 2, 30, 40).ok());
  ASSERT_TRUE(PushPattern(*shard_, "item", 1, 30, 40, /*first_sequence=*/31).ok());
  const uint64_t version = *shard_->Version();

  EXPECT_EQ(WatchStatus(shard_->stub(), WatchFrom(stream, version + 1)).code(),
            absl::StatusCode::kInvalidArgument);
  v1::WatchUpdatesRequest unknown = WatchFrom(stream, 0);
  unknown.add_tables("user");
  unknown.add_tables("nope");
  EXPECT_EQ(WatchStatus(shard_->stub(), unknown).code(), absl::StatusCode::kNotFound);
  // A position on a stream the shard never had.
  EXPECT_EQ(WatchStatus(shard_->stub(), WatchFrom(stream ^ 1, 0)).code(),
            absl::StatusCode::kOutOfRange);

  // A table filter: only that table's rows, still one contiguous stream.
  v1::WatchUpdatesRequest users = WatchFrom(stream, 0);
  users.add_tables("user");
  Follower follower(0, {"user"});
  Watch watch(shard_->stub(), users, &follower);
  ExpectConverged(follower, "user");
  EXPECT_TRUE(follower.rows("item").empty());
}

// stop_when_caught_up: a bounded export that ends with OK once it reached the
// watermark the shard had when the call began.
TEST_F(WatchUpdatesTest, StopWhenCaughtUpEndsWithOk) {
  StartShard();
  ASSERT_TRUE(shard_->CreateTable("item").ok());
  // 20 ids: every message of 64 changes names some ids several times (coalesced).
  ASSERT_TRUE(PushPattern(*shard_, "item", 1, 200, 20).ok());
  const uint64_t version = *shard_->Version();
  v1::WatchUpdatesRequest request = WatchFrom(0, 0);
  request.set_stop_when_caught_up(true);
  request.set_max_rows(64);  // several messages
  Follower follower;
  Watch watch(shard_->stub(), request, &follower);
  const absl::Status status = watch.Wait();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_GE(follower.position(), version);
  EXPECT_GT(follower.messages(), 1u);
  ExpectConverged(follower, "item");
}

// SIGTERM with a stream open: the stream ends UNAVAILABLE and the shard exits 0 (an
// open stream must not hold the shutdown until the grace period kills it).
TEST_F(WatchUpdatesTest, ShutdownEndsOpenStreams) {
  StartShard({"--shutdown_grace_ms=60000"});
  ASSERT_TRUE(shard_->CreateTable("item").ok());
  Follower follower;
  Watch watch(shard_->stub(), WatchFrom(0, 0), &follower);
  ASSERT_TRUE(follower.WaitUntil([](const Follower& f) { return f.messages() > 0; }));
  // Stop's grace is well below --shutdown_grace_ms: a shard held by the stream is
  // SIGKILLed (exit code 137), not given the minute.
  absl::StatusOr<int> code = process_->Stop(absl::Seconds(20));
  process_.reset();
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  const absl::Status status = watch.Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  ExpectNoViolations(follower);
}

// A follower that stopped reading holds a write the shard cannot complete (HTTP/2
// flow control): shutdown cancels it rather than wait out the grace period.
TEST_F(WatchUpdatesTest, ShutdownEndsTheStreamOfAStalledFollower) {
  StartShard({"--shutdown_grace_ms=60000"});
  constexpr uint32_t kWideDim = 256;
  constexpr uint64_t kRows = 4000;  // 4 MB of rows, in 0.5 MB messages
  ASSERT_TRUE(shard_->CreateTable("wide", kWideDim).ok());
  std::vector<uint64_t> ids(kRows);
  for (uint64_t i = 0; i < kRows; ++i) ids[i] = i;
  ASSERT_TRUE(shard_->Push("wide", ids, 1, 1, kWideDim).ok());

  // A small receive window and no BDP growth: the shard can send ~64 KB past what the
  // follower read.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 << 10);
  std::unique_ptr<v1::PsService::Stub> stub = v1::PsService::NewStub(
      grpc::CreateCustomChannel(process_->ready_text(), grpc::InsecureChannelCredentials(), args));
  v1::WatchUpdatesRequest request = WatchFrom(0, 0);
  request.set_max_rows(500);
  grpc::ClientContext context;
  SetDeadline(&context, kStreamDeadline);
  std::unique_ptr<grpc::ClientReader<v1::UpdateBatch>> reader =
      stub->WatchUpdates(&context, request);
  v1::UpdateBatch first;
  ASSERT_TRUE(reader->Read(&first));  // the stream runs; from here the follower stalls
  EXPECT_EQ(first.blocks_size(), 1);
  absl::StatusOr<int> code = process_->Stop(absl::Seconds(20));
  process_.reset();
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << "the stalled stream held the shutdown";
  context.TryCancel();
  while (reader->Read(&first)) {
  }
  EXPECT_FALSE(reader->Finish().ok());
}

// ---------------------------------------------------------------- Tombstones

// Eviction has no RPC: an in-process service over a store the test evicts directly.
TEST(WatchUpdatesInProcessTest, EvictedRowsArriveAsTombstones) {
  absl::StatusOr<std::unique_ptr<EmbeddingStore>> store =
      EmbeddingStore::Open(StoreOptions{}, std::make_unique<InMemoryBackend>());
  ASSERT_TRUE(store.ok()) << store.status();
  PsServiceImpl service(store->get(), 0, SlotMap::Even({0}, 1));
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  Shard shard(absl::StrCat("127.0.0.1:", port));

  v1::TableConfig config;
  config.set_name("item");
  config.set_dim(kDim);
  config.mutable_eviction()->set_ttl_steps(10);
  ASSERT_TRUE((*store)->CreateTable(config).ok());
  std::vector<uint64_t> stale(20), fresh(20);
  for (uint64_t i = 0; i < 20; ++i) stale[i] = i, fresh[i] = 100 + i;
  ASSERT_TRUE((*store)->Push("item", stale, std::vector<float>(20 * kDim, 0.5f), 1).ok());
  ASSERT_TRUE((*store)->Push("item", fresh, std::vector<float>(20 * kDim, 0.5f), 30).ok());
  {
    Follower follower;
    Watch watch(shard.stub(), WatchFrom(0, 0), &follower);
    ASSERT_TRUE(follower.WaitForPosition((*store)->version()));
    EXPECT_EQ(follower.rows("item").size(), 40u);
    absl::StatusOr<EvictionReport> evicted = (*store)->Evict(/*current_step=*/35);
    ASSERT_TRUE(evicted.ok()) << evicted.status();
    ASSERT_EQ(evicted->rows_removed, 20u);
    ASSERT_TRUE(follower.WaitForPosition((*store)->version()));
    EXPECT_EQ(follower.tombstones("item"), std::set<uint64_t>(stale.begin(), stale.end()));
    const Rows rows = follower.rows("item");
    EXPECT_EQ(rows.size(), 20u);
    for (uint64_t id : fresh) EXPECT_TRUE(rows.contains(id)) << id;
    absl::StatusOr<Rows> exported = shard.ExportAll("item");
    ASSERT_TRUE(exported.ok()) << exported.status();
    EXPECT_TRUE(rows == *exported);
    ExpectNoViolations(follower);
  }
  service.StopWatches();
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
}

}  // namespace
}  // namespace ember
