// Copyright 2026 The Ember Authors.
//
// Tests of worker/data/ (reader, line parser, file source): Criteo and schema TSV
// lines, gzip, directories, partitioning, malformed-line accounting, Seek/Rewind, and
// a parse-speed measurement. Inputs are written to a temporary directory.

#include "worker/data/reader.h"

#include <stdlib.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/hash.h"
#include "common/model/model_config.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace ember::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const char* const kTrainHeader[] = {"label",        "user_id",      "item_id",  "category_id",
                                    "shop_id",      "user_segment", "hour",     "device",
                                    "recent_items", "price",        "user_age", "session_depth"};
const char* const kEvalHeader[] = {"true_prob", "item_train_count", "cold_user"};

// One example, flattened out of a batch.
struct Row {
  float label = 0;
  float weight = 0;
  std::vector<float> dense;
  std::vector<std::vector<uint64_t>> sparse;
  std::vector<float> eval;
  auto operator<=>(const Row&) const = default;
};

std::vector<Row> Rows(const model::ExampleBatch& b) {
  std::vector<Row> rows(b.size);
  for (int i = 0; i < b.size; ++i) {
    Row& r = rows[i];
    r.label = b.labels[i];
    r.weight = b.weights[i];
    r.dense.assign(b.dense.begin() + i * b.num_dense, b.dense.begin() + (i + 1) * b.num_dense);
    for (const model::SparseColumn& s : b.sparse) {
      r.sparse.emplace_back(s.ids.begin() + s.offsets[i], s.ids.begin() + s.offsets[i + 1]);
    }
    for (const std::vector<float>& e : b.eval) r.eval.push_back(e[i]);
  }
  return rows;
}

// Reads the rest of the partition in batches of `batch_size`.
absl::StatusOr<std::vector<std::vector<Row>>> ReadBatches(DatasetReader* reader, int batch_size) {
  std::vector<std::vector<Row>> batches;
  model::ExampleBatch batch;
  while (true) {
    absl::StatusOr<bool> more = reader->Next(batch_size, &batch);
    if (!more.ok()) return more.status();
    if (!*more) {
      EXPECT_EQ(batch.size, 0);
      return batches;
    }
    EXPECT_LE(batch.size, batch_size);
    batches.push_back(Rows(batch));
  }
}

std::vector<Row> ReadAll(DatasetReader* reader, int batch_size = 64) {
  absl::StatusOr<std::vector<std::vector<Row>>> batches = ReadBatches(reader, batch_size);
  EXPECT_TRUE(batches.ok()) << batches.status();
  std::vector<Row> rows;
  if (!batches.ok()) return rows;
  for (const auto& b : *batches) rows.insert(rows.end(), b.begin(), b.end());
  return rows;
}

// Opens `path` and reads it to the end; returns the first error.
absl::Status ReadToEnd(const v1::ModelConfig& config, const std::string& path) {
  absl::StatusOr<std::unique_ptr<DatasetReader>> reader = DatasetReader::Open(config, path, {});
  if (!reader.ok()) return reader.status();
  return ReadBatches(reader->get(), 100).status();
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
  ASSERT_TRUE(out.good()) << path;
}

