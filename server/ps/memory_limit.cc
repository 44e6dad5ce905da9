// Copyright 2026 The Ember Authors.

#include "server/ps/memory_limit.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/metric_families.h"

namespace ember {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kChangeEntryBytes = 32;  // sizeof(Change)
// A column family's memtable when --write_buffer_mb is not given: an eighth of the
// rocksdb share (several fit in the write buffer manager's half), at most ember-ps's
// default of 64 MiB.
constexpr int64_t kMaxDefaultWriteBuffer = 64 * kMiB;

std::string Mib(int64_t bytes) {
  return absl::StrCat(bytes / kMiB, bytes % kMiB == 0 ? "" : "+", " MiB");
}

}  // namespace

absl::StatusOr<MemoryShares> DivideMemoryLimit(int64_t limit_mb, const MemoryParts& parts,
                                               double hard_limit_factor) {
  const std::string flag = absl::StrCat("--memory_limit_mb=", limit_mb);
  if (parts.max_inflight_mb == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag,
                     " conflicts with --max_inflight_mb=0: the answers in flight are part of the "
                     "cap and need a bound (leave --max_inflight_mb out for the cap's share)"));
  }
  MemoryShares s;
  const int64_t c = limit_mb * kMiB;
  s.limit = c;
  s.baseline = kMemoryBaselineBytes;
  s.inflight = parts.max_inflight_mb > 0 ? 2 * parts.max_inflight_mb * kMiB : c / 8;
  s.rocksdb = parts.block_cache_mb.has_value() ? *parts.block_cache_mb * kMiB : c / 4;
  s.change_log_entries = parts.change_log_entries.has_value()
                             ? *parts.change_log_entries
                             : static_cast<uint64_t>(c / 32 / kChangeEntryBytes);
  s.change_log = static_cast<int64_t>(s.change_log_entries) * kChangeEntryBytes;
  s.replicas = c / 32;
  const int64_t others = s.baseline + s.inflight + s.rocksdb + s.change_log + s.replicas;
  const std::string sum = absl::StrCat(
      "baseline ", Mib(s.baseline), " + in flight ", Mib(s.inflight), " + rocksdb ", Mib(s.rocksdb),
      " + change log ", Mib(s.change_log), " + replicas ", Mib(s.replicas));
  if (parts.memory_budget_mb.has_value()) {
    s.memory_budget_bytes = *parts.memory_budget_mb * kMiB;
    if (s.memory_budget_bytes == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " conflicts with --memory_budget_mb=0 (an unlimited memory tier)"));
    }
    s.memory_tier =
        static_cast<int64_t>(static_cast<double>(s.memory_budget_bytes) * hard_limit_factor);
    if (others + s.memory_tier > c) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " is less than its shares: ", sum, " + memory tier ",
                       Mib(s.memory_tier), " (--memory_budget_mb x ", hard_limit_factor,
                       "); lower the explicit flags or raise the cap"));
    }
  } else {
    s.memory_tier = c - others;
    if (s.memory_tier < kMinMemoryTierBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " is too small: ", sum, " leave the memory tier ",
          Mib(std::max<int64_t>(0, s.memory_tier)), ", less than the ", Mib(kMinMemoryTierBytes),
          " it needs; raise the cap (or lower the explicit flags)"));
    }
    s.memory_budget_bytes =
        static_cast<int64_t>(static_cast<double>(s.memory_tier) / hard_limit_factor);
  }
  s.block_cache_bytes = s.rocksdb;
  s.write_buffer_manager_bytes = s.rocksdb / 2;
  s.write_buffer_bytes = parts.write_buffer_mb.has_value()
                             ? *parts.write_buffer_mb * kMiB
                             : std::min(kMaxDefaultWriteBuffer, s.rocksdb / 8);
  if (s.write_buffer_bytes > s.write_buffer_manager_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": --write_buffer_mb=", *parts.write_buffer_mb,
        " exceeds the memtables' half of the RocksDB share (", Mib(s.write_buffer_manager_bytes),
        " of --block_cache_mb or the cap's quarter)"));
  }
  s.max_inflight_bytes = s.inflight / 2;
  return s;
}

std::string DescribeShares(const MemoryShares& s) {
  return absl::StrCat(
      "memory limit ", Mib(s.limit), ": baseline ", Mib(s.baseline), "; in flight ",
      Mib(s.inflight), " (answers ", Mib(s.max_inflight_bytes), "); rocksdb ", Mib(s.rocksdb),
      " (block cache with memtables up to ", Mib(s.write_buffer_manager_bytes), ", ",
      Mib(s.write_buffer_bytes), " per column family); change log ", Mib(s.change_log), " (",
      s.change_log_entries, " entries); replicas ", Mib(s.replicas), "; memory tier ",
      Mib(s.memory_tier), " (budget ", Mib(s.memory_budget_bytes), ")");
}

int64_t SelfResidentBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoll(line.c_str() + 6, nullptr, 10) * 1024;
  }
  return -1;
}

std::vector<prometheus::MetricFamily> MemoryLimitCollector::Collect() const {
  const MemoryUse use = use_();
  const int64_t resident = SelfResidentBytes();
  const int64_t parts =
      use.inflight + use.rocksdb + use.change_log + use.replicas + use.memory_tier;
  auto d = [](int64_t v) { return static_cast<double>(v); };
  std::vector<prometheus::MetricFamily> out;
  FamilyWriter w(&out);
  w.Gauge("ember_memory_limit_bytes", "The shard's memory cap (--memory_limit_mb).",
          d(shares_.limit));
  w.Labelled("ember_memory_share_bytes", "The cap's share of each part of the shard.",
             prometheus::MetricType::Gauge, "part",
             {{"baseline", d(shares_.baseline)},
              {"inflight", d(shares_.inflight)},
              {"rocksdb", d(shares_.rocksdb)},
              {"change_log", d(shares_.change_log)},
              {"replicas", d(shares_.replicas)},
              {"memory_tier", d(shares_.memory_tier)}});
  w.Labelled("ember_memory_share_used_bytes",
             "What each part holds now (baseline: resident bytes minus the other parts).",
             prometheus::MetricType::Gauge, "part",
             {{"baseline", d(std::max<int64_t>(0, resident - parts))},
              {"inflight", d(use.inflight)},
              {"rocksdb", d(use.rocksdb)},
              {"change_log", d(use.change_log)},
              {"replicas", d(use.replicas)},
              {"memory_tier", d(use.memory_tier)}});
  w.Gauge("ember_memory_resident_bytes", "The process's resident memory (VmRSS).", d(resident));
  return out;
}

}  // namespace ember
