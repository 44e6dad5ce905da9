// Copyright 2026 The Ember Authors.

#include "worker/eval/evaluator.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/hash.h"
#include "common/model/model_config.h"
#include "common/status_macros.h"
#include "worker/data/reader.h"
#include "worker/job/run_report.h"

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

// What defines the cut of the test set into batches and the columns kept: every rank
// must agree on it.
uint64_t EvalSettingsDigest(const v1::ModelConfig& config) {
  std::string bytes =
      absl::StrCat(config.data().test_path(), "\n", config.training().batch_size(), "\n",
                   config.training().eval_max_examples(), "\n", config.eval().SerializeAsString());
  // Multi-task: the tasks too (nothing added without them: the digest stays as it was).
  for (const v1::TaskConfig& task : config.dense().tasks()) {
    absl::StrAppend(&bytes, "\n", task.SerializeAsString());
  }
  return HashBytes(bytes);
}

// The click probabilities of one batch: the pooled embeddings through `tower`. The one
// place evaluation runs the tower. A multi-task tower: `logits` [num_tasks x b] and
// `probabilities` the same, task t's from model::TaskProbability (task 0's the click
// probability as for one task).
void ScoreBatch(const v1::DenseTowerConfig& dense, model::DenseTower& tower,
                const model::ExampleBatch& batch, const std::vector<float>& pooled,
                std::vector<float>* logits, std::vector<float>* probabilities) {
  const int b = batch.size;
  const int tasks = tower.num_tasks();
  logits->resize(static_cast<size_t>(b) * tasks);
  probabilities->resize(logits->size());
  // Score, not Forward: a row's score does not depend on its batch, so serving's
  // Predict of the same row gives bitwise this score (CPU).
  if (tasks == 1) {
    tower.Score(b, batch.dense, pooled, absl::MakeSpan(*logits));
  } else {
    tower.ScoreTasks(b, batch.dense, pooled, absl::MakeSpan(*logits));
  }
  for (int i = 0; i < b; ++i) (*probabilities)[i] = model::ClickProbability((*logits)[i]);
  for (int t = 1; t < tasks; ++t) {
    const size_t at = static_cast<size_t>(t) * b;
    for (int i = 0; i < b; ++i) {
      (*probabilities)[at + i] =
          model::TaskProbability(dense.tasks(t - 1).kind(), (*logits)[i], (*logits)[at + i]);
    }
  }
}

// Appends one scored batch's extra-task results: `probabilities` as ScoreBatch's,
// `true_probs[t]` the EVAL index of task t's true_prob_column or -1, `click_true_prob`
// eval.true_prob_column's (an ESMM task's oracle is the product of the two).
// An ESMM task also keeps its head's own probability (from `logits`) and the true
// p(conversion | click).
void AppendTasks(const v1::DenseTowerConfig& dense, const std::vector<int>& true_probs,
                 int click_true_prob, const model::ExampleBatch& batch,
                 const std::vector<float>& logits, const std::vector<float>& probabilities,
                 EvalExamples* out) {
  const size_t b = batch.size;
  for (size_t t = 0; t < out->tasks.size(); ++t) {
    EvalExamples::Task& task = out->tasks[t];
    const auto scores = probabilities.begin() + (t + 1) * b;
    task.scores.insert(task.scores.end(), scores, scores + b);
    task.labels.insert(task.labels.end(), batch.task_labels[t].begin(),
                       batch.task_labels[t].begin() + b);
    if (true_probs[t] >= 0) {
      const std::vector<float>& p = batch.eval[true_probs[t]];
      if (dense.tasks(static_cast<int>(t)).kind() == v1::TaskConfig::ESMM_CTCVR) {
        const std::vector<float>& ctr = batch.eval[click_true_prob];
        for (size_t i = 0; i < b; ++i) task.true_probs.push_back(ctr[i] * p[i]);
        task.head_true_probs.insert(task.head_true_probs.end(), p.begin(), p.begin() + b);
      } else {
        task.true_probs.insert(task.true_probs.end(), p.begin(), p.begin() + b);
      }
    }
    if (task.has_head) {
      for (size_t i = 0; i < b; ++i) {
        task.head_scores.push_back(model::ClickProbability(logits[(t + 1) * b + i]));
      }
    }
  }
}

