// Copyright 2026 The Ember Authors.

#include "worker/data/reader_position.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ember::worker {
namespace {

// At most this many names in an error message.
constexpr size_t kMaxNamesShown = 5;

std::string SomeNames(const std::vector<std::string>& names) {
  std::vector<std::string> shown(names.begin(),
                                 names.begin() + std::min(names.size(), kMaxNamesShown));
  std::string out = absl::StrJoin(shown, ", ");
  if (names.size() > kMaxNamesShown)
    absl::StrAppend(&out, " and ", names.size() - kMaxNamesShown, " more");
  return out;
}

DataLine MaxFrontier(const HashLayer& layer) {
  return *std::max_element(layer.frontier.begin(), layer.frontier.end());
}

DataLine MinFrontier(const HashLayer& layer) {
  return *std::min_element(layer.frontier.begin(), layer.frontier.end());
}

// Drops every layer whose consumed lines a later layer covers: a line before layer j's
// largest frontier is before every frontier of a layer k whose smallest is not smaller.
void PruneLayers(std::vector<HashLayer>* layers) {
  std::vector<HashLayer> kept;
  for (size_t j = 0; j < layers->size(); ++j) {
    const DataLine top = MaxFrontier((*layers)[j]);
    bool covered = false;
    for (size_t k = j + 1; k < layers->size() && !covered; ++k) {
      covered = !(MinFrontier((*layers)[k]) < top);
    }
    if (!covered) kept.push_back(std::move((*layers)[j]));
  }
  *layers = std::move(kept);
}

}  // namespace

bool ConsumedByLayers(const std::vector<HashLayer>& layers, const DataLine& line, uint64_t hash) {
  for (const HashLayer& layer : layers) {
    const uint64_t residue = hash % static_cast<uint64_t>(layer.world_size);
    if (line < layer.frontier[residue]) return true;
  }
  return false;
}

DataLine LayersStart(const std::vector<HashLayer>& layers) {
  return layers.empty() ? DataLine{} : MinFrontier(layers.back());
}

absl::StatusOr<EpochProgress> Reshard(const EpochProgress& base, const DataShape& shape,
                                      int world_size, const std::vector<RankCursor>& cursors,
                                      int epoch) {
  if (world_size < 1 || static_cast<int>(cursors.size()) != world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("data position: ", cursors.size(), " cursors for world size ", world_size));
  }
  for (size_t r = 0; r < cursors.size(); ++r) {
    if (cursors[r].epoch < epoch) {
      return absl::InvalidArgumentError(absl::StrCat("data position: rank ", r,
                                                     "'s cursor is in epoch ", cursors[r].epoch,
                                                     ", before the job's ", epoch));
    }
  }
  EpochProgress out;
  out.epoch = epoch;
  const bool base_applies = base.epoch == epoch;
  if (shape.by_file) {
    if (base_applies && !base.layers.empty()) {
      return absl::InvalidArgumentError("data position: hash layers for data partitioned by file");
    }
    if (base_applies && !base.file_next_line.empty() &&
        static_cast<int>(base.file_next_line.size()) != shape.num_files) {
      return absl::InvalidArgumentError(absl::StrCat("data position: ", base.file_next_line.size(),
                                                     " file positions for ", shape.num_files,
                                                     " files"));
    }
    out.file_next_line.resize(static_cast<size_t>(shape.num_files));
    for (int i = 0; i < shape.num_files; ++i) {
      const uint64_t start =
          base_applies && !base.file_next_line.empty() ? base.file_next_line[i] : 1;
      const RankCursor& c = cursors[static_cast<size_t>(i % world_size)];
      const int k = i / world_size;  // the file's index in its rank's share
      const int shared = (shape.num_files - i % world_size + world_size - 1) / world_size;
      if (c.epoch == epoch && (c.position.file_index < 0 || c.position.file_index > shared)) {
        return absl::InvalidArgumentError(absl::StrCat("data position: rank ", i % world_size,
                                                       "'s cursor is at file ",
                                                       c.position.file_index, " of its ", shared));
      }
      uint64_t next = start;
      if (c.epoch > epoch || k < c.position.file_index) {
        next = kFileDone;
      } else if (k == c.position.file_index && start != kFileDone) {
        next = std::max(start, c.position.line);
      }
      out.file_next_line[static_cast<size_t>(i)] = next;
    }
    return out;
  }
  if (base_applies && !base.file_next_line.empty()) {
    return absl::InvalidArgumentError(
        "data position: file positions for data partitioned by a column");
  }
  if (base_applies) out.layers = base.layers;
  const DataLine start = LayersStart(out.layers);
  const DataLine end{shape.num_files, 1};
  HashLayer layer;
  layer.world_size = world_size;
  for (size_t r = 0; r < cursors.size(); ++r) {
    const RankCursor& c = cursors[r];
    DataLine p{c.position.file_index, c.position.line};
    if (c.epoch > epoch) p = end;
    if (p.file < 0 || end < p) {
      return absl::InvalidArgumentError(absl::StrCat("data position: rank ", r, "'s cursor (file ",
                                                     p.file, ", line ", p.line, ") is past the ",
                                                     shape.num_files, " files"));
    }
    layer.frontier.push_back(std::max(p, start));
  }
  out.layers.push_back(std::move(layer));
  PruneLayers(&out.layers);
  return out;
}

