// Copyright 2026 The Ember Authors.

#include "server/store/in_memory_backend.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ember {

InMemoryBackend::Table* InMemoryBackend::Find(BackendTable table) {
  if (table == kMetaTable) return &meta_;
  if (table < 0 || static_cast<size_t>(table) >= tables_.size()) return nullptr;
  return &tables_[table];
}

const InMemoryBackend::Table* InMemoryBackend::Find(BackendTable table) const {
  if (table == kMetaTable) return &meta_;
  if (table < 0 || static_cast<size_t>(table) >= tables_.size()) return nullptr;
  return &tables_[table];
}

absl::StatusOr<BackendTable> InMemoryBackend::OpenTable(const std::string& table) {
  if (table.empty()) return absl::InvalidArgumentError("empty table name");
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = ids_.try_emplace(table, static_cast<BackendTable>(tables_.size()));
  if (inserted) tables_.emplace_back();
  return it->second;
}

std::vector<std::string> InMemoryBackend::ListTables() const {
  std::vector<std::string> names;
  {
    absl::MutexLock lock(&mu_);
    names.reserve(ids_.size());
    for (const auto& [name, id] : ids_) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

absl::Status InMemoryBackend::MultiGet(BackendTable table, absl::Span<const std::string> keys,
                                       std::vector<std::string>* values, std::vector<bool>* found) {
  if (fail_reads_.load()) return absl::UnavailableError("injected read fault");
  absl::MutexLock lock(&mu_);
  const Table* t = Find(table);
  if (t == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown table ", table));
  values->resize(keys.size());
  found->assign(keys.size(), false);
  for (size_t i = 0; i < keys.size(); ++i) {
    auto it = t->find(keys[i]);
    if (it == t->end()) {
      (*values)[i].clear();
    } else {
      (*values)[i] = it->second;
      (*found)[i] = true;
    }
  }
  return absl::OkStatus();
}

absl::Status InMemoryBackend::Write(const BackendWriteBatch& batch) {
  if (fail_writes_.load()) return absl::UnavailableError("injected write fault");
  absl::MutexLock lock(&mu_);
  // Check every handle first so a bad one leaves the batch wholly unapplied.
  for (const BackendWrite& w : batch) {
    if (Find(w.table) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("write to unknown table ", w.table));
    }
  }
  for (const BackendWrite& w : batch) {
    Table* t = Find(w.table);
    if (w.erase) {
      t->erase(w.key);
    } else {
      (*t)[w.key] = w.value;
    }
  }
  return absl::OkStatus();
}

absl::Status InMemoryBackend::DeleteRange(BackendTable table, std::string_view begin,
                                          std::string_view end) {
  if (fail_writes_.load()) return absl::UnavailableError("injected write fault");
  if (!end.empty() && end < begin) {
    return absl::InvalidArgumentError("delete range: end sorts before begin");
  }
  absl::MutexLock lock(&mu_);
  Table* t = Find(table);
  if (t == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown table ", table));
  auto first = t->lower_bound(std::string(begin));
  auto last = end.empty() ? t->end() : t->lower_bound(std::string(end));
  t->erase(first, last);
  return absl::OkStatus();
}

uint64_t InMemoryBackend::EstimateKeys(BackendTable table) const {
  absl::MutexLock lock(&mu_);
  const Table* t = Find(table);
  return t == nullptr ? 0 : t->size();
}

absl::Status InMemoryBackend::Scan(
    BackendTable table, std::string_view begin, std::string_view end,
    const std::function<bool(std::string_view key, std::string_view value)>& fn) {
  if (fail_reads_.load()) return absl::UnavailableError("injected read fault");
  // Copy in chunks so `fn` runs unlocked and a huge range is not copied at once.
  constexpr size_t kChunk = 1024;
  std::vector<std::pair<std::string, std::string>> chunk;
  std::string from(begin);
  bool first = true;
  while (true) {
    chunk.clear();
    {
      absl::MutexLock lock(&mu_);
      const Table* t = Find(table);
      if (t == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown table ", table));
      auto it = first ? t->lower_bound(from) : t->upper_bound(from);
      for (; it != t->end() && chunk.size() < kChunk; ++it) {
        if (!end.empty() && it->first >= end) break;
        chunk.emplace_back(it->first, it->second);
      }
    }
    for (const auto& [key, value] : chunk) {
      if (!fn(key, value)) return absl::OkStatus();
    }
    if (chunk.size() < kChunk) return absl::OkStatus();
    from = chunk.back().first;
    first = false;
  }
}

}  // namespace ember
