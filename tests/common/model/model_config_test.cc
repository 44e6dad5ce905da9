// Copyright 2026 The Ember Authors.
//
// Tests of common/model/model_config.{h,cc}: the real quickstart config, text/JSON
// equivalence, defaults, path resolution and every validation error (the skew
// section's: model_config_skew_test.cc).

#include "common/model/model_config.h"

#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/common/model/model_config_test_util.h"

namespace ember::model {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;

TEST(ModelConfigTest, LoadsTheCriteoConfigs) {
  // configs/criteo.pbtxt (docs/PERFORMANCE.md "configs/criteo.pbtxt") and
  // tools/criteo_like/criteo_like.pbtxt (the config a new user wrote for the dataset Ember
  // did not generate): Criteo's default columns, one table per categorical column.
  for (const char* file : {"/configs/criteo.pbtxt", "/tools/criteo_like/criteo_like.pbtxt"}) {
    SCOPED_TRACE(file);
    absl::StatusOr<v1::ModelConfig> config = LoadModelConfig(std::string(EMBER_SOURCE_DIR) + file);
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->data().format(), v1::DataConfig::CRITEO_TSV);
    EXPECT_EQ(config->data().columns_size(), 40);  // label, I1..I13, C1..C26
    EXPECT_EQ(config->tables_size(), 26);
    EXPECT_EQ(config->features_size(), 26);
    if (config->name() != "criteo") continue;
    // The recommended settings: Adagrad 0.1 with accumulator 0, a CONCAT tower.
    for (const v1::TableConfig& t : config->tables()) {
      EXPECT_EQ(t.optimizer().kind(), v1::OptimizerConfig::ADAGRAD) << t.name();
      EXPECT_FLOAT_EQ(t.optimizer().learning_rate(), 0.1f) << t.name();
      EXPECT_TRUE(t.optimizer().has_initial_accumulator()) << t.name();
      EXPECT_EQ(t.optimizer().initial_accumulator(), 0.0f) << t.name();
    }
    EXPECT_EQ(config->dense().interaction(), v1::DenseTowerConfig::CONCAT);
  }
}

// The README's "Your own data" config, as written there: it loads, and it leaves every
// optimizer and initializer to the defaults the sweep chose (docs/PERFORMANCE.md "Defaults
// that learn"), so what the README recommends is what the sweep measured.
TEST(ModelConfigTest, TheReadmesRecommendedConfigLoadsAndLeavesOptimizersToTheDefaults) {
  const std::string readme = ReadText(std::string(EMBER_SOURCE_DIR) + "/README.md");
  const size_t section = readme.find("## Your own data");
  ASSERT_NE(section, std::string::npos);
  const size_t open = readme.find("```\n", section);
  ASSERT_NE(open, std::string::npos);
  const size_t close = readme.find("```", open + 4);
  ASSERT_NE(close, std::string::npos);
  const std::string text = readme.substr(open + 4, close - open - 4);
  absl::StatusOr<v1::ModelConfig> config =
      ParseModelConfig(text, /*json=*/false, "/data", "README");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->data().train_path(), "/data/data/train");
  ASSERT_EQ(config->tables_size(), 2);
  for (const v1::TableConfig& t : config->tables()) {
    EXPECT_FALSE(t.has_optimizer()) << t.name();
    EXPECT_FALSE(t.has_initializer()) << t.name();
  }
  EXPECT_EQ(config->dense_optimizer().kind(), v1::DenseOptimizerConfig::ADAM);
  EXPECT_FLOAT_EQ(config->dense_optimizer().learning_rate(), 0.01f);
}

TEST(ModelConfigTest, LoadsQuickstart) {
  absl::StatusOr<v1::ModelConfig> config = LoadModelConfig(kQuickstart);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->name(), "quickstart");
  EXPECT_EQ(config->data().format(), v1::DataConfig::SCHEMA_TSV);
  const std::filesystem::path root = std::filesystem::absolute(EMBER_SOURCE_DIR).lexically_normal();
  EXPECT_EQ(std::filesystem::path(config->data().train_path()),
            (root / "run/quickstart/data/train").lexically_normal());
  EXPECT_EQ(std::filesystem::path(config->data().test_path()),
            (root / "run/quickstart/data/test").lexically_normal());
  EXPECT_EQ(config->data().columns_size(), 15);
  EXPECT_EQ(config->tables_size(), 5);
  ASSERT_EQ(config->features_size(), 8);
  EXPECT_EQ(config->features(0).name(), "user_id");
  EXPECT_EQ(config->features(0).pooling(), v1::FeatureConfig::SUM);
  EXPECT_EQ(config->features(7).name(), "recent_items");
  EXPECT_EQ(config->features(7).pooling(), v1::FeatureConfig::MEAN);
  EXPECT_EQ(config->data().columns(8).separator(), "|");
  EXPECT_EQ(config->dense_optimizer().beta2(), 0.999f);
  EXPECT_EQ(config->training().staleness(), 1u);
  EXPECT_EQ(config->training().eval_every_steps(), 250u);

  std::vector<std::string> dense, eval;
  for (const v1::ColumnConfig* c : DenseColumns(*config)) dense.push_back(c->name());
  for (const v1::ColumnConfig* c : EvalColumns(*config)) eval.push_back(c->name());
  EXPECT_THAT(dense, ::testing::ElementsAre("price", "user_age", "session_depth"));
  EXPECT_THAT(eval, ::testing::ElementsAre("true_prob", "item_train_count", "cold_user"));
}

