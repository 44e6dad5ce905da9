// Copyright 2026 The Ember Authors.
//
// WatchUpdates: the shard's update stream (ps.proto). One producer thread per open
// stream reads the change log after the stream's position, coalesces the changed rows,
// reads their current values and writes one message at a time (the next read waits for
// the previous write, so a slow follower slows only its own stream; the change log
// keeps what it has not read yet, up to its capacity).

#include <algorithm>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/slot.h"
#include "common/status_macros.h"
#include "server/ps/ps_service.h"
#include "server/shared/row_block.h"
#include "server/shared/slot_owners.h"

namespace ember {
namespace {

constexpr uint32_t kDefaultMaxRows = 4096;
constexpr uint32_t kMaxMaxRows = 1 << 16;
constexpr uint32_t kDefaultProgressMs = 200;
// How long one wait for new versions lasts before the producer checks for
// cancellation (it holds the store lock shared meanwhile; a restore waits that long).
constexpr absl::Duration kPollSlice = absl::Milliseconds(20);
// A row of a fenced slot is held back: the producer retries after this long.
constexpr absl::Duration kFenceRetry = absl::Milliseconds(5);
// At shutdown, a write still pending this long after StopWatches (a follower that
// stopped reading) is given up: the call is cancelled.
constexpr absl::Duration kStalledWrite = absl::Milliseconds(200);

}  // namespace

void PsServiceImpl::SetWatchLimits(const WatchLimits& limits) {
  watch_slots_ = std::make_unique<WatchSlots>(limits, shard_id_);
}

void PsServiceImpl::StopWatches() { watches_stopped_.store(true, std::memory_order_release); }

// One open stream. The producer thread owns the loop; gRPC callbacks only signal it.
class PsServiceImpl::WatchReactor final : public grpc::ServerWriteReactor<v1::UpdateBatch> {
 public:
  WatchReactor(PsServiceImpl* service, grpc::CallbackServerContext* context,
               v1::WatchUpdatesRequest request)
      : service_(service), context_(context), request_(std::move(request)) {
    service_->active_watches_.fetch_add(1);
    if (service_->metrics_ != nullptr) service_->metrics_->WatchOpened();
    thread_ = std::thread([this] { Finish(ToGrpcStatus(Run(), context_)); });
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) broken_ = true;
  }
  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    broken_ = true;
  }
  void OnDone() override {
    thread_.join();
    service_->active_watches_.fetch_sub(1);
    if (service_->metrics_ != nullptr) service_->metrics_->WatchClosed();
    delete this;
  }

 private:
  bool Stopped() {
    if (service_->watches_stopped_.load(std::memory_order_acquire)) return true;
    absl::MutexLock lock(&mu_);
    return broken_;
  }

  // Writes `batch` and waits for the write to complete. False: the stream is gone.
  // A follower that stopped reading holds the write until flow control lets it
  // through: at shutdown such a call is cancelled (kStalledWrite), so that it does not
  // hold the shutdown's grace period.
  bool Send(const v1::UpdateBatch& batch) {
    {
      absl::MutexLock lock(&mu_);
      if (broken_) return false;
      writing_ = true;
    }
    StartWrite(&batch);
    auto done = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !writing_ || broken_; };
    absl::Time stopped = absl::InfiniteFuture();  // when this write saw StopWatches
    bool cancelled = false;
    const absl::Time began = absl::Now();
    const absl::Duration stall_timeout = service_->watch_slots_->limits().stall_timeout;
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        if (mu_.AwaitWithTimeout(absl::Condition(&done), kPollSlice)) break;
      }
      // A reader that takes nothing for stall_timeout holds a slot, a thread and the
      // change log's tail for nobody (issue 28 item 1.5): close its stream.
      if (!cancelled && absl::Now() - began >= stall_timeout) {
        stalled_ = true;
        EMBER_LOG(WARNING) << "shard " << service_->shard_id_ << ": closing the update stream of "
                           << context_->peer() << ": its reader took nothing for "
                           << absl::FormatDuration(stall_timeout) << " (--watch_stall_timeout_ms)";
        if (service_->metrics_ != nullptr) service_->metrics_->CountWatchStalled();
        context_->TryCancel();
        cancelled = true;
      }
      if (stopped == absl::InfiniteFuture() &&
          service_->watches_stopped_.load(std::memory_order_acquire)) {
        stopped = absl::Now();
      }
      // Outside mu_: cancelling runs OnCancel, which takes it.
      if (!cancelled && absl::Now() - stopped >= kStalledWrite) {
        context_->TryCancel();
        cancelled = true;
      }
    }
    absl::MutexLock lock(&mu_);
    // A broken stream may still complete the write later: wait for it, since `batch`
    // must outlive it.
    auto written = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !writing_; };
    mu_.Await(absl::Condition(&written));
    return !broken_;
  }

  // What one read produced: the message, or "hold" (a fenced slot; retry shortly).
  struct Read {
    v1::UpdateBatch batch;
    bool hold = false;
  };

  // The next message of the slot resync in progress (resync_): one page of one table's
  // rows of the gained slots, covering no versions; after the last table, the message
  // that covers the marker's version and says whether the follower may sweep.
  absl::StatusOr<Read> ResyncPage(EmbeddingStore& store, uint64_t pos) {
    Read out;
    v1::UpdateBatch& batch = out.batch;
    batch.set_shard_id(service_->shard_id_);
    batch.set_stream_id(stream_);
    batch.set_from_version(pos);
    batch.set_to_version(pos);
    batch.set_watermark(std::max(store.version(), resync_.marker));
    batch.mutable_resync()->set_first(resync_.first);
    batch.mutable_resync()->set_last(resync_.last);
    std::shared_ptr<const SlotMap> map = service_->slot_map();
    batch.set_epoch(map->epoch());
    while (resync_.table < resync_.tables.size()) {
      const std::string& table = resync_.tables[resync_.table];
      EMBER_ASSIGN_OR_RETURN(RowPage page, store.ExportSlotRows(table, resync_.first, resync_.last,
                                                                resync_.cursor, max_rows_));
      resync_.cursor = page.next_cursor;
      if (resync_.cursor.empty()) ++resync_.table;
      if (page.rows.empty()) continue;
      v1::RowBlock* block = batch.add_blocks();
      block->set_table(table);
      AppendRows(page.rows, block);
      return out;
    }
    // Sweep only while the shard still owns the whole range: then every row of it was
    // in the pages. Otherwise the newer owner's resync follows.
    bool owns_all = true;
    for (uint32_t slot = resync_.first; slot <= resync_.last; ++slot) {
      owns_all = owns_all && map->OwnerOf(slot) == service_->shard_id_;
    }
    batch.set_to_version(resync_.marker);
    batch.set_to_commit_unix_micros(resync_.commit_micros);
    batch.set_resync_done(true);
    batch.set_resync_sweep(owns_all);
    resync_ = Resync{};
    return out;
  }

  // A slots-gained marker among `changes`: at their head it starts the resync
  // (resync_) and returns true; further back, the entries before it go first (the
  // rest is cut off) and it returns false.
  bool TakeSlotsGained(ChangeBatch* changes) {
    for (size_t i = 0; i < changes->changes.size(); ++i) {
      const Change& change = changes->changes[i];
      if (change.table != kSlotsGainedMarker) continue;
      if (i == 0) {
        resync_ = Resync{};
        resync_.active = true;
        resync_.first = static_cast<uint32_t>(change.id >> 32);
        resync_.last = static_cast<uint32_t>(change.id & 0xffffffffu);
        resync_.marker = change.version;
        resync_.commit_micros = change.commit_micros;
        for (const std::string& table : changes->table_names) {
          if (tables_.empty() || tables_.contains(table)) resync_.tables.push_back(table);
        }
        return true;
      }
      changes->changes.resize(i);
      break;
    }
    return false;
  }

  // Adds to (*ids)[table] (each id once, in change order) the ids of the watched
  // tables' changes whose slot this shard owns in `map`. Returns true ("hold") at the
  // first such change of a fenced slot. Errors: the store's.
  absl::StatusOr<bool> OwnedIds(EmbeddingStore& store, const ChangeBatch& changes,
                                const SlotMap& map, const SlotSet& fenced,
                                std::vector<std::vector<uint64_t>>* ids) {
    const size_t num_tables = changes.table_names.size();
    std::vector<int> watched(num_tables, -1);  // -1 unknown, 0 no, 1 yes
    std::vector<uint64_t> seeds(num_tables, 0);
    absl::flat_hash_set<std::pair<uint32_t, uint64_t>> seen;
    for (const Change& change : changes.changes) {
      if (change.table >= num_tables) continue;
      int& w = watched[change.table];
      if (w < 0) {
        const std::string& name = changes.table_names[change.table];
        w = tables_.empty() || tables_.contains(name) ? 1 : 0;
        if (w == 1) {
          EMBER_ASSIGN_OR_RETURN(const v1::TableConfig config, store.GetTableConfig(name));
          seeds[change.table] = config.seed();
        }
      }
      if (w == 0) continue;
      const uint32_t slot = SlotOf(seeds[change.table], change.id);
      if (map.OwnerOf(slot) != service_->shard_id_) continue;  // the new owner sends it
      if (fenced[slot]) return true;
      if (seen.insert({change.table, change.id}).second) (*ids)[change.table].push_back(change.id);
    }
    return false;
  }

  absl::StatusOr<Read> ReadNext(uint64_t pos, bool wait) {
    absl::ReaderMutexLock lock(&job_->mu);
    if (job_->stream_id != stream_) return StreamGoneError(service_->shard_id_, stream_, pos);
    EmbeddingStore& store = *job_->store;
    if (wait) store.WaitForVersionAbove(pos, kPollSlice);
    if (resync_.active) return ResyncPage(store, pos);
    EMBER_ASSIGN_OR_RETURN(ChangeBatch changes, store.ReadChanges(pos, max_rows_));
    if (TakeSlotsGained(&changes)) return ResyncPage(store, pos);
    Read out;
    v1::UpdateBatch& batch = out.batch;
    batch.set_shard_id(service_->shard_id_);
    batch.set_stream_id(stream_);
    batch.set_from_version(pos);
    batch.set_watermark(std::max(changes.watermark, pos));
    if (changes.changes.empty()) {
      batch.set_to_version(pos);
      batch.set_epoch(service_->slot_map()->epoch());
      return out;
    }
    batch.set_to_version(changes.changes.back().version);
    batch.set_watermark(std::max(changes.watermark, batch.to_version()));
    batch.set_to_commit_unix_micros(changes.changes.back().commit_micros);

    std::shared_ptr<const SlotMap> map;
    SlotSet fenced;
    {
      absl::MutexLock map_lock(&service_->map_mu_);
      map = service_->slot_map_;
      fenced = service_->fenced_;
    }
    batch.set_epoch(map->epoch());
    const size_t num_tables = changes.table_names.size();
    std::vector<std::vector<uint64_t>> ids(num_tables);
    EMBER_ASSIGN_OR_RETURN(out.hold, OwnedIds(store, changes, *map, fenced, &ids));
    if (out.hold) return out;
    for (size_t t = 0; t < num_tables; ++t) {
      if (ids[t].empty()) continue;
      EMBER_ASSIGN_OR_RETURN(const std::vector<EncodedRow> rows,
                             store.ReadEncodedRows(changes.table_names[t], ids[t]));
      v1::RowBlock* block = batch.add_blocks();
      block->set_table(changes.table_names[t]);
      AppendRows(rows, block);
    }
    return out;
  }

  absl::Status Start() {
    absl::StatusOr<WatchSlots::Slot> slot =
        service_->watch_slots_->Take(PeerAddress(context_->peer()));
    if (!slot.ok()) {
      if (service_->metrics_ != nullptr) service_->metrics_->CountWatchRefused();
      return slot.status();
    }
    slot_ = *std::move(slot);
    max_rows_ =
        request_.max_rows() == 0 ? kDefaultMaxRows : std::min(request_.max_rows(), kMaxMaxRows);
    progress_ =
        absl::Milliseconds(request_.progress_interval_ms() == 0 ? kDefaultProgressMs
                                                                : request_.progress_interval_ms());
    EMBER_ASSIGN_OR_RETURN(job_, service_->FindJob(request_.job()));
    absl::ReaderMutexLock lock(&job_->mu);
    for (const std::string& table : request_.tables()) {
      EMBER_RETURN_IF_ERROR(job_->store->GetTableConfig(table).status());
      tables_.insert(table);
    }
    EMBER_ASSIGN_OR_RETURN(const StreamStart start,
                           job_->ResolveStreamPosition(request_, service_->shard_id_));
    stream_ = start.stream_id;
    pos_ = start.after;
    target_ = job_->store->version();
    return absl::OkStatus();
  }

  absl::Status Run() {
    EMBER_RETURN_IF_ERROR(Start());
    absl::Time last_sent = absl::InfinitePast();
    bool wait = false;
    while (true) {
      if (Stopped()) {
        return absl::UnavailableError(
            absl::StrCat("shard ", service_->shard_id_, " is shutting down or the stream closed"));
      }
      EMBER_ASSIGN_OR_RETURN(Read read, ReadNext(pos_, wait));
      if (read.hold) {
        absl::SleepFor(kFenceRetry);
        wait = false;
        continue;
      }
      const bool moved = read.batch.to_version() > pos_ || read.batch.has_resync();
      const bool caught_up = read.batch.to_version() >= target_ && !resync_.active;
      const bool progress_due = absl::Now() - last_sent >= progress_;
      if (moved || progress_due || (request_.stop_when_caught_up() && caught_up)) {
        if (!Send(read.batch)) {
          if (stalled_) {
            return absl::DeadlineExceededError(
                absl::StrCat("shard ", service_->shard_id_, ": the reader took nothing for ",
                             absl::FormatDuration(service_->watch_slots_->limits().stall_timeout),
                             " (--watch_stall_timeout_ms); stream closed"));
          }
          return absl::CancelledError("the follower went away");
        }
        if (service_->metrics_ != nullptr) {
          uint64_t rows = 0;
          for (const v1::RowBlock& block : read.batch.blocks()) rows += block.count();
          service_->metrics_->CountWatchMessage(rows, read.batch.ByteSizeLong());
        }
        last_sent = absl::Now();
        pos_ = read.batch.to_version();
        if (request_.stop_when_caught_up() && caught_up) return absl::OkStatus();
      }
      // Wait for new versions only when this read found none.
      wait = !moved;
    }
  }

  PsServiceImpl* const service_;
  grpc::CallbackServerContext* const context_;
  const v1::WatchUpdatesRequest request_;
  JobStore* job_ = nullptr;  // the store streamed (Start)
  absl::flat_hash_set<std::string> tables_;
  uint32_t max_rows_ = kDefaultMaxRows;
  absl::Duration progress_;
  uint64_t stream_ = 0;
  uint64_t pos_ = 0;
  uint64_t target_ = 0;  // the watermark when the call began (stop_when_caught_up)
  // A slot resync in progress: the gained range, its marker's version, the tables to
  // send and where the paging stands.
  struct Resync {
    bool active = false;
    uint32_t first = 0, last = 0;
    uint64_t marker = 0;
    int64_t commit_micros = 0;
    std::vector<std::string> tables;
    size_t table = 0;
    std::string cursor;
  };
  Resync resync_;
  WatchSlots::Slot slot_;  // held while the stream runs (Start)
  bool stalled_ = false;   // closed for want of reader progress (Send)

  absl::Mutex mu_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

grpc::ServerWriteReactor<v1::UpdateBatch>* PsServiceImpl::WatchUpdates(
    grpc::CallbackServerContext* context, const v1::WatchUpdatesRequest* request) {
  return new WatchReactor(this, context, *request);
}

}  // namespace ember
