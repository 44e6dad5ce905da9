#!/usr/bin/env bash
# Recovery drill: measures the time from a PS shard's SIGKILL to training resumed, on a
# local cluster (deploy/local/cluster.sh: every process supervised and restarted).
#
#   tools/recovery_drill.sh [--build_dir=build] [--kills=3] [--run_dir=run/drill]
#
# Generates a small dataset, starts a 2-shard cluster and a 2-worker BSP job with a
# checkpoint every 50 steps, SIGKILLs a PS shard --kills times (a few seconds apart),
# and prints for each kill the seconds until rank 0 logged "resuming from checkpoint",
# then the job's end (it must finish with exit 0).
set -euo pipefail

build_dir=build kills=3 run_dir=run/drill
for arg in "$@"; do
  case "$arg" in
    --build_dir=*) build_dir="${arg#*=}" ;;
    --kills=*) kills="${arg#*=}" ;;
    --run_dir=*) run_dir="${arg#*=}" ;;
    --help|-h) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "recovery_drill.sh: unknown flag $arg" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
cluster=deploy/local/cluster.sh
rm -rf "$run_dir"
mkdir -p "$run_dir"
"$build_dir/bin/ember-datagen" --out="$run_dir/data" --train_examples=400000 \
  --test_examples=1000 --train_files=4 >/dev/null
trap '"$cluster" down --run_dir="$run_dir" >/dev/null 2>&1 || true' EXIT
"$cluster" up --run_dir="$run_dir" --build_dir="$build_dir" --shards=2 >/dev/null
"$cluster" train --run_dir="$run_dir" --build_dir="$build_dir" --workers=2 \
  --worker_args="--train=$run_dir/data/train --skip_eval --batch_size=256 --checkpoint_every_steps=50 --log_every_steps=50 --ps_deadline_ms=5000 --collective_timeout_ms=10000" \
  >"$run_dir/train.out" 2>&1 &
train_pid=$!
log="$run_dir/logs/worker-0.log"
resumed() { grep -c "resuming from checkpoint" "$log" 2>/dev/null || true; }
until grep -q "step .* 100 " "$log" 2>/dev/null || grep -q "step    100" "$log" 2>/dev/null; do
  kill -0 "$train_pid" 2>/dev/null || { cat "$run_dir/train.out"; exit 1; }
  sleep 0.2
done
for ((k = 1; k <= kills; k++)); do
  before="$(resumed)"
  victim=$((k % 2))
  start=$(date +%s.%N)
  kill -9 "$(cat "$run_dir/pids/ps-$victim.pid")"
  while [[ "$(resumed)" == "$before" ]]; do
    kill -0 "$train_pid" 2>/dev/null || break
    sleep 0.05
  done
  end=$(date +%s.%N)
  printf 'kill %d (ps-%d): training resumed after %.2f s\n' "$k" "$victim" "$(echo "$end - $start" | bc)"
  sleep 3
done
wait "$train_pid" && echo "job finished: $(grep -h 'done:' "$log" | tail -1)"
