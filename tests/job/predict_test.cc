// Copyright 2026 The Ember Authors.
//
// ServingService.Predict end to end: a real training job (2 workers, 2 PS shards) and
// ember-serving followers on loopback.
//  * Before any checkpoint a follower answers UNAVAILABLE (nothing served from a
//    half-loaded model); a call without a deadline is INVALID_ARGUMENT.
//  * After the job, Predict of the test set's rows equals, bitwise, the job's own
//    evaluation arithmetic on the same checkpoint computed here in-process (the
//    checkpoint's dense parameters in a model::DenseTower, the PS rows pooled by
//    model::SparseBatch, DenseTower::Score, ClickProbability), in raw and encoded rows
//    and through `emberctl serving predict`.
//  * With an ember-worker that has --eval_scores_file (the distributed-evaluation
//    change), the same holds against the scores the job's evaluation wrote itself; the
//    case runs by itself once the flag exists (WorkerWritesEvalScores).
//  * A pinned older version is reported and scores with its own dense tower; a Python
//    job's checkpoint is FAILED_PRECONDITION (its dense parameters still served).

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/model/dense_tower.h"
#include "common/model/line_parser.h"
#include "common/model/model_config.h"
#include "common/model/sparse_batch.h"
#include "common/ps_client.h"
#include "ember/v1/serving.grpc.pb.h"
#include "server/checkpoint/checkpoint_catalog.h"
#include "tests/job/job_cluster.h"
#include "tests/serving/serving_client.h"

