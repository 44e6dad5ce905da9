#!/usr/bin/env bash
# Runs every fuzz target of tests/fuzz (libFuzzer, ASan + UBSan, clang-14) for SECONDS
# each, starting from its checked-in corpus. The short form is in tools/test.sh: the
# corpora replayed through each target (fuzz_replay_*).
#
#   tools/fuzz.sh SECONDS [TARGET ...]          # e.g. tools/fuzz.sh 600 ps_rpc_fuzz
#   tools/fuzz.sh --merge SECONDS [TARGET ...]  # then fold new coverage into the corpus
#
# Work corpora and findings land in run/fuzz/TARGET/ (crash-*, leak-*, timeout-*
# files: reproduce with `build-fuzz/bin/TARGET FILE`, fix, then copy the file into
# tests/fuzz/corpus/TARGET/ so the replay test keeps it fixed). Exit status: 0 when no
# target found anything, 1 otherwise. EMBER_FUZZ_BUILD_DIR: the clang build
# (default build-fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."

merge=0
if [[ "${1:-}" == "--merge" ]]; then merge=1; shift; fi
seconds="${1:-}"
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: tools/fuzz.sh [--merge] SECONDS [TARGET ...]" >&2
  exit 2
fi
shift
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  mapfile -t targets < <(sed -n 's/^ember_fuzz_target(\([a-z_]*\) .*/\1/p' tests/fuzz/CMakeLists.txt)
fi

EMBER_DEPS_NODE=0 tools/install-deps.sh --with-fuzz
BUILD="${EMBER_FUZZ_BUILD_DIR:-build-fuzz}"
sanitizers="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_FUZZ=ON \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCMAKE_C_FLAGS="$sanitizers -fsanitize=fuzzer-no-link" \
  -DCMAKE_CXX_FLAGS="$sanitizers -fsanitize=fuzzer-no-link" \
  -DCMAKE_EXE_LINKER_FLAGS="$sanitizers" >/dev/null
cmake --build "$BUILD" --target "${targets[@]}"

# Library threads (gRPC's server, RocksDB's compactions) hold allocations in flight at
# libFuzzer's leak checks; tests/fuzz/lsan.supp names them (none is Ember's memory).
export LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
found=0
for t in "${targets[@]}"; do
  work="run/fuzz/$t"
  mkdir -p "$work/corpus"
  echo "== $t: ${seconds}s (corpus tests/fuzz/corpus/$t + $work/corpus)"
  rc=0
  "$BUILD/bin/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$work/" "$work/corpus" "tests/fuzz/corpus/$t" \
    >"$work/log" 2>&1 || rc=$?
  grep -E "^stat::number_of_executed_units|^stat::new_units_added|^#[0-9]+ *DONE" "$work/log" || true
  if (( rc != 0 )); then
    found=1
    echo "$t: FINDING (exit $rc); see $work/log and $work/crash-* / timeout-* / leak-*"
    grep -m3 -E "ERROR: |FUZZ_CHECK|runtime error" "$work/log" || true
  fi
  if (( merge )); then
    "$BUILD/bin/$t" -merge=1 "tests/fuzz/corpus/$t" "$work/corpus" >>"$work/log" 2>&1
    echo "$t: corpus now $(ls "tests/fuzz/corpus/$t" | wc -l) files"
  fi
done
exit "$found"
