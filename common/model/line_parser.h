// Copyright 2026 The Ember Authors.
//
// LineParser: turns one tab-separated data line into one example of an ExampleBatch,
// following a normalized model config and the column names of the file (a schema TSV
// header, or the fixed Criteo layout). Also decides the line's partition when the
// data is partitioned by a column.
//
//   EMBER_ASSIGN_OR_RETURN(LineParser parser,
//                          LineParser::Create(config, options, header_names, path));
//   std::string error;
//   switch (parser.Parse(line, &error)) {
//     case LineParser::Result::kOk: parser.AppendTo(&batch); break;
//     case LineParser::Result::kOtherPartition: break;
//     case LineParser::Result::kMalformed: ...error...; break;
//   }
//
// Values (see proto/ember/v1/model.proto ColumnConfig):
//   LABEL, TASK_LABEL: "0"/"1" (any float spelling of 0 or 1, e.g. "1.0"); anything else
//     malformed. The TASK_LABEL columns go to ExampleBatch.task_labels in
//     DenseTowerConfig.tasks order.
//   WEIGHT: finite float >= 0; empty = 1.
//   DENSE: finite float (std::from_chars syntax: no '+', no spaces); empty =
//     missing_value; then the transform (LOG1P = sign(x) * log1p(|x|)), then clipping
//     to [clip_min, clip_max], then standardizing ((x - mean) / std, in float; a value
//     that overflows there is malformed).
//   CATEGORICAL: empty = no ID; else one ID. MULTI_HOT: items joined by the separator,
//     empty items skipped. An ID is HashBytes(item) (HASH), the decimal (DECIMAL) or
//     hexadecimal (HEX, no "0x") uint64 value of the whole item.
//   BUCKETIZED: a float as for DENSE; its ID is the number of boundaries <= it (0..n
//     for n boundaries); empty = ID n+1.
//   CROSS: no field of its own; HashBytes of its sources' IDs (8 bytes each, little
//     endian, in cross_of order); no ID when a source has none.
//   EVAL: finite float; empty = NaN.
// The ID goes into the batch as is: features sharing a table share IDs.
// The statistics of the transforms must be in the config (column_statistics.h):
// Create refuses a config that lacks them.
//
// Thread-safety: none (Parse reuses internal buffers).

#ifndef EMBER_COMMON_MODEL_LINE_PARSER_H_
#define EMBER_COMMON_MODEL_LINE_PARSER_H_

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/model/example_batch.h"
#include "ember/v1/model.pb.h"

namespace ember::model {

// Which lines a parser keeps, and which columns it reads.
struct LineParserOptions {
  int rank = 0;        // this worker's partition (data.partition_by a column)
  int world_size = 1;  // number of partitions
  // Read EVAL columns too (test data). Default: false (EVAL columns ignored).
  bool with_eval_columns = false;
  // Rows to score (serving's Predict): the LABEL, TASK_LABEL and WEIGHT columns are not
  // read and need not be in file_columns; every example's label is 0 and its weight 1.
  bool score_only = false;
};

// The column names of the fixed Criteo layout: label, I1..I13, C1..C26.
const std::vector<std::string>& CriteoColumnNames();

// Splits `line` on tabs into `fields` (cleared first).
void SplitTabs(absl::string_view line, std::vector<absl::string_view>* fields);

class LineParser {
 public:
  enum class Result { kOk, kMalformed, kOtherPartition };

  // Maps `config`'s columns (normalized) onto a file whose columns are `file_columns`
  // in order. Columns of kind EVAL are used only with options.with_eval_columns;
  // IGNORE and CROSS columns need not be present. INVALID_ARGUMENT naming `path` when a
  // used column is missing from `file_columns` or appears in it twice, or when the
  // config lacks statistics (CheckStatistics).
  static absl::StatusOr<LineParser> Create(const v1::ModelConfig& config,
                                           const LineParserOptions& options,
                                           const std::vector<absl::string_view>& file_columns,
                                           absl::string_view path);

  // Parses `line` (no line break). kOk: the example is held until the next Parse and
  // can be appended with AppendTo. kOtherPartition: the line belongs to another rank
  // (partition by column; only the partition column was parsed). kMalformed: `*error`
  // says why (e.g. "column 'price': bad number 'x'").
  Result Parse(absl::string_view line, std::string* error);

