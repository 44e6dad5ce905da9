// Copyright 2026 The Ember Authors.
//
// Pull, push, loads from the backend and write-back. Every batch operation groups its
// keys by stripe and takes each stripe lock once per pass; backend IO always happens
// with no stripe lock held.
//
// A push runs in two passes so that it is all-or-nothing: pass 1 classifies keys as
// resident or missing (and registers a load on each stripe it touches), the misses are
// read from the backend, and only then does pass 2 apply every update. If the read
// fails nothing has changed. A push with a large gradient (kLargeGradient) also has
// every update checked for finiteness in pass 1 and after the read, and is refused
// whole if one is not; pass 2 writes a row only with a finite update in any case.
// Rows that leave a stripe between the passes are
// recovered from the stripe's `recent` removals (memory_tier.h).

#include "server/store/internal/embedding_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/slot.h"
#include "server/store/initializer.h"
#include "server/store/table_config.h"

namespace ember {
namespace {

constexpr size_t kMaxVictimsPerRound = 256;
// A push with a gradient of larger magnitude has every update checked before anything
// is written (embedding_table.h, Push). Below it an update can overflow only a row
// whose values are already near the float limit (3.4e38): for a finite row the change
// is at most learning_rate * 2^40 (SGD), lr per unit of accumulated gradient
// (Adagrad, Adam) or bounded by 2^80 in the state.
constexpr float kLargeGradient = 0x1p40f;

std::string EncodeVersion(uint64_t v) { return std::string(reinterpret_cast<char*>(&v), 8); }

}  // namespace

EmbeddingTable::EmbeddingTable(const v1::TableConfig& config, const TableContext& context)
    : config_(config),
      ctx_(context),
      dim_(config.dim()),
      row_floats_(config.dim() + OptimizerStateFloats(config.optimizer(), config.dim())),
      optimizer_(Optimizer::Create(config.optimizer(), config.dim())),
      tier_(row_floats_, context.num_stripes, context.budget, context.frequency_admission) {
  if (config.admission().min_count() > 0) {
    sketch_ = std::make_unique<CountMinSketch>(config.admission().sketch_width(),
                                               config.admission().sketch_depth());
  }
}

std::string EmbeddingTable::Key(uint64_t id) const {
  return RowKey(SlotOf(config_.seed(), id), id);
}

void EmbeddingTable::InitRow(uint64_t id, char* row) const {
  RowMeta* meta = MemoryTier::Meta(row);
  const uint32_t flags = meta->flags;
  *meta = RowMeta{};
  meta->flags = flags;
  float* f = MemoryTier::Floats(row);
  InitEmbedding(config_.initializer(), config_.seed(), id, f, dim_);
  optimizer_->InitState(f + dim_);
}

void EmbeddingTable::GroupByStripe(absl::Span<const uint64_t> ids, std::vector<uint32_t>* order,
                                   std::vector<uint32_t>* starts) const {
  const uint32_t num_stripes = tier_.num_stripes();
  std::vector<uint32_t> stripe_of(ids.size());
  starts->assign(num_stripes + 1, 0);
  for (size_t i = 0; i < ids.size(); ++i) {
    stripe_of[i] = tier_.StripeOf(ids[i]);
    ++(*starts)[stripe_of[i] + 1];
  }
  for (uint32_t s = 0; s < num_stripes; ++s) (*starts)[s + 1] += (*starts)[s];
  order->resize(ids.size());
  std::vector<uint32_t> cursor(starts->begin(), starts->end() - 1);
  for (size_t i = 0; i < ids.size(); ++i)
    (*order)[cursor[stripe_of[i]]++] = static_cast<uint32_t>(i);
}

// One distinct id of a push, its duplicates' gradients summed (in batch order).
struct EmbeddingTable::PushKey {
  uint64_t id;
  const float* grad;
  uint32_t occurrences;
  bool missed;          // not resident in pass 1: read from the backend
  uint32_t miss_index;  // into Loaded's values/found when missed
};

// The rows read from the backend for a batch's misses, by miss index.
struct EmbeddingTable::Loaded {
  std::vector<std::string> values;
  std::vector<bool> found;
};

// What pass 2 of a push produced, over all stripes.
struct EmbeddingTable::PushApplied {
  std::vector<Change> changes;
  std::vector<char*> rows;     // scratch: the rows of one stripe's keys
  std::vector<float> scratch;  // scratch: one row's updated floats
  uint64_t admitted = 0, rejected = 0;
  uint64_t not_finite = 0;  // updates left out because a race made them overflow
};

// ---------------------------------------------------------------------------------
// Pull

void EmbeddingTable::PullResident(absl::Span<const uint64_t> ids, absl::Span<const uint32_t> order,
                                  absl::Span<const uint32_t> starts, absl::Span<float> out,
                                  std::vector<uint32_t>* misses,
                                  std::vector<std::pair<uint32_t, uint64_t>>* loads,
                                  std::vector<uint32_t>* miss_starts) {
  const size_t emb_bytes = size_t{dim_} * sizeof(float);
  char* rows[64];
  for (uint32_t s = 0; s + 1 < starts.size(); ++s) {
    const uint32_t begin = starts[s], end = starts[s + 1];
    if (begin == end) continue;
    MemoryTier::Stripe& st = tier_.stripe(s);
    absl::MutexLock lock(&st.mu);
    const size_t misses_before = misses->size();
    for (uint32_t base = begin; base < end; base += 64) {
      const uint32_t count = std::min<uint32_t>(64, end - base);
      for (uint32_t j = 0; j < count; ++j) tier_.Prefetch(st, ids[order[base + j]]);
      for (uint32_t j = 0; j < count; ++j) {
        const uint64_t id = ids[order[base + j]];
        tier_.RecordAccess(st, id);
        char* row = tier_.Find(st, id);
        rows[j] = row;
        if (row != nullptr) {
          for (size_t off = 0; off < sizeof(RowMeta) + emb_bytes; off += 64) {
            __builtin_prefetch(row + off);
          }
        }
      }
      for (uint32_t j = 0; j < count; ++j) {
        const uint32_t pos = order[base + j];
        if (rows[j] == nullptr) {
          misses->push_back(pos);
          continue;
        }
        std::memcpy(&out[size_t{pos} * dim_], MemoryTier::Floats(rows[j]), emb_bytes);
        MemoryTier::Meta(rows[j])->flags |= kRowReferenced;
      }
    }
    if (misses->size() > misses_before) {
      loads->emplace_back(s, tier_.BeginLoad(st));
      miss_starts->push_back(static_cast<uint32_t>(misses_before));
    }
  }
}

void EmbeddingTable::PullLoaded(MemoryTier::Stripe& st, uint64_t snapshot,
                                absl::Span<const uint64_t> ids, absl::Span<const uint32_t> misses,
                                uint32_t begin, uint32_t end, const Loaded& loaded,
                                absl::Span<float> out, std::vector<uint8_t>* unknown,
                                absl::Status* status) {
  const size_t emb_bytes = size_t{dim_} * sizeof(float);
  for (uint32_t k = begin; k < end; ++k) {
    const uint32_t pos = misses[k];
    const uint64_t id = ids[pos];
    float* dst = &out[size_t{pos} * dim_];
    absl::string_view removed;
    if (char* row = tier_.Find(st, id)) {
      std::memcpy(dst, MemoryTier::Floats(row), emb_bytes);  // loaded by someone else
    } else if (tier_.FindRemovedSince(st, id, snapshot, &removed)) {
      if (removed.empty()) {
        InitEmbedding(config_.initializer(), config_.seed(), id, dst, dim_);
        if (unknown != nullptr) (*unknown)[pos] = 1;
      } else {
        std::memcpy(dst, removed.data() + sizeof(RowMeta), emb_bytes);
      }
    } else if (loaded.found[k]) {
      if (loaded.values[k].size() != tier_.row_bytes()) {
        *status = absl::DataLossError(absl::StrCat("table '", config_.name(), "' id ", id,
                                                   ": stored row has ", loaded.values[k].size(),
                                                   " bytes; expected ", tier_.row_bytes()));
        continue;
      }
      bool exchanged = false;
      if (!tier_.AdmitLoaded(st, id, &exchanged)) {
        // A colder ID than the row it would push out: answered, not kept.
        std::memcpy(dst, loaded.values[k].data() + sizeof(RowMeta), emb_bytes);
        ctx_.counters->memory_not_admitted.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      if (exchanged) ctx_.counters->evicted_to_backend.fetch_add(1, std::memory_order_relaxed);
      char* row = tier_.InsertStored(st, id, loaded.values[k]);
      MemoryTier::Meta(row)->flags |= kRowReferenced;
      std::memcpy(dst, MemoryTier::Floats(row), emb_bytes);
    } else {
      InitEmbedding(config_.initializer(), config_.seed(), id, dst, dim_);
      if (unknown != nullptr) (*unknown)[pos] = 1;
    }
  }
}

absl::Status EmbeddingTable::Pull(absl::Span<const uint64_t> ids, absl::Span<float> out,
                                  std::vector<uint8_t>* unknown) {
  const size_t n = ids.size();
  ctx_.counters->pulled_keys.fetch_add(n, std::memory_order_relaxed);

  std::vector<uint32_t> order, starts;
  GroupByStripe(ids, &order, &starts);

  std::vector<uint32_t> misses;                      // batch positions, by stripe
  std::vector<std::pair<uint32_t, uint64_t>> loads;  // (stripe, snapshot)
  std::vector<uint32_t> miss_starts;                 // per entry of `loads`
  PullResident(ids, order, starts, out, &misses, &loads, &miss_starts);
  ctx_.counters->memory_hits.fetch_add(n - misses.size(), std::memory_order_relaxed);
  if (misses.empty()) return absl::OkStatus();
  ctx_.counters->memory_misses.fetch_add(misses.size(), std::memory_order_relaxed);
  miss_starts.push_back(static_cast<uint32_t>(misses.size()));

  std::vector<std::string> keys(misses.size());
  for (size_t k = 0; k < misses.size(); ++k) keys[k] = Key(ids[misses[k]]);
  Loaded loaded;
  absl::Status read =
      ctx_.backend->MultiGet(ctx_.backend_table, keys, &loaded.values, &loaded.found);

  absl::Status status = read;
  for (size_t l = 0; l < loads.size(); ++l) {
    MemoryTier::Stripe& st = tier_.stripe(loads[l].first);
    absl::MutexLock lock(&st.mu);
    const uint64_t snapshot = loads[l].second;
    if (read.ok()) {
      PullLoaded(st, snapshot, ids, misses, miss_starts[l], miss_starts[l + 1], loaded, out,
                 unknown, &status);
    }
    tier_.EndLoad(st, snapshot);
  }
  if (ctx_.budget->Excess() > 0) {
    ShrinkToBudget(2 * tier_.num_stripes()).IgnoreError();  // counted in writeback_errors
  }
  return status;
}

// ---------------------------------------------------------------------------------
// Push

bool EmbeddingTable::ApplyToRow(char* row, const float* grad, uint32_t occurrences, int64_t step,
                                uint64_t version, float* scratch) {
  RowMeta* meta = MemoryTier::Meta(row);
  meta->count += static_cast<float>(occurrences);
  float* floats = MemoryTier::Floats(row);
  // Into the scratch first: a row is written only with a finite result.
  const bool finite =
      optimizer_->Apply(floats, scratch, grad, optimizer_->LearningRateScale(meta->count));
  if (finite) std::memcpy(floats, scratch, row_floats_ * sizeof(float));
  meta->last_seen_step = std::max(meta->last_seen_step, step);
  meta->version = version;
  meta->flags |= kRowDirty | kRowReferenced;
  return finite;
}

bool EmbeddingTable::UpdateIsFinite(const RowMeta& meta, const float* floats, const PushKey& key,
                                    float* scratch) const {
  const float count = meta.count + static_cast<float>(key.occurrences);
  return optimizer_->Apply(floats, scratch, key.grad, optimizer_->LearningRateScale(count));
}

absl::Status EmbeddingTable::NotFiniteError(uint64_t id) const {
  return absl::InvalidArgumentError(absl::StrCat(
      "table '", config_.name(), "': the gradient of id ", id,
      " would make its row or optimizer state non-finite (overflow); nothing was applied"));
}

absl::Status EmbeddingTable::CheckFinite(absl::Span<const uint64_t> ids,
                                         absl::Span<const float> grads, bool* large) const {
  *large = false;
  for (size_t i = 0; i < grads.size(); ++i) {
    if (std::fabs(grads[i]) <= kLargeGradient) continue;  // NaN fails this test too
    if (!std::isfinite(grads[i])) {
      return absl::InvalidArgumentError(absl::StrCat("table '", config_.name(),
                                                     "': gradient of id ", ids[i / dim_], " (key ",
                                                     i / dim_, ") is not finite"));
    }
    *large = true;
  }
  return absl::OkStatus();
}

absl::Status EmbeddingTable::MakeRoomForPush() {
  MemoryBudget* budget = ctx_.budget;
  if (budget->limit() > 0 &&
      budget->used() > static_cast<int64_t>(budget->limit() * ctx_.hard_limit_factor)) {
    ShrinkToBudget(4 * tier_.num_stripes()).IgnoreError();
    if (budget->used() > static_cast<int64_t>(budget->limit() * ctx_.hard_limit_factor)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "memory tier holds ", budget->used(), " bytes, over ", ctx_.hard_limit_factor,
          "x its budget of ", budget->limit(), " and cannot write rows back; retry later"));
    }
  }
  return absl::OkStatus();
}

