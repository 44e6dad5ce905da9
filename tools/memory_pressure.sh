#!/usr/bin/env bash
# The long form of tests/cluster/memory_pressure_test.cc: one real ember-ps, a flood of
# brand-new ids (batches of 1000, back to back, one client) for SECONDS against a
# normal-rate probe (100 known ids pulled and pushed every 20 ms), and a report for the
# docs: peak RSS against the cap, push outcomes, pull latency before/during/after.
# The test samples VmRSS every 100 ms and the shard's /metrics every 500 ms (memory tier
# bytes charged and exactly held, RocksDB block cache), so the RSS can be broken down.
#
#   tools/memory_pressure.sh [SECONDS] [BUDGET_MB] [BLOCK_CACHE_MB] [WRITE_BUFFER_MB]
#   (defaults: 60 s, 256 MiB, and ember-ps's own RocksDB sizes, 256 and 64 MiB)
#
# With MEMORY_LIMIT_MB=N in the environment the shard runs with --memory_limit_mb=N
# instead (BUDGET_MB and the RocksDB sizes are then the cap's shares; the bound is the
# cap + 10%).
#
# Environment: BUILD_DIR (default: build), EMBER_MP_PHASE_S (seconds of normal load
# before and after the flood; default 10), EMBER_MP_DATA_DIR (where the shard's
# RocksDB goes; default /tmp). Needs `cmake --build $BUILD_DIR --target
# memory_pressure_test ember-ps` first. Exit status: the test's.
set -euo pipefail

seconds="${1:-60}"
budget_mb="${2:-256}"
block_cache_mb="${3:-256}"
write_buffer_mb="${4:-64}"
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
binary="$build/bin/memory_pressure_test"
if [[ ! -x "$binary" ]]; then
  echo "memory_pressure.sh: $binary missing; run: cmake --build $build --target memory_pressure_test ember-ps" >&2
  exit 2
fi

log="$(mktemp /tmp/memory_pressure.XXXXXX.log)"
trap 'rm -f "$log"' EXIT

limit_mb="${MEMORY_LIMIT_MB:-0}"
if [[ "$limit_mb" != 0 ]]; then
  echo "memory_pressure.sh: flood ${seconds}s, --memory_limit_mb=${limit_mb}, --wal=false"
else
  echo "memory_pressure.sh: flood ${seconds}s, --memory_budget_mb=${budget_mb}," \
    "--block_cache_mb=${block_cache_mb} --write_buffer_mb=${write_buffer_mb}, --wal=false"
fi
set +e
EMBER_MP_FLOOD_S="$seconds" EMBER_MP_BUDGET_MB="$budget_mb" \
  EMBER_MP_BLOCK_CACHE_MB="$block_cache_mb" EMBER_MP_WRITE_BUFFER_MB="$write_buffer_mb" \
  EMBER_MP_PHASE_S="${EMBER_MP_PHASE_S:-10}" EMBER_MP_DATA_DIR="${EMBER_MP_DATA_DIR:-/tmp}" \
  EMBER_MP_LIMIT_MB="$limit_mb" EMBER_MP_TIMELINE=1 "$binary" \
  --gtest_filter=MemoryPressureTest.FloodOfNewIdsStaysUnderCapAndLosesNothing >"$log" 2>&1
rc=$?
set -e

echo "== every 5 s: RSS; memory tier bytes charged / held exactly; RocksDB block cache"
grep -o 'rss t=.* tier .*' "$log" |
  awk '{ split($2, a, "="); t = a[2] + 0; if (t >= next_t) { print "  " $0; next_t = t + 5 } }'
echo "== report"
grep '^\[memory_pressure\]' "$log" | grep -v 'rss t=' | sed 's/^\[memory_pressure\] /  /'
grep -E '^\[  (PASSED|FAILED) |Failure|Expected|Which is|got ' "$log" | sed 's/^/  /' || true
exit "$rc"
