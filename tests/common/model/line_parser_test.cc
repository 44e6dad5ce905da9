// Copyright 2026 The Ember Authors.
//
// Tests of common/model/line_parser.{h,cc}'s feature transforms: clipping and
// standardizing DENSE values, BUCKETIZED and CROSS columns, and a config that lacks the
// statistics its transforms need; and the TASK_LABEL columns of multi-task models. (Plain columns,
// partitioning and malformed lines are tested through the reader:
// tests/worker/data/reader_test.cc.)

#include "common/model/line_parser.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "common/hash.h"
#include "common/model/model_config.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace ember::model {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Columns: label, price (clip + standardize after LOG1P), age (clip only), bucketized
// hour, user, item; features: the bucketized hour and a user x item cross.
constexpr char kConfig[] = R"pb(
  data {
    columns { name: "label" kind: LABEL }
    columns {
      name: "price"
      kind: DENSE
      transform: LOG1P
      clip_max: 3
      standardize: true
      mean: 1
      std: 0.5
    }
    columns { name: "age" kind: DENSE clip_min: 18 clip_max: 65 missing_value: 30 }
    columns {
      name: "hour"
      kind: BUCKETIZED
      boundaries: [ 6, 12, 18 ]
    }
    columns { name: "user" kind: CATEGORICAL id_encoding: DECIMAL }
    columns { name: "item" kind: CATEGORICAL id_encoding: DECIMAL }
    columns {
      name: "user_x_item"
      kind: CROSS
      cross_of: [ "user", "item" ]
    }
  }
  tables { name: "t" dim: 16 }
  features { column: "hour" table: "t" }
  features { column: "user_x_item" table: "t" }
)pb";

v1::ModelConfig Config(const std::string& text = kConfig) {
  v1::ModelConfig config;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &config));
  absl::StatusOr<v1::ModelConfig> normalized = NormalizeModelConfig(config, "test");
  EXPECT_TRUE(normalized.ok()) << normalized.status();
  return normalized.ok() ? *normalized : config;
}

// The file's columns: the config's, in another order (a cross is not in the file).
const std::vector<absl::string_view> kHeader = {"item", "label", "hour", "price", "age", "user"};

// One parsed example.
struct Example {
  std::vector<float> dense;
  std::vector<std::vector<uint64_t>> ids;  // per feature
};

absl::StatusOr<Example> ParseOne(LineParser& parser, const std::string& line) {
  std::string error;
  if (parser.Parse(line, &error) != LineParser::Result::kOk) {
    return absl::InvalidArgumentError(error);
  }
  ExampleBatch batch;
  batch.Reset(parser.num_dense(), parser.num_features(), parser.num_eval());
  parser.AppendTo(&batch);
  Example e;
  e.dense = batch.dense;
  for (const SparseColumn& s : batch.sparse) e.ids.emplace_back(s.ids.begin(), s.ids.end());
  return e;
}

uint64_t Cross(uint64_t a, uint64_t b) {
  std::string bytes;
  for (uint64_t id : {a, b}) {
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>(id >> (8 * i)));
  }
  return HashBytes(bytes);
}

