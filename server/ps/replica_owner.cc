// Copyright 2026 The Ember Authors.

#include "server/ps/replica_owner.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "server/ps/ps_metrics.h"

namespace ember {
namespace {

bool Contains(absl::Span<const uint32_t> holders, uint32_t h) {
  return std::find(holders.begin(), holders.end(), h) != holders.end();
}

// The holders of the keys `shard` owns in `view` (none unless replicated).
absl::InlinedVector<uint32_t, 4> HoldersOf(const HotSetView& view, uint32_t shard) {
  const std::vector<uint32_t> holders = view.ReplicaHoldersOf(shard);
  return absl::InlinedVector<uint32_t, 4>(holders.begin(), holders.end());
}

// Counts callbacks of a fan-out; the last one (or the waiter) sees the result.
struct FanIn {
  absl::Mutex mu;
  size_t remaining ABSL_GUARDED_BY(mu) = 0;
  absl::Status error ABSL_GUARDED_BY(mu);  // first failure of a required holder
  std::vector<uint32_t> failed ABSL_GUARDED_BY(mu);
};

// The holders of `shard`'s keys as processes: (shard id, address, incarnation).
std::vector<std::tuple<uint32_t, std::string, uint64_t>> HolderProcesses(const HotSetView& view,
                                                                         uint32_t shard) {
  std::vector<std::tuple<uint32_t, std::string, uint64_t>> out;
  for (uint32_t h : view.ReplicaHoldersOf(shard)) {
    for (const v1::HotSetHolder& holder : view.proto().holders()) {
      if (holder.shard_id() == h) out.emplace_back(h, holder.address(), holder.incarnation());
    }
  }
  return out;
}

}  // namespace

ReplicaOwner::ReplicaOwner(ReplicaHost* host, uint32_t shard_id, uint64_t incarnation,
                           const ReplicaOwnerOptions& options, PsMetrics* metrics)
    : host_(host),
      shard_id_(shard_id),
      incarnation_(incarnation),
      options_(options),
      metrics_(metrics),
      sender_(std::make_unique<ReplicaSender>(
          options.sender,
          [metrics](bool ok, const v1::PutReplicasRequest& request) {
            if (metrics != nullptr) metrics->CountReplicaCopy(ok, request.ids().size() / 8);
          })),
      view_(std::make_shared<const HotSetView>()),
      processed_view_(view_),
      retry_backoff_(options.initial_retry) {}

ReplicaOwner::~ReplicaOwner() { Stop(); }

void ReplicaOwner::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return sending_ == 0; };
    mu_.Await(absl::Condition(&idle));
  }
  if (thread_.joinable()) thread_.join();
  sender_.reset();  // fails pending retries, waits for calls in flight
}

void ReplicaOwner::EnsureThread() {
  if (thread_.joinable() || stopped_) return;
  thread_ = std::thread([this] { Loop(); });
}

bool ReplicaOwner::SetHotSet(std::shared_ptr<const HotSetView> view) {
  absl::MutexLock lock(&mu_);
  if (stopped_ || view->version() <= view_->version()) return false;
  for (const v1::HotSetHolder& holder : view->proto().holders()) {
    addresses_[holder.shard_id()] = holder.address();
  }
  view_ = std::move(view);
  reconcile_ = true;
  wake_ = true;
  EnsureThread();
  return true;
}

std::shared_ptr<const HotSetView> ReplicaOwner::view() const {
  absl::MutexLock lock(&mu_);
  return view_;
}

void ReplicaOwner::RefillAll() {
  absl::MutexLock lock(&mu_);
  if (view_->size() == 0 && records_.empty()) return;
  refill_all_ = true;
  wake_ = true;
  EnsureThread();
}

void ReplicaOwner::MapChanged() {
  absl::MutexLock lock(&mu_);
  if (view_->size() == 0 && records_.empty()) return;
  refill_all_ = true;
  reconcile_ = true;
  wake_ = true;
  EnsureThread();
}

