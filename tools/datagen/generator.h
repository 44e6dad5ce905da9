// Copyright 2026 The Ember Authors.
//
// Generate: writes an ember-datagen dataset (tools/datagen/world.h is the truth behind
// it). Output layout under options.out, a contract readers rely on:
//
//   train/part-00000.tsv .. part-{train_files-1}.tsv   (.tsv.gz with gzip)
//   test/part-00000.tsv
//   oracle.json    {"test_auc", "test_logloss", "test_examples", "train_examples",
//                   "base_ctr", "cold_user_fraction"} of the true probabilities
//   datagen.json   the options used, plus cold_users (size of the cold population)
//                  and true_bias (the calibrated b0 of the truth)
//
// Every file starts with a header line; columns, tab-separated:
//   label user_id item_id category_id shop_id user_segment hour device recent_items
//   price user_age session_depth
// and in test data also: true_prob item_train_count cold_user. recent_items is 0-5
// item IDs joined by '|' (empty when none). true_prob is the exact probability the
// label was drawn from (a float, written in its shortest round-trip form); oracle.json
// is computed from the values as written.
//
// With conversions (--conversions; off by default, and then every file is exactly as
// without the option): every example also gets a post-click conversion drawn from a
// planted CVR model of the same features (tools/datagen/world.h), from random streams
// of its own, so every other column of every line is the same with and without it.
// Training files then also hold: true_prob converted true_cvr_prob; test files:
// true_prob item_train_count cold_user converted true_cvr_prob (so one model config
// can read both with their EVAL columns). converted is 0/1 and always 0 when label is
// 0; true_cvr_prob is the exact P(conversion | click, features) it was drawn from, on
// every line (also unclicked ones). oracle.json then also holds, over the test data:
//   cvr_test_auc, cvr_test_logloss   true_cvr_prob against converted, clicked examples
//   cvr_test_examples                the clicked test examples
//   ctcvr_test_auc, ctcvr_test_logloss  true_prob * true_cvr_prob against converted,
//                                    every example
//   base_cvr                         conversions / clicks of the training data
// and datagen.json "conversions": true and true_cvr_bias (the calibrated c0).
//
// Test users: a cold_user_fraction share of test examples (each independently) have a
// user from the cold population (max(1, users / 10) users with IDs above --users,
// never in training, drawn by popularity); the others a training-population user
// drawn by popularity among those that appear in training. So cold_user == 1 exactly
// for the IDs above --users.
//
// Deterministic: the same options give byte-identical plain files, whatever the
// number of threads (every file has its own random stream).

#ifndef EMBER_TOOLS_DATAGEN_GENERATOR_H_
#define EMBER_TOOLS_DATAGEN_GENERATOR_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ember::datagen {

struct DatagenOptions {
  std::string out;                    // output directory (created). Required.
  uint64_t train_examples = 1000000;  // >= 1
  uint64_t test_examples = 100000;
  uint32_t train_files = 8;         // >= 1
  uint64_t users = 200000;          // training population; in [1, 1e8]
  uint64_t items = 100000;          // in [1, 1e8]
  uint64_t categories = 500;        // in [1, 1e8]
  uint64_t shops = 5000;            // in [1, 1e8]
  double zipf = 1.1;                // popularity exponent, in [0, 10]
  double cold_user_fraction = 0.1;  // in [0, 1]
  uint64_t seed = 1;
  bool gzip = false;
  bool conversions = false;  // adds the planted conversions (see above)
  // The weight of the planted cross term of the click truth (world.h), in [0, 10]; 0
  // (default) = none, and then every file is exactly as without the option. With it the
  // feature columns of every line stay the same; labels, true_prob and the oracle follow
  // the new truth, and datagen.json also holds "cross" and "cross_fields".
  double cross = 0;
  // The fields whose traits the cross term multiplies: two or more distinct names of
  // user, item, category, shop, segment, hour, device, comma-separated.
  std::string cross_fields = "user,item,hour";
  int threads = 0;  // train files written in parallel; 0 = hardware concurrency
};

// INVALID_ARGUMENT naming the option when one is out of range.
absl::Status Validate(const DatagenOptions& options);

struct DatagenSummary {
  uint64_t train_examples = 0;
  uint64_t test_examples = 0;
  double train_ctr = 0;
  double test_ctr = 0;
  double oracle_auc = 0;  // NaN when the test labels are all equal
  double oracle_logloss = 0;
  double cold_user_fraction = 0;  // measured share of cold test examples
  double top1pct_item_share = 0;  // share of training examples on the top 1% items
  // With conversions (NaN where undefined, e.g. no clicked test example):
  double train_cvr = 0;       // conversions / clicks of the training data
  double test_cvr = 0;        // conversions / clicks of the test data
  uint64_t test_clicks = 0;   // clicked test examples
  double cvr_oracle_auc = 0;  // over clicked test examples
  double cvr_oracle_logloss = 0;
  double ctcvr_oracle_auc = 0;  // over every test example
  double ctcvr_oracle_logloss = 0;
  double seconds = 0;
};

// Writes the dataset (see above), printing progress lines to `log`. Existing files
// named part-* in out/train and out/test are removed first, so a directory can be
// regenerated with fewer files or without gzip. Errors: INVALID_ARGUMENT from
// Validate; the IO error (with the path) when a directory or file cannot be written.
absl::StatusOr<DatagenSummary> Generate(const DatagenOptions& options, std::ostream& log);

// Exact ROC AUC of `scores` against 0/1 `labels`, ties counted half (average ranks).
// NaN when all labels are equal. REQUIRES: equal sizes.
double ExactAuc(const std::vector<float>& scores, const std::vector<uint8_t>& labels);

}  // namespace ember::datagen

#endif  // EMBER_TOOLS_DATAGEN_GENERATOR_H_