// Appends one scored batch's per-example results (its buckets from the EVAL columns).
void AppendBatch(const v1::EvalConfig& ec, int item_count, int cold_user, int true_prob,
                 const model::ExampleBatch& batch, const std::vector<float>& probabilities,
                 EvalExamples* out) {
  const int b = batch.size;
  out->scores.insert(out->scores.end(), probabilities.begin(), probabilities.begin() + b);
  out->labels.insert(out->labels.end(), batch.labels.begin(), batch.labels.begin() + b);
  for (int i = 0; i < b; ++i) {
    int bucket = -1;
    if (item_count >= 0) {
      const double count = batch.eval[item_count][i];
      bucket = count >= ec.hot_min_count() ? 0 : count >= ec.warm_min_count() ? 1 : 2;
    }
    out->item_buckets.push_back(bucket);
    out->user_buckets.push_back(cold_user >= 0 && batch.eval[cold_user][i] >= 0.5f ? 0 : -1);
    if (true_prob >= 0) out->true_probs.push_back(batch.eval[true_prob][i]);
  }
}

// This rank's share: reads the whole (capped) test set in batches and scores the
// batches k with k % world == rank. Adds the time spent reading to `read_seconds`.
absl::StatusOr<EvalShard> ScoreShare(const v1::ModelConfig& config, const SparseLayout& layout,
                                     PsClient& client, model::DenseTower& tower, int rank,
                                     int world, double* read_seconds) {
  if (config.data().test_path().empty()) {
    return absl::FailedPreconditionError("this worker has no test data (--test, data.test_path)");
  }
  ReaderOptions options;
  options.with_eval_columns = true;
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<DatasetReader> reader,
                         DatasetReader::Open(config, config.data().test_path(), options));
  const v1::EvalConfig& ec = config.eval();
  const int item_count = EvalIndex(config, ec.item_count_column());
  const int cold_user = EvalIndex(config, ec.cold_user_column());
  const int true_prob = EvalIndex(config, ec.true_prob_column());
  EvalShard shard;
  shard.settings_digest = EvalSettingsDigest(config);
  shard.examples.has_item_count = item_count >= 0;
  shard.examples.has_cold_user = cold_user >= 0;
  shard.examples.has_true_prob = true_prob >= 0;
  std::vector<int> task_true_probs;
  for (const v1::TaskConfig& task : config.dense().tasks()) {
    int index = EvalIndex(config, task.true_prob_column());
    if (task.kind() == v1::TaskConfig::ESMM_CTCVR && true_prob < 0) index = -1;
    task_true_probs.push_back(index);
    EvalExamples::Task& t = shard.examples.tasks.emplace_back();
    t.has_true_prob = index >= 0;
    t.has_head = task.kind() == v1::TaskConfig::ESMM_CTCVR;
  }
  if (tower.num_tasks() != 1 + config.dense().tasks_size()) {
    return absl::InternalError("evaluation: the tower's tasks differ from the config's");
  }

  const uint64_t cap = config.training().eval_max_examples();
  const int batch_size = static_cast<int>(config.training().batch_size());
  model::ExampleBatch batch;
  SparseBatch sparse(layout);
  std::vector<float> pooled, logits, probabilities;
  uint64_t seen = 0;
  uint64_t k = 0;  // the batch's index in the test set
  for (; cap == 0 || seen < cap; ++k) {
    const int want =
        cap == 0 ? batch_size : static_cast<int>(std::min<uint64_t>(batch_size, cap - seen));
    const absl::Time read_start = absl::Now();
    EMBER_ASSIGN_OR_RETURN(bool more, reader->Next(want, &batch));
    *read_seconds += absl::ToDoubleSeconds(absl::Now() - read_start);
    if (!more) break;
    seen += batch.size;
    if (k % static_cast<uint64_t>(world) != static_cast<uint64_t>(rank)) continue;
    sparse.Build(batch);
    std::vector<PsHandle> pulls;
    StartPulls(client, sparse, &pulls);
    EMBER_RETURN_IF_ERROR(WaitAll(&pulls));
    pooled.resize(static_cast<size_t>(batch.size) * layout.pooled_width);
    sparse.Pool(absl::MakeSpan(pooled));
    ScoreBatch(config.dense(), tower, batch, pooled, &logits, &probabilities);
    AppendBatch(ec, item_count, cold_user, true_prob, batch, probabilities, &shard.examples);
    AppendTasks(config.dense(), task_true_probs, true_prob, batch, logits, probabilities,
                &shard.examples);
    shard.batch_index.push_back(k);
    shard.batch_size.push_back(static_cast<uint32_t>(batch.size));
  }
  if (seen == 0) {
    return absl::NotFoundError(absl::StrCat("no test examples in ", config.data().test_path()));
  }
  shard.total_batches = k;
  return shard;
}

