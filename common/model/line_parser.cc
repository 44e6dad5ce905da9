// Copyright 2026 The Ember Authors.

#include "common/model/line_parser.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "common/model/column_statistics.h"

namespace ember::model {
namespace {

using v1::ColumnConfig;

// How much of a bad value an error message quotes.
constexpr size_t kQuoteBytes = 40;

bool ParseFloat(absl::string_view value, float* out) {
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, *out);
  return ec == std::errc() && ptr == end && std::isfinite(*out);
}

bool ParseId(ColumnConfig::IdEncoding encoding, absl::string_view value, uint64_t* id) {
  if (encoding == ColumnConfig::HASH) {
    *id = HashBytes(value);
    return true;
  }
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, *id, encoding == ColumnConfig::HEX ? 16 : 10);
  return ec == std::errc() && ptr == end;
}

void BadValue(absl::string_view column, absl::string_view what, absl::string_view value,
              std::string* error) {
  *error = absl::StrCat("column '", column, "': ", what, " '", value.substr(0, kQuoteBytes),
                        value.size() > kQuoteBytes ? "...'" : "'");
}

}  // namespace

const std::vector<std::string>& CriteoColumnNames() {
  static const std::vector<std::string>* const names = [] {
    auto* v = new std::vector<std::string>{"label"};
    for (int i = 1; i <= 13; ++i) v->push_back(absl::StrCat("I", i));
    for (int i = 1; i <= 26; ++i) v->push_back(absl::StrCat("C", i));
    return v;
  }();
  return *names;
}

void SplitTabs(absl::string_view line, std::vector<absl::string_view>* fields) {
  fields->clear();
  if (line.empty()) {
    fields->emplace_back();
    return;
  }
  const char* p = line.data();
  const char* const end = p + line.size();
  while (true) {
    const char* tab = static_cast<const char*>(std::memchr(p, '\t', end - p));
    if (tab == nullptr) {
      fields->emplace_back(p, end - p);
      return;
    }
    fields->emplace_back(p, tab - p);
    p = tab + 1;
  }
}

absl::StatusOr<int> LineParser::HeaderIndex::FieldOf(const std::string& name) const {
  auto it = index.find(name);
  if (it == index.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the header has no column '", name, "' (from data.columns)"));
  }
  const int times = count.at(it->first);
  if (times > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": column '", name, "' appears ", times, " times in the header"));
  }
  return it->second;
}

absl::Status LineParser::MapColumns(const v1::ModelConfig& config, const LineParserOptions& options,
                                    const HeaderIndex& header,
                                    std::map<std::string, IdColumn>* sparse) {
  for (const ColumnConfig& c : config.data().columns()) {
    if (c.kind() == ColumnConfig::IGNORE || c.kind() == ColumnConfig::KIND_UNSPECIFIED) continue;
    if (c.kind() == ColumnConfig::EVAL && !options.with_eval_columns) continue;
    if ((c.kind() == ColumnConfig::LABEL || c.kind() == ColumnConfig::WEIGHT ||
         c.kind() == ColumnConfig::TASK_LABEL) &&
        options.score_only) {
      continue;
    }
    if (c.kind() == ColumnConfig::CROSS) {
      IdColumn& cross = (*sparse)[c.name()];
      cross.name = c.name();
      cross.cross_of.assign(c.cross_of().begin(), c.cross_of().end());
      continue;
    }
    absl::StatusOr<int> field = header.FieldOf(c.source().empty() ? c.name() : c.source());
    if (!field.ok()) return field.status();
    switch (c.kind()) {
      case ColumnConfig::LABEL:
        label_field_ = *field;
        label_name_ = c.name();
        break;
      case ColumnConfig::WEIGHT:
        weight_field_ = *field;
        weight_name_ = c.name();
        break;
      case ColumnConfig::TASK_LABEL:
        task_labels_.push_back({*field, c.name()});
        break;
      case ColumnConfig::DENSE:
      case ColumnConfig::EVAL: {
        FloatColumn f;
        f.field = *field;
        f.name = c.name();
        f.log1p = c.transform() == ColumnConfig::LOG1P;
        f.missing_value = c.missing_value();
        if (c.has_clip_min()) f.clip_min = c.clip_min();
        if (c.has_clip_max()) f.clip_max = c.clip_max();
        f.standardize = c.standardize();
        if (c.standardize()) {
          f.mean = c.mean();
          f.std = c.std();
        }
        (c.kind() == ColumnConfig::DENSE ? dense_ : eval_).push_back(std::move(f));
        break;
      }
      case ColumnConfig::BUCKETIZED: {
        IdColumn& bucketized = (*sparse)[c.name()];
        bucketized.field = *field;
        bucketized.name = c.name();
        bucketized.bucketized = true;
        bucketized.boundaries.assign(c.boundaries().begin(), c.boundaries().end());
        break;
      }
      case ColumnConfig::CATEGORICAL:
      case ColumnConfig::MULTI_HOT: {
        IdColumn& ids = (*sparse)[c.name()];
        ids.field = *field;
        ids.name = c.name();
        ids.encoding = c.id_encoding();
        ids.multi_hot = c.kind() == ColumnConfig::MULTI_HOT;
        ids.separator = c.separator().empty() ? "|" : c.separator();
        break;
      }
      default:
        break;
    }
  }
  return absl::OkStatus();
}

