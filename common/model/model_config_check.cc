// Copyright 2026 The Ember Authors.
//
// The model config's validation (model_config_check.h): every field checked once
// the defaults are filled, each error INVALID_ARGUMENT "origin: field: message".

#include "common/model/model_config_check.h"

#include <cmath>
#include <map>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/model/model_config.h"
#include "common/status_macros.h"

namespace ember::model::internal {
namespace {

using v1::ColumnConfig;
using v1::DataConfig;
using v1::DenseOptimizerConfig;
using v1::DenseTowerConfig;
using v1::FeatureConfig;
using v1::ModelConfig;
using v1::TrainingConfig;

constexpr uint32_t kMaxTableDim = 4096;
// A sanity cap on MLP layer sizes: larger is a typo, not a model.
constexpr uint32_t kMaxLayerSize = 1 << 16;
// Sanity caps of the skew options (model.proto SkewConfig).
constexpr uint64_t kMaxColdCount = 1000000000;
constexpr float kMaxColdLossWeight = 1000;
constexpr uint32_t kMaxReplayCapacity = 1 << 20;
constexpr uint64_t kMaxTrackedIds = 1000000000;
constexpr uint32_t kMaxHotCacheSteps = 1000000;
constexpr uint64_t kMaxHotCacheRows = 1 << 26;
constexpr uint32_t kMaxCrossLayers = 8;
// Most equal-frequency buckets of a BUCKETIZED column.
constexpr uint32_t kMaxQuantiles = 1 << 16;

bool ValidTableName(absl::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') {
      return false;
    }
  }
  return true;
}

bool IsCriteoColumnName(absl::string_view name) {
  if (name == "label") return true;
  for (int i = 1; i <= kCriteoDense; ++i) {
    if (name == absl::StrCat("I", i)) return true;
  }
  for (int i = 1; i <= kCriteoCategorical; ++i) {
    if (name == absl::StrCat("C", i)) return true;
  }
  return false;
}

// Builds INVALID_ARGUMENT errors "origin: field: message".
class Checker {
 public:
  explicit Checker(const std::string& origin) : origin_(origin) {}

  template <typename... Args>
  absl::Status Error(absl::string_view field, const Args&... message) const {
    return absl::InvalidArgumentError(absl::StrCat(origin_, ": ", field, ": ", message...));
  }

 private:
  const std::string& origin_;
};

// Whether a column of this kind gives IDs (a feature may read it).
bool IdKind(ColumnConfig::Kind kind) {
  return kind == ColumnConfig::CATEGORICAL || kind == ColumnConfig::MULTI_HOT ||
         kind == ColumnConfig::BUCKETIZED || kind == ColumnConfig::CROSS;
}

std::string ColumnField(int i, const ColumnConfig& c) {
  return absl::StrCat("data.columns[", i, "] (", c.name(), ")");
}