TEST(ModelConfigTest, JsonEqualsText) {
  const std::string text = ReadText(kQuickstart);
  v1::ModelConfig raw;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &raw));
  std::string json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(raw, &json).ok());

  absl::StatusOr<v1::ModelConfig> from_text = ParseModelConfig(text, false, "/base", "a.pbtxt");
  absl::StatusOr<v1::ModelConfig> from_json = ParseModelConfig(json, true, "/base", "a.json");
  ASSERT_TRUE(from_text.ok()) << from_text.status();
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  EXPECT_TRUE(MessageDifferencer::Equals(*from_text, *from_json));
  EXPECT_EQ(from_json->data().train_path(), "/run/quickstart/data/train");

  // LoadModelConfig picks JSON by extension and resolves against the file's folder.
  const std::string dir = MakeTempDir();
  WriteText(dir + "/model.json", json);
  absl::StatusOr<v1::ModelConfig> loaded = LoadModelConfig(dir + "/model.json");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->data().train_path(),
            (std::filesystem::path(dir).parent_path() / "run/quickstart/data/train")
                .lexically_normal()
                .string());
  from_text->mutable_data()->set_train_path(loaded->data().train_path());
  from_text->mutable_data()->set_test_path(loaded->data().test_path());
  EXPECT_TRUE(MessageDifferencer::Equals(*from_text, *loaded));
}

TEST(ModelConfigTest, FillsDefaults) {
  absl::StatusOr<v1::ModelConfig> config = NormalizeModelConfig(Small(), "small");
  ASSERT_TRUE(config.ok()) << config.status();
  const v1::ModelConfig& c = *config;
  EXPECT_EQ(c.name(), "ember");
  EXPECT_EQ(c.data().format(), v1::DataConfig::SCHEMA_TSV);
  EXPECT_EQ(c.data().partition_by(), "file");
  EXPECT_DOUBLE_EQ(c.data().max_malformed_fraction(), 0.001);
  EXPECT_EQ(c.data().columns(0).transform(), v1::ColumnConfig::NONE);
  EXPECT_EQ(c.data().columns(0).id_encoding(), v1::ColumnConfig::HASH);
  EXPECT_EQ(c.data().columns(2).separator(), "|");
  EXPECT_EQ(c.data().columns(1).separator(), "");  // not MULTI_HOT
  EXPECT_EQ(c.features(0).name(), "u");
  EXPECT_EQ(c.features(1).pooling(), v1::FeatureConfig::SUM);
  EXPECT_THAT(c.dense().bottom_mlp(), ::testing::ElementsAre(64, 16));
  EXPECT_THAT(c.dense().top_mlp(), ::testing::ElementsAre(64, 32));
  EXPECT_EQ(c.dense().interaction(), v1::DenseTowerConfig::DOT);
  EXPECT_EQ(c.dense().init_seed(), 1u);
  EXPECT_EQ(c.dense_optimizer().kind(), v1::DenseOptimizerConfig::ADAM);
  EXPECT_FLOAT_EQ(c.dense_optimizer().learning_rate(), 0.01f);  // the defaults sweep's
  EXPECT_FLOAT_EQ(c.dense_optimizer().beta1(), 0.9f);
  EXPECT_FLOAT_EQ(c.dense_optimizer().beta2(), 0.999f);
  EXPECT_FLOAT_EQ(c.dense_optimizer().epsilon(), 1e-8f);
  EXPECT_FLOAT_EQ(c.dense_optimizer().initial_accumulator(), 1e-6f);
  EXPECT_EQ(c.training().batch_size(), 1024u);
  EXPECT_EQ(c.training().epochs(), 1u);
  EXPECT_EQ(c.training().consistency(), v1::TrainingConfig::BSP);
  EXPECT_EQ(c.training().staleness(), 1u);
  EXPECT_EQ(c.training().log_every_steps(), 100u);
  EXPECT_EQ(c.training().max_steps(), 0u);
  EXPECT_EQ(c.eval().hot_min_count(), 1000u);
  EXPECT_EQ(c.eval().warm_min_count(), 20u);

  // Idempotent.
  absl::StatusOr<v1::ModelConfig> again = NormalizeModelConfig(c, "small");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(MessageDifferencer::Equals(c, *again));

  // An explicit initial_accumulator of 0 stays 0 (optional field).
  v1::ModelConfig zero_acc = Small();
  zero_acc.mutable_dense_optimizer()->set_initial_accumulator(0);
  absl::StatusOr<v1::ModelConfig> z = NormalizeModelConfig(zero_acc, "small");
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z->dense_optimizer().initial_accumulator(), 0.0f);
}

