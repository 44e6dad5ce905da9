// Copyright 2026 The Ember Authors.
//
// CheckpointCatalog (server/checkpoint/checkpoint_catalog.h) over real files in a fresh
// temporary directory per test: MANIFEST and worker state round trips, corruption
// detection, listing, chains, verification, Prepare and retention.

#include "server/checkpoint/checkpoint_catalog.h"

#include <stdlib.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace ember {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

constexpr char kJob[] = "ctr";

#define EMBER_ASSERT_OK(expr)                    \
  do {                                           \
    const ::absl::Status s_ = (expr);            \
    ASSERT_TRUE(s_.ok()) << #expr << ": " << s_; \
  } while (0)

std::string ReadBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteBytes(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

uint32_t Crc(const std::string& bytes) {
  return static_cast<uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
}

// `good` with one random bit flipped (flip) or cut to a random shorter length.
std::string Damage(const std::string& good, bool flip, std::mt19937& rng) {
  std::string bad = good;
  if (flip) {
    const size_t bit = std::uniform_int_distribution<size_t>(0, good.size() * 8 - 1)(rng);
    bad[bit / 8] = static_cast<char>(bad[bit / 8] ^ (1 << (bit % 8)));
  } else {
    bad.resize(std::uniform_int_distribution<size_t>(0, good.size() - 1)(rng));
  }
  return bad;
}

bool SameMessage(const google::protobuf::Message& a, const google::protobuf::Message& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

v1::WorkerState SampleWorkerState() {
  v1::WorkerState state;
  state.set_step(1200);
  state.set_examples(1200 * 512);
  state.set_world_size(2);
  state.set_dense_parameters(std::string(4096, '\x3f'));
  state.set_dense_optimizer_state("adam-state");
  state.set_config_digest(0xfeedface);
  for (uint32_t rank = 0; rank < 2; ++rank) {
    v1::WorkerCursor* cursor = state.add_cursors();
    cursor->set_rank(rank);
    cursor->set_epoch(1);
    cursor->set_file_index(static_cast<int32_t>(rank) + 3);
    cursor->set_line(777 + rank);
  }
  return state;
}

class CheckpointCatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::path(testing::TempDir()) / "ember_catalog_XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    root_ = templ;
    catalog_ = std::make_unique<CheckpointCatalog>((fs::path(root_) / "checkpoints").string());
  }
  void TearDown() override { fs::remove_all(root_); }

  v1::CheckpointManifest Manifest(uint64_t step, uint64_t attempt, const std::string& parent = "") {
    v1::CheckpointManifest manifest;
    manifest.set_format(1);
    manifest.set_job(kJob);
    manifest.set_name(CheckpointCatalog::Name(step, attempt));
    manifest.set_step(step);
    manifest.set_attempt(attempt);
    manifest.set_created_unix_ms(1'700'000'000'000 + static_cast<int64_t>(step));
    manifest.set_incremental(!parent.empty());
    manifest.set_parent(parent);
    manifest.set_epoch(4);
    manifest.set_slot_owners(std::string("\x01\x02\x03", 3));
    manifest.add_tables()->set_name("user");
    return manifest;
  }

  // Writes a checkpoint with one shard holding `files` (path -> contents) and a
  // worker state; returns its manifest.
  v1::CheckpointManifest Commit(uint64_t step, uint64_t attempt, const std::string& parent = "",
                                const std::vector<std::pair<std::string, std::string>>& files = {
                                    {"shard-0/data.bin", "rows"}}) {
    v1::CheckpointManifest manifest = Manifest(step, attempt, parent);
    const fs::path dir = catalog_->Dir(kJob, manifest.name());
    EXPECT_TRUE(catalog_->Prepare(kJob, manifest.name()).ok());
    v1::ShardSnapshot* shard = manifest.add_shards();
    shard->set_shard_id(0);
    shard->set_kind(parent.empty() ? v1::ShardSnapshot::FULL : v1::ShardSnapshot::DELTA);
    shard->set_dir("shard-0");
    for (const auto& [path, contents] : files) {
      WriteBytes(dir / path, contents);
      v1::CheckpointFile* file = shard->add_files();
      file->set_path(path);
      file->set_size(contents.size());
      file->set_crc32(Crc(contents));
    }
    absl::StatusOr<v1::CheckpointFile> ws =
        catalog_->WriteWorkerState(kJob, manifest.name(), SampleWorkerState());
    EXPECT_TRUE(ws.ok()) << ws.status();
    if (ws.ok()) *manifest.mutable_worker_state() = *ws;
    const absl::Status written = catalog_->WriteManifest(manifest);
    EXPECT_TRUE(written.ok()) << written;
    return manifest;
  }

  fs::path ManifestPath(const std::string& name) const {
    return fs::path(catalog_->Dir(kJob, name)) / "MANIFEST";
  }

  std::vector<std::string> DirsOnDisk() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(catalog_->JobDir(kJob))) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  std::string root_;
  std::unique_ptr<CheckpointCatalog> catalog_;
};

