// Copyright 2026 The Ember Authors.
//
// Tests of worker/data/reader_position.h and DatasetReader::Resume: a dataset read by
// W ranks, resumed by W' ranks (and again by W'' in the same epoch) from the
// checkpoint's progress and cursors, yields every line exactly once, for data
// partitioned by file and by a column; a resume at the same world size is the rank's own
// cursor; a changed file list is named.

#include "worker/data/reader_position.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "worker/data/reader.h"

namespace ember::worker {
namespace {

using ::testing::HasSubstr;

constexpr int kBatch = 3;

// A schema-TSV config whose feature 0 is the line's unique ID and whose partition
// column (when not "file") is a user ID shared by several lines.
v1::ModelConfig Config(const std::string& partition_by) {
  v1::ModelConfig config;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        name: "positions"
        data {
          format: SCHEMA_TSV
          max_malformed_fraction: 0
          columns { name: "label" kind: LABEL }
          columns { name: "line_id" kind: CATEGORICAL id_encoding: DECIMAL }
          columns { name: "user" kind: CATEGORICAL id_encoding: DECIMAL }
        }
        tables { name: "t" dim: 16 }
        features { column: "line_id" table: "t" }
        features { column: "user" table: "t" }
      )pb",
      &config));
  config.mutable_data()->set_partition_by(partition_by);
  return config;
}

class ReaderPositionTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/reader_position_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    // Five files of uneven sizes: one empty, one with a single line, a blank line.
    const std::vector<int> sizes = {37, 0, 53, 1, 29};
    uint64_t id = 1;
    for (size_t f = 0; f < sizes.size(); ++f) {
      std::ofstream out(absl::StrCat(dir_, "/part-", f), std::ios::binary);
      if (sizes[f] > 0) out << "label\tline_id\tuser\n";
      for (int i = 0; i < sizes[f]; ++i, ++id) {
        out << (id % 2) << "\t" << id << "\t" << id % 11 << "\n";
        if (i == 5) out << "\n";
      }
    }
    lines_ = id - 1;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  bool by_file() const { return GetParam() == "file"; }
  DataShape Shape() const {
    DataShape shape;
    shape.by_file = by_file();
    shape.num_files = 5;
    shape.first_out = false;
    shape.epochs = 1;
    return shape;
  }

  std::unique_ptr<DatasetReader> Open(int rank, int world) {
    ReaderOptions options;
    options.rank = rank;
    options.world_size = world;
    absl::StatusOr<std::unique_ptr<DatasetReader>> reader =
        DatasetReader::Open(Config(GetParam()), dir_, options);
    EXPECT_TRUE(reader.ok()) << reader.status();
    return reader.ok() ? std::move(*reader) : nullptr;
  }

  // Reads up to `batches` batches (all when negative) with `reader`, appending the
  // examples' line IDs to ids_; returns the rank's cursor afterwards (epoch 1 when its
  // share of epoch 0 ran out).
  RankCursor Read(DatasetReader* reader, int batches) {
    model::ExampleBatch batch;
    for (int b = 0; batches < 0 || b < batches; ++b) {
      const ReaderPosition before = reader->position();
      absl::StatusOr<bool> more = reader->Next(kBatch, &batch);
      EXPECT_TRUE(more.ok()) << more.status();
      if (!more.ok() || !*more) return RankCursor{1, before};
      for (int i = 0; i < batch.size; ++i)
        ids_.push_back(batch.sparse[0].ids[batch.sparse[0].offsets[i]]);
    }
    return RankCursor{0, reader->position()};
  }

  // One world size's turn: every rank resumes from `saved` (nothing saved: the epoch's
  // start) and reads a random number of batches (to the end when `last`); returns the
  // reading a checkpoint would save.
  SavedReading Turn(const SavedReading* saved, int world, bool last, std::mt19937* rng) {
    SavedReading next;
    next.world_size = world;
    for (int r = 0; r < world; ++r) {
      std::unique_ptr<DatasetReader> reader = Open(r, world);
      if (reader == nullptr) return next;
      ResumePoint point;
      if (saved != nullptr) {
        absl::StatusOr<ResumePoint> p = ResumePointFor(*saved, Shape(), world, r);
        EXPECT_TRUE(p.ok()) << p.status();
        if (!p.ok()) return next;
        point = *p;
        // What the checkpoints of this turn save (Trainer::DataResumePoint).
        if (r == 0) next.progress = world == saved->world_size ? saved->progress : point.progress;
        if (point.epoch > 0) {  // nothing left of epoch 0
          next.cursors.push_back(RankCursor{point.epoch, {}});
          continue;
        }
      }
      const absl::Status resumed = reader->Resume(point.progress, point.position);
      EXPECT_TRUE(resumed.ok()) << resumed;
      const int batches = last ? -1 : std::uniform_int_distribution<int>(0, 12)(*rng);
      next.cursors.push_back(Read(reader.get(), batches));
    }
    // The checkpoint's round trip through the proto (every rank's progress is the same).
    v1::DataProgress proto;
    ToProto(next.progress, &proto);
    next.progress = FromProto(proto);
    return next;
  }

  // Every line was read exactly once.
  void ExpectExactlyOnce(const std::string& what) {
    std::map<uint64_t, int> seen;
    for (uint64_t id : ids_) ++seen[id];
    int duplicates = 0, missing = 0;
    for (uint64_t id = 1; id <= lines_; ++id) {
      if (seen[id] == 0) ++missing;
      if (seen[id] > 1) ++duplicates;
    }
    EXPECT_EQ(ids_.size(), lines_) << what;
    EXPECT_EQ(duplicates, 0) << what;
    EXPECT_EQ(missing, 0) << what;
    EXPECT_EQ(seen.size(), lines_) << what << ": IDs outside the data";
  }

  std::string dir_;
  uint64_t lines_ = 0;
  std::vector<uint64_t> ids_;
};

