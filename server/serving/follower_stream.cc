// Copyright 2026 The Ember Authors.
//
// Follower: one thread per PS shard reads the shard's update stream and applies each
// message at the shard's position (follower.h has the rules).

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/clip.h"
#include "common/keepalive.h"
#include "common/log.h"
#include "common/slot.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "server/serving/follower.h"
#include "server/shared/row_block.h"
#include "server/store/row_layout.h"

namespace ember {
namespace {

constexpr int kMaxMessageBytes = 256 << 20;
constexpr absl::Duration kMinBackoff = absl::Milliseconds(100);
constexpr absl::Duration kMaxBackoff = absl::Seconds(2);
// After OUT_OF_RANGE the shard waits this long for a bootstrap before it tries its
// stream again (a bootstrap without a newer checkpoint cannot help).
constexpr absl::Duration kBootstrapWait = absl::Seconds(5);
constexpr absl::Duration kStalenessPoll = absl::Milliseconds(50);

struct DecodedBlock {
  std::string table;
  std::vector<EncodedRow> rows;
};

// The newest training step among the rows of `blocks`.
int64_t MaxStep(const std::vector<DecodedBlock>& blocks) {
  int64_t step = 0;
  for (const DecodedBlock& block : blocks) {
    for (const EncodedRow& row : block.rows) {
      if (row.value.size() < sizeof(RowMeta)) continue;
      RowMeta meta;
      std::memcpy(&meta, row.value.data(), sizeof(meta));
      step = std::max(step, meta.last_seen_step);
    }
  }
  return step;
}

// Follower::epoch_mu_ for one Apply: shared, or exclusive for a resync message (which
// calls `waits` first when applies in flight hold it). epoch_mu_ guards no member, so
// the analysis need not follow it.
class EpochLock {
 public:
  template <typename Waits>
  EpochLock(absl::Mutex& mu, bool exclusive, Waits waits) ABSL_NO_THREAD_SAFETY_ANALYSIS
      : mu_(mu),
        exclusive_(exclusive) {
    if (!exclusive_) {
      mu_.ReaderLock();
    } else if (!mu_.TryLock()) {
      waits();
      mu_.Lock();
    }
  }
  ~EpochLock() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (exclusive_) {
      mu_.Unlock();
    } else {
      mu_.ReaderUnlock();
    }
  }
  EpochLock(const EpochLock&) = delete;
  EpochLock& operator=(const EpochLock&) = delete;

 private:
  absl::Mutex& mu_;
  const bool exclusive_;
};

}  // namespace

absl::Status Follower::EnsureTable(const std::string& table) {
  if (storage_->store()->GetTableConfig(table).ok()) return absl::OkStatus();
  v1::TableConfig config;
  {
    absl::MutexLock lock(&mu_);
    auto it = map_tables_.find(table);
    if (it == map_tables_.end()) {
      return absl::UnavailableError(
          absl::StrCat("table '", ClipForMessage(table), "' is not in the cluster map yet"));
    }
    config = it->second;
  }
  return storage_->store()->CreateTable(config);
}

bool Follower::WaitForStaleness(ShardState& shard, uint64_t generation, int64_t batch_step) {
  if (options_.max_staleness_steps == 0) return true;
  absl::MutexLock lock(&mu_);
  while (true) {
    if (stopping_ || generation_ != generation) return false;
    const bool no_dense = dense_.checkpoint.empty();
    const int64_t limit = static_cast<int64_t>(dense_.step + options_.max_staleness_steps);
    if (no_dense || batch_step <= limit) {
      shard.held = false;
      return true;
    }
    shard.held = true;
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), kStalenessPoll);
  }
}