void WriteGzip(const std::string& path, const std::string& content) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, content.data(), content.size()), static_cast<int>(content.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

v1::ModelConfig Quickstart() {
  absl::StatusOr<v1::ModelConfig> config =
      model::LoadModelConfig(std::string(EMBER_SOURCE_DIR) + "/configs/quickstart.pbtxt");
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

// A deterministic synthetic line in the quickstart schema (train columns, then the
// eval columns when `eval`), in header order.
std::string QuickLine(uint64_t i, bool eval) {
  const uint64_t h = Mix64(i + 1);
  const uint64_t item = (h >> 20) % 500000;
  std::vector<std::string> recent;
  for (uint64_t k = 0; k < (h >> 40) % 5; ++k) recent.push_back(absl::StrCat(item + k * 7 + 1));
  std::string line = absl::StrCat(h & 1, "\t", h % 100000, "\t", item, "\t", item % 1000, "\t",
                                  item % 5000, "\t", 1000000 + (h >> 8) % 8, "\t",
                                  2000000 + (h >> 11) % 24, "\t", 3000000 + (h >> 16) % 3, "\t",
                                  absl::StrJoin(recent, "|"), "\t", (h >> 12) % 100000 / 100, ".",
                                  (h >> 12) % 100, "\t", 18 + h % 50, "\t", (h >> 30) % 20);
  if (eval) absl::StrAppend(&line, "\t0.", (h >> 5) % 1000, "\t", (h >> 7) % 5000, "\t", h % 2);
  return line;
}

std::string QuickFile(uint64_t first, uint64_t count, bool eval = false) {
  std::vector<std::string> header(std::begin(kTrainHeader), std::end(kTrainHeader));
  if (eval) header.insert(header.end(), std::begin(kEvalHeader), std::end(kEvalHeader));
  std::string out = absl::StrJoin(header, "\t") + "\n";
  for (uint64_t i = first; i < first + count; ++i) absl::StrAppend(&out, QuickLine(i, eval), "\n");
  return out;
}

class ReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/reader_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::string Dir(const std::string& name) const {
    std::filesystem::create_directories(Path(name));
    return Path(name);
  }

  std::unique_ptr<DatasetReader> OpenOk(const v1::ModelConfig& config, const std::string& path,
                                        const ReaderOptions& options = {}) {
    absl::StatusOr<std::unique_ptr<DatasetReader>> reader =
        DatasetReader::Open(config, path, options);
    EXPECT_TRUE(reader.ok()) << reader.status();
    return reader.ok() ? std::move(*reader) : nullptr;
  }

  std::string dir_;
};

v1::ModelConfig CriteoConfig() {
  v1::ModelConfig config;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        data { format: CRITEO_TSV max_malformed_fraction: -1 }
        tables { name: "t" dim: 16 }
        features { column: "C1" table: "t" }
        features { column: "C2" table: "t" }
      )pb",
      &config));
  return config;
}

std::string CriteoLine(const std::string& label, const std::vector<std::string>& ints,
                       const std::vector<std::string>& cats) {
  std::vector<std::string> fields{label};
  for (int i = 0; i < 13; ++i) fields.push_back(i < static_cast<int>(ints.size()) ? ints[i] : "");
  for (int i = 0; i < 26; ++i) fields.push_back(i < static_cast<int>(cats.size()) ? cats[i] : "");
  return absl::StrJoin(fields, "\t");
}

TEST_F(ReaderTest, CriteoLines) {
  std::vector<std::string> ints{"5", "-1", ""};
  for (int i = 3; i < 13; ++i) ints.push_back("0");
  std::vector<std::string> cats{"68fd1e64", ""};
  for (int i = 2; i < 26; ++i) cats.push_back("a1b2c3d4");
  std::string bad_count = CriteoLine("1", {}, {});
  bad_count.pop_back();  // 40 -> 39 fields
  const std::string content = CriteoLine("1", ints, cats) + "\n" + CriteoLine("0", {}, {}) + "\n" +
                              bad_count + "\n" + CriteoLine("0", {}, {"zz"}) + "\r\n" +
                              CriteoLine("1", {"1.0"}, {"FFFFFFFF"});  // no final newline
  WriteFile(Path("day_0"), content);

  std::unique_ptr<DatasetReader> reader = OpenOk(CriteoConfig(), Path("day_0"));
  std::vector<Row> rows = ReadAll(reader.get());
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].label, 1);
  EXPECT_EQ(rows[0].weight, 1);
  ASSERT_EQ(rows[0].dense.size(), 13u);
  EXPECT_FLOAT_EQ(rows[0].dense[0], std::log1p(5.0f));
  EXPECT_FLOAT_EQ(rows[0].dense[1], -std::log1p(1.0f));
  EXPECT_EQ(rows[0].dense[2], 0);  // missing
  EXPECT_THAT(rows[0].sparse, ElementsAre(ElementsAre(0x68fd1e64u), ElementsAre()));
  EXPECT_EQ(rows[1].label, 0);
  EXPECT_THAT(rows[1].dense, ::testing::Each(0.0f));
  EXPECT_THAT(rows[1].sparse, ElementsAre(ElementsAre(), ElementsAre()));
  EXPECT_FLOAT_EQ(rows[2].dense[0], std::log1p(1.0f));
  EXPECT_THAT(rows[2].sparse[0], ElementsAre(0xFFFFFFFFu));

  const ReaderStats& stats = reader->stats();
  EXPECT_EQ(stats.lines, 5u);
  EXPECT_EQ(stats.examples, 3u);
  EXPECT_EQ(stats.malformed, 2u);
  EXPECT_THAT(stats.first_errors, ElementsAre(Path("day_0") + ":3: expected 40 fields, got 39",
                                              Path("day_0") + ":4: column 'C1': bad ID 'zz'"));
}

