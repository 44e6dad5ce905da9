#!/usr/bin/env bash
# Runs one multi-process test case RUNS times in a row with LOAD CPU-bound processes
# beside it (the load that made rare interleavings show: docs/RELIABILITY.md
# "Stress scripts"). Every run must pass: this is a hunt for races, never a retry.
#
#   tools/stress.sh [--runs=20] [--load=2] [--build_dir=build] [--log_dir=run/stress] \
#                   [--case=follower-ps-kill | --test=BINARY --filter=GTEST_FILTER]
#
# Cases:
#   follower-ps-kill  ServingTrainingTest.AFollowerOfAKilledShardReBootstrapsAndEndsEqual:
#                     a serving follower of a training job whose PS shard is SIGKILLed and
#                     whose job rolls back ends with the PS's rows (issue 28 section 2).
#
# The output of each failing run is kept in LOG_DIR/run-K.log; the summary line says how
# many runs passed. Exit status: 0 when every run passed, 1 otherwise, 2 for bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=20
load=2
build_dir=build
log_dir=run/stress
case_name=follower-ps-kill
test_binary=""
filter=""

usage() {
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
}

for arg in "$@"; do
  case "$arg" in
    --runs=*) runs="${arg#*=}" ;;
    --load=*) load="${arg#*=}" ;;
    --build_dir=*) build_dir="${arg#*=}" ;;
    --log_dir=*) log_dir="${arg#*=}" ;;
    --case=*) case_name="${arg#*=}" ;;
    --test=*) test_binary="${arg#*=}"; case_name="" ;;
    --filter=*) filter="${arg#*=}" ;;
    -h|--help) usage; exit 0 ;;
    *) echo "tools/stress.sh: unknown argument '$arg' (--help lists them)" >&2; exit 2 ;;
  esac
done
if ! [[ "$runs" =~ ^[1-9][0-9]*$ ]]; then
  echo "tools/stress.sh: --runs must be a positive integer, got '$runs'" >&2; exit 2
fi
if ! [[ "$load" =~ ^[0-9]+$ ]]; then
  echo "tools/stress.sh: --load must be a non-negative integer, got '$load'" >&2; exit 2
fi
case "$case_name" in
  follower-ps-kill)
    test_binary="$build_dir/bin/serving_training_test"
    filter='ServingTrainingTest.AFollowerOfAKilledShardReBootstrapsAndEndsEqual' ;;
  "") ;;
  *) echo "tools/stress.sh: unknown --case '$case_name' (--help lists them)" >&2; exit 2 ;;
esac
if [[ -z "$test_binary" || -z "$filter" ]]; then
  echo "tools/stress.sh: --test needs --filter" >&2; exit 2
fi
if [[ ! -x "$test_binary" ]]; then
  echo "tools/stress.sh: $test_binary is not built (ninja -C $build_dir)" >&2; exit 2
fi

mkdir -p "$log_dir"
burners=()
stop_burners() {
  for pid in "${burners[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${burners[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop_burners EXIT
for ((i = 0; i < load; ++i)); do
  # A CPU-bound process that does nothing else: `yes` writing into /dev/null.
  yes >/dev/null &
  burners+=("$!")
done

passed=0
start=$(date +%s)
for ((k = 1; k <= runs; ++k)); do
  log="$log_dir/run-$k.log"
  run_start=$(date +%s)
  if "$test_binary" --gtest_filter="$filter" >"$log" 2>&1; then
    passed=$((passed + 1))
    rm -f "$log"
    echo "run $k/$runs: passed ($(( $(date +%s) - run_start )) s)"
  else
    echo "run $k/$runs: FAILED ($(( $(date +%s) - run_start )) s), output in $log"
    grep -E '^(.*Failure|Expected|  Actual|Which is|Value of)' "$log" | head -8 | sed 's/^/  /' || true
  fi
done
echo "stress: $passed of $runs runs passed with $load CPU-bound processes beside them" \
  "($(( $(date +%s) - start )) s, $filter)"
[[ "$passed" -eq "$runs" ]]
