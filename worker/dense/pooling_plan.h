// Copyright 2026 The Ember Authors.
//
// PoolingPlan: the index arrays that sum / mean pooling of multi-hot features needs on
// a device, built on the host. Forward is a CSR over bags (bag = feature f, example b:
// f * batch + b) listing row ids in each feature's table; Backward is the transposed
// CSR per table, listing for each row the bags it appears in, in the order the CPU's
// SparseBatch::Backward adds them (feature, then example, then position), so a device
// kernel that follows it gives bitwise the CPU's row gradients without atomics.
// Forward / Backward here are the CPU references (the same arithmetic as
// SparseBatch::Pool / Backward) that the CUDA kernels are checked against.
//
//   absl::StatusOr<PoolingPlan> plan = PoolingPlan::Build(batch, features, table_rows,
//                                                         offsets, ids);
//   plan->Forward(rows, pooled);   // rows: every table's rows, back to back
//
// Immutable after Build; thread-compatible.

#ifndef EMBER_WORKER_DENSE_POOLING_PLAN_H_
#define EMBER_WORKER_DENSE_POOLING_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ember::worker {

struct PoolingFeature {
  int table = 0;          // index into table_rows
  int dim = 0;            // the table's dim (every feature of a table agrees)
  int pooled_offset = 0;  // first column of this feature in a pooled row
  bool mean = false;      // MEAN (else SUM); a bag of 0 or 1 ids is never scaled
};

class PoolingPlan {
 public:
  // `offsets[f]` has batch + 1 non-decreasing entries starting at 0, CSR into `ids[f]`
  // (row numbers in feature f's table, each below table_rows[table]). Features lie side
  // by side in the pooled row: pooled_width is the largest pooled_offset + dim.
  // INVALID_ARGUMENT for any violation (naming the feature and what is wrong), for a
  // negative batch, for features of one table with different dims, and for more than
  // 2^32 - 1 ids in all.
  static absl::StatusOr<PoolingPlan> Build(int batch, std::vector<PoolingFeature> features,
                                           std::vector<uint32_t> table_rows,
                                           const std::vector<std::vector<uint32_t>>& offsets,
                                           const std::vector<std::vector<uint32_t>>& ids);

  int batch() const { return batch_; }
  int pooled_width() const { return pooled_width_; }
  const std::vector<PoolingFeature>& features() const { return features_; }
  size_t num_tables() const { return table_rows_.size(); }
  uint32_t table_rows(size_t t) const { return table_rows_[t]; }
  int table_dim(size_t t) const { return table_dim_[t]; }
  // Float offset of table t's first row in the back-to-back rows buffer, and its size.
  size_t table_offset(size_t t) const { return table_offset_[t]; }
  size_t rows_floats() const { return table_offset_.back(); }

  // Forward CSR: bag_begin has F * batch + 1 entries, into ids().
  const std::vector<uint32_t>& bag_begin() const { return bag_begin_; }
  const std::vector<uint32_t>& ids() const { return ids_; }
  // Backward CSR of table t: row_begin(t) has table_rows(t) + 1 entries, into row_bags(t).
  const std::vector<uint32_t>& row_begin(size_t t) const { return row_begin_[t]; }
  const std::vector<uint32_t>& row_bags(size_t t) const { return row_bags_[t]; }

  // pooled [batch x pooled_width] from rows [rows_floats()]; columns no feature covers
  // are set to 0.
  void Forward(absl::Span<const float> rows, absl::Span<float> pooled) const;
  // d_rows [rows_floats()] from d_pooled [batch x pooled_width].
  void Backward(absl::Span<const float> d_pooled, absl::Span<float> d_rows) const;

 private:
  PoolingPlan() = default;

  // Build's phases. CheckFeatures: Build's checks of each feature and its CSR; sets
  // table_dim_ and pooled_width_ and the total id count (batch_ set).
  absl::Status CheckFeatures(const std::vector<PoolingFeature>& features,
                             const std::vector<uint32_t>& table_rows,
                             const std::vector<std::vector<uint32_t>>& offsets,
                             const std::vector<std::vector<uint32_t>>& ids, size_t* total);
  // The forward CSR over bags (bag_begin_, ids_), features outermost.
  void BuildForward(const std::vector<std::vector<uint32_t>>& offsets,
                    const std::vector<std::vector<uint32_t>>& ids, size_t total_ids);
  // The backward CSR per table (row_begin_, row_bags_) by counting sort, which keeps
  // the (feature, bag, id) order.
  void BuildBackward(const std::vector<PoolingFeature>& features,
                     const std::vector<uint32_t>& table_rows,
                     const std::vector<std::vector<uint32_t>>& offsets,
                     const std::vector<std::vector<uint32_t>>& ids);

  int batch_ = 0;
  int pooled_width_ = 0;
  std::vector<PoolingFeature> features_;
  std::vector<uint32_t> table_rows_;
  std::vector<int> table_dim_;
  std::vector<size_t> table_offset_;  // num_tables + 1 entries
  std::vector<uint32_t> bag_begin_, ids_;
  std::vector<std::vector<uint32_t>> row_begin_, row_bags_;
};

}  // namespace ember::worker

#endif  // EMBER_WORKER_DENSE_POOLING_PLAN_H_
