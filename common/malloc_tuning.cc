// Copyright 2026 The Ember Authors.

#include "common/malloc_tuning.h"

#include <malloc.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace ember {

bool EnvironmentSetsMallocThresholds(const char* tunables, const char* trim, const char* mmap,
                                     const char* defaults) {
  if (defaults != nullptr && absl::string_view(defaults) != "" &&
      absl::string_view(defaults) != "0") {
    return true;
  }
  if (trim != nullptr || mmap != nullptr) return true;
  if (tunables == nullptr) return false;
  const absl::string_view t(tunables);
  return t.find("glibc.malloc.trim_threshold") != absl::string_view::npos ||
         t.find("glibc.malloc.mmap_threshold") != absl::string_view::npos;
}

namespace {

std::string SetThresholds() {
  if (EnvironmentSetsMallocThresholds(
          std::getenv("GLIBC_TUNABLES"), std::getenv("MALLOC_TRIM_THRESHOLD_"),
          std::getenv("MALLOC_MMAP_THRESHOLD_"), std::getenv("EMBER_MALLOC_DEFAULTS"))) {
    return "";
  }
  // Setting either turns glibc's dynamic thresholds off, so both are set.
  const bool ok = mallopt(M_MMAP_THRESHOLD, static_cast<int>(kMmapThresholdBytes)) == 1 &&
                  mallopt(M_TRIM_THRESHOLD, static_cast<int>(kKeptFreeBytesPerArena)) == 1;
  if (!ok) return "malloc thresholds left at glibc's defaults (mallopt refused them)";
  return absl::StrCat("malloc keeps up to ", kKeptFreeBytesPerArena >> 20,
                      " MiB freed per arena for reuse (mmap threshold ", kMmapThresholdBytes >> 20,
                      " MiB)");
}

}  // namespace

std::string KeepFreedBuffers() {
  static const std::string* const outcome = new std::string(SetThresholds());  // once
  return *outcome;
}

}  // namespace ember