std::string ReplicaOwner::AddressOf(uint32_t holder) const {
  absl::MutexLock lock(&mu_);
  auto it = addresses_.find(holder);
  return it == addresses_.end() ? "" : it->second;
}

std::shared_ptr<v1::PutReplicasRequest> ReplicaOwner::NewRequest(const std::string& table,
                                                                 const HotSetView& view) const {
  auto request = std::make_shared<v1::PutReplicasRequest>();
  request->set_table(table);
  request->set_owner_shard(shard_id_);
  request->set_owner_incarnation(incarnation_);
  request->set_owner_attempt(host_->ReplicaAttempt());
  request->set_step(step_.load(std::memory_order_relaxed));
  request->set_hot_set_version(view.version());
  return request;
}

ReplicaOwner::Holders ReplicaOwner::RecordAndExtra(const std::string& table,
                                                   absl::Span<const uint64_t> ids,
                                                   const Holders& required) {
  Holders extra;
  absl::MutexLock lock(&mu_);
  absl::flat_hash_map<uint64_t, Holders>& records = records_[table];
  for (uint64_t id : ids) {
    Holders& holders = records[id];
    for (uint32_t h : holders) {
      if (!Contains(required, h) && !Contains(extra, h)) extra.push_back(h);
    }
    for (uint32_t h : required) {
      if (!Contains(holders, h)) holders.push_back(h);
    }
  }
  return extra;
}

void ReplicaOwner::AfterPush(const std::string& table, absl::Span<const uint64_t> ids, int64_t step,
                             absl::Time deadline, Done done) {
  int64_t seen = step_.load(std::memory_order_relaxed);
  while (step > seen && !step_.compare_exchange_weak(seen, step)) {
  }
  std::shared_ptr<const HotSetView> view = this->view();
  const absl::flat_hash_set<uint64_t>* hot = view->replicated() ? view->HotKeys(table) : nullptr;
  const bool periodic = view->proto().refresh_interval_ms() > 0;
  std::vector<uint64_t> hot_ids;
  // Synchronous mode: keys that are no longer hot here but may still have a copy at a
  // former holder (its drop not acknowledged yet). A client still on the older hot
  // set may read that copy, so it must get this push too, and the push must wait for
  // it: otherwise the holder serves the value from before the push.
  std::vector<uint64_t> former_ids;
  Holders former_holders;
  SplitPushed(table, ids, hot, /*with_former=*/!periodic, &hot_ids, &former_ids, &former_holders);
  if (hot_ids.empty() && former_ids.empty()) return done(absl::OkStatus());

  if (periodic) {
    absl::MutexLock lock(&mu_);
    if (stopped_) return done(absl::OkStatus());  // periodic: nothing was promised
    if (dirty_.empty()) wake_ = true;             // the loop sets the pass's time
    dirty_[table].insert(hot_ids.begin(), hot_ids.end());
    EnsureThread();
    return done(absl::OkStatus());
  }

  // Synchronous: read the rows after the push, send, answer when all acknowledged.
  CopyPushed(table, *view, std::move(hot_ids), std::move(former_ids), std::move(former_holders),
             deadline, std::move(done));
}

void ReplicaOwner::SplitPushed(const std::string& table, absl::Span<const uint64_t> ids,
                               const absl::flat_hash_set<uint64_t>* hot, bool with_former,
                               std::vector<uint64_t>* hot_ids, std::vector<uint64_t>* former_ids,
                               Holders* former_holders) {
  absl::MutexLock lock(&mu_);
  auto recorded = with_former ? records_.find(table) : records_.end();
  const bool any_recorded = recorded != records_.end() && !recorded->second.empty();
  // The common case, nothing hot and no copies left, does no per-id work.
  absl::flat_hash_set<uint64_t> seen_ids;
  for (uint64_t id : (hot == nullptr && !any_recorded) ? absl::Span<const uint64_t>() : ids) {
    if (!seen_ids.insert(id).second) continue;
    if (hot != nullptr && hot->contains(id)) {
      hot_ids->push_back(id);
      continue;
    }
    if (!any_recorded) continue;
    auto r = recorded->second.find(id);
    if (r == recorded->second.end() || r->second.empty()) continue;
    former_ids->push_back(id);
    for (uint32_t h : r->second) {
      if (!Contains(*former_holders, h)) former_holders->push_back(h);
    }
  }
}

