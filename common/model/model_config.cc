// Copyright 2026 The Ember Authors.

#include "common/model/model_config.h"

#include "common/model/model_config_check.h"

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"

namespace ember::model {
namespace {

using internal::kCriteoCategorical;
using internal::kCriteoDense;

using v1::ColumnConfig;
using v1::DataConfig;
using v1::DenseOptimizerConfig;
using v1::DenseTowerConfig;
using v1::FeatureConfig;
using v1::ModelConfig;
using v1::TrainingConfig;

// DCN-v2 cross layers: the default count and the most allowed.
constexpr uint32_t kDefaultCrossLayers = 2;
constexpr uint64_t kDefaultStatisticsMaxExamples = 1000000;

// Collects the text-format parser's errors as "line:column: message" (1-based).
class TextErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (!errors_.empty()) errors_ += "; ";
    absl::StrAppend(&errors_, line + 1, ":", column + 1, ": ", message);
  }
  const std::string& errors() const { return errors_; }

 private:
  std::string errors_;
};

absl::Status ReadFile(const std::string& path, std::string* out) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    const int err = errno;
    return absl::ErrnoToStatus(err, absl::StrCat("cannot open model config ", path));
  }
  out->clear();
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out->append(buf, n);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) return absl::ErrnoToStatus(err, absl::StrCat("cannot read model config ", path));
  return absl::OkStatus();
}

// Resolves a relative data path against `base_dir` (no-op when either is empty).
std::string ResolvePath(const std::string& base_dir, const std::string& path) {
  if (base_dir.empty() || path.empty()) return path;
  std::filesystem::path p(path);
  if (p.is_absolute()) return path;
  return (std::filesystem::path(base_dir) / p).lexically_normal().string();
}

void AddCriteoDefaultColumns(DataConfig* data) {
  ColumnConfig* label = data->add_columns();
  label->set_name("label");
  label->set_kind(ColumnConfig::LABEL);
  for (int i = 1; i <= kCriteoDense; ++i) {
    ColumnConfig* c = data->add_columns();
    c->set_name(absl::StrCat("I", i));
    c->set_kind(ColumnConfig::DENSE);
    c->set_transform(ColumnConfig::LOG1P);
  }
  for (int i = 1; i <= kCriteoCategorical; ++i) {
    ColumnConfig* c = data->add_columns();
    c->set_name(absl::StrCat("C", i));
    c->set_kind(ColumnConfig::CATEGORICAL);
    c->set_id_encoding(ColumnConfig::HEX);
  }
}

// The dim of every feature's table when they all share one, else 0.
uint32_t SharedFeatureDim(const ModelConfig& config) {
  uint32_t shared = 0;
  for (const FeatureConfig& f : config.features()) {
    uint32_t dim = 0;
    for (const v1::TableConfig& t : config.tables()) {
      if (t.name() == f.table()) dim = t.dim();
    }
    if (dim == 0 || (shared != 0 && dim != shared)) return 0;
    shared = dim;
  }
  return shared;
}