TEST(ModelConfigTest, TheDefaultTowerEndsAtTheTablesSharedDim) {
  // A config without a dense section trains with tables of any one dim (DOT needs the
  // bottom MLP to end at it); mixed dims keep 16, and the check names the mismatch.
  v1::ModelConfig eight = Small();
  for (v1::TableConfig& t : *eight.mutable_tables()) t.set_dim(8);
  absl::StatusOr<v1::ModelConfig> c = NormalizeModelConfig(eight, "eight");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->dense().bottom_mlp(), ::testing::ElementsAre(64, 8));
  absl::StatusOr<v1::ModelConfig> again = NormalizeModelConfig(*c, "eight");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(MessageDifferencer::Equals(*c, *again));
  // Only DOT needs it: CONCAT (what ember.torch gives configs without a dense section)
  // keeps 16.
  eight.mutable_dense()->set_interaction(v1::DenseTowerConfig::CONCAT);
  absl::StatusOr<v1::ModelConfig> concat = NormalizeModelConfig(eight, "eight");
  ASSERT_TRUE(concat.ok()) << concat.status();
  EXPECT_THAT(concat->dense().bottom_mlp(), ::testing::ElementsAre(64, 16));

  v1::ModelConfig mixed = Small();
  v1::TableConfig* other = mixed.add_tables();
  other->set_name("wide");
  other->set_dim(32);
  mixed.mutable_features(1)->set_table("wide");
  absl::StatusOr<v1::ModelConfig> m = NormalizeModelConfig(mixed, "mixed");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()),
              ::testing::HasSubstr("table 'wide' has dim 32 but DOT interaction needs the last "
                                   "bottom_mlp size 16"));
}

TEST(ModelConfigTest, CriteoDefaultColumns) {
  v1::ModelConfig config;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
                                                              data { format: CRITEO_TSV }
                                                              tables { name: "t" dim: 16 }
                                                              features { column: "C1" table: "t" }
                                                              features { column: "C26" table: "t" }
                                                            )pb",
                                                            &config));
  absl::StatusOr<v1::ModelConfig> c = NormalizeModelConfig(config, "criteo");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->data().columns_size(), 40);
  EXPECT_EQ(c->data().columns(0).name(), "label");
  EXPECT_EQ(c->data().columns(0).kind(), v1::ColumnConfig::LABEL);
  EXPECT_EQ(c->data().columns(13).name(), "I13");
  EXPECT_EQ(c->data().columns(13).kind(), v1::ColumnConfig::DENSE);
  EXPECT_EQ(c->data().columns(13).transform(), v1::ColumnConfig::LOG1P);
  EXPECT_EQ(c->data().columns(14).name(), "C1");
  EXPECT_EQ(c->data().columns(39).name(), "C26");
  EXPECT_EQ(c->data().columns(39).kind(), v1::ColumnConfig::CATEGORICAL);
  EXPECT_EQ(c->data().columns(39).id_encoding(), v1::ColumnConfig::HEX);
  EXPECT_EQ(DenseColumns(*c).size(), 13u);
  EXPECT_TRUE(EvalColumns(*c).empty());
}

TEST(ModelConfigTest, ResolvesOnlyRelativePaths) {
  v1::ModelConfig config = Small();
  config.mutable_data()->set_train_path("/abs/train");
  config.mutable_data()->set_test_path("d/../test");
  std::string text;
  ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(config, &text));
  absl::StatusOr<v1::ModelConfig> c = ParseModelConfig(text, false, "/cfg/dir", "x");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->data().train_path(), "/abs/train");
  EXPECT_EQ(c->data().test_path(), "/cfg/dir/test");
  c = ParseModelConfig(text, false, "", "x");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->data().test_path(), "d/../test");
}

TEST(ModelConfigTest, ParseErrors) {
  EXPECT_EQ(LoadModelConfig("/no/such/model.pbtxt").status().code(), absl::StatusCode::kNotFound);

  absl::StatusOr<v1::ModelConfig> c =
      ParseModelConfig("name: \"x\"\ndata {\n  colums { name: \"a\" }\n}\n", false, "", "m.pbtxt");
  ASSERT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("m.pbtxt:3:"));
  EXPECT_THAT(c.status().message(), HasSubstr("colums"));

  c = ParseModelConfig("{\"data\": {\"columns\": 3}}", true, "", "m.json");
  ASSERT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("m.json: JSON parse error"));

  c = ParseModelConfig("{\"nmae\": \"x\"}", true, "", "m.json");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ModelConfigTest, ErrorNamesOriginAndFeature) {
  v1::ModelConfig config;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(ReadText(kQuickstart), &config));
  config.mutable_features(2)->set_column("recent_items");
  config.mutable_features(2)->set_table("itm");
  absl::StatusOr<v1::ModelConfig> c = NormalizeModelConfig(config, "quickstart.pbtxt");
  EXPECT_EQ(c.status(),
            absl::InvalidArgumentError(
                "quickstart.pbtxt: features[2] (recent_items): table 'itm' is not in tables"));
}

class ModelConfigValidationTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(ModelConfigValidationTest, RejectsWithFieldName) { ExpectRefused(GetParam()); }

v1::ColumnConfig* Col(v1::ModelConfig* c, int i) { return c->mutable_data()->mutable_columns(i); }

// Adds a TASK_LABEL column "converted" (once) and a task "conv" reading it.
v1::TaskConfig* WithTask(v1::ModelConfig* c) {
  bool has = false;
  for (const v1::ColumnConfig& col : c->data().columns()) has |= col.name() == "converted";
  if (!has) {
    auto* col = c->mutable_data()->add_columns();
    col->set_name("converted");
    col->set_kind(v1::ColumnConfig::TASK_LABEL);
  }
  v1::TaskConfig* t = c->mutable_dense()->add_tasks();
  t->set_name("conv");
  t->set_label_column("converted");
  return t;
}

INSTANTIATE_TEST_SUITE_P(
    AllChecks, ModelConfigValidationTest,
    ::testing::Values(
        BadCase{"no label", [](v1::ModelConfig* c) { Col(c, 0)->set_kind(v1::ColumnConfig::IGNORE); },
                "data.columns: need exactly one LABEL column, found 0"},
        BadCase{"two labels",
                [](v1::ModelConfig* c) { Col(c, 4)->set_kind(v1::ColumnConfig::LABEL); },
                "data.columns: need exactly one LABEL column, found 2"},
        BadCase{"two weights",
                [](v1::ModelConfig* c) {
                  for (const char* name : {"w1", "w2"}) {
                    auto* w = c->mutable_data()->add_columns();
                    w->set_name(name);
                    w->set_kind(v1::ColumnConfig::WEIGHT);
                  }
                },
                "data.columns: at most one WEIGHT column, found 2"},
        BadCase{"duplicate column", [](v1::ModelConfig* c) { Col(c, 3)->set_name("u"); },
                "data.columns[3] (u): column name 'u' appears twice"},
        BadCase{"empty column name", [](v1::ModelConfig* c) { Col(c, 4)->set_name(""); },
                "data.columns[4] (): name is empty"},
        BadCase{"tab in column name", [](v1::ModelConfig* c) { Col(c, 4)->set_name("a\tb"); },
                "data.columns[4] (a\tb): name contains a tab"},
        BadCase{"criteo name",
                [](v1::ModelConfig* c) { c->mutable_data()->set_format(v1::DataConfig::CRITEO_TSV); },
                "data.columns[1] (u): not a Criteo column"},
        BadCase{"unknown format",
                [](v1::ModelConfig* c) {
                  c->mutable_data()->set_format(static_cast<v1::DataConfig::Format>(9));
                },
                "data.format: unknown format 9"},
        BadCase{"unknown kind",
                [](v1::ModelConfig* c) { Col(c, 4)->set_kind(static_cast<v1::ColumnConfig::Kind>(42)); },
                "data.columns[4] (p): unknown kind 42"},
        BadCase{"transform on sparse",
                [](v1::ModelConfig* c) { Col(c, 1)->set_transform(v1::ColumnConfig::LOG1P); },
                "data.columns[1] (u): transform applies to DENSE columns only"},
        BadCase{"id_encoding on dense",
                [](v1::ModelConfig* c) { Col(c, 3)->set_id_encoding(v1::ColumnConfig::HEX); },
                "data.columns[3] (x): id_encoding applies"},
        BadCase{"tab separator", [](v1::ModelConfig* c) { Col(c, 2)->set_separator("\t"); },
                "data.columns[2] (items): separator must not contain a tab"},
        BadCase{"non-finite missing value",
                [](v1::ModelConfig* c) { Col(c, 3)->set_missing_value(INFINITY); },
                "data.columns[3] (x): missing_value is not finite"},
        BadCase{"NaN malformed fraction",
                [](v1::ModelConfig* c) { c->mutable_data()->set_max_malformed_fraction(NAN); },
                "data.max_malformed_fraction: is NaN"},
        BadCase{"partition by unknown column",
                [](v1::ModelConfig* c) { c->mutable_data()->set_partition_by("user"); },
                "data.partition_by: 'user' is neither \"file\" nor a CATEGORICAL column"},
        BadCase{"partition by multi-hot",
                [](v1::ModelConfig* c) { c->mutable_data()->set_partition_by("items"); },
                "data.partition_by: 'items'"},
        BadCase{"bad table name", [](v1::ModelConfig* c) { c->mutable_tables(0)->set_name("a b"); },
                "tables[0] (a b): name must match"},
        BadCase{"table dim 0", [](v1::ModelConfig* c) { c->mutable_tables(0)->set_dim(0); },
                "tables[0] (t): dim 0 is out of range 1..4096"},
        BadCase{"table dim too big", [](v1::ModelConfig* c) { c->mutable_tables(0)->set_dim(4097); },
                "tables[0] (t): dim 4097 is out of range 1..4096"},
        BadCase{"duplicate table",
                [](v1::ModelConfig* c) { *c->add_tables() = c->tables(0); },
                "tables[1] (t): table name 't' appears twice"},
        BadCase{"feature column missing",
                [](v1::ModelConfig* c) { c->mutable_features(1)->set_column("nope"); },
                "features[1] (nope): column 'nope' is not in data.columns"},
        BadCase{"feature column empty",
                [](v1::ModelConfig* c) {
                  c->mutable_features(1)->set_column("");
                  c->mutable_features(1)->set_name("f");
                },
                "features[1] (f): column is empty"},
        BadCase{"feature column dense",
                [](v1::ModelConfig* c) { c->mutable_features(1)->set_column("x"); },
                "features[1] (x): column 'x' is DENSE, not CATEGORICAL, MULTI_HOT, BUCKETIZED or CROSS"},
        BadCase{"feature table missing",
                [](v1::ModelConfig* c) { c->mutable_features(0)->set_table("itm"); },
                "features[0] (u): table 'itm' is not in tables"},
        BadCase{"duplicate feature name",
                [](v1::ModelConfig* c) { c->mutable_features(1)->set_name("u"); },
                "features[1] (u): feature name 'u' appears twice"},
        BadCase{"unknown pooling",
                [](v1::ModelConfig* c) {
                  c->mutable_features(0)->set_pooling(static_cast<v1::FeatureConfig::Pooling>(7));
                },
                "features[0] (u): unknown pooling 7"},
        BadCase{"DOT dim mismatch",
                [](v1::ModelConfig* c) {
                  c->mutable_dense()->add_bottom_mlp(32);
                  c->mutable_dense()->add_bottom_mlp(8);
                },
                "features[0] (u): table 't' has dim 16 but DOT interaction needs the last "
                "bottom_mlp size 8"},
        BadCase{"bottom layer 0",
                [](v1::ModelConfig* c) {
                  c->mutable_dense()->add_bottom_mlp(0);
                  c->mutable_dense()->add_bottom_mlp(16);
                },
                "dense.bottom_mlp[0]: size 0 is out of range"},
        BadCase{"top layer too big",
                [](v1::ModelConfig* c) { c->mutable_dense()->add_top_mlp(1 << 20); },
                "dense.top_mlp[0]: size 1048576 is out of range"},
        BadCase{"unknown interaction",
                [](v1::ModelConfig* c) {
                  c->mutable_dense()->set_interaction(
                      static_cast<v1::DenseTowerConfig::Interaction>(5));
                },
                "dense.interaction: unknown interaction 5"},
        BadCase{"cross_layers without CROSS",
                [](v1::ModelConfig* c) { c->mutable_dense()->set_cross_layers(2); },
                "dense.cross_layers: is set but interaction is DOT, not CROSS"},
        BadCase{"cross_rank without CROSS",
                [](v1::ModelConfig* c) {
                  c->mutable_dense()->set_interaction(v1::DenseTowerConfig::CONCAT);
                  c->mutable_dense()->set_cross_rank(4);
                },
                "dense.cross_rank: is set but interaction is CONCAT, not CROSS"},
        BadCase{"too many cross layers",
                [](v1::ModelConfig* c) {
                  c->mutable_dense()->set_interaction(v1::DenseTowerConfig::CROSS);
                  c->mutable_dense()->set_cross_layers(9);
                },
                "dense.cross_layers: 9 is out of range 1..8"},
        BadCase{"cross_rank not below the width",
                [](v1::ModelConfig* c) {
                  // The cross width: bottom 16 + two features of dim 16.
                  c->mutable_dense()->set_interaction(v1::DenseTowerConfig::CROSS);
                  c->mutable_dense()->set_cross_rank(48);
                },
                "dense.cross_rank: 48 is not below the cross width 48"},
        BadCase{"negative lr",
                [](v1::ModelConfig* c) { c->mutable_dense_optimizer()->set_learning_rate(-1); },
                "dense_optimizer.learning_rate: must be > 0"},
        BadCase{"beta1 >= 1",
                [](v1::ModelConfig* c) { c->mutable_dense_optimizer()->set_beta1(1); },
                "dense_optimizer.beta1: must be in (0, 1)"},
        BadCase{"beta2 negative",
                [](v1::ModelConfig* c) { c->mutable_dense_optimizer()->set_beta2(-0.5); },
                "dense_optimizer.beta2: must be in (0, 1)"},
        BadCase{"epsilon negative",
                [](v1::ModelConfig* c) { c->mutable_dense_optimizer()->set_epsilon(-1); },
                "dense_optimizer.epsilon: must be > 0"},
        BadCase{"negative accumulator",
                [](v1::ModelConfig* c) { c->mutable_dense_optimizer()->set_initial_accumulator(-1); },
                "dense_optimizer.initial_accumulator: must be >= 0"},
        BadCase{"unknown optimizer",
                [](v1::ModelConfig* c) {
                  c->mutable_dense_optimizer()->set_kind(
                      static_cast<v1::DenseOptimizerConfig::Kind>(9));
                },
                "dense_optimizer.kind: unknown kind 9"},
        BadCase{"unknown consistency",
                [](v1::ModelConfig* c) {
                  c->mutable_training()->set_consistency(
                      static_cast<v1::TrainingConfig::Consistency>(9));
                },
                "training.consistency: unknown consistency 9"},
        BadCase{"eval column not EVAL",
                [](v1::ModelConfig* c) { c->mutable_eval()->set_item_count_column("x"); },
                "eval.item_count_column: 'x' is not an EVAL column in data.columns"},
        BadCase{"eval column missing",
                [](v1::ModelConfig* c) { c->mutable_eval()->set_cold_user_column("cold"); },
                "eval.cold_user_column: 'cold' is not an EVAL column"},
        BadCase{"true_prob column not EVAL",
                [](v1::ModelConfig* c) { c->mutable_eval()->set_true_prob_column("u"); },
                "eval.true_prob_column: 'u' is not an EVAL column"},
        BadCase{"task label not TASK_LABEL",
                [](v1::ModelConfig* c) {
                  auto* t = c->mutable_dense()->add_tasks();
                  t->set_name("conv");
                  t->set_label_column("x");
                },
                "dense.tasks[0] (conv): label_column 'x' is not a TASK_LABEL column"},
        BadCase{"task named click",
                [](v1::ModelConfig* c) { WithTask(c)->set_name("click"); },
                "dense.tasks[0] (click): task name 'click' appears twice"},
        BadCase{"task bad name", [](v1::ModelConfig* c) { WithTask(c)->set_name("a b"); },
                "dense.tasks[0] (a b): name must match [a-zA-Z0-9_]{1,32}"},
        BadCase{"task loss weight",
                [](v1::ModelConfig* c) { WithTask(c)->set_loss_weight(0); },
                "dense.tasks[0] (conv): loss_weight 0 must be in (0, 100]"},
        BadCase{"task unknown kind",
                [](v1::ModelConfig* c) {
                  WithTask(c)->set_kind(static_cast<v1::TaskConfig::Kind>(7));
                },
                "dense.tasks[0] (conv): unknown kind 7"},
        BadCase{"task top_mlp",
                [](v1::ModelConfig* c) { WithTask(c)->add_top_mlp(0); },
                "dense.tasks[0] (conv).top_mlp[0]: size 0 is out of range"},
        BadCase{"task true_prob not EVAL",
                [](v1::ModelConfig* c) { WithTask(c)->set_true_prob_column("x"); },
                "dense.tasks[0] (conv): true_prob_column 'x' is not an EVAL column"},
        BadCase{"two tasks one label",
                [](v1::ModelConfig* c) {
                  WithTask(c);
                  WithTask(c)->set_name("conv2");
                },
                "dense.tasks[1] (conv2): label_column 'converted' is another task's too"},
        BadCase{"tasks with cold resampling",
                [](v1::ModelConfig* c) {
                  WithTask(c);
                  c->mutable_skew()->add_cold_features("u");
                  c->mutable_skew()->set_cold_resample_fraction(0.5f);
                },
                "dense.tasks: multi-task heads do not combine with skew.cold_resample_fraction yet"},
        BadCase{"task label without task",
                [](v1::ModelConfig* c) {
                  WithTask(c);
                  c->mutable_dense()->clear_tasks();
                },
                "data.columns: TASK_LABEL column 'converted' is no task's label_column"},
        BadCase{"warm above hot",
                [](v1::ModelConfig* c) {
                  c->mutable_eval()->set_hot_min_count(10);
                  c->mutable_eval()->set_warm_min_count(50);
                },
                "eval.warm_min_count: 50 is above hot_min_count 10"}),
    BadCaseName);