// A rank's failure, naming the rank, with its code kept.
absl::Status OnRank(const absl::Status& s, int rank) {
  return absl::Status(s.code(), absl::StrCat("evaluation on rank ", rank, ": ", s.message()));
}

// Rank 0: the metrics (and scores) from every rank's gathered bytes.
absl::StatusOr<TestSetResult> Combine(const std::vector<std::string>& gathered,
                                      std::vector<float>* scores) {
  std::vector<EvalShard> shards;
  shards.reserve(gathered.size());
  for (size_t r = 0; r < gathered.size(); ++r) {
    const absl::string_view bytes = gathered[r];
    // The first byte tells a shard ('S') from a failure ('E').
    if (bytes.empty()) {
      return absl::InternalError(absl::StrCat("evaluation: rank ", r, " sent nothing"));
    }
    if (bytes[0] == 'E') {
      const absl::Status failure = DecodeStatus(bytes.substr(1));
      if (!failure.ok()) return failure;
      return absl::InternalError(absl::StrCat("evaluation: rank ", r, " sent an empty failure"));
    }
    absl::StatusOr<EvalShard> shard = DecodeShard(bytes.substr(1));
    if (!shard.ok()) return OnRank(shard.status(), static_cast<int>(r));
    shards.push_back(*std::move(shard));
  }
  EMBER_ASSIGN_OR_RETURN(EvalExamples all, MergeShards(shards));
  EMBER_ASSIGN_OR_RETURN(TestSetResult result, SummarizeExamples(all));
  if (scores != nullptr) *scores = std::move(all.scores);
  return result;
}

}  // namespace

absl::StatusOr<TestSetResult> Evaluate(const v1::ModelConfig& config, const SparseLayout& layout,
                                       PsClient& client, model::DenseTower& tower,
                                       Collective& collective, std::vector<float>* scores) {
  const absl::Time start = absl::Now();
  const int rank = collective.rank();
  const int world = collective.world_size();
  if (scores != nullptr) scores->clear();
  double read_seconds = 0;
  uint64_t scored = 0;
  // Gather: every rank sends its share (or its failure) to rank 0.
  std::vector<std::string> send(world);
  {
    const absl::StatusOr<EvalShard> shard =
        ScoreShare(config, layout, client, tower, rank, world, &read_seconds);
    if (shard.ok()) {
      scored = shard->examples.size();
      send[0] = absl::StrCat("S", EncodeShard(*shard));
    } else {
      send[0] = absl::StrCat("E", EncodeStatus(OnRank(shard.status(), rank)));
    }
  }  // the shard's examples live on in send[0] only
  EMBER_ASSIGN_OR_RETURN(std::vector<std::string> gathered, collective.AllToAll(send));
  send.assign(world, "");
  absl::StatusOr<TestSetResult> result = TestSetResult{};
  if (rank == 0) {
    result = Combine(gathered, scores);
    // Rank 0's outcome back to every rank, so that all return the same status.
    send.assign(world, EncodeStatus(result.status()));
  }
  gathered.clear();
  EMBER_ASSIGN_OR_RETURN(std::vector<std::string> outcome, collective.AllToAll(send));
  EMBER_RETURN_IF_ERROR(DecodeStatus(outcome[0]));
  result->scored_examples = scored;
  result->read_seconds = read_seconds;
  result->seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return result;
}

absl::Status WriteScoresFile(const std::string& path, const std::vector<float>& scores) {
  std::string text;
  text.reserve(scores.size() * 12);
  for (float p : scores) absl::StrAppendFormat(&text, "%.9g\n", p);
  return WriteFileAtomically(path, text);
}

}  // namespace ember::worker
