// Copyright 2026 The Ember Authors.
//
// Shard snapshots round trip: a full snapshot restores the same rows, version and
// admission state; a full + delta chain restores what a full snapshot at the same
// point does; imports split or merge shards by slot ownership without losing or
// duplicating a row; and a shard's snapshot counts only for the slots it owned in the
// checkpoint's map.

#include "server/checkpoint/shard_snapshot.h"

#include <map>
#include <string>
#include <vector>

#include "common/slot.h"
#include "gtest/gtest.h"
#include "tests/server/checkpoint/snapshot_test_util.h"

namespace ember {
namespace {

using namespace ::ember::testutil;  // NOLINT: test helpers

// Imports `chain` into a fresh backend at `path` owning the slots `owns` accepts,
// and opens a store over it.
Shard ImportInto(const std::string& path, const std::vector<SnapshotChainLink>& chain,
                 const std::function<bool(uint32_t)>& owns, ImportReport* report = nullptr) {
  std::unique_ptr<RocksDbBackend> target = OpenBackend(path);
  absl::StatusOr<ImportReport> r = ImportSnapshots(chain, owns, *target);
  EXPECT_TRUE(r.ok()) << r.status();
  if (r.ok() && report != nullptr) *report = *r;
  return StoreOver(std::move(target));
}

void ExpectSameChecksums(const std::map<std::string, TableChecksum>& want,
                         const std::map<std::string, TableChecksum>& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (const auto& [table, sum] : want) {
    EXPECT_EQ(got.at(table).rows, sum.rows) << what << " table " << table;
    EXPECT_EQ(got.at(table).digest, sum.digest) << what << " table " << table;
  }
}

// Three pushes of `ids` to "item" (admission needs three sightings) and one to "user".
void PushRound(EmbeddingStore& store, const std::vector<uint64_t>& ids, int64_t first_step) {
  for (int64_t s = 0; s < 3; ++s) Push(store, "item", ids, first_step + s);
  Push(store, "user", ids, first_step);
}

TEST_F(SnapshotTest, FullSnapshotRestoresRowsVersionAndAdmissionState) {
  Shard source = OpenShard(Path("source"));
  PushRound(*source.store, Range(1, 300), 1);
  // Seen twice: one push short of admission in "item".
  Push(*source.store, "item", {9999}, 4);
  Push(*source.store, "item", {9999}, 5);

  const std::string ckpt = Path("ckpt");
  absl::StatusOr<v1::ShardSnapshot> snap =
      WriteFullSnapshot(*source.store, *source.backend, ckpt, "shard-0");
  ASSERT_TRUE(snap.ok()) << snap.status();
  const auto want = Checksums(*source.store);
  EXPECT_EQ(snap->kind(), v1::ShardSnapshot::FULL);
  EXPECT_EQ(snap->dir(), "shard-0");
  EXPECT_EQ(snap->version(), source.store->version());
  EXPECT_EQ(snap->records(), want.at("item").rows + want.at("user").rows);
  EXPECT_EQ(want.at("item").rows, 299u);
  ASSERT_GT(snap->files_size(), 0);
  uint64_t bytes = 0;
  for (const v1::CheckpointFile& f : snap->files()) {
    EXPECT_EQ(f.path().rfind("shard-0/db/", 0), 0u) << f.path();
    bytes += f.size();
  }
  EXPECT_EQ(snap->bytes(), bytes);

  ImportReport report;
  Shard restored = ImportInto(Path("target"), {{ckpt, {*snap}}}, OwnsAll, &report);
  ASSERT_NE(restored.store, nullptr);
  EXPECT_EQ(report.rows, snap->records());
  EXPECT_EQ(report.tombstones, 0u);
  EXPECT_EQ(report.version, source.store->version());
  EXPECT_EQ(report.bytes_read, snap->bytes());
  EXPECT_EQ(restored.store->version(), source.store->version());
  ExpectSameChecksums(want, Checksums(*restored.store), "restored");

  // The third sighting admits 9999 in both: the sketch came along.
  for (Shard* shard : {&source, &restored}) {
    EXPECT_FALSE(shard->store->ReadRow("item", 9999)->stored);
    Push(*shard->store, "item", {9999}, 6);
    EXPECT_TRUE(shard->store->ReadRow("item", 9999)->stored);
  }
  ExpectSameChecksums(Checksums(*source.store), Checksums(*restored.store), "after push");
}

TEST_F(SnapshotTest, ChainOfDeltasEqualsFullSnapshotAtTheSamePoint) {
  Shard source = OpenShard(Path("source"));
  PushRound(*source.store, Range(1, 400), 1);
  // The delta holds updates of old rows and new rows.
  const FullAndDelta ab = SnapshotAround(
      source, Path("A"), [&] { PushRound(*source.store, Range(350, 600), 10); }, Path("B"));
  const v1::ShardSnapshot* a = &ab.full;
  const v1::ShardSnapshot* b = &ab.delta;
  EXPECT_EQ(b->kind(), v1::ShardSnapshot::DELTA);
  EXPECT_EQ(b->base_version(), a->version());
  EXPECT_EQ(b->version(), source.store->version());
  EXPECT_EQ(b->records(), 2u * 250);  // rows 350..599 of both tables
  ASSERT_EQ(b->files_size(), 1);
  EXPECT_EQ(b->files(0).path(), "shard-0/delta.bin");

  // More updates, then the TTL removes every "item" row not pushed since step 12.
  PushRound(*source.store, Range(500, 700), 20);
  absl::StatusOr<EvictionReport> evicted = source.store->Evict(20);
  ASSERT_TRUE(evicted.ok()) << evicted.status();
  EXPECT_EQ(evicted->rows_removed, 499u);  // item 1..499 were last pushed at step <= 12
  auto c = WriteDeltaSnapshot(*source.store, *source.backend, b->version(), Path("C"), "shard-0");
  ASSERT_TRUE(c.ok()) << c.status();
  auto d = WriteFullSnapshot(*source.store, *source.backend, Path("D"), "shard-0");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->version(), c->version());

