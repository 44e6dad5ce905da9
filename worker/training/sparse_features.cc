// Copyright 2026 The Ember Authors.

#include "worker/training/sparse_features.h"

namespace ember::worker {

void StartPulls(PsClient& client, SparseBatch& sparse, std::vector<PsHandle>* handles,
                int64_t step) {
  PsCallOptions call;
  call.step = step;
  for (int t = 0; t < sparse.num_tables(); ++t) {
    SparseBatch::TableData& table = sparse.table(t);
    if (table.ids.empty()) continue;
    handles->push_back(client.PullAsync(sparse.layout().tables[t].name, table.ids,
                                        absl::MakeSpan(table.rows), call));
  }
}

}  // namespace ember::worker