std::vector<std::string> Names(const std::vector<v1::CheckpointManifest>& manifests) {
  std::vector<std::string> names;
  for (const v1::CheckpointManifest& m : manifests) names.push_back(m.name());
  return names;
}

TEST(CheckpointNameTest, FormatAndOrdering) {
  EXPECT_EQ(CheckpointCatalog::Name(1200, 3), "ckpt-000000001200-a3");
  EXPECT_EQ(CheckpointCatalog::Name(0, 0), "ckpt-000000000000-a0");
  // Names sort by step.
  EXPECT_LT(CheckpointCatalog::Name(9, 1), CheckpointCatalog::Name(10, 1));
  EXPECT_LT(CheckpointCatalog::Name(99, 7), CheckpointCatalog::Name(100, 1));
  EXPECT_LT(CheckpointCatalog::Name(100, 1), CheckpointCatalog::Name(100, 2));
  EXPECT_LT(CheckpointCatalog::Name(999'999'999'998, 5),
            CheckpointCatalog::Name(999'999'999'999, 1));
}

TEST_F(CheckpointCatalogTest, DirsAreUnderTheRoot) {
  EXPECT_EQ(catalog_->JobDir("ctr"), (fs::path(root_) / "checkpoints" / "ctr").string());
  EXPECT_EQ(catalog_->Dir("ctr", "ckpt-1"),
            (fs::path(root_) / "checkpoints" / "ctr" / "ckpt-1").string());
}

TEST_F(CheckpointCatalogTest, ManifestAndWorkerStateRoundTrip) {
  const v1::CheckpointManifest written = Commit(1200, 3);
  EXPECT_TRUE(fs::exists(ManifestPath(written.name())));
  EXPECT_FALSE(fs::exists(fs::path(catalog_->Dir(kJob, written.name())) / "MANIFEST.tmp"));

  absl::StatusOr<v1::CheckpointManifest> read = catalog_->ReadManifest(kJob, written.name());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(SameMessage(*read, written)) << read->DebugString();
  EXPECT_EQ(read->worker_state().path(), "worker_state.bin");

  absl::StatusOr<v1::WorkerState> state = catalog_->ReadWorkerState(*read);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_TRUE(SameMessage(*state, SampleWorkerState()));
}

TEST_F(CheckpointCatalogTest, ManifestBytesFollowTheFormat) {
  const v1::CheckpointManifest written = Commit(5, 1);
  const std::string bytes = ReadBytes(ManifestPath(written.name()));
  ASSERT_GE(bytes.size(), 20u);
  EXPECT_EQ(bytes.substr(0, 8), "EMBERCKP");
  auto u32 = [&](size_t at) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
    return v;
  };
  EXPECT_EQ(u32(8), 1u);
  const uint32_t length = u32(12);
  ASSERT_EQ(bytes.size(), 16u + length + 4u);
  const std::string body = bytes.substr(16, length);
  EXPECT_EQ(u32(16 + length), Crc(body));
  v1::CheckpointManifest parsed;
  ASSERT_TRUE(parsed.ParseFromString(body));
  EXPECT_TRUE(SameMessage(parsed, written));
}

TEST_F(CheckpointCatalogTest, MissingCheckpointAndWorkerState) {
  EXPECT_TRUE(absl::IsNotFound(catalog_->ReadManifest(kJob, "ckpt-nothing").status()));
  EXPECT_TRUE(absl::IsNotFound(catalog_->ReadManifest(kJob, "../escape").status()));
  v1::CheckpointManifest manifest = Manifest(7, 1);
  EMBER_ASSERT_OK(catalog_->WriteManifest(manifest));
  EXPECT_TRUE(absl::IsNotFound(catalog_->ReadWorkerState(manifest).status()));
}

TEST_F(CheckpointCatalogTest, ManifestOfAnotherDirectoryIsDataLoss) {
  const v1::CheckpointManifest written = Commit(10, 1);
  const std::string other = CheckpointCatalog::Name(11, 1);
  fs::create_directories(catalog_->Dir(kJob, other));
  fs::copy_file(ManifestPath(written.name()), ManifestPath(other));
  const absl::Status status = catalog_->ReadManifest(kJob, other).status();
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
}

TEST_F(CheckpointCatalogTest, CorruptManifestIsAlwaysDataLoss) {
  const v1::CheckpointManifest written = Commit(20, 1);
  const fs::path path = ManifestPath(written.name());
  const std::string good = ReadBytes(path);
  std::mt19937 rng(20260401);
  for (int trial = 0; trial < 20; ++trial) {
    WriteBytes(path, Damage(good, trial % 2 == 0, rng));
    const absl::Status status = catalog_->ReadManifest(kJob, written.name()).status();
    EXPECT_TRUE(absl::IsDataLoss(status)) << "trial " << trial << ": " << status;
    EXPECT_THAT(status.message(), HasSubstr(path.string()));
  }
  WriteBytes(path, good);
  EXPECT_TRUE(catalog_->ReadManifest(kJob, written.name()).ok());
  // Trailing garbage is not a valid manifest either.
  WriteBytes(path, good + "x");
  EXPECT_TRUE(absl::IsDataLoss(catalog_->ReadManifest(kJob, written.name()).status()));
}

TEST_F(CheckpointCatalogTest, CorruptWorkerStateIsAlwaysDataLoss) {
  const v1::CheckpointManifest written = Commit(30, 1);
  const fs::path path = fs::path(catalog_->Dir(kJob, written.name())) / "worker_state.bin";
  const std::string good = ReadBytes(path);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    WriteBytes(path, Damage(good, trial % 2 == 0, rng));
    const absl::Status status = catalog_->ReadWorkerState(written).status();
    EXPECT_TRUE(absl::IsDataLoss(status)) << "trial " << trial << ": " << status;
    EXPECT_THAT(status.message(), HasSubstr("worker_state.bin"));
  }
  fs::remove(path);
  EXPECT_TRUE(absl::IsDataLoss(catalog_->ReadWorkerState(written).status()));
}

TEST_F(CheckpointCatalogTest, ListSortsValidAndReportsInvalid) {
  Commit(300, 1);
  Commit(100, 2);
  Commit(100, 1);
  Commit(200, 1);
  // Missing MANIFEST, truncated MANIFEST, bit-flipped MANIFEST; a non-checkpoint
  // directory and a stray file are ignored.
  fs::create_directories(catalog_->Dir(kJob, CheckpointCatalog::Name(400, 1)));
  Commit(500, 1);
  const std::string truncated = ReadBytes(ManifestPath(CheckpointCatalog::Name(500, 1)));
  WriteBytes(ManifestPath(CheckpointCatalog::Name(500, 1)), truncated.substr(0, 10));
  Commit(600, 1);
  std::string flipped = ReadBytes(ManifestPath(CheckpointCatalog::Name(600, 1)));
  flipped[20] = static_cast<char>(flipped[20] ^ 0x10);
  WriteBytes(ManifestPath(CheckpointCatalog::Name(600, 1)), flipped);
  fs::create_directories(fs::path(catalog_->JobDir(kJob)) / "scratch");
  WriteBytes(fs::path(catalog_->JobDir(kJob)) / "ckpt-file", "not a directory");

  absl::StatusOr<CheckpointListing> listing = catalog_->List(kJob);
  ASSERT_TRUE(listing.ok()) << listing.status();
  EXPECT_THAT(Names(listing->valid),
              ElementsAre(CheckpointCatalog::Name(100, 1), CheckpointCatalog::Name(100, 2),
                          CheckpointCatalog::Name(200, 1), CheckpointCatalog::Name(300, 1)));
  ASSERT_EQ(listing->invalid.size(), 3u);
  EXPECT_EQ(listing->invalid[0].first, CheckpointCatalog::Name(400, 1));
  EXPECT_TRUE(absl::IsNotFound(listing->invalid[0].second)) << listing->invalid[0].second;
  EXPECT_EQ(listing->invalid[1].first, CheckpointCatalog::Name(500, 1));
  EXPECT_TRUE(absl::IsDataLoss(listing->invalid[1].second)) << listing->invalid[1].second;
  EXPECT_EQ(listing->invalid[2].first, CheckpointCatalog::Name(600, 1));
  EXPECT_TRUE(absl::IsDataLoss(listing->invalid[2].second)) << listing->invalid[2].second;
}

TEST_F(CheckpointCatalogTest, ListOfUnknownJobIsEmpty) {
  absl::StatusOr<CheckpointListing> listing = catalog_->List("nobody");
  ASSERT_TRUE(listing.ok()) << listing.status();
  EXPECT_THAT(listing->valid, IsEmpty());
  EXPECT_THAT(listing->invalid, IsEmpty());
}

TEST_F(CheckpointCatalogTest, ChainOfFullAndTwoDeltas) {
  const std::string full = Commit(100, 1).name();
  const std::string delta1 = Commit(200, 1, full).name();
  const std::string delta2 = Commit(300, 1, delta1).name();
  absl::StatusOr<std::vector<v1::CheckpointManifest>> chain = catalog_->Chain(kJob, delta2);
  ASSERT_TRUE(chain.ok()) << chain.status();
  EXPECT_THAT(Names(*chain), ElementsAre(full, delta1, delta2));
  chain = catalog_->Chain(kJob, full);
  ASSERT_TRUE(chain.ok()) << chain.status();
  EXPECT_THAT(Names(*chain), ElementsAre(full));
}

TEST_F(CheckpointCatalogTest, ChainWithMissingParentNamesIt) {
  const std::string missing = CheckpointCatalog::Name(100, 1);
  const std::string delta = Commit(200, 1, missing).name();
  const absl::Status status = catalog_->Chain(kJob, delta).status();
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr(missing));
}

