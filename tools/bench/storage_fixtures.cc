// Copyright 2026 The Ember Authors.

#include "tools/bench/storage_fixtures.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/status_macros.h"
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

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

absl::StatusOr<TieredStore> OpenTieredStore(const std::string& path, int64_t memory_budget,
                                            int64_t block_cache_bytes, bool frequency_admission) {
  RocksDbOptions rocksdb_options;
  rocksdb_options.path = path;
  rocksdb_options.enable_wal = false;
  if (block_cache_bytes >= 0) rocksdb_options.block_cache_bytes = block_cache_bytes;
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<RocksDbBackend> rocksdb,
                         RocksDbBackend::Open(rocksdb_options));
  TieredStore out;
  out.backend = rocksdb.get();
  StoreOptions store_options;
  store_options.memory_budget_bytes = memory_budget;
  store_options.frequency_admission = frequency_admission;
  EMBER_ASSIGN_OR_RETURN(out.store, EmbeddingStore::Open(store_options, std::move(rocksdb)));
  return out;
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

absl::StatusOr<int64_t> ReadFilesUnder(const std::string& dir) {
  std::vector<char> buffer(size_t{4} << 20);
  int64_t total = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir, ec)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount() > 0) {
      total += in.gcount();
    }
    if (in.bad()) {
      return absl::UnavailableError(absl::StrCat("cannot read ", entry.path().string()));
    }
  }
  if (ec) return absl::UnavailableError(absl::StrCat("cannot list ", dir, ": ", ec.message()));
  return total;
}

namespace {
constexpr char kMarkerFile[] = "EMBER_BENCH_POPULATED";
}  // namespace

absl::StatusOr<std::unique_ptr<BenchDir>> BenchDir::Open(const std::string& path) {
  if (path.empty()) {
    std::string templ = "/tmp/ember-bench-XXXXXX";
    if (mkdtemp(templ.data()) == nullptr) {
      return absl::UnavailableError(
          absl::StrCat("cannot create a directory under /tmp: ", std::strerror(errno)));
    }
    return std::unique_ptr<BenchDir>(new BenchDir(std::move(templ), /*scratch=*/true));
  }
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec || !std::filesystem::is_directory(path)) {
    return absl::UnavailableError(absl::StrCat("cannot create directory ", path, ": ",
                                               ec ? ec.message() : "not a directory"));
  }
  return std::unique_ptr<BenchDir>(new BenchDir(path, /*scratch=*/false));
}

BenchDir::~BenchDir() {
  if (!scratch_) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  if (ec) Log("cleanup", absl::StrCat("cannot remove ", path_, ": ", ec.message()));
}

bool BenchDir::Empty() const {
  std::error_code ec;
  return std::filesystem::is_empty(path_, ec) && !ec;
}

std::string BenchDir::ReadMarker() const {
  std::ifstream in(path_ + "/" + kMarkerFile);
  std::string contents;
  std::getline(in, contents);
  return contents;
}

absl::Status BenchDir::WriteMarker(const std::string& contents) const {
  std::ofstream out(path_ + "/" + kMarkerFile, std::ios::trunc);
  out << contents << "\n";
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write the marker in ", path_));
  return absl::OkStatus();
}

void Log(std::string_view suite, std::string_view message) {
  EMBER_LOG(INFO) << suite << ": " << message;
}

}  // namespace ember::bench
