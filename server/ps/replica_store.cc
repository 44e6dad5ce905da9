// Copyright 2026 The Ember Authors.

#include "server/ps/replica_store.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "common/hash.h"

namespace ember {

ReplicaStore::ReplicaStore(const ReplicaStoreOptions& options) : options_(options) {}

int64_t ReplicaStore::CopyBytes(size_t dim) {
  // The map's slot (key and Copy, plus a control byte) at its maximum load of 7/8, the
  // embedding's floats and the allocator's 16-byte header on them.
  constexpr size_t kSlot = (sizeof(uint64_t) + sizeof(Copy) + 1) * 8 / 7;
  return static_cast<int64_t>(kSlot + dim * sizeof(float) + 16);
}

ReplicaStore::Table* ReplicaStore::FindTable(absl::string_view table) const {
  absl::ReaderMutexLock lock(&tables_mu_);
  auto it = tables_.find(table);
  return it == tables_.end() ? nullptr : it->second.get();
}

ReplicaStore::Table* ReplicaStore::GetOrCreateTable(absl::string_view table) {
  if (Table* found = FindTable(table)) return found;
  absl::MutexLock lock(&tables_mu_);
  std::unique_ptr<Table>& slot = tables_[table];
  if (slot == nullptr) slot = std::make_unique<Table>(options_.num_stripes);
  return slot.get();
}

ReplicaStore::Stripe& ReplicaStore::StripeOf(const Table& table, uint64_t id) const {
  return table.stripes[Mix64Alt(id) & static_cast<uint64_t>(options_.num_stripes - 1)];
}

void ReplicaStore::PruneDropMarks(Stripe& stripe, absl::Time now) const {
  if (now < stripe.next_prune) return;
  stripe.next_prune = now + options_.drop_memory / 4;
  absl::erase_if(stripe.drops,
                 [&](const auto& entry) { return now - entry.second.at >= options_.drop_memory; });
}

size_t ReplicaStore::Put(absl::string_view table, uint32_t dim, const ReplicaSource& source,
                         absl::Span<const uint64_t> ids, absl::Span<const float> values,
                         absl::Span<const uint64_t> versions, absl::Time now, size_t* refused) {
  if (ids.empty() || dim == 0) return 0;
  Table* t = GetOrCreateTable(table);
  size_t applied = 0;
  const int64_t max_bytes = max_bytes_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint64_t id = ids[i];
    Stripe& stripe = StripeOf(*t, id);
    absl::MutexLock lock(&stripe.mu);
    PruneDropMarks(stripe, now);
    if (auto mark = stripe.drops.find(id); mark != stripe.drops.end()) {
      const DropMark& m = mark->second;
      if (m.owner_shard == source.owner_shard && m.owner_incarnation == source.owner_incarnation) {
        // Copied before (or when) the owner dropped it: a late copy, refused.
        if (source.hot_set_version <= m.hot_set_version) continue;
        stripe.drops.erase(mark);
      }
    }
    if (max_bytes > 0 && !stripe.copies.contains(id) &&
        bytes_.load(std::memory_order_relaxed) + CopyBytes(dim) > max_bytes) {
      if (refused != nullptr) ++*refused;
      continue;
    }
    auto [it, inserted] = stripe.copies.try_emplace(id);
    Copy& copy = it->second;
    if (!inserted && copy.meta.source.owner_shard == source.owner_shard &&
        copy.meta.source.owner_incarnation == source.owner_incarnation &&
        std::tie(source.owner_attempt, versions[i]) <=
            std::tie(copy.meta.source.owner_attempt, copy.meta.version)) {
      continue;  // not newer than the held copy of the same owner process
    }
    copy.meta.source = source;
    copy.meta.version = versions[i];
    copy.meta.copied = now;
    bytes_.fetch_add(CopyBytes(dim) - (inserted ? 0 : CopyBytes(copy.embedding.size())),
                     std::memory_order_relaxed);
    copy.embedding.assign(values.begin() + static_cast<std::ptrdiff_t>(i * dim),
                          values.begin() + static_cast<std::ptrdiff_t>((i + 1) * dim));
    if (inserted) size_.fetch_add(1, std::memory_order_relaxed);
    ++applied;
  }
  return applied;
}

