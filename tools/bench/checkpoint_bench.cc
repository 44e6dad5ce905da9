// Copyright 2026 The Ember Authors.
//
// `ember-bench checkpoint`: writing and importing shard snapshots
// (server/checkpoint/shard_snapshot.h) of one large table.
//
// One store over RocksDB (WAL off, 512 MiB memory budget) holds rows_large rows of a
// dim-16 Adagrad table (16 accumulator floats per row), populated by pushing every ID
// once in 1000-key batches and flushed; the run then waits for RocksDB to finish its
// compactions, so the snapshot does not compete with them. Measured, once each:
//  1. a FULL snapshot (store flush, RocksDB checkpoint, exact row count, crc32 of
//     every file);
//  2. 1% of the rows (every 100th) pushed once more, then a DELTA snapshot of them;
//  3. import of the full snapshot into a fresh RocksDbBackend (WAL off) owning every
//     slot: crc32 verification, scan, batched writes, final flush;
//  4. import of the full + delta chain into another fresh backend.
// Figure names are documented in docs/PERFORMANCE.md.

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "server/checkpoint/shard_snapshot.h"
#include "server/store/embedding_store.h"
#include "server/store/rocksdb_backend.h"
#include "tools/bench/figures.h"
#include "tools/bench/storage_fixtures.h"
#include "tools/bench/suite.h"
#include "tools/bench/zipf.h"