absl::Status LineParser::MapFeatures(const v1::ModelConfig& config,
                                     const std::map<std::string, IdColumn>& sparse,
                                     absl::string_view path) {
  // The columns to parse, in order of first use: plain ones (crosses' sources
  // included) first, then the crosses, so a cross is computed after its sources.
  std::vector<std::string> plain, crosses;
  const auto add = [](std::vector<std::string>* names, const std::string& name) {
    if (std::find(names->begin(), names->end(), name) == names->end()) names->push_back(name);
  };
  for (const v1::FeatureConfig& f : config.features()) {
    auto it = sparse.find(f.column());
    if (it == sparse.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": feature '", f.name(), "' reads column '", f.column(), "', not a sparse column"));
    }
    if (it->second.cross_of.empty()) {
      add(&plain, f.column());
      continue;
    }
    for (const std::string& source : it->second.cross_of) {
      auto s = sparse.find(source);
      if (s == sparse.end() || s->second.multi_hot || !s->second.cross_of.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": cross '", f.column(), "' of '",
                                                       source, "', not a one-ID column"));
      }
      add(&plain, source);
    }
    add(&crosses, f.column());
  }
  std::map<std::string, int> index;
  for (const std::vector<std::string>* names : {&plain, &crosses}) {
    for (const std::string& name : *names) {
      index[name] = static_cast<int>(id_columns_.size());
      id_columns_.push_back(sparse.at(name));
    }
  }
  for (IdColumn& c : id_columns_) {
    for (const std::string& source : c.cross_of) c.cross_sources.push_back(index.at(source));
  }
  for (const v1::FeatureConfig& f : config.features()) feature_column_.push_back(index[f.column()]);
  return absl::OkStatus();
}

absl::StatusOr<LineParser> LineParser::Create(const v1::ModelConfig& config,
                                              const LineParserOptions& options,
                                              const std::vector<absl::string_view>& file_columns,
                                              absl::string_view path) {
  if (absl::Status s = CheckStatistics(config, path); !s.ok()) return s;
  HeaderIndex header;
  header.path = path;
  for (int i = 0; i < static_cast<int>(file_columns.size()); ++i) {
    header.index.emplace(file_columns[i], i);
    ++header.count[file_columns[i]];
  }

  LineParser p;
  p.num_fields_ = file_columns.size();
  p.rank_ = options.rank;
  p.world_size_ = options.world_size;
  std::map<std::string, IdColumn> sparse;  // every sparse column, by name
  if (absl::Status s = p.MapColumns(config, options, header, &sparse); !s.ok()) return s;
  if (p.label_field_ < 0 && !options.score_only) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": the config has no LABEL column"));
  }
  if (!options.score_only) {
    // The extra tasks' labels in DenseTowerConfig.tasks order.
    std::vector<LabelColumn> ordered;
    for (const v1::TaskConfig& task : config.dense().tasks()) {
      for (const LabelColumn& l : p.task_labels_) {
        if (l.name == task.label_column()) ordered.push_back(l);
      }
    }
    p.task_labels_ = std::move(ordered);
    p.task_label_values_.resize(p.task_labels_.size());
  }
  if (absl::Status s = p.MapFeatures(config, sparse, path); !s.ok()) return s;
  const std::string& partition_by = config.data().partition_by();
  if (!partition_by.empty() && partition_by != "file") {
    auto it = sparse.find(partition_by);
    if (it == sparse.end() || it->second.field < 0 || it->second.multi_hot ||
        it->second.bucketized) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": partition_by '", partition_by, "' is not a CATEGORICAL column"));
    }
    p.partition_ = it->second;
  }
  p.fields_.reserve(p.num_fields_ + 1);
  p.dense_values_.resize(p.dense_.size());
  p.eval_values_.resize(p.eval_.size());
  p.id_ends_.resize(p.id_columns_.size());
  return p;
}