// The feature-transform fields of one column (model.proto ColumnConfig 7-14): each
// only on its kind, finite, clip_min <= clip_max, mean and std together (std > 0),
// boundaries strictly increasing, quantiles in range, a BUCKETIZED column with
// boundaries or quantiles. Statistics may be missing (CheckStatistics).
absl::Status CheckTransforms(const ColumnConfig& c, const std::string& field,
                             const Checker& check) {
  const bool dense = c.kind() == ColumnConfig::DENSE;
  const bool bucketized = c.kind() == ColumnConfig::BUCKETIZED;
  if ((c.has_clip_min() || c.has_clip_max() || c.standardize() || c.has_mean() || c.has_std()) &&
      !dense) {
    return check.Error(field,
                       "clip_min, clip_max, standardize, mean and std apply to DENSE "
                       "columns only");
  }
  if (c.has_clip_min() && !std::isfinite(c.clip_min())) {
    return check.Error(field, "clip_min is not finite");
  }
  if (c.has_clip_max() && !std::isfinite(c.clip_max())) {
    return check.Error(field, "clip_max is not finite");
  }
  if (c.has_clip_min() && c.has_clip_max() && c.clip_min() > c.clip_max()) {
    return check.Error(field, "clip_min ", c.clip_min(), " is above clip_max ", c.clip_max());
  }
  if ((c.has_mean() || c.has_std()) && !c.standardize()) {
    return check.Error(field, "mean and std apply only with standardize: true");
  }
  if (c.has_mean() != c.has_std()) {
    return check.Error(field, "give both mean and std, or neither (the job computes them)");
  }
  if (c.has_mean() && !std::isfinite(c.mean())) return check.Error(field, "mean is not finite");
  if (c.has_std() && !(c.std() > 0 && std::isfinite(c.std()))) {
    return check.Error(field, "std ", c.std(), " must be > 0 and finite");
  }
  if ((!c.boundaries().empty() || c.quantiles() != 0) && !bucketized) {
    return check.Error(field, "boundaries and quantiles apply to BUCKETIZED columns only");
  }
  for (int i = 0; i < c.boundaries_size(); ++i) {
    if (!std::isfinite(c.boundaries(i))) {
      return check.Error(field, "boundaries[", i, "] is not finite");
    }
    if (i > 0 && !(c.boundaries(i - 1) < c.boundaries(i))) {
      return check.Error(field, "boundaries must be strictly increasing: boundaries[", i, "] ",
                         c.boundaries(i), " is not above boundaries[", i - 1, "] ",
                         c.boundaries(i - 1));
    }
  }
  if (c.quantiles() != 0 && (c.quantiles() < 2 || c.quantiles() > kMaxQuantiles)) {
    return check.Error(field, "quantiles ", c.quantiles(), " is out of range 2..", kMaxQuantiles);
  }
  if (bucketized && c.boundaries().empty() && c.quantiles() == 0) {
    return check.Error(field, "a BUCKETIZED column needs boundaries or quantiles");
  }
  if (!c.cross_of().empty() && c.kind() != ColumnConfig::CROSS) {
    return check.Error(field, "cross_of applies to CROSS columns only");
  }
  return absl::OkStatus();
}