  const auto live = Checksums(*source.store);
  EXPECT_EQ(live.at("item").rows, 200u);
  EXPECT_EQ(live.at("user").rows, 699u);

  ImportReport chain_report;
  Shard from_chain =
      ImportInto(Path("t_chain"), {{Path("A"), {*a}}, {Path("B"), {*b}}, {Path("C"), {*c}}},
                 OwnsAll, &chain_report);
  Shard from_full = ImportInto(Path("t_full"), {{Path("D"), {*d}}}, OwnsAll);
  ASSERT_NE(from_chain.store, nullptr);
  ASSERT_NE(from_full.store, nullptr);
  EXPECT_GT(chain_report.tombstones, 0u);
  EXPECT_EQ(chain_report.version, source.store->version());
  ExpectSameChecksums(live, Checksums(*from_chain.store), "chain");
  ExpectSameChecksums(live, Checksums(*from_full.store), "full");
  EXPECT_EQ(from_chain.store->version(), source.store->version());
  EXPECT_EQ(from_full.store->version(), source.store->version());
}

// Sums of checksums per table over `shards`.
std::map<std::string, TableChecksum> SumOf(const std::vector<Shard*>& shards) {
  std::map<std::string, TableChecksum> total;
  for (Shard* shard : shards) {
    for (const auto& [table, sum] : Checksums(*shard->store)) {
      total[table].rows += sum.rows;
      total[table].digest += sum.digest;
    }
  }
  return total;
}

TEST_F(SnapshotTest, ImportSplitsOneShardByOwnedSlots) {
  Shard source = OpenShard(Path("source"));
  PushRound(*source.store, Range(1, 1500), 1);
  const FullAndDelta snaps = SnapshotAround(
      source, Path("ckpt"), [&] { PushRound(*source.store, Range(1000, 2000), 10); },
      Path("ckpt2"));
  ASSERT_EQ(snaps.delta.kind(), v1::ShardSnapshot::DELTA);
  const auto want = Checksums(*source.store);
  const std::vector<SnapshotChainLink> chain = {{Path("ckpt"), {snaps.full}},
                                                {Path("ckpt2"), {snaps.delta}}};

  for (uint32_t n : {2u, 3u}) {
    std::vector<Shard> targets;
    uint64_t rows = 0;
    for (uint32_t k = 0; k < n; ++k) {
      ImportReport report;
      targets.push_back(ImportInto(
          Path("t" + std::to_string(n) + "_" + std::to_string(k)), chain,
          [n, k](uint32_t slot) { return slot % n == k; }, &report));
      ASSERT_NE(targets.back().store, nullptr);
      rows += Checksums(*targets.back().store).at("user").rows;
      EXPECT_LT(Checksums(*targets.back().store).at("user").rows, want.at("user").rows);
    }
    std::vector<Shard*> all;
    for (Shard& t : targets) all.push_back(&t);
    ExpectSameChecksums(want, SumOf(all), "split into " + std::to_string(n));
    EXPECT_EQ(rows, want.at("user").rows);
  }
}

TEST_F(SnapshotTest, ImportMergesThreeShardsIntoOne) {
  constexpr uint32_t kShards = 3;
  std::vector<Shard> sources;
  for (uint32_t k = 0; k < kShards; ++k) {
    sources.push_back(OpenShard(Path("source" + std::to_string(k))));
  }
  // Every ID goes only to the shard that owns its slot (slot % 3).
  auto push_owned = [&](const std::vector<uint64_t>& ids, int64_t step, int times) {
    for (const std::string table : {"item", "user"}) {
      const uint64_t seed = sources[0].store->GetTableConfig(table)->seed();
      std::vector<std::vector<uint64_t>> by_shard(kShards);
      for (uint64_t id : ids) by_shard[SlotOf(seed, id) % kShards].push_back(id);
      for (uint32_t k = 0; k < kShards; ++k) {
        if (by_shard[k].empty()) continue;
        for (int t = 0; t < times; ++t) Push(*sources[k].store, table, by_shard[k], step + t);
      }
    }
  };
  push_owned(Range(1, 900), 1, 3);
  // One sighting short of admission in "item", on a shard other than the lowest (whose
  // sketch alone would not know the ID).
  const uint64_t item_seed = sources[0].store->GetTableConfig("item")->seed();
  uint64_t almost = 424242;
  while (SlotOf(item_seed, almost) % kShards != 2) ++almost;
  push_owned({almost}, 4, 2);
  // Uneven traffic: the shards' versions differ.
  push_owned(Range(1, 50), 7, 1);

  std::vector<SnapshotChainLink> chain(2);
  chain[0].checkpoint_dir = Path("full");
  chain[1].checkpoint_dir = Path("delta");
  for (uint32_t k = 0; k < kShards; ++k) {
    auto snap = WriteFullSnapshot(*sources[k].store, *sources[k].backend, chain[0].checkpoint_dir,
                                  "shard-" + std::to_string(k));
    ASSERT_TRUE(snap.ok()) << snap.status();
    snap->set_shard_id(k);
    chain[0].shards.push_back(*snap);
  }
  push_owned(Range(800, 1200), 10, 3);
  uint64_t max_version = 0;
  for (uint32_t k = 0; k < kShards; ++k) {
    auto snap =
        WriteDeltaSnapshot(*sources[k].store, *sources[k].backend, chain[0].shards[k].version(),
                           chain[1].checkpoint_dir, "shard-" + std::to_string(k));
    ASSERT_TRUE(snap.ok()) << snap.status();
    snap->set_shard_id(k);
    chain[1].shards.push_back(*snap);
    max_version = std::max(max_version, sources[k].store->version());
  }
  std::vector<Shard*> all;
  for (Shard& s : sources) all.push_back(&s);
  const auto want = SumOf(all);
  EXPECT_EQ(want.at("user").rows, 1200u);

  ImportReport report;
  Shard merged = ImportInto(Path("merged"), chain, OwnsAll, &report);
  ASSERT_NE(merged.store, nullptr);
  ExpectSameChecksums(want, Checksums(*merged.store), "merged");
  EXPECT_EQ(report.version, max_version);
  EXPECT_EQ(merged.store->version(), max_version);
  // The summed sketch remembers both sightings of `almost` from its owner shard.
  EXPECT_FALSE(merged.store->ReadRow("item", almost)->stored);
  Push(*merged.store, "item", {almost}, 20);
  EXPECT_TRUE(merged.store->ReadRow("item", almost)->stored);
}

TEST_F(SnapshotTest, RowsOfSlotsTheShardDidNotOwnAreIgnored) {
  // Shard k owns the slots s with s % 2 == k in the checkpoint's map.
  std::vector<uint32_t> owners(kNumSlots);
  for (uint32_t slot = 0; slot < kNumSlots; ++slot) owners[slot] = slot % 2;
  std::vector<Shard> sources;
  for (int k = 0; k < 2; ++k) sources.push_back(OpenShard(Path("source" + std::to_string(k))));
  const uint64_t seed = sources[0].store->GetTableConfig("item")->seed();
  std::vector<std::vector<uint64_t>> by_owner(2);
  for (uint64_t id : Range(1, 600)) by_owner[owners[SlotOf(seed, id)]].push_back(id);
  for (int k = 0; k < 2; ++k) {
    for (int64_t step = 1; step <= 3; ++step) Push(*sources[k].store, "item", by_owner[k], step);
  }
  std::vector<Shard*> all = {&sources[0], &sources[1]};
  const auto want = SumOf(all);
  // Shard 1 also holds rows of shard 0's slots, as a half-finished slot migration
  // leaves them on its target.
  for (int64_t step = 1; step <= 3; ++step) Push(*sources[1].store, "item", by_owner[0], step + 5);

  std::vector<SnapshotChainLink> chain(1);
  chain[0].checkpoint_dir = Path("full");
  for (uint32_t k = 0; k < 2; ++k) {
    auto snap = WriteFullSnapshot(*sources[k].store, *sources[k].backend, chain[0].checkpoint_dir,
                                  "shard-" + std::to_string(k));
    ASSERT_TRUE(snap.ok()) << snap.status();
    snap->set_shard_id(k);
    chain[0].shards.push_back(*snap);
  }
  chain[0].owners = owners;
  Shard merged = ImportInto(Path("merged"), chain, OwnsAll);
  ASSERT_NE(merged.store, nullptr);
  EXPECT_EQ(Checksums(*merged.store).at("item").rows, want.at("item").rows);
  EXPECT_EQ(Checksums(*merged.store).at("item").digest, want.at("item").digest);
  // Without the map both copies would be imported, the stray one possibly winning.
  chain[0].owners.clear();
  Shard unfiltered = ImportInto(Path("unfiltered"), chain, OwnsAll);
  EXPECT_NE(Checksums(*unfiltered.store).at("item").digest, want.at("item").digest);
}

}  // namespace
}  // namespace ember
