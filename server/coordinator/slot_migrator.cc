// Copyright 2026 The Ember Authors.
//
// SlotMigrator, part 1: operations (validation, persistence, the thread, cancel).
// The protocol of one move is in slot_migrator_move.cc.

#include "server/coordinator/slot_migrator.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/clip.h"
#include "common/log.h"
#include "common/slot.h"
#include "common/status_macros.h"
#include "server/coordinator/rebalance_planner.h"

namespace ember {
namespace {

constexpr char kOpPrefix[] = "migration/";
constexpr char kIndexKey[] = "migrations/index";  // op ids, oldest first, '\n'-joined
constexpr size_t kKeptOps = 100;

int64_t NowMillis() { return absl::ToUnixMillis(absl::Now()); }

}  // namespace

SlotMigrator::SlotMigrator(CoordinatorState* state, SlotMigratorOptions options, StubFactory stubs,
                           absl::Mutex* topology_mu, SwitchListener on_switch)
    : state_(state),
      options_(std::move(options)),
      stubs_(std::move(stubs)),
      topology_mu_(topology_mu),
      on_switch_(std::move(on_switch)) {}

SlotMigrator::~SlotMigrator() { Stop(); }

bool SlotMigrator::Terminal(v1::Migration::Phase phase) {
  return phase == v1::Migration::DONE || phase == v1::Migration::CANCELLED ||
         phase == v1::Migration::FAILED;
}

absl::Status SlotMigrator::Start() {
  std::string resume;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = false;
    const std::optional<std::string> index = state_->KvGet(kIndexKey);
    if (index.has_value() && !index->empty()) {
      for (absl::string_view id : absl::StrSplit(*index, '\n')) {
        const std::optional<std::string> value = state_->KvGet(absl::StrCat(kOpPrefix, id));
        if (!value.has_value()) continue;
        v1::Migration op;
        if (!op.ParseFromString(*value)) {
          return absl::DataLossError(absl::StrCat("migration record ", id, " does not parse"));
        }
        order_.push_back(op.op_id());
        uint64_t number = 0;
        if (absl::SimpleAtoi(absl::StripPrefix(op.op_id(), "mig-"), &number)) {
          next_op_ = std::max(next_op_, number + 1);
        }
        if (!Terminal(op.phase())) resume = op.op_id();
        ops_[op.op_id()] = std::move(op);
      }
    }
    if (resume.empty()) return absl::OkStatus();
    running_ = resume;
  }
  EMBER_LOG(INFO) << "resuming migration " << resume;
  thread_ = std::thread([this, resume] { Run(resume); });
  return absl::OkStatus();
}

