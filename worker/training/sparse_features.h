// Copyright 2026 The Ember Authors.
//
// The worker's side of a batch's sparse features: SparseBatch and SparseLayout (unique
// IDs per table, pooling and its gradient) are common/model/sparse_batch.h, shared with
// serving's Predict; here is what only training does with them, the pulls.
//
//   SparseBatch sparse(SparseLayout::FromConfig(config));
//   sparse.Build(batch);
//   std::vector<PsHandle> pulls;
//   StartPulls(client, sparse, &pulls);
//   EMBER_RETURN_IF_ERROR(WaitAll(&pulls));
//   sparse.Pool(absl::MakeSpan(pooled));

#ifndef EMBER_WORKER_TRAINING_SPARSE_FEATURES_H_
#define EMBER_WORKER_TRAINING_SPARSE_FEATURES_H_

#include <cstdint>
#include <vector>

#include "common/model/sparse_batch.h"
#include "common/ps_client.h"

namespace ember::worker {

using model::SparseBatch;
using model::SparseLayout;

// Issues one pull per table of `sparse` with IDs (the client splits it per shard and
// runs the parts in parallel) into the tables' `rows`; wait with WaitAll. `sparse`
// must stay alive and unchanged until then. `step`: the training step the rows are
// for (PullRequest.step: replica holders refuse copies too far behind it; 0 unknown).
void StartPulls(PsClient& client, SparseBatch& sparse, std::vector<PsHandle>* handles,
                int64_t step = 0);

}  // namespace ember::worker

#endif  // EMBER_WORKER_TRAINING_SPARSE_FEATURES_H_
