// Copyright 2026 The Ember Authors.
//
// Fuzz target: the PS shard's RPC handlers (server/ps/ps_service.h), driven in-process
// with arbitrary request bytes, as a client on the network can send them. Each input
// is a fresh shard (in-memory store, table "t" of dim 4 with a few rows) and a
// sequence of calls, each encoded as [method byte][length byte][length bytes of
// request proto]. Requests that do not parse are skipped (gRPC would reject them).
// Invariants: no crash or sanitizer finding; no handler answers INTERNAL or UNKNOWN
// (bad input must get a clear error); afterwards the shard still serves a checksum
// and a pull of known ids.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/float16.h"
#include "common/slot_map.h"
#include "ember/v1/ps.pb.h"
#include "google/protobuf/stubs/logging.h"
#include "server/ps/ps_service.h"
#include "server/store/embedding_store.h"
#include "server/store/in_memory_backend.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using namespace ember;  // NOLINT: a fuzz target's whole job is this one namespace

template <typename Request>
bool Decode(const uint8_t* data, size_t size, Request* request) {
  return request->ParseFromArray(data, static_cast<int>(size));
}

void CheckStatus(const absl::Status& status) {
  FUZZ_CHECK(status.code() != absl::StatusCode::kInternal);
  FUZZ_CHECK(status.code() != absl::StatusCode::kUnknown);
}

std::string PackIds(const std::vector<uint64_t>& ids) {
  return std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(uint64_t));
}

// One call of method `method % 12` with the request in [data, data + size).
void CallOne(PsServiceImpl& service, uint8_t method, const uint8_t* data, size_t size) {
  switch (method % 12) {
    case 0: {
      v1::PullRequest r;
      v1::PullResponse out;
      if (Decode(data, size, &r)) CheckStatus(service.DoPull(r, &out));
      break;
    }
    case 1: {
      v1::PushRequest r;
      v1::PushResponse out;
      if (Decode(data, size, &r)) CheckStatus(service.DoPush(r, &out));
      break;
    }
    case 2: {
      v1::CreateTableRequest r;
      v1::CreateTableResponse out;
      if (Decode(data, size, &r)) CheckStatus(service.DoCreateTable(r, &out));
      break;
    }
    case 3: {
      v1::ChecksumRequest r;
      v1::ChecksumResponse out;
      if (Decode(data, size, &r)) CheckStatus(service.DoChecksum(r, &out));
      break;
    }
    case 4: {
      v1::ExportRowsRequest r;
      v1::ExportRowsResponse out;
      if (Decode(data, size, &r)) CheckStatus(service.DoExportRows(r, &out));
      break;
    }
    case 5: {
      v1::ExportChangesRequest r;
      v1::ExportChangesResponse out;
      if (Decode(data, size, &r)) CheckStatus(service.DoExportChanges(r, &out));
      break;
    }
    case 6: {
      v1::ImportRowsRequest r;
      v1::ImportRowsResponse out;
      if (Decode(data, size, &r)) CheckStatus(service.DoImportRows(r, &out));
      break;
    }
    case 7: {
      v1::FenceSlotsRequest r;
      v1::FenceSlotsResponse out;
      if (Decode(data, size, &r)) CheckStatus(service.DoFenceSlots(r, &out));
      break;
    }
    case 8: {
      v1::DropSlotsRequest r;
      v1::DropSlotsResponse out;
      if (Decode(data, size, &r)) CheckStatus(service.DoDropSlots(r, &out));
      break;
    }
    case 9: {
      v1::InstallSlotMapRequest r;
      v1::InstallSlotMapResponse out;
      if (Decode(data, size, &r)) CheckStatus(service.DoInstallSlotMap(r, &out));
      break;
    }
    case 10: {
      v1::PutReplicasRequest r;
      v1::PutReplicasResponse out;
      if (Decode(data, size, &r)) CheckStatus(service.DoPutReplicas(r, &out));
      break;
    }
    case 11: {
      v1::GetShardInfoResponse out;
      CheckStatus(service.DoGetShardInfo(v1::GetShardInfoRequest(), &out));
      break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Requests that do not parse are expected here; protobuf's log of each is noise.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  StoreOptions options;
  options.change_log_capacity = 4096;  // the default 1M entries (32 MB) per input is slow
  absl::StatusOr<std::unique_ptr<EmbeddingStore>> store =
      EmbeddingStore::Open(options, std::make_unique<InMemoryBackend>());
  FUZZ_CHECK(store.ok());
  PsServiceImpl service(store->get(), 0, SlotMap::Even({0}, 1));
  v1::CreateTableRequest create;
  create.mutable_config()->set_name("t");
  create.mutable_config()->set_dim(4);
  v1::CreateTableResponse created;
  FUZZ_CHECK(service.DoCreateTable(create, &created).ok());
  const std::vector<uint64_t> known = {1, 2, 3, 1000, 1ull << 40};
  v1::PushRequest seed;
  seed.set_table("t");
  seed.set_ids(PackIds(known));
  seed.set_epoch(1);
  seed.set_worker_id(1);
  seed.set_sequence(1);
  AppendFloat32Bytes(std::vector<float>(known.size() * 4, 0.5f), seed.mutable_grads());
  v1::PushResponse pushed;
  FUZZ_CHECK(service.DoPush(seed, &pushed).ok());

  size_t at = 0;
  while (at + 2 <= size) {
    const uint8_t method = data[at];
    const size_t length = std::min<size_t>(data[at + 1], size - at - 2);
    CallOne(service, method, data + at + 2, length);
    at += 2 + length;
  }

  v1::ChecksumResponse sum;
  CheckStatus(service.DoChecksum(v1::ChecksumRequest(), &sum));
  v1::PullRequest pull;
  pull.set_table("t");
  pull.set_ids(PackIds(known));
  v1::PullResponse rows;
  CheckStatus(service.DoPull(pull, &rows));
  return 0;
}
