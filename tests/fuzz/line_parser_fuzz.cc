// Copyright 2026 The Ember Authors.
//
// Fuzz target: the TSV line parser (common/model/line_parser.h) under two configs, the
// quickstart's schema TSV (DECIMAL ids, a MULTI_HOT column, LOG1P dense columns, EVAL
// columns, and the feature transforms: clipping, standardizing, a bucketized column
// reading another's field, a cross) and a Criteo layout with HEX ids. The first byte picks the
// config and whether EVAL columns are read; the rest is split into lines. Invariants: no crash; a
// line is kOk or kMalformed (with a reason), never another partition (one rank); every kOk example
// appends the parser's column counts to the batch, with finite dense values and a label of 0 or 1.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/model/example_batch.h"
#include "common/model/line_parser.h"
#include "common/model/model_config.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using ember::model::ExampleBatch;
using ember::model::LineParser;

constexpr char kSchemaConfig[] = R"pb(
  name: "fuzz-schema"
  data {
    format: SCHEMA_TSV
    train_path: "/unused"
    columns { name: "label" kind: LABEL }
    columns { name: "w" kind: WEIGHT }
    columns { name: "user_id" kind: CATEGORICAL id_encoding: DECIMAL }
    columns { name: "item_id" kind: CATEGORICAL id_encoding: HEX }
    columns { name: "tags" kind: MULTI_HOT separator: "|" }
    columns {
      name: "price"
      kind: DENSE
      transform: LOG1P
      clip_min: -2
      clip_max: 9
      standardize: true
      mean: 2.5
      std: 1.5
    }
    columns { name: "age" kind: DENSE missing_value: -1 }
    columns { name: "p" kind: EVAL }
    columns {
      name: "age_bucket"
      source: "age"
      kind: BUCKETIZED
      boundaries: [ 18, 30, 50 ]
    }
    columns {
      name: "user_x_age"
      kind: CROSS
      cross_of: [ "user_id", "age_bucket" ]
    }
  }
  tables { name: "user" dim: 16 }
  tables { name: "item" dim: 16 }
  tables { name: "tag" dim: 16 }
  features { column: "user_id" table: "user" }
  features { column: "item_id" table: "item" }
  features { column: "tags" table: "tag" }
  features { column: "age_bucket" table: "user" }
  features { column: "user_x_age" table: "user" }
)pb";

constexpr char kCriteoConfig[] = R"pb(
  name: "fuzz-criteo"
  data { format: CRITEO_TSV train_path: "/unused" }
  tables { name: "c" dim: 16 }
)pb";

struct Parsers {
  std::vector<ember::model::LineParser> parsers;  // schema, schema with eval, criteo
};

ember::v1::ModelConfig Config(const char* text) {
  absl::StatusOr<ember::v1::ModelConfig> config =
      ember::model::ParseModelConfig(text, /*json=*/false, "", "fuzz");
  if (!config.ok()) std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
  FUZZ_CHECK(config.ok());
  return *config;
}

std::vector<absl::string_view> Columns(const ember::v1::ModelConfig& config) {
  std::vector<absl::string_view> names;
  if (config.data().format() == ember::v1::DataConfig::CRITEO_TSV) {
    for (const std::string& name : ember::model::CriteoColumnNames()) names.push_back(name);
  } else {
    // The file's columns: not the CROSS ones or those reading another's field.
    for (const auto& column : config.data().columns()) {
      if (column.kind() != ember::v1::ColumnConfig::CROSS && column.source().empty()) {
        names.push_back(column.name());
      }
    }
  }
  return names;
}

const Parsers& GetParsers() {
  static const Parsers* parsers = [] {
    static const ember::v1::ModelConfig schema = Config(kSchemaConfig);
    static const ember::v1::ModelConfig criteo = Config(kCriteoConfig);
    auto* out = new Parsers;
    for (int i = 0; i < 3; ++i) {
      const ember::v1::ModelConfig& config = i < 2 ? schema : criteo;
      ember::model::LineParserOptions options;
      options.with_eval_columns = i == 1;
      absl::StatusOr<ember::model::LineParser> parser =
          ember::model::LineParser::Create(config, options, Columns(config), "fuzz.tsv");
      FUZZ_CHECK(parser.ok());
      out->parsers.push_back(*std::move(parser));
    }
    return out;
  }();
  return *parsers;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  ember::model::LineParser parser = GetParsers().parsers[data[0] % 3];
  const absl::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  ember::model::ExampleBatch batch;
  batch.Reset(parser.num_dense(), parser.num_features(), parser.num_eval());
  size_t examples = 0;
  std::string error;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    error.clear();
    switch (parser.Parse(line, &error)) {
      case ember::model::LineParser::Result::kOk:
        parser.AppendTo(&batch);
        ++examples;
        break;
      case ember::model::LineParser::Result::kMalformed:
        FUZZ_CHECK(!error.empty());
        break;
      case ember::model::LineParser::Result::kOtherPartition:
        FUZZ_CHECK(false);  // one rank: every line is ours
    }
  }
  FUZZ_CHECK(batch.labels.size() == examples);
  FUZZ_CHECK(batch.dense.size() == examples * parser.num_dense());
  for (float label : batch.labels) FUZZ_CHECK(label == 0.0f || label == 1.0f);
  for (float value : batch.dense) FUZZ_CHECK(std::isfinite(value));
  if (parser.num_features() == 5) {  // the schema: age_bucket is one ID of 0..4 per example
    const ember::model::SparseColumn& buckets = batch.sparse[3];
    FUZZ_CHECK(buckets.ids.size() == examples);
    for (uint64_t id : buckets.ids) FUZZ_CHECK(id <= 4);
  }
  return 0;
}
