// Copyright 2026 The Ember Authors.
//
// Tests of the exact merge of evaluation shards (worker/eval/eval_shard.cc): a test set
// split by batch over any number of ranks, encoded, decoded and merged, gives bitwise
// the metrics of one rank evaluating everything (which are those of the batch-by-batch
// accumulation the single-rank evaluator did); disagreeing or damaged shards are
// refused with a clear error.

#include "worker/eval/eval_shard.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "worker/eval/metrics.h"

namespace ember::worker {
namespace {

// A test set of `n` examples in batches of `batch` (the last one short).
struct TestSet {
  EvalExamples all;
  std::vector<uint32_t> batches;  // sizes
};

TestSet MakeTestSet(size_t n, uint32_t batch, bool columns, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  TestSet t;
  t.all.has_item_count = t.all.has_cold_user = t.all.has_true_prob = columns;
  for (size_t i = 0; i < n; ++i) {
    const float truth = unit(rng);
    // Coarse scores make ties, which AUC counts one half.
    t.all.scores.push_back(std::round((truth * 0.6f + unit(rng) * 0.4f) * 50) / 50);
    t.all.labels.push_back(unit(rng) < truth ? 1.0f : 0.0f);
    t.all.item_buckets.push_back(columns ? static_cast<int>(rng() % 3) : -1);
    t.all.user_buckets.push_back(columns && rng() % 4 == 0 ? 0 : -1);
    if (columns) t.all.true_probs.push_back(truth);
  }
  for (size_t done = 0; done < n; done += batch) {
    t.batches.push_back(static_cast<uint32_t>(std::min<size_t>(batch, n - done)));
  }
  return t;
}

// The shards of `world` ranks: batch k on rank k % world, each sent through its bytes.
std::vector<EvalShard> Split(const TestSet& t, size_t world, uint64_t digest = 7) {
  std::vector<EvalShard> shards(world);
  for (EvalShard& s : shards) {
    s.settings_digest = digest;
    s.total_batches = t.batches.size();
    s.examples.has_item_count = t.all.has_item_count;
    s.examples.has_cold_user = t.all.has_cold_user;
    s.examples.has_true_prob = t.all.has_true_prob;
    s.examples.tasks.resize(t.all.tasks.size());  // as ScoreShare: even with no batches
    for (size_t i = 0; i < t.all.tasks.size(); ++i) {
      s.examples.tasks[i].has_true_prob = t.all.tasks[i].has_true_prob;
      s.examples.tasks[i].has_head = t.all.tasks[i].has_head;
    }
  }
  size_t offset = 0;
  for (size_t k = 0; k < t.batches.size(); ++k) {
    EvalShard& s = shards[k % world];
    s.batch_index.push_back(k);
    s.batch_size.push_back(t.batches[k]);
    s.examples.Append(t.all, offset, t.batches[k]);
    offset += t.batches[k];
  }
  for (EvalShard& s : shards) {
    absl::StatusOr<EvalShard> decoded = DecodeShard(EncodeShard(s));
    EXPECT_TRUE(decoded.ok()) << decoded.status();
    if (decoded.ok()) s = *decoded;
  }
  return shards;
}

// Bitwise equality of doubles (NaN included), and of optional ones.
bool Same(double a, double b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }
bool Same(const std::optional<double>& a, const std::optional<double>& b) {
  return a.has_value() == b.has_value() && (!a.has_value() || Same(*a, *b));
}

void ExpectSameResult(const TestSetResult& a, const TestSetResult& b) {
  EXPECT_EQ(a.examples, b.examples);
  EXPECT_TRUE(Same(a.auc, b.auc)) << a.auc << " vs " << b.auc;
  EXPECT_TRUE(Same(a.logloss, b.logloss)) << a.logloss << " vs " << b.logloss;
  EXPECT_TRUE(Same(a.oracle_auc, b.oracle_auc));
  EXPECT_TRUE(Same(a.oracle_logloss, b.oracle_logloss));
  EXPECT_TRUE(Same(a.auc_hot, b.auc_hot));
  EXPECT_TRUE(Same(a.auc_warm, b.auc_warm));
  EXPECT_TRUE(Same(a.auc_cold, b.auc_cold));
  EXPECT_TRUE(Same(a.auc_cold_users, b.auc_cold_users));
  EXPECT_EQ(a.examples_hot, b.examples_hot);
  EXPECT_EQ(a.examples_warm, b.examples_warm);
  EXPECT_EQ(a.examples_cold, b.examples_cold);
  EXPECT_EQ(a.examples_cold_users, b.examples_cold_users);
}

TEST(EvalShardTest, TheSummaryIsTheBatchByBatchAccumulationOfOneRank) {
  const TestSet t = MakeTestSet(5000, 384, /*columns=*/true, 1);
  // What the single-rank evaluator computed: accumulators fed one batch at a time.
  EvalAccumulator model(3), users(1), oracle;
  size_t offset = 0;
  for (uint32_t b : t.batches) {
    const auto span = [&](const auto& v) { return absl::MakeConstSpan(v).subspan(offset, b); };
    ASSERT_TRUE(model.Add(span(t.all.scores), span(t.all.labels), span(t.all.item_buckets)).ok());
    ASSERT_TRUE(users.Add(span(t.all.scores), span(t.all.labels), span(t.all.user_buckets)).ok());
    ASSERT_TRUE(oracle.Add(span(t.all.true_probs), span(t.all.labels)).ok());
    offset += b;
  }
  absl::StatusOr<TestSetResult> summary = SummarizeExamples(t.all);
  ASSERT_TRUE(summary.ok()) << summary.status();
  const EvalResult m = model.Finalize(), u = users.Finalize(), o = oracle.Finalize();
  EXPECT_TRUE(Same(summary->auc, m.auc));
  EXPECT_TRUE(Same(summary->logloss, m.logloss));
  EXPECT_TRUE(Same(*summary->auc_warm, m.buckets[1].auc));
  EXPECT_TRUE(Same(*summary->auc_cold_users, u.buckets[0].auc));
  EXPECT_TRUE(Same(*summary->oracle_auc, o.auc));
  EXPECT_TRUE(Same(*summary->oracle_logloss, o.logloss));
  EXPECT_EQ(summary->examples, 5000u);
  EXPECT_EQ(summary->examples_hot + summary->examples_warm + summary->examples_cold, 5000u);
}

TEST(EvalShardTest, AnyWorldSizeMergesToBitwiseTheOneRankResult) {
  for (bool columns : {true, false}) {
    const TestSet t = MakeTestSet(4099, 256, columns, 2);  // 17 batches, the last of 3
    absl::StatusOr<TestSetResult> one = SummarizeExamples(t.all);
    ASSERT_TRUE(one.ok()) << one.status();
    for (size_t world : {1, 2, 3, 4, 7, 17, 20}) {
      SCOPED_TRACE(testing::Message() << "world " << world << ", columns " << columns);
      absl::StatusOr<EvalExamples> merged = MergeShards(Split(t, world));
      ASSERT_TRUE(merged.ok()) << merged.status();
      // The examples come back in test-file order, bit for bit.
      EXPECT_EQ(merged->scores, t.all.scores);
      EXPECT_EQ(merged->labels, t.all.labels);
      EXPECT_EQ(merged->item_buckets, t.all.item_buckets);
      EXPECT_EQ(merged->user_buckets, t.all.user_buckets);
      EXPECT_EQ(merged->true_probs, t.all.true_probs);
      absl::StatusOr<TestSetResult> many = SummarizeExamples(*merged);
      ASSERT_TRUE(many.ok()) << many.status();
      ExpectSameResult(*one, *many);
    }
  }
}

// Multi-task: the extra tasks' scores, labels and true probabilities ride in the shards
// and merge back in order; their AUCs are bitwise one rank's.
TEST(EvalShardTest, ExtraTasksMergeToBitwiseTheOneRankResult) {
  TestSet t = MakeTestSet(3001, 256, /*columns=*/false, 3);
  const TestSet other = MakeTestSet(3001, 256, /*columns=*/true, 4);
  for (bool has_true_prob : {true, false}) {
    EvalExamples::Task& task = t.all.tasks.emplace_back();
    task.has_true_prob = has_true_prob;
    task.scores = other.all.scores;
    task.labels = other.all.labels;
    if (has_true_prob) task.true_probs = other.all.true_probs;
    // The first task is ESMM-like: a head score (and its truth) rides along.
    task.has_head = has_true_prob;
    if (task.has_head) {
      task.head_scores = t.all.scores;
      task.head_true_probs = other.all.true_probs;
    }
  }
  absl::StatusOr<TestSetResult> one = SummarizeExamples(t.all);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->tasks.size(), 2u);
  const absl::StatusOr<TestSetResult> alone = SummarizeExamples(other.all);
  ASSERT_TRUE(alone.ok());
  EXPECT_TRUE(Same(one->tasks[0].auc, alone->auc));
  EXPECT_TRUE(Same(one->tasks[0].logloss, alone->logloss));
  EXPECT_TRUE(Same(one->tasks[0].oracle_auc, alone->oracle_auc));
  EXPECT_FALSE(one->tasks[1].oracle_auc.has_value());
  // The head over the clicked examples (click label 1): bucket 0 of a one-bucket AUC.
  std::vector<int> clicked;
  for (float y : t.all.labels) clicked.push_back(y >= 0.5f ? 0 : -1);
  EvalAccumulator head(1);
  ASSERT_TRUE(head.Add(t.all.scores, other.all.labels, clicked).ok());
  EXPECT_TRUE(Same(*one->tasks[0].cvr_auc_clicked, head.Finalize().buckets[0].auc));
  EXPECT_TRUE(one->tasks[0].cvr_oracle_auc_clicked.has_value());
  EXPECT_FALSE(one->tasks[1].cvr_auc_clicked.has_value());
  for (size_t world : {1, 2, 3, 7, 20}) {
    SCOPED_TRACE(testing::Message() << "world " << world);
    absl::StatusOr<EvalExamples> merged = MergeShards(Split(t, world));
    ASSERT_TRUE(merged.ok()) << merged.status();
    ASSERT_EQ(merged->tasks.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(merged->tasks[i].scores, t.all.tasks[i].scores);
      EXPECT_EQ(merged->tasks[i].labels, t.all.tasks[i].labels);
      EXPECT_EQ(merged->tasks[i].true_probs, t.all.tasks[i].true_probs);
      EXPECT_EQ(merged->tasks[i].head_scores, t.all.tasks[i].head_scores);
      EXPECT_EQ(merged->tasks[i].head_true_probs, t.all.tasks[i].head_true_probs);
    }
    absl::StatusOr<TestSetResult> many = SummarizeExamples(*merged);
    ASSERT_TRUE(many.ok()) << many.status();
    ExpectSameResult(*one, *many);
    ASSERT_EQ(many->tasks.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_TRUE(Same(many->tasks[i].auc, one->tasks[i].auc));
      EXPECT_TRUE(Same(many->tasks[i].logloss, one->tasks[i].logloss));
      EXPECT_TRUE(Same(many->tasks[i].oracle_auc, one->tasks[i].oracle_auc));
      EXPECT_EQ(many->tasks[i].positives, one->tasks[i].positives);
      EXPECT_TRUE(Same(many->tasks[i].cvr_auc_clicked, one->tasks[i].cvr_auc_clicked));
      EXPECT_TRUE(
          Same(many->tasks[i].cvr_oracle_auc_clicked, one->tasks[i].cvr_oracle_auc_clicked));
      EXPECT_EQ(many->tasks[i].clicked, one->tasks[i].clicked);
    }
  }
  // A rank that lost its tasks cut the test set differently.
  std::vector<EvalShard> shards = Split(t, 2);
  shards[1].examples.tasks.clear();
  EXPECT_EQ(MergeShards(shards).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(EvalShardTest, RanksThatCutTheTestSetDifferentlyAreNamed) {
  const TestSet t = MakeTestSet(1000, 100, true, 3);
  std::vector<EvalShard> shards = Split(t, 3);
  shards[2].settings_digest = 8;  // another --test, batch size or cap
  absl::StatusOr<EvalExamples> merged = MergeShards(shards);
  EXPECT_EQ(merged.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(merged.status().message().find("rank 2"), std::string::npos) << merged.status();

  shards = Split(t, 3);
  shards[1].total_batches = 9;
  EXPECT_EQ(MergeShards(shards).status().code(), absl::StatusCode::kFailedPrecondition);
  shards = Split(t, 3);
  shards[1].examples.has_true_prob = false;
  shards[1].examples.true_probs.clear();
  EXPECT_EQ(MergeShards(shards).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(EvalShardTest, MissingDuplicateOrMisplacedBatchesAreRefused) {
  const TestSet t = MakeTestSet(1000, 100, true, 4);  // 10 batches
  // Rank 1 lost its last batch (9).
  std::vector<EvalShard> shards = Split(t, 2);
  shards[1].batch_index.pop_back();
  shards[1].batch_size.pop_back();
  shards[1].examples = {};
  shards[1].examples.has_item_count = shards[1].examples.has_cold_user = true;
  shards[1].examples.has_true_prob = true;
  for (size_t i = 0; i < shards[1].batch_index.size(); ++i) {
    shards[1].examples.Append(t.all, shards[1].batch_index[i] * 100, 100);
  }
  absl::StatusOr<EvalExamples> merged = MergeShards(shards);
  EXPECT_EQ(merged.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(merged.status().message().find("batch 9"), std::string::npos) << merged.status();
  // Rank 0 also sends batch 1, which is rank 1's.
  shards = Split(t, 2);
  shards[0].batch_index[1] = 1;
  EXPECT_EQ(MergeShards(shards).status().code(), absl::StatusCode::kInternal);
  // Batch sizes that do not add up to the examples sent.
  shards = Split(t, 2);
  shards[0].batch_size[0] = 99;
  EXPECT_EQ(MergeShards(shards).status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(MergeShards({}).status().code(), absl::StatusCode::kInternal);
}

TEST(EvalShardTest, DamagedBytesAreDataLoss) {
  const TestSet t = MakeTestSet(300, 64, true, 5);
  const std::string bytes = EncodeShard(Split(t, 2)[1]);
  for (size_t cut = 0; cut < bytes.size(); cut += 7) {
    EXPECT_EQ(DecodeShard(bytes.substr(0, cut)).status().code(), absl::StatusCode::kDataLoss)
        << "cut at " << cut;
  }
  EXPECT_EQ(DecodeShard(bytes + "x").status().code(), absl::StatusCode::kDataLoss);
  std::string bad_magic = bytes;
  bad_magic[0] ^= 1;
  EXPECT_EQ(DecodeShard(bad_magic).status().code(), absl::StatusCode::kDataLoss);
  // Header (4 + 8 + 8 + 1 + 8 bytes), rank 1's 2 batches (1 and 3, of 64) at 8 + 4
  // bytes each, 2 x 4 x n bytes of floats: then the first item bucket, set out of range.
  const size_t n = 2 * 64;
  std::string bad_bucket = bytes;
  bad_bucket[29 + 2 * 12 + 8 * n] = 5;
  absl::StatusOr<EvalShard> decoded = DecodeShard(bad_bucket);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss) << decoded.status();
}

TEST(EvalShardTest, StatusesRoundTrip) {
  EXPECT_EQ(EncodeStatus(absl::OkStatus()), "");
  EXPECT_TRUE(DecodeStatus("").ok());
  for (const absl::Status& s :
       {absl::AbortedError("job attempt 1 was rolled back"), absl::NotFoundError(""),
        absl::UnavailableError("shard 1 at 127.0.0.1:1 unreachable")}) {
    EXPECT_EQ(DecodeStatus(EncodeStatus(s)), s);
  }
  EXPECT_EQ(DecodeStatus("ab").code(), absl::StatusCode::kInternal);
}

TEST(EvalShardTest, AnEmptyTestSetIsNotFound) {
  EXPECT_EQ(SummarizeExamples(EvalExamples{}).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace ember::worker