TEST(ModelConfigTest, CrossDefaultsAndLimits) {
  v1::ModelConfig config = Small();
  config.mutable_dense()->set_interaction(v1::DenseTowerConfig::CROSS);
  absl::StatusOr<v1::ModelConfig> c = NormalizeModelConfig(config, "small");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dense().cross_layers(), 2u);  // the CROSS default
  EXPECT_EQ(c->dense().cross_rank(), 0u);    // full rank
  absl::StatusOr<v1::ModelConfig> again = NormalizeModelConfig(*c, "small");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(MessageDifferencer::Equals(*c, *again));
  // The extremes of the ranges are accepted.
  config.mutable_dense()->set_cross_layers(8);
  config.mutable_dense()->set_cross_rank(47);
  c = NormalizeModelConfig(config, "small");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dense().cross_layers(), 8u);
  // Another interaction leaves the cross fields at 0 (the digest of existing configs
  // does not change).
  c = NormalizeModelConfig(Small(), "small");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->dense().cross_layers(), 0u);
}

// Tasks get defaults inside themselves only; a config without tasks has none.
TEST(ModelConfigTest, TaskDefaults) {
  v1::ModelConfig config = Small();
  WithTask(&config)->set_true_prob_column("p");
  absl::StatusOr<v1::ModelConfig> c = NormalizeModelConfig(config, "small");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->dense().tasks_size(), 1);
  const v1::TaskConfig& t = c->dense().tasks(0);
  EXPECT_EQ(t.kind(), v1::TaskConfig::INDEPENDENT);
  EXPECT_EQ(t.loss_weight(), 1.0f);
  EXPECT_EQ(std::vector<uint32_t>(t.top_mlp().begin(), t.top_mlp().end()),
            (std::vector<uint32_t>{64, 32}));
  absl::StatusOr<v1::ModelConfig> again = NormalizeModelConfig(*c, "small");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(MessageDifferencer::Equals(*c, *again));
  c = NormalizeModelConfig(Small(), "small");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->dense().tasks_size(), 0);
}

