// Copyright 2026 The Ember Authors.
//
// Fuzz target: the serving side. A Follower (server/serving/follower.h) opened on a
// RocksDB of its own, without its control loop, is fed PS update-stream messages
// (ps.proto UpdateBatch) through Follower::Apply, the code every stream message of
// every shard passes through: RowBlock decoding, the position rules, slot resyncs and
// their sweeps, the epoch filter and the store import. Between messages the input
// calls ember-serving's handlers (ServingServiceImpl: Lookup, GetServingStatus,
// ListModelVersions, PinModelVersion, GetDenseParameters, Checksum) through a real
// gRPC server in this process (an in-process channel), and may persist the
// follower's positions.
//
// Input: a sequence of operations, chosen by an operation byte:
//   op % 4 == 0  a raw UpdateBatch for shard (op >> 2) & 1: [len u16][bytes]; with the
//                high bit its from_version is set to the shard's position, so that the
//                rest of the message is checked too.
//   op % 4 == 1  a well-formed UpdateBatch built from the bytes that follow (position,
//                versions, epoch, resync flags and rows of the two tables, an unknown
//                table, tombstones, rows of the wrong length, fuzzed row metadata).
//   op % 4 == 2  a serving RPC, (op >> 2) % 6: [len u8][request bytes]; the high bit
//                drops the call's deadline (and the admin token of PinModelVersion).
//   op % 4 == 3  op == 3: PersistState, which must succeed; otherwise a Lookup of id
//                op >> 2 in each table straight from the follower.
// The follower lives for the whole run, its state carried from input to input.
// Invariants: no crash or sanitizer finding; Apply answers OK, DATA_LOSS,
// INVALID_ARGUMENT or UNAVAILABLE (an unknown table), never anything else; an applied
// message moves the shard's position to (its stream, its to_version) and a refused
// one leaves it; every row an applied message carries (its last copy per id, unless
// a newer resync of its slot filtered it) is then served by Lookup exactly: the
// embedding bits of the row, or "unknown" for a tombstone; no serving handler answers
// INTERNAL or UNKNOWN.

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/admin_auth.h"
#include "common/slot.h"
#include "ember/v1/serving.grpc.pb.h"
#include "google/protobuf/stubs/logging.h"
#include "grpcpp/grpcpp.h"
#include "server/serving/follower.h"
#include "server/serving/serving_service.h"
#include "server/shared/row_block.h"
#include "server/store/row_layout.h"
#include "server/store/table_config.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/support/follower_test_peer.h"

namespace {

using namespace ember;  // NOLINT: a fuzz target's whole job is this one namespace

constexpr char kToken[] = "fuzz-admin-token";
constexpr const char* kTables[] = {"item", "user", "nope"};  // "nope" is not in the map

struct Harness {
  Harness() {
    google::protobuf::SetLogHandler(nullptr);
    dir = ProcessScratchDir("serving-fuzz");
    std::filesystem::create_directories(dir / "checkpoints");
    FollowerOptions options;
    options.coordinator = "127.0.0.1:1";  // a closed port: the map refresh fails at once
    options.checkpoint_root = (dir / "checkpoints").string();
    options.data_dir = (dir / "follower").string();
    options.memory_budget_bytes = 1 << 20;  // small: rows go to RocksDB and back
    options.max_batch_keys = 64;
    absl::StatusOr<std::unique_ptr<Follower>> opened = FollowerTestPeer::Open(options);
    FUZZ_CHECK(opened.ok());
    follower = *std::move(opened);
    v1::TableConfig item;
    item.set_name("item");
    item.set_dim(4);
    v1::TableConfig user;
    user.set_name("user");
    user.set_dim(3);
    user.mutable_optimizer()->set_kind(v1::OptimizerConfig::ADAGRAD);
    FUZZ_CHECK(FollowerTestPeer::AddTable(*follower, item).ok());
    FUZZ_CHECK(FollowerTestPeer::AddTable(*follower, user).ok());
    for (int t = 0; t < 2; ++t) {
      const absl::StatusOr<v1::TableConfig> table = FollowerTestPeer::Table(*follower, kTables[t]);
      FUZZ_CHECK(table.ok());
      const v1::TableConfig& config = *table;
      seeds[t] = config.seed();
      dims[t] = config.dim();
      row_bytes[t] =
          RowBytes(config.dim() + OptimizerStateFloats(config.optimizer(), config.dim()));
    }
    FollowerTestPeer::AddShard(*follower, 0);
    FollowerTestPeer::AddShard(*follower, 1);
    service =
        std::make_unique<ServingServiceImpl>(follower.get(), nullptr, AdminPolicy{kToken, {}});
    grpc::ServerBuilder builder;
    builder.RegisterService(service.get());
    server = builder.BuildAndStart();
    FUZZ_CHECK(server != nullptr);
    stub = v1::ServingService::NewStub(server->InProcessChannel(grpc::ChannelArguments()));
  }

