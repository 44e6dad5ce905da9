// Copyright 2026 The Ember Authors.

#include "server/store/embedding_store.h"

#include <bit>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/clip.h"
#include "common/status_macros.h"
#include "server/store/internal/embedding_table.h"
#include "server/store/internal/memory_tier.h"
#include "server/store/table_config.h"

namespace ember {
namespace {

constexpr absl::string_view kVersionKey = "version";
std::string TableConfigKey(absl::string_view table) { return absl::StrCat("table/", table); }
std::string SketchKey(absl::string_view table) { return absl::StrCat("sketch/", table); }

absl::Status ValidateOptions(const StoreOptions& o) {
  if (o.memory_budget_bytes < 0) {
    return absl::InvalidArgumentError("memory_budget_bytes must be >= 0 (0 = unlimited)");
  }
  if (o.num_stripes < 1 || o.num_stripes > 4096 ||
      !std::has_single_bit(static_cast<unsigned>(o.num_stripes))) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_stripes must be a power of two in [1, 4096]; got ", o.num_stripes));
  }
  if (o.memory_hard_limit_factor < 1.0) {
    return absl::InvalidArgumentError("memory_hard_limit_factor must be >= 1");
  }
  if (o.max_batch_keys == 0) return absl::InvalidArgumentError("max_batch_keys must be > 0");
  if (o.change_log_capacity == 0) {
    return absl::InvalidArgumentError("change_log_capacity must be > 0");
  }
  return absl::OkStatus();
}

// Reads one meta key; NOT_FOUND when absent.
absl::StatusOr<std::string> GetMeta(RowBackend& backend, std::string key) {
  std::vector<std::string> values;
  std::vector<bool> found;
  EMBER_RETURN_IF_ERROR(backend.MultiGet(kMetaTable, {std::move(key)}, &values, &found));
  if (!found[0]) return absl::NotFoundError("meta key absent");
  return std::move(values[0]);
}

absl::Status CheckBatch(size_t keys, size_t values, uint32_t dim, uint32_t limit,
                        absl::string_view what) {
  if (keys == 0) return absl::InvalidArgumentError(absl::StrCat(what, ": empty batch"));
  if (keys > limit) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": batch of ", keys,
                                                   " keys exceeds the limit of ", limit,
                                                   " (StoreOptions.max_batch_keys)"));
  }
  if (values != keys * dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", values, " values for ", keys, " keys of dim ", dim, "; expected ", keys * dim));
  }
  return absl::OkStatus();
}

}  // namespace

std::shared_ptr<MemoryBudget> NewMemoryBudget(int64_t limit_bytes) {
  return std::make_shared<MemoryBudget>(limit_bytes);
}

EmbeddingStore::EmbeddingStore(const StoreOptions& options, std::unique_ptr<RowBackend> backend)
    : options_(options),
      backend_(std::move(backend)),
      budget_(options.shared_budget != nullptr ? options.shared_budget
                                               : NewMemoryBudget(options.memory_budget_bytes)),
      change_log_(options.change_log_capacity),
      counters_(std::make_unique<StoreCounters>()) {}

EmbeddingStore::~EmbeddingStore() {
  bool closed;
  {
    absl::MutexLock lock(&tables_mu_);
    closed = closed_;
  }
  if (!closed) Close().IgnoreError();
  absl::MutexLock lock(&tables_mu_);
  tables_.clear();  // before budget_ (tables release their charge into it)
}

absl::StatusOr<std::unique_ptr<EmbeddingStore>> EmbeddingStore::Open(
    const StoreOptions& options, std::unique_ptr<RowBackend> backend) {
  EMBER_RETURN_IF_ERROR(ValidateOptions(options));
  if (backend == nullptr) return absl::InvalidArgumentError("backend is null");
  std::unique_ptr<EmbeddingStore> store(new EmbeddingStore(options, std::move(backend)));
  EMBER_RETURN_IF_ERROR(store->LoadPersistedState());
  return store;
}

absl::Status EmbeddingStore::LoadPersistedState() {
  absl::StatusOr<std::string> version = GetMeta(*backend_, std::string(kVersionKey));
  if (version.ok()) {
    if (version->size() != 8) return absl::DataLossError("stored version is not 8 bytes");
    uint64_t v;
    std::memcpy(&v, version->data(), 8);
    change_log_.Reset(v);
  } else if (!absl::IsNotFound(version.status())) {
    return version.status();
  }
  return absl::OkStatus();
}

