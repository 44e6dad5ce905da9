// Copyright 2026 The Ember Authors.

#include "worker/dense/pooling_plan.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ember::worker {

absl::StatusOr<PoolingPlan> PoolingPlan::Build(int batch, std::vector<PoolingFeature> features,
                                               std::vector<uint32_t> table_rows,
                                               const std::vector<std::vector<uint32_t>>& offsets,
                                               const std::vector<std::vector<uint32_t>>& ids) {
  if (batch < 0) return absl::InvalidArgumentError(absl::StrCat("pooling: batch ", batch));
  const size_t num_features = features.size();
  if (offsets.size() != num_features || ids.size() != num_features) {
    return absl::InvalidArgumentError(absl::StrCat("pooling: ", num_features, " features but ",
                                                   offsets.size(), " offset lists and ", ids.size(),
                                                   " id lists"));
  }
  PoolingPlan plan;
  plan.batch_ = batch;
  size_t total_ids = 0;
  if (absl::Status s = plan.CheckFeatures(features, table_rows, offsets, ids, &total_ids);
      !s.ok()) {
    return s;
  }
  plan.table_offset_.assign(table_rows.size() + 1, 0);
  for (size_t t = 0; t < table_rows.size(); ++t) {
    plan.table_offset_[t + 1] =
        plan.table_offset_[t] + size_t{table_rows[t]} * static_cast<size_t>(plan.table_dim_[t]);
  }

  plan.BuildForward(offsets, ids, total_ids);
  plan.BuildBackward(features, table_rows, offsets, ids);
  plan.features_ = std::move(features);
  plan.table_rows_ = std::move(table_rows);
  return plan;
}

absl::Status PoolingPlan::CheckFeatures(const std::vector<PoolingFeature>& features,
                                        const std::vector<uint32_t>& table_rows,
                                        const std::vector<std::vector<uint32_t>>& offsets,
                                        const std::vector<std::vector<uint32_t>>& ids,
                                        size_t* total) {
  const int batch = batch_;
  table_dim_.assign(table_rows.size(), 0);
  size_t total_ids = 0;
  const size_t num_features = features.size();
  for (size_t f = 0; f < num_features; ++f) {
    const PoolingFeature& feature = features[f];
    const std::string name = absl::StrCat("pooling: feature ", f, ": ");
    if (feature.table < 0 || static_cast<size_t>(feature.table) >= table_rows.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, "table ", feature.table, " does not exist (", table_rows.size(), " tables)"));
    }
    if (feature.dim <= 0 || feature.pooled_offset < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, "dim ", feature.dim, ", pooled offset ", feature.pooled_offset));
    }
    int& table_dim = table_dim_[feature.table];
    if (table_dim != 0 && table_dim != feature.dim) {
      return absl::InvalidArgumentError(absl::StrCat(name, "dim ", feature.dim, " but table ",
                                                     feature.table, " has dim ", table_dim));
    }
    table_dim = feature.dim;
    pooled_width_ = std::max(pooled_width_, feature.pooled_offset + feature.dim);
    const std::vector<uint32_t>& off = offsets[f];
    if (off.size() != static_cast<size_t>(batch) + 1 || off.front() != 0 ||
        off.back() != ids[f].size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, "offsets must have batch + 1 = ", batch + 1,
                       " entries from 0 to the id count ", ids[f].size(), "; have ", off.size()));
    }
    if (!std::is_sorted(off.begin(), off.end())) {
      return absl::InvalidArgumentError(absl::StrCat(name, "offsets decrease"));
    }
    for (uint32_t id : ids[f]) {
      if (id >= table_rows[feature.table]) {
        return absl::InvalidArgumentError(absl::StrCat(name, "id ", id, " is past table ",
                                                       feature.table, "'s ",
                                                       table_rows[feature.table], " rows"));
      }
    }
    total_ids += ids[f].size();
  }
  if (total_ids >= std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError("pooling: more than 2^32 - 1 ids");
  }
  *total = total_ids;
  return absl::OkStatus();
}

