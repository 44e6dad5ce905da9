// Copyright 2026 The Ember Authors.
//
// RowBackend: the durable tier under a shard's memory tier. It holds every stored row
// of every table as opaque key/value bytes (see row_layout.h). Two implementations:
// RocksDbBackend (production) and InMemoryBackend (tests and memory-only shards); both
// pass the same contract test (tests/server/store/row_backend_test.cc).
//
// Thread-safety: every method may be called concurrently.

#ifndef EMBER_SERVER_STORE_ROW_BACKEND_H_
#define EMBER_SERVER_STORE_ROW_BACKEND_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ember {

// Table handle returned by RowBackend::OpenTable. kMetaTable addresses the backend's
// own small key-value space for shard metadata (version, table configs, sketches).
using BackendTable = int;
inline constexpr BackendTable kMetaTable = -1;

struct BackendWrite {
  BackendTable table = kMetaTable;
  std::string key;
  std::string value;  // ignored when erase
  bool erase = false;
};

// A batch applied atomically: after a crash either all of it or none of it is visible.
using BackendWriteBatch = std::vector<BackendWrite>;

class RowBackend {
 public:
  virtual ~RowBackend() = default;

  // Opens the keyspace of `table`, creating it if absent; returns its handle.
  // Idempotent. Errors: INVALID_ARGUMENT for an empty name; IO errors as UNAVAILABLE
  // or INTERNAL.
  virtual absl::StatusOr<BackendTable> OpenTable(const std::string& table) = 0;

  // Names of the tables that exist in the backend (including ones not yet opened).
  virtual std::vector<std::string> ListTables() const = 0;

  // Looks up every key. On OK, found[i] says whether keys[i] exists and values[i]
  // holds its value. A failed lookup of any key fails the whole call.
  virtual absl::Status MultiGet(BackendTable table, absl::Span<const std::string> keys,
                                std::vector<std::string>* values, std::vector<bool>* found) = 0;

  // Applies `batch` atomically. On error nothing of the batch is visible.
  virtual absl::Status Write(const BackendWriteBatch& batch) = 0;

  // Calls fn(key, value) for each key in [begin, end) of `table` in key order until
  // fn returns false. Empty `end` means "to the end of the table". Writes made during
  // the scan may or may not be seen.
  virtual absl::Status Scan(
      BackendTable table, std::string_view begin, std::string_view end,
      const std::function<bool(std::string_view key, std::string_view value)>& fn) = 0;

  // Removes every key in [begin, end) of `table` as one atomic write (after a crash
  // either the whole range is gone or none of it), durable like Write. Empty `end`
  // means "to the end of the table"; begin == end removes nothing. Errors:
  // INVALID_ARGUMENT for an unknown table or end < begin; write errors as for Write.
  virtual absl::Status DeleteRange(BackendTable table, std::string_view begin,
                                   std::string_view end) = 0;

  // Number of keys in `table`: exact for memory backends, an estimate (no scan; it
  // may lag deletes) for RocksDB. 0 for an unknown table or when unknown.
  virtual uint64_t EstimateKeys(BackendTable table) const = 0;

  // Makes every acknowledged Write durable across a process crash (even with the
  // write-ahead log disabled).
  virtual absl::Status Flush() = 0;

  // Approximate bytes on disk (0 for memory backends).
  virtual int64_t DiskBytes() const = 0;
};

}  // namespace ember

#endif  // EMBER_SERVER_STORE_ROW_BACKEND_H_