void SlotMigrator::Stop() {
  absl::MutexLock start(&start_mu_);
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<v1::MigrationSpec> SlotMigrator::Normalize(const v1::MigrationSpec& spec) const {
  if (spec.moves().empty()) return absl::InvalidArgumentError("the migration moves no slots");
  const SlotMap map = state_->slot_map();
  if (map.epoch() == 0) return absl::FailedPreconditionError("slots are not assigned yet");
  std::map<uint32_t, v1::ShardInfo> shards;
  for (v1::ShardInfo& shard : state_->Shards()) shards[shard.shard_id()] = std::move(shard);
  v1::MigrationSpec out;
  out.set_bytes_per_sec(spec.bytes_per_sec());
  out.set_reason(spec.reason());
  std::set<uint32_t> seen;
  for (const v1::SlotMove& move : spec.moves()) {
    if (move.source() == move.target()) {
      return absl::InvalidArgumentError(
          absl::StrCat("a move from shard ", move.source(), " to itself"));
    }
    for (uint32_t id : {move.source(), move.target()}) {
      auto it = shards.find(id);
      if (it == shards.end()) return absl::InvalidArgumentError(absl::StrCat("unknown shard ", id));
      if (it->second.state() != v1::ShardInfo::ALIVE) {
        return absl::InvalidArgumentError(absl::StrCat(
            "shard ", id, " is not alive: its rows cannot be copied (restore from a checkpoint)"));
      }
    }
    EMBER_ASSIGN_OR_RETURN(std::vector<uint32_t> slots, FromRanges(move.ranges()));
    if (slots.empty()) return absl::InvalidArgumentError("a move without slots");
    for (uint32_t slot : slots) {
      if (!seen.insert(slot).second) {
        return absl::InvalidArgumentError(absl::StrCat("slot ", slot, " is in two moves"));
      }
      // A resumed operation may find its slots already on the target.
      if (map.OwnerOf(slot) != move.source() && map.OwnerOf(slot) != move.target()) {
        return absl::InvalidArgumentError(absl::StrCat("slot ", slot, " is owned by shard ",
                                                       map.OwnerOf(slot), ", not ", move.source()));
      }
    }
    for (size_t begin = 0; begin < slots.size(); begin += options_.max_slots_per_move) {
      const size_t end = std::min(slots.size(), begin + options_.max_slots_per_move);
      v1::SlotMove* part = out.add_moves();
      part->set_source(move.source());
      part->set_target(move.target());
      for (v1::SlotRange& range :
           ToRanges(std::vector<uint32_t>(slots.begin() + begin, slots.begin() + end))) {
        *part->add_ranges() = std::move(range);
      }
      if (begin == 0) part->set_weight(move.weight());
    }
  }
  return out;
}

bool SlotMigrator::SameRequest(const v1::Migration& op, const v1::MigrationSpec& spec) const {
  // slot -> target of each.
  // Both specs are normalized: their ranges are valid.
  auto targets = [](const v1::MigrationSpec& s) {
    std::map<uint32_t, uint32_t> out;
    for (const v1::SlotMove& move : s.moves()) {
      const std::vector<uint32_t> slots = FromRanges(move.ranges()).value();
      for (uint32_t slot : slots) out[slot] = move.target();
    }
    return out;
  };
  const std::map<uint32_t, uint32_t> mine = targets(op.spec());
  const std::map<uint32_t, uint32_t> asked = targets(spec);
  const SlotMap map = state_->slot_map();
  for (const auto& [slot, target] : asked) {
    auto it = mine.find(slot);
    if (it == mine.end() || it->second != target) return false;
  }
  // What the request leaves out must be done already (a client that skips the slots
  // already on their target).
  for (const auto& [slot, target] : mine) {
    if (!asked.contains(slot) && map.OwnerOf(slot) != target) return false;
  }
  return true;
}

absl::StatusOr<v1::Migration> SlotMigrator::StartMigration(const v1::MigrationSpec& spec,
                                                           const std::string& who) {
  absl::MutexLock start(&start_mu_);
  EMBER_ASSIGN_OR_RETURN(const v1::MigrationSpec normalized, Normalize(spec));
  v1::Migration op;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("the coordinator is stopping");
    if (!order_.empty()) {
      v1::Migration& last = ops_[order_.back()];
      const bool same = SameRequest(last, normalized);
      // The thread publishes the operation's end (DONE, CANCELLED, FAILED) before it
      // exits: it no longer runs, and the join below waits for its last write.
      const bool running = !running_.empty() && !Terminal(last.phase());
      if (same && last.phase() != v1::Migration::DONE && last.phase() != v1::Migration::CANCELLED) {
        if (running) return last;  // attach
        last.set_phase(v1::Migration::PENDING);
        last.set_error("");
        op = last;
      } else if (running) {
        return absl::FailedPreconditionError(
            absl::StrCat("migration ", last.op_id(), " (", last.spec().reason(),
                         ") is running: wait for it or cancel it (emberctl migrations cancel ",
                         last.op_id(), ")"));
      }
    }
    if (op.op_id().empty()) {
      op.set_op_id(absl::StrCat("mig-", next_op_++));
      *op.mutable_spec() = normalized;
      op.set_phase(v1::Migration::PENDING);
      op.set_epoch_before(state_->slot_map().epoch());
      op.set_started_unix_ms(NowMillis());
      op.set_who(who);
      order_.push_back(op.op_id());
    }
    op.set_updated_unix_ms(NowMillis());
    if (op.ByteSizeLong() > kMaxKvValueBytes - 1024) {
      if (order_.back() == op.op_id() && op.moves_done() == 0) order_.pop_back();
      return absl::InvalidArgumentError("the migration names too many slot ranges; split it");
    }
    ops_[op.op_id()] = op;
  }
  // The previous operation's thread has ended (or is ending: it published its end), and
  // its last `running_` update happened before this one (a resumed FAILED operation has
  // the same id). start_mu_ keeps other starts out meanwhile.
  if (thread_.joinable()) thread_.join();
  {
    absl::MutexLock lock(&mu_);
    running_ = op.op_id();
  }
  Publish(op, /*persist=*/true);
  state_
      ->Audit(who, absl::StrCat("start_migration op=", op.op_id(), " moves=",
                                op.spec().moves_size(), " reason=\"", op.spec().reason(), "\""))
      .IgnoreError();
  thread_ = std::thread([this, id = op.op_id()] { Run(id); });
  return op;
}