TEST(LineParserTransformsTest, AppliesEachTransform) {
  const v1::ModelConfig config = Config();
  absl::StatusOr<LineParser> parser = LineParser::Create(config, {}, kHeader, "f.tsv");
  ASSERT_TRUE(parser.ok()) << parser.status();
  ASSERT_EQ(parser->num_dense(), 2);
  ASSERT_EQ(parser->num_features(), 2);

  // item label hour price age user
  absl::StatusOr<Example> e = ParseOne(*parser, "7\t1\t13.5\t2\t70\t5");
  ASSERT_TRUE(e.ok()) << e.status();
  // price: log1p(2) = 1.0986 (below the clip) -> (1.0986 - 1) / 0.5; age: clipped to 65.
  EXPECT_FLOAT_EQ(e->dense[0], (std::log1p(2.0f) - 1.0f) / 0.5f);
  EXPECT_FLOAT_EQ(e->dense[1], 65.0f);
  EXPECT_THAT(e->ids[0], ElementsAre(2u));  // 12 <= 13.5 < 18
  EXPECT_THAT(e->ids[1], ElementsAre(Cross(5, 7)));

  // price log1p(1000) = 6.9 clipped to 3 -> (3 - 1) / 0.5 = 4; age below the clip -> 18;
  // hour on a boundary goes up; the cross is ordered (user, item).
  e = ParseOne(*parser, "5\t0\t6\t1000\t3\t7");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_FLOAT_EQ(e->dense[0], 4.0f);
  EXPECT_FLOAT_EQ(e->dense[1], 18.0f);
  EXPECT_THAT(e->ids[0], ElementsAre(1u));
  EXPECT_THAT(e->ids[1], ElementsAre(Cross(7, 5)));
  EXPECT_NE(Cross(7, 5), Cross(5, 7));

  // Empty values: price 0 -> (0 - 1) / 0.5; age missing_value 30 (inside the clip);
  // hour's "missing" bucket 4 (3 boundaries); no item: no cross ID.
  e = ParseOne(*parser, "\t0\t\t\t\t5");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_FLOAT_EQ(e->dense[0], -2.0f);
  EXPECT_FLOAT_EQ(e->dense[1], 30.0f);
  EXPECT_THAT(e->ids[0], ElementsAre(4u));
  EXPECT_TRUE(e->ids[1].empty());

  // Below the first boundary, and a negative price (LOG1P keeps the sign).
  e = ParseOne(*parser, "1\t0\t-3\t-1\t40\t2");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_FLOAT_EQ(e->dense[0], (-std::log1p(1.0f) - 1.0f) / 0.5f);
  EXPECT_THAT(e->ids[0], ElementsAre(0u));
}

TEST(LineParserTransformsTest, BadBucketizedNumberIsMalformed) {
  absl::StatusOr<LineParser> parser = LineParser::Create(Config(), {}, kHeader, "f.tsv");
  ASSERT_TRUE(parser.ok()) << parser.status();
  std::string error;
  EXPECT_EQ(parser->Parse("1\t0\tnoon\t1\t40\t2", &error), LineParser::Result::kMalformed);
  EXPECT_THAT(error, HasSubstr("column 'hour': bad number 'noon'"));
}

TEST(LineParserTransformsTest, AnOverflowingStandardizedValueIsMalformed) {
  v1::ModelConfig config = Config();
  v1::ColumnConfig* age = config.mutable_data()->mutable_columns(2);
  age->clear_clip_min();
  age->clear_clip_max();
  age->set_standardize(true);
  age->set_mean(0);
  age->set_std(1e-30f);
  absl::StatusOr<LineParser> parser = LineParser::Create(config, {}, kHeader, "f.tsv");
  ASSERT_TRUE(parser.ok()) << parser.status();
  std::string error;
  EXPECT_EQ(parser->Parse("1\t0\t1\t1\t1e30\t2", &error), LineParser::Result::kMalformed);
  EXPECT_THAT(error, HasSubstr("column 'age': value overflows when standardized"));
  EXPECT_EQ(parser->Parse("1\t0\t1\t1\t1e-31\t2", &error), LineParser::Result::kOk);
}

TEST(LineParserTransformsTest, CrossSourcesNeedNoFeature) {
  // The cross's sources are parsed although no feature reads them, and a feature may
  // read a source and the cross.
  std::string text = kConfig;
  text += R"pb(features { column: "user" table: "t" })pb";
  absl::StatusOr<LineParser> parser = LineParser::Create(Config(text), {}, kHeader, "f.tsv");
  ASSERT_TRUE(parser.ok()) << parser.status();
  absl::StatusOr<Example> e = ParseOne(*parser, "7\t1\t1\t2\t30\t5");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(e->ids[1], ElementsAre(Cross(5, 7)));
  EXPECT_THAT(e->ids[2], ElementsAre(5u));
}