void EmbeddingTable::SumDuplicates(absl::Span<const uint64_t> ids, absl::Span<const float> grads,
                                   absl::Span<uint32_t> order, absl::Span<const uint32_t> starts,
                                   std::vector<PushKey>* keys, std::vector<uint32_t>* kstarts,
                                   std::vector<std::vector<float>>* sums) const {
  kstarts->assign(starts.size(), 0);
  for (uint32_t s = 0; s + 1 < starts.size(); ++s) {
    (*kstarts)[s] = static_cast<uint32_t>(keys->size());
    auto first = order.begin() + starts[s], last = order.begin() + starts[s + 1];
    std::sort(first, last,
              [&](uint32_t a, uint32_t b) { return ids[a] != ids[b] ? ids[a] < ids[b] : a < b; });
    for (auto it = first; it != last;) {
      auto run = it;
      while (run != last && ids[*run] == ids[*it]) ++run;
      const float* grad = &grads[size_t{*it} * dim_];
      if (run - it > 1) {
        std::vector<float> sum(grad, grad + dim_);
        for (auto d = it + 1; d != run; ++d) {
          const float* g = &grads[size_t{*d} * dim_];
          for (uint32_t i = 0; i < dim_; ++i) sum[i] += g[i];
        }
        sums->push_back(std::move(sum));
        grad = sums->back().data();
      }
      keys->push_back({ids[*it], grad, static_cast<uint32_t>(run - it), false, 0});
      it = run;
    }
  }
  kstarts->back() = static_cast<uint32_t>(keys->size());
}

