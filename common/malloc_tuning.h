// Copyright 2026 The Ember Authors.
//
// How glibc's malloc treats the memory of freed RPC buffers.
//
// A Pull or Push of 1000 rows moves buffers of 256 KB to a few MB (the request, its
// decoded values, gRPC's slices). With glibc's defaults, an arena whose free top grows
// past its trim threshold (128 KB at first, at most twice the mmap threshold) hands the
// memory back to the kernel (madvise DONTNEED or munmap), and the next call's buffers
// fault it back in page by page, zeroed: measured on a 2-core machine, about a fifth of
// a shard's CPU per call and a third of the client's (docs/PERFORMANCE.md "Freed
// buffers kept for the next call"). KeepFreedBuffers raises both thresholds once, at
// start: an arena keeps up to kKeptFreeBytesPerArena of free memory at its top, and
// buffers below kMmapThresholdBytes come from the arenas instead of their own mappings.
//
// The environment wins: with MALLOC_TRIM_THRESHOLD_, MALLOC_MMAP_THRESHOLD_ or a
// GLIBC_TUNABLES setting of either (an operator's choice), or with
// EMBER_MALLOC_DEFAULTS=1 (glibc's own dynamic thresholds, as before 2026-12-07), nothing
// is changed.

#ifndef EMBER_COMMON_MALLOC_TUNING_H_
#define EMBER_COMMON_MALLOC_TUNING_H_

#include <cstdint>
#include <string>

namespace ember {

inline constexpr int64_t kKeptFreeBytesPerArena = int64_t{16} << 20;
inline constexpr int64_t kMmapThresholdBytes = int64_t{32} << 20;  // glibc's largest

// Sets the thresholds above: best early in main (RunMain does it before run()); later
// is safe too (mallopt locks the arenas; the Python extension calls it at import), and
// counts from then on. Sets them once; later calls return the first one's outcome, for
// the log: "" when the environment set them.
std::string KeepFreedBuffers();

// Whether `tunables` (a GLIBC_TUNABLES value; null: none) or the MALLOC_*_ variables
// `trim` and `mmap` (null: unset) set either threshold, or `defaults` (the value of
// EMBER_MALLOC_DEFAULTS; null: unset) asks for glibc's. Exposed for tests.
bool EnvironmentSetsMallocThresholds(const char* tunables, const char* trim, const char* mmap,
                                     const char* defaults);

}  // namespace ember

#endif  // EMBER_COMMON_MALLOC_TUNING_H_
