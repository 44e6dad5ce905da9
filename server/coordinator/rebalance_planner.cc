// Copyright 2026 The Ember Authors.

#include "server/coordinator/rebalance_planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace ember {
namespace {

// "slot 7 is" / "slots 7-9 are", for error messages.
std::string SlotRangeIs(uint32_t first, uint32_t last) {
  return first == last ? absl::StrCat("slot ", first, " is")
                       : absl::StrCat("slots ", first, "-", last, " are");
}

// The greedy state. Shards are addressed by their index in `ids` (ascending shard ids).
class Planner {
 public:
  Planner(size_t num_shards, std::vector<size_t> targets, std::vector<size_t> drained,
          const std::vector<size_t>& owner, std::vector<uint64_t> weight)
      : targets_(std::move(targets)),
        drained_(std::move(drained)),
        w_(std::move(weight)),
        load_(num_shards, 0),
        slots_(num_shards),
        moved_(kNumSlots, false) {
    uint64_t total = 0;
    for (uint32_t s = 0; s < kNumSlots; ++s) {
      load_[owner[s]] += w_[s];
      slots_[owner[s]].push_back(s);
      total += w_[s];
    }
    mean_ = static_cast<double>(total) / static_cast<double>(targets_.size());
  }

  void Drain() {
    for (size_t d : drained_) {
      while (HasMovable(d)) {
        const size_t to = Lightest();
        const double want = std::max(mean_ - static_cast<double>(load_[to]), 0.0);
        std::vector<uint32_t> chunk = TakeFromEnd(d, want);
        if (chunk.empty()) chunk.push_back(LastMovable(d));  // progress even when full
        Apply(d, to, chunk);
      }
    }
  }

  void Even(double tolerance) {
    std::vector<size_t> donors;
    while (!WithinTolerance(tolerance)) {
      const size_t to = Lightest();
      donors.clear();
      for (size_t t : targets_) {
        if (static_cast<double>(load_[t]) > mean_ && load_[t] > load_[to]) donors.push_back(t);
      }
      std::sort(donors.begin(), donors.end(), [this](size_t a, size_t b) {
        return load_[a] != load_[b] ? load_[a] > load_[b] : a < b;
      });
      bool moved = false;
      for (size_t from : donors) {
        const double want = std::min(static_cast<double>(load_[from]) - mean_,
                                     mean_ - static_cast<double>(load_[to]));
        std::vector<uint32_t> chunk = TakeFromEnd(from, want);
        // Zero-weight slots at the low end of a chunk would move for nothing.
        while (!chunk.empty() && w_[chunk.back()] == 0) chunk.pop_back();
        if (chunk.empty()) chunk = BestSingle(from, want, load_[from] - load_[to]);
        if (chunk.empty()) continue;
        Apply(from, to, chunk);
        moved = true;
        break;
      }
      if (!moved) return;  // no move narrows the spread
    }
  }

  // Moves per (source, target) pair, in the order each pair was first used.
  const std::vector<std::pair<std::pair<size_t, size_t>, std::vector<uint32_t>>>& pairs() const {
    return pairs_;
  }

 private:
  // The slots of `shard` not moved yet form a prefix of slots_[shard] up to lazily
  // skipped moved ones (BestSingle can move one from the middle).
  const std::vector<uint32_t>& Movable(size_t shard) {
    std::vector<uint32_t>& v = slots_[shard];
    while (!v.empty() && moved_[v.back()]) v.pop_back();
    return v;
  }
  bool HasMovable(size_t shard) { return !Movable(shard).empty(); }
  uint32_t LastMovable(size_t shard) { return Movable(shard).back(); }

  size_t Lightest() const {
    size_t best = targets_.front();
    for (size_t t : targets_) {
      if (load_[t] < load_[best]) best = t;  // targets_ ascending: ties keep the lower id
    }
    return best;
  }

  bool WithinTolerance(double tolerance) const {
    const double slack = tolerance * mean_;
    for (size_t t : targets_) {
      if (std::fabs(static_cast<double>(load_[t]) - mean_) > slack) return false;
    }
    return true;
  }

  // Walks the unmoved slots of `from` downwards, taking them while the sum stays at
  // most `want`, plus one more if that lands closer to `want`. Descending slot order.
  std::vector<uint32_t> TakeFromEnd(size_t from, double want) {
    std::vector<uint32_t> taken;
    const std::vector<uint32_t>& v = Movable(from);
    double acc = 0;
    for (size_t i = v.size(); i-- > 0;) {
      const uint32_t s = v[i];
      if (moved_[s]) continue;
      const double ws = static_cast<double>(w_[s]);
      if (acc + ws <= want) {
        taken.push_back(s);
        acc += ws;
        continue;
      }
      if (acc + ws - want < want - acc) taken.push_back(s);
      break;
    }
    return taken;
  }

