// Copyright 2026 The Ember Authors.
//
// EmbeddingStore: every embedding row a PS shard owns, for every table.
//
// Rows live in a memory tier (a striped hash map bounded by a byte budget) over a
// RowBackend that holds every stored row (RocksDB in production). Pushes apply the
// table's server-side optimizer; every applied row update takes the next value of
// the shard's monotonic version and is recorded in the change log that followers and
// migration read "after version V".
//
// Semantics:
//  * Pull never creates a row. An ID without a stored row reads as its deterministic
//    init vector, a pure function of (table seed, id).
//  * Push counts a sighting of each ID. An ID without a row gets one (from its init
//    vector) once its sketch count reaches the table's admission.min_count; before
//    that its gradient is dropped (counted in Stats().rejected_unadmitted).
//  * Duplicate IDs in one push are summed: the optimizer sees the sum of their
//    gradients once, and the row's count grows by the number of occurrences.
//  * Bad input (unknown table, empty or oversized batch, wrong length, NaN/Inf
//    gradient, a gradient above 2^40 whose update would make a row or its optimizer
//    state non-finite) returns an error and changes nothing. Stored rows and optimizer
//    states stay finite: an update that would overflow is never written.
//  * Backend errors are returned as statuses; the process never aborts on them. A
//    failed write-back keeps the rows dirty in memory, so nothing acknowledged is lost.
//
// Thread-safety: all methods may be called concurrently.
//
// Example:
//   EMBER_ASSIGN_OR_RETURN(auto store, EmbeddingStore::Open(options, std::move(backend)));
//   EMBER_RETURN_IF_ERROR(store->CreateTable(config));
//   std::vector<float> out(ids.size() * config.dim());
//   EMBER_RETURN_IF_ERROR(store->Pull("item", ids, absl::MakeSpan(out)));

#ifndef EMBER_SERVER_STORE_EMBEDDING_STORE_H_
#define EMBER_SERVER_STORE_EMBEDDING_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "ember/v1/table.pb.h"
#include "server/store/internal/change_log.h"
#include "server/store/row_backend.h"
#include "server/store/row_layout.h"

namespace ember {

class EmbeddingTable;
class MemoryBudget;
struct StoreCounters;

struct StoreOptions {
  // Upper bound on bytes held by the memory tier across all tables (rows, their
  // headers and index entries). Rows beyond it are written back (if dirty) and dropped
  // from memory, least recently used first (CLOCK). 0 means unlimited.
  // Default: 1 GiB.
  int64_t memory_budget_bytes = int64_t{1} << 30;

  // When write-backs fail and the tier cannot shrink, pushes that would add rows are
  // refused with RESOURCE_EXHAUSTED once it holds this multiple of the budget.
  // Default: 1.1.
  double memory_hard_limit_factor = 1.1;

  // Lock stripes per table: more stripes, less contention. Power of two in [1, 4096].
  // Default: 64.
  int num_stripes = 64;

  // Largest accepted batch (keys per Pull or Push). Default: 1 << 20.
  uint32_t max_batch_keys = 1u << 20;

  // Change-log entries retained in memory for ReadChanges. Default: 1 << 20.
  size_t change_log_capacity = 1u << 20;

  // While the budget is full, a row a pull reads from the backend enters the memory
  // tier only if its ID was seen more often than the row it would push out
  // (TinyLFU-style; memory_tier.h). false: every row read enters (plain CLOCK).
  // Default: false (opt in: it did not pay on the 10M-row benchmark, and its sketch
  // takes up to 1/16 of a small tier; docs/PERFORMANCE.md).
  bool frequency_admission = false;

