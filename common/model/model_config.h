// Copyright 2026 The Ember Authors.
//
// Loading and checking a model config (proto/ember/v1/model.proto): one file in
// protobuf text format or JSON (by extension: `.json` is JSON, anything else text).
//
//   absl::StatusOr<v1::ModelConfig> config = LoadModelConfig("configs/quickstart.pbtxt");
//
// The loaded config is normalized: every default filled in (so the rest of the code
// never interprets a zero; tables are checked for a name and a dim, the rest of a
// table's defaults is filled by the cluster at CreateTable), relative data paths
// resolved against the config file's directory, and every
// cross-reference checked (a feature's column and table exist, the column is sparse,
// DOT interaction dims agree, exactly one LABEL column, ...). Errors are
// INVALID_ARGUMENT naming the file and the field ("quickstart.pbtxt: features[2]
// (recent_items): table 'itm' is not in tables").

#ifndef EMBER_COMMON_MODEL_MODEL_CONFIG_H_
#define EMBER_COMMON_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ember/v1/model.pb.h"

namespace ember::model {

// Reads, parses and normalizes a config file. `.json` (any case) is JSON, anything
// else protobuf text format. Relative data paths become absolute paths under the
// config file's directory; messages name the file as `path` was given. NOT_FOUND when
// the file is missing (other IO errors by errno); INVALID_ARGUMENT for a parse error
// ("path:line:column: message" for text, the JSON parser's message for JSON; unknown
// fields are errors in both) or a bad config.
absl::StatusOr<v1::ModelConfig> LoadModelConfig(const std::string& path);

// Parses `text` (JSON when `json`) and normalizes it; `base_dir` resolves relative
// data.train_path / data.test_path (lexically normalized; empty `base_dir` leaves them
// as they are); `origin` names the source in messages. INVALID_ARGUMENT as above.
absl::StatusOr<v1::ModelConfig> ParseModelConfig(const std::string& text, bool json,
                                                 const std::string& base_dir,
                                                 const std::string& origin);

// Fills every default documented in model.proto and checks the config; idempotent
// (normalizing a normalized config returns it unchanged). Paths are not touched.
// INVALID_ARGUMENT "origin: field: problem" for the first problem found, e.g.
// "quickstart.pbtxt: data.columns[3] (user_id): column name 'user_id' appears twice".
//
// Checks: data.format known; column names non-empty, unique, without tab/line break
// (CRITEO_TSV: one of label, I1..I13, C1..C26); kinds/transforms/encodings known;
// transform only on DENSE, a non-HASH id_encoding only on CATEGORICAL / MULTI_HOT;
// feature transforms (model.proto ColumnConfig 7-15): clip/standardize/mean/std only on
// DENSE (finite, clip_min <= clip_max, mean and std together, std > 0), boundaries
// (finite, strictly increasing) / quantiles (2..65536) only on BUCKETIZED, which needs
// one of them, cross_of only on CROSS (two or more distinct CATEGORICAL / BUCKETIZED
// columns), no source on CROSS; statistics may be missing (column_statistics.h);
// exactly one LABEL and at most one WEIGHT column; partition_by "file" or a
// CATEGORICAL column; table names [a-zA-Z0-9_.-]{1,64}, unique, dim 1..4096; feature
// names unique, each feature's column CATEGORICAL / MULTI_HOT / BUCKETIZED / CROSS and
// its table present;
// MLP sizes 1..65536; DOT: every feature's table dim equals the last bottom_mlp size;
// cross_layers / cross_rank only with CROSS, cross_layers 1..8, cross_rank below the
// cross width;
// dense optimizer lr > 0, betas in (0, 1), epsilon > 0, initial_accumulator >= 0;
// SSP staleness >= 1; eval.*_column name EVAL columns; warm_min_count <= hot_min_count;
// skew: cold_features name distinct features over CATEGORICAL columns (and are given
// when cold_loss_weight != 1 or cold_resample_fraction > 0), cold_loss_weight in
// (0, 1000], cold_resample_fraction in [0, 1], the counts and sizes in their ranges
// (model.proto), hot_cache_steps only with SSP or ASP.
absl::StatusOr<v1::ModelConfig> NormalizeModelConfig(v1::ModelConfig config,
                                                     const std::string& origin);

// What a job's JoinJob and checkpoints carry (coordinator.proto): the config without
// its schedule (max_steps, checkpoint, logging and evaluation settings, the test set:
// what a resumed run may change) and without a skew section whose options are all off
// (so checkpoints of jobs without one fit), and a digest of it.
v1::ModelConfig DigestedConfig(const v1::ModelConfig& config);
uint64_t ConfigDigest(const v1::ModelConfig& config);

// Derived layout shared by reader and trainer.
// The DENSE / EVAL columns in data.columns order (their positions in ExampleBatch).
// The pointers point into `config` and live as long as it is unchanged.
std::vector<const v1::ColumnConfig*> DenseColumns(const v1::ModelConfig& config);
std::vector<const v1::ColumnConfig*> EvalColumns(const v1::ModelConfig& config);

}  // namespace ember::model

#endif  // EMBER_COMMON_MODEL_MODEL_CONFIG_H_
