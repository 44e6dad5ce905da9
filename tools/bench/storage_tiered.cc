// Copyright 2026 The Ember Authors.
//
// Storage suite, phase 2: the RocksDB-backed store against plain MultiGet on the same
// database (storage_bench.h).
//
// Before anything is measured, every database file is read once, so block-cache misses
// are served from the OS page cache on every run, fresh or reused (a reused database
// the OS had partly dropped made the tiered pull 2x slower in one run).
//
// Warm-up: both sides first run the same fresh Zipf stream (not the measured keys) of
// kWarmupPasses x the rows the memory tier holds, and for at least --warmup seconds.
// A CLOCK tier of 10% of 10M rows under Zipf(1.1) reaches its steady hit rate (~91% in
// simulation) after ~8 passes; a 2 s warm-up measured a half-empty tier (~83%). The
// block cache gets the same stream. The two sides are then measured with their
// repetitions interleaved, so a change of load on the machine hits both alike.

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/slot.h"
#include "common/status_macros.h"
#include "server/store/embedding_store.h"
#include "server/store/rocksdb_backend.h"
#include "server/store/row_layout.h"
#include "tools/bench/storage_bench.h"
#include "tools/bench/zipf.h"

namespace ember::bench::storage {
namespace {

constexpr int64_t kWarmupPasses = 8;

using BatchOp = std::function<absl::Status(absl::Span<const uint64_t> ids)>;

// Feeds `op` batches of a fresh Zipf stream until `keys` keys and `min_seconds` have
// passed. Returns the seconds taken.
absl::StatusOr<double> WarmUp(const std::string& what, const BatchOp& op, uint64_t rows, double s,
                              uint64_t seed, int64_t keys, double min_seconds) {
  EMBER_ASSIGN_OR_RETURN(ZipfSampler zipf, ZipfSampler::Create(rows, s, seed));
  Log("storage", absl::StrFormat("warming %s: %d keys, at least %.1f s", what, keys, min_seconds));
  std::vector<uint64_t> ids(kBatch);
  const auto start = std::chrono::steady_clock::now();
  double next_log = 10;
  for (int64_t done = 0; done < keys || SecondsSince(start) < min_seconds;
       done += static_cast<int64_t>(kBatch)) {
    for (uint64_t& id : ids) id = IdOfRank(zipf.Next());
    EMBER_RETURN_IF_ERROR(op(ids));
    if (SecondsSince(start) >= next_log) {
      Log("storage", absl::StrFormat("warming %s: %d/%d keys", what, done, keys));
      next_log += 10;
    }
  }
  return SecondsSince(start);
}

double HitRate(const StoreStats& before, const StoreStats& after) {
  const double hits = static_cast<double>(after.memory_hits - before.memory_hits);
  const double misses = static_cast<double>(after.memory_misses - before.memory_misses);
  return hits + misses > 0 ? hits / (hits + misses) : 0.0;
}

// Populates the store (or reuses the database of an earlier run), waits for RocksDB
// to settle and reads the database files into the page cache.
absl::Status PrepareDatabase(const BenchOptions& options, const BenchDir& dir, bool reuse,
                             const std::string& marker, const std::string& db_path,
                             const std::vector<float>& grads, EmbeddingStore& store,
                             RocksDbBackend& backend, Figures& figures) {
  double populate_s = 0;
  if (reuse) {
    Log("storage", "reusing the database in " + dir.path());
  } else {
    const auto start = std::chrono::steady_clock::now();
    EMBER_RETURN_IF_ERROR(
        Populate(store, kTable, options.rows_large, kBatch, kDim, grads, "populate large"));
    EMBER_RETURN_IF_ERROR(store.Flush());
    populate_s = SecondsSince(start);
    if (!dir.scratch()) EMBER_RETURN_IF_ERROR(dir.WriteMarker(marker));
    Log("storage", absl::StrFormat("populated and flushed in %.1f s", populate_s));
  }
  Log("storage", "waiting for RocksDB flushes and compactions to finish");
  if (!WaitForQuiescence(backend.db(), 600)) {
    Log("storage", "RocksDB still compacting after 600 s; measuring anyway");
  }
  // Block-cache misses of both sides are then served from memory, as on a fresh run
  // (the files were just written), not from whatever the OS kept of a reused database.
  const auto read_start = std::chrono::steady_clock::now();
  EMBER_ASSIGN_OR_RETURN(const int64_t db_bytes, ReadFilesUnder(db_path));
  Log("storage", absl::StrFormat("read %d database bytes into the page cache in %.1f s", db_bytes,
                                 SecondsSince(read_start)));
  figures.AddBool("populate_large_reused", reuse);
  figures.AddNumber("populate_large_seconds", populate_s);
  return absl::OkStatus();
}

}  // namespace

absl::Status RunTiered(const BenchOptions& options, const BenchDir& dir, bool reuse,
                       const std::string& marker, double memory_per_row, Figures& figures) {
  const uint64_t rows = static_cast<uint64_t>(options.rows_large);
  const int64_t budget = static_cast<int64_t>(
      std::llround(options.budget_fraction * static_cast<double>(rows) * memory_per_row));
  const int64_t tier_rows = static_cast<int64_t>(static_cast<double>(budget) / memory_per_row);
  const int64_t warmup_keys = std::max<int64_t>(kWarmupPasses * tier_rows, kBatch);
  figures.AddInt("memory_budget_bytes", budget);
  figures.AddInt("rocksdb_block_cache_bytes", budget);

  Log("storage", absl::StrFormat("generating Zipf(%g) stream over %d rows", options.zipf, rows));
  EMBER_ASSIGN_OR_RETURN(const std::vector<uint64_t> zipf_ids,
                         ZipfIds(rows, options.zipf, kPoolKeys, options.seed + 1));
  const std::vector<float> grads = RandomGradients(kBatch * kDim, options.seed + 2);

  // Plain RocksDB gets a block cache as large as the store's memory tier.
  const std::string db_path = dir.path() + "/db";
  EMBER_ASSIGN_OR_RETURN(TieredStore tiered,
                         OpenTieredStore(db_path, budget, budget, options.frequency_admission));
  RocksDbBackend* const backend = tiered.backend;
  std::unique_ptr<EmbeddingStore>& store = tiered.store;
  EMBER_RETURN_IF_ERROR(store->CreateTable(BenchTable()));
  EMBER_ASSIGN_OR_RETURN(const v1::TableConfig config, store->GetTableConfig(kTable));
  EMBER_ASSIGN_OR_RETURN(const BackendTable table, backend->OpenTable(kTable));

  EMBER_RETURN_IF_ERROR(
      PrepareDatabase(options, dir, reuse, marker, db_path, grads, *store, *backend, figures));
  figures.AddInt("tiered_disk_bytes", backend->DiskBytes());

  std::vector<float> out(kBatch * kDim);
  const BatchOp pull = [&](absl::Span<const uint64_t> ids) {
    return store->Pull(kTable, ids, absl::MakeSpan(out));
  };
  std::vector<std::string> keys(kBatch, std::string(kRowKeySize, '\0'));
  std::vector<std::string> values;
  std::vector<bool> found;
  const BatchOp multiget = [&](absl::Span<const uint64_t> ids) -> absl::Status {
    for (size_t i = 0; i < ids.size(); ++i) {
      EncodeRowKey(SlotOf(config.seed(), ids[i]), ids[i], keys[i].data());
    }
    EMBER_RETURN_IF_ERROR(backend->MultiGet(table, keys, &values, &found));
    // Hand out the embeddings as Pull does.
    for (size_t i = 0; i < ids.size(); ++i) {
      if (!found[i] || values[i].size() < sizeof(RowMeta) + kDim * sizeof(float)) {
        return absl::InternalError(absl::StrCat("row of id ", ids[i], " not in RocksDB"));
      }
      std::memcpy(out.data() + i * kDim, values[i].data() + sizeof(RowMeta), kDim * sizeof(float));
    }
    return absl::OkStatus();
  };
  KeyStream tiered_ids(&zipf_ids, kBatch);
  const BenchCase tiered_case = {"pull_zipf_10m_tiered", kBatch,
                                 [&] { return pull(tiered_ids.Next()); }};
  KeyStream multiget_ids(&zipf_ids, kBatch);
  const BenchCase multiget_case = {"rocksdb_multiget_zipf_10m", kBatch,
                                   [&] { return multiget(multiget_ids.Next()); }};
  const uint64_t warmup_seed = options.seed + 3;

  EMBER_ASSIGN_OR_RETURN(const double tiered_warmup_s,
                         WarmUp("the tiered store", pull, rows, options.zipf, warmup_seed,
                                warmup_keys, options.warmup_s));
  EMBER_ASSIGN_OR_RETURN(const double multiget_warmup_s,
                         WarmUp("plain MultiGet", multiget, rows, options.zipf, warmup_seed,
                                warmup_keys, options.warmup_s));
  // Measured together, repetitions interleaved: a load change on the machine hits
  // both sides alike instead of skewing their ratio. MultiGet leaves the memory tier
  // alone, so the hit rate below is the tiered side's.
  const StoreStats before = store->Stats();
  const BenchCase cases[] = {tiered_case, multiget_case};
  EMBER_ASSIGN_OR_RETURN(auto results, RunCases(cases, MeasureConfig(options, 0)));
  const StoreStats after = store->Stats();
  figures.AddNumber("pull_zipf_10m_tiered_keys_per_sec", results[tiered_case.name].keys_per_sec);
  figures.AddNumber("rocksdb_multiget_zipf_10m_keys_per_sec",
                    results[multiget_case.name].keys_per_sec);
  figures.AddNumber("tiered_memory_hit_rate", HitRate(before, after));
  figures.AddBool("tiered_frequency_admission", options.frequency_admission);
  figures.AddInt("tiered_not_admitted",
                 static_cast<int64_t>(after.memory_not_admitted - before.memory_not_admitted));
  figures.AddInt("tiered_rows_in_memory", after.rows_in_memory);
  figures.AddInt("tiered_memory_bytes", after.memory_bytes);
  figures.AddInt("tiered_warmup_keys", warmup_keys);
  figures.AddNumber("tiered_warmup_seconds", tiered_warmup_s);
  figures.AddNumber("rocksdb_warmup_seconds", multiget_warmup_s);
  figures.AddNumber("pull_zipf_10m_tiered_cv", results[tiered_case.name].cv);
  figures.AddNumber("rocksdb_multiget_zipf_10m_cv", results[multiget_case.name].cv);
  Log("storage", dir.scratch() ? "closing the tiered store and removing " + dir.path()
                               : "closing the tiered store; keeping " + dir.path());
  return absl::OkStatus();
}

}  // namespace ember::bench::storage