absl::StatusOr<v1::Migration> SlotMigrator::Get(const std::string& op_id) const {
  absl::MutexLock lock(&mu_);
  const std::string id = op_id.empty() && !order_.empty() ? order_.back() : op_id;
  auto it = ops_.find(id);
  if (it == ops_.end()) {
    return absl::NotFoundError(
        op_id.empty() ? std::string("no migration yet")
                      : absl::StrCat("unknown migration '", ClipForMessage(op_id), "'"));
  }
  return it->second;
}

std::vector<v1::Migration> SlotMigrator::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Migration> out;
  for (auto it = order_.rbegin(); it != order_.rend() && out.size() < kKeptOps; ++it) {
    out.push_back(ops_.at(*it));
  }
  return out;
}

absl::StatusOr<v1::Migration> SlotMigrator::Cancel(const std::string& op_id,
                                                   const std::string& who) {
  v1::Migration op;
  {
    absl::MutexLock lock(&mu_);
    auto it = ops_.find(op_id);
    if (it == ops_.end())
      return absl::NotFoundError(absl::StrCat("unknown migration '", ClipForMessage(op_id), "'"));
    if (Terminal(it->second.phase()) && it->second.phase() != v1::Migration::FAILED) {
      return it->second;
    }
    it->second.set_cancel_requested(true);
    if (running_ != op_id) {
      // A FAILED operation: nothing runs, so it is cancelled here (its rollback
      // happened when it failed).
      it->second.set_phase(v1::Migration::CANCELLED);
    }
    op = it->second;
  }
  Publish(op, /*persist=*/true);
  state_->Audit(who, absl::StrCat("cancel_migration op=", op_id)).IgnoreError();
  return op;
}

absl::Status SlotMigrator::CheckCancelled(const std::string& op_id) const {
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::CancelledError("the coordinator is stopping");
  auto it = ops_.find(op_id);
  if (it != ops_.end() && it->second.cancel_requested()) {
    return absl::CancelledError("cancelled by an operator");
  }
  return absl::OkStatus();
}

void SlotMigrator::SetPhase(v1::Migration& op, v1::Migration::Phase phase) {
  op.set_phase(phase);
  Publish(op, /*persist=*/true);
}

void SlotMigrator::Publish(const v1::Migration& op, bool persist) {
  v1::Migration copy = op;
  copy.set_updated_unix_ms(NowMillis());
  std::string index;
  {
    absl::MutexLock lock(&mu_);
    // The cancel flag is set by Cancel, not by the running thread.
    auto it = ops_.find(op.op_id());
    if (it != ops_.end() && it->second.cancel_requested()) copy.set_cancel_requested(true);
    ops_[op.op_id()] = copy;
    while (order_.size() > kKeptOps) {
      ops_.erase(order_.front());
      order_.erase(order_.begin());
    }
    index = absl::StrJoin(order_, "\n");
  }
  if (!persist) return;
  absl::Status s = state_->KvPut(absl::StrCat(kOpPrefix, op.op_id()), copy.SerializeAsString());
  if (s.ok()) s = state_->KvPut(kIndexKey, index);
  if (!s.ok()) {
    EMBER_LOG(ERROR) << "cannot persist migration " << op.op_id() << ": " << s;
  }
}