TEST_F(ReaderTest, SchemaHeaderInAnyOrderWithMultiHot) {
  // Reversed header order plus an unlisted column.
  WriteFile(Path("part-0.tsv"),
            "session_depth\tuser_age\tprice\trecent_items\tjunk\tdevice\thour\tuser_segment\t"
            "shop_id\tcategory_id\titem_id\tuser_id\tlabel\n"
            "3\t40\t9.5\t7|8|9\txyz\t3000001\t2000005\t1000002\t44\t33\t7\t12\t1\n"
            "0\t\t-2\t\t\t3000000\t2000000\t1000000\t\t\t8\t13\t0.0\n");
  std::unique_ptr<DatasetReader> reader = OpenOk(Quickstart(), Path("part-0.tsv"));
  model::ExampleBatch batch;
  ASSERT_TRUE(*reader->Next(10, &batch));
  EXPECT_EQ(batch.num_dense, 3);
  EXPECT_EQ(batch.sparse.size(), 8u);
  EXPECT_TRUE(batch.eval.empty());
  std::vector<Row> rows = Rows(batch);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].label, 1);
  EXPECT_THAT(rows[0].dense, ElementsAre(std::log1p(9.5f), 40.0f, std::log1p(3.0f)));
  // user, item, category, shop, segment, hour, device, recent_items: IDs as is, so
  // item 7 in item_id and recent_items is the same row of the shared item table.
  EXPECT_THAT(rows[0].sparse,
              ElementsAre(ElementsAre(12u), ElementsAre(7u), ElementsAre(33u), ElementsAre(44u),
                          ElementsAre(1000002u), ElementsAre(2000005u), ElementsAre(3000001u),
                          ElementsAre(7u, 8u, 9u)));
  EXPECT_EQ(rows[1].label, 0);
  EXPECT_THAT(rows[1].dense, ElementsAre(-std::log1p(2.0f), 0.0f, 0.0f));
  EXPECT_THAT(rows[1].sparse[2], ElementsAre());  // empty category: no ID
  EXPECT_THAT(rows[1].sparse[7], ElementsAre());  // empty multi-hot: no IDs
  EXPECT_THAT(batch.sparse[7].offsets, ElementsAre(0u, 3u, 3u));
  EXPECT_FALSE(*reader->Next(10, &batch));
  EXPECT_EQ(reader->stats().malformed, 0u);
}

