// Copyright 2026 The Ember Authors.

#include "server/coordinator/shard_policy.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/metric_families.h"
#include "common/slot.h"
#include "server/coordinator/rebalance_planner.h"

namespace ember {
namespace {

constexpr char kWho[] = "coordinator policy";

bool Running(const v1::Migration& op) {
  return op.phase() != v1::Migration::DONE && op.phase() != v1::Migration::CANCELLED &&
         op.phase() != v1::Migration::FAILED;
}

}  // namespace

class ShardPolicy::Collector final : public prometheus::Collectable {
 public:
  explicit Collector(const ShardPolicy* policy) : policy_(policy) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    uint64_t joins = 0, drains = 0, failed = 0;
    std::map<uint32_t, uint64_t> leaving;
    {
      absl::MutexLock lock(&policy_->mu_);
      joins = policy_->joins_;
      drains = policy_->drains_;
      failed = policy_->failed_starts_;
      leaving = policy_->leaving_;
    }
    // A shard that drained and exited stays marked until a new process takes its id:
    // count only the ones still heartbeating.
    int alive_leaving = 0;
    for (const v1::ShardInfo& shard : policy_->state_->Shards()) {
      if (shard.state() == v1::ShardInfo::ALIVE && leaving.contains(shard.shard_id())) {
        ++alive_leaving;
      }
    }
    std::vector<prometheus::MetricFamily> out;
    FamilyWriter w(&out);
    w.Labelled("ember_coordinator_policy_migrations_total",
               "Slot migrations the coordinator's shard policy started: join (--auto_rebalance, "
               "a shard with no slots) or drain (a shard that asked to leave).",
               prometheus::MetricType::Counter, "kind",
               {{"join", static_cast<double>(joins)}, {"drain", static_cast<double>(drains)}});
    w.Counter("ember_coordinator_policy_failed_starts_total",
              "Policy migrations the migrator refused to start or that ended FAILED (each is "
              "tried again after --policy_retry_ms).",
              static_cast<double>(failed));
    w.Gauge("ember_coordinator_leaving_shards",
            "Alive shards that asked to leave (LeaveCluster) and are being drained.",
            alive_leaving);
    return out;
  }

 private:
  const ShardPolicy* const policy_;
};

ShardPolicy::ShardPolicy(CoordinatorState* state, SlotMigrator* migrator,
                         ShardPolicyOptions options)
    : state_(state), migrator_(migrator), options_(std::move(options)) {}

ShardPolicy::~ShardPolicy() { Stop(); }

void ShardPolicy::Start() {
  if (thread_.joinable()) return;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void ShardPolicy::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<prometheus::Collectable> ShardPolicy::MetricsCollector() {
  return std::make_shared<Collector>(this);
}

void ShardPolicy::OnShardSeen(uint32_t shard_id, uint64_t incarnation) {
  if (incarnation == 0) return;
  absl::MutexLock lock(&mu_);
  incarnations_[shard_id] = incarnation;
  auto it = leaving_.find(shard_id);
  if (it != leaving_.end() && it->second != incarnation) {
    EMBER_LOG(INFO) << "shard policy: shard " << shard_id
                    << " is back as a new process: no longer leaving";
    leaving_.erase(it);
  }
}

absl::StatusOr<v1::LeaveClusterResponse> ShardPolicy::Leave(uint32_t shard_id,
                                                            uint64_t incarnation) {
  if (incarnation == 0) {
    return absl::InvalidArgumentError(
        "LeaveCluster: incarnation 0; send the shard process's incarnation, as in RegisterShard");
  }
  std::optional<v1::ShardInfo> self;
  std::vector<v1::ShardInfo> others;
  for (v1::ShardInfo& shard : state_->Shards()) {
    if (shard.shard_id() == shard_id) {
      self = std::move(shard);
    } else {
      others.push_back(std::move(shard));
    }
  }
  if (!self.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("LeaveCluster: shard ", shard_id, " is not registered with this coordinator"));
  }
  const uint32_t owned = self->owned_slots();
  bool newly_leaving = false;
  {
    absl::MutexLock lock(&mu_);
    auto known = incarnations_.find(shard_id);
    if (known != incarnations_.end() && known->second != incarnation) {
      return absl::FailedPreconditionError(
          absl::StrCat("LeaveCluster: shard ", shard_id, " is registered as process ",
                       known->second, ", not ", incarnation, ": another process has the id"));
    }
    if (owned > 0) {
      // A loop, not a lambda: the thread-safety analysis sees mu_ held here only.
      bool has_target = false;
      for (const v1::ShardInfo& s : others) {
        has_target =
            has_target || (s.state() == v1::ShardInfo::ALIVE && !leaving_.contains(s.shard_id()));
      }
      if (!has_target) {
        return absl::FailedPreconditionError(absl::StrCat(
            "LeaveCluster: shard ", shard_id,
            " is the last shard holding slots: no other alive "
            "shard that is not leaving can take its ",
            owned, " slots (add a shard first, or stop it without --drain_on_sigterm)"));
      }
    }
    incarnations_[shard_id] = incarnation;
    newly_leaving = leaving_.emplace(shard_id, incarnation).second;
    wake_ = true;
  }
  if (newly_leaving) {
    EMBER_LOG(INFO) << "shard policy: shard " << shard_id << " asked to leave; draining its "
                    << owned << " slots";
  }
  v1::LeaveClusterResponse response;
  response.set_owned_slots(owned);
  // Owning no slot is not enough: the move that took the last ones may still be
  // finishing after its switch (the source's copies dropped, the record made DONE). The
  // shard stays and serves until it is, so that its exit never cuts a move short.
  bool finishing = false;
  if (owned == 0) {
    absl::StatusOr<v1::Migration> newest = migrator_->Get("");
    if (newest.ok() && Running(*newest)) {
      for (const v1::SlotMove& move : newest->spec().moves()) {
        finishing = finishing || move.source() == shard_id;
      }
    }
  }
  response.set_done(owned == 0 && !finishing);
  if (owned > 0) {
    absl::StatusOr<v1::Migration> newest = migrator_->Get("");
    absl::MutexLock lock(&mu_);
    if (newest.ok() && newest->op_id() == op_id_ && Running(*newest)) {
      response.set_op_id(op_id_);
    }
  }
  response.set_detail(owned > 0   ? DrainDetail(shard_id)
                      : finishing ? "owns no slots; the move that took them is finishing"
                                  : "owns no slots");
  return response;
}