// CROSS columns: two or more distinct sources, each a CATEGORICAL or BUCKETIZED column
// (one ID per example).
absl::Status CheckCrosses(const DataConfig& data, const Checker& check) {
  std::map<std::string, const ColumnConfig*> columns;
  for (const ColumnConfig& c : data.columns()) columns[c.name()] = &c;
  for (int i = 0; i < data.columns_size(); ++i) {
    const ColumnConfig& c = data.columns(i);
    if (c.kind() != ColumnConfig::CROSS) continue;
    const std::string field = ColumnField(i, c);
    if (c.cross_of_size() < 2) {
      return check.Error(field, "cross_of needs two or more columns, has ", c.cross_of_size());
    }
    std::set<std::string> seen;
    for (int j = 0; j < c.cross_of_size(); ++j) {
      const std::string& name = c.cross_of(j);
      const std::string source = absl::StrCat(field, ".cross_of[", j, "]");
      auto it = columns.find(name);
      if (it == columns.end()) {
        return check.Error(source, "'", name, "' is not in data.columns");
      }
      if (it->second->kind() != ColumnConfig::CATEGORICAL &&
          it->second->kind() != ColumnConfig::BUCKETIZED) {
        return check.Error(source, "column '", name, "' is ",
                           ColumnConfig::Kind_Name(it->second->kind()),
                           "; a cross needs CATEGORICAL or BUCKETIZED columns (one ID each)");
      }
      if (!seen.insert(name).second) {
        return check.Error(source, "column '", name, "' appears twice");
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckColumns(const ModelConfig& config, const Checker& check) {
  const DataConfig& data = config.data();
  if (!DataConfig::Format_IsValid(data.format())) {
    return check.Error("data.format", "unknown format ", data.format());
  }
  const bool criteo = data.format() == DataConfig::CRITEO_TSV;
  std::set<std::string> names;
  int labels = 0;
  int weights = 0;
  for (int i = 0; i < data.columns_size(); ++i) {
    const ColumnConfig& c = data.columns(i);
    const std::string field = ColumnField(i, c);
    if (c.name().empty()) return check.Error(field, "name is empty");
    if (c.name().find_first_of("\t\r\n") != std::string::npos) {
      return check.Error(field, "name contains a tab or a line break");
    }
    if (!names.insert(c.name()).second) {
      return check.Error(field, "column name '", c.name(), "' appears twice");
    }
    const std::string& file_column = c.source().empty() ? c.name() : c.source();
    if (c.source().find_first_of("\t\r\n") != std::string::npos) {
      return check.Error(field, "source contains a tab or a line break");
    }
    if (!c.source().empty() && c.kind() == ColumnConfig::CROSS) {
      return check.Error(field, "a CROSS column has no source (it reads cross_of)");
    }
    if (criteo && c.kind() != ColumnConfig::CROSS && !IsCriteoColumnName(file_column)) {
      return check.Error(field, "not a Criteo column (label, I1..I13, C1..C26)");
    }
    if (!ColumnConfig::Kind_IsValid(c.kind())) return check.Error(field, "unknown kind ", c.kind());
    if (!ColumnConfig::Transform_IsValid(c.transform())) {
      return check.Error(field, "unknown transform ", c.transform());
    }
    if (!ColumnConfig::IdEncoding_IsValid(c.id_encoding())) {
      return check.Error(field, "unknown id_encoding ", c.id_encoding());
    }
    const bool sparse =
        c.kind() == ColumnConfig::CATEGORICAL || c.kind() == ColumnConfig::MULTI_HOT;
    if (c.transform() != ColumnConfig::NONE && c.kind() != ColumnConfig::DENSE) {
      return check.Error(field, "transform applies to DENSE columns only");
    }
    if (c.id_encoding() != ColumnConfig::HASH && !sparse) {
      return check.Error(field, "id_encoding applies to CATEGORICAL / MULTI_HOT columns only");
    }
    EMBER_RETURN_IF_ERROR(CheckTransforms(c, field, check));
    if (c.kind() == ColumnConfig::MULTI_HOT &&
        c.separator().find_first_of("\t\r\n") != std::string::npos) {
      return check.Error(field, "separator must not contain a tab or a line break");
    }
    if (!std::isfinite(c.missing_value())) return check.Error(field, "missing_value is not finite");
    if (c.kind() == ColumnConfig::LABEL) ++labels;
    if (c.kind() == ColumnConfig::WEIGHT) ++weights;
  }
  EMBER_RETURN_IF_ERROR(CheckCrosses(data, check));
  if (labels != 1) {
    return check.Error("data.columns", "need exactly one LABEL column, found ", labels);
  }
  if (weights > 1) {
    return check.Error("data.columns", "at most one WEIGHT column, found ", weights);
  }
  if (std::isnan(data.max_malformed_fraction())) {
    return check.Error("data.max_malformed_fraction", "is NaN");
  }
  return absl::OkStatus();
}

// The data columns by name.
using Columns = std::map<std::string, const ColumnConfig*>;

// tables: names and dims; their dims by name go to *table_dims.
absl::Status CheckTables(const ModelConfig& config, const Checker& check,
                         std::map<std::string, uint32_t>* table_dims) {
  for (int i = 0; i < config.tables_size(); ++i) {
    const v1::TableConfig& t = config.tables(i);
    const std::string field = absl::StrCat("tables[", i, "] (", t.name(), ")");
    if (!ValidTableName(t.name())) {
      return check.Error(field, "name must match [a-zA-Z0-9_.-]{1,64}");
    }
    if (t.dim() < 1 || t.dim() > kMaxTableDim) {
      return check.Error(field, "dim ", t.dim(), " is out of range 1..", kMaxTableDim);
    }
    if (!table_dims->emplace(t.name(), t.dim()).second) {
      return check.Error(field, "table name '", t.name(), "' appears twice");
    }
  }
  return absl::OkStatus();
}

// dense: layer sizes and the interaction (DOT needs a bottom MLP).
absl::Status CheckDenseTower(const DenseTowerConfig& dense, const Checker& check) {
  for (int i = 0; i < dense.bottom_mlp_size(); ++i) {
    if (dense.bottom_mlp(i) < 1 || dense.bottom_mlp(i) > kMaxLayerSize) {
      return check.Error(absl::StrCat("dense.bottom_mlp[", i, "]"), "size ", dense.bottom_mlp(i),
                         " is out of range 1..", kMaxLayerSize);
    }
  }
  for (int i = 0; i < dense.top_mlp_size(); ++i) {
    if (dense.top_mlp(i) < 1 || dense.top_mlp(i) > kMaxLayerSize) {
      return check.Error(absl::StrCat("dense.top_mlp[", i, "]"), "size ", dense.top_mlp(i),
                         " is out of range 1..", kMaxLayerSize);
    }
  }
  if (!DenseTowerConfig::Interaction_IsValid(dense.interaction())) {
    return check.Error("dense.interaction", "unknown interaction ", dense.interaction());
  }
  if (dense.interaction() == DenseTowerConfig::DOT && dense.bottom_mlp().empty()) {
    return check.Error("dense.bottom_mlp", "DOT interaction needs a bottom MLP");
  }
  if (dense.interaction() != DenseTowerConfig::CROSS) {
    if (dense.cross_layers() != 0) {
      return check.Error("dense.cross_layers", "is set but interaction is ",
                         DenseTowerConfig::Interaction_Name(dense.interaction()), ", not CROSS");
    }
    if (dense.cross_rank() != 0) {
      return check.Error("dense.cross_rank", "is set but interaction is ",
                         DenseTowerConfig::Interaction_Name(dense.interaction()), ", not CROSS");
    }
  } else if (dense.cross_layers() < 1 || dense.cross_layers() > kMaxCrossLayers) {
    return check.Error("dense.cross_layers", dense.cross_layers(), " is out of range 1..",
                       kMaxCrossLayers);
  }
  return absl::OkStatus();
}

// dense.cross_rank below the cross width D (the last bottom_mlp size when there are
// dense columns, plus every feature's table dim). Called after CheckFeatures.
absl::Status CheckCrossRank(const ModelConfig& config,
                            const std::map<std::string, uint32_t>& table_dims,
                            const Checker& check) {
  const DenseTowerConfig& dense = config.dense();
  if (dense.interaction() != DenseTowerConfig::CROSS || dense.cross_rank() == 0) {
    return absl::OkStatus();
  }
  uint64_t width = DenseColumns(config).empty() ? 0 : dense.bottom_mlp(dense.bottom_mlp_size() - 1);
  for (const FeatureConfig& f : config.features()) width += table_dims.at(f.table());
  if (dense.cross_rank() >= width) {
    return check.Error("dense.cross_rank", dense.cross_rank(), " is not below the cross width ",
                       width,
                       " (the last bottom_mlp size plus every feature's table dim); use 0 for a "
                       "full-rank cross layer");
  }
  return absl::OkStatus();
}

// The most extra tasks of a multi-task tower (DenseTowerConfig.tasks).
constexpr int kMaxTasks = 4;

// dense.tasks: at most kMaxTasks, unique valid names (not "click"), a known kind, a
// loss weight in (0, 100], top_mlp sizes in range, each label_column a TASK_LABEL
// column read by one task, true_prob_column an EVAL column; no TASK_LABEL column that
// no task reads; no cold re-sampling with tasks.
absl::Status CheckTasks(const ModelConfig& config, const Columns& columns, const Checker& check) {
  const DenseTowerConfig& dense = config.dense();
  if (dense.tasks_size() > kMaxTasks) {
    return check.Error("dense.tasks", "has ", dense.tasks_size(), " tasks; at most ", kMaxTasks);
  }
  // The replay buffer of cold re-sampling keeps no task labels.
  if (dense.tasks_size() > 0 && config.skew().cold_resample_fraction() > 0) {
    return check.Error("dense.tasks",
                       "multi-task heads do not combine with skew.cold_resample_fraction yet");
  }
  std::set<std::string> names{"click"};
  std::set<std::string> labels;
  for (int i = 0; i < dense.tasks_size(); ++i) {
    const v1::TaskConfig& t = dense.tasks(i);
    const std::string field = absl::StrCat("dense.tasks[", i, "] (", t.name(), ")");
    const bool valid_name =
        !t.name().empty() && t.name().size() <= 32 &&
        t.name().find_first_not_of(
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == std::string::npos;
    if (!valid_name) return check.Error(field, "name must match [a-zA-Z0-9_]{1,32}");
    if (!names.insert(t.name()).second) {
      return check.Error(field, "task name '", t.name(), "' appears twice (\"click\" is task 0)");
    }
    if (!v1::TaskConfig::Kind_IsValid(t.kind()) || t.kind() == v1::TaskConfig::KIND_UNSPECIFIED) {
      return check.Error(field, "unknown kind ", t.kind());
    }
    if (!(t.loss_weight() > 0 && t.loss_weight() <= 100)) {
      return check.Error(field, "loss_weight ", t.loss_weight(), " must be in (0, 100]");
    }
    for (int j = 0; j < t.top_mlp_size(); ++j) {
      if (t.top_mlp(j) < 1 || t.top_mlp(j) > kMaxLayerSize) {
        return check.Error(absl::StrCat(field, ".top_mlp[", j, "]"), "size ", t.top_mlp(j),
                           " is out of range 1..", kMaxLayerSize);
      }
    }
    auto col = columns.find(t.label_column());
    if (col == columns.end() || col->second->kind() != ColumnConfig::TASK_LABEL) {
      return check.Error(field, "label_column '", t.label_column(),
                         "' is not a TASK_LABEL column in data.columns");
    }
    if (!labels.insert(t.label_column()).second) {
      return check.Error(field, "label_column '", t.label_column(), "' is another task's too");
    }
    if (!t.true_prob_column().empty()) {
      auto prob = columns.find(t.true_prob_column());
      if (prob == columns.end() || prob->second->kind() != ColumnConfig::EVAL) {
        return check.Error(field, "true_prob_column '", t.true_prob_column(),
                           "' is not an EVAL column in data.columns");
      }
      if (t.kind() == v1::TaskConfig::ESMM_CTCVR && config.eval().true_prob_column().empty()) {
        return check.Error(field,
                           "an ESMM_CTCVR true_prob_column (p(conversion | click)) needs "
                           "eval.true_prob_column (p(click)) for the oracle");
      }
    }
  }
  for (const auto& [name, column] : columns) {
    if (column->kind() == ColumnConfig::TASK_LABEL && labels.count(name) == 0) {
      return check.Error("data.columns", "TASK_LABEL column '", name,
                         "' is no task's label_column (dense.tasks)");
    }
  }
  return absl::OkStatus();
}

// features: unique names, each on a CATEGORICAL or MULTI_HOT column and a known
// table (of the last bottom_mlp size under DOT interaction).
absl::Status CheckFeatures(const ModelConfig& config, const Columns& columns,
                           const std::map<std::string, uint32_t>& table_dims,
                           const Checker& check) {
  const DenseTowerConfig& dense = config.dense();
  const bool dot = dense.interaction() == DenseTowerConfig::DOT;
  std::set<std::string> feature_names;
  for (int i = 0; i < config.features_size(); ++i) {
    const FeatureConfig& f = config.features(i);
    const std::string field = absl::StrCat("features[", i, "] (", f.name(), ")");
    if (f.column().empty()) return check.Error(field, "column is empty");
    if (!feature_names.insert(f.name()).second) {
      return check.Error(field, "feature name '", f.name(), "' appears twice");
    }
    auto col = columns.find(f.column());
    if (col == columns.end()) {
      return check.Error(field, "column '", f.column(), "' is not in data.columns");
    }
    if (!IdKind(col->second->kind())) {
      return check.Error(field, "column '", f.column(), "' is ",
                         ColumnConfig::Kind_Name(col->second->kind()),
                         ", not CATEGORICAL, MULTI_HOT, BUCKETIZED or CROSS");
    }
    auto table = table_dims.find(f.table());
    if (table == table_dims.end()) {
      return check.Error(field, "table '", f.table(), "' is not in tables");
    }
    if (!FeatureConfig::Pooling_IsValid(f.pooling())) {
      return check.Error(field, "unknown pooling ", f.pooling());
    }
    if (dot && table->second != dense.bottom_mlp(dense.bottom_mlp_size() - 1)) {
      return check.Error(field, "table '", f.table(), "' has dim ", table->second,
                         " but DOT interaction needs the last bottom_mlp size ",
                         dense.bottom_mlp(dense.bottom_mlp_size() - 1));
    }
  }
  return absl::OkStatus();
}

// dense_optimizer: a known kind and sane hyperparameters.
absl::Status CheckDenseOptimizer(const DenseOptimizerConfig& opt, const Checker& check) {
  if (!DenseOptimizerConfig::Kind_IsValid(opt.kind())) {
    return check.Error("dense_optimizer.kind", "unknown kind ", opt.kind());
  }
  if (!(opt.learning_rate() > 0) || !std::isfinite(opt.learning_rate())) {
    return check.Error("dense_optimizer.learning_rate", "must be > 0 and finite");
  }
  if (!(opt.beta1() > 0 && opt.beta1() < 1)) {
    return check.Error("dense_optimizer.beta1", "must be in (0, 1)");
  }
  if (!(opt.beta2() > 0 && opt.beta2() < 1)) {
    return check.Error("dense_optimizer.beta2", "must be in (0, 1)");
  }
  if (!(opt.epsilon() > 0) || !std::isfinite(opt.epsilon())) {
    return check.Error("dense_optimizer.epsilon", "must be > 0 and finite");
  }
  if (!(opt.initial_accumulator() >= 0) || !std::isfinite(opt.initial_accumulator())) {
    return check.Error("dense_optimizer.initial_accumulator", "must be >= 0 and finite");
  }
  return absl::OkStatus();
}

// training: batch size and consistency (SSP needs a staleness).
absl::Status CheckTraining(const TrainingConfig& training, const Checker& check) {
  if (training.batch_size() == 0) return check.Error("training.batch_size", "must be > 0");
  if (!TrainingConfig::Consistency_IsValid(training.consistency())) {
    return check.Error("training.consistency", "unknown consistency ", training.consistency());
  }
  if (training.consistency() == TrainingConfig::SSP && training.staleness() < 1) {
    return check.Error("training.staleness", "SSP needs staleness >= 1");
  }
  return absl::OkStatus();
}

// eval: the columns it names are EVAL columns; warm_min_count <= hot_min_count.
absl::Status CheckEval(const v1::EvalConfig& eval, const Columns& columns, const Checker& check) {
  const std::pair<const char*, const std::string*> eval_columns[] = {
      {"eval.item_count_column", &eval.item_count_column()},
      {"eval.cold_user_column", &eval.cold_user_column()},
      {"eval.true_prob_column", &eval.true_prob_column()},
  };
  for (const auto& [field, name] : eval_columns) {
    if (name->empty()) continue;
    auto col = columns.find(*name);
    if (col == columns.end() || col->second->kind() != ColumnConfig::EVAL) {
      return check.Error(field, "'", *name, "' is not an EVAL column in data.columns");
    }
  }
  if (eval.warm_min_count() > eval.hot_min_count()) {
    return check.Error("eval.warm_min_count", eval.warm_min_count(), " is above hot_min_count ",
                       eval.hot_min_count());
  }
  return absl::OkStatus();
}

absl::Status CheckModel(const ModelConfig& config, const Checker& check) {
  const DataConfig& data = config.data();
  Columns columns;
  for (const ColumnConfig& c : data.columns()) columns[c.name()] = &c;

  if (data.partition_by() != "file") {
    auto it = columns.find(data.partition_by());
    if (it == columns.end() || it->second->kind() != ColumnConfig::CATEGORICAL) {
      return check.Error("data.partition_by", "'", data.partition_by(),
                         "' is neither \"file\" nor a CATEGORICAL column");
    }
  }
  std::map<std::string, uint32_t> table_dims;
  EMBER_RETURN_IF_ERROR(CheckTables(config, check, &table_dims));
  EMBER_RETURN_IF_ERROR(CheckDenseTower(config.dense(), check));
  EMBER_RETURN_IF_ERROR(CheckFeatures(config, columns, table_dims, check));
  EMBER_RETURN_IF_ERROR(CheckCrossRank(config, table_dims, check));
  EMBER_RETURN_IF_ERROR(CheckTasks(config, columns, check));
  EMBER_RETURN_IF_ERROR(CheckDenseOptimizer(config.dense_optimizer(), check));
  EMBER_RETURN_IF_ERROR(CheckTraining(config.training(), check));
  return CheckEval(config.eval(), columns, check);
}

absl::Status CheckSkew(const ModelConfig& config, const Checker& check) {
  if (!config.has_skew()) return absl::OkStatus();
  const v1::SkewConfig& skew = config.skew();
  std::map<std::string, const ColumnConfig*> columns;
  for (const ColumnConfig& c : config.data().columns()) columns[c.name()] = &c;
  std::set<std::string> cold_features;
  for (int i = 0; i < skew.cold_features_size(); ++i) {
    const std::string& name = skew.cold_features(i);
    const std::string field = absl::StrCat("skew.cold_features[", i, "] (", name, ")");
    const FeatureConfig* feature = nullptr;
    for (const FeatureConfig& f : config.features()) {
      if (f.name() == name) feature = &f;
    }
    if (feature == nullptr) return check.Error(field, "'", name, "' is not a feature name");
    if (!cold_features.insert(name).second) {
      return check.Error(field, "feature '", name, "' appears twice");
    }
    const ColumnConfig* column = columns.at(feature->column());  // CheckModel checked it
    if (column->kind() != ColumnConfig::CATEGORICAL) {
      return check.Error(field, "column '", column->name(), "' is ",
                         ColumnConfig::Kind_Name(column->kind()),
                         "; a cold feature must be CATEGORICAL (one ID per example)");
    }
  }
  if (skew.cold_max_count() < 1 || skew.cold_max_count() > kMaxColdCount) {
    return check.Error("skew.cold_max_count", skew.cold_max_count(), " is out of range 1..",
                       kMaxColdCount);
  }
  const float weight = skew.cold_loss_weight();
  if (!(weight > 0) || !(weight <= kMaxColdLossWeight)) {
    return check.Error("skew.cold_loss_weight", weight, " must be in (0, ", kMaxColdLossWeight,
                       "] (1 = off)");
  }
  const float fraction = skew.cold_resample_fraction();
  if (!(fraction >= 0 && fraction <= 1)) {
    return check.Error("skew.cold_resample_fraction", fraction, " must be in [0, 1] (0 = off)");
  }
  if ((weight != 1.0f || fraction > 0) && skew.cold_features().empty()) {
    return check.Error("skew.cold_features",
                       "cold_loss_weight and cold_resample_fraction need at least one cold "
                       "feature (e.g. the user and item ID features)");
  }
  if (skew.cold_replay_capacity() > kMaxReplayCapacity) {
    return check.Error("skew.cold_replay_capacity", skew.cold_replay_capacity(), " is above ",
                       kMaxReplayCapacity);
  }
  if (skew.cold_max_tracked_ids() < 1 || skew.cold_max_tracked_ids() > kMaxTrackedIds) {
    return check.Error("skew.cold_max_tracked_ids", skew.cold_max_tracked_ids(),
                       " is out of range 1..", kMaxTrackedIds);
  }
  if (skew.hot_cache_steps() > kMaxHotCacheSteps) {
    return check.Error("skew.hot_cache_steps", skew.hot_cache_steps(), " is above ",
                       kMaxHotCacheSteps);
  }
  if (skew.hot_cache_steps() > 0 && config.training().consistency() == TrainingConfig::BSP) {
    return check.Error("skew.hot_cache_steps", "the hot-row cache serves rows up to ",
                       skew.hot_cache_steps(),
                       " steps old, but BSP training must be exact: use consistency SSP or "
                       "ASP, or hot_cache_steps 0");
  }
  if (skew.hot_cache_max_rows() < 1 || skew.hot_cache_max_rows() > kMaxHotCacheRows) {
    return check.Error("skew.hot_cache_max_rows", skew.hot_cache_max_rows(), " is out of range 1..",
                       kMaxHotCacheRows);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckModelConfig(const ModelConfig& config, const std::string& origin) {
  const Checker check(origin);
  EMBER_RETURN_IF_ERROR(CheckColumns(config, check));
  EMBER_RETURN_IF_ERROR(CheckModel(config, check));
  EMBER_RETURN_IF_ERROR(CheckSkew(config, check));
  return absl::OkStatus();
}

}  // namespace ember::model::internal
