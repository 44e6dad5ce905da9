// Copyright 2026 The Ember Authors.
//
// ServedModel (server/serving/served_model.h): which checkpoints Predict can score
// (an ember-worker's, not a Python job's nor one without a config), and how request
// rows become examples: raw lines, value lists and encoded rows agree, and each bad row
// is refused by index with its reason while the others are kept.

#include "server/serving/served_model.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/hash.h"
#include "common/model/model_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ember {
namespace {

using ::testing::HasSubstr;

// An ember-worker's WorkerState of the quickstart model at its initial weights.
v1::WorkerState QuickstartState() {
  absl::StatusOr<v1::ModelConfig> config =
      model::LoadModelConfig(absl::StrCat(EMBER_SOURCE_DIR, "/configs/quickstart.pbtxt"));
  EXPECT_TRUE(config.ok()) << config.status();
  v1::WorkerState state;
  state.set_config(model::DigestedConfig(*config).SerializeAsString());
  state.set_config_digest(model::ConfigDigest(*config));
  const model::SparseLayout layout = model::SparseLayout::FromConfig(*config);
  std::unique_ptr<model::DenseTower> tower =
      model::DenseTower::Create(config->dense(), 3, layout.FeatureDims()).value();
  for (size_t i = 0; i < tower->parameters().size(); ++i) {
    tower->parameters()[i] += 0.001f * static_cast<float>(i % 7);  // not the initial weights
  }
  state.set_dense_parameters(tower->parameters().data(), tower->parameters().size() * 4);
  return state;
}

// label, 8 sparse columns (the last multi-hot), 3 dense, 3 eval: quickstart's layout.
constexpr char kLine[] = "1\t17\t42\t3\t9\t2\t13\t1\t42|43|44\t12.5\t31\t2\t0.2\t5\t0";

TEST(ServedModelTest, AWorkersCheckpointIsServedAndTheDigestIsItsConfigs) {
  const v1::WorkerState state = QuickstartState();
  EXPECT_EQ(HashBytes(state.config()), state.config_digest());
  absl::StatusOr<std::unique_ptr<ServedModel>> model = ServedModel::Create(state, "ckpt-1");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->layout().features.size(), 8u);
}