TEST_F(ReaderTest, EvalColumnsOnlyWhenAsked) {
  WriteFile(Path("test.tsv"), QuickFile(0, 3, /*eval=*/true) + QuickLine(3, false) +
                                  "\t\t\t\n");  // empty eval values
  ReaderOptions options;
  options.with_eval_columns = true;
  std::unique_ptr<DatasetReader> reader = OpenOk(Quickstart(), Path("test.tsv"), options);
  model::ExampleBatch batch;
  ASSERT_TRUE(*reader->Next(10, &batch));
  ASSERT_EQ(batch.size, 4);
  ASSERT_EQ(batch.eval.size(), 3u);
  const uint64_t h = Mix64(1);
  EXPECT_FLOAT_EQ(batch.eval[0][0], std::stof(absl::StrCat("0.", (h >> 5) % 1000)));
  EXPECT_EQ(batch.eval[1][0], static_cast<float>((h >> 7) % 5000));
  EXPECT_EQ(batch.eval[2][0], static_cast<float>(h % 2));
  EXPECT_TRUE(std::isnan(batch.eval[0][3]));

  // The same test file read as training data ignores the eval columns.
  reader = OpenOk(Quickstart(), Path("test.tsv"));
  ASSERT_TRUE(*reader->Next(10, &batch));
  EXPECT_EQ(batch.size, 4);
  EXPECT_TRUE(batch.eval.empty());

  // A training file lacks them: asking for them fails at Open, naming file and column.
  WriteFile(Path("train.tsv"), QuickFile(0, 3));
  absl::StatusOr<std::unique_ptr<DatasetReader>> r =
      DatasetReader::Open(Quickstart(), Path("train.tsv"), options);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr(Path("train.tsv")));
  EXPECT_THAT(r.status().message(), HasSubstr("'true_prob'"));
}

TEST_F(ReaderTest, HeaderErrorInALaterFile) {
  const std::string dir = Dir("data");
  WriteFile(dir + "/a.tsv", QuickFile(0, 5));
  std::string b = QuickFile(5, 5);
  b.replace(b.find("price"), 5, "prize");
  WriteFile(dir + "/b.tsv", b);
  std::unique_ptr<DatasetReader> reader = OpenOk(Quickstart(), dir);
  model::ExampleBatch batch;
  ASSERT_TRUE(*reader->Next(5, &batch));
  absl::StatusOr<bool> more = reader->Next(5, &batch);
  ASSERT_EQ(more.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(more.status().message(), HasSubstr(dir + "/b.tsv"));
  EXPECT_THAT(more.status().message(), HasSubstr("'price'"));
  EXPECT_EQ(reader->Next(5, &batch).status(), more.status());  // sticky

  // A column twice in a header is ambiguous.
  std::string twice = QuickFile(0, 0);
  twice.insert(twice.size() - 1, "\tdevice");
  WriteFile(Path("twice.tsv"), twice);
  absl::StatusOr<std::unique_ptr<DatasetReader>> r =
      DatasetReader::Open(Quickstart(), Path("twice.tsv"), {});
  EXPECT_THAT(r.status().message(), HasSubstr("column 'device' appears 2 times"));
}

TEST_F(ReaderTest, HashEncodingAndWeights) {
  v1::ModelConfig config;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        data {
          columns { name: "y" kind: LABEL }
          columns { name: "w" kind: WEIGHT }
          columns { name: "q" kind: MULTI_HOT separator: "::" }
          columns { name: "u" kind: CATEGORICAL }
          max_malformed_fraction: -1
        }
        tables { name: "t" dim: 16 }
        features { column: "u" table: "t" }
        features { column: "q" table: "t" }
        features { name: "u_again" column: "u" table: "t" }
      )pb",
      &config));
  WriteFile(Path("d.tsv"),
            "u\tq\tw\ty\n"
            "alice\tred::blue::\t2.5\t1\n"
            "\t::x\t\t0\n"
            "bob\t\t-1\t0\n");  // negative weight: malformed
  std::unique_ptr<DatasetReader> reader = OpenOk(config, Path("d.tsv"));
  std::vector<Row> rows = ReadAll(reader.get());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].weight, 2.5f);
  EXPECT_THAT(rows[0].sparse, ElementsAre(ElementsAre(HashBytes("alice")),
                                          ElementsAre(HashBytes("red"), HashBytes("blue")),
                                          ElementsAre(HashBytes("alice"))));
  EXPECT_EQ(rows[1].weight, 1.0f);
  EXPECT_THAT(rows[1].sparse,
              ElementsAre(ElementsAre(), ElementsAre(HashBytes("x")), ElementsAre()));
  EXPECT_EQ(reader->stats().malformed, 1u);
  EXPECT_THAT(reader->stats().first_errors[0], HasSubstr(":4: column 'w': weight must be"));
}