absl::StatusOr<ResumePoint> ResumePointFor(const SavedReading& saved, const DataShape& shape,
                                           int world_size, int rank) {
  if (static_cast<int>(saved.cursors.size()) != saved.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("data position: ", saved.cursors.size(),
                                                   " cursors for ", saved.world_size, " workers"));
  }
  ResumePoint point;
  if (world_size == saved.world_size) {
    const RankCursor& c = saved.cursors[static_cast<size_t>(rank)];
    point.epoch = c.epoch;
    point.position = c.position;
    if (saved.progress.epoch == c.epoch) point.progress = saved.progress;
    point.progress.epoch = c.epoch;
    return point;
  }
  point.epoch = saved.epoch;
  point.progress.epoch = saved.epoch;
  if (saved.epoch >= shape.epochs) return point;  // nothing left to read
  const bool some_rank_out =
      std::any_of(saved.cursors.begin(), saved.cursors.end(),
                  [&](const RankCursor& c) { return c.epoch > saved.epoch; });
  if (shape.first_out && some_rank_out) {
    // The epoch ended at the next step for every rank: the next one starts fresh.
    point.epoch = saved.epoch + 1;
    point.progress.epoch = point.epoch;
    return point;
  }
  absl::StatusOr<EpochProgress> progress =
      Reshard(saved.progress, shape, saved.world_size, saved.cursors, saved.epoch);
  if (!progress.ok()) return progress.status();
  point.progress = *std::move(progress);
  return point;
}

absl::Status CheckSameFiles(const std::vector<std::string>& saved,
                            const std::vector<std::string>& now) {
  if (saved == now) return absl::OkStatus();
  const std::set<std::string> before(saved.begin(), saved.end());
  const std::set<std::string> after(now.begin(), now.end());
  std::vector<std::string> missing, added;
  std::set_difference(before.begin(), before.end(), after.begin(), after.end(),
                      std::back_inserter(missing));
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(),
                      std::back_inserter(added));
  std::string what = absl::StrCat("the training data changed since the checkpoint: it had ",
                                  saved.size(), " files, the data path has ", now.size());
  if (!missing.empty()) absl::StrAppend(&what, "; missing now: ", SomeNames(missing));
  if (!added.empty()) absl::StrAppend(&what, "; new: ", SomeNames(added));
  if (missing.empty() && added.empty()) absl::StrAppend(&what, "; in another order");
  absl::StrAppend(&what,
                  " (resume with the files the checkpoint read, or start a new run without "
                  "--resume_from)");
  return absl::FailedPreconditionError(what);
}

void ToProto(const EpochProgress& progress, v1::DataProgress* out) {
  out->set_epoch(static_cast<uint32_t>(progress.epoch));
  out->clear_file_next_line();
  for (uint64_t line : progress.file_next_line) out->add_file_next_line(line);
  out->clear_layers();
  for (const HashLayer& layer : progress.layers) {
    v1::HashLayer* l = out->add_layers();
    l->set_world_size(static_cast<uint32_t>(layer.world_size));
    for (const DataLine& p : layer.frontier) {
      v1::DataLine* d = l->add_frontier();
      d->set_file_index(p.file);
      d->set_line(p.line);
    }
  }
}

EpochProgress FromProto(const v1::DataProgress& proto) {
  EpochProgress progress;
  progress.epoch = static_cast<int>(proto.epoch());
  progress.file_next_line.assign(proto.file_next_line().begin(), proto.file_next_line().end());
  for (const v1::HashLayer& l : proto.layers()) {
    HashLayer layer;
    layer.world_size = static_cast<int>(l.world_size());
    for (const v1::DataLine& d : l.frontier()) layer.frontier.push_back({d.file_index(), d.line()});
    progress.layers.push_back(std::move(layer));
  }
  return progress;
}

}  // namespace ember::worker