void ReplicaOwner::CopyPushed(const std::string& table, const HotSetView& view,
                              std::vector<uint64_t> hot_ids, std::vector<uint64_t> former_ids,
                              Holders former_holders, absl::Time deadline, Done done) {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) {
      return done(absl::UnavailableError(
          absl::StrCat("shard ", shard_id_,
                       " is stopping: the push was applied but its hot rows were not "
                       "copied to their replica holders; retry it")));
    }
    ++sending_;
  }
  auto finish_sending = [this] {
    absl::MutexLock lock(&mu_);
    --sending_;
  };
  std::shared_ptr<v1::PutReplicasRequest> request = NewRequest(table, view);
  std::shared_ptr<v1::PutReplicasRequest> former = NewRequest(table, view);
  for (auto [req, list] :
       {std::pair{request.get(), &hot_ids}, std::pair{former.get(), &former_ids}}) {
    if (list->empty()) continue;
    if (absl::Status read = host_->ReadOwnedRows(table, list, req); !read.ok()) {
      finish_sending();
      return done(absl::UnavailableError(absl::StrCat(
          "the push was applied but its hot rows could not be read for their replica holders: ",
          read.message())));
    }
  }
  const Holders required = hot_ids.empty() ? Holders() : HoldersOf(view, shard_id_);
  const Holders extra = hot_ids.empty() ? Holders() : RecordAndExtra(table, hot_ids, required);
  if (former_ids.empty()) former_holders.clear();
  if (required.empty() && extra.empty() && former_holders.empty()) {
    finish_sending();
    return done(absl::OkStatus());
  }
  auto fan_in = std::make_shared<FanIn>();
  {
    absl::MutexLock lock(&fan_in->mu);
    fan_in->remaining = required.size() + extra.size() + former_holders.size();
  }
  auto shared_done = std::make_shared<Done>(std::move(done));
  auto send = [&](uint32_t holder, bool is_required,
                  const std::shared_ptr<v1::PutReplicasRequest>& what) {
    std::string address = view.AddressOf(holder);
    if (address.empty()) address = AddressOf(holder);
    sender_->Send(holder, address, what, deadline,
                  [fan_in, shared_done, is_required](absl::Status status) {
                    bool last = false;
                    absl::Status result;
                    {
                      absl::MutexLock lock(&fan_in->mu);
                      if (!status.ok() && is_required && fan_in->error.ok()) {
                        fan_in->error = absl::UnavailableError(
                            absl::StrCat("the push was applied, but ", status.message()));
                      }
                      last = --fan_in->remaining == 0;
                      result = fan_in->error;
                    }
                    if (last) (*shared_done)(result);
                  });
  };
  for (uint32_t holder : required) send(holder, true, request);
  // Former holders (waited for, failures tolerated: the drop that follows settles it).
  for (uint32_t holder : extra) send(holder, false, request);
  for (uint32_t holder : former_holders) send(holder, false, former);
  finish_sending();
}

