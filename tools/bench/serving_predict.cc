// Copyright 2026 The Ember Authors.

#include "tools/bench/serving_predict.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/model/line_parser.h"
#include "common/model/model_config.h"
#include "common/model/sparse_batch.h"
#include "common/status_macros.h"
#include "tools/bench/storage_fixtures.h"
#include "tools/harness/process.h"

namespace ember::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kSuite[] = "serving";
constexpr int kModelSteps = 50;
constexpr absl::Duration kDeadline = absl::Seconds(10);

std::string QuickstartConfig() {
  return absl::StrCat(EMBER_SOURCE_DIR, "/configs/quickstart.pbtxt");
}

// The q quantile (nearest rank) of `v`.
double QuantileOf(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * v.size()));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// The Lookups one batch of rows needs: per table, its unique IDs.
struct TableIds {
  std::string table;
  std::vector<uint64_t> ids;
};

// Per batch of `batch_rows` consecutive lines (non-overlapping, from the first), the
// Lookups the rows need, parsed as the follower parses them.
absl::StatusOr<std::vector<std::vector<TableIds>>> LookupsOfBatches(const PredictData& data,
                                                                    int batch_rows) {
  EMBER_ASSIGN_OR_RETURN(const v1::ModelConfig config, model::LoadModelConfig(QuickstartConfig()));
  model::LineParserOptions options;
  options.score_only = true;
  const std::vector<absl::string_view> names(data.header.begin(), data.header.end());
  EMBER_ASSIGN_OR_RETURN(model::LineParser parser,
                         model::LineParser::Create(config, options, names, "test"));
  model::SparseBatch sparse(model::SparseLayout::FromConfig(config));
  std::vector<std::vector<TableIds>> out;
  std::string error;
  for (size_t first = 0; first + batch_rows <= data.lines.size(); first += batch_rows) {
    model::ExampleBatch batch;
    batch.Reset(parser.num_dense(), parser.num_features(), 0);
    for (int i = 0; i < batch_rows; ++i) {
      if (parser.Parse(data.lines[first + i], &error) != model::LineParser::Result::kOk) {
        return absl::InternalError(absl::StrCat("test line ", first + i, ": ", error));
      }
      parser.AppendTo(&batch);
    }
    sparse.Build(batch);
    std::vector<TableIds>& lookups = out.emplace_back();
    for (int t = 0; t < sparse.num_tables(); ++t) {
      if (sparse.table(t).ids.empty()) continue;
      lookups.push_back({sparse.layout().tables[t].name, sparse.table(t).ids});
    }
  }
  return out;
}

// One Predict call; returns its milliseconds. Errors: the call's, or a refused row.
absl::StatusOr<double> CallPredict(v1::ServingService::Stub& stub,
                                   const v1::PredictRequest& request) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kDeadline));
  v1::PredictResponse response;
  const Clock::time_point start = Clock::now();
  const grpc::Status status = stub.Predict(&context, request, &response);
  const double ms = MsSince(start);
  EMBER_RETURN_IF_ERROR(FromGrpcStatus(status, &context));
  if (response.errors_size() > 0) {
    return absl::InternalError(
        absl::StrCat("Predict refused a test row: ", response.errors(0).reason()));
  }
  return ms;
}

}  // namespace

absl::StatusOr<PredictData> TrainServedModel(const std::string& bin, const std::string& coordinator,
                                             const std::string& dir, uint64_t seed) {
  const std::string data = dir + "/model-data";
  const RunResult datagen =
      RunBinary(bin + "/ember-datagen",
                absl::StrCat("--out=", data, " --train_examples=20000 --test_examples=2000",
                             " --train_files=1 --seed=", seed, " > /dev/null"));
  if (datagen.exit_code != 0) {
    return absl::InternalError(absl::StrCat("ember-datagen failed: ", datagen.output));
  }
  EMBER_ASSIGN_OR_RETURN(
      std::unique_ptr<Process> worker,
      Process::Start(
          bin + "/ember-worker",
          {absl::StrCat("--config=", QuickstartConfig()), absl::StrCat("--train=", data, "/train"),
           absl::StrCat("--test=", data, "/test"), absl::StrCat("--coordinator=", coordinator),
           "--rank=0", "--world_size=1", absl::StrCat("--run_dir=", dir, "/model-run"),
           absl::StrCat("--max_steps=", kModelSteps), "--batch_size=256", "--skip_eval"},
          "worker ", absl::Seconds(60)));
  EMBER_ASSIGN_OR_RETURN(const int code, worker->Wait(absl::Minutes(5)));
  if (code != 0) {
    return absl::InternalError(
        absl::StrCat("the served model's ember-worker exited ", code, " (logs under ", dir, ")"));
  }
  PredictData out;
  out.steps = kModelSteps;
  std::ifstream in(data + "/test/part-00000.tsv");
  std::string line;
  if (!in || !std::getline(in, line)) {
    return absl::InternalError(absl::StrCat("cannot read ", data, "/test/part-00000.tsv"));
  }
  out.header = absl::StrSplit(line, '\t');
  while (std::getline(in, line)) out.lines.push_back(line);
  if (out.lines.size() < 100) return absl::InternalError("fewer than 100 test lines");
  return out;
}

