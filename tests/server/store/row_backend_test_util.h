// Copyright 2026 The Ember Authors.
//
// Helpers shared by the RowBackend tests (row_backend_test.cc: the contract over every
// backend; rocksdb_backend_test.cc: RocksDB durability and fault injection).

#ifndef EMBER_TESTS_SERVER_STORE_ROW_BACKEND_TEST_UTIL_H_
#define EMBER_TESTS_SERVER_STORE_ROW_BACKEND_TEST_UTIL_H_

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/slot.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rocksdb/file_system.h"
#include "rocksdb/io_status.h"
#include "server/store/fault_injection_fs.h"
#include "server/store/in_memory_backend.h"
#include "server/store/internal/rocksdb_status.h"
#include "server/store/rocksdb_backend.h"
#include "server/store/row_backend.h"
#include "server/store/row_layout.h"

namespace ember {
namespace testutil {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;
using KeyValues = std::vector<std::pair<std::string, std::string>>;

#define EMBER_ASSERT_OK(expr)                    \
  do {                                           \
    const ::absl::Status s_ = (expr);            \
    ASSERT_TRUE(s_.ok()) << #expr << ": " << s_; \
  } while (0)
#define EMBER_EXPECT_OK(expr)                    \
  do {                                           \
    const ::absl::Status s_ = (expr);            \
    EXPECT_TRUE(s_.ok()) << #expr << ": " << s_; \
  } while (0)

// ----------------------------------------------------------------------------- helpers

// A fresh directory under testing::TempDir(), unique per process and test.
inline std::string MakeTempDir() {
  static std::atomic<int> counter{0};
  const testing::TestInfo* info = testing::UnitTest::GetInstance()->current_test_info();
  std::string name = absl::StrCat(info->test_suite_name(), "_", info->name());
  std::replace(name.begin(), name.end(), '/', '_');
  const std::filesystem::path dir =
      std::filesystem::path(testing::TempDir()) /
      absl::StrCat("ember_row_backend_", getpid(), "_", counter.fetch_add(1), "_", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline BackendWrite Put(BackendTable table, std::string key, std::string value) {
  return BackendWrite{table, std::move(key), std::move(value), /*erase=*/false};
}

inline BackendWrite Erase(BackendTable table, std::string key) {
  return BackendWrite{table, std::move(key), "", /*erase=*/true};
}

// The value of `key`, nullopt if absent; fails the test on a lookup error.
inline std::optional<std::string> Get(RowBackend& backend, BackendTable table,
                                      const std::string& key) {
  std::vector<std::string> values;
  std::vector<bool> found;
  const absl::Status s = backend.MultiGet(table, {key}, &values, &found);
  EXPECT_TRUE(s.ok()) << s;
  if (!s.ok() || !found[0]) return std::nullopt;
  return values[0];
}

inline absl::StatusOr<KeyValues> ScanRange(RowBackend& backend, BackendTable table,
                                           std::string_view begin, std::string_view end,
                                           size_t limit = SIZE_MAX) {
  KeyValues out;
  absl::Status s = backend.Scan(table, begin, end, [&](std::string_view k, std::string_view v) {
    out.emplace_back(std::string(k), std::string(v));
    return out.size() < limit;
  });
  if (!s.ok()) return s;
  return out;
}

// A full embedding row (meta + 8 floats + 8 state floats) whose bytes depend on `seed`.
inline std::string RowValue(uint64_t seed) {
  std::string row(RowBytes(16), '\0');
  RowMeta meta;
  meta.version = seed;
  meta.last_seen_step = static_cast<int64_t>(seed * 7);
  meta.count = static_cast<float>(seed % 1000);
  std::memcpy(row.data(), &meta, sizeof(meta));
  for (size_t i = 0; i < 16; ++i) {
    const float f = static_cast<float>(seed) * 0.001f + static_cast<float>(i);
    std::memcpy(row.data() + sizeof(meta) + i * sizeof(float), &f, sizeof(f));
  }
  return row;
}

inline RocksDbOptions SmallRocksDbOptions(const std::string& path) {
  RocksDbOptions options;
  options.path = path;
  options.block_cache_bytes = 8 << 20;
  options.write_buffer_bytes = 8 << 20;
  return options;
}

}  // namespace testutil
}  // namespace ember

#endif  // EMBER_TESTS_SERVER_STORE_ROW_BACKEND_TEST_UTIL_H_
