// Copyright 2026 The Ember Authors.
//
// Wire form of a shard (host byte order):
//   u32 magic "EVS1", u64 settings_digest, u64 total_batches, u8 column flags
//   (1 item count, 2 cold user, 4 true prob), u64 batches, then per batch u64 index and
//   u32 size, then the columns over all n examples: f32 scores[n], f32 labels[n],
//   i8 item_buckets[n], i8 user_buckets[n], f32 true_probs[n] (only with flag 4); then,
//   with flag 8 (a multi-task model), u8 tasks and per task u8 flags (1 has_true_prob,
//   2 has_head), f32 scores[n], f32 labels[n], f32 true_probs[n] (only with
//   has_true_prob), f32 head_scores[n] (has_head), f32 head_true_probs[n] (both).
// A status: u32 code, then the message ("" is OK).

#include "worker/eval/eval_shard.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/eval/metrics.h"

namespace ember::worker {
namespace {

constexpr uint32_t kShardMagic = 0x31535645;  // "EVS1"

template <typename T>
void Put(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

template <typename T>
void PutArray(std::string* out, const std::vector<T>& v) {
  out->append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// Reads fixed-size values off the front of the bytes; false once they run out.
class Cursor {
 public:
  explicit Cursor(absl::string_view bytes) : rest_(bytes) {}
  template <typename T>
  bool Get(T* v) {
    if (rest_.size() < sizeof(T)) return false;
    std::memcpy(v, rest_.data(), sizeof(T));
    rest_.remove_prefix(sizeof(T));
    return true;
  }
  template <typename T>
  bool GetArray(size_t n, std::vector<T>* v) {
    if (n > rest_.size() / sizeof(T)) return false;
    v->resize(n);
    std::memcpy(v->data(), rest_.data(), n * sizeof(T));
    rest_.remove_prefix(n * sizeof(T));
    return true;
  }
  bool done() const { return rest_.empty(); }

 private:
  absl::string_view rest_;
};

absl::Status Corrupt(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("evaluation shard: ", what));
}

std::optional<double> Defined(double v) {
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

std::optional<double> BucketAucOf(const BucketAuc& b) {
  return b.defined ? std::optional<double>(b.auc) : std::nullopt;
}

}  // namespace

void EvalExamples::Append(const EvalExamples& other, size_t offset, size_t count) {
  const auto add = [&](auto& to, const auto& from) {
    to.insert(to.end(), from.begin() + offset, from.begin() + offset + count);
  };
  add(scores, other.scores);
  add(labels, other.labels);
  add(item_buckets, other.item_buckets);
  add(user_buckets, other.user_buckets);
  if (has_true_prob) add(true_probs, other.true_probs);
  if (tasks.size() < other.tasks.size()) tasks.resize(other.tasks.size());
  for (size_t t = 0; t < other.tasks.size(); ++t) {
    tasks[t].has_true_prob = other.tasks[t].has_true_prob;
    add(tasks[t].scores, other.tasks[t].scores);
    add(tasks[t].labels, other.tasks[t].labels);
    if (tasks[t].has_true_prob) add(tasks[t].true_probs, other.tasks[t].true_probs);
    tasks[t].has_head = other.tasks[t].has_head;
    if (tasks[t].has_head) add(tasks[t].head_scores, other.tasks[t].head_scores);
    if (tasks[t].has_head && tasks[t].has_true_prob) {
      add(tasks[t].head_true_probs, other.tasks[t].head_true_probs);
    }
  }
}

std::string EncodeShard(const EvalShard& shard) {
  const EvalExamples& e = shard.examples;
  std::string out;
  out.reserve(64 + shard.batch_index.size() * 12 + e.size() * 14);
  Put(&out, kShardMagic);
  Put(&out, shard.settings_digest);
  Put(&out, shard.total_batches);
  const uint8_t flags = (e.has_item_count ? 1 : 0) | (e.has_cold_user ? 2 : 0) |
                        (e.has_true_prob ? 4 : 0) | (e.tasks.empty() ? 0 : 8);
  Put(&out, flags);
  Put(&out, static_cast<uint64_t>(shard.batch_index.size()));
  for (size_t i = 0; i < shard.batch_index.size(); ++i) {
    Put(&out, shard.batch_index[i]);
    Put(&out, shard.batch_size[i]);
  }
  PutArray(&out, e.scores);
  PutArray(&out, e.labels);
  for (int b : e.item_buckets) Put(&out, static_cast<int8_t>(b));
  for (int b : e.user_buckets) Put(&out, static_cast<int8_t>(b));
  if (e.has_true_prob) PutArray(&out, e.true_probs);
  if (!e.tasks.empty()) {
    Put(&out, static_cast<uint8_t>(e.tasks.size()));
    for (const EvalExamples::Task& t : e.tasks) {
      Put(&out, static_cast<uint8_t>((t.has_true_prob ? 1 : 0) | (t.has_head ? 2 : 0)));
      PutArray(&out, t.scores);
      PutArray(&out, t.labels);
      if (t.has_true_prob) PutArray(&out, t.true_probs);
      if (t.has_head) PutArray(&out, t.head_scores);
      if (t.has_head && t.has_true_prob) PutArray(&out, t.head_true_probs);
    }
  }
  return out;
}

absl::StatusOr<EvalShard> DecodeShard(absl::string_view bytes) {
  Cursor in(bytes);
  uint32_t magic = 0;
  if (!in.Get(&magic) || magic != kShardMagic) return Corrupt("bad magic");
  EvalShard shard;
  uint8_t flags = 0;
  uint64_t batches = 0;
  if (!in.Get(&shard.settings_digest) || !in.Get(&shard.total_batches) || !in.Get(&flags) ||
      !in.Get(&batches)) {
    return Corrupt("truncated header");
  }
  if (flags > 15) return Corrupt(absl::StrCat("unknown column flags ", flags));
  if (batches > bytes.size() / 12) return Corrupt(absl::StrCat(batches, " batches"));
  EvalExamples& e = shard.examples;
  e.has_item_count = (flags & 1) != 0;
  e.has_cold_user = (flags & 2) != 0;
  e.has_true_prob = (flags & 4) != 0;
  uint64_t n = 0;
  shard.batch_index.resize(batches);
  shard.batch_size.resize(batches);
  for (uint64_t i = 0; i < batches; ++i) {
    if (!in.Get(&shard.batch_index[i]) || !in.Get(&shard.batch_size[i])) {
      return Corrupt("truncated batch list");
    }
    n += shard.batch_size[i];
  }
  std::vector<int8_t> item, user;
  if (!in.GetArray(n, &e.scores) || !in.GetArray(n, &e.labels) || !in.GetArray(n, &item) ||
      !in.GetArray(n, &user) || (e.has_true_prob && !in.GetArray(n, &e.true_probs))) {
    return Corrupt(absl::StrCat("truncated columns of ", n, " examples"));
  }
  if ((flags & 8) != 0) {
    uint8_t tasks = 0;
    if (!in.Get(&tasks) || tasks == 0) return Corrupt("bad task count");
    e.tasks.resize(tasks);
    for (EvalExamples::Task& t : e.tasks) {
      uint8_t has = 0;
      if (!in.Get(&has) || has > 3) return Corrupt("bad task flags");
      t.has_true_prob = (has & 1) != 0;
      t.has_head = (has & 2) != 0;
      if (!in.GetArray(n, &t.scores) || !in.GetArray(n, &t.labels) ||
          (t.has_true_prob && !in.GetArray(n, &t.true_probs)) ||
          (t.has_head && !in.GetArray(n, &t.head_scores)) ||
          (t.has_head && t.has_true_prob && !in.GetArray(n, &t.head_true_probs))) {
        return Corrupt(absl::StrCat("truncated task columns of ", n, " examples"));
      }
    }
  }
  if (!in.done()) return Corrupt("trailing bytes");
  e.item_buckets.assign(item.begin(), item.end());
  e.user_buckets.assign(user.begin(), user.end());
  for (uint64_t i = 0; i < n; ++i) {
    if (e.item_buckets[i] < -1 || e.item_buckets[i] > 2 || e.user_buckets[i] < -1 ||
        e.user_buckets[i] > 0) {
      return Corrupt(
          absl::StrCat("example ", i, " has buckets ", e.item_buckets[i], "/", e.user_buckets[i]));
    }
  }
  return shard;
}

std::string EncodeStatus(const absl::Status& status) {
  if (status.ok()) return "";
  std::string out;
  Put(&out, static_cast<uint32_t>(status.code()));
  absl::StrAppend(&out, status.message());
  return out;
}

absl::Status DecodeStatus(absl::string_view bytes) {
  if (bytes.empty()) return absl::OkStatus();
  Cursor in(bytes);
  uint32_t code = 0;
  in.Get(&code);
  if (bytes.size() < sizeof(code) || code == 0 || code > 16) {
    return absl::InternalError("evaluation: a rank sent an unreadable status");
  }
  return absl::Status(static_cast<absl::StatusCode>(code), bytes.substr(sizeof(code)));
}

absl::StatusOr<EvalExamples> MergeShards(const std::vector<EvalShard>& shards) {
  if (shards.empty()) return absl::InternalError("evaluation: no shards to merge");
  const EvalShard& first = shards[0];
  const size_t world = shards.size();
  // Where each batch is: (rank, offset into its examples, size).
  struct Place {
    size_t rank = 0, offset = 0, size = 0;
    bool seen = false;
  };
  std::vector<Place> places(first.total_batches);
  for (size_t r = 0; r < world; ++r) {
    const EvalShard& s = shards[r];
    const EvalExamples& e = s.examples;
    if (s.settings_digest != first.settings_digest || s.total_batches != first.total_batches ||
        e.has_item_count != first.examples.has_item_count ||
        e.has_cold_user != first.examples.has_cold_user ||
        e.has_true_prob != first.examples.has_true_prob ||
        e.tasks.size() != first.examples.tasks.size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "evaluation: rank ", r, " cut the test set differently from rank 0 (", s.total_batches,
          " batches vs ", first.total_batches,
          "): every worker needs the same --test data, --batch_size, eval_max_examples and eval "
          "columns"));
    }
    size_t offset = 0;
    for (size_t i = 0; i < s.batch_index.size(); ++i) {
      const uint64_t k = s.batch_index[i];
      if (k >= places.size() || places[k].seen || k % world != r) {
        return absl::InternalError(absl::StrCat("evaluation: rank ", r, " sent batch ", k, " of ",
                                                places.size(), " (duplicate or not its)"));
      }
      places[k] = {r, offset, s.batch_size[i], true};
      offset += s.batch_size[i];
    }
    if (offset != e.size()) {
      return absl::InternalError(absl::StrCat("evaluation: rank ", r, " sent ", e.size(),
                                              " examples in batches of ", offset));
    }
  }
  EvalExamples all;
  all.has_item_count = first.examples.has_item_count;
  all.has_cold_user = first.examples.has_cold_user;
  all.has_true_prob = first.examples.has_true_prob;
  all.tasks.resize(first.examples.tasks.size());
  for (size_t k = 0; k < places.size(); ++k) {
    if (!places[k].seen) {
      return absl::InternalError(absl::StrCat("evaluation: batch ", k, " of ", places.size(),
                                              " is missing (rank ", k % world, ")"));
    }
    all.Append(shards[places[k].rank].examples, places[k].offset, places[k].size);
  }
  return all;
}

absl::StatusOr<TestSetResult> SummarizeExamples(const EvalExamples& e) {
  if (e.size() == 0) return absl::NotFoundError("evaluation: no test examples");
  // The accumulators one rank fed batch by batch: the model by item bucket (hot, warm,
  // cold), the model on cold users, the oracle. Added whole, in test-file order.
  EvalAccumulator model(/*num_buckets=*/3);
  EMBER_RETURN_IF_ERROR(model.Add(e.scores, e.labels, e.item_buckets));
  TestSetResult result;
  const EvalResult m = model.Finalize();
  result.examples = static_cast<uint64_t>(m.count);
  result.auc = m.auc;
  result.logloss = m.logloss;
  if (e.has_item_count) {
    result.auc_hot = BucketAucOf(m.buckets[0]);
    result.auc_warm = BucketAucOf(m.buckets[1]);
    result.auc_cold = BucketAucOf(m.buckets[2]);
    result.examples_hot = m.buckets[0].count;
    result.examples_warm = m.buckets[1].count;
    result.examples_cold = m.buckets[2].count;
  }
  if (e.has_cold_user) {
    EvalAccumulator cold_users(/*num_buckets=*/1);
    EMBER_RETURN_IF_ERROR(cold_users.Add(e.scores, e.labels, e.user_buckets));
    const EvalResult c = cold_users.Finalize();
    result.auc_cold_users = BucketAucOf(c.buckets[0]);
    result.examples_cold_users = c.buckets[0].count;
  }
  if (e.has_true_prob) {
    EvalAccumulator oracle;
    EMBER_RETURN_IF_ERROR(oracle.Add(e.true_probs, e.labels));
    const EvalResult o = oracle.Finalize();
    result.oracle_auc = Defined(o.auc);
    result.oracle_logloss = Defined(o.logloss);
  }
  for (const EvalExamples::Task& t : e.tasks) {
    EvalAccumulator task;
    EMBER_RETURN_IF_ERROR(task.Add(t.scores, t.labels));
    const EvalResult r = task.Finalize();
    TestSetResult::Task out;
    out.auc = r.auc;
    out.logloss = r.logloss;
    for (float y : t.labels) out.positives += y > 0.5f ? 1 : 0;
    if (t.has_true_prob) {
      EvalAccumulator oracle;
      EMBER_RETURN_IF_ERROR(oracle.Add(t.true_probs, t.labels));
      out.oracle_auc = Defined(oracle.Finalize().auc);
    }
    if (t.has_head) {
      // The CVR head over the clicked examples (bucket 0; the others in no bucket).
      std::vector<int> clicked(e.size(), -1);
      for (size_t i = 0; i < e.size(); ++i) {
        if (e.labels[i] >= 0.5f) {
          clicked[i] = 0;
          ++out.clicked;
        }
      }
      EvalAccumulator head(/*num_buckets=*/1);
      EMBER_RETURN_IF_ERROR(head.Add(t.head_scores, t.labels, clicked));
      out.cvr_auc_clicked = BucketAucOf(head.Finalize().buckets[0]);
      if (t.has_true_prob) {
        EvalAccumulator head_oracle(/*num_buckets=*/1);
        EMBER_RETURN_IF_ERROR(head_oracle.Add(t.head_true_probs, t.labels, clicked));
        out.cvr_oracle_auc_clicked = BucketAucOf(head_oracle.Finalize().buckets[0]);
      }
    }
    result.tasks.push_back(out);
  }
  return result;
}

}  // namespace ember::worker