bool ReplicaOwner::CopyAndWait(const std::string& table, std::vector<uint64_t> ids,
                               const HotSetView& view, const Holders& required, bool add_recorded,
                               absl::flat_hash_set<uint64_t>* failed) {
  std::shared_ptr<v1::PutReplicasRequest> request = NewRequest(table, view);
  if (!host_->ReadOwnedRows(table, &ids, request.get()).ok()) {
    failed->insert(ids.begin(), ids.end());
    return false;
  }
  if (ids.empty()) return true;
  const Holders extra = RecordAndExtra(table, ids, required);
  Holders targets = required;
  if (add_recorded) targets.insert(targets.end(), extra.begin(), extra.end());
  auto fan_in = std::make_shared<FanIn>();
  {
    absl::MutexLock lock(&fan_in->mu);
    fan_in->remaining = targets.size();
  }
  const absl::Time deadline = absl::Now() + options_.round_timeout;
  for (size_t i = 0; i < targets.size(); ++i) {
    const uint32_t holder = targets[i];
    const bool is_required = i < required.size();
    sender_->Send(holder, AddressOf(holder), request, deadline,
                  [fan_in, holder, is_required](absl::Status status) {
                    absl::MutexLock lock(&fan_in->mu);
                    if (!status.ok() && is_required) fan_in->failed.push_back(holder);
                    --fan_in->remaining;
                  });
  }
  absl::MutexLock lock(&fan_in->mu);
  FanIn* f = fan_in.get();
  auto all_done = [f]() ABSL_SHARED_LOCKS_REQUIRED(f->mu) { return f->remaining == 0; };
  fan_in->mu.Await(absl::Condition(&all_done));
  if (fan_in->failed.empty()) return true;
  failed->insert(ids.begin(), ids.end());
  return false;
}

void ReplicaOwner::Loop() {
  absl::MutexLock lock(&mu_);
  while (!stopped_) {
    if (!wake_ && !refill_all_ && !reconcile_ && view_ == processed_view_) {
      // Idle until woken, or until pending retries or the periodic pass are due.
      absl::Time deadline = absl::InfiniteFuture();
      if (!fills_.empty() || !drops_.empty()) deadline = next_retry_;
      if (!dirty_.empty()) deadline = std::min(deadline, next_refresh_);
      auto woken = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return wake_ || stopped_; };
      mu_.AwaitWithDeadline(absl::Condition(&woken), deadline);
      if (stopped_) break;
      if (!wake_ && absl::Now() < deadline) continue;
    }
    wake_ = false;
    busy_ = true;
    mu_.Unlock();
    Round();
    mu_.Lock();
    busy_ = false;
  }
}

// One call of a round's drops: the ids of one table to drop at one holder, and its
// result.
struct ReplicaOwner::DropCall {
  uint32_t holder;
  std::string table;
  std::vector<uint64_t> ids;
  absl::Status status;
};

ReplicaOwner::RoundWork ReplicaOwner::TakeRoundWork() {
  RoundWork work;
  absl::MutexLock lock(&mu_);
  work.view = view_;
  work.previous = processed_view_;
  processed_view_ = view_;
  work.refill = refill_all_;
  work.reconcile = reconcile_ || work.previous != work.view;
  refill_all_ = reconcile_ = false;
  const absl::Time now = absl::Now();
  const uint32_t interval = work.view->proto().refresh_interval_ms();
  if (!dirty_.empty() && now >= next_refresh_) {
    work.dirty.swap(dirty_);
    work.refresh = true;
    next_refresh_ = now + absl::Milliseconds(std::max<uint32_t>(interval, 1));
  }
  if (now >= next_retry_) {
    work.fills.swap(fills_);
    work.drops.swap(drops_);
    work.retry = true;
  }
  return work;
}

void ReplicaOwner::CollectFills(const HotSetView& view, const HotSetView& previous, bool refill,
                                IdSets* fills) {
  // A holder that is new, moved or restarted holds none of the keys yet.
  const bool all =
      refill || HolderProcesses(previous, shard_id_) != HolderProcesses(view, shard_id_);
  for (const v1::HotKeyTable& table : view.proto().tables()) {
    const absl::flat_hash_set<uint64_t>* keys = view.HotKeys(table.table());
    if (keys == nullptr) continue;
    std::vector<uint64_t> ids;
    for (uint64_t id : *keys) {
      if (all || !previous.IsHot(table.table(), id)) ids.push_back(id);
    }
    host_->KeepOwned(table.table(), &ids);
    (*fills)[table.table()].insert(ids.begin(), ids.end());
  }
}