TEST(ModelConfigTest, EvalColumnSetToEvalIsAccepted) {
  v1::ModelConfig config = Small();
  config.mutable_eval()->set_true_prob_column("p");
  EXPECT_TRUE(NormalizeModelConfig(config, "x").ok());
}

// Feature transforms (model.proto ColumnConfig 7-14): column 3 ("x") is DENSE, 1 ("u")
// CATEGORICAL, 2 ("items") MULTI_HOT.
v1::ColumnConfig* AddColumn(v1::ModelConfig* c, const char* name, v1::ColumnConfig::Kind kind) {
  v1::ColumnConfig* column = c->mutable_data()->add_columns();
  column->set_name(name);
  column->set_kind(kind);
  return column;
}

TEST(ModelConfigTest, TransformsAreAccepted) {
  v1::ModelConfig config = Small();
  Col(&config, 3)->set_clip_min(-1);
  Col(&config, 3)->set_clip_max(5);
  Col(&config, 3)->set_standardize(true);  // statistics from the data
  AddColumn(&config, "hour", v1::ColumnConfig::BUCKETIZED)->set_quantiles(4);
  v1::ColumnConfig* given = AddColumn(&config, "age", v1::ColumnConfig::BUCKETIZED);
  for (float b : {18.f, 30.f, 50.f}) given->add_boundaries(b);
  v1::ColumnConfig* cross = AddColumn(&config, "u_x_hour", v1::ColumnConfig::CROSS);
  cross->add_cross_of("u");
  cross->add_cross_of("hour");
  cross->add_cross_of("age");
  for (const char* column : {"hour", "u_x_hour"}) {
    v1::FeatureConfig* f = config.add_features();
    f->set_column(column);
    f->set_table("t");
  }
  absl::StatusOr<v1::ModelConfig> c = NormalizeModelConfig(config, "x");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->statistics_max_examples(), 1000000u);
  absl::StatusOr<v1::ModelConfig> again = NormalizeModelConfig(*c, "x");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(MessageDifferencer::Equals(*c, *again));
  // The cap of the statistics sample is not part of the digest (a resumed job may
  // change it: it uses its checkpoint's statistics).
  v1::ModelConfig other = *c;
  other.set_statistics_max_examples(10);
  EXPECT_EQ(ConfigDigest(*c), ConfigDigest(other));
  // The statistics are.
  other.mutable_data()->mutable_columns(3)->set_mean(1);
  other.mutable_data()->mutable_columns(3)->set_std(2);
  EXPECT_NE(ConfigDigest(*c), ConfigDigest(other));
}

