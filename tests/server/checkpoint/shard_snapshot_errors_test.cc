// Copyright 2026 The Ember Authors.
//
// Shard snapshots under bad conditions: corrupted or missing checkpoint files are
// refused before anything is imported, deltas the change log cannot serve and bad
// chains are refused, and checkpoints are only ever read.

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/checkpoint/shard_snapshot.h"
#include "server/store/row_layout.h"
#include "tests/server/checkpoint/snapshot_test_util.h"

namespace ember {
namespace {

using namespace ::ember::testutil;  // NOLINT: test helpers

// Counts the tables and meta keys of `backend`: zero for a backend nothing was written to.
size_t Contents(RocksDbBackend& backend) {
  size_t n = backend.ListTables().size();
  EXPECT_TRUE(backend
                  .Scan(kMetaTable, "", "",
                        [&](std::string_view, std::string_view) {
                          ++n;
                          return true;
                        })
                  .ok());
  return n;
}

// A full snapshot in <root>/ckpt/A and a delta in <root>/ckpt/B.
class CorruptionTest : public SnapshotTest {
 protected:
  void SetUp() override {
    SnapshotTest::SetUp();
    Shard source = OpenShard(Path("source"));
    Push(*source.store, "user", Range(1, 500), 1);
    const FullAndDelta snaps = SnapshotAround(
        source, Path("ckpt/A"), [&] { Push(*source.store, "user", Range(400, 600), 2); },
        Path("ckpt/B"));
    full_ = snaps.full;
    delta_ = snaps.delta;
    ASSERT_EQ(delta_.kind(), v1::ShardSnapshot::DELTA);
  }

  std::vector<SnapshotChainLink> Chain(const std::string& root) const {
    return {{root + "/A", {full_}}, {root + "/B", {delta_}}};
  }