// Fills every default documented in model.proto. Idempotent.
void FillDefaults(ModelConfig* config) {
  if (config->name().empty()) config->set_name("ember");

  DataConfig* data = config->mutable_data();
  if (data->format() == DataConfig::FORMAT_UNSPECIFIED) data->set_format(DataConfig::SCHEMA_TSV);
  if (data->format() == DataConfig::CRITEO_TSV && data->columns().empty()) {
    AddCriteoDefaultColumns(data);
  }
  for (ColumnConfig& c : *data->mutable_columns()) {
    if (c.kind() == ColumnConfig::KIND_UNSPECIFIED) c.set_kind(ColumnConfig::IGNORE);
    if (c.transform() == ColumnConfig::TRANSFORM_UNSPECIFIED) c.set_transform(ColumnConfig::NONE);
    if (c.id_encoding() == ColumnConfig::ID_ENCODING_UNSPECIFIED) {
      c.set_id_encoding(ColumnConfig::HASH);
    }
    if (c.kind() == ColumnConfig::MULTI_HOT && c.separator().empty()) c.set_separator("|");
  }
  if (data->partition_by().empty()) data->set_partition_by("file");
  if (data->max_malformed_fraction() == 0) data->set_max_malformed_fraction(0.001);
  if (config->statistics_max_examples() == 0) {
    config->set_statistics_max_examples(kDefaultStatisticsMaxExamples);
  }

  for (FeatureConfig& f : *config->mutable_features()) {
    if (f.name().empty()) f.set_name(f.column());
    if (f.pooling() == FeatureConfig::POOLING_UNSPECIFIED) f.set_pooling(FeatureConfig::SUM);
  }

  DenseTowerConfig* dense = config->mutable_dense();
  if (dense->bottom_mlp().empty()) {
    // DOT interaction needs the bottom MLP to end at the features' table dim: when they
    // share one, the default tower does, so a config that leaves the tower out works
    // with whatever dim its tables have (mixed dims: 16, and the check names the fix).
    // Other interactions keep 16 (ember.torch gives CONCAT to configs without a dense
    // section, whose job digests then stay what they were).
    const bool dot = dense->interaction() == DenseTowerConfig::INTERACTION_UNSPECIFIED ||
                     dense->interaction() == DenseTowerConfig::DOT;
    const uint32_t dim = dot ? SharedFeatureDim(*config) : 0;
    dense->add_bottom_mlp(64);
    dense->add_bottom_mlp(dim >= 1 && dim <= 4096 ? dim : 16);
  }
  if (dense->interaction() == DenseTowerConfig::INTERACTION_UNSPECIFIED) {
    dense->set_interaction(DenseTowerConfig::DOT);
  }
  if (dense->top_mlp().empty()) {
    dense->add_top_mlp(64);
    dense->add_top_mlp(32);
  }
  if (dense->init_seed() == 0) dense->set_init_seed(1);
  if (dense->interaction() == DenseTowerConfig::CROSS && dense->cross_layers() == 0) {
    dense->set_cross_layers(kDefaultCrossLayers);
  }
  // Multi-task heads: defaults only inside present tasks (no tasks: nothing changes).
  for (v1::TaskConfig& task : *dense->mutable_tasks()) {
    if (task.kind() == v1::TaskConfig::KIND_UNSPECIFIED) task.set_kind(v1::TaskConfig::INDEPENDENT);
    if (!task.has_loss_weight()) task.set_loss_weight(1.0f);
    if (task.top_mlp().empty()) *task.mutable_top_mlp() = dense->top_mlp();
  }

  DenseOptimizerConfig* opt = config->mutable_dense_optimizer();
  if (opt->kind() == DenseOptimizerConfig::KIND_UNSPECIFIED)
    opt->set_kind(DenseOptimizerConfig::ADAM);
  if (opt->learning_rate() == 0) opt->set_learning_rate(0.01f);
  if (opt->beta1() == 0) opt->set_beta1(0.9f);
  if (opt->beta2() == 0) opt->set_beta2(0.999f);
  if (opt->epsilon() == 0) opt->set_epsilon(1e-8f);
  if (!opt->has_initial_accumulator()) opt->set_initial_accumulator(1e-6f);

  TrainingConfig* training = config->mutable_training();
  if (training->batch_size() == 0) training->set_batch_size(1024);
  if (training->epochs() == 0) training->set_epochs(1);
  if (training->consistency() == TrainingConfig::CONSISTENCY_UNSPECIFIED) {
    training->set_consistency(TrainingConfig::BSP);
  }
  if (training->staleness() == 0) training->set_staleness(1);
  if (training->log_every_steps() == 0) training->set_log_every_steps(100);

  v1::EvalConfig* eval = config->mutable_eval();
  if (eval->hot_min_count() == 0) eval->set_hot_min_count(1000);
  if (eval->warm_min_count() == 0) eval->set_warm_min_count(20);

  // Only a present skew section gets defaults: a config without one stays without
  // (its digest, and so its checkpoints, are unchanged). cold_replay_capacity 0 stays
  // 0 (4 x batch_size, which flags may still change).
  if (config->has_skew()) {
    v1::SkewConfig* skew = config->mutable_skew();
    if (skew->cold_max_count() == 0) skew->set_cold_max_count(20);
    if (!skew->has_cold_loss_weight()) skew->set_cold_loss_weight(1.0f);
    if (skew->cold_max_tracked_ids() == 0) skew->set_cold_max_tracked_ids(1000000);
    if (skew->hot_cache_max_rows() == 0) skew->set_hot_cache_max_rows(100000);
  }
}