  // The one unmoved slot of `from` whose weight is closest to `want` among those that
  // narrow a gap of `gap` (0 < weight < gap); empty if none. Ties: the highest slot.
  std::vector<uint32_t> BestSingle(size_t from, double want, uint64_t gap) {
    const std::vector<uint32_t>& v = Movable(from);
    uint32_t best = kNumSlots;
    double best_diff = std::numeric_limits<double>::infinity();
    for (size_t i = v.size(); i-- > 0;) {
      const uint32_t s = v[i];
      if (moved_[s] || w_[s] == 0 || w_[s] >= gap) continue;
      const double diff = std::fabs(static_cast<double>(w_[s]) - want);
      if (diff < best_diff) {
        best = s;
        best_diff = diff;
      }
    }
    if (best == kNumSlots) return {};
    return {best};
  }

  void Apply(size_t from, size_t to, const std::vector<uint32_t>& chunk) {
    auto [it, inserted] = pair_index_.try_emplace({from, to}, pairs_.size());
    if (inserted) pairs_.push_back({{from, to}, {}});
    std::vector<uint32_t>& out = pairs_[it->second].second;
    for (uint32_t s : chunk) {
      moved_[s] = true;
      load_[from] -= w_[s];
      load_[to] += w_[s];
      out.push_back(s);
    }
  }