  std::filesystem::path dir;
  std::unique_ptr<Follower> follower;
  uint64_t seeds[2] = {0, 0};
  uint32_t dims[2] = {0, 0};
  size_t row_bytes[2] = {0, 0};
  std::unique_ptr<ServingServiceImpl> service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1::ServingService::Stub> stub;
};

// Reads bytes off the input; past its end every read gives 0.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return at_ >= size_; }
  uint8_t U8() { return at_ < size_ ? data_[at_++] : 0; }
  uint16_t U16() { return static_cast<uint16_t>(U8() | (U8() << 8)); }
  std::string Bytes(size_t n) {
    n = std::min(n, size_ - std::min(at_, size_));
    std::string out(reinterpret_cast<const char*>(data_ + at_), n);
    at_ += n;
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

// A row the input asked for, and what Lookup must answer for it once applied.
struct SentRow {
  int table;
  uint64_t id;
  std::string value;  // empty: a tombstone
};

v1::UpdateBatch BuildBatch(Harness& h, uint32_t shard, Reader& in, std::vector<SentRow>* sent) {
  const auto [stream, version] = FollowerTestPeer::Position(*h.follower, shard);
  const uint8_t flags = in.U8();
  v1::UpdateBatch batch;
  batch.set_shard_id(shard);
  batch.set_stream_id((flags & 0x10) ? in.U8() : stream);
  batch.set_from_version((flags & 0x01) ? version : in.U8());
  // Mostly forwards; a delta below 16 runs the range backwards.
  batch.set_to_version(batch.from_version() + in.U8() - 16);
  batch.set_watermark(batch.to_version() + in.U8());
  batch.set_to_commit_unix_micros((flags & 0x20) ? 1'700'000'000'000'000 : 0);
  batch.set_epoch(in.U8());
  if (flags & 0x02) {
    batch.mutable_resync()->set_first(in.U16());
    batch.mutable_resync()->set_last(in.U16());
    batch.set_resync_done(flags & 0x04);
    batch.set_resync_sweep(flags & 0x08);
  }
  std::map<int, std::vector<EncodedRow>> blocks;
  const int rows = in.U8() % 16;
  for (int r = 0; r < rows; ++r) {
    const uint8_t kind = in.U8();
    const int table = kind % 3;
    const uint64_t id = in.U8() | (static_cast<uint64_t>(kind & 0x80) << 1);  // 512 ids: collisions
    std::string value;
    switch ((kind >> 2) % 4) {
      case 0:  // a tombstone
        break;
      case 1:  // a wrong length
        value = in.Bytes(in.U8() % 96);
        break;
      default: {  // a whole row: fuzzed metadata, then embedding and state bits
        const size_t bytes = table < 2 ? h.row_bytes[table] : 40;
        value = in.Bytes(bytes);
        value.resize(bytes, static_cast<char>(id));
      }
    }
    blocks[table].push_back({id, value});
    sent->push_back({table, id, value});
  }
  for (auto& [table, encoded] : blocks) {
    v1::RowBlock* block = batch.add_blocks();
    block->set_table(kTables[table]);
    AppendRows(encoded, block);
  }
  return batch;
}

void CheckApplied(Harness& h, uint32_t shard, const v1::UpdateBatch& batch,
                  std::pair<uint64_t, uint64_t> before, const absl::Status& status,
                  const std::vector<SentRow>& sent) {
  FUZZ_CHECK(status.ok() || absl::IsDataLoss(status) || absl::IsInvalidArgument(status) ||
             absl::IsUnavailable(status));
  const auto after = FollowerTestPeer::Position(*h.follower, shard);
  if (!status.ok()) {
    FUZZ_CHECK(after == before);
    return;
  }
  FUZZ_CHECK(batch.to_version() >= batch.from_version());
  FUZZ_CHECK(after.first == batch.stream_id() && after.second == batch.to_version());
  // The last copy of each row is what the follower serves.
  std::map<std::pair<int, uint64_t>, const SentRow*> last;
  for (const SentRow& row : sent) last[{row.table, row.id}] = &row;
  for (const auto& [key, row] : last) {
    if (row->table >= 2) continue;  // an applied message had no unknown table
    const uint32_t slot = SlotOf(h.seeds[row->table], row->id);
    if (FollowerTestPeer::SlotEpoch(*h.follower, slot) > batch.epoch()) continue;  // filtered
    std::vector<float> out;
    const uint64_t ids[] = {row->id};
    absl::StatusOr<uint32_t> unknown = h.follower->Lookup(kTables[row->table], ids, &out, nullptr);
    FUZZ_CHECK(unknown.ok());
    if (row->value.empty()) {
      FUZZ_CHECK(*unknown == 1);
      continue;
    }
    FUZZ_CHECK(*unknown == 0);
    FUZZ_CHECK(out.size() == h.dims[row->table]);
    FUZZ_CHECK(std::memcmp(out.data(), row->value.data() + sizeof(RowMeta),
                           out.size() * sizeof(float)) == 0);
  }
}

void CheckRpc(const grpc::Status& status) {
  FUZZ_CHECK(status.error_code() != grpc::StatusCode::INTERNAL);
  FUZZ_CHECK(status.error_code() != grpc::StatusCode::UNKNOWN);
}

#define EMBER_FUZZ_SERVING_CALL(Method, Request, Response)  \
  {                                                         \
    v1::Request request;                                    \
    if (!request.ParseFromString(bytes)) break;             \
    v1::Response response;                                  \
    CheckRpc(h.stub->Method(&context, request, &response)); \
    break;                                                  \
  }

void CallServing(Harness& h, uint8_t op, const std::string& bytes) {
  const bool plain = (op & 0x80) == 0;
  grpc::ClientContext context;
  if (plain) {
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    context.AddMetadata(kAdminTokenMetadataKey, kToken);
  }
  switch (((op & 0x7f) >> 2) % 6) {
    case 0:
      EMBER_FUZZ_SERVING_CALL(Lookup, LookupRequest, LookupResponse)
    case 1:
      EMBER_FUZZ_SERVING_CALL(GetServingStatus, GetServingStatusRequest, ServingStatus)
    case 2:
      EMBER_FUZZ_SERVING_CALL(ListModelVersions, ListModelVersionsRequest,
                              ListModelVersionsResponse)
    case 3:
      EMBER_FUZZ_SERVING_CALL(PinModelVersion, PinModelVersionRequest, PinModelVersionResponse)
    case 4:
      EMBER_FUZZ_SERVING_CALL(GetDenseParameters, GetDenseParametersRequest,
                              GetDenseParametersResponse)
    case 5:
      EMBER_FUZZ_SERVING_CALL(Checksum, ChecksumRequest, ChecksumResponse)
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Harness* const h = new Harness();  // one per process, never destroyed
  Reader in(data, size);
  for (int ops = 0; ops < 16 && !in.done(); ++ops) {
    const uint8_t op = in.U8();
    switch (op % 4) {
      case 0: {
        const uint32_t shard = (op >> 2) & 1;
        v1::UpdateBatch batch;
        if (!batch.ParseFromString(in.Bytes(in.U16() % 4096))) break;
        const auto before = FollowerTestPeer::Position(*h->follower, shard);
        if (op & 0x80) batch.set_from_version(before.second);
        const absl::Status status = FollowerTestPeer::Apply(*h->follower, shard, batch);
        CheckApplied(*h, shard, batch, before, status, {});
        break;
      }
      case 1: {
        const uint32_t shard = (op >> 2) & 1;
        std::vector<SentRow> sent;
        const auto before = FollowerTestPeer::Position(*h->follower, shard);
        const v1::UpdateBatch batch = BuildBatch(*h, shard, in, &sent);
        const absl::Status status = FollowerTestPeer::Apply(*h->follower, shard, batch);
        CheckApplied(*h, shard, batch, before, status, sent);
        break;
      }
      case 2:
        CallServing(*h, op, in.Bytes(in.U8()));
        break;
      case 3:
        if (op == 3) {
          FUZZ_CHECK(FollowerTestPeer::Persist(*h->follower).ok());
        } else {  // a Lookup past gRPC: each table, one id
          for (const char* table : {kTables[0], kTables[1]}) {
            std::vector<float> out;
            const uint64_t ids[] = {static_cast<uint64_t>(op >> 2)};
            FUZZ_CHECK(h->follower->Lookup(table, ids, &out, nullptr).ok());
          }
        }
        break;
    }
  }
  // The follower still serves (a checksum of each table reads every row: every 64th
  // input, to keep the run fast).
  static uint64_t inputs = 0;
  if (inputs++ % 64 == 0) {
    v1::ChecksumRequest request;
    v1::ChecksumResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    FUZZ_CHECK(h->stub->Checksum(&context, request, &response).ok());
    FUZZ_CHECK(response.tables_size() == 2);
  }
  return 0;
}
