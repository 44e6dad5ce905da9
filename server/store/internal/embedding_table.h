// Copyright 2026 The Ember Authors.
//
// EmbeddingTable: one table's rows on one shard: the memory tier over the backend,
// the optimizer, initializer and admission sketch. EmbeddingStore owns the tables and
// validates arguments; see embedding_store.h for the semantics callers rely on.
//
// Implementation is split by concern: embedding_table.cc (pull, push, load, write-back),
// embedding_table_evict.cc (eviction policy, flush), embedding_table_checksum.cc (digests)
// and embedding_table_migrate.cc (slot migration).
//
// Thread-safe.

#ifndef EMBER_SERVER_STORE_INTERNAL_EMBEDDING_TABLE_H_
#define EMBER_SERVER_STORE_INTERNAL_EMBEDDING_TABLE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "ember/v1/table.pb.h"
#include "server/store/count_min_sketch.h"
#include "server/store/embedding_store.h"
#include "server/store/internal/change_log.h"
#include "server/store/internal/memory_tier.h"
#include "server/store/internal/optimizer.h"
#include "server/store/row_backend.h"

namespace ember {

// Counters shared by every table of a store.
struct StoreCounters {
  std::atomic<uint64_t> pulled_keys{0};
  std::atomic<uint64_t> pushed_keys{0};
  std::atomic<uint64_t> memory_hits{0};
  std::atomic<uint64_t> memory_misses{0};
  std::atomic<uint64_t> memory_not_admitted{0};
  std::atomic<uint64_t> admitted{0};
  std::atomic<uint64_t> rejected_unadmitted{0};
  std::atomic<uint64_t> evicted_to_backend{0};
  std::atomic<uint64_t> evicted_by_policy{0};
  std::atomic<uint64_t> writeback_errors{0};
  // Row updates a push left out because, applied after a concurrent push changed the
  // row, they would have made it non-finite (the push's own check saw them finite).
  std::atomic<uint64_t> not_finite_updates{0};
};

struct TableContext {
  uint32_t index = 0;  // position in the store's table list (ChangeLog::table)
  BackendTable backend_table = 0;
  RowBackend* backend = nullptr;
  MemoryBudget* budget = nullptr;
  ChangeLog* log = nullptr;
  StoreCounters* counters = nullptr;
  uint32_t num_stripes = 64;
  double hard_limit_factor = 1.1;
  bool frequency_admission = false;  // MemoryTier: admission of pulled rows by frequency
};

class EmbeddingTable {
 public:
  // REQUIRES: `config` normalized.
  EmbeddingTable(const v1::TableConfig& config, const TableContext& context);

  const v1::TableConfig& config() const { return config_; }
  uint32_t dim() const { return dim_; }
  uint32_t state_floats() const { return optimizer_->state_floats(); }
  uint32_t index() const { return ctx_.index; }

  // REQUIRES: out.size() == ids.size() * dim(), ids non-empty (checked by the store).
  // `unknown`: null, or ids.size() zeros; set to 1 where an init vector was read.
  absl::Status Pull(absl::Span<const uint64_t> ids, absl::Span<float> out,
                    std::vector<uint8_t>* unknown = nullptr);
  // REQUIRES: grads.size() == ids.size() * dim(). Checks finiteness itself.
  absl::Status Push(absl::Span<const uint64_t> ids, absl::Span<const float> grads, int64_t step);
  absl::StatusOr<RowSnapshot> ReadRow(uint64_t id);

  // Evicts rows from memory (writing dirty ones back) until the store's budget is
  // met or `max_rounds` stripes were visited.
  absl::Status ShrinkToBudget(int max_rounds);
  // Writes every dirty row back; they stay resident.
  // With `spread`, pauses between stripes so the whole pass takes about that long.
  absl::Status FlushDirty(absl::Duration spread = absl::ZeroDuration());
  // FlushDirty, then digests every stored row of the slots `counted` accepts (all when
  // null; EmbeddingStore::Checksum).
  absl::StatusOr<TableChecksum> Checksum(const SlotFilter& counted = nullptr);
  // Runs the eviction policy against `step`; see EvictionConfig.
  absl::StatusOr<EvictionReport> EvictByPolicy(int64_t step);