  // Appends the example of the last kOk Parse to `batch`, which must have been Reset
  // with this parser's num_dense(), num_features(), num_eval().
  void AppendTo(ExampleBatch* batch) const;

  // Mix64 of the partition ID of the last line Parse returned kOk or kOtherPartition for
  // (data.partition_by a column; 0 otherwise): the reader's resume layers test it.
  uint64_t partition_hash() const { return partition_hash_; }

  int num_dense() const { return static_cast<int>(dense_.size()); }
  int num_features() const { return static_cast<int>(feature_column_.size()); }
  int num_eval() const { return static_cast<int>(eval_.size()); }

 private:
  struct FloatColumn {
    int field = -1;
    std::string name;
    bool log1p = false;
    float missing_value = 0;
    float clip_min = -std::numeric_limits<float>::infinity();
    float clip_max = std::numeric_limits<float>::infinity();
    bool standardize = false;
    float mean = 0;
    float std = 1;
  };
  struct IdColumn {
    int field = -1;  // -1: a CROSS column (no field)
    std::string name;
    v1::ColumnConfig::IdEncoding encoding = v1::ColumnConfig::HASH;
    bool multi_hot = false;
    std::string separator;
    bool bucketized = false;
    std::vector<float> boundaries;      // BUCKETIZED
    std::vector<std::string> cross_of;  // CROSS: the sources' names
    std::vector<int> cross_sources;     // CROSS: the sources' id_columns_ indices
  };

  // The header's columns: name -> field, and how often each name appears.
  struct HeaderIndex {
    absl::string_view path;  // for errors
    std::map<absl::string_view, int> index;
    std::map<absl::string_view, int> count;
    // The field of column `name`; INVALID_ARGUMENT if it is missing or repeated.
    absl::StatusOr<int> FieldOf(const std::string& name) const;
  };

  struct LabelColumn {
    int field = -1;
    std::string name;
  };

  LineParser() = default;
  // Create's phases. MapColumns: the field of each used column of data.columns
  // (label, weight, dense and eval here; the sparse ones into *sparse, by name).
  absl::Status MapColumns(const v1::ModelConfig& config, const LineParserOptions& options,
                          const HeaderIndex& header, std::map<std::string, IdColumn>* sparse);
  // The sparse columns the features read (id_columns_: the sources of the CROSS ones
  // too, with every CROSS column after its sources) and the one each feature reads
  // (feature_column_).
  absl::Status MapFeatures(const v1::ModelConfig& config,
                           const std::map<std::string, IdColumn>& sparse, absl::string_view path);
  bool ParseIds(const IdColumn& c, absl::string_view value, std::string* error);
  // The ID of a BUCKETIZED column's value; false (with *error) for a bad number.
  bool ParseBucket(const IdColumn& c, absl::string_view value, std::string* error);
  // The ID of a CROSS column from its sources' IDs of this line (parsed before it).
  void CrossIds(const IdColumn& c);

  size_t num_fields_ = 0;
  int label_field_ = -1;
  int weight_field_ = -1;
  std::string label_name_;
  std::string weight_name_;
  std::vector<FloatColumn> dense_;
  std::vector<FloatColumn> eval_;
  std::vector<LabelColumn> task_labels_;  // TASK_LABEL, in DenseTowerConfig.tasks order
  std::vector<IdColumn> id_columns_;      // the sparse columns some feature uses
  std::vector<int> feature_column_;       // features[f] reads id_columns_[feature_column_[f]]
  IdColumn partition_;                    // field -1: partition by file
  int rank_ = 0;
  int world_size_ = 1;
  uint64_t partition_hash_ = 0;

  // Scratch of the last parsed line.
  std::vector<absl::string_view> fields_;
  float label_ = 0;
  float weight_ = 1;
  std::vector<float> dense_values_;
  std::vector<float> eval_values_;
  std::vector<float> task_label_values_;
  std::vector<uint64_t> ids_;
  std::vector<uint32_t> id_ends_;  // id_columns_[i] holds ids_[id_ends_[i-1] .. id_ends_[i])
  std::string cross_bytes_;        // CrossIds' scratch
};

}  // namespace ember::model

#endif  // EMBER_COMMON_MODEL_LINE_PARSER_H_
