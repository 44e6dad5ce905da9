// Copyright 2026 The Ember Authors.

#include "server/serving/served_model.h"

#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/clip.h"
#include "common/hash.h"
#include "common/model/line_parser.h"
#include "common/model/model_config.h"

namespace ember {
namespace {

// python/ember/state.py: the first bytes of a PyTorch job's dense_optimizer_state.
constexpr char kPythonStateMagic[] = "EMBERPT1";

}  // namespace

absl::StatusOr<std::unique_ptr<ServedModel>> ServedModel::Create(const v1::WorkerState& state,
                                                                 const std::string& name) {
  if (absl::StartsWith(state.dense_optimizer_state(), kPythonStateMagic)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", name,
        " was written by a Python (PyTorch) job: its dense parameters are the PyTorch "
        "model's, not an ember dense tower, so Predict cannot score them (load them into the "
        "model with ember.serving and score in Python)"));
  }
  if (!state.config().empty() && HashBytes(state.config()) != state.config_digest()) {
    // ember-worker digests exactly these bytes; a Python job digests its model's
    // signature with them.
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", name,
        ": its config digest is not the digest of its config (a Python/PyTorch job's "
        "checkpoint digests its model too): Predict scores ember-worker checkpoints only"));
  }
  if (state.config().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", name, " holds no model config: Predict cannot parse or score rows"));
  }
  std::unique_ptr<ServedModel> m(new ServedModel());
  m->name_ = name;
  if (!m->config_.ParseFromString(state.config())) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint ", name, ": its model config does not parse"));
  }
  m->layout_ = model::SparseLayout::FromConfig(m->config_);
  for (const v1::ColumnConfig* c : model::DenseColumns(m->config_)) {
    m->dense_names_.push_back(c->name());
  }
  m->num_dense_ = static_cast<int>(m->dense_names_.size());
  std::map<std::string, v1::ColumnConfig::Kind> kinds;
  for (const v1::ColumnConfig& c : m->config_.data().columns()) kinds[c.name()] = c.kind();
  for (const v1::FeatureConfig& f : m->config_.features()) {
    m->single_id_.push_back(kinds[f.column()] == v1::ColumnConfig::CATEGORICAL);
  }
  if (m->config_.data().format() == v1::DataConfig::CRITEO_TSV) {
    m->default_columns_ = model::CriteoColumnNames();
  } else {
    for (const v1::ColumnConfig& c : m->config_.data().columns()) {
      m->default_columns_.push_back(c.name());
    }
  }
  absl::StatusOr<std::unique_ptr<model::DenseTower>> tower =
      model::DenseTower::Create(m->config_.dense(), m->num_dense_, m->layout_.FeatureDims());
  if (!tower.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint ", name,
                     ": its model config builds no dense tower: ", tower.status().message()));
  }
  const size_t want = (*tower)->parameters().size();
  if (state.dense_parameters().size() != want * sizeof(float)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", name, " holds ", state.dense_parameters().size() / sizeof(float),
        " dense parameters; its config's tower has ", want));
  }
  m->parameters_.resize(want);
  std::memcpy(m->parameters_.data(), state.dense_parameters().data(), want * sizeof(float));
  std::copy(m->parameters_.begin(), m->parameters_.end(), (*tower)->parameters().begin());
  {
    absl::MutexLock lock(&m->mu_);  // Not yet shared; the lock is for the analysis.
    m->idle_.push_back(std::move(*tower));
  }
  return m;
}

absl::Status ServedModel::AppendEncoded(const v1::EncodedRow& row,
                                        model::ExampleBatch* batch) const {
  if (row.dense_size() != num_dense_) {
    return absl::InvalidArgumentError(absl::StrCat("expected ", num_dense_, " dense values (",
                                                   absl::StrJoin(dense_names_, ", "), "), got ",
                                                   row.dense_size()));
  }
  for (int i = 0; i < num_dense_; ++i) {
    if (!std::isfinite(row.dense(i))) {
      return absl::InvalidArgumentError(
          absl::StrCat("dense[", i, "] (", dense_names_[i], "): ", row.dense(i), " is not finite"));
    }
  }
  std::vector<const v1::FeatureIds*> of_feature(layout_.features.size(), nullptr);
  for (const v1::FeatureIds& ids : row.features()) {
    size_t f = 0;
    while (f < layout_.features.size() && layout_.features[f].name != ids.feature()) ++f;
    if (f == layout_.features.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown feature '", ClipForMessage(ids.feature()), "' (not in the model config)"));
    }
    if (of_feature[f] != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("feature '", ClipForMessage(ids.feature()), "' is given twice"));
    }
    if (single_id_[f] && ids.ids_size() > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("feature '", ClipForMessage(ids.feature()),
                       "' reads a CATEGORICAL column: at most 1 ID, got ", ids.ids_size()));
    }
    of_feature[f] = &ids;
  }
  batch->labels.push_back(0);
  batch->weights.push_back(1);
  batch->dense.insert(batch->dense.end(), row.dense().begin(), row.dense().end());
  for (size_t f = 0; f < of_feature.size(); ++f) {
    model::SparseColumn& column = batch->sparse[f];
    if (of_feature[f] != nullptr) {
      column.ids.insert(column.ids.end(), of_feature[f]->ids().begin(), of_feature[f]->ids().end());
    }
    column.offsets.push_back(static_cast<uint32_t>(column.ids.size()));
  }
  ++batch->size;
  return absl::OkStatus();
}