INSTANTIATE_TEST_SUITE_P(
    TransformChecks, ModelConfigValidationTest,
    ::testing::Values(
        BadCase{"clip on a sparse column", [](v1::ModelConfig* c) { Col(c, 1)->set_clip_max(1); },
                "data.columns[1] (u): clip_min, clip_max, standardize, mean and std apply to "
                "DENSE columns only"},
        BadCase{"clip_min above clip_max",
                [](v1::ModelConfig* c) {
                  Col(c, 3)->set_clip_min(2);
                  Col(c, 3)->set_clip_max(1);
                },
                "data.columns[3] (x): clip_min 2 is above clip_max 1"},
        BadCase{"clip not finite",
                [](v1::ModelConfig* c) { Col(c, 3)->set_clip_max(std::nanf("")); },
                "data.columns[3] (x): clip_max is not finite"},
        BadCase{"mean without standardize",
                [](v1::ModelConfig* c) {
                  Col(c, 3)->set_mean(1);
                  Col(c, 3)->set_std(1);
                },
                "data.columns[3] (x): mean and std apply only with standardize: true"},
        BadCase{"mean without std",
                [](v1::ModelConfig* c) {
                  Col(c, 3)->set_standardize(true);
                  Col(c, 3)->set_mean(1);
                },
                "data.columns[3] (x): give both mean and std, or neither"},
        BadCase{"std zero",
                [](v1::ModelConfig* c) {
                  Col(c, 3)->set_standardize(true);
                  Col(c, 3)->set_mean(1);
                  Col(c, 3)->set_std(0);
                },
                "data.columns[3] (x): std 0 must be > 0 and finite"},
        BadCase{"standardize on a label",
                [](v1::ModelConfig* c) { Col(c, 0)->set_standardize(true); },
                "data.columns[0] (label): clip_min, clip_max, standardize, mean and std apply "
                "to DENSE columns only"},
        BadCase{"boundaries not increasing",
                [](v1::ModelConfig* c) {
                  v1::ColumnConfig* b = AddColumn(c, "hour", v1::ColumnConfig::BUCKETIZED);
                  for (float v : {6.f, 12.f, 12.f}) b->add_boundaries(v);
                },
                "data.columns[5] (hour): boundaries must be strictly increasing: "
                "boundaries[2] 12 is not above boundaries[1] 12"},
        BadCase{"boundary not finite",
                [](v1::ModelConfig* c) {
                  AddColumn(c, "hour", v1::ColumnConfig::BUCKETIZED)
                      ->add_boundaries(std::numeric_limits<float>::infinity());
                },
                "data.columns[5] (hour): boundaries[0] is not finite"},
        BadCase{"bucketized without boundaries",
                [](v1::ModelConfig* c) { AddColumn(c, "hour", v1::ColumnConfig::BUCKETIZED); },
                "data.columns[5] (hour): a BUCKETIZED column needs boundaries or quantiles"},
        BadCase{"quantiles out of range",
                [](v1::ModelConfig* c) {
                  AddColumn(c, "hour", v1::ColumnConfig::BUCKETIZED)->set_quantiles(1);
                },
                "data.columns[5] (hour): quantiles 1 is out of range 2..65536"},
        BadCase{"boundaries on a dense column",
                [](v1::ModelConfig* c) { Col(c, 3)->add_boundaries(1); },
                "data.columns[3] (x): boundaries and quantiles apply to BUCKETIZED columns only"},
        BadCase{"transform on a bucketized column",
                [](v1::ModelConfig* c) {
                  v1::ColumnConfig* b = AddColumn(c, "hour", v1::ColumnConfig::BUCKETIZED);
                  b->add_boundaries(1);
                  b->set_transform(v1::ColumnConfig::LOG1P);
                },
                "data.columns[5] (hour): transform applies to DENSE columns only"},
        BadCase{"unknown transform",
                [](v1::ModelConfig* c) {
                  Col(c, 3)->set_transform(static_cast<v1::ColumnConfig::Transform>(9));
                },
                "data.columns[3] (x): unknown transform 9"},
        BadCase{"cross of a multi-hot column",
                [](v1::ModelConfig* c) {
                  v1::ColumnConfig* x = AddColumn(c, "ux", v1::ColumnConfig::CROSS);
                  x->add_cross_of("u");
                  x->add_cross_of("items");
                },
                "data.columns[5] (ux).cross_of[1]: column 'items' is MULTI_HOT; a cross needs "
                "CATEGORICAL or BUCKETIZED columns"},
        BadCase{"cross of a dense column",
                [](v1::ModelConfig* c) {
                  v1::ColumnConfig* x = AddColumn(c, "ux", v1::ColumnConfig::CROSS);
                  x->add_cross_of("u");
                  x->add_cross_of("x");
                },
                "data.columns[5] (ux).cross_of[1]: column 'x' is DENSE"},
        BadCase{"cross of an unknown column",
                [](v1::ModelConfig* c) {
                  v1::ColumnConfig* x = AddColumn(c, "ux", v1::ColumnConfig::CROSS);
                  x->add_cross_of("u");
                  x->add_cross_of("user");
                },
                "data.columns[5] (ux).cross_of[1]: 'user' is not in data.columns"},
        BadCase{"cross of one column",
                [](v1::ModelConfig* c) {
                  AddColumn(c, "ux", v1::ColumnConfig::CROSS)->add_cross_of("u");
                },
                "data.columns[5] (ux): cross_of needs two or more columns, has 1"},
        BadCase{"cross of a column twice",
                [](v1::ModelConfig* c) {
                  v1::ColumnConfig* x = AddColumn(c, "ux", v1::ColumnConfig::CROSS);
                  x->add_cross_of("u");
                  x->add_cross_of("u");
                },
                "data.columns[5] (ux).cross_of[1]: column 'u' appears twice"},
        BadCase{"source on a cross column",
                [](v1::ModelConfig* c) {
                  v1::ColumnConfig* x = AddColumn(c, "ux", v1::ColumnConfig::CROSS);
                  x->add_cross_of("u");
                  x->add_cross_of("x");
                  x->set_source("u");
                },
                "data.columns[5] (ux): a CROSS column has no source"},
        BadCase{"source not a Criteo column",
                [](v1::ModelConfig* c) {
                  c->mutable_data()->set_format(v1::DataConfig::CRITEO_TSV);
                  c->mutable_data()->clear_columns();
                  AddColumn(c, "label", v1::ColumnConfig::LABEL);
                  AddColumn(c, "C1", v1::ColumnConfig::CATEGORICAL);
                  AddColumn(c, "I1b", v1::ColumnConfig::BUCKETIZED)->set_source("I14");
                  c->clear_features();
                },
                "data.columns[2] (I1b): not a Criteo column"},
        BadCase{"cross_of on a categorical column",
                [](v1::ModelConfig* c) { Col(c, 1)->add_cross_of("items"); },
                "data.columns[1] (u): cross_of applies to CROSS columns only"}),
    BadCaseName);

}  // namespace
}  // namespace ember::model
