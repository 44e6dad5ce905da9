// Copyright 2026 The Ember Authors.
//
// HotSetView: a read-only, indexed view of a published HotSet (proto/ember/v1/
// hotkeys.proto) and the one definition of which shards hold a hot key's replicas.
// The owner (server/ps) and every client (common/ps_client) compute replica holders
// with ReplicaHoldersOf, so they always agree for the same HotSet version.
//
//   auto view = std::make_shared<const HotSetView>(response.hot_set());
//   if (view->IsHot("item", id)) {
//     std::vector<uint32_t> holders = view->ReplicaHoldersOf(map.OwnerOf(slot));
//     ...
//   }
//
// Thread-safety: immutable after construction; share it as shared_ptr<const>.

#ifndef EMBER_COMMON_HOT_SET_H_
#define EMBER_COMMON_HOT_SET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "ember/v1/hotkeys.pb.h"

namespace ember {

class HotSetView {
 public:
  HotSetView() = default;  // version 0: nothing is hot
  explicit HotSetView(v1::HotSet hot_set);

  uint64_t version() const { return proto_.version(); }
  const v1::HotSet& proto() const { return proto_; }

  // Whether replica reads are on: replicas > 0 and at least two holders.
  bool replicated() const { return proto_.replicas() > 0 && proto_.holders_size() >= 2; }

  bool IsHot(absl::string_view table, uint64_t id) const;
  // The hot keys of `table`; null when it has none.
  const absl::flat_hash_set<uint64_t>* HotKeys(absl::string_view table) const;
  // Number of hot keys over all tables.
  size_t size() const { return size_; }

  // The shards holding replicas of a hot key owned by `owner`, not including the owner:
  // the min(replicas, holders - 1) holders after the owner's position in `holders`
  // (ring order). An owner that is not a holder (it joined after publication) counts
  // as placed before the first holder with a larger shard id. Empty when !replicated().
  std::vector<uint32_t> ReplicaHoldersOf(uint32_t owner) const;

  // The address of holder `shard_id`, or "" if it is not a holder.
  std::string AddressOf(uint32_t shard_id) const;

 private:
  v1::HotSet proto_;
  absl::flat_hash_map<std::string, absl::flat_hash_set<uint64_t>> keys_;
  size_t size_ = 0;
};

}  // namespace ember

#endif  // EMBER_COMMON_HOT_SET_H_
