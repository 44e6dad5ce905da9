// Copyright 2026 The Ember Authors.
//
// DatasetReader: reads one worker's partition of a dataset (a file or a directory of
// files, plain or gzip) in Criteo TSV or schema TSV format and produces model::ExampleBatch
// batches laid out by the model config.
//
//   ReaderOptions options;
//   options.rank = 1;  options.world_size = 2;
//   absl::StatusOr<std::unique_ptr<DatasetReader>> reader =
//       DatasetReader::Open(config, config.data().train_path(), options);
//   model::ExampleBatch batch;
//   while (true) {
//     absl::StatusOr<bool> more = (*reader)->Next(1024, &batch);
//     if (!more.ok()) return more.status();   // IO error or too many malformed lines
//     if (!*more) break;                      // end of the partition
//     ...
//   }
//
// Value syntax per column kind: common/model/line_parser.h. Blank lines are skipped
// (they are not data lines). An empty file has no header and no data.
//
// Malformed lines (wrong column count, a bad number, a bad ID) are skipped and
// counted; the first few are reported (file:line: reason) through stats(). Next fails
// with INVALID_ARGUMENT when the malformed fraction of this partition's lines
// (stats().lines - skipped_other_partition) exceeds data.max_malformed_fraction
// (checked at every line once 1000 such lines were read, and at the end of the
// partition). With partition_by a column, a line whose partition cannot be told
// (wrong field count, bad partition ID) is counted as malformed by every worker.
//
// Partitioning (data.partition_by): "file": rank r reads the files i of the sorted
// list with i % world_size == r; a CATEGORICAL column: every rank reads every file
// and keeps the lines with Mix64(id) % world_size == rank (empty value: id 0).
//
// The reader's position (file index, line number within it) can be saved and
// restored (checkpoints resume the data where they stopped), also under another world
// size (Resume with the epoch's progress: worker/data/reader_position.h).
//
// Thread-safety: none; one reader per thread.

#ifndef EMBER_WORKER_DATA_READER_H_
#define EMBER_WORKER_DATA_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model/example_batch.h"
#include "ember/v1/model.pb.h"
#include "worker/data/reader_position.h"

namespace ember::worker {

struct ReaderOptions {
  int rank = 0;        // this worker's partition
  int world_size = 1;  // number of partitions
  // Read EVAL columns too (test data). Default: false (EVAL columns ignored).
  bool with_eval_columns = false;
  // How many malformed lines are kept in stats().first_errors. Default: 5.
  int max_reported_errors = 5;
};

struct ReaderStats {
  uint64_t lines = 0;     // data lines read (header excluded), malformed included
  uint64_t examples = 0;  // lines that became examples
  uint64_t malformed = 0;
  uint64_t skipped_other_partition = 0;   // partition_by a column: lines for other ranks
  std::vector<std::string> first_errors;  // "path:line: reason"
};

class DatasetReader {
 public:
  // Lists the files of `path` (a file, or every regular file in a directory sorted by
  // name, names starting with '.' skipped), picks this rank's partition and opens the
  // first file. `config` is normalized again (model::NormalizeModelConfig's errors). NOT_FOUND
  // for a missing path or an empty directory; INVALID_ARGUMENT for a bad rank /
  // world_size, when the first file's schema TSV header lacks a configured column
  // (EVAL columns only with with_eval_columns; IGNORE columns never needed), or when
  // partition_by is "file" and there are fewer files than workers (the message says
  // to split the data or partition by a column); DATA_LOSS or the IO error when
  // reading the first file's header fails.
  static absl::StatusOr<std::unique_ptr<DatasetReader>> Open(const v1::ModelConfig& config,
                                                             const std::string& path,
                                                             const ReaderOptions& options);
  virtual ~DatasetReader() = default;

  // Fills `batch` (Reset first, with the config's DENSE count, features count and
  // EVAL count, the last 0 without with_eval_columns) with up to `max_examples`
  // examples. Returns true if it holds at least one example, false at the end of the
  // partition (batch empty). Errors: INVALID_ARGUMENT (max_examples <= 0; too many
  // malformed lines, the message has the counts and the first errors; a later file's
  // header lacks a column), DATA_LOSS (corrupt or truncated gzip), the IO error
  // otherwise. An error is sticky: Next returns it again until Seek or Rewind.
  virtual absl::StatusOr<bool> Next(int max_examples, model::ExampleBatch* batch) = 0;

  // Starts the partition over from its first example (next epoch), without a progress
  // set by Resume. Stats keep counting.
  virtual absl::Status Rewind() = 0;

  virtual ReaderPosition position() const = 0;
  // Continues from a position() of a reader over the same data and options (re-reads
  // the file up to the line: gzip cannot seek). INVALID_ARGUMENT for a position past
  // the data; after an error the position is unspecified (Seek again or Rewind).
  virtual absl::Status Seek(const ReaderPosition& position) = 0;
  // Continues the epoch whose earlier world sizes consumed `progress`
  // (reader_position.h) at `position` of this rank's share: with partition by file,
  // each file of the share starts at its progress line (finished ones are skipped);
  // with partition by a column, the lines a layer consumed are skipped (counted in
  // stats().skipped_other_partition) and reading starts no earlier than the newest
  // layer's smallest frontier. `position` may be {} (the share's start). The progress
  // holds until Rewind. INVALID_ARGUMENT for a progress that does not fit the data (file
  // count, partitioning, a layer's frontier count) or Seek's errors.
  virtual absl::Status Resume(const EpochProgress& progress, const ReaderPosition& position) = 0;

  virtual const ReaderStats& stats() const = 0;
  // The files of this partition, in reading order.
  virtual const std::vector<std::string>& files() const = 0;
};

}  // namespace ember::worker

#endif  // EMBER_WORKER_DATA_READER_H_
