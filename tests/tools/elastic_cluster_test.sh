#!/usr/bin/env bash
# deploy/local/cluster.sh's elastic run and scale command end to end, as a user runs
# them: `train --workers=1:2` starts one worker, `scale --workers=2` starts a second
# that joins at a checkpoint, `scale --workers=1` makes it leave (it exits 0), and the
# run finishes; `scale --shards=3` adds a shard and `scale --shards=2` drains, stops and
# removes it. Asserts outcomes (resizes, exit statuses, the finished run, the shard
# table), no timings.
#
#   tests/tools/elastic_cluster_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
# shellcheck source=tests/tools/cluster_test_lib.sh
. "$(dirname "$0")/cluster_test_lib.sh"
ctl() { (set -a; . "$cluster/cluster.env"; "$build/bin/emberctl" --timeout_ms=5000 "$@"); }
cl() { deploy/local/cluster.sh "$@" --run_dir="$cluster" --build_dir="$build" </dev/null; }
# refused MESSAGE ARGS...: cluster.sh ARGS fails, saying MESSAGE.
refused() {
  local message="$1" out; shift
  if out="$(cl "$@" 2>&1)"; then return 1; fi
  grep -q "$message" <<<"$out"
}
# log_has FILE PATTERN: FILE gets a line matching PATTERN within 2 minutes.
log_has() {
  for _ in $(seq 600); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.2; done
  return 1
}

"$build/bin/ember-datagen" --out="$work/data" --train_examples=20000 --test_examples=2000 \
  --users=2000 --items=1000 --shops=100 --categories=50 --train_files=2 >/dev/null
cl up --shards=2 >/dev/null

# About a minute of training on one core: long enough for a join and a leave.
cl train --workers=1:2 \
  --worker_args="--train=$work/data/train --test=$work/data/test --epochs=1000 --max_steps=6000 --checkpoint_every_steps=1000" \
  >"$work/train.log" 2>&1 &
train_pid=$!
check "train --workers=1:2 starts an elastic run of one worker" \
  log_has "$cluster/logs/worker-0.log" "ready"
cl scale --workers=2 >"$work/scale-up.log"
check "scale --workers=2 starts worker-1" grep -q "worker-1 started" "$work/scale-up.log"
check "worker-1 joins: the run resizes to 2 workers" \
  log_has "$cluster/logs/worker-1.log" "has 2 worker(s)"
check "scale refuses a count outside the run's MIN:MAX" \
  refused "outside the run's range 1:2" scale --workers=3
cl scale --workers=1 >"$work/scale-down.log" || { cat "$work/scale-down.log"; }
check "scale --workers=1: worker-1 leaves at a checkpoint and exits 0" \
  grep -q "worker-1 left the run (status 0)" "$work/scale-down.log"
train_rc=0
wait "$train_pid" || train_rc=$?
(( train_rc == 0 )) || tail -20 "$work/train.log"
check "the run finishes: train exits 0 with every step done" \
  bash -c "(( $train_rc == 0 )) && grep -q '\"steps\": 6000' '$cluster/job/result.json'"
check "scale without an elastic run is refused" refused "no elastic run" scale --workers=1

cl scale --shards=3 >/dev/null
alive_shards() { ctl status | grep -q "shards $1 ($1 alive)"; }
check "scale --shards=3 starts ps-2" eventually alive_shards 3
ctl rebalance >/dev/null 2>&1
cl scale --shards=2 >"$work/scale-shards.log" 2>&1 || cat "$work/scale-shards.log"
two_holding_all() {
  alive_shards 2 || return 1
  ! grep -q '^EMBER_PS_2=' "$cluster/cluster.env" || return 1
  ctl shards list | awk '$3 == "ALIVE" {n += $4} END {exit !(n == 16384)}'
}
check "scale --shards=2 drains, stops and removes ps-2; the others hold every slot" \
  two_holding_all
echo "$passed passed, $failed failed"
(( failed == 0 ))
