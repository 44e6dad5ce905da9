// Copyright 2026 The Ember Authors.

#include "worker/eval/evaluator.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/model/model_config.h"
#include "common/status_macros.h"
#include "worker/data/reader.h"
#include "worker/eval/metrics.h"

namespace ember::worker {
namespace {

// Index of the EVAL column named `name` in model::ExampleBatch::eval, or -1.
int EvalIndex(const v1::ModelConfig& config, const std::string& name) {
  if (name.empty()) return -1;
  const std::vector<const v1::ColumnConfig*> columns = model::EvalColumns(config);
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i]->name() == name) return static_cast<int>(i);
  }
  return -1;
}

std::optional<double> Defined(double v) {
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

// The accumulators of one evaluation: the model by item bucket (hot, warm, cold), the
// model on cold users, and the oracle (true probabilities), each used when its eval
// column is set (index >= 0).
struct EvalSums {
  int item_count = -1;
  int cold_user = -1;
  int true_prob = -1;
  EvalAccumulator model{/*num_buckets=*/3};  // buckets: hot, warm, cold items
  EvalAccumulator cold_users{/*num_buckets=*/1};
  EvalAccumulator oracle;
  std::vector<int> buckets, user_buckets;  // scratch
};

// Adds one batch's scores to the accumulators.
absl::Status Accumulate(const v1::EvalConfig& ec, const model::ExampleBatch& batch,
                        const std::vector<float>& scores, EvalSums* sums) {
  const int b = batch.size;
  sums->buckets.assign(b, -1);
  if (sums->item_count >= 0) {
    for (int i = 0; i < b; ++i) {
      const double count = batch.eval[sums->item_count][i];
      sums->buckets[i] = count >= ec.hot_min_count() ? 0 : count >= ec.warm_min_count() ? 1 : 2;
    }
  }
  EMBER_RETURN_IF_ERROR(sums->model.Add(scores, batch.labels, sums->buckets));
  if (sums->cold_user >= 0) {
    sums->user_buckets.assign(b, -1);
    for (int i = 0; i < b; ++i) {
      sums->user_buckets[i] = batch.eval[sums->cold_user][i] >= 0.5f ? 0 : -1;
    }
    EMBER_RETURN_IF_ERROR(sums->cold_users.Add(scores, batch.labels, sums->user_buckets));
  }
  if (sums->true_prob >= 0) {
    EMBER_RETURN_IF_ERROR(sums->oracle.Add(batch.eval[sums->true_prob], batch.labels));
  }
  return absl::OkStatus();
}

// The result of the accumulated evaluation (seconds not set).
TestSetResult Summarize(const EvalSums& sums) {
  TestSetResult result;
  const EvalResult m = sums.model.Finalize();
  result.examples = static_cast<uint64_t>(m.count);
  result.auc = m.auc;
  result.logloss = m.logloss;
  if (sums.item_count >= 0) {
    result.auc_hot = m.buckets[0].defined ? std::optional<double>(m.buckets[0].auc) : std::nullopt;
    result.auc_warm = m.buckets[1].defined ? std::optional<double>(m.buckets[1].auc) : std::nullopt;
    result.auc_cold = m.buckets[2].defined ? std::optional<double>(m.buckets[2].auc) : std::nullopt;
    result.examples_hot = m.buckets[0].count;
    result.examples_warm = m.buckets[1].count;
    result.examples_cold = m.buckets[2].count;
  }
  if (sums.cold_user >= 0) {
    const EvalResult c = sums.cold_users.Finalize();
    if (c.buckets[0].defined) result.auc_cold_users = c.buckets[0].auc;
    result.examples_cold_users = c.buckets[0].count;
  }
  if (sums.true_prob >= 0) {
    const EvalResult o = sums.oracle.Finalize();
    result.oracle_auc = Defined(o.auc);
    result.oracle_logloss = Defined(o.logloss);
  }
  return result;
}

}  // namespace

absl::StatusOr<TestSetResult> Evaluate(const v1::ModelConfig& config, const SparseLayout& layout,
                                       PsClient& client, model::DenseTower& tower) {
  const absl::Time start = absl::Now();
  ReaderOptions options;
  options.with_eval_columns = true;
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<DatasetReader> reader,
                         DatasetReader::Open(config, config.data().test_path(), options));
  const v1::EvalConfig& ec = config.eval();
  EvalSums sums;
  sums.item_count = EvalIndex(config, ec.item_count_column());
  sums.cold_user = EvalIndex(config, ec.cold_user_column());
  sums.true_prob = EvalIndex(config, ec.true_prob_column());
  const uint64_t cap = config.training().eval_max_examples();

  model::ExampleBatch batch;
  SparseBatch sparse(layout);
  std::vector<float> pooled, logits, scores;
  const int batch_size = static_cast<int>(config.training().batch_size());
  uint64_t seen = 0;
  while (cap == 0 || seen < cap) {
    const int want =
        cap == 0 ? batch_size : static_cast<int>(std::min<uint64_t>(batch_size, cap - seen));
    EMBER_ASSIGN_OR_RETURN(bool more, reader->Next(want, &batch));
    if (!more) break;
    seen += batch.size;
    sparse.Build(batch);
    std::vector<PsHandle> pulls;
    StartPulls(client, sparse, &pulls);
    EMBER_RETURN_IF_ERROR(WaitAll(&pulls));

    const int b = batch.size;
    pooled.resize(static_cast<size_t>(b) * layout.pooled_width);
    logits.resize(b);
    scores.resize(b);
    sparse.Pool(absl::MakeSpan(pooled));
    // Score, not Forward: a row's score does not depend on its batch, so serving's
    // Predict of the same row gives bitwise this score (CPU).
    tower.Score(b, batch.dense, pooled, absl::MakeSpan(logits));
    for (int i = 0; i < b; ++i) scores[i] = model::ClickProbability(logits[i]);
    EMBER_RETURN_IF_ERROR(Accumulate(ec, batch, scores, &sums));
  }
  if (seen == 0) {
    return absl::NotFoundError(absl::StrCat("no test examples in ", config.data().test_path()));
  }
  TestSetResult result = Summarize(sums);
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return result;
}

}  // namespace ember::worker