  // Slot migration (EmbeddingStore's "Slot migration" section; the store validates the
  // arguments). REQUIRES for all: first_slot <= last_slot < kNumSlots.
  // ExportRows: REQUIRES max_rows > 0; `after_key` empty or a row key of the range.
  absl::StatusOr<RowPage> ExportRows(uint32_t first_slot, uint32_t last_slot,
                                     absl::string_view after_key, size_t max_rows);
  absl::StatusOr<std::vector<EncodedRow>> ReadEncoded(absl::Span<const uint64_t> ids);
  // REQUIRES: every non-empty value has row_bytes() bytes.
  absl::Status Import(absl::Span<const EncodedRow> rows);
  // Returns the number of stored rows removed.
  absl::StatusOr<uint64_t> DropSlots(uint32_t first_slot, uint32_t last_slot);
  // FlushDirty, then adds the table's stored rows to per_slot[slot].
  // REQUIRES: per_slot->size() == kNumSlots.
  absl::Status CountRowsPerSlot(std::vector<uint64_t>* per_slot);
  uint64_t EstimatedStoredRows() const;
  size_t row_bytes() const { return tier_.row_bytes(); }

  // Admission sketch persistence (empty string when admission is off).
  std::string SerializeSketch() const;
  absl::Status RestoreSketch(absl::string_view data);

  int64_t ResidentRows() { return tier_.ResidentRows(); }
  int64_t HeldBytes() { return tier_.HeldBytes(); }

 private:
  struct Group;   // keys of one stripe in a batch
  struct Loaded;  // result of reading misses from the backend

  // Sorts batch positions by stripe: order[] holds positions, starts[s]..starts[s+1].
  void GroupByStripe(absl::Span<const uint64_t> ids, std::vector<uint32_t>* order,
                     std::vector<uint32_t>* starts) const;
  std::string Key(uint64_t id) const;
  // Writes a fresh row for `id` (init vector, optimizer state, zero meta) into `row`.
  void InitRow(uint64_t id, char* row) const;
  // Writes back the dirty rows among `victims` of stripe `s` and drops them from memory.
  absl::Status EvictFromStripe(uint32_t s, size_t max_victims);
  absl::Status WriteBackRows(MemoryTier::Stripe& stripe, const std::vector<uint64_t>& ids,
                             const std::vector<std::string>& bytes, bool remove_after);