std::string ShardPolicy::DrainDetail(uint32_t shard_id) const {
  absl::StatusOr<v1::Migration> newest = migrator_->Get("");
  absl::MutexLock lock(&mu_);
  if (newest.ok() && Running(*newest)) {
    if (newest->op_id() == op_id_) {
      return absl::StrCat("migration ", newest->op_id(), " (", newest->spec().reason(), ") ",
                          v1::Migration::Phase_Name(newest->phase()), ", move ", newest->move() + 1,
                          " of ", newest->spec().moves_size());
    }
    return absl::StrCat("waiting for migration ", newest->op_id(), " (", newest->spec().reason(),
                        ") to finish");
  }
  if (absl::Now() < retry_at_) return "retrying after a failed start (see the coordinator's log)";
  return "planning";
}

void ShardPolicy::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || wake_; };
      mu_.AwaitWithTimeout(absl::Condition(&woken), options_.tick);
      if (stopping_) return;
      wake_ = false;
    }
    Step();
  }
}

void ShardPolicy::Step() {
  const SlotMap map = state_->slot_map();
  if (map.epoch() == 0) return;
  // One operation at a time, whoever started it: an operator's runs to its end first.
  absl::StatusOr<v1::Migration> newest = migrator_->Get("");
  if (newest.ok() && Running(*newest)) return;
  std::map<uint32_t, uint64_t> leaving;
  {
    absl::MutexLock lock(&mu_);
    if (newest.ok() && newest->op_id() == op_id_ && !op_checked_) {
      op_checked_ = true;
      if (newest->phase() == v1::Migration::FAILED) {
        ++failed_starts_;
        retry_at_ = absl::Now() + options_.retry;
        EMBER_LOG(WARNING) << "shard policy: migration " << op_id_ << " failed: " << newest->error()
                           << "; trying again in " << options_.retry;
      }
    }
    if (absl::Now() < retry_at_) return;
    leaving = leaving_;
  }

  RebalanceInput input;
  input.map = map;
  input.slot_weight.assign(kNumSlots, 1);  // by slot count
  std::vector<uint32_t> empty;             // alive, no slots, not leaving
  for (const v1::ShardInfo& shard : state_->Shards()) {
    const uint32_t id = shard.shard_id();
    if (leaving.contains(id)) {
      if (shard.owned_slots() > 0) input.drain.push_back(id);
      continue;
    }
    if (shard.state() != v1::ShardInfo::ALIVE) continue;
    input.shards.push_back(id);
    if (shard.owned_slots() == 0) empty.push_back(id);
  }
  const bool drain = !input.drain.empty();
  if (!drain && !(options_.auto_rebalance && !empty.empty())) return;
  const char* kind = drain ? "drain" : "join";
  const std::string reason =
      drain ? absl::StrCat("drain shard ", absl::StrJoin(input.drain, ","), " (leaving)")
            : absl::StrCat("auto rebalance: shard ", absl::StrJoin(empty, ","), " joined");

  absl::StatusOr<v1::MigrationSpec> spec = [&]() -> absl::StatusOr<v1::MigrationSpec> {
    absl::StatusOr<v1::PlanRebalanceResponse> plan = PlanRebalance(input);
    if (!plan.ok()) return plan.status();
    v1::MigrationSpec out;
    for (const v1::SlotMove& move : plan->spec().moves()) {
      // A drain moves only the leaving shards' slots; evening out the rest can wait.
      const bool from_leaving =
          std::find(input.drain.begin(), input.drain.end(), move.source()) != input.drain.end();
      if (!drain || from_leaving) *out.add_moves() = move;
    }
    out.set_reason(reason);
    out.set_bytes_per_sec(options_.bytes_per_sec);
    return out;
  }();
  if (spec.ok() && spec->moves().empty()) return;  // balanced within the tolerance
  absl::StatusOr<v1::Migration> op = spec.ok() ? migrator_->StartMigration(*spec, kWho)
                                               : absl::StatusOr<v1::Migration>(spec.status());
  absl::MutexLock lock(&mu_);
  if (!op.ok()) {
    ++failed_starts_;
    retry_at_ = absl::Now() + options_.retry;
    EMBER_LOG(WARNING) << "shard policy: cannot start '" << reason << "': " << op.status()
                       << "; trying again in " << options_.retry;
    return;
  }
  op_id_ = op->op_id();
  op_checked_ = false;
  ++(drain ? drains_ : joins_);
  EMBER_LOG(INFO) << "shard policy: started " << kind << " migration " << op_id_ << " (" << reason
                  << ", " << op->spec().moves_size() << " moves)";
}

}  // namespace ember