TEST_F(CheckpointCatalogTest, ChainThatLoopsIsDataLoss) {
  const std::string a = CheckpointCatalog::Name(100, 1);
  const std::string b = CheckpointCatalog::Name(200, 1);
  Commit(100, 1, b);
  Commit(200, 1, a);
  const absl::Status status = catalog_->Chain(kJob, b).status();
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  // A link naming itself loops too.
  const std::string self = CheckpointCatalog::Name(300, 1);
  Commit(300, 1, self);
  EXPECT_TRUE(absl::IsDataLoss(catalog_->Chain(kJob, self).status()));
}

TEST_F(CheckpointCatalogTest, ChainStartingIncrementalIsDataLoss) {
  v1::CheckpointManifest manifest = Manifest(100, 1);
  manifest.set_incremental(true);  // but no parent
  EMBER_ASSERT_OK(catalog_->WriteManifest(manifest));
  EXPECT_TRUE(absl::IsDataLoss(catalog_->Chain(kJob, manifest.name()).status()));
}

TEST_F(CheckpointCatalogTest, VerifyDetectsCorruptShardFile) {
  const std::vector<std::pair<std::string, std::string>> full_files = {
      {"shard-0/db/000012.sst", std::string(10000, 'a')}, {"shard-0/db/CURRENT", "MANIFEST-1\n"}};
  const std::string full = Commit(100, 1, "", full_files).name();
  const std::string delta =
      Commit(200, 1, full, {{"shard-0/delta.bin", std::string(500, 'd')}}).name();
  EMBER_ASSERT_OK(catalog_->Verify(kJob, delta));

  // Flip one byte of the full checkpoint's table file (same size): the delta's
  // verification fails, naming the file.
  const fs::path sst = fs::path(catalog_->Dir(kJob, full)) / "shard-0/db/000012.sst";
  std::string bytes = ReadBytes(sst);
  bytes[5000] = 'b';
  WriteBytes(sst, bytes);
  absl::Status status = catalog_->Verify(kJob, delta);
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("000012.sst"));

  // A truncated worker state is caught too.
  const std::string other = Commit(300, 1).name();
  EMBER_ASSERT_OK(catalog_->Verify(kJob, other));
  const fs::path ws = fs::path(catalog_->Dir(kJob, other)) / "worker_state.bin";
  WriteBytes(ws, ReadBytes(ws).substr(0, 10));
  status = catalog_->Verify(kJob, other);
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("worker_state.bin"));

  // A missing shard file as well.
  const std::string third = Commit(400, 1).name();
  fs::remove(fs::path(catalog_->Dir(kJob, third)) / "shard-0/data.bin");
  status = catalog_->Verify(kJob, third);
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("data.bin"));
}