absl::Status Follower::Apply(uint32_t shard_id, uint64_t generation, const v1::UpdateBatch& batch,
                             uint64_t* call_stream) {
  std::vector<DecodedBlock> blocks;
  for (const v1::RowBlock& block : batch.blocks()) {
    EMBER_ASSIGN_OR_RETURN(std::vector<EncodedRow> rows, DecodeRows(block));
    blocks.push_back({block.table(), std::move(rows)});
  }
  ShardState* shard = nullptr;
  {
    absl::MutexLock lock(&mu_);
    shard = shards_.at(shard_id).get();
  }
  // The newest step among the message's rows (before stale rows are left out below:
  // an upper bound of what is applied, which the staleness bound needs).
  const int64_t step = MaxStep(blocks);
  if (!WaitForStaleness(*shard, generation, step)) {
    return absl::AbortedError("stopped or re-bootstrapped while held");
  }

  absl::ReaderMutexLock apply(&apply_mu_);
  absl::ReaderMutexLock store(&store_mu_);
  std::vector<uint64_t> seeds;
  for (const DecodedBlock& block : blocks) {
    EMBER_RETURN_IF_ERROR(EnsureTable(block.table));
    EMBER_ASSIGN_OR_RETURN(const v1::TableConfig config,
                           storage_->store()->GetTableConfig(block.table));
    seeds.push_back(config.seed());
  }
  const bool resync = batch.has_resync();
  // Held until the import (and a resync's sweep) is done: see epoch_mu_.
  EpochLock epoch(epoch_mu_, resync, [&] {
    if (sync_point_) sync_point_("Apply:ResyncWaits", shard_id);
  });
  {
    absl::MutexLock lock(&mu_);
    if (generation_ != generation) return absl::AbortedError("re-bootstrapped");
    EMBER_RETURN_IF_ERROR(CheckPosition(shard_id, *shard, batch, call_stream));
    if (resync) EMBER_RETURN_IF_ERROR(BeginResync(shard_id, *shard, batch));
    // Rows read by a shard at an older epoch than a resync of their slot: stale.
    for (size_t b = 0; b < blocks.size(); ++b) {
      std::vector<EncodedRow>& rows = blocks[b].rows;
      rows.erase(std::remove_if(rows.begin(), rows.end(),
                                [&](const EncodedRow& row) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                                  return slot_epoch_[SlotOf(seeds[b], row.id)] > batch.epoch();
                                }),
                 rows.end());
      if (!resync) continue;
      absl::flat_hash_set<uint64_t>& seen = shard->resync_seen[blocks[b].table];
      for (const EncodedRow& row : rows) seen.insert(row.id);
    }
  }
  if (sync_point_) sync_point_("Apply:Filtered", shard_id);
  uint64_t rows = 0, tombstones = 0;
  for (const DecodedBlock& block : blocks) {
    EMBER_RETURN_IF_ERROR(storage_->store()->ImportRows(block.table, block.rows));
    for (const EncodedRow& row : block.rows) (row.value.empty() ? tombstones : rows) += 1;
  }
  if (resync && batch.resync_done()) {
    if (batch.resync_sweep()) {
      EMBER_ASSIGN_OR_RETURN(const uint64_t removed, SweepResync(*shard));
      tombstones += removed;
    }
    absl::MutexLock lock(&mu_);
    shard->resync_active = false;
    shard->resync_seen.clear();
    shard->resyncs += 1;
  }
  absl::MutexLock lock(&mu_);
  RecordApplied(*shard, batch, rows, tombstones, step);
  return absl::OkStatus();
}

absl::Status Follower::CheckPosition(uint32_t shard_id, const ShardState& shard,
                                     const v1::UpdateBatch& batch, uint64_t* call_stream) {
  // Exactly at the position: the stream the position names (or the one a shard
  // accepted it for: a fresh or restored shard names its new stream) and no gap.
  if (batch.to_version() < batch.from_version()) {
    return absl::DataLossError(absl::StrCat("shard ", shard_id, " sent versions (",
                                            batch.from_version(), ", ", batch.to_version(),
                                            "]: the range runs backwards"));
  }
  if (batch.from_version() != shard.version) {
    return absl::DataLossError(absl::StrCat("shard ", shard_id, " sent versions (",
                                            batch.from_version(), ", ", batch.to_version(),
                                            "] at position ", shard.version));
  }
  if (*call_stream != 0 && batch.stream_id() != *call_stream) {
    return absl::DataLossError(absl::StrCat("shard ", shard_id, " switched streams mid-call"));
  }
  *call_stream = batch.stream_id();
  return absl::OkStatus();
}

