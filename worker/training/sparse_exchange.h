// Copyright 2026 The Ember Authors.
//
// The BSP sparse-gradient reduction between workers. In bulk-synchronous mode each
// unique ID of a step is pushed exactly once, with the sum of every worker's gradient
// for it, added in rank order: the PS then applies one deterministic update per ID
// per step, whatever the number of shards or workers' timing (docs/ARCHITECTURE.md invariant 6).
//
// Each ID has an owner rank among the workers (OwnerRank); a worker sends every
// other rank the gradients of the IDs that rank owns (one all-to-all) and sums what
// it receives for its own IDs. Traffic equals one push of the batch; hot IDs that
// several workers touched are pushed once instead of once per worker.

#ifndef EMBER_WORKER_TRAINING_SPARSE_EXCHANGE_H_
#define EMBER_WORKER_TRAINING_SPARSE_EXCHANGE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "worker/collective/collective.h"
#include "worker/training/sparse_features.h"

namespace ember::worker {

// The worker that pushes `id` in BSP mode.
int OwnerRank(uint64_t id, int world_size);

// The gradients one worker pushes for one table in a step.
struct OwnedGradients {
  std::vector<uint64_t> ids;  // unique; first seen over ranks 0..W-1, then batch order
  std::vector<float> grads;   // [ids x dim]
};

// Exchanges and sums the gradients of `batch` (its tables' ids and grads, filled by
// SparseBatch::Backward) so that `out[t]` holds the IDs of table t this rank owns
// with gradients summed over all ranks in rank order. With world_size 1 it copies.
// Errors: the collective's; DATA_LOSS for a malformed message from a peer.
absl::Status ReduceSparseGradients(Collective& collective, const SparseBatch& batch,
                                   std::vector<OwnedGradients>* out);

}  // namespace ember::worker

#endif  // EMBER_WORKER_TRAINING_SPARSE_EXCHANGE_H_