absl::Status EmbeddingTable::ClassifyResident(absl::Span<PushKey> keys,
                                              absl::Span<const uint32_t> kstarts, bool check,
                                              std::vector<uint64_t>* snapshots,
                                              std::vector<uint32_t>* misses) {
  std::vector<float> scratch(check ? row_floats_ : 0);
  absl::Status status;
  for (uint32_t s = 0; s + 1 < kstarts.size(); ++s) {
    if (kstarts[s] == kstarts[s + 1]) continue;
    MemoryTier::Stripe& st = tier_.stripe(s);
    absl::MutexLock lock(&st.mu);
    for (uint32_t u = kstarts[s]; u < kstarts[s + 1]; ++u) tier_.Prefetch(st, keys[u].id);
    for (uint32_t u = kstarts[s]; u < kstarts[s + 1]; ++u) {
      tier_.RecordAccess(st, keys[u].id);
      const char* row = tier_.Find(st, keys[u].id);
      if (row == nullptr) {
        keys[u].missed = true;
        keys[u].miss_index = static_cast<uint32_t>(misses->size());
        misses->push_back(u);
      } else if (check && status.ok() &&
                 !UpdateIsFinite(*MemoryTier::Meta(row), MemoryTier::Floats(row), keys[u],
                                 scratch.data())) {
        status = NotFiniteError(keys[u].id);
      }
    }
    (*snapshots)[s] = tier_.BeginLoad(st);
  }
  return status;
}