bool LineParser::ParseBucket(const IdColumn& c, absl::string_view value, std::string* error) {
  uint64_t id = c.boundaries.size() + 1;  // empty: the "missing" bucket
  if (!value.empty()) {
    float x;
    if (!ParseFloat(value, &x)) {
      BadValue(c.name, "bad number", value, error);
      return false;
    }
    id = std::upper_bound(c.boundaries.begin(), c.boundaries.end(), x) - c.boundaries.begin();
  }
  ids_.push_back(id);
  return true;
}

void LineParser::CrossIds(const IdColumn& c) {
  cross_bytes_.clear();
  for (int source : c.cross_sources) {
    const uint32_t begin = source == 0 ? 0 : id_ends_[source - 1];
    if (id_ends_[source] == begin) return;  // a source without an ID: no cross ID
    const uint64_t id = ids_[begin];
    for (int b = 0; b < 8; ++b) cross_bytes_.push_back(static_cast<char>(id >> (8 * b)));
  }
  ids_.push_back(HashBytes(cross_bytes_));
}

bool LineParser::ParseIds(const IdColumn& c, absl::string_view value, std::string* error) {
  if (c.bucketized) return ParseBucket(c, value, error);
  if (value.empty()) return true;
  if (!c.multi_hot) {
    uint64_t id;
    if (!ParseId(c.encoding, value, &id)) {
      BadValue(c.name, "bad ID", value, error);
      return false;
    }
    ids_.push_back(id);
    return true;
  }
  const bool one_char = c.separator.size() == 1;
  size_t start = 0;
  while (start <= value.size()) {
    size_t stop;
    if (one_char) {
      const void* hit = std::memchr(value.data() + start, c.separator[0], value.size() - start);
      stop = hit == nullptr ? value.size() : static_cast<const char*>(hit) - value.data();
    } else {
      stop = value.find(c.separator, start);
      if (stop == absl::string_view::npos) stop = value.size();
    }
    const absl::string_view item = value.substr(start, stop - start);
    if (!item.empty()) {
      uint64_t id;
      if (!ParseId(c.encoding, item, &id)) {
        BadValue(c.name, "bad ID", item, error);
        return false;
      }
      ids_.push_back(id);
    }
    start = stop + c.separator.size();
  }
  return true;
}