absl::Status Follower::BeginResync(uint32_t shard_id, ShardState& shard,
                                   const v1::UpdateBatch& batch) {
  if (shard.resync_active && shard.resync_first == batch.resync().first() &&
      shard.resync_last == batch.resync().last()) {
    return absl::OkStatus();  // the resync under way
  }
  if (batch.resync().last() >= kNumSlots || batch.resync().first() > batch.resync().last()) {
    return absl::DataLossError(absl::StrCat("shard ", shard_id, " resyncs a bad slot range"));
  }
  shard.resync_active = true;
  shard.resync_first = batch.resync().first();
  shard.resync_last = batch.resync().last();
  shard.resync_epoch = batch.epoch();
  shard.resync_seen.clear();
  for (uint32_t slot = shard.resync_first; slot <= shard.resync_last; ++slot) {
    slot_epoch_[slot] = std::max(slot_epoch_[slot], batch.epoch());
  }
  return absl::OkStatus();
}

void Follower::RecordApplied(ShardState& shard, const v1::UpdateBatch& batch, uint64_t rows,
                             uint64_t tombstones, int64_t step) {
  shard.stream_id = batch.stream_id();
  shard.version = batch.to_version();
  shard.watermark = batch.watermark();
  shard.received = true;
  shard.batches += 1;
  shard.rows += rows;
  shard.tombstones += tombstones;
  if (batch.to_version() >= batch.watermark() || batch.to_commit_unix_micros() == 0) {
    shard.lag_seconds = 0;
  } else {
    shard.lag_seconds = std::max(
        0.0,
        absl::ToDoubleSeconds(absl::Now() - absl::FromUnixMicros(batch.to_commit_unix_micros())));
  }
  sparse_step_ = std::max(sparse_step_, step);
}

absl::StatusOr<uint64_t> Follower::SweepResync(const ShardState& shard) {
  EmbeddingStore& store = *storage_->store();
  uint64_t removed = 0;
  for (const std::string& table : store.ListTables()) {
    EMBER_ASSIGN_OR_RETURN(const v1::TableConfig config, store.GetTableConfig(table));
    const auto seen_it = shard.resync_seen.find(table);
    std::vector<EncodedRow> gone;
    std::string cursor;
    do {
      EMBER_ASSIGN_OR_RETURN(RowPage page, store.ExportSlotRows(table, shard.resync_first,
                                                                shard.resync_last, cursor, 4096));
      absl::MutexLock lock(&mu_);
      for (const EncodedRow& row : page.rows) {
        const bool named = seen_it != shard.resync_seen.end() && seen_it->second.contains(row.id);
        // A newer owner resynced the slot since: its rows are not this resync's to drop.
        if (!named && slot_epoch_[SlotOf(config.seed(), row.id)] == shard.resync_epoch) {
          gone.push_back({row.id, ""});
        }
      }
      cursor = page.next_cursor;
    } while (!cursor.empty());
    if (gone.empty()) continue;
    EMBER_RETURN_IF_ERROR(store.ImportRows(table, gone));
    removed += gone.size();
  }
  return removed;
}

bool Follower::NextRequest(uint32_t shard_id, v1::WatchUpdatesRequest* request,
                           uint64_t* generation, std::string* address) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  ShardState& shard = *shards_.at(shard_id);
  *generation = generation_;
  *address = shard.address;
  request->set_stream_id(shard.stream_id);
  request->set_after_version(shard.version);
  request->set_job(tables_job_);
  shard.resync_active = false;  // a resync cut off restarts from its beginning
  shard.resync_seen.clear();
  return true;
}

