// Copyright 2026 The Ember Authors.

#include "tools/bench/cluster_fixtures.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "common/slot.h"
#include "common/slot_map.h"
#include "server/store/row_layout.h"

namespace ember::bench::cluster {

absl::Status InFlightRing::Step() {
  while (in_flight_ < depth_) {
    // Slots fill in order from the oldest, so they complete in start order.
    const absl::Status s = pipeline_->Start((oldest_ + in_flight_) % depth_);
    if (!s.ok()) return s;
    ++in_flight_;
  }
  const size_t slot = oldest_;
  oldest_ = (oldest_ + 1) % depth_;
  --in_flight_;
  return pipeline_->Finish(slot);
}

absl::Status InFlightRing::Drain() {
  absl::Status first;
  while (in_flight_ > 0) {
    first.Update(pipeline_->Finish(oldest_));
    oldest_ = (oldest_ + 1) % depth_;
    --in_flight_;
  }
  return first;
}

PsPullPipeline::PsPullPipeline(PsClient* client, std::string table, size_t dim,
                               const std::vector<uint64_t>* pool, size_t batch, size_t slots)
    : client_(client),
      table_(std::move(table)),
      stream_(pool, batch),
      out_(slots, std::vector<float>(batch * dim)),
      handles_(slots) {}

absl::Status PsPullPipeline::Start(size_t slot) {
  handles_[slot] = client_->PullAsync(table_, stream_.Next(), absl::MakeSpan(out_[slot]));
  return absl::OkStatus();  // errors surface in Wait
}

PsPushPipeline::PsPushPipeline(PsClient* client, std::string table,
                               const std::vector<uint64_t>* pool, size_t batch,
                               absl::Span<const float> grads, size_t slots)
    : client_(client),
      table_(std::move(table)),
      stream_(pool, batch),
      grads_(grads),
      handles_(slots) {}

absl::Status PsPushPipeline::Start(size_t slot) {
  handles_[slot] = client_->PushAsync(table_, stream_.Next(), grads_, ++step_);
  return absl::OkStatus();
}

RedisMgetPipeline::RedisMgetPipeline(RedisConnection* conn, uint64_t table_seed,
                                     const std::vector<uint64_t>* pool, size_t batch,
                                     size_t value_bytes, size_t slots)
    : conn_(conn),
      table_seed_(table_seed),
      stream_(pool, batch),
      batch_(batch),
      value_bytes_(value_bytes),
      keys_(batch, std::string(kRowKeySize, '\0')),
      out_(slots, std::vector<char>(batch * value_bytes)) {}

absl::Status RedisMgetPipeline::Start(size_t slot) {
  // The keys are encoded per call, as a client holding ids would (10-byte keys stay
  // in the strings' inline storage: no allocation).
  absl::Span<const uint64_t> ids = stream_.Next();
  for (size_t i = 0; i < ids.size(); ++i) {
    EncodeRowKey(SlotOf(table_seed_, ids[i]), ids[i], keys_[i].data());
  }
  return conn_->SendMget(keys_);
}

absl::Status RedisMgetPipeline::Finish(size_t slot) {
  return conn_->ReadMget(batch_, value_bytes_, absl::MakeSpan(out_[slot]));
}

std::string RedisRowKey(uint64_t table_seed, uint64_t id) {
  return RowKey(SlotOf(table_seed, id), id);
}

absl::StatusOr<std::unique_ptr<PsClient>> SingleShardClient(
    const std::string& address, std::shared_ptr<grpc::ChannelCredentials> credentials) {
  PsClientOptions options;
  options.shard_addresses = {{0, address}};
  options.slot_map = SlotMap::Even({0}, /*epoch=*/1);
  options.worker_id = 1;
  options.channel_credentials = std::move(credentials);
  return PsClient::Create(options);
}

absl::Status PopulateRows(PsClient& client, const std::string& table, int64_t rows, size_t batch,
                          absl::Span<const float> grads) {
  const size_t dim = grads.size() / batch;
  std::vector<uint64_t> ids;
  for (int64_t first = 0; first < rows; first += static_cast<int64_t>(batch)) {
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(batch), rows - first);
    ids.resize(n);
    for (int64_t i = 0; i < n; ++i) ids[i] = first + i;
    absl::Status pushed = client.Push(table, ids, grads.subspan(0, n * dim), /*step=*/0);
    if (!pushed.ok()) return pushed;
  }
  return absl::OkStatus();
}

std::string ExecutableDir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

}  // namespace ember::bench::cluster