  const std::vector<size_t> targets_;         // ascending
  const std::vector<size_t> drained_;         // ascending
  const std::vector<uint64_t> w_;             // per slot, effective (ones when all are 0)
  std::vector<uint64_t> load_;                // per shard, with the moves so far
  std::vector<std::vector<uint32_t>> slots_;  // per shard, its slots before the plan
  std::vector<bool> moved_;                   // per slot
  double mean_ = 0;                           // over targets
  std::map<std::pair<size_t, size_t>, size_t> pair_index_;
  std::vector<std::pair<std::pair<size_t, size_t>, std::vector<uint32_t>>> pairs_;
};

std::vector<uint32_t> SortedUnique(std::vector<uint32_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

bool Contains(const std::vector<uint32_t>& sorted, uint32_t x) {
  return std::binary_search(sorted.begin(), sorted.end(), x);
}

// The checks of PlanRebalance on the input's own fields (its contract's errors).
absl::Status CheckInput(const RebalanceInput& input) {
  if (input.map.epoch() == 0) return absl::InvalidArgumentError("slot map epoch is 0 (no map yet)");
  if (!(input.tolerance >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("tolerance ", input.tolerance, " is negative"));
  }
  if (input.max_slots_per_move == 0) {
    return absl::InvalidArgumentError("max_slots_per_move is 0");
  }
  if (input.slot_weight.size() != kNumSlots) {
    return absl::InvalidArgumentError(absl::StrCat("slot_weight has ", input.slot_weight.size(),
                                                   " entries; expected ", kNumSlots));
  }
  return absl::OkStatus();
}

// INVALID_ARGUMENT naming the first slot range whose owner is neither a target nor
// draining (or that has no owner).
absl::Status CheckOwners(const std::vector<uint32_t>& owners,
                         const std::vector<uint32_t>& target_ids,
                         const std::vector<uint32_t>& drain) {
  for (uint32_t s = 0; s < kNumSlots; ++s) {
    const uint32_t o = owners[s];
    if (Contains(target_ids, o) || Contains(drain, o)) continue;
    uint32_t last = s;
    while (last + 1 < kNumSlots && owners[last + 1] == o) ++last;
    if (o == kNoShard) {
      return absl::InvalidArgumentError(absl::StrCat(SlotRangeIs(s, last), " without an owner"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat(SlotRangeIs(s, last), " owned by shard ", o,
                     ", which is neither alive (in shards) nor draining: its rows cannot be "
                     "copied"));
  }
  return absl::OkStatus();
}

// The sum of the slot weights; INVALID_ARGUMENT if it overflows.
absl::StatusOr<uint64_t> TotalWeight(const std::vector<uint64_t>& slot_weight) {
  uint64_t total = 0;
  for (uint64_t w : slot_weight) {
    if (w > std::numeric_limits<uint64_t>::max() - total) {
      return absl::InvalidArgumentError("the slot weights' sum overflows uint64");
    }
    total += w;
  }
  return total;
}

// Adds the planner's moves to `out`, at most max_slots_per_move slots each, and
// records each moved slot's new owner (an index into `ids`) in *after_owner.
void AddMoves(const Planner& planner, const std::vector<uint32_t>& ids, const RebalanceInput& input,
              std::vector<size_t>* after_owner, v1::PlanRebalanceResponse* out) {
  for (const auto& [pair, moved_slots] : planner.pairs()) {
    std::vector<uint32_t> slots = moved_slots;
    std::sort(slots.begin(), slots.end());
    for (size_t begin = 0; begin < slots.size(); begin += input.max_slots_per_move) {
      const size_t end = std::min(slots.size(), begin + input.max_slots_per_move);
      v1::SlotMove* move = out->mutable_spec()->add_moves();
      move->set_source(ids[pair.first]);
      move->set_target(ids[pair.second]);
      uint64_t moved_weight = 0;
      for (size_t i = begin; i < end; ++i) {
        moved_weight += input.slot_weight[slots[i]];
        (*after_owner)[slots[i]] = pair.second;
      }
      move->set_weight(moved_weight);
      for (v1::SlotRange& r :
           ToRanges(std::vector<uint32_t>(slots.begin() + begin, slots.begin() + end))) {
        *move->add_ranges() = std::move(r);
      }
    }
  }
}

// Adds each shard's slots and weight before and after the moves to `out`.
void AddShardWeights(const std::vector<uint32_t>& ids, const std::vector<size_t>& owner,
                     const std::vector<size_t>& after_owner,
                     const std::vector<uint64_t>& slot_weight, v1::PlanRebalanceResponse* out) {
  std::vector<v1::ShardWeight> before(ids.size()), after(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    before[i].set_shard_id(ids[i]);
    after[i].set_shard_id(ids[i]);
  }
  for (uint32_t s = 0; s < kNumSlots; ++s) {
    v1::ShardWeight& b = before[owner[s]];
    b.set_slots(b.slots() + 1);
    b.set_weight(b.weight() + slot_weight[s]);
    v1::ShardWeight& a = after[after_owner[s]];
    a.set_slots(a.slots() + 1);
    a.set_weight(a.weight() + slot_weight[s]);
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    *out->add_before() = std::move(before[i]);
    *out->add_after() = std::move(after[i]);
  }
}

}  // namespace

absl::StatusOr<v1::PlanRebalanceResponse> PlanRebalance(const RebalanceInput& input) {
  const SlotMap& map = input.map;
  EMBER_RETURN_IF_ERROR(CheckInput(input));
  const std::vector<uint32_t> drain = SortedUnique(input.drain);
  std::vector<uint32_t> target_ids;
  for (uint32_t s : SortedUnique(input.shards)) {
    if (!Contains(drain, s)) target_ids.push_back(s);
  }
  if (target_ids.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no shard to receive slots: shards [", absl::StrJoin(input.shards, ","),
                     "] minus drain [", absl::StrJoin(drain, ","), "] is empty"));
  }
  const std::vector<uint32_t>& owners = map.owners();
  EMBER_RETURN_IF_ERROR(CheckOwners(owners, target_ids, drain));
  EMBER_ASSIGN_OR_RETURN(const uint64_t total, TotalWeight(input.slot_weight));

  // Every shard in shards ∪ drain (owners are a subset now), ascending.
  std::vector<uint32_t> ids = target_ids;
  ids.insert(ids.end(), drain.begin(), drain.end());
  ids = SortedUnique(std::move(ids));
  auto index_of = [&ids](uint32_t id) -> size_t {
    return std::lower_bound(ids.begin(), ids.end(), id) - ids.begin();
  };
  std::vector<size_t> targets, drained, owner(kNumSlots);
  for (uint32_t id : target_ids) targets.push_back(index_of(id));
  for (uint32_t id : drain) drained.push_back(index_of(id));
  for (uint32_t s = 0; s < kNumSlots; ++s) owner[s] = index_of(owners[s]);

  // All zero (e.g. a fresh cluster by rows): balance slot counts instead.
  std::vector<uint64_t> weight =
      total == 0 ? std::vector<uint64_t>(kNumSlots, 1) : input.slot_weight;
  Planner planner(ids.size(), targets, drained, owner, std::move(weight));
  planner.Drain();
  planner.Even(input.tolerance);

  v1::PlanRebalanceResponse out;
  out.set_epoch(map.epoch());
  std::vector<size_t> after_owner = owner;
  AddMoves(planner, ids, input, &after_owner, &out);
  AddShardWeights(ids, owner, after_owner, input.slot_weight, &out);
  return out;
}

}  // namespace ember