absl::Status Follower::ApplyStream(uint32_t shard_id, uint64_t generation,
                                   grpc::ClientReader<v1::UpdateBatch>& reader,
                                   grpc::ClientContext& context, absl::Duration* backoff) {
  v1::UpdateBatch batch;
  absl::Status applied;
  bool first = true;
  uint64_t call_stream = 0;
  while (reader.Read(&batch)) {
    if (first) {
      absl::MutexLock lock(&mu_);
      ShardState& shard = *shards_.at(shard_id);
      shard.connected = true;
      shard.last_error.clear();  // the stream works again: the old error is history
      first = false;
      *backoff = kMinBackoff;
    }
    applied = Apply(shard_id, generation, batch, &call_stream);
    if (!applied.ok()) {
      context.TryCancel();
      break;
    }
  }
  return applied;
}

Follower::AfterCall Follower::EndCall(uint32_t shard_id, uint64_t generation,
                                      const absl::Status& applied, const grpc::Status& finished,
                                      absl::Duration backoff) {
  absl::MutexLock lock(&mu_);
  ShardState& shard = *shards_.at(shard_id);
  shard.active = nullptr;
  shard.connected = false;
  if (stopping_) return AfterCall::kStop;
  if (!applied.ok() && !absl::IsAborted(applied)) {
    shard.last_error = applied.ToString();
  } else if (!finished.ok() && finished.error_code() != grpc::StatusCode::CANCELLED) {
    shard.last_error = absl::StrCat(finished.error_code(), ": ", finished.error_message());
  }
  const bool out_of_range = finished.error_code() == grpc::StatusCode::OUT_OF_RANGE;
  if (generation_ != generation) return AfterCall::kRetryNow;  // re-bootstrapped
  shard.reconnects += 1;
  if (out_of_range) {
    EMBER_LOG(WARNING) << "shard " << shard_id << ": " << finished.error_message();
    bootstrap_requested_ = true;
    auto rebootstrapped = [this, generation]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return stopping_ || generation_ != generation;
    };
    mu_.AwaitWithTimeout(absl::Condition(&rebootstrapped), kBootstrapWait);
    return AfterCall::kRetryNow;
  }
  mu_.AwaitWithTimeout(absl::Condition(&stopping_), backoff);
  return AfterCall::kBackoff;
}

void Follower::RunShard(uint32_t shard_id) {
  std::string stub_address;
  std::unique_ptr<v1::PsService::Stub> stub;
  absl::Duration backoff = kMinBackoff;
  while (true) {
    v1::WatchUpdatesRequest request;
    uint64_t generation = 0;
    std::string address;
    if (!NextRequest(shard_id, &request, &generation, &address)) return;
    if (address.empty()) {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), backoff);
      continue;
    }
    if (address != stub_address) {
      grpc::ChannelArguments args;
      args.SetMaxReceiveMessageSize(kMaxMessageBytes);
      SetClientKeepalive(&args);
      stub = v1::PsService::NewStub(
          grpc::CreateCustomChannel(address, OrInsecure(options_.channel_credentials), args));
      stub_address = address;
    }
    request.set_progress_interval_ms(options_.progress_interval_ms);
    request.set_max_rows(options_.max_rows_per_message);

    grpc::ClientContext context;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_ || generation_ != generation) continue;
      shards_.at(shard_id)->active = &context;
    }
    std::unique_ptr<grpc::ClientReader<v1::UpdateBatch>> reader =
        stub->WatchUpdates(&context, request);
    const absl::Status applied = ApplyStream(shard_id, generation, *reader, context, &backoff);
    const grpc::Status finished = reader->Finish();
    switch (EndCall(shard_id, generation, applied, finished, backoff)) {
      case AfterCall::kStop:
        return;
      case AfterCall::kRetryNow:
        continue;
      case AfterCall::kBackoff:
        backoff = std::min(backoff * 2, kMaxBackoff);
        break;
    }
  }
}

}  // namespace ember