TEST(HashBytesTest, IsStable) {
  // Part of the persistent format: these values must never change (they were
  // cross-checked against an independent Python implementation of the definition).
  EXPECT_EQ(HashBytes(""), 0x48218226ff3cd4bfULL);
  EXPECT_EQ(HashBytes("a"), 0xda392e041ecc1abeULL);
  EXPECT_EQ(HashBytes("alice"), 0x29de0c761503ea8eULL);
  EXPECT_EQ(HashBytes("0123456789abcdef!"), 0x4377e759e8b30b8cULL);
  EXPECT_NE(HashBytes(absl::string_view("a\0", 2)), HashBytes("a"));
  EXPECT_NE(HashBytes("ab"), HashBytes("ba"));
}

TEST_F(ReaderTest, GzipEqualsPlain) {
  const std::string content = QuickFile(0, 3000);
  WriteFile(Path("plain.tsv"), content);
  WriteGzip(Path("packed.tsv.gz"), content);
  std::unique_ptr<DatasetReader> plain = OpenOk(Quickstart(), Path("plain.tsv"));
  std::unique_ptr<DatasetReader> packed = OpenOk(Quickstart(), Path("packed.tsv.gz"));
  std::vector<Row> a = ReadAll(plain.get(), 100);
  EXPECT_EQ(a.size(), 3000u);
  EXPECT_EQ(a, ReadAll(packed.get(), 100));

  // Truncated gzip: DATA_LOSS, not a silent end.
  const std::string bytes = ReadBytes(Path("packed.tsv.gz"));
  // (Open reads the header and may already see the damage.)
  WriteFile(Path("cut.tsv.gz"), bytes.substr(0, bytes.size() / 2));
  absl::Status status = ReadToEnd(Quickstart(), Path("cut.tsv.gz"));
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;

  // Corrupt bytes in the middle.
  std::string corrupt = bytes;
  for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 64; ++i) corrupt[i] ^= 0x5a;
  WriteFile(Path("bad.tsv.gz"), corrupt);
  status = ReadToEnd(Quickstart(), Path("bad.tsv.gz"));
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
}