absl::Status ServedModel::Encode(const v1::PredictRequest& request, model::ExampleBatch* batch,
                                 std::vector<uint32_t>* rows, v1::PredictResponse* response) const {
  batch->Reset(num_dense_, static_cast<int>(layout_.features.size()), 0);
  rows->clear();
  // The parser, made only when a raw row needs it.
  std::optional<model::LineParser> parser;
  auto refuse = [&](int index, absl::string_view reason) {
    v1::RowError* error = response->add_errors();
    error->set_index(static_cast<uint32_t>(index));
    error->set_reason(std::string(reason));
  };
  std::string joined, error;
  for (int i = 0; i < request.rows_size(); ++i) {
    const v1::PredictRow& row = request.rows(i);
    if (row.row_case() == v1::PredictRow::kEncoded) {
      const absl::Status appended = AppendEncoded(row.encoded(), batch);
      if (appended.ok()) {
        rows->push_back(static_cast<uint32_t>(i));
      } else {
        refuse(i, appended.message());
      }
      continue;
    }
    if (row.row_case() == v1::PredictRow::ROW_NOT_SET) {
      refuse(i, "empty row: set line, values or encoded");
      continue;
    }
    if (!parser.has_value()) {
      std::vector<absl::string_view> names;
      if (request.columns().empty()) {
        names.assign(default_columns_.begin(), default_columns_.end());
      } else {
        names.assign(request.columns().begin(), request.columns().end());
      }
      model::LineParserOptions options;
      options.score_only = true;
      absl::StatusOr<model::LineParser> made = model::LineParser::Create(
          config_, options, names,
          request.columns().empty() ? "the training data's columns" : "PredictRequest.columns");
      if (!made.ok()) return made.status();
      parser.emplace(std::move(*made));
    }
    absl::string_view line;
    if (row.row_case() == v1::PredictRow::kLine) {
      line = row.line();
    } else {
      joined.clear();
      bool clean = true;
      for (int v = 0; v < row.values().values_size() && clean; ++v) {
        const std::string& value = row.values().values(v);
        clean = value.find_first_of("\t\r\n") == std::string::npos;
        if (!clean) refuse(i, absl::StrCat("value ", v, " holds a tab or a line break"));
        absl::StrAppend(&joined, v == 0 ? "" : "\t", value);
      }
      if (!clean) continue;
      line = joined;
    }
    if (line.find_first_of("\r\n") != absl::string_view::npos) {
      refuse(i, "the line holds a line break");
      continue;
    }
    // One partition (world_size 1): every line is kOk or kMalformed.
    if (parser->Parse(line, &error) == model::LineParser::Result::kOk) {
      parser->AppendTo(batch);
      rows->push_back(static_cast<uint32_t>(i));
    } else {
      refuse(i, error);
    }
  }
  return absl::OkStatus();
}

std::unique_ptr<model::DenseTower> ServedModel::AcquireTower() const {
  {
    absl::MutexLock lock(&mu_);
    if (!idle_.empty()) {
      std::unique_ptr<model::DenseTower> tower = std::move(idle_.back());
      idle_.pop_back();
      return tower;
    }
  }
  // Create() built one tower from this config already: this one builds too.
  std::unique_ptr<model::DenseTower> tower =
      model::DenseTower::Create(config_.dense(), num_dense_, layout_.FeatureDims()).value();
  std::copy(parameters_.begin(), parameters_.end(), tower->parameters().begin());
  return tower;
}

void ServedModel::ReleaseTower(std::unique_ptr<model::DenseTower> tower) const {
  absl::MutexLock lock(&mu_);
  idle_.push_back(std::move(tower));
}

void ServedModel::Score(const model::ExampleBatch& batch, absl::Span<const float> pooled,
                        absl::Span<float> logits) const {
  std::unique_ptr<model::DenseTower> tower = AcquireTower();
  tower->Score(batch.size, batch.dense, pooled, logits);
  ReleaseTower(std::move(tower));
}

}  // namespace ember