TEST(LineParserTransformsTest, CrossOfABucketizedColumn) {
  v1::ModelConfig config = Config();
  v1::ColumnConfig* cross = config.mutable_data()->add_columns();
  cross->set_name("hour_x_user");
  cross->set_kind(v1::ColumnConfig::CROSS);
  cross->add_cross_of("hour");
  cross->add_cross_of("user");
  v1::FeatureConfig* feature = config.add_features();
  feature->set_column("hour_x_user");
  feature->set_table("t");
  absl::StatusOr<v1::ModelConfig> normalized = NormalizeModelConfig(config, "test");
  ASSERT_TRUE(normalized.ok()) << normalized.status();
  absl::StatusOr<LineParser> parser = LineParser::Create(*normalized, {}, kHeader, "f.tsv");
  ASSERT_TRUE(parser.ok()) << parser.status();
  absl::StatusOr<Example> e = ParseOne(*parser, "7\t1\t13\t2\t30\t5");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(e->ids[2], ElementsAre(Cross(2, 5)));
  // An empty hour is its missing bucket, an ID like any other.
  e = ParseOne(*parser, "7\t1\t\t2\t30\t5");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(e->ids[2], ElementsAre(Cross(4, 5)));
}

TEST(LineParserTransformsTest, OneFileColumnFeedsTwoColumns) {
  // "price" both standardized (DENSE) and bucketized (source: "price"), the bucket crossed
  // with the user.
  v1::ModelConfig config = Config();
  v1::ColumnConfig* bucket = config.mutable_data()->add_columns();
  bucket->set_name("price_bucket");
  bucket->set_source("price");
  bucket->set_kind(v1::ColumnConfig::BUCKETIZED);
  for (float b : {1.f, 10.f, 100.f}) bucket->add_boundaries(b);
  v1::ColumnConfig* cross = config.mutable_data()->add_columns();
  cross->set_name("price_x_user");
  cross->set_kind(v1::ColumnConfig::CROSS);
  cross->add_cross_of("price_bucket");
  cross->add_cross_of("user");
  for (const char* column : {"price_bucket", "price_x_user"}) {
    v1::FeatureConfig* feature = config.add_features();
    feature->set_column(column);
    feature->set_table("t");
  }
  absl::StatusOr<v1::ModelConfig> normalized = NormalizeModelConfig(config, "test");
  ASSERT_TRUE(normalized.ok()) << normalized.status();
  absl::StatusOr<LineParser> parser = LineParser::Create(*normalized, {}, kHeader, "f.tsv");
  ASSERT_TRUE(parser.ok()) << parser.status();
  absl::StatusOr<Example> e = ParseOne(*parser, "7\t1\t1\t50\t30\t5");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_FLOAT_EQ(e->dense[0], 4.0f);       // log1p(50) = 3.9 clipped to 3 -> (3 - 1) / 0.5
  EXPECT_THAT(e->ids[2], ElementsAre(2u));  // 10 <= 50 < 100: the raw value, not the DENSE one
  EXPECT_THAT(e->ids[3], ElementsAre(Cross(2, 5)));
}

TEST(LineParserTransformsTest, RefusesAConfigWithoutItsStatistics) {
  v1::ModelConfig config = Config();
  config.mutable_data()->mutable_columns(1)->clear_mean();
  config.mutable_data()->mutable_columns(1)->clear_std();
  absl::StatusOr<LineParser> parser = LineParser::Create(config, {}, kHeader, "f.tsv");
  ASSERT_FALSE(parser.ok());
  EXPECT_EQ(parser.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parser.status().message(),
              HasSubstr("data.columns[1] (price): standardize needs mean and std"));

  config = Config();
  config.mutable_data()->mutable_columns(3)->clear_boundaries();
  config.mutable_data()->mutable_columns(3)->set_quantiles(4);
  parser = LineParser::Create(config, {}, kHeader, "f.tsv");
  ASSERT_FALSE(parser.ok());
  EXPECT_THAT(parser.status().message(),
              HasSubstr("data.columns[3] (hour): quantiles needs its boundaries"));
}

