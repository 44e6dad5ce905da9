// Copyright 2026 The Ember Authors.
//
// What the model config tests share (model_config_test.cc, model_config_skew_test.cc):
// the quickstart config's path, a small valid config, temporary files, and the shape of
// a validation case.

#ifndef EMBER_TESTS_COMMON_MODEL_MODEL_CONFIG_TEST_UTIL_H_
#define EMBER_TESTS_COMMON_MODEL_MODEL_CONFIG_TEST_UTIL_H_

#include <stdlib.h>

#include <fstream>
#include <functional>
#include <iterator>
#include <string>

#include "common/model/model_config.h"
#include "ember/v1/model.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace ember::model {

inline const std::string kQuickstart = std::string(EMBER_SOURCE_DIR) + "/configs/quickstart.pbtxt";

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline std::string MakeTempDir() {
  std::string tmpl = ::testing::TempDir() + "/model_config_test.XXXXXX";
  EXPECT_NE(mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

// A small valid config: a label, two sparse columns, a dense one, one table.
inline constexpr char kSmall[] = R"pb(
  data {
    columns { name: "label" kind: LABEL }
    columns { name: "u" kind: CATEGORICAL id_encoding: DECIMAL }
    columns { name: "items" kind: MULTI_HOT }
    columns { name: "x" kind: DENSE transform: LOG1P }
    columns { name: "p" kind: EVAL }
  }
  tables { name: "t" dim: 16 }
  features { column: "u" table: "t" }
  features { column: "items" table: "t" }
)pb";

inline v1::ModelConfig Small() {
  v1::ModelConfig config;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(kSmall, &config));
  return config;
}

// A config that NormalizeModelConfig must refuse: `mutate` applied to Small(), and a
// substring of the message expected after "bad.pbtxt: ".
struct BadCase {
  const char* what;
  std::function<void(v1::ModelConfig*)> mutate;
  const char* message;  // expected substring
};

// A test name from the case's `what` (gtest allows letters, digits and '_').
inline std::string BadCaseName(const ::testing::TestParamInfo<BadCase>& info) {
  std::string name;
  for (const char* p = info.param.what; *p; ++p) name += isalnum(*p) ? *p : '_';
  return name;
}

// Normalizes Small() changed by `bad`: INVALID_ARGUMENT with bad.message.
inline void ExpectRefused(const BadCase& bad) {
  v1::ModelConfig config = Small();
  bad.mutate(&config);
  absl::StatusOr<v1::ModelConfig> c = NormalizeModelConfig(config, "bad.pbtxt");
  ASSERT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << bad.what;
  EXPECT_THAT(c.status().message(), ::testing::HasSubstr(std::string("bad.pbtxt: ") + bad.message));
}

}  // namespace ember::model

#endif  // EMBER_TESTS_COMMON_MODEL_MODEL_CONFIG_TEST_UTIL_H_
