// Copyright 2026 The Ember Authors.
//
// One cap on a PS shard's memory (ember-ps --memory_limit_mb, issue 28 section 5): the
// cap divided into shares, one per part of the shard that holds memory, each wired to
// that part's own bound, and the metrics that show each share beside its use.
//
// The shares of a cap of C bytes, when no part is given explicitly:
//
//   part          share                 wired to (and what happens at the share)
//   baseline      72 MiB                code, gRPC and RocksDB threads, the allocator's
//                                       slack (idle at a 256 MiB cap: ~40); ember-ps
//                                       limits glibc to 2 malloc arenas under a cap
//   inflight      C / 8                 InflightLimiter max_bytes = share / 2 (an answer
//                                       is held twice while gRPC serializes it): Pulls
//                                       beyond it fail RESOURCE_EXHAUSTED, retry hint
//   rocksdb       C / 4                 the block cache's capacity; the memtables are
//                                       charged to it (a WriteBufferManager of share / 2,
//                                       flushing beyond it) and so are SST index and
//                                       filter blocks: blocks are evicted to make room
//   change_log    C / 32                change_log_entries = share / 32 bytes (the ring
//                                       drops the oldest entries)
//   replicas      C / 32                ReplicaStore::SetMaxBytes: new copies beyond it
//                                       are refused (PutReplicas RESOURCE_EXHAUSTED)
//   memory_tier   the rest              memory_budget = share / memory_hard_limit_factor
//                                       (1.1): rows are written back and evicted at the
//                                       budget, pushes refused at 1.1 x it
//
// Precedence: a part given explicitly (--memory_budget_mb, --block_cache_mb,
// --change_log_entries, --max_inflight_mb; --write_buffer_mb sets the memtable size per
// column family inside the rocksdb share) takes what it asks instead of its share, and
// the memory tier, when not given, takes what is left. The cap is refused
// (INVALID_ARGUMENT naming the flags) when the shares add up to more than it, when the
// memory tier would get less than 32 MiB (too small to be useful), when
// --max_inflight_mb=0 (no bound) is given with it, or when --write_buffer_mb exceeds the
// memtables' half of the rocksdb share.
//
// The cap bounds what the shard allocates for data; the process's RSS also holds what
// the allocator keeps after a free (glibc's per-thread arenas: the residual that grows
// under a long flood) and requests gRPC has received before a handler runs
// (shard_bounds.h). docs/RELIABILITY.md has the RSS measured against the cap.

#ifndef EMBER_SERVER_PS_MEMORY_LIMIT_H_
#define EMBER_SERVER_PS_MEMORY_LIMIT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace ember {

// The per-part flags as given on the command line (unset: not given).
struct MemoryParts {
  std::optional<int64_t> memory_budget_mb;
  std::optional<int64_t> block_cache_mb;
  std::optional<int64_t> write_buffer_mb;
  std::optional<uint64_t> change_log_entries;
  int64_t max_inflight_mb = -1;  // ShardBoundsFlags': -1 not given, 0 no bound
};

// A cap divided: each share in bytes, and what each part is set to.
struct MemoryShares {
  int64_t limit = 0;
  int64_t baseline = 0;
  int64_t inflight = 0;
  int64_t rocksdb = 0;
  int64_t change_log = 0;
  int64_t replicas = 0;
  int64_t memory_tier = 0;
  // The parts' settings.
  int64_t memory_budget_bytes = 0;         // memory_tier / hard_limit_factor
  int64_t block_cache_bytes = 0;           // rocksdb
  int64_t write_buffer_bytes = 0;          // one column family's memtable
  int64_t write_buffer_manager_bytes = 0;  // all memtables, charged to the block cache
  uint64_t change_log_entries = 0;         // change_log / 32
  int64_t max_inflight_bytes = 0;          // inflight / 2
};

inline constexpr int64_t kMemoryBaselineBytes = int64_t{72} << 20;
inline constexpr int64_t kMinMemoryTierBytes = int64_t{32} << 20;

// Divides --memory_limit_mb=`limit_mb` (> 0) as described above. `hard_limit_factor` is
// StoreOptions::memory_hard_limit_factor. INVALID_ARGUMENT naming the flags when the cap
// is refused.
absl::StatusOr<MemoryShares> DivideMemoryLimit(int64_t limit_mb, const MemoryParts& parts,
                                               double hard_limit_factor);

// One line per share, for the log at start.
std::string DescribeShares(const MemoryShares& shares);

// What each part holds now (bytes), read at scrape time.
struct MemoryUse {
  int64_t inflight = 0;
  // The block cache's usage (blocks, charged memtables, index and filter blocks) plus
  // what table readers hold outside it.
  int64_t rocksdb = 0;
  int64_t change_log = 0;
  int64_t replicas = 0;
  int64_t memory_tier = 0;
};

// VmRSS of this process (/proc/self/status), or -1.
int64_t SelfResidentBytes();

// The cap's metrics, computed at scrape time:
//   ember_memory_limit_bytes                    gauge, the cap
//   ember_memory_share_bytes{part}              gauge, each part's share
//   ember_memory_share_used_bytes{part}         gauge, what each part holds now;
//                                               baseline: resident minus the others
//   ember_memory_resident_bytes                 gauge, the process's VmRSS
// part is one of baseline, inflight, rocksdb, change_log, replicas, memory_tier.
class MemoryLimitCollector final : public prometheus::Collectable {
 public:
  MemoryLimitCollector(const MemoryShares& shares, std::function<MemoryUse()> use)
      : shares_(shares), use_(std::move(use)) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const MemoryShares shares_;
  const std::function<MemoryUse()> use_;
};

}  // namespace ember

#endif  // EMBER_SERVER_PS_MEMORY_LIMIT_H_