TEST_P(ReaderPositionTest, EveryResizeReadsEveryLineExactlyOnce) {
  std::mt19937 rng(7);
  for (int w1 = 1; w1 <= 5; ++w1) {
    for (int w2 = 1; w2 <= 5; ++w2) {
      for (int trial = 0; trial < 4; ++trial) {
        ids_.clear();
        const SavedReading first = Turn(nullptr, w1, false, &rng);
        Turn(&first, w2, true, &rng);
        ExpectExactlyOnce(absl::StrCat(w1, " -> ", w2, " trial ", trial));
      }
    }
  }
}

TEST_P(ReaderPositionTest, ASecondResizeInTheSameEpochStacks) {
  std::mt19937 rng(11);
  size_t most_layers = 0;
  for (int w1 = 1; w1 <= 5; ++w1) {
    for (int w2 = 1; w2 <= 5; ++w2) {
      for (int w3 = 1; w3 <= 5; ++w3) {
        for (int trial = 0; trial < 2; ++trial) {
          ids_.clear();
          const SavedReading first = Turn(nullptr, w1, false, &rng);
          const SavedReading second = Turn(&first, w2, false, &rng);
          // A third turn at the second's size continues its cursors (a recovery).
          const SavedReading again = Turn(&second, w2, false, &rng);
          const SavedReading third = Turn(&again, w3, false, &rng);
          most_layers = std::max(most_layers, third.progress.layers.size());
          Turn(&third, w2 == w3 ? 1 + w3 % 5 : w2, true, &rng);
          ExpectExactlyOnce(absl::StrCat(w1, " -> ", w2, " -> ", w3, " trial ", trial));
        }
      }
    }
  }
  if (!by_file()) {
    EXPECT_GE(most_layers, 2u) << "no stacked layers were exercised";
  }
}

TEST_P(ReaderPositionTest, TheSameWorldSizeResumesTheRanksOwnCursor) {
  std::mt19937 rng(3);
  const SavedReading saved = Turn(nullptr, 2, false, &rng);
  for (int r = 0; r < 2; ++r) {
    absl::StatusOr<ResumePoint> point = ResumePointFor(saved, Shape(), 2, r);
    ASSERT_TRUE(point.ok()) << point.status();
    EXPECT_EQ(point->epoch, saved.cursors[r].epoch);
    EXPECT_EQ(point->position.file_index, saved.cursors[r].position.file_index);
    EXPECT_EQ(point->position.line, saved.cursors[r].position.line);
    EXPECT_TRUE(point->progress.empty());
  }
}