absl::Status EmbeddingTable::CheckMissesFinite(absl::Span<const PushKey> keys,
                                               absl::Span<const uint32_t> misses,
                                               const Loaded& loaded) const {
  std::vector<char> row(tier_.row_bytes());
  std::vector<float> scratch(row_floats_);
  for (uint32_t u : misses) {
    const PushKey& q = keys[u];
    if (loaded.found[q.miss_index]) {
      std::memcpy(row.data(), loaded.values[q.miss_index].data(), row.size());
    } else {
      // A new ID (admitted or not: a gradient that would overflow its init row is
      // refused either way).
      InitRow(q.id, row.data());
    }
    if (!UpdateIsFinite(*MemoryTier::Meta(row.data()), MemoryTier::Floats(row.data()), q,
                        scratch.data())) {
      return NotFiniteError(q.id);
    }
  }
  return absl::OkStatus();
}

absl::Status EmbeddingTable::ReadMisses(absl::Span<const PushKey> keys,
                                        absl::Span<const uint32_t> misses, Loaded* loaded) {
  std::vector<std::string> row_keys(misses.size());
  for (size_t k = 0; k < misses.size(); ++k) row_keys[k] = Key(keys[misses[k]].id);
  absl::Status read =
      ctx_.backend->MultiGet(ctx_.backend_table, row_keys, &loaded->values, &loaded->found);
  for (size_t k = 0; read.ok() && k < misses.size(); ++k) {
    if (loaded->found[k] && loaded->values[k].size() != tier_.row_bytes()) {
      read = absl::DataLossError(
          absl::StrCat("table '", config_.name(), "' id ", keys[misses[k]].id, ": stored row has ",
                       loaded->values[k].size(), " bytes; expected ", tier_.row_bytes()));
    }
  }
  return read;
}

