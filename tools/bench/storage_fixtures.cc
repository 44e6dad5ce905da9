// Copyright 2026 The Ember Authors.

#include "tools/bench/storage_fixtures.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/bench/zipf.h"

namespace ember::bench {

std::vector<uint64_t> UniformRows(uint64_t rows, size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint64_t> dist(0, rows - 1);
  std::vector<uint64_t> out(count);
  for (auto& r : out) r = dist(rng);
  return out;
}

absl::StatusOr<std::vector<uint64_t>> ZipfIds(uint64_t rows, double s, size_t count,
                                              uint64_t seed) {
  absl::StatusOr<ZipfSampler> zipf = ZipfSampler::Create(rows, s, seed);
  if (!zipf.ok()) return zipf.status();
  std::vector<uint64_t> out(count);
  for (auto& id : out) id = IdOfRank(zipf->Next());
  return out;
}

std::vector<uint64_t> IdsOfRows(absl::Span<const uint64_t> rows) {
  std::vector<uint64_t> out(rows.size());
  std::transform(rows.begin(), rows.end(), out.begin(), IdOfRank);
  return out;
}

std::vector<float> RandomGradients(size_t count, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_real_distribution<float> dist(-0.01f, 0.01f);
  std::vector<float> out(count);
  for (auto& g : out) g = dist(rng);
  return out;
}

absl::Status Populate(EmbeddingStore& store, const std::string& table, int64_t rows, size_t batch,
                      size_t dim, absl::Span<const float> grads, std::string_view label) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t report_every = std::max<int64_t>(rows / 10, 1);
  int64_t next_report = report_every;
  std::vector<uint64_t> ids(batch);
  int64_t step = 0;
  for (int64_t begin = 0; begin < rows; begin += static_cast<int64_t>(batch)) {
    const size_t n = static_cast<size_t>(std::min<int64_t>(batch, rows - begin));
    for (size_t i = 0; i < n; ++i) ids[i] = IdOfRank(static_cast<uint64_t>(begin) + i);
    absl::Status status =
        store.Push(table, absl::MakeConstSpan(ids.data(), n), grads.subspan(0, n * dim), ++step);
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("populating row ", begin, ": ", status.message()));
    }
    const int64_t done = begin + static_cast<int64_t>(n);
    if (done >= next_report || done == rows) {
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      Log("storage",
          absl::StrFormat("%s: %d/%d rows (%.0f rows/s)", label, done, rows, done / secs));
      next_report += report_every;
    }
  }
  return absl::OkStatus();
}

int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size_pages = 0, resident_pages = 0;
  if (!(statm >> size_pages >> resident_pages)) return 0;
  return resident_pages * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

bool WaitForQuiescence(rocksdb::DB* db, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  // DB-wide properties: running jobs, and work owed (pending flushes or compactions).
  static constexpr const char* kBusy[] = {
      "rocksdb.num-running-compactions", "rocksdb.num-running-flushes",
      "rocksdb.estimate-pending-compaction-bytes", "rocksdb.mem-table-flush-pending"};
  int quiet_polls = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    bool busy = false;
    for (const char* property : kBusy) {
      uint64_t value = 0;
      if (db->GetAggregatedIntProperty(property, &value) && value > 0) busy = true;
    }
    quiet_polls = busy ? 0 : quiet_polls + 1;
    if (quiet_polls >= 5) return true;  // quiet for ~0.5 s: nothing is about to start
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

absl::StatusOr<std::unique_ptr<ScopedTempDir>> ScopedTempDir::Create(const std::string& parent) {
  std::string templ = parent + "/ember-bench-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot create a directory under ", parent, ": ", std::strerror(errno)));
  }
  return std::unique_ptr<ScopedTempDir>(new ScopedTempDir(std::move(templ)));
}

ScopedTempDir::~ScopedTempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  if (ec) Log("cleanup", absl::StrCat("cannot remove ", path_, ": ", ec.message()));
}

void Log(std::string_view suite, std::string_view message) {
  std::cerr << "ember-bench " << suite << ": " << message << std::endl;
}

}  // namespace ember::bench