LineParser::Result LineParser::Parse(absl::string_view line, std::string* error) {
  SplitTabs(line, &fields_);
  if (fields_.size() != num_fields_) {
    *error = absl::StrCat("expected ", num_fields_, " fields, got ", fields_.size());
    return Result::kMalformed;
  }
  if (partition_.field >= 0) {
    const absl::string_view value = fields_[partition_.field];
    uint64_t id = 0;  // an empty value counts as id 0
    if (!value.empty() && !ParseId(partition_.encoding, value, &id)) {
      BadValue(partition_.name, "bad ID", value, error);
      return Result::kMalformed;
    }
    partition_hash_ = Mix64(id);
    if (partition_hash_ % static_cast<uint64_t>(world_size_) != static_cast<uint64_t>(rank_)) {
      return Result::kOtherPartition;
    }
  }

  const absl::string_view label = label_field_ < 0 ? "0" : fields_[label_field_];
  if (label.size() == 1 && (label[0] == '0' || label[0] == '1')) {
    label_ = static_cast<float>(label[0] - '0');
  } else if (!ParseFloat(label, &label_) || (label_ != 0 && label_ != 1)) {
    BadValue(label_name_, "label must be 0 or 1, got", label, error);
    return Result::kMalformed;
  }

  for (size_t t = 0; t < task_labels_.size(); ++t) {
    const absl::string_view value = fields_[task_labels_[t].field];
    float& y = task_label_values_[t];
    if (value.size() == 1 && (value[0] == '0' || value[0] == '1')) {
      y = static_cast<float>(value[0] - '0');
    } else if (!ParseFloat(value, &y) || (y != 0 && y != 1)) {
      BadValue(task_labels_[t].name, "label must be 0 or 1, got", value, error);
      return Result::kMalformed;
    }
  }

  weight_ = 1;
  if (weight_field_ >= 0 && !fields_[weight_field_].empty()) {
    const absl::string_view value = fields_[weight_field_];
    if (!ParseFloat(value, &weight_) || weight_ < 0) {
      BadValue(weight_name_, "weight must be a float >= 0, got", value, error);
      return Result::kMalformed;
    }
  }

  for (size_t i = 0; i < dense_.size(); ++i) {
    const FloatColumn& c = dense_[i];
    const absl::string_view value = fields_[c.field];
    float x = c.missing_value;
    if (!value.empty()) {
      if (!ParseFloat(value, &x)) {
        BadValue(c.name, "bad number", value, error);
        return Result::kMalformed;
      }
    }
    if (c.log1p) x = std::copysign(std::log1p(std::fabs(x)), x);
    x = std::min(std::max(x, c.clip_min), c.clip_max);
    if (c.standardize) {
      x = (x - c.mean) / c.std;
      if (!std::isfinite(x)) {  // a tiny std and a far value: clip_min/clip_max bound it
        BadValue(c.name, "value overflows when standardized (set clip_min/clip_max):", value,
                 error);
        return Result::kMalformed;
      }
    }
    dense_values_[i] = x;
  }

  ids_.clear();
  for (size_t i = 0; i < id_columns_.size(); ++i) {
    const IdColumn& c = id_columns_[i];
    if (c.field < 0) {
      CrossIds(c);
    } else if (!ParseIds(c, fields_[c.field], error)) {
      return Result::kMalformed;
    }
    id_ends_[i] = static_cast<uint32_t>(ids_.size());
  }

  for (size_t i = 0; i < eval_.size(); ++i) {
    const absl::string_view value = fields_[eval_[i].field];
    float x = std::numeric_limits<float>::quiet_NaN();
    if (!value.empty() && !ParseFloat(value, &x)) {
      BadValue(eval_[i].name, "bad number", value, error);
      return Result::kMalformed;
    }
    eval_values_[i] = x;
  }
  return Result::kOk;
}

void LineParser::AppendTo(ExampleBatch* batch) const {
  batch->labels.push_back(label_);
  batch->weights.push_back(weight_);
  batch->dense.insert(batch->dense.end(), dense_values_.begin(), dense_values_.end());
  for (size_t f = 0; f < feature_column_.size(); ++f) {
    const int c = feature_column_[f];
    const uint32_t begin = c == 0 ? 0 : id_ends_[c - 1];
    SparseColumn& column = batch->sparse[f];
    column.ids.insert(column.ids.end(), ids_.begin() + begin, ids_.begin() + id_ends_[c]);
    column.offsets.push_back(static_cast<uint32_t>(column.ids.size()));
  }
  for (size_t i = 0; i < eval_values_.size(); ++i) batch->eval[i].push_back(eval_values_[i]);
  if (batch->task_labels.size() < task_label_values_.size()) {
    batch->task_labels.resize(task_label_values_.size());
  }
  for (size_t t = 0; t < task_label_values_.size(); ++t) {
    batch->task_labels[t].push_back(task_label_values_[t]);
  }
  ++batch->size;
}

}  // namespace ember::model