TEST(ServedModelTest, CheckpointsItCannotScoreAreRefusedClearly) {
  v1::WorkerState python = QuickstartState();
  python.set_dense_optimizer_state(std::string("EMBERPT1") + std::string(8, '\0'));
  absl::StatusOr<std::unique_ptr<ServedModel>> model = ServedModel::Create(python, "ckpt-py");
  EXPECT_EQ(model.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(model.status().message(), HasSubstr("Python (PyTorch) job"));
  EXPECT_THAT(model.status().message(), HasSubstr("ckpt-py"));

  // A Python job digests its model signature with the config.
  v1::WorkerState signed_digest = QuickstartState();
  signed_digest.set_config_digest(signed_digest.config_digest() ^ 1);
  model = ServedModel::Create(signed_digest, "c");
  EXPECT_EQ(model.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(model.status().message(), HasSubstr("config digest"));

  v1::WorkerState no_config = QuickstartState();
  no_config.clear_config();
  model = ServedModel::Create(no_config, "c");
  EXPECT_EQ(model.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(model.status().message(), HasSubstr("no model config"));

  v1::WorkerState short_params = QuickstartState();
  short_params.mutable_dense_parameters()->resize(short_params.dense_parameters().size() - 4);
  model = ServedModel::Create(short_params, "c");
  EXPECT_EQ(model.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(model.status().message(), HasSubstr("dense parameters"));
}

// Scores the examples of `request` (pooled input: zeros) and returns them by row.
std::vector<float> Scores(const ServedModel& model, const v1::PredictRequest& request,
                          v1::PredictResponse* response) {
  model::ExampleBatch batch;
  std::vector<uint32_t> rows;
  EXPECT_TRUE(model.Encode(request, &batch, &rows, response).ok());
  std::vector<float> pooled(static_cast<size_t>(batch.size) * model.layout().pooled_width, 0.5f);
  std::vector<float> logits(batch.size);
  model.Score(batch, pooled, absl::MakeSpan(logits));
  return logits;
}

TEST(ServedModelTest, RawLinesValueListsAndEncodedRowsAreTheSameExample) {
  std::unique_ptr<ServedModel> model = ServedModel::Create(QuickstartState(), "c").value();
  v1::PredictRequest request;
  request.add_rows()->set_line(kLine);
  v1::ColumnValues* values = request.add_rows()->mutable_values();
  for (absl::string_view v : absl::StrSplit(kLine, '\t')) values->add_values(std::string(v));
  v1::EncodedRow* encoded = request.add_rows()->mutable_encoded();
  for (float x : {std::log1p(12.5f), 31.0f, std::log1p(2.0f)}) encoded->add_dense(x);
  const std::vector<std::pair<const char*, std::vector<uint64_t>>> ids = {
      {"user_id", {17}},     {"item_id", {42}},
      {"category_id", {3}},  {"shop_id", {9}},
      {"user_segment", {2}}, {"hour", {13}},
      {"device", {1}},       {"recent_items", {42, 43, 44}}};
  for (const auto& [name, list] : ids) {
    v1::FeatureIds* f = encoded->add_features();
    f->set_feature(name);
    for (uint64_t id : list) f->add_ids(id);
  }
  model::ExampleBatch batch;
  std::vector<uint32_t> rows;
  v1::PredictResponse response;
  ASSERT_TRUE(model->Encode(request, &batch, &rows, &response).ok());
  EXPECT_EQ(response.errors_size(), 0) << response.DebugString();
  ASSERT_EQ(batch.size, 3);
  EXPECT_EQ(rows, (std::vector<uint32_t>{0, 1, 2}));
  for (int e = 1; e < 3; ++e) {
    EXPECT_EQ(std::memcmp(&batch.dense[e * 3], &batch.dense[0], 3 * sizeof(float)), 0) << e;
    for (size_t f = 0; f < batch.sparse.size(); ++f) {
      const model::SparseColumn& c = batch.sparse[f];
      EXPECT_EQ(
          std::vector<uint64_t>(c.ids.begin() + c.offsets[e], c.ids.begin() + c.offsets[e + 1]),
          std::vector<uint64_t>(c.ids.begin(), c.ids.begin() + c.offsets[1]))
          << "feature " << f << " row " << e;
    }
  }
  // Named columns in another order, without the label and eval columns.
  v1::PredictRequest named;
  for (const char* c : {"recent_items", "price", "user_age", "session_depth", "user_id", "item_id",
                        "category_id", "shop_id", "user_segment", "hour", "device"}) {
    named.add_columns(c);
  }
  named.add_rows()->set_line("42|43|44\t12.5\t31\t2\t17\t42\t3\t9\t2\t13\t1");
  v1::PredictResponse named_response, first_response;
  v1::PredictRequest first;
  *first.add_rows() = request.rows(0);
  EXPECT_EQ(Scores(*model, named, &named_response), Scores(*model, first, &first_response));
  EXPECT_EQ(named_response.errors_size(), 0) << named_response.DebugString();
}

TEST(ServedModelTest, BadRowsAreRefusedByIndexAndTheOthersKept) {
  std::unique_ptr<ServedModel> model = ServedModel::Create(QuickstartState(), "c").value();
  v1::PredictRequest request;
  request.add_rows()->set_line(kLine);        // 0: fine
  request.add_rows()->set_line("1\t17\t42");  // 1: 3 fields
  std::string bad_number = kLine;
  bad_number.replace(bad_number.find("12.5"), 4, "x1");
  request.add_rows()->set_line(bad_number);                         // 2: bad number
  v1::EncodedRow* unknown = request.add_rows()->mutable_encoded();  // 3: unknown feature
  for (int i = 0; i < 3; ++i) unknown->add_dense(0);
  unknown->add_features()->set_feature("colour");
  v1::EncodedRow* two_ids = request.add_rows()->mutable_encoded();  // 4: 2 ids, categorical
  for (int i = 0; i < 3; ++i) two_ids->add_dense(0);
  v1::FeatureIds* f = two_ids->add_features();
  f->set_feature("user_id");
  f->add_ids(1);
  f->add_ids(2);
  request.add_rows()->mutable_encoded()->add_dense(1);       // 5: 1 dense value
  request.add_rows();                                        // 6: empty
  request.add_rows()->mutable_values()->add_values("a\tb");  // 7: a tab in a value
  request.add_rows()->set_line(std::string(kLine) + "\n");   // 8: a line break
  request.add_rows()->set_line(kLine);                       // 9: fine
  model::ExampleBatch batch;
  std::vector<uint32_t> rows;
  v1::PredictResponse response;
  ASSERT_TRUE(model->Encode(request, &batch, &rows, &response).ok());
  EXPECT_EQ(rows, (std::vector<uint32_t>{0, 9}));
  ASSERT_EQ(response.errors_size(), 8) << response.DebugString();
  const std::vector<std::pair<uint32_t, const char*>> want = {
      {1, "expected 15 fields, got 3"},
      {2, "column 'price': bad number 'x1'"},
      {3, "unknown feature 'colour'"},
      {4, "feature 'user_id' reads a CATEGORICAL column: at most 1 ID, got 2"},
      {5, "expected 3 dense values (price, user_age, session_depth), got 1"},
      {6, "empty row"},
      {7, "value 0 holds a tab"},
      {8, "line break"}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(response.errors(i).index(), want[i].first);
    EXPECT_THAT(response.errors(i).reason(), HasSubstr(want[i].second));
  }
}

TEST(ServedModelTest, ColumnsThatDoNotFitTheConfigFailTheCall) {
  std::unique_ptr<ServedModel> model = ServedModel::Create(QuickstartState(), "c").value();
  v1::PredictRequest request;
  request.add_columns("user_id");
  request.add_rows()->set_line("17");
  model::ExampleBatch batch;
  std::vector<uint32_t> rows;
  v1::PredictResponse response;
  const absl::Status status = model->Encode(request, &batch, &rows, &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("PredictRequest.columns"));
  // Encoded rows need no columns.
  v1::PredictRequest encoded;
  v1::EncodedRow* row = encoded.add_rows()->mutable_encoded();
  for (int i = 0; i < 3; ++i) row->add_dense(0);
  encoded.add_columns("nonsense");
  v1::PredictResponse encoded_response;
  EXPECT_TRUE(model->Encode(encoded, &batch, &rows, &encoded_response).ok());
  EXPECT_EQ(batch.size, 1);
}

}  // namespace
}  // namespace ember
