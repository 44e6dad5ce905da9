#!/usr/bin/env bash
# Evaluation scaling: the time of one evaluation of the quickstart-size test set
# (100,000 examples) by 1 and by 2 workers, each rank scoring its share
# (docs/ARCHITECTURE.md "Distributed evaluation").
#
#   tools/eval_scaling.sh [--build_dir=build] [--dir=/tmp/ember-eval-scaling] [--runs=4]
#
# Generates the quickstart data once (ember-datagen defaults: 1M training, 100k test
# examples) into DIR/data, then for each run and each world size W in 1, 2 starts a
# coordinator, 2 PS shards and W workers (configs/quickstart.pbtxt, 100 training steps,
# only the final evaluation) and prints rank 0's evaluation line: examples, examples
# scored by rank 0, seconds, and the part of them spent reading the test file.
set -euo pipefail

build_dir=build dir=/tmp/ember-eval-scaling runs=4
for arg in "$@"; do
  case "$arg" in
    --build_dir=*) build_dir="${arg#*=}" ;;
    --dir=*) dir="${arg#*=}" ;;
    --runs=*) runs="${arg#*=}" ;;
    --help|-h) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "eval_scaling.sh: unknown flag $arg" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
bin="$build_dir/bin"
[ -d "$dir/data/test" ] || "$bin/ember-datagen" --out="$dir/data" > /dev/null
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done; }
trap cleanup EXIT

# The "listening on HOST:PORT" address of a server once its log shows it (bounded).
address_of() {
  for _ in $(seq 300); do
    a=$(sed -n 's/.* on \(127\.0\.0\.1:[0-9]*\).*/\1/p' "$1" | head -1)
    [ -n "$a" ] && { echo "$a"; return; }
    sleep 0.1
  done
  echo "eval_scaling.sh: no address in $1" >&2
  exit 1
}

for run in $(seq "$runs"); do
  for world in 1 2; do
    c="$dir/run-$run-w$world"
    rm -rf "$c" && mkdir -p "$c"
    "$bin/ember-coordinator" --data_dir="$c/coordinator" --port=0 --expected_shards=2 \
      > "$c/coordinator.log" 2>&1 &
    pids=($!)
    coordinator=$(address_of "$c/coordinator.log")
    for s in 0 1; do
      "$bin/ember-ps" --data_dir="$c/ps-$s" --port=0 --shard_id=$s --coordinator="$coordinator" \
        > "$c/ps-$s.log" 2>&1 &
      pids+=($!)
    done
    workers=()
    for r in $(seq 0 $((world - 1))); do
      "$bin/ember-worker" --config=configs/quickstart.pbtxt --coordinator="$coordinator" \
        --train="$dir/data/train" --test="$dir/data/test" --rank=$r --world_size=$world \
        --max_steps=100 --eval_every_steps=0 > "$c/worker-$r.log" 2>&1 &
      workers+=($!)
    done
    for p in "${workers[@]}"; do wait "$p"; done
    echo "run $run, $world worker(s), load $(cut -d' ' -f1 /proc/loadavg):" \
      "$(grep -o '\[.*\]' "$c/worker-0.log" | tail -1)"
    cleanup
    wait 2> /dev/null || true
  done
done
