// Copyright 2026 The Ember Authors.
//
// ExampleBatch: a batch of parsed examples, the unit the readers produce and the
// trainer consumes. Column-major per kind: labels, weights, dense features, one ID
// list per sparse feature (CSR: offsets + ids), and EVAL columns (test data only).
// Feature order is the model config's order: `dense` columns in ModelConfig
// data.columns order (kind DENSE), `sparse` in ModelConfig.features order, `eval` in
// data.columns order (kind EVAL).

#ifndef EMBER_COMMON_MODEL_EXAMPLE_BATCH_H_
#define EMBER_COMMON_MODEL_EXAMPLE_BATCH_H_

#include <cstdint>
#include <vector>

namespace ember::model {

// The IDs of one sparse feature for a batch, CSR layout: the IDs of example i are
// ids[offsets[i] .. offsets[i + 1]). offsets.size() == size + 1, offsets[0] == 0.
struct SparseColumn {
  std::vector<uint64_t> ids;
  std::vector<uint32_t> offsets{0};
};

struct ExampleBatch {
  int size = 0;                // examples in the batch
  std::vector<float> labels;   // [size], 0 or 1
  std::vector<float> weights;  // [size], 1 unless the data has a WEIGHT column
  int num_dense = 0;
  std::vector<float> dense;              // [size x num_dense], row-major, transformed
  std::vector<SparseColumn> sparse;      // one per ModelConfig.features entry
  std::vector<std::vector<float>> eval;  // one per EVAL column, each [size]
  // Multi-task: one per DenseTowerConfig.tasks entry (its TASK_LABEL column), each
  // [size], 0 or 1; empty for a single-task model (LineParser::AppendTo sizes it).
  std::vector<std::vector<float>> task_labels;

  // Empties every column, keeping capacity; sets the column counts.
  void Reset(int num_dense_columns, int num_sparse_features, int num_eval_columns) {
    size = 0;
    labels.clear();
    weights.clear();
    num_dense = num_dense_columns;
    dense.clear();
    sparse.resize(num_sparse_features);
    for (SparseColumn& s : sparse) {
      s.ids.clear();
      s.offsets.assign(1, 0);
    }
    eval.resize(num_eval_columns);
    for (std::vector<float>& e : eval) e.clear();
    for (std::vector<float>& t : task_labels) t.clear();
  }
};

}  // namespace ember::model

#endif  // EMBER_COMMON_MODEL_EXAMPLE_BATCH_H_