TEST_P(ReaderPositionTest, FirstOutEndsAnEpochSomeRankFinished) {
  SavedReading saved;
  saved.world_size = 2;
  saved.cursors = {RankCursor{0, {0, 4}}, RankCursor{1, {}}};
  DataShape shape = Shape();
  shape.first_out = true;
  shape.epochs = 3;
  absl::StatusOr<ResumePoint> point = ResumePointFor(saved, shape, 3, 2);
  ASSERT_TRUE(point.ok()) << point.status();
  EXPECT_EQ(point->epoch, 1);
  EXPECT_TRUE(point->progress.empty());
  // LAST_OUT continues the epoch.
  shape.first_out = false;
  point = ResumePointFor(saved, shape, 3, 2);
  ASSERT_TRUE(point.ok()) << point.status();
  EXPECT_EQ(point->epoch, 0);
  EXPECT_FALSE(point->progress.empty());
}

TEST_P(ReaderPositionTest, ProgressThatDoesNotFitIsRefused) {
  SavedReading saved;
  saved.world_size = 2;
  saved.cursors = {RankCursor{0, {0, 4}}};
  EXPECT_EQ(ResumePointFor(saved, Shape(), 3, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  saved.cursors.push_back(RankCursor{0, {9, 1}});
  EXPECT_EQ(ResumePointFor(saved, Shape(), 3, 0).status().code(),
            absl::StatusCode::kInvalidArgument);

  std::unique_ptr<DatasetReader> reader = Open(0, 1);
  EpochProgress wrong;
  if (by_file()) {
    wrong.file_next_line = {1, 1};  // 2 of 5 files
  } else {
    wrong.layers.push_back(HashLayer{3, {{0, 1}, {0, 1}}});  // 2 frontiers for 3
  }
  const absl::Status s = reader->Resume(wrong, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("does not fit the data"));
  // The other partitioning's progress.
  EpochProgress other;
  if (by_file()) {
    other.layers.push_back(HashLayer{1, {{0, 1}}});
  } else {
    other.file_next_line.assign(5, 1);
  }
  EXPECT_EQ(reader->Resume(other, {}).code(), absl::StatusCode::kInvalidArgument);
  // The reader still reads from its start after the refusals.
  ids_.clear();
  ASSERT_TRUE(reader->Rewind().ok());
  Read(reader.get(), -1);
  ExpectExactlyOnce("after refused resumes");
}

INSTANTIATE_TEST_SUITE_P(ByFileAndByColumn, ReaderPositionTest, ::testing::Values("file", "user"));

TEST(CheckSameFilesTest, NamesWhatChanged) {
  EXPECT_TRUE(CheckSameFiles({"a", "b"}, {"a", "b"}).ok());
  absl::Status s = CheckSameFiles({"a", "b", "c"}, {"a", "c", "d", "e"});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("it had 3 files, the data path has 4"));
  EXPECT_THAT(s.message(), HasSubstr("missing now: b"));
  EXPECT_THAT(s.message(), HasSubstr("new: d, e"));
  s = CheckSameFiles({"a"}, {"b"});
  EXPECT_THAT(s.message(), HasSubstr("missing now: a; new: b"));
}

TEST(LayersTest, ALaterLayerThatCoversAnEarlierOneReplacesIt) {
  // Layer 1 (2 ranks) reached lines 10 and 20 of file 0; layer 2 (3 ranks) then got
  // every rank past line 20: layer 1 says nothing layer 2 does not.
  EpochProgress base;
  base.layers.push_back(HashLayer{2, {{0, 10}, {0, 20}}});
  DataShape shape;
  shape.by_file = false;
  shape.num_files = 2;
  absl::StatusOr<EpochProgress> p = Reshard(
      base, shape, 3, {RankCursor{0, {0, 25}}, RankCursor{0, {1, 1}}, RankCursor{1, {}}}, 0);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->layers.size(), 1u);
  EXPECT_EQ(p->layers[0].world_size, 3);
  EXPECT_EQ(p->layers[0].frontier[2], (DataLine{2, 1}));  // finished: the end of the data
  // A layer not covered stays.
  p = Reshard(base, shape, 3,
              {RankCursor{0, {0, 15}}, RankCursor{0, {0, 30}}, RankCursor{0, {0, 12}}}, 0);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->layers.size(), 2u);
  EXPECT_TRUE(ConsumedByLayers(p->layers, {0, 19}, /*hash=*/1));   // layer 1, residue 1
  EXPECT_FALSE(ConsumedByLayers(p->layers, {0, 19}, /*hash=*/6));  // residue 0 in both
  EXPECT_TRUE(ConsumedByLayers(p->layers, {0, 14}, /*hash=*/6));   // layer 2, residue 0
}

}  // namespace
}  // namespace ember::worker
