#!/usr/bin/env bash
# Network faults under a BSP training job, made with a Linux network namespace this
# test creates itself (a veth pair on this machine, nothing else): PS shard 1 runs in
# its own namespace, and the job is trained once without faults (the reference) and
# once per fault, each started once the job is past step 60:
#   cut     the link down for longer than the coordinator's heartbeat timeout;
#   oneway  a one-way cut: shard 1's packets to the host side are dropped (a blackhole
#           route in the namespace) while the host's still reach it;
#   lossy   a slow, lossy link for 5 s: both veth ends shaped to 2 Mbit/s with a
#           16 KB queue (tc tbf: queueing delay, and tail drops beyond the queue).
# Asserts per fault: the job ends with exit 0, with the sparse, dense and model
# checksums, steps and rows of the reference (so no acknowledged update was lost or
# applied twice); for cut and oneway also that the coordinator reports shard 1 DEAD
# during the fault and ALIVE after it, and that the job recovered at least once. Every
# process started here is stopped by PID.
#
#   tests/tools/partition_test.sh SOURCE_DIR BUILD_DIR [FAULT ...]   # default: all three
#
# Needs root and `ip netns` (iproute2); exits 77 (skipped) without them. tc's netem
# (fixed delay, random loss) and tc classifiers are missing from some kernels (this
# sandbox's: "Specified qdisc kind is unknown", "TC classifier not found"): the test
# prints what `tc qdisc add ... netem` said and uses tbf and routes, which need neither.
set -euo pipefail
src="$(cd "$1" && pwd)"
build="$(cd "$2" && pwd)"
shift 2
faults=("$@")
if ((${#faults[@]} == 0)); then faults=(cut oneway lossy); fi
for f in "${faults[@]}"; do
  case "$f" in cut|oneway|lossy) ;; *) echo "partition_test: unknown fault '$f' (cut, oneway, lossy)" >&2; exit 2 ;; esac
done
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
  local rc=$?
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  ip link del "$host_if" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
  if ((rc == 0)); then rm -rf "$work"; else echo "partition_test: logs kept in $work" >&2; fi
}
trap cleanup EXIT
trap 'exit 143' TERM INT
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

# fault_on FAULT / fault_off FAULT: start and end one fault between the two sides.
fault_on() {
  case "$1" in
    cut) ip -n "$ns" link set "$ns_if" down ;;
    oneway) ip -n "$ns" route add blackhole "$host_ip/32" ;;
    lossy)
      tc qdisc add dev "$host_if" root tbf rate 2mbit burst 8kb limit 16kb
      ip netns exec "$ns" tc qdisc add dev "$ns_if" root tbf rate 2mbit burst 8kb limit 16kb ;;
  esac
}
fault_off() {
  case "$1" in
    cut) ip -n "$ns" link set "$ns_if" up ;;
    oneway) ip -n "$ns" route del blackhole "$host_ip/32" ;;
    lossy)
      # What the shaping did, each direction: bytes and packets sent, dropped, delayed.
      echo "lossy: host -> shard 1: $(tc -s qdisc show dev "$host_if" | grep -m1 Sent)"
      echo "lossy: shard 1 -> host: $(ip netns exec "$ns" tc -s qdisc show dev "$ns_if" | grep -m1 Sent)"
      tc qdisc del dev "$host_if" root
      ip netns exec "$ns" tc qdisc del dev "$ns_if" root ;;
  esac
}

# run NAME FAULT: a coordinator and shard 0 on the host side, shard 1 in the namespace,
# two workers; FAULT (none, cut, oneway, lossy) starts once the job is past step 60.
# cut and oneway last until the coordinator reports shard 1 DEAD plus 1 s, lossy 5 s.
run() {
  local name="$1" fault="$2" dir="$work/$1"
  dead="" alive=""
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
  if [[ "$fault" != none ]]; then
    until grep -q "^step  *60 " "$work/$name-worker-0.log" 2>/dev/null; do
      kill -0 "${workers[0]}" 2>/dev/null || { echo "worker 0 ended before step 60"; return 1; }
      sleep 0.1
    done
    fault_on "$fault"
    echo "$fault: started at step 60"
    if [[ "$fault" == lossy ]]; then
      sleep 5
    else
      for _ in $(seq 50); do [[ "$(shard_state 1)" == DEAD ]] && dead=yes && break; sleep 0.1; done
      sleep 1
    fi
    fault_off "$fault"
    echo "$fault: ended"
    for _ in $(seq 100); do [[ "$(shard_state 1)" == ALIVE ]] && alive=yes && break; sleep 0.1; done
  fi
  # The job ends within 4 minutes of the fault's end, or the test fails naming where
  # each process stopped (the logs stay in $work).
  local deadline=$((SECONDS + 240)) rc=0
  for w in "${workers[@]}"; do
    while kill -0 "$w" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
    if kill -0 "$w" 2>/dev/null; then
      echo "$name: the job did not end within 240 s; last lines of each process:"
      for log in "$work/$name"-*.log; do echo "== $log"; tail -4 "$log"; done
      return 1
    fi
    wait "$w" || rc=1
  done
  return "$rc"
}

passed=0 failed=0
check() {  # NAME COMMAND...: runs COMMAND, counts the outcome
  local name="$1"; shift
  if "$@"; then passed=$((passed + 1)); echo "ok   $name"
  else failed=$((failed + 1)); echo "FAIL $name"; fi
}
field() { jq -r ".$2" "$work/$1/run/result.json" 2>/dev/null; }

# What netem says here (informational: the faults above do not need it).
netem="$(ip netns exec "$ns" tc qdisc add dev lo root netem delay 10ms loss 1% 2>&1 && echo available)" || true
echo "tc netem in this kernel: ${netem:-available}"
ip netns exec "$ns" tc qdisc del dev lo root 2>/dev/null || true

stop_all() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}
run reference none || { echo "the reference run failed"; tail -5 "$work"/reference-worker-*.log; exit 1; }
stop_all
for fault in "${faults[@]}"; do
  job_ok=1
  run "$fault" "$fault" || job_ok=0
  stop_all
  if [[ "$fault" != lossy ]]; then
    check "$fault: the coordinator reported shard 1 DEAD" test "$dead" = yes
    check "$fault: and ALIVE once the fault ended" test "$alive" = yes
    check "$fault: the job recovered at least once" test "$(field "$fault" attempt)" -ge 2
  fi
  check "$fault: the job exited 0" test "$job_ok" = 1
  for f in steps sparse_rows sparse_checksum dense_checksum model_checksum; do
    check "$fault: $f equals the run without faults" test "$(field "$fault" "$f")" = "$(field reference "$f")"
  done
  echo "$fault: attempt $(field "$fault" attempt), model $(field "$fault" model_checksum)" \
    "(reference $(field reference model_checksum))"
done
echo "$passed passed, $failed failed"
((failed == 0))