  // A memory budget shared with other stores (NewMemoryBudget): their memory tiers
  // together stay within its limit (a table evicts its own rows while the total is
  // over it: the first to fill it keeps what it holds), and memory_budget_bytes is
  // ignored. Stats().memory_bytes is then the shared total. ember-ps shares one
  // between the default store and every job's (server/ps/job_store.h).
  // Default: null (the store's own budget of memory_budget_bytes).
  std::shared_ptr<MemoryBudget> shared_budget;
};

// A budget of `limit_bytes` (0: unlimited) for StoreOptions::shared_budget.
std::shared_ptr<MemoryBudget> NewMemoryBudget(int64_t limit_bytes);

// A full row as stored: meta, embedding and optimizer state.
struct RowSnapshot {
  RowMeta meta;
  std::vector<float> embedding;
  std::vector<float> state;
  bool stored = false;  // false: the ID has no row and reads as its init vector
};

struct TableStats {
  std::string name;
  uint32_t dim = 0;
  uint32_t state_floats = 0;
  int64_t rows_in_memory = 0;
  int64_t held_bytes = 0;  // exact bytes of arenas, index and bookkeeping
};

struct StoreStats {
  int64_t memory_bytes = 0;       // bytes charged to the memory budget
  int64_t memory_held_bytes = 0;  // exact bytes the memory tier holds (sum of tables)
  int64_t memory_budget_bytes = 0;
  int64_t rows_in_memory = 0;
  int64_t disk_bytes = 0;
  uint64_t version = 0;
  uint64_t pulled_keys = 0;
  uint64_t pushed_keys = 0;
  uint64_t memory_hits = 0;    // keys found in the memory tier
  uint64_t memory_misses = 0;  // keys looked up in the backend
  // Misses answered from the backend's bytes without entering the memory tier
  // (StoreOptions::frequency_admission).
  uint64_t memory_not_admitted = 0;
  uint64_t admitted = 0;             // rows created by admission
  uint64_t rejected_unadmitted = 0;  // pushed keys dropped by admission
  uint64_t evicted_to_backend = 0;   // rows dropped from memory (written back if dirty)
  uint64_t evicted_by_policy = 0;    // rows removed by TTL/frequency (tombstones)
  uint64_t writeback_errors = 0;
  // Row updates left out (the row kept its floats) because a concurrent push changed
  // the row after this push checked it and the update would then have overflowed.
  uint64_t not_finite_updates = 0;
  std::vector<TableStats> tables;
};

struct EvictionReport {
  uint64_t rows_removed = 0;
  uint64_t rows_scanned = 0;
  uint64_t rows_decayed = 0;  // kept rows whose count decayed (each a change-log entry)
};

// An order-independent digest of one table's stored rows. `digest` is the sum (mod
// 2^64) over stored rows of a 64-bit hash of (id, last_seen_step, count, embedding,
// optimizer state); the shard-local `version` and memory-tier flags are left out, so
// digests of the same model on different numbers of shards add up to the same value.
// Which slots an operation covers (true: covered).
using SlotFilter = std::function<bool(uint32_t slot)>;

struct TableChecksum {
  std::string table;
  uint64_t rows = 0;
  uint64_t digest = 0;
};

// A stored row in its backend encoding (row_layout.h: RowMeta, then the embedding, then
// the optimizer state; memory-tier flags cleared). An empty value is a tombstone: the
// row does not exist.
struct EncodedRow {
  uint64_t id = 0;
  std::string value;
};

// One page of EmbeddingStore::ExportSlotRows.
struct RowPage {
  std::vector<EncodedRow> rows;
  std::string next_cursor;  // empty: no more rows in the range
};

class EmbeddingStore {
 public:
  // Opens a store over `backend`. Restores the version counter and admission sketches
  // persisted by the last Flush. Tables must be (re)created with CreateTable before use.
  // Errors: INVALID_ARGUMENT for bad options; backend errors.
  static absl::StatusOr<std::unique_ptr<EmbeddingStore>> Open(const StoreOptions& options,
                                                              std::unique_ptr<RowBackend> backend);

  // Flushes (best effort) and closes. Call Close() to see the flush's status.
  ~EmbeddingStore();

  EmbeddingStore(const EmbeddingStore&) = delete;
  EmbeddingStore& operator=(const EmbeddingStore&) = delete;

  // Creates `config.name`, or returns OK if it exists with an equal config (defaults
  // filled in). Errors: INVALID_ARGUMENT for an invalid config; ALREADY_EXISTS if the
  // name exists (in memory or on disk) with a different dim, optimizer or seed.
  absl::Status CreateTable(const v1::TableConfig& config);

  // The table's config with defaults filled in. NOT_FOUND for an unknown table.
  absl::StatusOr<v1::TableConfig> GetTableConfig(absl::string_view table) const;
  std::vector<std::string> ListTables() const;

  // Writes the embedding of ids[i] to out[i * dim, (i + 1) * dim). With `unknown`
  // (resized to ids.size()), (*unknown)[i] is 1 when ids[i] has no stored row and read
  // as its init vector, else 0.
  // Errors: NOT_FOUND (table), INVALID_ARGUMENT (empty/oversized batch,
  // out.size() != ids.size() * dim), backend read errors. `out` is unspecified on error.
  absl::Status Pull(absl::string_view table, absl::Span<const uint64_t> ids, absl::Span<float> out,
                    std::vector<uint8_t>* unknown = nullptr);