void EmbeddingTable::EndLoads(absl::Span<const uint32_t> kstarts,
                              absl::Span<const uint64_t> snapshots) {
  for (uint32_t s = 0; s + 1 < kstarts.size(); ++s) {
    if (kstarts[s] == kstarts[s + 1]) continue;
    MemoryTier::Stripe& st = tier_.stripe(s);
    absl::MutexLock lock(&st.mu);
    tier_.EndLoad(st, snapshots[s]);
  }
}

void EmbeddingTable::ApplyStripe(MemoryTier::Stripe& st, absl::Span<const PushKey> keys,
                                 uint64_t snapshot, int64_t step, const Loaded& loaded,
                                 PushApplied* applied) {
  std::vector<char*>& rows = applied->rows;
  rows.assign(keys.size(), nullptr);
  uint32_t updates = 0;
  for (const PushKey& q : keys) tier_.Prefetch(st, q.id);
  for (size_t u = 0; u < keys.size(); ++u) {
    const PushKey& q = keys[u];
    char* row = tier_.Find(st, q.id);
    absl::string_view removed;
    if (row == nullptr && tier_.FindRemovedSince(st, q.id, snapshot, &removed)) {
      // Empty bytes: deleted meanwhile, so it is treated as a new ID below.
      if (!removed.empty()) row = tier_.InsertStored(st, q.id, removed);
    } else if (row == nullptr && q.missed && loaded.found[q.miss_index]) {
      row = tier_.InsertStored(st, q.id, loaded.values[q.miss_index]);
    }
    if (row == nullptr) {
      // A new ID: admission decides whether it gets a row.
      const bool admit = sketch_ == nullptr ||
                         sketch_->Add(q.id, q.occurrences) >= config_.admission().min_count();
      if (!admit) {
        applied->rejected += q.occurrences;
        continue;
      }
      row = tier_.Insert(st, q.id);
      InitRow(q.id, row);
      ++applied->admitted;
    }
    rows[u] = row;
    ++updates;
  }
  if (updates == 0) return;
  // Rows are cold in cache: fetch every line of each before the optimizer runs.
  for (char* row : rows) {
    if (row == nullptr) continue;
    for (size_t off = 0; off < tier_.row_bytes(); off += 64) __builtin_prefetch(row + off, 1);
  }
  uint64_t version = ctx_.log->Reserve(updates);
  applied->scratch.resize(row_floats_);
  for (size_t u = 0; u < keys.size(); ++u) {
    char* row = rows[u];
    if (row == nullptr) continue;
    // Not checked before (no large gradient), or checked on the row pass 1 saw before a
    // concurrent push changed it: an update that is not finite leaves the row's floats
    // as they were (its meta and version move on, so the version stays committed).
    if (!ApplyToRow(row, keys[u].grad, keys[u].occurrences, step, version,
                    applied->scratch.data())) {
      ++applied->not_finite;
    }
    applied->changes.push_back({version, keys[u].id, ctx_.index, false});
    ++version;
  }
}