absl::Status EmbeddingStore::CreateTable(const v1::TableConfig& config) {
  EMBER_ASSIGN_OR_RETURN(v1::TableConfig normalized, NormalizeTableConfig(config));
  absl::MutexLock lock(&tables_mu_);
  if (closed_) return absl::FailedPreconditionError("store is closed");
  if (auto it = tables_.find(normalized.name()); it != tables_.end()) {
    if (SameStoredLayout(it->second->config(), normalized)) return absl::OkStatus();
    return absl::AlreadyExistsError(absl::StrCat("table '", normalized.name(),
                                                 "' exists with a different dim, seed, "
                                                 "optimizer or initializer"));
  }
  // A table persisted by an earlier run must keep its layout.
  absl::StatusOr<std::string> stored = GetMeta(*backend_, TableConfigKey(normalized.name()));
  if (stored.ok()) {
    v1::TableConfig previous;
    if (!previous.ParseFromString(*stored)) {
      return absl::DataLossError(
          absl::StrCat("stored config of table '", normalized.name(), "' is corrupt"));
    }
    if (!SameStoredLayout(previous, normalized)) {
      return absl::AlreadyExistsError(
          absl::StrCat("table '", normalized.name(), "' is stored with dim ", previous.dim(),
                       ", seed ", previous.seed(), " and optimizer ",
                       v1::OptimizerConfig::Kind_Name(previous.optimizer().kind()),
                       "; refusing to reinterpret its rows"));
    }
  } else if (!absl::IsNotFound(stored.status())) {
    return stored.status();
  }
  EMBER_ASSIGN_OR_RETURN(BackendTable handle, backend_->OpenTable(normalized.name()));
  EMBER_RETURN_IF_ERROR(backend_->Write(
      {{kMetaTable, TableConfigKey(normalized.name()), normalized.SerializeAsString(), false}}));

  TableContext ctx;
  ctx.index = static_cast<uint32_t>(table_names_.size());
  ctx.backend_table = handle;
  ctx.backend = backend_.get();
  ctx.budget = budget_.get();
  ctx.log = &change_log_;
  ctx.counters = counters_.get();
  ctx.num_stripes = static_cast<uint32_t>(options_.num_stripes);
  ctx.hard_limit_factor = options_.memory_hard_limit_factor;
  ctx.frequency_admission = options_.frequency_admission;
  auto table = std::make_unique<EmbeddingTable>(normalized, ctx);
  absl::StatusOr<std::string> sketch = GetMeta(*backend_, SketchKey(normalized.name()));
  if (sketch.ok()) {
    // A sketch of another shape (admission settings changed) is dropped, not fatal.
    table->RestoreSketch(*sketch).IgnoreError();
  } else if (!absl::IsNotFound(sketch.status())) {
    return sketch.status();
  }
  table_names_.push_back(normalized.name());
  tables_.emplace(normalized.name(), std::move(table));
  return absl::OkStatus();
}

absl::StatusOr<EmbeddingTable*> EmbeddingStore::FindTable(absl::string_view name) const {
  absl::ReaderMutexLock lock(&tables_mu_);
  if (closed_) return absl::FailedPreconditionError("store is closed");
  auto it = tables_.find(name);
  if (it == tables_.end())
    return absl::NotFoundError(absl::StrCat("unknown table '", ClipForMessage(name), "'"));
  return it->second.get();
}

absl::StatusOr<v1::TableConfig> EmbeddingStore::GetTableConfig(absl::string_view table) const {
  EMBER_ASSIGN_OR_RETURN(EmbeddingTable * t, FindTable(table));
  return t->config();
}

std::vector<std::string> EmbeddingStore::ListTables() const {
  absl::ReaderMutexLock lock(&tables_mu_);
  return table_names_;
}

absl::Status EmbeddingStore::Pull(absl::string_view table, absl::Span<const uint64_t> ids,
                                  absl::Span<float> out, std::vector<uint8_t>* unknown) {
  EMBER_ASSIGN_OR_RETURN(EmbeddingTable * t, FindTable(table));
  EMBER_RETURN_IF_ERROR(CheckBatch(ids.size(), out.size(), t->dim(), options_.max_batch_keys,
                                   absl::StrCat("pull from '", ClipForMessage(table), "'")));
  if (unknown != nullptr) unknown->assign(ids.size(), 0);
  return t->Pull(ids, out, unknown);
}

absl::Status EmbeddingStore::Push(absl::string_view table, absl::Span<const uint64_t> ids,
                                  absl::Span<const float> grads, int64_t step) {
  EMBER_ASSIGN_OR_RETURN(EmbeddingTable * t, FindTable(table));
  EMBER_RETURN_IF_ERROR(CheckBatch(ids.size(), grads.size(), t->dim(), options_.max_batch_keys,
                                   absl::StrCat("push to '", ClipForMessage(table), "'")));
  return t->Push(ids, grads, step);
}

absl::StatusOr<RowSnapshot> EmbeddingStore::ReadRow(absl::string_view table, uint64_t id) {
  EMBER_ASSIGN_OR_RETURN(EmbeddingTable * t, FindTable(table));
  return t->ReadRow(id);
}

std::vector<EmbeddingTable*> EmbeddingStore::AllTables() const {
  absl::ReaderMutexLock lock(&tables_mu_);
  std::vector<EmbeddingTable*> all;
  for (const std::string& name : table_names_) all.push_back(tables_.find(name)->second.get());
  return all;
}

