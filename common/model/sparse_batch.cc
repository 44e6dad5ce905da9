// Copyright 2026 The Ember Authors.

#include "common/model/sparse_batch.h"

#include <algorithm>
#include <utility>

namespace ember::model {

SparseLayout SparseLayout::FromConfig(const v1::ModelConfig& config) {
  SparseLayout layout;
  absl::flat_hash_map<std::string, int> table_index;
  for (const v1::TableConfig& t : config.tables()) {
    table_index[t.name()] = static_cast<int>(layout.tables.size());
    layout.tables.push_back({t.name(), static_cast<int>(t.dim())});
  }
  for (const v1::FeatureConfig& f : config.features()) {
    Feature feature;
    feature.name = f.name();
    feature.table = table_index.at(f.table());
    feature.dim = layout.tables[feature.table].dim;
    feature.mean = f.pooling() == v1::FeatureConfig::MEAN;
    feature.pooled_offset = layout.pooled_width;
    layout.pooled_width += feature.dim;
    layout.features.push_back(std::move(feature));
  }
  return layout;
}

std::vector<int> SparseLayout::FeatureDims() const {
  std::vector<int> dims;
  for (const Feature& f : features) dims.push_back(f.dim);
  return dims;
}

SparseBatch::SparseBatch(SparseLayout layout)
    : layout_(std::move(layout)),
      tables_(layout_.tables.size()),
      index_(layout_.features.size()),
      offsets_(layout_.features.size()),
      seen_(layout_.tables.size()) {}

size_t SparseBatch::unique_ids() const {
  size_t n = 0;
  for (const TableData& t : tables_) n += t.ids.size();
  return n;
}

void SparseBatch::Build(const ExampleBatch& batch) {
  batch_size_ = batch.size;
  for (size_t t = 0; t < tables_.size(); ++t) {
    tables_[t].ids.clear();
    seen_[t].clear();
  }
  for (size_t f = 0; f < layout_.features.size(); ++f) {
    const SparseColumn& column = batch.sparse[f];
    const int t = layout_.features[f].table;
    std::vector<uint64_t>& ids = tables_[t].ids;
    absl::flat_hash_map<uint64_t, uint32_t>& seen = seen_[t];
    std::vector<uint32_t>& index = index_[f];
    index.resize(column.ids.size());
    for (size_t i = 0; i < column.ids.size(); ++i) {
      auto [it, inserted] = seen.try_emplace(column.ids[i], static_cast<uint32_t>(ids.size()));
      if (inserted) ids.push_back(column.ids[i]);
      index[i] = it->second;
    }
    offsets_[f] = column.offsets;
  }
  for (size_t t = 0; t < tables_.size(); ++t) {
    const size_t n = tables_[t].ids.size() * layout_.tables[t].dim;
    tables_[t].rows.resize(n);
    tables_[t].grads.resize(n);
  }
}

void SparseBatch::Pool(absl::Span<float> pooled) const {
  const int width = layout_.pooled_width;
  std::fill(pooled.begin(), pooled.end(), 0.0f);
  for (size_t f = 0; f < layout_.features.size(); ++f) {
    const SparseLayout::Feature& feature = layout_.features[f];
    const int dim = feature.dim;
    const float* rows = tables_[feature.table].rows.data();
    const std::vector<uint32_t>& index = index_[f];
    const std::vector<uint32_t>& offsets = offsets_[f];
    for (int b = 0; b < batch_size_; ++b) {
      float* out = pooled.data() + static_cast<size_t>(b) * width + feature.pooled_offset;
      const uint32_t begin = offsets[b], end = offsets[b + 1];
      for (uint32_t k = begin; k < end; ++k) {
        const float* row = rows + static_cast<size_t>(index[k]) * dim;
        for (int j = 0; j < dim; ++j) out[j] += row[j];
      }
      if (feature.mean && end - begin > 1) {
        const float scale = 1.0f / static_cast<float>(end - begin);
        for (int j = 0; j < dim; ++j) out[j] *= scale;
      }
    }
  }
}

void SparseBatch::Backward(absl::Span<const float> d_pooled) {
  const int width = layout_.pooled_width;
  for (TableData& t : tables_) std::fill(t.grads.begin(), t.grads.end(), 0.0f);
  for (size_t f = 0; f < layout_.features.size(); ++f) {
    const SparseLayout::Feature& feature = layout_.features[f];
    const int dim = feature.dim;
    float* grads = tables_[feature.table].grads.data();
    const std::vector<uint32_t>& index = index_[f];
    const std::vector<uint32_t>& offsets = offsets_[f];
    for (int b = 0; b < batch_size_; ++b) {
      const float* in = d_pooled.data() + static_cast<size_t>(b) * width + feature.pooled_offset;
      const uint32_t begin = offsets[b], end = offsets[b + 1];
      const float scale =
          feature.mean && end - begin > 1 ? 1.0f / static_cast<float>(end - begin) : 1.0f;
      for (uint32_t k = begin; k < end; ++k) {
        float* g = grads + static_cast<size_t>(index[k]) * dim;
        for (int j = 0; j < dim; ++j) g[j] += in[j] * scale;
      }
    }
  }
}

}  // namespace ember::model