void ReplicaOwner::CollectDrops(const HotSetView& view, bool replicated, const Holders& holders,
                                absl::flat_hash_map<uint32_t, IdSets>* drops) {
  absl::flat_hash_map<std::string, std::vector<std::pair<uint64_t, Holders>>> recorded;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [table, records] : records_) {
      auto& list = recorded[table];
      for (const auto& [id, hs] : records) list.emplace_back(id, hs);
    }
  }
  for (const auto& [table, list] : recorded) {
    std::vector<uint64_t> wanted;
    for (const auto& [id, hs] : list) {
      if (replicated && view.IsHot(table, id)) wanted.push_back(id);
    }
    host_->KeepOwned(table, &wanted);
    const absl::flat_hash_set<uint64_t> keep(wanted.begin(), wanted.end());
    for (const auto& [id, hs] : list) {
      for (uint32_t h : hs) {
        if (!keep.contains(id) || !Contains(holders, h)) (*drops)[h][table].insert(id);
      }
    }
  }
}

bool ReplicaOwner::CopySets(const IdSets& sets, const HotSetView& view, const Holders& holders,
                            IdSets* retry_into) {
  bool ok = true;
  const size_t chunk = std::max<size_t>(options_.max_rows_per_copy, 1);
  for (const auto& [table, set] : sets) {
    std::vector<uint64_t> ids(set.begin(), set.end());
    absl::flat_hash_set<uint64_t> failed;
    for (size_t first = 0; first < ids.size(); first += chunk) {
      std::vector<uint64_t> part(
          ids.begin() + static_cast<std::ptrdiff_t>(first),
          ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), first + chunk)));
      ok = CopyAndWait(table, std::move(part), view, holders, /*add_recorded=*/true, &failed) && ok;
    }
    if (!failed.empty()) {
      absl::MutexLock lock(&mu_);
      (*retry_into)[table].insert(failed.begin(), failed.end());
    }
  }
  return ok;
}

bool ReplicaOwner::SendDrops(const absl::flat_hash_map<uint32_t, IdSets>& drops,
                             const HotSetView& view) {
  const size_t chunk = std::max<size_t>(options_.max_rows_per_copy, 1);
  std::vector<std::shared_ptr<DropCall>> calls;
  for (const auto& [holder, tables] : drops) {
    for (const auto& [table, set] : tables) {
      std::vector<uint64_t> ids(set.begin(), set.end());
      for (size_t first = 0; first < ids.size(); first += chunk) {
        const size_t last = std::min(ids.size(), first + chunk);
        auto call = std::make_shared<DropCall>();
        call->holder = holder;
        call->table = table;
        call->ids.assign(ids.begin() + static_cast<std::ptrdiff_t>(first),
                         ids.begin() + static_cast<std::ptrdiff_t>(last));
        calls.push_back(std::move(call));
      }
    }
  }
  if (calls.empty()) return true;
  auto fan_in = std::make_shared<FanIn>();
  {
    absl::MutexLock lock(&fan_in->mu);
    fan_in->remaining = calls.size();
  }
  const absl::Time deadline = absl::Now() + options_.round_timeout;
  for (const std::shared_ptr<DropCall>& call : calls) {
    std::shared_ptr<v1::PutReplicasRequest> request = NewRequest(call->table, view);
    request->set_drop(true);
    request->set_ids(std::string(reinterpret_cast<const char*>(call->ids.data()),
                                 call->ids.size() * sizeof(uint64_t)));
    sender_->Send(call->holder, AddressOf(call->holder), request, deadline,
                  [fan_in, call](absl::Status status) {
                    absl::MutexLock lock(&fan_in->mu);
                    call->status = std::move(status);
                    --fan_in->remaining;
                  });
  }
  {
    absl::MutexLock lock(&fan_in->mu);
    FanIn* f = fan_in.get();
    auto all_done = [f]() ABSL_SHARED_LOCKS_REQUIRED(f->mu) { return f->remaining == 0; };
    fan_in->mu.Await(absl::Condition(&all_done));
  }
  absl::MutexLock lock(&mu_);
  return SettleDrops(calls);
}