size_t ReplicaStore::Drop(absl::string_view table, const ReplicaSource& source,
                          absl::Span<const uint64_t> ids, absl::Time now) {
  if (ids.empty()) return 0;
  // Also without any copy held: a copy may still be on its way, the marks refuse it.
  Table* t = GetOrCreateTable(table);
  size_t removed = 0;
  for (uint64_t id : ids) {
    Stripe& stripe = StripeOf(*t, id);
    absl::MutexLock lock(&stripe.mu);
    PruneDropMarks(stripe, now);
    auto it = stripe.copies.find(id);
    if (it != stripe.copies.end() && it->second.meta.source.owner_shard == source.owner_shard) {
      bytes_.fetch_sub(CopyBytes(it->second.embedding.size()), std::memory_order_relaxed);
      stripe.copies.erase(it);
      size_.fetch_sub(1, std::memory_order_relaxed);
      ++removed;
    }
    DropMark& mark = stripe.drops[id];
    if (mark.owner_shard != source.owner_shard ||
        mark.owner_incarnation != source.owner_incarnation ||
        mark.hot_set_version < source.hot_set_version) {
      mark.owner_shard = source.owner_shard;
      mark.owner_incarnation = source.owner_incarnation;
      mark.hot_set_version = source.hot_set_version;
    }
    mark.at = now;
  }
  return removed;
}

size_t ReplicaStore::Get(absl::string_view table, absl::Span<const uint64_t> ids,
                         absl::FunctionRef<bool(size_t i, const ReplicaMeta& meta)> accept,
                         absl::Span<float> out, std::vector<uint32_t>* missing) const {
  const Table* t = FindTable(table);
  const size_t dim = ids.empty() ? 0 : out.size() / ids.size();
  size_t answered = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    float* dest = out.data() + i * dim;
    bool served = false;
    if (t != nullptr) {
      Stripe& stripe = StripeOf(*t, ids[i]);
      absl::ReaderMutexLock lock(&stripe.mu);
      auto it = stripe.copies.find(ids[i]);
      if (it != stripe.copies.end() && it->second.embedding.size() == dim &&
          accept(i, it->second.meta)) {
        std::copy(it->second.embedding.begin(), it->second.embedding.end(), dest);
        served = true;
      }
    }
    if (served) {
      ++answered;
    } else {
      std::fill(dest, dest + dim, 0.0f);
      missing->push_back(static_cast<uint32_t>(i));
    }
  }
  return answered;
}

bool ReplicaStore::Lookup(absl::string_view table, uint64_t id, ReplicaMeta* meta,
                          std::vector<float>* embedding) const {
  const Table* t = FindTable(table);
  if (t == nullptr) return false;
  Stripe& stripe = StripeOf(*t, id);
  absl::ReaderMutexLock lock(&stripe.mu);
  auto it = stripe.copies.find(id);
  if (it == stripe.copies.end()) return false;
  if (meta != nullptr) *meta = it->second.meta;
  if (embedding != nullptr) *embedding = it->second.embedding;
  return true;
}

size_t ReplicaStore::DropIf(
    absl::FunctionRef<bool(absl::string_view table, uint64_t id, const ReplicaMeta& meta)> remove) {
  std::vector<std::pair<std::string, Table*>> tables;
  {
    absl::ReaderMutexLock lock(&tables_mu_);
    for (const auto& [name, table] : tables_) tables.emplace_back(name, table.get());
  }
  size_t removed = 0;
  for (const auto& named : tables) {
    const std::string& name = named.first;  // (clang 14 cannot capture a binding)
    for (int s = 0; s < options_.num_stripes; ++s) {
      Stripe& stripe = named.second->stripes[s];
      absl::MutexLock lock(&stripe.mu);
      removed += absl::erase_if(stripe.copies, [&](const auto& entry) {
        if (!remove(name, entry.first, entry.second.meta)) return false;
        bytes_.fetch_sub(CopyBytes(entry.second.embedding.size()), std::memory_order_relaxed);
        return true;
      });
    }
  }
  size_.fetch_sub(removed, std::memory_order_relaxed);
  return removed;
}

void ReplicaStore::Clear() {
  absl::ReaderMutexLock lock(&tables_mu_);
  for (const auto& [name, table] : tables_) {
    for (int s = 0; s < options_.num_stripes; ++s) {
      Stripe& stripe = table->stripes[s];
      absl::MutexLock stripe_lock(&stripe.mu);
      size_.fetch_sub(stripe.copies.size(), std::memory_order_relaxed);
      for (const auto& entry : stripe.copies) {
        bytes_.fetch_sub(CopyBytes(entry.second.embedding.size()), std::memory_order_relaxed);
      }
      stripe.copies.clear();
      stripe.drops.clear();
    }
  }
}

}  // namespace ember