  // Applies grads[i * dim, (i + 1) * dim) to ids[i] with the table's optimizer at
  // training step `step`. Errors as for Pull, plus INVALID_ARGUMENT for a NaN/Inf
  // gradient, or for a gradient above 2^40 in magnitude when an update of the push
  // would make a row or its optimizer state NaN/Inf (every update is then checked
  // before anything is written), and RESOURCE_EXHAUSTED when the memory tier is full
  // and cannot shrink. On error nothing was applied. An update that would still
  // overflow (smaller gradients on a row already near 3.4e38, or a row a concurrent
  // push changed after the check) leaves that row's floats as they were while the rest
  // of the push applies (Stats().not_finite_updates).
  absl::Status Push(absl::string_view table, absl::Span<const uint64_t> ids,
                    absl::Span<const float> grads, int64_t step);

  // Reads the whole row of `id` (memory tier first, then the backend).
  absl::StatusOr<RowSnapshot> ReadRow(absl::string_view table, uint64_t id);

  // Runs every table's eviction policy (TTL / minimum count / decay) against
  // `current_step` over rows in memory and in the backend. Removed rows get a
  // tombstone in the change log.
  absl::StatusOr<EvictionReport> Evict(int64_t current_step);

  // Writes every dirty row, the version counter and the admission sketches to the
  // backend and makes them durable. On error the rows stay dirty in memory. With a
  // `spread`, the write-back pauses between lock stripes so that it takes about that
  // long in all, leaving CPU to concurrent callers (a serving follower's applies).
  absl::Status Flush(absl::Duration spread = absl::ZeroDuration());

  // Flush(), then refuse further calls with FAILED_PRECONDITION.
  absl::Status Close();

  // Change-log entries with version > after_version, oldest first, at most `max`.
  // OUT_OF_RANGE if entries after `after_version` were already dropped (the reader
  // must re-bootstrap from a checkpoint).
  absl::StatusOr<ChangeBatch> ReadChanges(uint64_t after_version, size_t max) const;

  // Writes dirty rows back, then digests every stored row of `table` (see
  // TableChecksum) in the slots `counted` accepts (every slot when null: a shard passes
  // the slots it owns, so rows copied in by a move in flight, or not yet dropped after
  // one, are not counted twice across shards). Consistent only while no push is applied
  // concurrently. NOT_FOUND for an unknown table; backend errors.
  absl::StatusOr<TableChecksum> Checksum(absl::string_view table,
                                         const SlotFilter& counted = nullptr);

  // Appends a kSlotsGainedMarker entry for [first_slot, last_slot] to the change log
  // (the shard now owns those slots; the update stream resyncs them there). Returns
  // its version.
  uint64_t RecordSlotsGained(uint32_t first_slot, uint32_t last_slot);

  // The version of the newest applied update.
  uint64_t version() const;

  // Blocks until version() is above `version` or `timeout` passed; returns version().
  uint64_t WaitForVersionAbove(uint64_t version, absl::Duration timeout) const;

  StoreStats Stats() const;

  // ------------------------------------------------------------------ Slot migration
  //
  // Moving slots between shards: the source pages its rows out with ExportSlotRows,
  // the destination writes them with ImportRows, the source's later changes are
  // caught up through ReadChanges + ReadEncodedRows, and the old owner finally drops
  // the slots with DropSlots. Implemented in embedding_store_migrate.cc.
  //
  // ImportRows and DropSlots are for slots this shard does not serve: the caller must
  // not Pull, Push or ReadRow their ids meanwhile (a load racing with them may bring a
  // stale copy back into memory), nor run Evict concurrently with them (its pass over
  // the backend rewrites rows it read earlier). Everything else here may run
  // concurrently with Pull/Push of any slot. All but EstimatedStoredRows return
  // FAILED_PRECONDITION after Close.
  //
  // Example (source S, destination D, one table, slots [a, b]):
  //   const uint64_t from = S.version();
  //   std::string cursor;
  //   do {
  //     EMBER_ASSIGN_OR_RETURN(RowPage page, S.ExportSlotRows("item", a, b, cursor, 4096));
  //     EMBER_RETURN_IF_ERROR(D.ImportRows("item", page.rows));
  //     cursor = page.next_cursor;
  //   } while (!cursor.empty());
  //   // Then: S.ReadChanges(from, ...) -> ids of [a, b] -> S.ReadEncodedRows -> D.ImportRows.

