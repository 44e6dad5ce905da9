// Copyright 2026 The Ember Authors.
//
// PlanRebalance: a pure planner that turns a slot map, the alive shards, the shards to
// drain and a weight per slot into a MigrationSpec (which slots move from which shard to
// which) plus each shard's weight before and after. It reads nothing and changes
// nothing: the coordinator gathers the inputs and runs the plan.
//
// The plan is greedy:
//   1. Drain: every slot of a drained shard goes to a non-drained shard, in contiguous
//      chunks, each chunk to the currently lightest target, sized to fill it to the mean.
//   2. Even out: repeatedly move slots from the heaviest target to the lightest, taking
//      slots from the end of the donor's slot ranges (so plans have few SlotRanges),
//      until every target is within `tolerance` of the mean weight or no move can
//      narrow the gap between a shard above the mean and the lightest shard.
// A slot is in at most one move (so it is never sent back where it came from); moves
// between the same pair of shards are merged, then split into moves of at most
// `max_slots_per_move` slots. Drain moves come first.
//
// Weights: `slot_weight[s]` is the rows (or load) of slot s. When every weight is 0
// (a fresh cluster planned by rows) the planner balances slot counts instead, as if
// every weight were 1; the reported weights (moves, before, after) are still the input
// weights, i.e. 0. Use all-ones weights to plan by slots.
//
// Deterministic: the same input gives the same plan (ties go to the lower shard id).
// Fast: O(kNumSlots * shards) at worst; 16384 slots over 64 shards in a few ms.
//
// Example:
//   RebalanceInput in;
//   in.map = current_map;
//   in.shards = {0, 1, 2};                            // 2 is new and empty
//   in.slot_weight.assign(kNumSlots, 1);              // by slots
//   EMBER_ASSIGN_OR_RETURN(v1::PlanRebalanceResponse plan, PlanRebalance(in));
//   // plan.spec().moves(): about 1/3 of the slots to shard 2, half from 0, half from 1.

#ifndef EMBER_SERVER_COORDINATOR_REBALANCE_PLANNER_H_
#define EMBER_SERVER_COORDINATOR_REBALANCE_PLANNER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/slot_map.h"
#include "common/slot_ranges.h"
#include "ember/v1/admin.pb.h"
#include "ember/v1/ps.pb.h"
#include "google/protobuf/repeated_ptr_field.h"

namespace ember {

struct RebalanceInput {
  // The current owners. REQUIRES epoch > 0 and every slot owned.
  SlotMap map;
  // Alive shards that may hold slots after the plan (a shard also in `drain` is drained).
  std::vector<uint32_t> shards;
  // Shards that must end with no slot; they may own slots now.
  std::vector<uint32_t> drain;
  // kNumSlots entries: rows or load per slot; all ones to plan by slot counts.
  std::vector<uint64_t> slot_weight;
  // Stop when every target is within this fraction of the mean weight. Default: 0.05.
  double tolerance = 0.05;
  // The most slots in one SlotMove; larger source->target moves are split. Default: 1024.
  uint32_t max_slots_per_move = 1024;
};

// Returns the plan for `input`: spec.moves (source, target, ranges, weight = the sum of
// the moved slots' weights), `before` and `after` (the map with every move applied) for
// every shard in shards ∪ drain ∪ owners, ascending by shard id, and epoch = the map's.
// Empty spec.moves: nothing to do. spec.reason and spec.bytes_per_sec are left unset for
// the caller.
// Returns INVALID_ARGUMENT (and no plan) when: the map's epoch is 0; no shard is left
// to receive slots (shards minus drain is empty); slot_weight.size() != kNumSlots; the
// weights' sum overflows uint64; tolerance is negative or NaN; max_slots_per_move is 0;
// or a slot has no owner, or an owner that is neither in `shards` nor in `drain` (a dead
// or unknown shard, whose rows cannot be copied): the message names the slot range and
// the shard.
absl::StatusOr<v1::PlanRebalanceResponse> PlanRebalance(const RebalanceInput& input);

}  // namespace ember

#endif  // EMBER_SERVER_COORDINATOR_REBALANCE_PLANNER_H_
