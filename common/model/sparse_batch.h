// Copyright 2026 The Ember Authors.
//
// SparseBatch: the sparse side of one batch of examples. It turns the per-feature ID
// lists of an ExampleBatch into, per embedding table, the batch's unique IDs (what is
// pulled and pushed, once each), pools the pulled rows into the tower's input and
// scatters the tower's input gradient back into one gradient per unique ID.
//
//   SparseLayout layout = SparseLayout::FromConfig(config);   // once per job
//   SparseBatch sparse(layout);
//   sparse.Build(batch);                   // unique IDs per table
//   ...pull sparse.table(t).ids into sparse.table(t).rows...
//   sparse.Pool(absl::MakeSpan(pooled));   // [B x layout.pooled_width()]
//   ...tower forward/backward gives d_pooled...
//   sparse.Backward(d_pooled);             // sparse.table(t).grads, per unique ID
//
// Unique IDs are kept in first-seen order (features in config order, examples in
// order), so the same batch always yields the same order (BSP determinism).
//
// It lives in common/model/ because the training worker (worker/training/) and the
// serving follower's Predict (server/serving/) both pool with it: an example's pooled
// input is the same bits in both (Pool's sum runs over the example's IDs in order).
//
// Thread-safety: none.

#ifndef EMBER_COMMON_MODEL_SPARSE_BATCH_H_
#define EMBER_COMMON_MODEL_SPARSE_BATCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "common/model/example_batch.h"
#include "ember/v1/model.pb.h"

namespace ember::model {

// How features map to tables and to slices of the pooled tower input.
struct SparseLayout {
  struct Table {
    std::string name;
    int dim = 0;
  };
  struct Feature {
    std::string name;
    int table = 0;  // index into tables
    int dim = 0;
    bool mean = false;      // MEAN pooling (else SUM)
    int pooled_offset = 0;  // first column of this feature in a pooled row
  };
  std::vector<Table> tables;      // in ModelConfig.tables order
  std::vector<Feature> features;  // in ModelConfig.features order
  int pooled_width = 0;           // sum of feature dims

  // REQUIRES: `config` normalized (every feature names an existing table).
  static SparseLayout FromConfig(const v1::ModelConfig& config);
  std::vector<int> FeatureDims() const;
};

class SparseBatch {
 public:
  struct TableData {
    std::vector<uint64_t> ids;  // unique, first-seen order
    std::vector<float> rows;    // [ids x dim]: filled by the caller (pull)
    std::vector<float> grads;   // [ids x dim]: filled by Backward
  };

  explicit SparseBatch(SparseLayout layout);

  // Collects the unique IDs per table of `batch` and sizes rows/grads.
  // REQUIRES: batch.sparse.size() == number of features.
  void Build(const ExampleBatch& batch);

  int batch_size() const { return batch_size_; }
  const SparseLayout& layout() const { return layout_; }
  TableData& table(int t) { return tables_[t]; }
  const TableData& table(int t) const { return tables_[t]; }
  int num_tables() const { return static_cast<int>(tables_.size()); }
  // Total unique IDs over tables.
  size_t unique_ids() const;
  // Feature f's IDs of the built batch as positions in its table's `ids`, in the
  // batch's order (CSR with the batch's offsets).
  const std::vector<uint32_t>& occurrences(int f) const { return index_[f]; }

  // Writes the pooled features: pooled[b * width + offset_f + j] = sum (or mean) over
  // example b's IDs of feature f of row[j]. REQUIRES: rows pulled;
  // pooled.size() == batch_size() * pooled_width.
  void Pool(absl::Span<float> pooled) const;

  // Overwrites every table's grads with the gradient of each unique row, given the
  // gradient of the pooled input (same layout as Pool's output).
  void Backward(absl::Span<const float> d_pooled);

 private:
  SparseLayout layout_;
  int batch_size_ = 0;
  std::vector<TableData> tables_;
  // Per feature, CSR like ExampleBatch: index of each occurrence in its table's ids.
  std::vector<std::vector<uint32_t>> index_;
  std::vector<std::vector<uint32_t>> offsets_;
  std::vector<absl::flat_hash_map<uint64_t, uint32_t>> seen_;  // per table, reused
};

}  // namespace ember::model

#endif  // EMBER_COMMON_MODEL_SPARSE_BATCH_H_