absl::StatusOr<EvictionReport> EmbeddingStore::Evict(int64_t current_step) {
  EvictionReport total;
  for (EmbeddingTable* t : AllTables()) {
    EMBER_ASSIGN_OR_RETURN(EvictionReport r, t->EvictByPolicy(current_step));
    total.rows_removed += r.rows_removed;
    total.rows_scanned += r.rows_scanned;
    total.rows_decayed += r.rows_decayed;
  }
  return total;
}

absl::Status EmbeddingStore::Flush(absl::Duration spread) {
  absl::Status first_error;
  BackendWriteBatch meta;
  const std::vector<EmbeddingTable*> tables = AllTables();
  const absl::Duration per_table = tables.empty() ? absl::ZeroDuration() : spread / tables.size();
  for (EmbeddingTable* t : tables) {
    absl::Status s = t->FlushDirty(per_table);
    if (!s.ok() && first_error.ok()) first_error = s;
    std::string sketch = t->SerializeSketch();
    if (!sketch.empty()) meta.push_back({kMetaTable, SketchKey(t->config().name()), sketch, false});
  }
  EMBER_RETURN_IF_ERROR(first_error);
  const uint64_t version = change_log_.reserved();
  meta.push_back({kMetaTable, std::string(kVersionKey),
                  std::string(reinterpret_cast<const char*>(&version), 8), false});
  EMBER_RETURN_IF_ERROR(backend_->Write(meta));
  return backend_->Flush();
}

absl::Status EmbeddingStore::Close() {
  {
    absl::ReaderMutexLock lock(&tables_mu_);
    if (closed_) return absl::FailedPreconditionError("store is closed");
  }
  EMBER_RETURN_IF_ERROR(Flush());
  absl::MutexLock lock(&tables_mu_);
  closed_ = true;
  return absl::OkStatus();
}

absl::StatusOr<ChangeBatch> EmbeddingStore::ReadChanges(uint64_t after_version, size_t max) const {
  ChangeBatch batch;
  batch.watermark = change_log_.watermark();
  EMBER_ASSIGN_OR_RETURN(batch.changes, change_log_.Read(after_version, max));
  batch.table_names = ListTables();
  return batch;
}

absl::StatusOr<TableChecksum> EmbeddingStore::Checksum(absl::string_view table,
                                                       const SlotFilter& counted) {
  EMBER_ASSIGN_OR_RETURN(EmbeddingTable * t, FindTable(table));
  return t->Checksum(counted);
}

uint64_t EmbeddingStore::version() const { return change_log_.watermark(); }

uint64_t EmbeddingStore::RecordSlotsGained(uint32_t first_slot, uint32_t last_slot) {
  const uint64_t version = change_log_.Reserve(1);
  const Change marker{version, (uint64_t{first_slot} << 32) | last_slot, kSlotsGainedMarker, false};
  change_log_.Commit({&marker, 1});
  return version;
}

uint64_t EmbeddingStore::WaitForVersionAbove(uint64_t version, absl::Duration timeout) const {
  return change_log_.WaitAbove(version, timeout);
}

StoreStats EmbeddingStore::Stats() const {
  StoreStats s;
  s.memory_bytes = budget_->used();
  s.memory_budget_bytes = budget_->limit();
  s.disk_bytes = backend_->DiskBytes();
  s.version = change_log_.watermark();
  s.pulled_keys = counters_->pulled_keys.load(std::memory_order_relaxed);
  s.pushed_keys = counters_->pushed_keys.load(std::memory_order_relaxed);
  s.memory_hits = counters_->memory_hits.load(std::memory_order_relaxed);
  s.memory_misses = counters_->memory_misses.load(std::memory_order_relaxed);
  s.memory_not_admitted = counters_->memory_not_admitted.load(std::memory_order_relaxed);
  s.admitted = counters_->admitted.load(std::memory_order_relaxed);
  s.rejected_unadmitted = counters_->rejected_unadmitted.load(std::memory_order_relaxed);
  s.evicted_to_backend = counters_->evicted_to_backend.load(std::memory_order_relaxed);
  s.evicted_by_policy = counters_->evicted_by_policy.load(std::memory_order_relaxed);
  s.writeback_errors = counters_->writeback_errors.load(std::memory_order_relaxed);
  s.not_finite_updates = counters_->not_finite_updates.load(std::memory_order_relaxed);
  for (EmbeddingTable* t : AllTables()) {
    TableStats ts;
    ts.name = t->config().name();
    ts.dim = t->dim();
    ts.state_floats = t->state_floats();
    ts.rows_in_memory = t->ResidentRows();
    ts.held_bytes = t->HeldBytes();
    s.rows_in_memory += ts.rows_in_memory;
    s.memory_held_bytes += ts.held_bytes;
    s.tables.push_back(std::move(ts));
  }
  return s;
}

}  // namespace ember