TEST_F(ReaderTest, DirectoryFilesSortedByName) {
  const std::string dir = Dir("data");
  WriteFile(dir + "/b.tsv", QuickFile(10, 10));
  WriteFile(dir + "/a.tsv", QuickFile(0, 10));
  WriteGzip(dir + "/c.tsv.gz", QuickFile(20, 10));
  WriteFile(dir + "/.hidden", "garbage\n");
  WriteFile(dir + "/empty", "");
  std::filesystem::create_directories(dir + "/sub");
  WriteFile(dir + "/sub/x.tsv", "garbage\n");

  std::unique_ptr<DatasetReader> reader = OpenOk(Quickstart(), dir);
  EXPECT_THAT(reader->files(),
              ElementsAre(dir + "/a.tsv", dir + "/b.tsv", dir + "/c.tsv.gz", dir + "/empty"));
  WriteFile(Path("one.tsv"), QuickFile(0, 30));
  std::unique_ptr<DatasetReader> single = OpenOk(Quickstart(), Path("one.tsv"));
  EXPECT_EQ(ReadAll(reader.get()), ReadAll(single.get()));

  EXPECT_EQ(DatasetReader::Open(Quickstart(), Path("missing"), {}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(DatasetReader::Open(Quickstart(), Dir("nothing"), {}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ReaderTest, PartitionByFile) {
  const std::string dir = Dir("data");
  for (int f = 0; f < 5; ++f) WriteFile(absl::StrCat(dir, "/part-", f), QuickFile(f * 10, 10));
  std::unique_ptr<DatasetReader> all = OpenOk(Quickstart(), dir);
  std::vector<Row> expected = ReadAll(all.get());
  ASSERT_EQ(expected.size(), 50u);

  std::vector<Row> got;
  for (int rank = 0; rank < 2; ++rank) {
    ReaderOptions options;
    options.rank = rank;
    options.world_size = 2;
    std::unique_ptr<DatasetReader> reader = OpenOk(Quickstart(), dir, options);
    std::vector<std::string> names;
    for (const std::string& f : reader->files()) names.push_back(f.substr(dir.size() + 1));
    if (rank == 0) {
      EXPECT_THAT(names, ElementsAre("part-0", "part-2", "part-4"));
    } else {
      EXPECT_THAT(names, ElementsAre("part-1", "part-3"));
    }
    std::vector<Row> rows = ReadAll(reader.get());
    got.insert(got.end(), rows.begin(), rows.end());
  }
  std::sort(expected.begin(), expected.end());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, expected);

  ReaderOptions options;
  options.world_size = 6;
  absl::StatusOr<std::unique_ptr<DatasetReader>> r =
      DatasetReader::Open(Quickstart(), dir, options);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("5 data files for 6 workers"));
  EXPECT_THAT(r.status().message(), HasSubstr("partition_by"));

  options.world_size = 2;
  options.rank = 2;
  EXPECT_EQ(DatasetReader::Open(Quickstart(), dir, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ReaderTest, PartitionByColumn) {
  const std::string dir = Dir("data");
  WriteFile(dir + "/a", QuickFile(0, 500));
  WriteFile(dir + "/b", QuickFile(500, 500));
  v1::ModelConfig config = Quickstart();
  config.mutable_data()->set_partition_by("user_id");
  std::unique_ptr<DatasetReader> all = OpenOk(config, dir);
  std::vector<Row> expected = ReadAll(all.get());
  ASSERT_EQ(expected.size(), 1000u);

  constexpr int kWorld = 3;
  std::vector<Row> got;
  std::map<uint64_t, int> rank_of_user;
  for (int rank = 0; rank < kWorld; ++rank) {
    ReaderOptions options;
    options.rank = rank;
    options.world_size = kWorld;
    std::unique_ptr<DatasetReader> reader = OpenOk(config, dir, options);
    EXPECT_EQ(reader->files().size(), 2u);  // every rank reads every file
    std::vector<Row> rows = ReadAll(reader.get());
    EXPECT_GT(rows.size(), 200u);
    for (const Row& r : rows) {
      const uint64_t user = r.sparse[0][0];
      EXPECT_EQ(Mix64(user) % kWorld, static_cast<uint64_t>(rank));
      auto [it, added] = rank_of_user.emplace(user, rank);
      EXPECT_EQ(it->second, rank);  // all of a user's examples meet one worker
    }
    EXPECT_EQ(reader->stats().lines, 1000u);
    EXPECT_EQ(reader->stats().skipped_other_partition, 1000u - rows.size());
    got.insert(got.end(), rows.begin(), rows.end());
  }
  std::sort(expected.begin(), expected.end());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, expected);  // disjoint, and the union is everything
}

TEST_F(ReaderTest, MalformedLinesAreCountedAndReported) {
  v1::ModelConfig config = Quickstart();
  config.mutable_data()->set_max_malformed_fraction(-1);  // never fail
  const std::string good = QuickLine(1, false);
  auto with = [&](int column, const std::string& value) {
    std::vector<std::string> f = absl::StrSplit(good, '\t');
    f[column] = value;
    return absl::StrJoin(f, "\t");
  };
  const std::vector<std::string> bad = {
      with(0, "2"),
      with(0, "0.5"),
      with(0, ""),
      with(1, "12x"),
      with(1, "-1"),
      with(2, "0x12"),
      with(8, "1|x|2"),
      with(9, "nan"),
      with(9, "inf"),
      with(10, "1e99"),
      with(11, "abc"),
      good + "\textra",
      good.substr(0, good.rfind('\t')),
  };
  const std::vector<std::string> fine = {with(0, "1.0"), with(9, "-3.5"), with(9, ""),
                                         with(8, "5||6|"), with(1, "")};
  std::string content = QuickFile(0, 0);
  for (const std::string& l : bad) content += l + "\n";
  content += "\n";  // blank lines are not data
  for (const std::string& l : fine) content += l + "\n";
  WriteFile(Path("m.tsv"), content);

  ReaderOptions options;
  options.max_reported_errors = 3;
  std::unique_ptr<DatasetReader> reader = OpenOk(config, Path("m.tsv"), options);
  std::vector<Row> rows = ReadAll(reader.get());
  EXPECT_EQ(rows.size(), fine.size());
  EXPECT_THAT(rows[3].sparse[7], ElementsAre(5u, 6u));
  const ReaderStats& stats = reader->stats();
  EXPECT_EQ(stats.malformed, bad.size());
  EXPECT_EQ(stats.lines, bad.size() + fine.size());
  EXPECT_EQ(stats.examples, fine.size());
  EXPECT_THAT(stats.first_errors,
              ElementsAre(Path("m.tsv") + ":2: column 'label': label must be 0 or 1, got '2'",
                          Path("m.tsv") + ":3: column 'label': label must be 0 or 1, got '0.5'",
                          Path("m.tsv") + ":4: column 'label': label must be 0 or 1, got ''"));
}

TEST_F(ReaderTest, MalformedFractionFailsTheRead) {
  // The fraction is checked at every line from the 1000th on: 1 of the first 1000
  // lines and 2 of 2000 stay within 0.001.
  std::string ok = QuickFile(0, 2000);
  auto break_line = [](std::string* content, int data_line) {
    size_t pos = 0;
    for (int i = 0; i <= data_line; ++i) pos = content->find('\n', pos) + 1;
    content->insert(pos, "x");  // label "x..." is not 0/1
  };
  break_line(&ok, 5);
  break_line(&ok, 1999);
  WriteFile(Path("ok.tsv"), ok);
  std::unique_ptr<DatasetReader> reader = OpenOk(Quickstart(), Path("ok.tsv"));
  EXPECT_EQ(ReadAll(reader.get(), 512).size(), 1998u);
  EXPECT_THAT(reader->stats().first_errors[0], HasSubstr("ok.tsv:7: column 'label'"));

  // 5 malformed in the first 1000 lines: fails once 1000 lines were read.
  std::string bad = QuickFile(0, 3000);
  for (int line : {1, 2, 3, 4, 5}) break_line(&bad, line);
  WriteFile(Path("bad.tsv"), bad);
  reader = OpenOk(Quickstart(), Path("bad.tsv"));
  model::ExampleBatch batch;
  ASSERT_TRUE(*reader->Next(600, &batch));
  absl::StatusOr<bool> more = reader->Next(600, &batch);
  ASSERT_EQ(more.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(more.status().message(), HasSubstr("too many malformed lines: 5 of 1000"));
  EXPECT_THAT(more.status().message(), HasSubstr("bad.tsv:3: column 'label'"));
  EXPECT_EQ(reader->Next(600, &batch).status(), more.status());

  // A short partition is checked at its end.
  std::string tiny = QuickFile(0, 10);
  break_line(&tiny, 3);
  WriteFile(Path("tiny.tsv"), tiny);
  reader = OpenOk(Quickstart(), Path("tiny.tsv"));
  ASSERT_TRUE(*reader->Next(5, &batch));
  EXPECT_EQ(reader->Next(5, &batch).status().code(), absl::StatusCode::kInvalidArgument);

  // Negative = never fail.
  v1::ModelConfig lenient = Quickstart();
  lenient.mutable_data()->set_max_malformed_fraction(-1);
  reader = OpenOk(lenient, Path("bad.tsv"));
  EXPECT_EQ(ReadAll(reader.get(), 600).size(), 2995u);
  EXPECT_EQ(reader->Next(0, &batch).status().code(), absl::StatusCode::kInvalidArgument);
}

class SeekTest : public ReaderTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(SeekTest, ResumesWithIdenticalBatches) {
  const std::string dir = Dir("data");
  WriteFile(dir + "/a", QuickFile(0, 23));
  WriteGzip(dir + "/b.gz", QuickFile(23, 31));
  WriteFile(dir + "/c", "");
  WriteFile(dir + "/d", QuickFile(54, 17) + "\n" + QuickLine(99, false).substr(3) + "\n");
  v1::ModelConfig config = Quickstart();
  config.mutable_data()->set_partition_by(GetParam());
  config.mutable_data()->set_max_malformed_fraction(-1);
  ReaderOptions options;
  options.world_size = GetParam() == "file" ? 1 : 2;

  std::unique_ptr<DatasetReader> reader = OpenOk(config, dir, options);
  std::vector<ReaderPosition> positions;
  std::vector<std::vector<Row>> batches;
  model::ExampleBatch batch;
  while (true) {
    positions.push_back(reader->position());
    absl::StatusOr<bool> more = reader->Next(7, &batch);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
    batches.push_back(Rows(batch));
  }
  ASSERT_GT(batches.size(), 4u);
  EXPECT_EQ(positions.back().file_index, 4);

  for (size_t k = 0; k < positions.size(); ++k) {
    std::unique_ptr<DatasetReader> resumed = OpenOk(config, dir, options);
    ASSERT_TRUE(resumed->Seek(positions[k]).ok())
        << positions[k].file_index << ":" << positions[k].line;
    absl::StatusOr<std::vector<std::vector<Row>>> rest = ReadBatches(resumed.get(), 7);
    ASSERT_TRUE(rest.ok());
    EXPECT_EQ(*rest, std::vector<std::vector<Row>>(batches.begin() + k, batches.end()))
        << "resumed at batch " << k;
  }

  EXPECT_EQ(reader->Seek({4, 2}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reader->Seek({5, 1}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reader->Seek({0, 26}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(reader->Seek({0, 25}).ok());  // just past the last line of a
  EXPECT_EQ(ReadAll(reader.get(), 7).size(),
            ReadAll(OpenOk(config, dir + "/b.gz", options).get()).size() +
                ReadAll(OpenOk(config, dir + "/d", options).get()).size());
}

INSTANTIATE_TEST_SUITE_P(ByFileAndByColumn, SeekTest, ::testing::Values("file", "user_id"));

TEST_F(ReaderTest, RewindStartsTheNextEpoch) {
  const std::string dir = Dir("data");
  WriteFile(dir + "/a", QuickFile(0, 40));
  WriteGzip(dir + "/b.gz", QuickFile(40, 40));
  std::unique_ptr<DatasetReader> reader = OpenOk(Quickstart(), dir);
  std::vector<Row> first = ReadAll(reader.get(), 16);
  ASSERT_EQ(first.size(), 80u);
  ASSERT_TRUE(reader->Rewind().ok());
  EXPECT_EQ(reader->position().file_index, 0);
  EXPECT_EQ(ReadAll(reader.get(), 16), first);
  EXPECT_EQ(reader->stats().lines, 160u);  // stats keep counting
  EXPECT_EQ(reader->stats().examples, 160u);
}

// Parse speed of the quickstart schema on one core, printed as "[ SPEED    ]" lines.
// Asserts only correctness: timing on shared machines is not a pass/fail criterion.
TEST_F(ReaderTest, ThroughputQuickstartSchema) {
  constexpr int kLines = 400000;
  const std::string content = QuickFile(0, kLines);
  WriteFile(Path("big.tsv"), content);
  WriteGzip(Path("big.tsv.gz"), content);
  for (const char* name : {"big.tsv", "big.tsv.gz"}) {
    std::unique_ptr<DatasetReader> reader = OpenOk(Quickstart(), Path(name));
    model::ExampleBatch batch;
    uint64_t examples = 0;
    const auto start = std::chrono::steady_clock::now();
    const std::clock_t cpu_start = std::clock();
    while (*reader->Next(1024, &batch)) examples += batch.size;
    const double cpu = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(examples, static_cast<uint64_t>(kLines));
    std::printf(
        "[ SPEED    ] %s: %d lines (%.1f MB): %.3f s CPU = %.2f M lines/s per core "
        "(wall %.3f s)\n",
        name, kLines, content.size() / 1e6, cpu, kLines / cpu / 1e6, wall);
  }
}

}  // namespace
}  // namespace ember::worker