void SlotMigrator::MaybeCrash(absl::string_view point) const {
  if (options_.test_crash_at != point) return;
  EMBER_LOG(WARNING) << "test hook: crashing at migration point " << point;
  kill(getpid(), SIGKILL);
}

void SlotMigrator::Run(std::string op_id) {
  v1::Migration op;
  {
    absl::MutexLock lock(&mu_);
    op = ops_.at(op_id);
  }
  run_started_ = absl::Now();
  run_bytes_ = 0;
  last_publish_ = absl::InfinitePast();
  const absl::Time began = absl::Now();
  const double seconds_before = op.seconds();
  EMBER_LOG(INFO) << "migration " << op_id << " (" << op.spec().reason()
                  << "): " << op.spec().moves_size() - op.move() << " moves to go";
  absl::Status status;
  int restarts = 0;
  absl::Time failing_since = absl::InfiniteFuture();
  while (op.move() < static_cast<uint32_t>(op.spec().moves_size())) {
    status = RunMove(op, op.spec().moves(op.move()));
    op.set_seconds(seconds_before + absl::ToDoubleSeconds(absl::Now() - began));
    if (status.ok()) {
      op.set_move(op.move() + 1);
      op.set_moves_done(op.moves_done() + 1);
      op.set_error("");
      // The next move has not started: it showed the finished move's CLEANING_UP.
      if (op.move() < static_cast<uint32_t>(op.spec().moves_size())) {
        op.set_phase(v1::Migration::PENDING);
      }
      failing_since = absl::InfiniteFuture();
      Publish(op, /*persist=*/true);
      continue;
    }
    op.set_error(std::string(status.message()));
    if (absl::IsCancelled(status)) break;
    if ((absl::IsAborted(status) || absl::IsOutOfRange(status)) &&
        ++restarts <= options_.max_restarts) {
      op.set_restarts(op.restarts() + 1);
      EMBER_LOG(WARNING) << "migration " << op_id << ": copy starts over: " << status;
      continue;
    }
    const bool retryable = absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
    if (failing_since == absl::InfiniteFuture()) failing_since = absl::Now();
    if (!retryable || absl::Now() - failing_since > options_.retry_for) break;
    Publish(op, /*persist=*/false);
    absl::MutexLock lock(&mu_);
    auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
    mu_.AwaitWithTimeout(absl::Condition(&stop), absl::Milliseconds(200));
  }
  if (status.ok()) {
    op.set_phase(v1::Migration::DONE);
  } else if (absl::IsCancelled(status)) {
    bool stopping = false;
    {
      absl::MutexLock lock(&mu_);
      stopping = stopping_;
    }
    // Stopping leaves the operation where it is: the next Start resumes it.
    if (!stopping) op.set_phase(v1::Migration::CANCELLED);
  } else {
    op.set_phase(v1::Migration::FAILED);
  }
  Publish(op, /*persist=*/true);
  EMBER_LOG(INFO) << "migration " << op_id << " " << v1::Migration::Phase_Name(op.phase())
                  << " after " << op.moves_done() << " moves, " << op.rows_copied() << " rows, "
                  << op.bytes_copied() << " bytes, " << op.seconds() << " s, longest fence "
                  << op.max_fence_ms() << " ms"
                  << (status.ok() ? std::string() : absl::StrCat(": ", status.message()));
  absl::MutexLock lock(&mu_);
  if (running_ == op_id) running_.clear();
}

}  // namespace ember
