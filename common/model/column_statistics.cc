// Copyright 2026 The Ember Authors.

#include "common/model/column_statistics.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ember::model {
namespace {

using v1::ColumnConfig;

std::string ColumnField(int i, const ColumnConfig& c) {
  return absl::StrCat("data.columns[", i, "] (", c.name(), ")");
}

// What column `c` (needing statistics) lacks, for messages.
std::string Lacking(const ColumnConfig& c) {
  return c.kind() == ColumnConfig::DENSE ? "standardize needs mean and std"
                                         : "quantiles needs its boundaries";
}

}  // namespace

bool ColumnNeedsStatistics(const ColumnConfig& c) {
  if (c.kind() == ColumnConfig::DENSE) return c.standardize() && !(c.has_mean() && c.has_std());
  if (c.kind() == ColumnConfig::BUCKETIZED) return c.boundaries().empty() && c.quantiles() > 0;
  return false;
}

bool NeedsStatistics(const v1::ModelConfig& config) {
  for (const ColumnConfig& c : config.data().columns()) {
    if (ColumnNeedsStatistics(c)) return true;
  }
  return false;
}

absl::Status CheckStatistics(const v1::ModelConfig& config, absl::string_view origin) {
  for (int i = 0; i < config.data().columns_size(); ++i) {
    const ColumnConfig& c = config.data().columns(i);
    if (!ColumnNeedsStatistics(c)) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": ", ColumnField(i, c), ": ", Lacking(c),
        ", which this config lacks: a training job computes them from its data before "
        "training and stores them in its checkpoints' config; give them in the config, "
        "or use a checkpoint's config"));
  }
  return absl::OkStatus();
}

absl::Status CopyStatistics(const v1::ModelConfig& from, absl::string_view from_name,
                            v1::ModelConfig* to) {
  std::map<std::string, const ColumnConfig*> saved;
  for (const ColumnConfig& c : from.data().columns()) saved[c.name()] = &c;
  for (int i = 0; i < to->data().columns_size(); ++i) {
    ColumnConfig* c = to->mutable_data()->mutable_columns(i);
    if (!ColumnNeedsStatistics(*c)) continue;
    auto it = saved.find(c->name());
    if (it == saved.end() || it->second->kind() != c->kind() ||
        ColumnNeedsStatistics(*it->second)) {
      return absl::InvalidArgumentError(absl::StrCat(
          from_name, " lacks the statistics of ", ColumnField(i, *c), ": ", Lacking(*c),
          " (its config has ", it == saved.end() ? "no such column" : "none", ")"));
    }
    if (c->kind() == ColumnConfig::DENSE) {
      c->set_mean(it->second->mean());
      c->set_std(it->second->std());
    } else {
      *c->mutable_boundaries() = it->second->boundaries();
    }
  }
  return absl::OkStatus();
}

absl::Status FillStatistics(const ColumnSample& sample, v1::ModelConfig* config) {
  for (int i = 0; i < config->data().columns_size(); ++i) {
    ColumnConfig* c = config->mutable_data()->mutable_columns(i);
    if (!ColumnNeedsStatistics(*c)) continue;
    auto it = sample.find(c->name());
    if (it == sample.end() || it->second.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          ColumnField(i, *c), ": ", Lacking(*c), ", but the statistics sample has no ",
          c->kind() == ColumnConfig::DENSE ? "examples" : "non-empty values of the column"));
    }
    const std::vector<float>& values = it->second;
    if (c->kind() == ColumnConfig::DENSE) {
      double sum = 0;
      for (float v : values) sum += v;
      const double mean = sum / static_cast<double>(values.size());
      double squares = 0;
      for (float v : values) squares += (v - mean) * (v - mean);
      const float std = static_cast<float>(std::sqrt(squares / static_cast<double>(values.size())));
      c->set_mean(static_cast<float>(mean));
      c->set_std(std > 0 && std::isfinite(std) ? std : 1.0f);
    } else {
      for (float b : QuantileBoundaries(values, c->quantiles())) c->add_boundaries(b);
    }
  }
  return absl::OkStatus();
}

std::vector<float> QuantileBoundaries(std::vector<float> values, uint32_t quantiles) {
  std::sort(values.begin(), values.end());
  std::vector<float> boundaries;
  const uint64_t m = values.size();
  for (uint64_t i = 1; i < quantiles && m > 0; ++i) {
    const float b = values[i * m / quantiles];
    if (boundaries.empty() || boundaries.back() < b) boundaries.push_back(b);
  }
  return boundaries;
}

}  // namespace ember::model
