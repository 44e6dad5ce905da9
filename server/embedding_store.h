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
//    gradient) returns an error and changes nothing.
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

#ifndef EMBER_SERVER_EMBEDDING_STORE_H_
#define EMBER_SERVER_EMBEDDING_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "ember/v1/table.pb.h"
#include "server/change_log.h"
#include "server/row_backend.h"
#include "server/row_layout.h"

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
};

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
  uint64_t memory_hits = 0;          // keys found in the memory tier
  uint64_t memory_misses = 0;        // keys looked up in the backend
  uint64_t admitted = 0;             // rows created by admission
  uint64_t rejected_unadmitted = 0;  // pushed keys dropped by admission
  uint64_t evicted_to_backend = 0;   // rows dropped from memory (written back if dirty)
  uint64_t evicted_by_policy = 0;    // rows removed by TTL/frequency (tombstones)
  uint64_t writeback_errors = 0;
  std::vector<TableStats> tables;
};

struct EvictionReport {
  uint64_t rows_removed = 0;
  uint64_t rows_scanned = 0;
};

// An order-independent digest of one table's stored rows. `digest` is the sum (mod
// 2^64) over stored rows of a 64-bit hash of (id, last_seen_step, count, embedding,
// optimizer state); the shard-local `version` and memory-tier flags are left out, so
// digests of the same model on different numbers of shards add up to the same value.
struct TableChecksum {
  std::string table;
  uint64_t rows = 0;
  uint64_t digest = 0;
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

  // Writes the embedding of ids[i] to out[i * dim, (i + 1) * dim).
  // Errors: NOT_FOUND (table), INVALID_ARGUMENT (empty/oversized batch,
  // out.size() != ids.size() * dim), backend read errors. `out` is unspecified on error.
  absl::Status Pull(absl::string_view table, absl::Span<const uint64_t> ids, absl::Span<float> out);

  // Applies grads[i * dim, (i + 1) * dim) to ids[i] with the table's optimizer at
  // training step `step`. Errors as for Pull, plus INVALID_ARGUMENT for a NaN/Inf
  // gradient and RESOURCE_EXHAUSTED when the memory tier is full and cannot shrink.
  // On error nothing was applied.
  absl::Status Push(absl::string_view table, absl::Span<const uint64_t> ids,
                    absl::Span<const float> grads, int64_t step);

  // Reads the whole row of `id` (memory tier first, then the backend).
  absl::StatusOr<RowSnapshot> ReadRow(absl::string_view table, uint64_t id);

  // Runs every table's eviction policy (TTL / minimum count / decay) against
  // `current_step` over rows in memory and in the backend. Removed rows get a
  // tombstone in the change log.
  absl::StatusOr<EvictionReport> Evict(int64_t current_step);

  // Writes every dirty row, the version counter and the admission sketches to the
  // backend and makes them durable. On error the rows stay dirty in memory.
  absl::Status Flush();

  // Flush(), then refuse further calls with FAILED_PRECONDITION.
  absl::Status Close();

  // Change-log entries with version > after_version, oldest first, at most `max`.
  // OUT_OF_RANGE if entries after `after_version` were already dropped (the reader
  // must re-bootstrap from a checkpoint).
  absl::StatusOr<ChangeBatch> ReadChanges(uint64_t after_version, size_t max) const;

  // Writes dirty rows back, then digests every stored row of `table` (see
  // TableChecksum). Consistent only while no push is applied concurrently.
  // NOT_FOUND for an unknown table; backend errors.
  absl::StatusOr<TableChecksum> Checksum(absl::string_view table);

  // The version of the newest applied update.
  uint64_t version() const;

  StoreStats Stats() const;

 private:
  EmbeddingStore(const StoreOptions& options, std::unique_ptr<RowBackend> backend);
  absl::StatusOr<EmbeddingTable*> FindTable(absl::string_view name) const;
  std::vector<EmbeddingTable*> AllTables() const;
  absl::Status LoadPersistedState();

  const StoreOptions options_;
  const std::unique_ptr<RowBackend> backend_;
  const std::unique_ptr<MemoryBudget> budget_;
  ChangeLog change_log_;
  const std::unique_ptr<StoreCounters> counters_;

  mutable absl::Mutex tables_mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<EmbeddingTable>> tables_
      ABSL_GUARDED_BY(tables_mu_);
  std::vector<std::string> table_names_ ABSL_GUARDED_BY(tables_mu_);  // by table index
  bool closed_ ABSL_GUARDED_BY(tables_mu_) = false;
};

}  // namespace ember

#endif  // EMBER_SERVER_EMBEDDING_STORE_H_