bool ReplicaOwner::SettleDrops(absl::Span<const std::shared_ptr<DropCall>> calls) {
  bool ok = true;
  const Holders now_holders = HoldersOf(*view_, shard_id_);
  const absl::Time now = absl::Now();
  for (const std::shared_ptr<DropCall>& call : calls) {
    if (call->status.ok()) drop_failing_since_.erase(call->holder);
  }
  for (const std::shared_ptr<DropCall>& call : calls) {
    if (!call->status.ok()) {
      const absl::Time since = drop_failing_since_.try_emplace(call->holder, now).first->second;
      // A shard that left the holders (dead, most likely) and has not answered for
      // drop_give_up serves no client with the current hot set: stop trying.
      if (view_->AddressOf(call->holder).empty() && now - since >= options_.drop_give_up) {
        EMBER_LOG(WARNING) << "shard " << shard_id_ << ": gave up dropping " << call->ids.size()
                           << " replica copies of table " << call->table
                           << " on former holder shard " << call->holder << ": "
                           << call->status.message();
        // Fall through: forget the holder for these keys as if acknowledged.
      } else {
        ok = false;
        drops_[call->holder][call->table].insert(call->ids.begin(), call->ids.end());
        continue;
      }
    }
    // Acknowledged: forget the holder, unless the key went back to it meanwhile.
    auto records = records_.find(call->table);
    if (records == records_.end()) continue;
    for (uint64_t id : call->ids) {
      auto record = records->second.find(id);
      if (record == records->second.end()) continue;
      if (view_->IsHot(call->table, id) && Contains(now_holders, call->holder)) continue;
      Holders& hs = record->second;
      hs.erase(std::remove(hs.begin(), hs.end(), call->holder), hs.end());
      if (hs.empty()) records->second.erase(record);
    }
    if (records->second.empty()) records_.erase(records);
  }
  return ok;
}

bool ReplicaOwner::Round() {
  RoundWork work = TakeRoundWork();
  const HotSetView& view = *work.view;
  const Holders holders = HoldersOf(view, shard_id_);
  const bool replicated = view.replicated() && !holders.empty();

  // Fills: keys newly hot (or all, when the holders changed or rows changed).
  if (replicated && (work.refill || work.previous != work.view)) {
    CollectFills(view, *work.previous, work.refill, &work.fills);
  }
  if (!replicated) work.fills.clear();

  // Drops: recorded copies no holder should keep (not hot, not owned, not a holder).
  if (work.reconcile) CollectDrops(view, replicated, holders, &work.drops);

  bool ok = true;
  if (replicated) {
    ok = CopySets(work.fills, view, holders, &fills_) && ok;
    if (work.refresh) ok = CopySets(work.dirty, view, holders, &dirty_) && ok;
  }
  ok = SendDrops(work.drops, view) && ok;

  absl::MutexLock lock(&mu_);
  if (ok) {
    retry_backoff_ = options_.initial_retry;
  } else if (work.retry || !fills_.empty() || !drops_.empty()) {
    next_retry_ = absl::Now() + retry_backoff_;
    retry_backoff_ = std::min(retry_backoff_ * 2, options_.max_retry);
  }
  return ok;
}

bool ReplicaOwner::WaitSettled(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto settled = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return stopped_ ||
           (!busy_ && !wake_ && !refill_all_ && !reconcile_ && view_ == processed_view_ &&
            fills_.empty() && drops_.empty() && dirty_.empty());
  };
  return mu_.AwaitWithTimeout(absl::Condition(&settled), timeout);
}

}  // namespace ember