  // The phases of Pull (embedding_table.cc), in order.
  // Pass 1: copies the resident rows among `ids` into `out` and appends the positions
  // of the others to *misses, by stripe; registers a load on each stripe with misses
  // ((stripe, snapshot) in *loads, its first miss in *miss_starts).
  void PullResident(absl::Span<const uint64_t> ids, absl::Span<const uint32_t> order,
                    absl::Span<const uint32_t> starts, absl::Span<float> out,
                    std::vector<uint32_t>* misses,
                    std::vector<std::pair<uint32_t, uint64_t>>* loads,
                    std::vector<uint32_t>* miss_starts);
  // Pass 2 on one stripe: fills `out` for misses[begin, end) from memory (loaded by
  // someone else), a removal since `snapshot`, the backend's row (inserted) or the
  // init vector (marked in *unknown). A stored row of the wrong size sets *status to
  // DATA_LOSS.
  void PullLoaded(MemoryTier::Stripe& st, uint64_t snapshot, absl::Span<const uint64_t> ids,
                  absl::Span<const uint32_t> misses, uint32_t begin, uint32_t end,
                  const Loaded& loaded, absl::Span<float> out, std::vector<uint8_t>* unknown,
                  absl::Status* status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(st.mu);

  // The phases of Push (embedding_table.cc), in order.
  struct PushKey;  // one distinct id of the batch
  // Applies one key's update to `row` through `scratch` (row_floats_ floats): the
  // floats change only when the result is finite (returns whether it was); the meta
  // (count, step, version, flags) always.
  bool ApplyToRow(char* row, const float* grad, uint32_t occurrences, int64_t step,
                  uint64_t version, float* scratch);
  struct PushApplied;  // what pass 2 produced
  // INVALID_ARGUMENT naming the first id whose gradient is not finite. Sets *large when
  // a gradient's magnitude exceeds kLargeGradient (2^40): then the push checks every
  // update before it writes anything (ClassifyResident, CheckMissesFinite).
  absl::Status CheckFinite(absl::Span<const uint64_t> ids, absl::Span<const float> grads,
                           bool* large) const;
  // Over hard_limit_factor x the budget: shrinks, and RESOURCE_EXHAUSTED if still over.
  absl::Status MakeRoomForPush();
  // Sorts each stripe's positions in `order` (GroupByStripe's) by id and appends one
  // key per distinct id to *keys, stripe s at [kstarts[s], kstarts[s+1]); summed
  // gradients of duplicates live in *sums.
  void SumDuplicates(absl::Span<const uint64_t> ids, absl::Span<const float> grads,
                     absl::Span<uint32_t> order, absl::Span<const uint32_t> starts,
                     std::vector<PushKey>* keys, std::vector<uint32_t>* kstarts,
                     std::vector<std::vector<float>>* sums) const;
  // Whether `key`'s update of a row with `meta` and `floats` would be finite (computed
  // into `scratch`, row_floats_ floats; the row is not written).
  bool UpdateIsFinite(const RowMeta& meta, const float* floats, const PushKey& key,
                      float* scratch) const;
  // INVALID_ARGUMENT: the update of `id` would not be finite.
  absl::Status NotFiniteError(uint64_t id) const;
  // Pass 1: marks the keys not resident as missed (their indices into keys go to
  // *misses) and registers a load on each stripe with keys (its snapshot in
  // (*snapshots)[s]), whatever it returns. With `check`, INVALID_ARGUMENT
  // (NotFiniteError) when the update of a resident row would not be finite.
  absl::Status ClassifyResident(absl::Span<PushKey> keys, absl::Span<const uint32_t> kstarts,
                                bool check, std::vector<uint64_t>* snapshots,
                                std::vector<uint32_t>* misses);
  // After ReadMisses: INVALID_ARGUMENT (NotFiniteError) when the update of a missed
  // key's stored row, or of its init row, would not be finite.
  absl::Status CheckMissesFinite(absl::Span<const PushKey> keys, absl::Span<const uint32_t> misses,
                                 const Loaded& loaded) const;
  // Reads the missed keys' rows (no stripe lock held). Errors: the backend's, or
  // DATA_LOSS for a stored row of the wrong size.
  absl::Status ReadMisses(absl::Span<const PushKey> keys, absl::Span<const uint32_t> misses,
                          Loaded* loaded);
  // Ends the loads ClassifyResident registered (a push that changes nothing).
  void EndLoads(absl::Span<const uint32_t> kstarts, absl::Span<const uint64_t> snapshots);
  // Pass 2 on one stripe: finds, loads or admits each key's row and applies its
  // gradient; the changes, admissions and rejections go to *applied.
  void ApplyStripe(MemoryTier::Stripe& st, absl::Span<const PushKey> keys, uint64_t snapshot,
                   int64_t step, const Loaded& loaded, PushApplied* applied)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(st.mu);

  // The phases of EvictByPolicy (embedding_table_evict.cc).
  struct EvictionPass;
  // Reserves versions for `ids` and adds their changes (tombstones or decayed rows)
  // to pass->changes.
  void EmitEvictionChanges(const std::vector<uint64_t>& ids, bool tombstone, EvictionPass* pass);
  // Phase 1 on one stripe: decays its resident rows, deletes the expired ones from the
  // backend, then from memory. Errors: the backend's (the changes emitted so far stay
  // in pass->changes, to be committed).
  absl::Status EvictResident(MemoryTier::Stripe& st, EvictionPass* pass);
  // Phase 2: scans the backend and rewrites or deletes its rows that are not
  // resident, in chunks of kScanChunk. Returns the scan's status; the first failing
  // chunk's goes to *chunk_status (which must be OK on entry).
  absl::Status EvictStored(EvictionPass* pass, absl::Status* chunk_status);
  // Writes pass->chunk's rows that are still not resident to the backend, then emits
  // their changes; clears the chunk.
  absl::Status EvictStoredChunk(EvictionPass* pass);

  // Migration helpers (embedding_table_migrate.cc).
  // The phases of Import, on the last row of each id.
  struct ImportItem;
  // Reserves a version per id and re-stamps the row rows[pick[ids[k]]] with it into
  // (*items)[k], with its change in (*changes)[k]. REQUIRES: both sized ids.size().
  void StampImported(absl::Span<const EncodedRow> rows, absl::Span<const uint64_t> ids,
                     const absl::flat_hash_map<uint64_t, size_t>& pick,
                     std::vector<ImportItem>* items, std::vector<Change>* changes);
  // Phase 1 on one stripe (its batch positions): overwrites or removes the resident
  // copies, marking the overwritten items in_memory. Errors: UNAVAILABLE (a
  // write-back stayed in flight).
  absl::Status ImportResident(MemoryTier::Stripe& st, absl::Span<const uint64_t> ids,
                              absl::Span<const uint32_t> positions, absl::Span<ImportItem> items,
                              std::vector<uint64_t>* stripe_ids);
  // Phase 3 on one stripe, after the backend write: settles the copies of the items
  // not in_memory that loads brought in meanwhile, and publishes their bytes (or
  // removal) to loads in flight. Errors as ImportResident.
  absl::Status PublishImported(MemoryTier::Stripe& st, absl::Span<const uint64_t> ids,
                               absl::Span<const uint32_t> positions,
                               absl::Span<const ImportItem> items,
                               std::vector<uint64_t>* stripe_ids);
  bool InSlots(uint64_t id, uint32_t first_slot, uint32_t last_slot) const;
  // Locks st.mu once no row among `ids` has a write-back in flight, waiting a bounded
  // time. Returns true holding the lock, or false (not holding it) on timeout.
  bool LockWithoutWriteBacks(MemoryTier::Stripe& st, absl::Span<const uint64_t> ids)
      ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true, st.mu);
  // Writes back every dirty resident row of the slot range and waits for write-backs
  // of its rows in flight, so the backend holds every row of the range.
  absl::Status FlushSlots(uint32_t first_slot, uint32_t last_slot);
  // Copies the resident rows among `rows` (by id) into their values, flags cleared;
  // (*copied)[i] says whether rows[i] was resident.
  void CopyResident(std::vector<EncodedRow>* rows, std::vector<bool>* copied);
  // Removes every resident row of the slot range from memory as deleted (after its
  // write-back in flight, if any, landed); adds the removed ids to `removed` if not null.
  absl::Status RemoveResidentSlots(uint32_t first_slot, uint32_t last_slot,
                                   absl::flat_hash_set<uint64_t>* removed);

  const v1::TableConfig config_;
  const TableContext ctx_;
  const uint32_t dim_;
  const uint32_t row_floats_;
  const std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<CountMinSketch> sketch_;  // null when admission.min_count == 0
  MemoryTier tier_;
  std::atomic<uint32_t> evict_cursor_{0};
};

}  // namespace ember

#endif  // EMBER_SERVER_STORE_INTERNAL_EMBEDDING_TABLE_H_