absl::Status WarmUpPredict(v1::ServingService::Stub& stub, const PredictData& data) {
  for (size_t first = 0; first < data.lines.size(); first += 100) {
    v1::PredictRequest request;
    for (const std::string& c : data.header) request.add_columns(c);
    for (size_t i = first; i < std::min(first + 100, data.lines.size()); ++i) {
      request.add_rows()->set_line(data.lines[i]);
    }
    EMBER_RETURN_IF_ERROR(CallPredict(stub, request).status());
  }
  return absl::OkStatus();
}

absl::Status MeasurePredict(v1::ServingService::Stub& stub, const PredictData& data, int batch_rows,
                            double seconds, const std::string& suffix, Figures* figures) {
  // Predict: requests prepared first, then called in turn.
  std::vector<v1::PredictRequest> requests;
  for (size_t first = 0; first + batch_rows <= data.lines.size(); first += batch_rows) {
    v1::PredictRequest& request = requests.emplace_back();
    for (const std::string& c : data.header) request.add_columns(c);
    for (int i = 0; i < batch_rows; ++i) request.add_rows()->set_line(data.lines[first + i]);
  }
  std::vector<double> predict_ms;
  int64_t rows = 0;
  Clock::time_point start = Clock::now();
  for (size_t n = 0; MsSince(start) < seconds * 1000; ++n) {
    EMBER_ASSIGN_OR_RETURN(const double ms, CallPredict(stub, requests[n % requests.size()]));
    predict_ms.push_back(ms);
    rows += batch_rows;
  }
  const double rows_per_sec = rows / (MsSince(start) / 1000);

  // The baseline: the Lookups of the same rows.
  EMBER_ASSIGN_OR_RETURN(const std::vector<std::vector<TableIds>> batches,
                         LookupsOfBatches(data, batch_rows));
  std::vector<double> lookup_ms;
  start = Clock::now();
  for (size_t n = 0; MsSince(start) < seconds * 1000; ++n) {
    const Clock::time_point call = Clock::now();
    for (const TableIds& t : batches[n % batches.size()]) {
      v1::LookupRequest request;
      request.set_table(t.table);
      request.set_ids(t.ids.data(), t.ids.size() * sizeof(uint64_t));
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + kDeadline));
      v1::LookupResponse response;
      EMBER_RETURN_IF_ERROR(FromGrpcStatus(stub.Lookup(&context, request, &response), &context));
    }
    lookup_ms.push_back(MsSince(call));
  }

  const double p50 = QuantileOf(predict_ms, 0.5), p99 = QuantileOf(predict_ms, 0.99);
  const double lookup_p50 = QuantileOf(lookup_ms, 0.5);
  figures->AddNumber("predict_rows_per_sec_" + suffix, rows_per_sec);
  figures->AddNumber("predict_p50_ms_" + suffix, p50);
  figures->AddNumber("predict_p99_ms_" + suffix, p99);
  figures->AddInt("predict_calls_" + suffix, static_cast<int64_t>(predict_ms.size()));
  figures->AddNumber("lookups_p50_ms_" + suffix, lookup_p50);
  figures->AddNumber("lookups_p99_ms_" + suffix, QuantileOf(lookup_ms, 0.99));
  figures->AddNumber("ratio_predict_vs_lookups_p50_" + suffix, p50 / lookup_p50);
  Log(kSuite, absl::StrFormat("  Predict of %d row(s): %.0f rows/s, p50 %.2f ms, p99 %.2f ms; "
                              "the Lookups of the same rows: p50 %.2f ms",
                              batch_rows, rows_per_sec, p50, p99, lookup_p50));
  return absl::OkStatus();
}

}  // namespace ember::bench