std::vector<const ColumnConfig*> ColumnsOfKind(const ModelConfig& config, ColumnConfig::Kind kind) {
  std::vector<const ColumnConfig*> out;
  for (const ColumnConfig& c : config.data().columns()) {
    if (c.kind() == kind) out.push_back(&c);
  }
  return out;
}

}  // namespace

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path) {
  std::string text;
  EMBER_RETURN_IF_ERROR(ReadFile(path, &text));
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot resolve ", path, ": ", ec.message()));
  const bool json = absl::EndsWithIgnoreCase(path, ".json");
  return ParseModelConfig(text, json, absolute.parent_path().string(), path);
}

absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& text, bool json,
                                             const std::string& base_dir,
                                             const std::string& origin) {
  ModelConfig config;
  if (json) {
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = false;
    google::protobuf::util::Status status =
        google::protobuf::util::JsonStringToMessage(text, &config, options);
    if (!status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ": JSON parse error: ", status.message().ToString()));
    }
  } else {
    TextErrorCollector errors;
    google::protobuf::TextFormat::Parser parser;
    parser.RecordErrorsTo(&errors);
    if (!parser.ParseFromString(text, &config)) {
      return absl::InvalidArgumentError(absl::StrCat(origin, ":", errors.errors()));
    }
  }
  v1::DataConfig* data = config.mutable_data();
  data->set_train_path(ResolvePath(base_dir, data->train_path()));
  data->set_test_path(ResolvePath(base_dir, data->test_path()));
  return NormalizeModelConfig(std::move(config), origin);
}

absl::StatusOr<ModelConfig> NormalizeModelConfig(ModelConfig config, const std::string& origin) {
  FillDefaults(&config);
  EMBER_RETURN_IF_ERROR(internal::CheckModelConfig(config, origin));
  return config;
}

std::vector<const ColumnConfig*> DenseColumns(const ModelConfig& config) {
  return ColumnsOfKind(config, ColumnConfig::DENSE);
}

std::vector<const ColumnConfig*> EvalColumns(const ModelConfig& config) {
  return ColumnsOfKind(config, ColumnConfig::EVAL);
}

v1::ModelConfig DigestedConfig(const v1::ModelConfig& config) {
  v1::ModelConfig model = config;
  model.clear_checkpoint();
  model.clear_eval();
  // The statistics it sampled are in the columns; a resumed job may change the cap.
  model.clear_statistics_max_examples();
  // Skew options that are all off change nothing: checkpoints without them still fit.
  const v1::SkewConfig& skew = config.skew();
  if ((!skew.has_cold_loss_weight() || skew.cold_loss_weight() == 1.0f) &&
      skew.cold_resample_fraction() == 0 && skew.hot_cache_steps() == 0) {
    model.clear_skew();
  }
  model.mutable_data()->clear_test_path();
  v1::TrainingConfig* t = model.mutable_training();
  t->clear_max_steps();
  t->clear_log_every_steps();
  t->clear_eval_every_steps();
  t->clear_eval_max_examples();
  return model;
}

uint64_t ConfigDigest(const v1::ModelConfig& config) {
  std::string bytes;
  DigestedConfig(config).SerializeToString(&bytes);
  return HashBytes(bytes);
}

}  // namespace ember::model