namespace ember {
namespace {

constexpr int kPredictSteps = 60;
constexpr int kRowsPerCall = 100;

std::chrono::system_clock::time_point In(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

// Whether this ember-worker writes its evaluation's scores (--eval_scores_file).
bool WorkerWritesEvalScores() {
  return RunBinary(EMBER_WORKER_BINARY, "--help").output.find("--eval_scores_file") !=
         std::string::npos;
}

// The test file's header (split) and data lines.
void ReadTestSet(const std::string& path, std::vector<std::string>* header,
                 std::vector<std::string>* lines) {
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  *header = absl::StrSplit(line, '\t');
  while (std::getline(in, line)) lines->push_back(line);
  ASSERT_FALSE(lines->empty());
}

v1::WorkerState StateOf(const std::string& checkpoint_root, const std::string& name) {
  CheckpointCatalog catalog(checkpoint_root);
  absl::StatusOr<v1::CheckpointManifest> manifest = catalog.ReadManifest("quickstart", name);
  EXPECT_TRUE(manifest.ok()) << manifest.status();
  absl::StatusOr<v1::WorkerState> state = catalog.ReadWorkerState(*manifest);
  EXPECT_TRUE(state.ok()) << state.status();
  return state.ok() ? *state : v1::WorkerState();
}

// The evaluation's arithmetic, in-process: the test rows parsed as the worker's reader
// parses them, the PS rows pooled, the checkpoint's dense tower's Score, the sigmoid.
std::vector<float> EvaluationScores(const v1::WorkerState& state,
                                    const std::vector<std::string>& header,
                                    const std::vector<std::string>& lines,
                                    const std::string& coordinator) {
  v1::ModelConfig config;
  EXPECT_TRUE(config.ParseFromString(state.config()));
  model::LineParserOptions options;
  options.with_eval_columns = true;
  const std::vector<absl::string_view> names(header.begin(), header.end());
  absl::StatusOr<model::LineParser> parser =
      model::LineParser::Create(config, options, names, "test");
  EXPECT_TRUE(parser.ok()) << parser.status();
  model::ExampleBatch batch;
  batch.Reset(parser->num_dense(), parser->num_features(), parser->num_eval());
  std::string error;
  for (const std::string& line : lines) {
    EXPECT_EQ(parser->Parse(line, &error), model::LineParser::Result::kOk) << error;
    parser->AppendTo(&batch);
  }
  model::SparseBatch sparse(model::SparseLayout::FromConfig(config));
  sparse.Build(batch);
  PsClientOptions client_options;
  client_options.coordinator_address = coordinator;
  absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(client_options);
  EXPECT_TRUE(client.ok()) << client.status();
  for (int t = 0; t < sparse.num_tables(); ++t) {
    model::SparseBatch::TableData& table = sparse.table(t);
    const absl::Status pulled =
        (*client)->Pull(sparse.layout().tables[t].name, table.ids, absl::MakeSpan(table.rows));
    EXPECT_TRUE(pulled.ok()) << pulled;
  }
  std::vector<float> pooled(static_cast<size_t>(batch.size) * sparse.layout().pooled_width);
  sparse.Pool(absl::MakeSpan(pooled));
  std::unique_ptr<model::DenseTower> tower =
      model::DenseTower::Create(config.dense(), batch.num_dense, sparse.layout().FeatureDims())
          .value();
  EXPECT_EQ(tower->parameters().size() * sizeof(float), state.dense_parameters().size());
  std::memcpy(tower->parameters().data(), state.dense_parameters().data(),
              state.dense_parameters().size());
  std::vector<float> logits(batch.size), scores(batch.size);
  tower->Score(batch.size, batch.dense, pooled, absl::MakeSpan(logits));
  for (int i = 0; i < batch.size; ++i) scores[i] = model::ClickProbability(logits[i]);
  return scores;
}

// Predict of `rows` (kRowsPerCall per call); every row must be scored.
std::vector<float> PredictAll(v1::ServingService::Stub& stub,
                              const std::vector<std::string>& columns,
                              const std::vector<v1::PredictRow>& rows, v1::ModelVersion* version) {
  std::vector<float> out;
  for (size_t first = 0; first < rows.size(); first += kRowsPerCall) {
    v1::PredictRequest request;
    for (const std::string& c : columns) request.add_columns(c);
    for (size_t i = first; i < std::min(rows.size(), first + kRowsPerCall); ++i) {
      *request.add_rows() = rows[i];
    }
    grpc::ClientContext context;
    context.set_deadline(In(30));
    v1::PredictResponse response;
    const grpc::Status status = stub.Predict(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.errors_size(), 0) << response.errors(0).DebugString();
    EXPECT_EQ(response.probabilities_size(), request.rows_size());
    out.insert(out.end(), response.probabilities().begin(), response.probabilities().end());
    *version = response.version();
  }
  return out;
}

// How many of `got` differ in any bit from `want` (and a failure naming the first).
int BitwiseDifferences(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  int differ = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0 && differ++ == 0) {
      ADD_FAILURE() << "row " << i << ": " << absl::StrCat(got[i])
                    << " != " << absl::StrCat(want[i]);
    }
  }
  return differ;
}

class PredictTest : public JobClusterTest {
 protected:
  static void SetUpTestSuite() { GenerateData("ember-predict"); }
  static void TearDownTestSuite() { TearDownData(); }
};

TEST_F(PredictTest, ScoresEqualTheJobsOwnEvaluationBitwise) {
  std::unique_ptr<Cluster> c = NewCluster("predict");
  ASSERT_NO_FATAL_FAILURE(c->StartCoordinator(2));
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(c->StartShard(i));
  std::vector<std::string> header, lines;
  ASSERT_NO_FATAL_FAILURE(ReadTestSet(c->data_ + "/test/part-00000.tsv", &header, &lines));

  // Before any checkpoint: no model version, nothing scored.
  std::unique_ptr<Process> early = StartServing(c->address_, c->ckpt_, c->dir_ + "/early", 200);
  ASSERT_NE(early, nullptr);
  auto early_stub = ServingStub(*early);
  v1::PredictRequest one;
  one.add_rows()->set_line(lines[0]);
  {
    grpc::ClientContext context;
    v1::PredictResponse response;
    const grpc::Status status = early_stub->Predict(&context, one, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_NE(status.error_message().find("deadline"), std::string::npos);
  }
  {
    grpc::ClientContext context;
    context.set_deadline(In(5));
    v1::PredictResponse response;
    const grpc::Status status = early_stub->Predict(&context, one, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  }
  const std::string rows_file = c->dir_ + "/rows.tsv";
  {
    std::ofstream out(rows_file);
    for (const std::string& line : lines) out << line << "\n";
  }
  const RunResult refused =
      RunBinary(EMBER_CTL_BINARY,
                absl::StrCat("serving predict --serving=", early->ready_text(), " ", rows_file));
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  for (const char* usage : {"--header --columns=a,b", "--batch_rows=0", "a.tsv b.tsv"}) {
    const RunResult run =
        RunBinary(EMBER_CTL_BINARY,
                  absl::StrCat("serving predict --serving=", early->ready_text(), " ", usage));
    EXPECT_EQ(run.exit_code, 2) << usage << ": " << run.output;
  }

  // The job; its evaluation writes its scores where the worker can.
  const bool eval_scores = WorkerWritesEvalScores();
  const std::string scores_file = c->dir_ + "/eval_scores.txt";
  std::vector<std::string> flags = {absl::StrCat("--max_steps=", kPredictSteps),
                                    "--checkpoint_every_steps=20"};
  if (eval_scores) {
    flags.insert(flags.end(), {"--skip_eval=false", absl::StrCat("--test=", c->data_, "/test"),
                               absl::StrCat("--eval_scores_file=", scores_file)});
  }
  for (int r = 0; r < kWorkers; ++r) ASSERT_NO_FATAL_FAILURE(c->StartWorker(r, flags));
  const std::string result = c->Finish();
  ASSERT_EQ(JsonValue(result, "steps"), absl::StrCat(kPredictSteps)) << result;
  const std::vector<std::string> checkpoints = c->CommittedCheckpoints();
  ASSERT_GE(checkpoints.size(), 2u);

  // A follower started now bootstraps from the job's last checkpoint (at its last step):
  // its rows are the PS's.
  std::unique_ptr<Process> follower =
      StartServing(c->address_, c->ckpt_, c->dir_ + "/follower", 200);
  ASSERT_NE(follower, nullptr);
  auto stub = ServingStub(*follower);
  const std::vector<float> want =
      EvaluationScores(StateOf(c->ckpt_, checkpoints.back()), header, lines, c->address_);

  std::vector<v1::PredictRow> raw(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) raw[i].set_line(lines[i]);
  v1::ModelVersion version;
  const std::vector<float> got = PredictAll(*stub, header, raw, &version);
  EXPECT_EQ(BitwiseDifferences(got, want), 0);
  EXPECT_EQ(version.checkpoint(), checkpoints.back());
  EXPECT_EQ(version.dense_step(), static_cast<uint64_t>(kPredictSteps));
  EXPECT_FALSE(version.pinned());

  // A bad row is refused by index; the others are still scored, with the same bits.
  {
    v1::PredictRequest request;
    for (const std::string& c : header) request.add_columns(c);
    request.add_rows()->set_line(lines[0]);
    request.add_rows()->set_line("1\t2\t3");
    request.add_rows()->set_line(lines[2]);
    grpc::ClientContext context;
    context.set_deadline(In(10));
    v1::PredictResponse response;
    ASSERT_TRUE(stub->Predict(&context, request, &response).ok());
    ASSERT_EQ(response.errors_size(), 1);
    EXPECT_EQ(response.errors(0).index(), 1u);
    EXPECT_EQ(response.errors(0).reason(),
              absl::StrCat("expected ", header.size(), " fields, got 3"));
    ASSERT_EQ(response.probabilities_size(), 3);
    EXPECT_EQ(response.probabilities(0), want[0]);
    EXPECT_TRUE(std::isnan(response.probabilities(1)));
    EXPECT_EQ(response.probabilities(2), want[2]);
  }

  // The same rows encoded (what the line parser makes of them) score the same bits.
  {
    v1::WorkerState state = StateOf(c->ckpt_, checkpoints.back());
    v1::ModelConfig config;
    ASSERT_TRUE(config.ParseFromString(state.config()));
    model::LineParserOptions options;
    options.score_only = true;
    const std::vector<absl::string_view> names(header.begin(), header.end());
    model::LineParser parser = model::LineParser::Create(config, options, names, "test").value();
    std::vector<v1::PredictRow> encoded(lines.size());
    std::string error;
    for (size_t i = 0; i < lines.size(); ++i) {
      model::ExampleBatch batch;
      batch.Reset(parser.num_dense(), parser.num_features(), 0);
      ASSERT_EQ(parser.Parse(lines[i], &error), model::LineParser::Result::kOk) << error;
      parser.AppendTo(&batch);
      v1::EncodedRow* row = encoded[i].mutable_encoded();
      for (float x : batch.dense) row->add_dense(x);
      for (int f = 0; f < config.features_size(); ++f) {
        v1::FeatureIds* ids = row->add_features();
        ids->set_feature(config.features(f).name());
        for (uint64_t id : batch.sparse[f].ids) ids->add_ids(id);
      }
    }
    EXPECT_EQ(BitwiseDifferences(PredictAll(*stub, {}, encoded, &version), want), 0);
  }

  // emberctl serving predict: one %.9g line per row (the float's exact value).
  {
    const RunResult run = RunBinary(
        EMBER_CTL_BINARY,
        absl::StrCat("serving predict --serving=", follower->ready_text(),
                     " --columns=", absl::StrJoin(header, ","), " --batch_rows=300 ", rows_file));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    std::vector<float> printed;
    for (absl::string_view line : absl::StrSplit(run.output, '\n', absl::SkipEmpty())) {
      float p = 0;
      if (absl::SimpleAtof(line, &p)) printed.push_back(p);
    }
    EXPECT_EQ(BitwiseDifferences(printed, want), 0);
  }

  // From stdin with a header line (what tools/quickstart.sh runs), and --json.
  {
    const std::string with_header = c->dir_ + "/head.tsv";
    {
      std::ofstream out(with_header);
      out << absl::StrJoin(header, "\t") << "\n";
      for (int i = 0; i < 3; ++i) out << lines[i] << "\n";
    }
    const std::string serving = absl::StrCat(" --serving=", follower->ready_text());
    const RunResult text = RunBinary(
        EMBER_CTL_BINARY, absl::StrCat("serving predict --header", serving, " < ", with_header));
    ASSERT_EQ(text.exit_code, 0) << text.output;
    std::vector<float> printed;
    for (absl::string_view line : absl::StrSplit(text.output, '\n', absl::SkipEmpty())) {
      float p = 0;
      if (absl::SimpleAtof(line, &p)) printed.push_back(p);
    }
    EXPECT_EQ(BitwiseDifferences(printed, std::vector<float>(want.begin(), want.begin() + 3)), 0);
    EXPECT_NE(text.output.find("3 rows scored, 0 refused"), std::string::npos) << text.output;
    const RunResult json =
        RunBinary(EMBER_CTL_BINARY,
                  absl::StrCat("serving predict --header --json", serving, " ", with_header));
    ASSERT_EQ(json.exit_code, 0) << json.output;
    EXPECT_NE(json.output.find(absl::StrCat("\"checkpoint\":\"", checkpoints.back(), "\"")),
              std::string::npos)
        << json.output;
    EXPECT_NE(json.output.find("\"scored\":3"), std::string::npos) << json.output;
  }

  // The job's own evaluation scores, as its rank 0 wrote them.
  if (eval_scores) {
    std::ifstream in(scores_file);
    ASSERT_TRUE(in) << scores_file;
    std::vector<float> written;
    std::string line;
    while (std::getline(in, line)) {
      // %.9g or hex (%a): strtof reads both exactly.
      char* end = nullptr;
      written.push_back(std::strtof(line.c_str(), &end));
      ASSERT_TRUE(end != line.c_str() && *end == '\0') << line;
    }
    EXPECT_EQ(BitwiseDifferences(got, written), 0);
  } else {
    std::cerr << "ember-worker has no --eval_scores_file: compared with the in-process "
                 "evaluation only\n";
  }

  // A pinned older version is reported, and scores with its own dense tower (the rows
  // are the newest: a pin holds the dense tower only).
  {
    v1::PinModelVersionRequest pin;
    pin.set_checkpoint(checkpoints.front());
    v1::PinModelVersionResponse pinned;
    grpc::ClientContext context;
    context.set_deadline(In(10));
    const grpc::Status status = stub->PinModelVersion(&context, pin, &pinned);
    ASSERT_TRUE(status.ok()) << status.error_message();
    const std::vector<float> old = PredictAll(*stub, header, raw, &version);
    EXPECT_EQ(version.checkpoint(), checkpoints.front());
    EXPECT_TRUE(version.pinned());
    EXPECT_EQ(BitwiseDifferences(old, EvaluationScores(StateOf(c->ckpt_, checkpoints.front()),
                                                       header, lines, c->address_)),
              0);
  }
  // The follower's counters: every row above scored but the one bad row.
  const v1::ServingStatus status = ServingStatusOf(*stub);
  EXPECT_EQ(status.predict_rows_scored(), 4 * lines.size() + 2 + 6);
  EXPECT_EQ(status.predict_rows_refused(), 1u);

  // A Python/PyTorch job's checkpoint (its dense state in ember/state.py's format): the
  // follower serves its dense parameters, but Predict cannot score with them.
  {
    CheckpointCatalog catalog(c->ckpt_);
    v1::CheckpointManifest manifest =
        catalog.ReadManifest("quickstart", checkpoints.back()).value();
    v1::WorkerState state = catalog.ReadWorkerState(manifest).value();
    state.set_dense_optimizer_state(std::string("EMBERPT1") + std::string(8, '\0'));
    const std::string name = CheckpointCatalog::Name(kPredictSteps, 9);
    manifest.set_name(name);
    *manifest.mutable_worker_state() = catalog.WriteWorkerState("quickstart", name, state).value();
    ASSERT_TRUE(catalog.WriteManifest(manifest).ok());
    v1::PinModelVersionRequest pin;
    pin.set_checkpoint(name);
    v1::PinModelVersionResponse pinned;
    grpc::ClientContext pin_context;
    pin_context.set_deadline(In(10));
    const grpc::Status pinned_status = stub->PinModelVersion(&pin_context, pin, &pinned);
    ASSERT_TRUE(pinned_status.ok()) << pinned_status.error_message();
    grpc::ClientContext context;
    context.set_deadline(In(10));
    v1::PredictResponse response;
    const grpc::Status predicted = stub->Predict(&context, one, &response);
    EXPECT_EQ(predicted.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(predicted.error_message().find("Python (PyTorch) job"), std::string::npos)
        << predicted.error_message();
    grpc::ClientContext dense_context;
    dense_context.set_deadline(In(10));
    v1::GetDenseParametersResponse dense;
    EXPECT_TRUE(stub->GetDenseParameters(&dense_context, {}, &dense).ok());
    EXPECT_EQ(dense.dense_parameters(), state.dense_parameters());
  }
}

}  // namespace
}  // namespace ember
