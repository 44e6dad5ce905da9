// Copyright 2026 The Ember Authors.
//
// ReplicaStore: the copies of other shards' hot rows that a PS shard holds to answer
// replica reads (hotkeys.proto, step 4; PsService.PutReplicas). Derived data: in
// memory only, not in checkpoints or the update stream.
//
// Per table and id it keeps one copy: the embedding and where it came from (owner
// shard, owner process incarnation and job attempt, the row's version at the owner,
// the owner's step, when it was copied). Put keeps the newest copy per owner
// process: a copy from the same (owner shard, incarnation) replaces the held one only
// with a higher (attempt, version), so copies that arrive out of order never go back;
// a copy from another owner or incarnation always replaces.
//
// Drop removes an owner's copies and remembers the drop (a "drop mark": owner shard,
// incarnation, hot-set version) for `drop_memory`: a copy of that owner process made
// under a hot-set version at or below the drop's is refused. A copy sent before the
// key stopped being hot that arrives after the drop therefore cannot bring back a
// copy that nobody refreshes any more.
//
// With a byte bound (SetMaxBytes: ember-ps's share of --memory_limit_mb for replicas)
// Put refuses copies of ids not held yet once the copies held would exceed it; a held
// copy is still refreshed. Reads of refused ids go to their owner, as for any miss.
//
// What is served is the caller's decision: Get hands each held copy's meta to an
// `accept` function (hot set, holder, owner and staleness checks live in the service).
//
//   ReplicaStore replicas;
//   replicas.Put("item", dim, source, ids, values, versions, absl::Now());
//   std::vector<uint32_t> missing;
//   replicas.Get("item", ids, accept, absl::MakeSpan(out), &missing);
//
// Thread-safety: all methods may be called concurrently. Copies are striped by id
// (a reader/writer lock per stripe), so concurrent reads of one table do not contend.

#ifndef EMBER_SERVER_PS_REPLICA_STORE_H_
#define EMBER_SERVER_PS_REPLICA_STORE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace ember {

// Where a copy came from.
struct ReplicaSource {
  uint32_t owner_shard = 0;
  uint64_t owner_incarnation = 0;
  uint64_t owner_attempt = 0;
  int64_t step = 0;              // the owner's newest pushed step when it copied
  uint64_t hot_set_version = 0;  // the owner's hot set when it copied
};

// One held copy, as Get's `accept` sees it.
struct ReplicaMeta {
  ReplicaSource source;
  uint64_t version = 0;  // the row's version at the owner
  absl::Time copied;     // when this holder stored it
};

struct ReplicaStoreOptions {
  // Lock stripes per table; a power of two in [1, 1024]. Default: 16.
  int num_stripes = 16;
  // How long a drop mark refuses late copies. Longer than any PutReplicas deadline.
  // Default: 2 min.
  absl::Duration drop_memory = absl::Minutes(2);
};

class ReplicaStore {
 public:
  explicit ReplicaStore(const ReplicaStoreOptions& options = {});

  ReplicaStore(const ReplicaStore&) = delete;
  ReplicaStore& operator=(const ReplicaStore&) = delete;

  // Stores copies of ids[i] with embedding values[i * dim, (i + 1) * dim) and row
  // version versions[i], stored at `now`. Returns how many were newer than what was
  // held (applied). REQUIRES: values.size() == ids.size() * dim, versions.size() ==
  // ids.size() and dim > 0 (the caller validates against the table's config).
  // Copies of new ids that would take bytes() past max_bytes() are not stored; their
  // number is added to *refused when given.
  size_t Put(absl::string_view table, uint32_t dim, const ReplicaSource& source,
             absl::Span<const uint64_t> ids, absl::Span<const float> values,
             absl::Span<const uint64_t> versions, absl::Time now, size_t* refused = nullptr);

  // Removes the copies of `ids` whose owner is source.owner_shard and leaves a drop
  // mark for them (see above). Returns how many copies were removed.
  size_t Drop(absl::string_view table, const ReplicaSource& source, absl::Span<const uint64_t> ids,
              absl::Time now);

  // For each i: if a copy of ids[i] is held and accept(i, meta) is true, writes its
  // embedding to out[i * dim, (i + 1) * dim); otherwise writes zeros there and appends
  // i to *missing (ascending). `accept` runs under a stripe's read lock: keep it cheap
  // and do not call back into the store. Returns the number of positions answered.
  // The dim is out.size() / ids.size(); a copy of another length is never served.
  size_t Get(absl::string_view table, absl::Span<const uint64_t> ids,
             absl::FunctionRef<bool(size_t i, const ReplicaMeta& meta)> accept,
             absl::Span<float> out, std::vector<uint32_t>* missing) const;

  // The held copy's meta of `id`, if any (tests and diagnostics).
  bool Lookup(absl::string_view table, uint64_t id, ReplicaMeta* meta,
              std::vector<float>* embedding = nullptr) const;

  // Removes every copy for which remove(table, id, meta) is true. Returns how many.
  size_t DropIf(
      absl::FunctionRef<bool(absl::string_view table, uint64_t id, const ReplicaMeta& meta)>
          remove);

  // Removes every copy and drop mark.
  void Clear();

  // Copies held now, over all tables.
  size_t size() const { return size_.load(std::memory_order_relaxed); }
  // What the copies held take in memory, about: each copy's embedding, meta and hash
  // map slot (at the map's full load) and the allocator's header. Drop marks are not
  // counted (they expire after drop_memory).
  int64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  // The bound on bytes() for new copies; 0 (the default): none. May change any time.
  void SetMaxBytes(int64_t max_bytes) { max_bytes_.store(max_bytes, std::memory_order_relaxed); }
  int64_t max_bytes() const { return max_bytes_.load(std::memory_order_relaxed); }

 private:
  struct Copy {
    ReplicaMeta meta;
    std::vector<float> embedding;
  };
  // bytes() of one copy of `dim` floats.
  static int64_t CopyBytes(size_t dim);
  struct DropMark {
    uint32_t owner_shard = 0;
    uint64_t owner_incarnation = 0;
    uint64_t hot_set_version = 0;
    absl::Time at;
  };
  struct Stripe {
    mutable absl::Mutex mu;
    absl::flat_hash_map<uint64_t, Copy> copies ABSL_GUARDED_BY(mu);
    absl::flat_hash_map<uint64_t, DropMark> drops ABSL_GUARDED_BY(mu);
    absl::Time next_prune ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  };
  struct Table {
    explicit Table(int num_stripes) : stripes(new Stripe[num_stripes]) {}
    const std::unique_ptr<Stripe[]> stripes;
  };

  // The table, or null if it never held a copy. Tables are never removed, so the
  // pointer stays valid.
  Table* FindTable(absl::string_view table) const;
  Table* GetOrCreateTable(absl::string_view table);
  Stripe& StripeOf(const Table& table, uint64_t id) const;
  // Removes drop marks older than drop_memory (at most once per drop_memory/4).
  void PruneDropMarks(Stripe& stripe, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(stripe.mu);

  const ReplicaStoreOptions options_;
  mutable absl::Mutex tables_mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<Table>> tables_ ABSL_GUARDED_BY(tables_mu_);
  std::atomic<size_t> size_{0};
  std::atomic<int64_t> bytes_{0};
  std::atomic<int64_t> max_bytes_{0};
};

}  // namespace ember

#endif  // EMBER_SERVER_PS_REPLICA_STORE_H_