namespace ember::bench {
namespace {

constexpr char kSuite[] = "checkpoint";
constexpr char kTable[] = "ckpt";
constexpr size_t kDim = 16;
constexpr size_t kBatch = 1000;
constexpr uint64_t kTableSeed = 0xc4e7;
constexpr int64_t kMemoryBudget = int64_t{512} << 20;
// One row in kChangeStride is pushed again before the delta: 1%.
constexpr int64_t kChangeStride = 100;

v1::TableConfig BenchTable() {
  v1::TableConfig config;
  config.set_name(kTable);
  config.set_dim(kDim);
  config.set_seed(kTableSeed);
  config.mutable_optimizer()->set_kind(v1::OptimizerConfig::ADAGRAD);
  return config;
}

// A fresh backend for an import, WAL off as for population: the import ends with a
// flush that makes every row durable.
absl::StatusOr<std::unique_ptr<RocksDbBackend>> OpenTarget(const std::string& path) {
  RocksDbOptions options;
  options.path = path;
  options.enable_wal = false;
  return RocksDbBackend::Open(options);
}

// Imports `chain` into a fresh backend at `path`; checks it wrote `want_rows` rows.
absl::StatusOr<ImportReport> TimedImport(const std::vector<SnapshotChainLink>& chain,
                                         const std::string& path, uint64_t want_rows) {
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<RocksDbBackend> target, OpenTarget(path));
  EMBER_ASSIGN_OR_RETURN(ImportReport report, ImportSnapshots(
                                                  chain, [](uint32_t) { return true; }, *target));
  if (report.rows != want_rows) {
    return absl::InternalError(
        absl::StrCat("import into ", path, " wrote ", report.rows, " rows; expected ", want_rows));
  }
  Log(kSuite, absl::StrFormat("imported %d rows (%d tombstones) into %s in %.1f s", report.rows,
                              report.tombstones, path, report.seconds));
  return report;
}

// Pushes a gradient to every kChangeStride-th of the `rows` rows (1% of them), in
// batches of kBatch, at a step after the population's.
absl::Status ChangeRows(EmbeddingStore& store, int64_t rows, const std::vector<float>& grads) {
  std::vector<uint64_t> ids;
  const int64_t step = rows / static_cast<int64_t>(kBatch) + 10;
  for (int64_t row = 0; row < rows; row += kChangeStride) {
    ids.push_back(IdOfRank(static_cast<uint64_t>(row)));
    if (ids.size() == kBatch || row + kChangeStride >= rows) {
      EMBER_RETURN_IF_ERROR(
          store.Push(kTable, ids, absl::MakeConstSpan(grads).subspan(0, ids.size() * kDim), step));
      ids.clear();
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Figures> RunCheckpointSuite(const BenchOptions& options) {
  Figures figures;
  figures.AddString("suite", kSuite);
  figures.AddInt("rows", options.rows_large);
  figures.AddInt("dim", kDim);
  figures.AddString("optimizer", "adagrad");
  figures.AddInt("memory_budget_bytes", kMemoryBudget);
  figures.AddInt("hardware_threads", std::thread::hardware_concurrency());

  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<BenchDir> dir, BenchDir::Open(options.dir));
  if (!dir->Empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("--dir=", dir->path(),
                     " is not empty; the checkpoint suite needs an "
                     "empty directory (it always populates)"));
  }
  EMBER_ASSIGN_OR_RETURN(TieredStore tiered, OpenTieredStore(dir->path() + "/db", kMemoryBudget));
  RocksDbBackend* const backend = tiered.backend;
  std::unique_ptr<EmbeddingStore>& store = tiered.store;
  EMBER_RETURN_IF_ERROR(store->CreateTable(BenchTable()));

  const std::vector<float> grads = RandomGradients(kBatch * kDim, options.seed);
  auto start = std::chrono::steady_clock::now();
  EMBER_RETURN_IF_ERROR(
      Populate(*store, kTable, options.rows_large, kBatch, kDim, grads, "populate"));
  EMBER_RETURN_IF_ERROR(store->Flush());
  figures.AddNumber("populate_seconds", SecondsSince(start));
  Log(kSuite, "waiting for RocksDB flushes and compactions to finish");
  if (!WaitForQuiescence(backend->db(), 900)) {
    Log(kSuite, "RocksDB still compacting after 900 s; measuring anyway");
  }

  // 1. Full snapshot.
  const std::string ckpt = dir->path() + "/checkpoints";
  EMBER_ASSIGN_OR_RETURN(const v1::ShardSnapshot full,
                         WriteFullSnapshot(*store, *backend, ckpt + "/full", "shard-0"));
  Log(kSuite, absl::StrFormat("full snapshot: %d rows, %d bytes in %d files, %.2f s",
                              full.records(), full.bytes(), full.files_size(), full.seconds()));
  figures.AddNumber("full_snapshot_seconds", full.seconds());
  figures.AddInt("full_snapshot_bytes", static_cast<int64_t>(full.bytes()));
  figures.AddInt("full_snapshot_files", full.files_size());
  figures.AddInt("full_snapshot_records", static_cast<int64_t>(full.records()));

  // 2. 1% of the rows change; delta snapshot.
  start = std::chrono::steady_clock::now();
  EMBER_RETURN_IF_ERROR(ChangeRows(*store, options.rows_large, grads));
  figures.AddNumber("change_push_seconds", SecondsSince(start));
  EMBER_ASSIGN_OR_RETURN(
      const v1::ShardSnapshot delta,
      WriteDeltaSnapshot(*store, *backend, full.version(), ckpt + "/delta", "shard-0"));
  Log(kSuite, absl::StrFormat("delta snapshot: %d records, %d bytes, %.2f s", delta.records(),
                              delta.bytes(), delta.seconds()));
  figures.AddInt("delta_changed_rows", static_cast<int64_t>(delta.records()));
  figures.AddNumber("delta_snapshot_seconds", delta.seconds());
  figures.AddInt("delta_snapshot_bytes", static_cast<int64_t>(delta.bytes()));
  figures.AddNumber("full_vs_delta_bytes",
                    static_cast<double>(full.bytes()) / static_cast<double>(delta.bytes()));
  figures.AddNumber("full_vs_delta_seconds", full.seconds() / delta.seconds());

  // 3. and 4. Imports into fresh backends.
  const std::vector<SnapshotChainLink> full_chain = {{ckpt + "/full", {full}}};
  EMBER_ASSIGN_OR_RETURN(const ImportReport imported,
                         TimedImport(full_chain, dir->path() + "/import-full", full.records()));
  figures.AddNumber("import_full_seconds", imported.seconds);
  figures.AddNumber("import_full_rows_per_sec",
                    static_cast<double>(imported.rows) / imported.seconds);
  const std::vector<SnapshotChainLink> chain = {{ckpt + "/full", {full}},
                                                {ckpt + "/delta", {delta}}};
  EMBER_ASSIGN_OR_RETURN(
      const ImportReport chained,
      TimedImport(chain, dir->path() + "/import-chain", full.records() + delta.records()));
  figures.AddNumber("import_chain_seconds", chained.seconds);
  figures.AddNumber("import_chain_vs_full", chained.seconds / imported.seconds);
  figures.AddInt("rss_bytes", ResidentBytes());
  return figures;
}

}  // namespace

EMBER_BENCH_SUITE(checkpoint, "full and delta shard snapshots of rows_large rows, and their import",
                  RunCheckpointSuite);

}  // namespace ember::bench
