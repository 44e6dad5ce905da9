// Copyright 2026 The Ember Authors.
//
// EpochProgress: where the reading of one epoch stands over every rank of a job, in a
// form that any world size can continue from with every line consumed exactly once
// (docs/ARCHITECTURE.md "Resuming at another worker count").
//
// A job's data position at a checkpoint is (progress, cursors): `progress` holds what
// the world sizes before the current one consumed of the epoch (empty while a job keeps
// its world size), and each rank's cursor (a ReaderPosition in its share) where it stands
// under the current world size W. Reshard folds the cursors into the progress when the
// world size changes:
//
//   partition_by "file": file i belongs to rank i % W, which reads it in order, so the
//     first line not consumed of every file says everything (file_next_line). Under W'
//     rank r' reads the files i with i % W' == r', each from that line; finished files
//     are skipped.
//   partition_by a column: every rank reads every file in order and keeps the lines
//     with Mix64(id) % W == rank, so rank r's cursor p_r means "the lines of residue r
//     before p_r were consumed". The cursors become a layer (W, p_0 .. p_{W-1}); under
//     W' rank r' keeps a line of residue r' only if no layer consumed it, reading from
//     the smallest frontier of the newest layer. A second change in the same epoch
//     stacks a second layer; the next epoch starts with none.
//
//   EMBER_ASSIGN_OR_RETURN(ResumePoint point,
//                          ResumePointFor(saved, shape, /*world_size=*/3, /*rank=*/1));
//   EMBER_RETURN_IF_ERROR(reader->Resume(point.progress, point.position));
//
// Thread-safety: plain values and functions.

#ifndef EMBER_WORKER_DATA_READER_POSITION_H_
#define EMBER_WORKER_DATA_READER_POSITION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ember/v1/checkpoint.pb.h"

namespace ember::worker {

// Where the reader is: the next line to read is line `line` (1-based, header counts)
// of file `file_index` of files() (this partition's list). {files().size(), 1} is the
// end of the partition.
struct ReaderPosition {
  int file_index = 0;
  uint64_t line = 0;
};

// A line of the dataset: line `line` (1-based, the header counts) of file `file` of the
// whole sorted file list. Ordered as the lines are read.
struct DataLine {
  int file = 0;
  uint64_t line = 0;
  friend bool operator<(const DataLine& a, const DataLine& b) {
    return a.file != b.file ? a.file < b.file : a.line < b.line;
  }
  friend bool operator==(const DataLine& a, const DataLine& b) = default;
};

// file_next_line of a finished file.
inline constexpr uint64_t kFileDone = ~uint64_t{0};

// The lines of one epoch that an earlier world size consumed (partition by a column):
// of residue r (Mix64(id) % world_size == r), those before frontier[r].
struct HashLayer {
  int world_size = 1;
  std::vector<DataLine> frontier;
};

// What the world sizes before the current one consumed of epoch `epoch`.
struct EpochProgress {
  int epoch = 0;
  // Partition by file: per file of the dataset, the first line not consumed
  // (kFileDone: finished). Empty: every file from its start.
  std::vector<uint64_t> file_next_line;
  // Partition by a column: the earlier world sizes' layers, oldest first.
  std::vector<HashLayer> layers;

  bool empty() const { return file_next_line.empty() && layers.empty(); }
};

// Whether a line of partition hash `hash` (Mix64 of its partition ID) at `line` was
// consumed by one of `layers`.
bool ConsumedByLayers(const std::vector<HashLayer>& layers, const DataLine& line, uint64_t hash);

// The first line a rank of a new world size may need: the smallest frontier of the
// newest layer ({0, 0} without layers).
DataLine LayersStart(const std::vector<HashLayer>& layers);

// One rank's cursor at a checkpoint: the epoch of its next batch and its position in
// its share of that epoch.
struct RankCursor {
  int epoch = 0;
  ReaderPosition position;
};

// How a job's data is cut.
struct DataShape {
  bool by_file = true;    // data.partition_by "file"; else a column
  int num_files = 0;      // files of the dataset
  bool first_out = true;  // training.epoch_end FIRST_OUT (an epoch ends when one rank is out)
  int epochs = 1;
};

// The progress of epoch `epoch` once world size `world_size` read to `cursors` (one per
// rank, rank order) from `base` (what it resumed from; ignored unless base.epoch ==
// epoch). A cursor of a later epoch means its rank finished `epoch`. Redundant layers
// (consumed lines another, later layer covers entirely) are dropped. INVALID_ARGUMENT for
// cursors that do not fit (count, an earlier epoch, a file past the data, a base of
// another shape).
absl::StatusOr<EpochProgress> Reshard(const EpochProgress& base, const DataShape& shape,
                                      int world_size, const std::vector<RankCursor>& cursors,
                                      int epoch);

// What a checkpoint holds of the data position.
struct SavedReading {
  int epoch = 0;  // the trainer's epoch at the cut (WorkerState.epoch)
  int world_size = 1;
  EpochProgress progress;
  std::vector<RankCursor> cursors;  // one per rank of world_size
};

// Where rank `rank` of `world_size` continues: `epoch` and, within it, `progress` and
// `position` for DatasetReader::Resume.
struct ResumePoint {
  int epoch = 0;
  EpochProgress progress;
  ReaderPosition position;
};

// The resume point of rank `rank` of `world_size` after `saved`. At the saved world size
// it is the rank's own cursor (with the saved progress when in its epoch): the same
// batches as without the checkpoint. At another one the cursors are Reshard-ed into the
// progress of the saved epoch, and every rank starts at its share's start; with
// shape.first_out an epoch some rank had finished was over: the next one starts fresh.
// Reshard's errors.
absl::StatusOr<ResumePoint> ResumePointFor(const SavedReading& saved, const DataShape& shape,
                                           int world_size, int rank);

// FAILED_PRECONDITION naming what changed (the count, missing and new names) when the
// dataset's files `now` (names within the data path) differ from `saved` (the
// checkpoint's); OK when equal.
absl::Status CheckSameFiles(const std::vector<std::string>& saved,
                            const std::vector<std::string>& now);

// Conversions to and from the checkpoint's messages (DataProgress and WorkerCursor).
void ToProto(const EpochProgress& progress, v1::DataProgress* out);
EpochProgress FromProto(const v1::DataProgress& proto);

}  // namespace ember::worker

#endif  // EMBER_WORKER_DATA_READER_POSITION_H_