void PoolingPlan::BuildForward(const std::vector<std::vector<uint32_t>>& offsets,
                               const std::vector<std::vector<uint32_t>>& ids, size_t total_ids) {
  const size_t num_features = offsets.size();
  const int batch = batch_;
  // Forward CSR over bags, features outermost.
  bag_begin_.reserve(num_features * batch + 1);
  ids_.reserve(total_ids);
  bag_begin_.push_back(0);
  for (size_t f = 0; f < num_features; ++f) {
    for (int b = 0; b < batch; ++b) {
      for (uint32_t k = offsets[f][b]; k < offsets[f][b + 1]; ++k) ids_.push_back(ids[f][k]);
      bag_begin_.push_back(static_cast<uint32_t>(ids_.size()));
    }
  }
}

void PoolingPlan::BuildBackward(const std::vector<PoolingFeature>& features,
                                const std::vector<uint32_t>& table_rows,
                                const std::vector<std::vector<uint32_t>>& offsets,
                                const std::vector<std::vector<uint32_t>>& ids) {
  const size_t num_features = features.size();
  const int batch = batch_;
  // Backward CSR per table by counting sort, which keeps the (f, b, k) order.
  row_begin_.resize(table_rows.size());
  row_bags_.resize(table_rows.size());
  for (size_t t = 0; t < table_rows.size(); ++t) row_begin_[t].assign(table_rows[t] + 1, 0);
  for (size_t f = 0; f < num_features; ++f) {
    std::vector<uint32_t>& begin = row_begin_[features[f].table];
    for (uint32_t id : ids[f]) ++begin[id + 1];
  }
  std::vector<std::vector<uint32_t>> cursor(table_rows.size());
  for (size_t t = 0; t < table_rows.size(); ++t) {
    std::vector<uint32_t>& begin = row_begin_[t];
    for (size_t r = 1; r < begin.size(); ++r) begin[r] += begin[r - 1];
    row_bags_[t].resize(begin.back());
    cursor[t].assign(begin.begin(), begin.end() - 1);
  }
  for (size_t f = 0; f < num_features; ++f) {
    const int t = features[f].table;
    for (int b = 0; b < batch; ++b) {
      const uint32_t bag = static_cast<uint32_t>(f * batch + b);
      for (uint32_t k = offsets[f][b]; k < offsets[f][b + 1]; ++k) {
        row_bags_[t][cursor[t][ids[f][k]]++] = bag;
      }
    }
  }
}

void PoolingPlan::Forward(absl::Span<const float> rows, absl::Span<float> pooled) const {
  std::fill(pooled.begin(), pooled.end(), 0.0f);
  for (size_t f = 0; f < features_.size(); ++f) {
    const PoolingFeature& feature = features_[f];
    const float* table = rows.data() + table_offset_[feature.table];
    for (int b = 0; b < batch_; ++b) {
      const size_t bag = f * batch_ + b;
      float* out = pooled.data() + static_cast<size_t>(b) * pooled_width_ + feature.pooled_offset;
      const uint32_t begin = bag_begin_[bag], end = bag_begin_[bag + 1];
      for (uint32_t k = begin; k < end; ++k) {
        const float* row = table + static_cast<size_t>(ids_[k]) * feature.dim;
        for (int j = 0; j < feature.dim; ++j) out[j] += row[j];
      }
      if (feature.mean && end - begin > 1) {
        const float scale = 1.0f / static_cast<float>(end - begin);
        for (int j = 0; j < feature.dim; ++j) out[j] *= scale;
      }
    }
  }
}

void PoolingPlan::Backward(absl::Span<const float> d_pooled, absl::Span<float> d_rows) const {
  for (size_t t = 0; t < table_rows_.size(); ++t) {
    const int dim = table_dim_[t];
    for (uint32_t r = 0; r < table_rows_[t]; ++r) {
      float* g = d_rows.data() + table_offset_[t] + static_cast<size_t>(r) * dim;
      std::fill(g, g + dim, 0.0f);
      for (uint32_t c = row_begin_[t][r]; c < row_begin_[t][r + 1]; ++c) {
        const uint32_t bag = row_bags_[t][c];
        const PoolingFeature& feature = features_[bag / batch_];
        const int b = static_cast<int>(bag % batch_);
        const uint32_t count = bag_begin_[bag + 1] - bag_begin_[bag];
        const float scale = feature.mean && count > 1 ? 1.0f / static_cast<float>(count) : 1.0f;
        const float* in =
            d_pooled.data() + static_cast<size_t>(b) * pooled_width_ + feature.pooled_offset;
        for (int j = 0; j < dim; ++j) g[j] += in[j] * scale;
      }
    }
  }
}

}  // namespace ember::worker