  v1::ShardSnapshot full_;
  v1::ShardSnapshot delta_;
};

TEST_F(CorruptionTest, EveryCorruptedFileIsDetectedBeforeAnythingIsWritten) {
  // Every non-empty file of the chain, as (link directory, relative path).
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& [link, snap] : {std::pair{"A", &full_}, std::pair{"B", &delta_}}) {
    for (const v1::CheckpointFile& f : snap->files()) {
      if (f.size() > 0) files.emplace_back(link, f.path());
    }
  }
  ASSERT_GT(files.size(), 2u);
  std::mt19937_64 rng(20261130);
  for (int round = 0; round < 20; ++round) {
    const std::string copy = Path("copy" + std::to_string(round));
    std::filesystem::copy(Path("ckpt"), copy, std::filesystem::copy_options::recursive);
    const auto& [link, relative] = files[rng() % files.size()];
    const std::string victim = copy + "/" + link + "/" + relative;
    const uint64_t size = std::filesystem::file_size(victim);
    const bool truncate = rng() % 2 == 0;
    if (truncate) {
      std::filesystem::resize_file(victim, rng() % size);
    } else {
      std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
      const uint64_t offset = rng() % size;
      f.seekg(static_cast<std::streamoff>(offset));
      char byte = 0;
      f.read(&byte, 1);
      byte = static_cast<char>(byte ^ (1 << (rng() % 8)));
      f.seekp(static_cast<std::streamoff>(offset));
      f.write(&byte, 1);
      ASSERT_TRUE(f.good());
    }
    std::unique_ptr<RocksDbBackend> target = OpenBackend(Path("target" + std::to_string(round)));
    absl::StatusOr<ImportReport> report = ImportSnapshots(Chain(copy), OwnsAll, *target);
    const std::string what = (truncate ? "truncated " : "bit flip in ") + victim;
    EXPECT_EQ(report.status().code(), absl::StatusCode::kDataLoss)
        << what << ": " << report.status();
    EXPECT_NE(report.status().message().find(relative), std::string::npos)
        << what << ": " << report.status();
    EXPECT_EQ(Contents(*target), 0u) << what;
    std::filesystem::remove_all(copy);
  }
}

TEST_F(CorruptionTest, MissingFileIsDataLoss) {
  const std::string victim = Path("ckpt/B/") + delta_.files(0).path();
  std::filesystem::remove(victim);
  std::unique_ptr<RocksDbBackend> target = OpenBackend(Path("target"));
  absl::StatusOr<ImportReport> report = ImportSnapshots(Chain(Path("ckpt")), OwnsAll, *target);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(report.status().message().find("missing"), std::string::npos) << report.status();
  EXPECT_EQ(Contents(*target), 0u);
}

TEST_F(CorruptionTest, ImportLeavesTheCheckpointUnchanged) {
  auto before_a = DigestFiles(Path("ckpt/A"), "shard-0");
  auto before_b = DigestFiles(Path("ckpt/B"), "shard-0");
  ASSERT_TRUE(before_a.ok() && before_b.ok());
  std::unique_ptr<RocksDbBackend> target = OpenBackend(Path("target"));
  ASSERT_TRUE(ImportSnapshots(Chain(Path("ckpt")), OwnsAll, *target).ok());
  auto after_a = DigestFiles(Path("ckpt/A"), "shard-0");
  auto after_b = DigestFiles(Path("ckpt/B"), "shard-0");
  ASSERT_TRUE(after_a.ok() && after_b.ok());
  for (auto [before, after] :
       {std::pair{&*before_a, &*after_a}, std::pair{&*before_b, &*after_b}}) {
    ASSERT_EQ(before->size(), after->size());
    for (size_t i = 0; i < before->size(); ++i) {
      EXPECT_EQ((*before)[i].path(), (*after)[i].path());
      EXPECT_EQ((*before)[i].size(), (*after)[i].size()) << (*before)[i].path();
      EXPECT_EQ((*before)[i].crc32(), (*after)[i].crc32()) << (*before)[i].path();
    }
  }
}

TEST_F(CorruptionTest, BadChainsAreInvalidArgument) {
  std::unique_ptr<RocksDbBackend> target = OpenBackend(Path("target"));
  const std::string a = Path("ckpt/A"), b = Path("ckpt/B");
  v1::ShardSnapshot wrong_base = delta_;
  wrong_base.set_base_version(delta_.base_version() + 1);
  v1::ShardSnapshot other_shard = delta_;
  other_shard.set_shard_id(7);
  const std::vector<std::vector<SnapshotChainLink>> bad = {
      {},                                            // empty
      {{a, {}}},                                     // no shards
      {{b, {delta_}}},                               // starts with a delta
      {{a, {full_}}, {a, {full_}}},                  // continues with a full
      {{a, {full_}}, {b, {wrong_base}}},             // delta of another base
      {{a, {full_}}, {b, {other_shard}}},            // delta of a shard the full lacks
      {{a, {full_}}, {b, {delta_}}, {b, {delta_}}},  // the same delta twice
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    EXPECT_EQ(ImportSnapshots(bad[i], OwnsAll, *target).status().code(),
              absl::StatusCode::kInvalidArgument)
        << "chain " << i;
  }
  EXPECT_EQ(Contents(*target), 0u);
}

TEST_F(SnapshotTest, DeltaBeyondTheChangeLogIsOutOfRange) {
  StoreOptions options;
  options.change_log_capacity = 16;
  Shard source = OpenShard(Path("source"), options);
  Push(*source.store, "user", Range(1, 100), 1);
  auto full = WriteFullSnapshot(*source.store, *source.backend, Path("ckpt"), "full");
  ASSERT_TRUE(full.ok()) << full.status();

  // Within the log's reach a delta works.
  Push(*source.store, "user", Range(1, 10), 2);
  auto near =
      WriteDeltaSnapshot(*source.store, *source.backend, full->version(), Path("ckpt"), "near");
  ASSERT_TRUE(near.ok()) << near.status();
  EXPECT_EQ(near->records(), 9u);

  Push(*source.store, "user", Range(1, 100), 3);
  auto far =
      WriteDeltaSnapshot(*source.store, *source.backend, full->version(), Path("ckpt"), "far");
  EXPECT_EQ(far.status().code(), absl::StatusCode::kOutOfRange) << far.status();
  EXPECT_FALSE(std::filesystem::exists(Path("ckpt/far")));  // nothing left to block a retry

  auto ahead = WriteDeltaSnapshot(*source.store, *source.backend, source.store->version() + 1,
                                  Path("ckpt"), "ahead");
  EXPECT_EQ(ahead.status().code(), absl::StatusCode::kInvalidArgument) << ahead.status();
}

TEST_F(SnapshotTest, ExistingSnapshotDirectoryIsAlreadyExists) {
  Shard source = OpenShard(Path("source"));
  Push(*source.store, "user", Range(1, 10), 1);
  auto full = [&](const std::string& subdir) {
    return WriteFullSnapshot(*source.store, *source.backend, Path("ckpt"), subdir).status();
  };
  std::filesystem::create_directories(Path("ckpt/shard-0"));
  EXPECT_EQ(full("shard-0").code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(WriteDeltaSnapshot(*source.store, *source.backend, 0, Path("ckpt"), "shard-0")
                .status()
                .code(),
            absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(full("shard-1").ok());
  EXPECT_EQ(full("shard-1").code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(SnapshotTest, ReadOnlyBackendRefusesWrites) {
  {
    std::unique_ptr<RocksDbBackend> db = OpenBackend(Path("db"));
    const BackendTable t = db->OpenTable("user").value();
    ASSERT_TRUE(db->Write({{t, RowKey(1, 2), "row", false}, {kMetaTable, "k", "v", false}}).ok());
    ASSERT_TRUE(db->Flush().ok());
  }
  RocksDbOptions options;
  options.path = Path("db");
  options.read_only = true;
  absl::StatusOr<std::unique_ptr<RocksDbBackend>> db = RocksDbBackend::Open(options);
  ASSERT_TRUE(db.ok()) << db.status();
  absl::StatusOr<BackendTable> t = (*db)->OpenTable("user");
  ASSERT_TRUE(t.ok()) << t.status();
  std::vector<std::string> values;
  std::vector<bool> found;
  ASSERT_TRUE((*db)->MultiGet(*t, {RowKey(1, 2)}, &values, &found).ok());
  EXPECT_TRUE(found[0]);
  EXPECT_EQ(values[0], "row");
  EXPECT_EQ((*db)->Write({{*t, RowKey(1, 3), "x", false}}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*db)->Write({}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*db)->Flush().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*db)->OpenTable("new_table").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*db)->CreateCheckpoint(Path("cp")).code(), absl::StatusCode::kFailedPrecondition);

  // A missing database is an error, never created.
  options.path = Path("absent");
  EXPECT_FALSE(RocksDbBackend::Open(options).ok());
  EXPECT_FALSE(std::filesystem::exists(Path("absent")));
}

}  // namespace
}  // namespace ember
