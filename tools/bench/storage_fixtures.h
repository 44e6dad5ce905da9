// Copyright 2026 The Ember Authors.
//
// Fixtures of the storage suite (storage_bench.cc): key streams, table population,
// process memory and a scratch directory. Not thread-safe; one benchmark thread.

#ifndef EMBER_TOOLS_BENCH_STORAGE_FIXTURES_H_
#define EMBER_TOOLS_BENCH_STORAGE_FIXTURES_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "rocksdb/db.h"
#include "server/store/embedding_store.h"
#include "server/store/rocksdb_backend.h"

namespace ember::bench {

// A fixed pool of keys handed out one batch at a time, wrapping at the end. Several
// streams may share one pool; each has its own cursor, so two measurements fed by
// fresh streams over one pool see the same keys in the same order.
class KeyStream {
 public:
  // REQUIRES: pool->size() >= batch; `pool` outlives the stream.
  KeyStream(const std::vector<uint64_t>* pool, size_t batch) : pool_(pool), batch_(batch) {}

  absl::Span<const uint64_t> Next() {
    if (pos_ + batch_ > pool_->size()) pos_ = 0;
    absl::Span<const uint64_t> out(pool_->data() + pos_, batch_);
    pos_ += batch_;
    return out;
  }

 private:
  const std::vector<uint64_t>* pool_;
  size_t batch_;
  size_t pos_ = 0;
};

// `count` row indices drawn uniformly from [0, rows).
std::vector<uint64_t> UniformRows(uint64_t rows, size_t count, uint64_t seed);

// `count` IDs IdOfRank(r) with r ~ Zipf(s) over [0, rows).
absl::StatusOr<std::vector<uint64_t>> ZipfIds(uint64_t rows, double s, size_t count, uint64_t seed);

// IdOfRank(r) for each r of `rows`.
std::vector<uint64_t> IdsOfRows(absl::Span<const uint64_t> rows);

// `count` gradients uniform in [-0.01, 0.01].
std::vector<float> RandomGradients(size_t count, uint64_t seed);

// Gives rows 0..rows-1 (IDs IdOfRank(r)) a stored row in `table` by pushing each ID
// once, `batch` IDs per Push with `grads` (REQUIRES: grads.size() >= batch * dim).
// Logs progress to stderr as "<label>: N/rows rows" about every 10%.
absl::Status Populate(EmbeddingStore& store, const std::string& table, int64_t rows, size_t batch,
                      size_t dim, absl::Span<const float> grads, std::string_view label);

// Seconds since `start` on the steady clock.
double SecondsSince(std::chrono::steady_clock::time_point start);

// An EmbeddingStore over a RocksDB database at `path` with the write-ahead log off
// (population speed; the store's Flush makes rows durable), the memory tier bounded by
// `memory_budget` bytes and, when block_cache_bytes >= 0, that block cache.
struct TieredStore {
  std::unique_ptr<EmbeddingStore> store;
  RocksDbBackend* backend = nullptr;  // owned by `store`
};
absl::StatusOr<TieredStore> OpenTieredStore(const std::string& path, int64_t memory_budget,
                                            int64_t block_cache_bytes = -1,
                                            bool frequency_admission = false);

// Resident set size of this process in bytes (/proc/self/statm), or 0 if unreadable.
int64_t ResidentBytes();

// Polls until RocksDB runs and owes no flush or compaction, or `timeout_s` passes.
// Returns false on timeout.
bool WaitForQuiescence(rocksdb::DB* db, double timeout_s);

// Reads every regular file under `dir` once, so that the OS page cache holds them.
// Returns the bytes read. Errors: UNAVAILABLE if a file cannot be read.
absl::StatusOr<int64_t> ReadFilesUnder(const std::string& dir);

// The working directory of a suite's database.
//
// Scratch (path ""): a fresh "/tmp/ember-bench-XXXXXX", removed with its contents on
// destruction. Named: the directory (created if missing) is kept, so a later run can
// reuse what it holds: a suite writes a marker describing the finished population
// (WriteMarker) and skips populating when the marker matches (ReadMarker).
class BenchDir {
 public:
  // Errors: UNAVAILABLE if the directory cannot be created.
  static absl::StatusOr<std::unique_ptr<BenchDir>> Open(const std::string& path);
  ~BenchDir();

  BenchDir(const BenchDir&) = delete;
  BenchDir& operator=(const BenchDir&) = delete;

  const std::string& path() const { return path_; }
  bool scratch() const { return scratch_; }
  // True if the directory holds no entries.
  bool Empty() const;
  // The marker's contents, or "" if there is none.
  std::string ReadMarker() const;
  // Writes the marker (replacing any). Errors: UNAVAILABLE on IO errors.
  absl::Status WriteMarker(const std::string& contents) const;

 private:
  BenchDir(std::string path, bool scratch) : path_(std::move(path)), scratch_(scratch) {}
  std::string path_;
  bool scratch_;
};

// Logs "<suite>: <message>" through EMBER_LOG(INFO) (common/log.h: stderr, with time and level).
void Log(std::string_view suite, std::string_view message);

}  // namespace ember::bench

#endif  // EMBER_TOOLS_BENCH_STORAGE_FIXTURES_H_
