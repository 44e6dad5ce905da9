// Copyright 2026 The Ember Authors.

#include "worker/data/statistics_pass.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/model/column_statistics.h"
#include "common/model/example_batch.h"
#include "common/status_macros.h"
#include "worker/data/reader.h"

namespace ember::worker {
namespace {

using v1::ColumnConfig;

constexpr int kBatch = 4096;

// The config the sample is read with: the label, each DENSE column that needs
// statistics as a DENSE column without standardizing (its value after the missing
// value, the transform and clipping), each BUCKETIZED one that needs them as an EVAL
// column (empty = NaN, left out of the sample); everything else ignored, or dropped
// (CROSS columns, which are not in the files); no features, partitioned by file.
// `*dense` and `*eval` get the sampled columns' names in batch order.
v1::ModelConfig SampleConfig(const v1::ModelConfig& config, std::vector<std::string>* dense,
                             std::vector<std::string>* eval) {
  v1::ModelConfig sample = config;
  sample.clear_features();
  sample.clear_eval();
  sample.clear_skew();
  sample.mutable_dense()->clear_tasks();  // its TASK_LABEL columns are ignored here
  sample.mutable_data()->set_partition_by("file");
  sample.mutable_data()->clear_columns();
  for (const ColumnConfig& c : config.data().columns()) {
    if (c.kind() == ColumnConfig::CROSS) continue;
    ColumnConfig* s = sample.mutable_data()->add_columns();
    s->set_name(c.name());
    s->set_source(c.source());
    s->set_kind(ColumnConfig::IGNORE);
    if (c.kind() == ColumnConfig::LABEL) {
      s->set_kind(ColumnConfig::LABEL);
    } else if (model::ColumnNeedsStatistics(c) && c.kind() == ColumnConfig::DENSE) {
      *s = c;
      s->clear_standardize();
      s->clear_mean();
      s->clear_std();
      dense->push_back(c.name());
    } else if (model::ColumnNeedsStatistics(c)) {
      s->set_kind(ColumnConfig::EVAL);
      eval->push_back(c.name());
    }
  }
  return sample;
}

}  // namespace

absl::StatusOr<v1::ModelConfig> ComputeStatistics(const v1::ModelConfig& config) {
  if (!model::NeedsStatistics(config)) return config;
  std::vector<std::string> dense, eval;
  const v1::ModelConfig sample_config = SampleConfig(config, &dense, &eval);
  ReaderOptions options;
  options.with_eval_columns = true;
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<DatasetReader> reader,
                         DatasetReader::Open(sample_config, config.data().train_path(), options));
  model::ColumnSample sample;
  for (const std::string& name : dense) sample[name];
  for (const std::string& name : eval) sample[name];
  model::ExampleBatch batch;
  uint64_t left = config.statistics_max_examples();
  while (left > 0) {
    EMBER_ASSIGN_OR_RETURN(
        bool more, reader->Next(static_cast<int>(std::min<uint64_t>(left, kBatch)), &batch));
    if (!more) break;
    left -= static_cast<uint64_t>(batch.size);
    const size_t num_dense = dense.size();
    for (size_t i = 0; i < num_dense; ++i) {
      std::vector<float>& values = sample[dense[i]];
      for (int e = 0; e < batch.size; ++e) values.push_back(batch.dense[e * num_dense + i]);
    }
    for (size_t i = 0; i < eval.size(); ++i) {
      std::vector<float>& values = sample[eval[i]];
      for (float v : batch.eval[i]) {
        if (!std::isnan(v)) values.push_back(v);  // NaN: an empty value
      }
    }
  }
  v1::ModelConfig filled = config;
  EMBER_RETURN_IF_ERROR(model::FillStatistics(sample, &filled));
  return filled;
}

}  // namespace ember::worker