TEST_F(CheckpointCatalogTest, PrepareRemovesInterruptedAndRefusesCommitted) {
  const std::string name = CheckpointCatalog::Name(100, 1);
  const fs::path dir = catalog_->Dir(kJob, name);
  EMBER_ASSERT_OK(catalog_->Prepare(kJob, name));
  EXPECT_TRUE(fs::is_directory(dir));
  WriteBytes(dir / "shard-0/partial.bin", "half written");
  EMBER_ASSERT_OK(catalog_->Prepare(kJob, name));
  EXPECT_TRUE(fs::is_directory(dir));
  EXPECT_FALSE(fs::exists(dir / "shard-0"));

  // A corrupt MANIFEST is an interrupted attempt too.
  Commit(200, 1);
  const std::string corrupt = CheckpointCatalog::Name(200, 1);
  WriteBytes(ManifestPath(corrupt), "EMBERCKP");
  EMBER_ASSERT_OK(catalog_->Prepare(kJob, corrupt));
  EXPECT_FALSE(fs::exists(ManifestPath(corrupt)));

  const std::string committed = Commit(300, 1).name();
  const absl::Status status = catalog_->Prepare(kJob, committed);
  EXPECT_TRUE(absl::IsAlreadyExists(status)) << status;
  EXPECT_TRUE(catalog_->ReadManifest(kJob, committed).ok());
  EXPECT_TRUE(fs::exists(fs::path(catalog_->Dir(kJob, committed)) / "shard-0/data.bin"));
}

