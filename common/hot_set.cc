// Copyright 2026 The Ember Authors.

#include "common/hot_set.h"

#include <algorithm>
#include <utility>

namespace ember {

HotSetView::HotSetView(v1::HotSet hot_set) : proto_(std::move(hot_set)) {
  for (const v1::HotKeyTable& table : proto_.tables()) {
    absl::flat_hash_set<uint64_t>& keys = keys_[table.table()];
    for (const v1::HotKey& key : table.keys()) keys.insert(key.id());
    size_ += keys.size();
  }
}

bool HotSetView::IsHot(absl::string_view table, uint64_t id) const {
  const absl::flat_hash_set<uint64_t>* keys = HotKeys(table);
  return keys != nullptr && keys->contains(id);
}

const absl::flat_hash_set<uint64_t>* HotSetView::HotKeys(absl::string_view table) const {
  auto it = keys_.find(table);
  return it == keys_.end() || it->second.empty() ? nullptr : &it->second;
}

std::vector<uint32_t> HotSetView::ReplicaHoldersOf(uint32_t owner) const {
  std::vector<uint32_t> out;
  if (!replicated()) return out;
  const int n = proto_.holders_size();
  // The owner's position in the ring; a non-holder sits before the first larger id.
  int start = n;
  bool owner_is_holder = false;
  for (int i = 0; i < n; ++i) {
    const uint32_t id = proto_.holders(i).shard_id();
    if (id == owner) {
      start = i + 1;
      owner_is_holder = true;
      break;
    }
    if (id > owner && start == n) start = i;
  }
  const int others = owner_is_holder ? n - 1 : n;
  const int count = std::min<int>(static_cast<int>(proto_.replicas()), others);
  for (int k = 0; k < n && static_cast<int>(out.size()) < count; ++k) {
    const uint32_t id = proto_.holders((start + k) % n).shard_id();
    if (id != owner) out.push_back(id);
  }
  return out;
}

std::string HotSetView::AddressOf(uint32_t shard_id) const {
  for (const v1::HotSetHolder& holder : proto_.holders()) {
    if (holder.shard_id() == shard_id) return holder.address();
  }
  return "";
}

}  // namespace ember