absl::Status EmbeddingTable::Push(absl::Span<const uint64_t> ids, absl::Span<const float> grads,
                                  int64_t step) {
  bool large = false;
  if (absl::Status finite = CheckFinite(ids, grads, &large); !finite.ok()) return finite;
  if (absl::Status room = MakeRoomForPush(); !room.ok()) return room;
  const size_t n = ids.size();
  ctx_.counters->pushed_keys.fetch_add(n, std::memory_order_relaxed);

  std::vector<uint32_t> order, starts;
  GroupByStripe(ids, &order, &starts);

  // Unique IDs per stripe, duplicates' gradients summed (in batch order).
  std::vector<PushKey> keys;
  keys.reserve(n);
  std::vector<uint32_t> kstarts;
  std::vector<std::vector<float>> sums;
  SumDuplicates(ids, grads, absl::MakeSpan(order), starts, &keys, &kstarts, &sums);

  // Pass 1: classify, register loads; with a large gradient, check the resident rows'
  // updates.
  std::vector<uint64_t> snapshots(starts.size() - 1, 0);
  std::vector<uint32_t> misses;
  absl::Status checked =
      ClassifyResident(absl::MakeSpan(keys), kstarts, large, &snapshots, &misses);
  ctx_.counters->memory_hits.fetch_add(keys.size() - misses.size(), std::memory_order_relaxed);
  ctx_.counters->memory_misses.fetch_add(misses.size(), std::memory_order_relaxed);

  // Read the misses and check their updates; on failure undo the registrations and
  // change nothing.
  Loaded loaded;
  if (checked.ok() && !misses.empty()) {
    checked = ReadMisses(keys, misses, &loaded);
    if (checked.ok() && large) checked = CheckMissesFinite(keys, misses, loaded);
  }
  if (!checked.ok()) {
    EndLoads(kstarts, snapshots);
    return checked;
  }

  // Pass 2: apply. Nothing below can fail.
  PushApplied applied;
  applied.changes.reserve(keys.size());
  for (uint32_t s = 0; s + 1 < kstarts.size(); ++s) {
    if (kstarts[s] == kstarts[s + 1]) continue;
    MemoryTier::Stripe& st = tier_.stripe(s);
    absl::MutexLock lock(&st.mu);
    ApplyStripe(st, absl::MakeConstSpan(keys).subspan(kstarts[s], kstarts[s + 1] - kstarts[s]),
                snapshots[s], step, loaded, &applied);
    tier_.EndLoad(st, snapshots[s]);
  }
  ctx_.log->Commit(applied.changes);
  if (applied.admitted > 0) {
    ctx_.counters->admitted.fetch_add(applied.admitted, std::memory_order_relaxed);
  }
  if (applied.rejected > 0) {
    ctx_.counters->rejected_unadmitted.fetch_add(applied.rejected, std::memory_order_relaxed);
  }
  if (applied.not_finite > 0) {
    ctx_.counters->not_finite_updates.fetch_add(applied.not_finite, std::memory_order_relaxed);
  }
  if (ctx_.budget->Excess() > 0) {
    ShrinkToBudget(2 * tier_.num_stripes()).IgnoreError();  // counted in writeback_errors
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------
// Single-row read

absl::StatusOr<RowSnapshot> EmbeddingTable::ReadRow(uint64_t id) {
  const uint32_t s = tier_.StripeOf(id);
  MemoryTier::Stripe& st = tier_.stripe(s);
  RowSnapshot snap;
  auto fill = [&](const char* bytes) {
    std::memcpy(&snap.meta, bytes, sizeof(RowMeta));
    snap.meta.flags = 0;
    const float* f = reinterpret_cast<const float*>(bytes + sizeof(RowMeta));
    snap.embedding.assign(f, f + dim_);
    snap.state.assign(f + dim_, f + row_floats_);
    snap.stored = true;
  };
  uint64_t snapshot;
  {
    absl::MutexLock lock(&st.mu);
    if (char* row = tier_.Find(st, id)) {
      fill(row);
      return snap;
    }
    snapshot = tier_.BeginLoad(st);
  }
  std::vector<std::string> values;
  std::vector<bool> found;
  absl::Status read = ctx_.backend->MultiGet(ctx_.backend_table, {Key(id)}, &values, &found);
  absl::MutexLock lock(&st.mu);
  absl::Status status = read;
  absl::string_view removed;
  if (!read.ok()) {
    // reported below, after the load is unregistered
  } else if (char* row = tier_.Find(st, id)) {
    fill(row);
  } else if (tier_.FindRemovedSince(st, id, snapshot, &removed)) {
    if (!removed.empty()) fill(removed.data());
  } else if (!found[0]) {
    // never stored: init vector below
  } else if (values[0].size() != tier_.row_bytes()) {
    status = absl::DataLossError(absl::StrCat("table '", config_.name(), "' id ", id,
                                              ": stored row has ", values[0].size(), " bytes"));
  } else {
    fill(values[0].data());
  }
  tier_.EndLoad(st, snapshot);
  if (!status.ok()) return status;
  if (!snap.stored) {
    snap.embedding.resize(dim_);
    InitEmbedding(config_.initializer(), config_.seed(), id, snap.embedding.data(), dim_);
    snap.state.resize(row_floats_ - dim_);
    optimizer_->InitState(snap.state.data());
  }
  return snap;
}

// ---------------------------------------------------------------------------------
// Write-back and budget

absl::Status EmbeddingTable::WriteBackRows(MemoryTier::Stripe& st, const std::vector<uint64_t>& ids,
                                           const std::vector<std::string>& bytes,
                                           bool remove_after) {
  BackendWriteBatch batch;
  batch.reserve(ids.size() + 1);
  for (size_t i = 0; i < ids.size(); ++i) {
    batch.push_back({ctx_.backend_table, Key(ids[i]), bytes[i], false});
  }
  // Persist the version high-water mark with the rows it covers.
  batch.push_back({kMetaTable, "version", EncodeVersion(ctx_.log->reserved()), false});
  absl::Status status = ctx_.backend->Write(batch);
  uint64_t removed = 0;
  {
    absl::MutexLock lock(&st.mu);
    for (uint64_t id : ids) {
      char* row = tier_.Find(st, id);
      if (row == nullptr) continue;  // cannot happen: kRowWriteBack pins the row
      RowMeta* meta = MemoryTier::Meta(row);
      meta->flags &= ~kRowWriteBack;
      if (!status.ok()) {
        meta->flags |= kRowDirty;  // keep it; a later write-back retries
      } else if (remove_after && !(meta->flags & kRowDirty)) {
        tier_.Remove(st, id);
        ++removed;
      }
    }
  }
  ctx_.counters->evicted_to_backend.fetch_add(removed, std::memory_order_relaxed);
  if (!status.ok()) ctx_.counters->writeback_errors.fetch_add(1, std::memory_order_relaxed);
  return status;
}

absl::Status EmbeddingTable::EvictFromStripe(uint32_t s, size_t max_victims) {
  MemoryTier::Stripe& st = tier_.stripe(s);
  std::vector<uint64_t> dirty_ids;
  std::vector<std::string> dirty_bytes;
  uint64_t removed = 0;
  {
    absl::MutexLock lock(&st.mu);
    std::vector<uint64_t> victims;
    tier_.PickVictims(st, max_victims, &victims);
    for (uint64_t id : victims) {
      // A sweep that wraps around can name a row twice: skip rows already handled.
      char* row = tier_.Find(st, id);
      if (row == nullptr) continue;
      RowMeta* meta = MemoryTier::Meta(row);
      if (meta->flags & kRowWriteBack) continue;
      if (meta->flags & kRowDirty) {
        std::string copy(row, tier_.row_bytes());
        reinterpret_cast<RowMeta*>(copy.data())->flags = 0;
        dirty_ids.push_back(id);
        dirty_bytes.push_back(std::move(copy));
        meta->flags = (meta->flags & ~kRowDirty) | kRowWriteBack;
      } else {
        tier_.Remove(st, id);
        ++removed;
      }
    }
  }
  ctx_.counters->evicted_to_backend.fetch_add(removed, std::memory_order_relaxed);
  if (dirty_ids.empty()) return absl::OkStatus();
  return WriteBackRows(st, dirty_ids, dirty_bytes, /*remove_after=*/true);
}

absl::Status EmbeddingTable::ShrinkToBudget(int max_rounds) {
  absl::Status first_error;
  const uint32_t num_stripes = tier_.num_stripes();
  for (int round = 0; round < max_rounds; ++round) {
    const int64_t excess = ctx_.budget->Excess();
    if (excess <= 0) break;
    const size_t victims = std::min<size_t>(
        kMaxVictimsPerRound, static_cast<size_t>(excess) / tier_.charged_bytes_per_row() + 1);
    const uint32_t s = evict_cursor_.fetch_add(1, std::memory_order_relaxed) % num_stripes;
    absl::Status status = EvictFromStripe(s, victims);
    if (!status.ok() && first_error.ok()) first_error = status;
  }
  return first_error;
}

}  // namespace ember
