#!/usr/bin/env bash
# A network partition under a BSP training job, made with a Linux network namespace
# this test creates itself (a veth pair on this machine, nothing else): PS shard 1
# runs in its own namespace and the link is cut for longer than the coordinator's
# heartbeat timeout, then restored. Asserts: the coordinator reports shard 1 DEAD
# during the cut and ALIVE after it, the job ends with exit 0 after at least one
# recovery, with the sparse, dense and model checksums and rows of the same job run
# without the cut (so no acknowledged update was lost or applied twice), and every
# process started here is stopped by PID.
#
#   tests/tools/partition_test.sh SOURCE_DIR BUILD_DIR
#
# Needs root and `ip netns` (iproute2); exits 77 (skipped) without them.
set -euo pipefail
src="$(cd "$1" && pwd)"
build="$(cd "$2" && pwd)"
bin="$build/bin"
cd "$src"
if [[ $EUID -ne 0 ]] || ! command -v ip >/dev/null; then echo "skipped: needs root and iproute2"; exit 77; fi
tag="ep$$"                        # names of the namespace and the veth ends
ns="$tag" host_if="${tag}h" ns_if="${tag}n"
octet=$(( $$ % 200 + 20 ))
host_ip="10.213.$octet.1" ns_ip="10.213.$octet.2"
if ! ip netns add "$ns" 2>/dev/null; then echo "skipped: cannot create a network namespace"; exit 77; fi
work="$(mktemp -d "${TMPDIR:-/tmp}/partition_test.XXXXXX")"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  ip link del "$host_if" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
ip link add "$host_if" type veth peer name "$ns_if"
ip link set "$ns_if" netns "$ns"
ip addr add "$host_ip/30" dev "$host_if"
ip link set "$host_if" up
ip -n "$ns" addr add "$ns_ip/30" dev "$ns_if"
ip -n "$ns" link set "$ns_if" up
ip -n "$ns" link set lo up

"$bin/ember-datagen" --out="$work/data" --train_examples=24000 --test_examples=1000 \
  --train_files=4 --users=3000 --items=2000 --categories=50 --shops=200 --seed=11 >/dev/null

# start NAME CMD...: runs CMD in the background (log in $work/NAME.log), records its PID.
start() {
  local name="$1"; shift
  "$@" >"$work/$name.log" 2>&1 &
  pids+=($!)
}
# address NAME: waits for "listening on ADDR" in NAME's log and prints ADDR.
address() {
  for _ in $(seq 300); do
    if grep -q "listening on" "$work/$1.log" 2>/dev/null; then
      grep -m1 "listening on" "$work/$1.log" | awk '{print $NF}'; return 0
    fi
    sleep 0.1
  done
  echo "partition_test: $1 did not start" >&2; tail -5 "$work/$1.log" >&2; return 1
}
shard_state() {  # ID: the coordinator's state of shard ID (ALIVE, DEAD, ...)
  "$bin/emberctl" --coordinator="$coordinator" --admin_token=pt --json shards list 2>/dev/null |
    jq -r ".shards[] | select(.shard_id == $1) | .state" 2>/dev/null || true
}

# run NAME CUT: a coordinator and shard 0 on the host side, shard 1 in the namespace,
# two workers; with CUT=1 the link is down for 5 s once the job is past step 60.
run() {
  local name="$1" cut="$2" dir="$work/$1"
  mkdir -p "$dir"
  start "$name-coordinator" "$bin/ember-coordinator" --host="$host_ip" --port=0 \
    --data_dir="$dir/coordinator" --expected_shards=2 --heartbeat_timeout_ms=1500 \
    --checkpoint_dir="$dir/ckpt" --admin_token=pt
  coordinator="$(address "$name-coordinator")"
  start "$name-ps-0" "$bin/ember-ps" --host="$host_ip" --port=0 --shard_id=0 \
    --heartbeat_ms=200 --data_dir="$dir/ps-0" --coordinator="$coordinator"
  start "$name-ps-1" ip netns exec "$ns" "$bin/ember-ps" --host="$ns_ip" --port=0 --shard_id=1 \
    --heartbeat_ms=200 --data_dir="$dir/ps-1" --coordinator="$coordinator"
  address "$name-ps-0" >/dev/null && address "$name-ps-1" >/dev/null
  local workers=()
  for r in 0 1; do
    start "$name-worker-$r" "$bin/ember-worker" --config=configs/quickstart.pbtxt \
      --train="$work/data/train" --coordinator="$coordinator" --rank=$r --world_size=2 \
      --run_dir="$dir/run" --batch_size=128 --epochs=4 --max_steps=240 --skip_eval \
      --generation=1 --ps_deadline_ms=4000 --collective_timeout_ms=8000 \
      --checkpoint_every_steps=20 --log_every_steps=20
    workers+=("${pids[-1]}")
  done
  if ((cut)); then
    until grep -q "^step  *60 " "$work/$name-worker-0.log" 2>/dev/null; do
      kill -0 "${workers[0]}" 2>/dev/null || { echo "worker 0 ended before step 60"; return 1; }
      sleep 0.1
    done
    ip -n "$ns" link set "$ns_if" down
    echo "cut shard 1 off at step 60"
    dead=""
    for _ in $(seq 50); do [[ "$(shard_state 1)" == DEAD ]] && dead=yes && break; sleep 0.1; done
    sleep 1
    ip -n "$ns" link set "$ns_if" up
    echo "link restored"
    alive=""
    for _ in $(seq 100); do [[ "$(shard_state 1)" == ALIVE ]] && alive=yes && break; sleep 0.1; done
  fi
  local rc=0
  for w in "${workers[@]}"; do wait "$w" || rc=1; done
  return "$rc"
}

passed=0 failed=0
check() {  # NAME COMMAND...: runs COMMAND, counts the outcome
  local name="$1"; shift
  if "$@"; then passed=$((passed + 1)); echo "ok   $name"
  else failed=$((failed + 1)); echo "FAIL $name"; fi
}
field() { jq -r ".$2" "$work/$1/run/result.json" 2>/dev/null; }

run reference 0 || { echo "the reference run failed"; tail -5 "$work"/reference-worker-*.log; exit 1; }
for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
pids=()
job_ok=1
run partition 1 || job_ok=0
check "the coordinator reported the cut-off shard DEAD" test "$dead" = yes
check "and ALIVE once the link was back" test "$alive" = yes
check "the job exited 0 after the cut" test "$job_ok" = 1
check "the job recovered at least once" test "$(field partition attempt)" -ge 2
for f in steps sparse_rows sparse_checksum dense_checksum model_checksum; do
  check "$f equals the run without the cut" test "$(field partition "$f")" = "$(field reference "$f")"
done
echo "attempt $(field partition attempt), model $(field partition model_checksum) (reference $(field reference model_checksum))"
echo "$passed passed, $failed failed"
((failed == 0))