  // Up to `max_rows` stored rows of `table` whose slot is in [first_slot, last_slot], in
  // backend key order (slot, then id), starting after `cursor` (empty: from the start
  // of the range; otherwise the next_cursor of the previous page of the same range,
  // an opaque string). Values are current: a row resident in the memory tier is read
  // from there.
  //
  // Memory-only rows: the first page (empty cursor) writes every dirty row of the range
  // back to the backend first (and waits for write-backs in flight), so the pages
  // together list every row stored when the first page was requested, each exactly
  // once, with a value at least as new as at that moment. Rows stored or changed later
  // may be missed or listed with an older value; ReadChanges(after the version() read
  // before the first page) names every one of them.
  //
  // Errors: INVALID_ARGUMENT for last_slot < first_slot, last_slot >= kNumSlots,
  // max_rows == 0 or a malformed cursor (or one outside the range); NOT_FOUND for an
  // unknown table; DATA_LOSS for a malformed stored row; UNAVAILABLE if a write-back
  // of a row of the range stays in flight for seconds; backend errors.
  absl::StatusOr<RowPage> ExportSlotRows(absl::string_view table, uint32_t first_slot,
                                         uint32_t last_slot, absl::string_view cursor,
                                         size_t max_rows);

  // The current stored row of each of `ids` (memory tier first, then the backend), in
  // the order of `ids`; an empty value for an id without a stored row. Reading does
  // not load rows into the memory tier. Errors: NOT_FOUND (table), DATA_LOSS for a
  // malformed stored row, backend errors.
  absl::StatusOr<std::vector<EncodedRow>> ReadEncodedRows(absl::string_view table,
                                                          absl::Span<const uint64_t> ids);

  // Overwrites whole rows of `table` with `rows` (values as produced by ExportSlotRows or
  // ReadEncodedRows of a shard with the same table config); an empty value removes the
  // row. For an id given twice the last row wins. Each imported row takes a new version
  // of this store's change log (a tombstone entry for a removal), and the stored
  // RowMeta.version is re-stamped with it; last_seen_step, count, embedding and
  // optimizer state are kept bit for bit.
  //
  // Placement: a row resident in the memory tier is overwritten there and marked dirty
  // (written back like a pushed row, durable after Flush); every other row is written
  // straight to the backend, in one atomic batch per call (durable as the backend's
  // writes are). Rows are not loaded into memory. A later Pull/Push/ReadRow sees the
  // imported value; no write-back of an older copy (in flight or a later CLOCK
  // eviction) can overwrite it.
  //
  // Errors: INVALID_ARGUMENT (nothing changed) for a non-empty value whose size is not
  // the table's row size; NOT_FOUND (table); UNAVAILABLE if a write-back of one of the
  // ids stays in flight for seconds; backend errors. After an error some rows may be
  // imported and others not (each listed in the change log); retrying is safe.
  absl::Status ImportRows(absl::string_view table, absl::Span<const EncodedRow> rows);

  // Removes every row of every table whose slot is in [first_slot, last_slot] from the
  // memory tier (dirty rows included: they are never written back) and from the backend
  // (one range delete per table). Writes no change-log entries: the slots changed owner,
  // not value. Returns the number of stored rows removed (memory-only rows included).
  // Errors: INVALID_ARGUMENT for last_slot < first_slot or last_slot >= kNumSlots;
  // UNAVAILABLE as for ImportRows; backend errors (the drop may then be partial;
  // retrying is safe).
  absl::StatusOr<uint64_t> DropSlots(uint32_t first_slot, uint32_t last_slot);

  // Stored rows per slot (kNumSlots entries) summed over all tables, memory-only rows
  // included: writes dirty rows back first, then scans the backend. Exact only while no
  // push is applied concurrently. Errors: DATA_LOSS for a malformed key; backend errors.
  absl::StatusOr<std::vector<uint64_t>> RowsPerSlot();

  // A cheap estimate of the stored rows over all tables (RowBackend::EstimateKeys summed
  // over the tables; rows only in memory are not counted). Never fails: 0 if unknown.
  uint64_t EstimatedStoredRows() const;

 private:
  EmbeddingStore(const StoreOptions& options, std::unique_ptr<RowBackend> backend);
  absl::StatusOr<EmbeddingTable*> FindTable(absl::string_view name) const;
  std::vector<EmbeddingTable*> AllTables() const;
  absl::Status LoadPersistedState();

  const StoreOptions options_;
  const std::unique_ptr<RowBackend> backend_;
  const std::shared_ptr<MemoryBudget> budget_;
  ChangeLog change_log_;
  const std::unique_ptr<StoreCounters> counters_;

  mutable absl::Mutex tables_mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<EmbeddingTable>> tables_
      ABSL_GUARDED_BY(tables_mu_);
  std::vector<std::string> table_names_ ABSL_GUARDED_BY(tables_mu_);  // by table index
  bool closed_ ABSL_GUARDED_BY(tables_mu_) = false;
};

}  // namespace ember

#endif  // EMBER_SERVER_STORE_EMBEDDING_STORE_H_
