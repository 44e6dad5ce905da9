// Copyright 2026 The Ember Authors.
//
// InMemoryBackend: a RowBackend that keeps every table in ordered in-process maps. For
// tests and for memory-only shards; nothing survives the process. It passes the same
// contract test as RocksDbBackend and can fail reads or writes on demand so callers'
// error paths can be tested without a disk.
//
//   InMemoryBackend backend;
//   backend.FailWrites(true);
//   EXPECT_EQ(backend.Write(batch).code(), absl::StatusCode::kUnavailable);
//
// Thread-safety: every method may be called concurrently. One mutex guards all tables;
// fine for tests, not meant for a loaded production shard.

#ifndef EMBER_SERVER_STORE_IN_MEMORY_BACKEND_H_
#define EMBER_SERVER_STORE_IN_MEMORY_BACKEND_H_

#include <atomic>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "server/store/row_backend.h"

namespace ember {

class InMemoryBackend final : public RowBackend {
 public:
  InMemoryBackend() = default;
  InMemoryBackend(const InMemoryBackend&) = delete;
  InMemoryBackend& operator=(const InMemoryBackend&) = delete;

  // RowBackend. An unknown table handle is INVALID_ARGUMENT everywhere. Scan calls `fn`
  // without holding the backend's lock (on a copy of the range), so `fn` may call back
  // into the backend.
  absl::StatusOr<BackendTable> OpenTable(const std::string& table) override;
  std::vector<std::string> ListTables() const override;
  absl::Status MultiGet(BackendTable table, absl::Span<const std::string> keys,
                        std::vector<std::string>* values, std::vector<bool>* found) override;
  absl::Status Write(const BackendWriteBatch& batch) override;
  absl::Status Scan(
      BackendTable table, std::string_view begin, std::string_view end,
      const std::function<bool(std::string_view key, std::string_view value)>& fn) override;
  absl::Status DeleteRange(BackendTable table, std::string_view begin,
                           std::string_view end) override;
  // Exact.
  uint64_t EstimateKeys(BackendTable table) const override;
  // No-op: returns OK.
  absl::Status Flush() override { return absl::OkStatus(); }
  // Always 0.
  int64_t DiskBytes() const override { return 0; }

  // While on, Write and DeleteRange (resp. MultiGet and Scan) return UNAVAILABLE and
  // change nothing.
  void FailWrites(bool fail) { fail_writes_.store(fail); }
  void FailReads(bool fail) { fail_reads_.store(fail); }

 private:
  using Table = absl::btree_map<std::string, std::string>;

  // The map of `table`, or null for an unknown handle.
  Table* Find(BackendTable table) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const Table* Find(BackendTable table) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::atomic<bool> fail_writes_{false};
  std::atomic<bool> fail_reads_{false};

  mutable absl::Mutex mu_;
  Table meta_ ABSL_GUARDED_BY(mu_);
  // tables_[t] is table t; a deque so existing tables never move.
  std::deque<Table> tables_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, BackendTable> ids_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ember

#endif  // EMBER_SERVER_STORE_IN_MEMORY_BACKEND_H_