TEST(LineParserTransformsTest, CriteoColumnsTakeTransforms) {
  // Criteo's fixed layout: a bucketized integer column and a cross of two hex columns.
  v1::ModelConfig config = Config(R"pb(
    data {
      format: CRITEO_TSV
      columns { name: "label" kind: LABEL }
      columns { name: "I1" kind: DENSE transform: LOG1P clip_max: 2 }
      columns {
        name: "I2"
        kind: BUCKETIZED
        boundaries: [ 1, 10, 100 ]
      }
      columns { name: "C1" kind: CATEGORICAL id_encoding: HEX }
      columns { name: "C2" kind: CATEGORICAL id_encoding: HEX }
      columns {
        name: "C1_x_C2"
        kind: CROSS
        cross_of: [ "C1", "C2" ]
      }
    }
    tables { name: "t" dim: 16 }
    features { column: "I2" table: "t" }
    features { column: "C1_x_C2" table: "t" }
  )pb");
  const std::vector<absl::string_view> names(CriteoColumnNames().begin(),
                                             CriteoColumnNames().end());
  absl::StatusOr<LineParser> parser = LineParser::Create(config, {}, names, "Criteo");
  ASSERT_TRUE(parser.ok()) << parser.status();
  std::vector<std::string> fields(40, "");
  fields[0] = "1";
  fields[1] = "100";
  fields[2] = "50";
  fields[14] = "a";
  fields[15] = "ff";
  absl::StatusOr<Example> e = ParseOne(*parser, absl::StrJoin(fields, "\t"));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(e->dense, ElementsAre(2.0f));
  EXPECT_THAT(e->ids[0], ElementsAre(2u));
  EXPECT_THAT(e->ids[1], ElementsAre(Cross(0xa, 0xff)));
}

// Multi-task: TASK_LABEL columns go to ExampleBatch.task_labels in dense.tasks order
// (not column order), 0/1 like LABEL; anything else is malformed naming the column; a
// score-only parser reads none of them.
TEST(LineParserTasksTest, TaskLabelsInTaskOrder) {
  const v1::ModelConfig config = Config(R"pb(
    data {
      columns { name: "label" kind: LABEL }
      columns { name: "a" kind: TASK_LABEL }
      columns { name: "b" kind: TASK_LABEL }
      columns { name: "user" kind: CATEGORICAL id_encoding: DECIMAL }
    }
    tables { name: "t" dim: 16 }
    features { column: "user" table: "t" }
    dense {
      tasks { name: "second" label_column: "b" }
      tasks { name: "first" label_column: "a" }
    }
  )pb");
  const std::vector<absl::string_view> header = {"user", "a", "label", "b"};
  absl::StatusOr<LineParser> parser = LineParser::Create(config, {}, header, "f.tsv");
  ASSERT_TRUE(parser.ok()) << parser.status();
  std::string error;
  ExampleBatch batch;
  batch.Reset(parser->num_dense(), parser->num_features(), parser->num_eval());
  for (const char* line : {"7\t1\t1\t0", "8\t0\t0\t1.0"}) {
    ASSERT_EQ(parser->Parse(line, &error), LineParser::Result::kOk) << error;
    parser->AppendTo(&batch);
  }
  ASSERT_EQ(batch.task_labels.size(), 2u);
  EXPECT_THAT(batch.task_labels[0], ElementsAre(0.0f, 1.0f));  // "second" reads b
  EXPECT_THAT(batch.task_labels[1], ElementsAre(1.0f, 0.0f));  // "first" reads a
  EXPECT_THAT(batch.labels, ElementsAre(1.0f, 0.0f));
  batch.Reset(parser->num_dense(), parser->num_features(), parser->num_eval());
  EXPECT_TRUE(batch.task_labels[0].empty());

  EXPECT_EQ(parser->Parse("7\t2\t1\t0", &error), LineParser::Result::kMalformed);
  EXPECT_THAT(error, HasSubstr("column 'a': label must be 0 or 1, got '2'"));

  LineParserOptions score_only;
  score_only.score_only = true;
  absl::StatusOr<LineParser> scorer =
      LineParser::Create(config, score_only, std::vector<absl::string_view>{"user"}, "rows");
  ASSERT_TRUE(scorer.ok()) << scorer.status();
  ASSERT_EQ(scorer->Parse("7", &error), LineParser::Result::kOk) << error;
  ExampleBatch rows;
  rows.Reset(scorer->num_dense(), scorer->num_features(), scorer->num_eval());
  scorer->AppendTo(&rows);
  EXPECT_TRUE(rows.task_labels.empty());
}

}  // namespace
}  // namespace ember::model