TEST_F(CheckpointCatalogTest, RetainKeepsNewestAndTheirChains) {
  // Chain A: full 100 <- 200 <- 300. Chain B: full 400 <- 500. Full 50 stands alone.
  const std::string c50 = Commit(50, 1).name();
  const std::string c100 = Commit(100, 1).name();
  const std::string c200 = Commit(200, 1, c100).name();
  const std::string c300 = Commit(300, 1, c200).name();
  const std::string c400 = Commit(400, 1).name();
  const std::string c500 = Commit(500, 1, c400).name();
  // Newest (a later attempt): delta of chain A.
  const std::string c600 = Commit(600, 2, c300).name();
  const std::string orphan = CheckpointCatalog::Name(650, 2);
  fs::create_directories(catalog_->Dir(kJob, orphan));
  const std::string in_progress = CheckpointCatalog::Name(700, 2);
  EMBER_ASSERT_OK(catalog_->Prepare(kJob, in_progress));

  absl::StatusOr<std::vector<std::string>> deleted = catalog_->Retain(kJob, 2, in_progress);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  // Newest two: 600 (chain 100, 200, 300, 600) and 500 (chain 400, 500).
  EXPECT_THAT(*deleted, UnorderedElementsAre(c50, orphan));
  EXPECT_THAT(DirsOnDisk(), ElementsAre(c100, c200, c300, c400, c500, c600, in_progress));
  EMBER_ASSERT_OK(catalog_->Verify(kJob, c600));
  EMBER_ASSERT_OK(catalog_->Verify(kJob, c500));

  deleted = catalog_->Retain(kJob, 1, in_progress);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_THAT(*deleted, UnorderedElementsAre(c400, c500));
  EXPECT_THAT(DirsOnDisk(), ElementsAre(c100, c200, c300, c600, in_progress));
  EMBER_ASSERT_OK(catalog_->Verify(kJob, c600));

  // Without an in-progress checkpoint, its directory (no MANIFEST) goes too.
  deleted = catalog_->Retain(kJob, 1, "");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_THAT(*deleted, ElementsAre(in_progress));
}

// A second run of a job (a later attempt) starts again at low steps: its checkpoints
// are the newest, and an earlier run's higher steps are the ones retention drops. (It
// used to order by step first and deleted the new run's checkpoints as they came.)
TEST_F(CheckpointCatalogTest, RetainKeepsALaterRunsLowerSteps) {
  const std::string c1000 = Commit(1000, 2).name();
  const std::string c2000 = Commit(2000, 2).name();
  const std::string c3000 = Commit(3000, 2).name();
  const std::string c0 = Commit(0, 5).name();
  const std::string c20 = Commit(20, 6).name();
  absl::StatusOr<std::vector<std::string>> deleted = catalog_->Retain(kJob, 3, "");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_THAT(*deleted, UnorderedElementsAre(c1000, c2000));
  EXPECT_THAT(DirsOnDisk(), UnorderedElementsAre(c3000, c0, c20));
  absl::StatusOr<CheckpointListing> listing = catalog_->List(kJob);
  ASSERT_TRUE(listing.ok()) << listing.status();
  ASSERT_FALSE(listing->valid.empty());
  EXPECT_EQ(listing->valid.back().name(), c20);  // --resume_from=latest
}

TEST_F(CheckpointCatalogTest, RetainKeepsWhatABrokenChainCan) {
  const std::string c100 = Commit(100, 1).name();
  const std::string c200 = Commit(200, 1, c100).name();
  const std::string c300 = Commit(300, 1, c200).name();
  const std::string c400 = Commit(400, 1).name();
  // The middle link's MANIFEST is corrupt: 300 keeps itself and the named 200; 100
  // is unreachable from a kept checkpoint.
  std::string bytes = ReadBytes(ManifestPath(c200));
  bytes[bytes.size() - 1] = static_cast<char>(bytes[bytes.size() - 1] ^ 1);
  WriteBytes(ManifestPath(c200), bytes);
  absl::StatusOr<std::vector<std::string>> deleted = catalog_->Retain(kJob, 2, "");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_THAT(*deleted, ElementsAre(c100));
  EXPECT_THAT(DirsOnDisk(), ElementsAre(c200, c300, c400));
}

TEST_F(CheckpointCatalogTest, RetainOfUnknownJobDeletesNothing) {
  absl::StatusOr<std::vector<std::string>> deleted = catalog_->Retain("nobody", 3, "");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_THAT(*deleted, IsEmpty());
  EXPECT_TRUE(absl::IsInvalidArgument(catalog_->Retain(kJob, 0, "").status()));
}

TEST_F(CheckpointCatalogTest, WritesRefuseNamesOutsideTheJob) {
  EXPECT_TRUE(absl::IsInvalidArgument(catalog_->Prepare(kJob, "..")));
  EXPECT_TRUE(absl::IsInvalidArgument(catalog_->Prepare("a/b", "ckpt-1")));
  v1::CheckpointManifest manifest = Manifest(1, 1);
  manifest.set_name("../ckpt-1");
  EXPECT_TRUE(absl::IsInvalidArgument(catalog_->WriteManifest(manifest)));
  EXPECT_FALSE(fs::exists(fs::path(root_) / "checkpoints" / "ckpt-1"));
}

}  // namespace
}  // namespace ember
