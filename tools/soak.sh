#!/usr/bin/env bash
# Soak: a BSP training job on a local cluster (deploy/local/cluster.sh: every process
# supervised and restarted) under random faults for MINUTES minutes, then a verification
# pass against the same job run without faults.
#
#   tools/soak.sh MINUTES [--seed=N] [--steps=N] [--round_minutes=M] [--build_dir=build]
#                 [--run_dir=run/soak]
#   tools/soak.sh --short [--build_dir=...] [--run_dir=...]   # the CI form, about a minute
#   tools/soak.sh MINUTES|--short --disk_faults=RATE            # disk faults instead
#   ... --no_worker_metrics      rank 0 without its /metrics endpoint (--metrics_port=-1)
#   ... --reference=DIR          reuse the fault-free reference of an earlier soak's RUN_DIR
#                                (same binaries' fault-free path, same mode; its steps)
#
# 1. Reference, once: a fresh 2-shard cluster trains the job (2 workers, BSP, --steps
#    steps; by default sized from a calibration run so that one faulty round lasts about
#    M = --round_minutes, default 15, at most MINUTES) and records result.json's
#    checksums and `emberctl checksum`.
# 2. Rounds, until MINUTES of faults have passed (--short: one round): each round is a
#    fresh cluster (2 shards + an empty shard 2, a serving follower from the
#    first checkpoint) that trains the same job with a checkpoint every 50 steps (20 short)
#    while nemeses run until the job ends or MINUTES pass: SIGKILL of a random PS (the
#    supervisor restarts it), of a random worker, of the follower, of the coordinator;
#    SIGSTOP of a PS past the coordinator's heartbeat timeout, then SIGCONT (preferably
#    during a slot move); on-demand checkpoints; and, in a loop of their own, slot moves
#    of random ranges to random shards (`emberctl slots move`, run again when a move
#    stops FAILED). --short runs one fault of each kind on a fixed schedule.
#    With --disk_faults=RATE the only nemesis is the disk: both runs give the shards a
#    1 MiB memory tier (rows live in RocksDB), and in the soak the shards fail RATE of
#    RocksDB's file reads and writes (ember-ps --test_disk_fault_rate) from 2 s after
#    they start for 15 s (--short) or MINUTES, wall-clock (a shard restarted in the
#    window gets the rest of it); then the disk is healthy again.
# 3. Verify, after every round, against the one reference: the job exited 0 with the reference's steps, rows and sparse, dense and
#    model checksums; `emberctl checksum` (rows and digest per table) equals the
#    reference's; every slot has one owner; the follower's checksum reaches the
#    cluster's within 60 s and it reports lag 0. A job whose step does not advance
#    for 3 minutes fails the soak with the workers' last errors. With --disk_faults,
#    faults were injected and surfaced (non-OK RPC codes, write-back errors or failed
#    attempts), and no shard crashed or was restarted (a write error reopens the
#    shard's RocksDB instead: ember_rocksdb_reopens_total, in the summary). Prints a
#    summary per round and one for the whole soak; exits 1 at the first round with a
#    mismatch (its directory stays whole; a passing round keeps its logs and results).
#
# RUN_DIR is emptied first. Every process is stopped by PID (cluster.sh down) on exit;
# logs, checksums and events.log (the faults, the summary) stay in RUN_DIR.
set -euo pipefail

minutes="" short=0 seed="" steps="" round_minutes=15 reuse="" build_dir=build run_dir=run/soak disk_faults="" extra_worker=""
for arg in "$@"; do
  case "$arg" in
    --short) short=1 ;;
    --seed=*) seed="${arg#*=}" ;;
    --steps=*) steps="${arg#*=}" ;;
    --round_minutes=*) round_minutes="${arg#*=}" ;;
    --reference=*) reuse="${arg#*=}" ;;
    --disk_faults=*) disk_faults="${arg#*=}" ;;
    --no_worker_metrics) extra_worker="--metrics_port=-1" ;;
    --build_dir=*) build_dir="${arg#*=}" ;;
    --run_dir=*) run_dir="${arg#*=}" ;;
    --help|-h) sed -n '2,44p' "$0"; exit 0 ;;
    [0-9]*) minutes="$arg" ;;
    *) echo "soak.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
if ((short)); then minutes="${minutes:-1}"; fi
[[ "$minutes" =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "soak.sh: MINUTES (or --short) is required" >&2; exit 2; }
[[ "$round_minutes" =~ ^[0-9]+(\.[0-9]+)?$ && "$round_minutes" != 0 ]] \
  || { echo "soak.sh: --round_minutes must be a positive number of minutes" >&2; exit 2; }
[[ -z "$steps" || "$steps" =~ ^[1-9][0-9]*$ ]] || { echo "soak.sh: --steps must be a positive integer" >&2; exit 2; }
# One round lasts about round_minutes (at most the whole soak).
if [[ "$(echo "$round_minutes > $minutes" | bc)" == 1 ]]; then round_minutes=$minutes; fi
cd "$(dirname "$0")/.."
build_dir="$(cd "$build_dir" && pwd)"
cluster=deploy/local/cluster.sh
bin="$build_dir/bin"
ctl() { "$bin/emberctl" --timeout_ms=10000 "$@"; }
seed="${seed:-$(date +%s)}"
RANDOM=$seed
rm -rf "$run_dir"
mkdir -p "$run_dir"
run_dir="$(cd "$run_dir" && pwd)"
ref="$run_dir/reference" soak="" events="$run_dir/events.log"
hb_timeout_ms=2000
pause_s=$(( (hb_timeout_ms + 1500) / 1000 ))
ckpt_every=$((short ? 20 : 50))
train_pid="" mover_pid="" paused_pid=""

log() { printf '[%6.1fs] %s\n' "$(echo "$(date +%s.%N) - $t0" | bc)" "$*" | tee -a "$events"; }
fail() { log "FAIL: $*"; exit 1; }
cleanup() {
  [[ -n "$paused_pid" ]] && kill -CONT "$paused_pid" 2>/dev/null
  [[ -n "$soak" ]] && touch "$soak/stop_moves" 2>/dev/null
  [[ -n "$mover_pid" ]] && kill "$mover_pid" 2>/dev/null
  [[ -n "$soak" && -f "$soak/mover.ctl.pid" ]] && kill "$(cat "$soak/mover.ctl.pid")" 2>/dev/null
  for dir in "$ref" "$soak"; do
    [[ -n "$dir" && -d "$dir/pids" ]] && "$cluster" down --run_dir="$dir" --build_dir="$build_dir" >/dev/null 2>&1 </dev/null
  done
  [[ -n "$train_pid" ]] && wait "$train_pid" 2>/dev/null
  return 0
}
trap cleanup EXIT
t0=$(date +%s.%N)

# --- data and the job --------------------------------------------------------------
if ((short)); then
  datagen=(--train_examples=40000 --users=4000 --items=2000 --shops=200 --categories=50)
else
  datagen=(--train_examples=400000 --users=40000 --items=20000 --shops=1000 --categories=200)
fi
"$bin/ember-datagen" --out="$run_dir/data" --test_examples=1000 --train_files=4 --seed=7 \
  "${datagen[@]}" >/dev/null
job_args() {  # STEPS: the worker flags of the job (both runs)
  echo "--train=$run_dir/data/train --skip_eval --batch_size=128 --epochs=100000 --max_steps=$1" \
    "--checkpoint_every_steps=$ckpt_every --log_every_steps=50 --ps_deadline_ms=5000" \
    "--collective_timeout_ms=10000 --max_recoveries=100000 $extra_worker"
}
up() {  # DIR [CLUSTER_FLAGS...]: a 2-shard cluster
  local dir="$1"; shift
  "$cluster" up --run_dir="$dir" --build_dir="$build_dir" --shards=2 \
    --coordinator_args="--heartbeat_timeout_ms=$hb_timeout_ms --migration_retry_ms=120000" \
    "${disk_flags[@]}" "$@" >"$dir.up.out" 2>&1 </dev/null || { cat "$dir.up.out"; fail "cluster up ($dir)"; }
}
disk_flags=() fault_flags=()
if [[ -n "$disk_faults" ]]; then
  disk_flags=(--memory_budget_mb=1)
fi
train() {  # DIR STEPS: trains the job to the end, output in DIR.train.out
  "$cluster" train --run_dir="$1" --build_dir="$build_dir" --workers=2 \
    --worker_args="$(job_args "$2")" >"$1.train.out" 2>&1 </dev/null
}
down() { "$cluster" down --run_dir="$1" --build_dir="$build_dir" >/dev/null 2>&1 </dev/null; }
field() { jq -r ".$2" "$1/job/result.json"; }

log "soak: ${minutes} min in rounds of about ${round_minutes} min, seed $seed, run dir $run_dir"
mode="short=$short disk_faults=${disk_faults:-none} worker_args=$(job_args STEPS | sed "s|$run_dir|RUN_DIR|g" | md5sum | cut -c1-12)"
if [[ -n "$reuse" ]]; then
  reuse="$(cd "$reuse" && pwd)" || fail "--reference=$reuse: no such directory"
  [[ -f "$reuse/reference/job/result.json" && -f "$reuse/reference.checksum" ]] \
    || fail "--reference=$reuse holds no finished reference (reference/job/result.json, reference.checksum)"
  if [[ -f "$reuse/reference.mode" ]]; then
    [[ "$(cat "$reuse/reference.mode")" == "$mode" ]] \
      || fail "--reference=$reuse was run as '$(cat "$reuse/reference.mode")', this soak is '$mode'"
  else
    log "warning: $reuse/reference.mode is missing (a soak before 2026-12-07): its mode is not checked"
  fi
  steps="$(jq -r .steps "$reuse/reference/job/result.json")"
fi
if [[ -z "$steps" ]]; then
  if ((short)); then
    steps=1200
  else
    # Fault-free pace from a 300-step run; the faults (rollbacks of up to one
    # checkpoint interval, recoveries of seconds) cost about two thirds of it. The
    # job is one round's: every round trains it again against the one reference.
    up "$run_dir/calibrate"
    train "$run_dir/calibrate" 300 || fail "calibration run (see $run_dir/calibrate.train.out)"
    rate="$(jq -r '.steps / .train_seconds' "$run_dir/calibrate/job/result.json")"
    down "$run_dir/calibrate"
    steps="$(echo "$rate * $round_minutes * 60 / 3" | bc | cut -d. -f1)"
    steps=$(( (steps / 10 + 1) * 10 ))
    log "calibration: $(printf '%.1f' "$rate") steps/s without faults; the job: $steps steps"
  fi
fi

# --- 1. reference ------------------------------------------------------------------
if [[ -n "$reuse" ]]; then
  mkdir -p "$ref/job"
  cp "$reuse/reference/job/result.json" "$ref/job/result.json"
  cp "$reuse/reference.checksum" "$run_dir/reference.checksum"
  log "reference: reused from $reuse: $steps steps, model checksum $(field "$ref" model_checksum)"
else
  up "$ref"
  ref_start=$(date +%s)
  train "$ref" "$steps" || fail "the fault-free run failed (see $ref.train.out)"
  set -a; . "$ref/cluster.env"; set +a
  ctl --json checksum | jq -c '.tables' >"$run_dir/reference.checksum"
  down "$ref"
  [[ "$(field "$ref" steps)" == "$steps" ]] || fail "the reference ran $(field "$ref" steps) steps"
  log "reference: $steps steps in $(( $(date +%s) - ref_start )) s, model checksum $(field "$ref" model_checksum)"
fi
echo "$mode" >"$run_dir/reference.mode"


# --- 2. rounds of faults -----------------------------------------------------------
pid_of() { cat "$soak/pids/$1.pid" 2>/dev/null; }
# Counts over the whole soak; each round's summary shows its own share.
declare -A count=([ps_kill]=0 [worker_kill]=0 [follower_kill]=0 [coordinator_kill]=0 [pause]=0
  [pause_in_move]=0 [checkpoint]=0)
declare -A total=([faults_s]=0 [moves]=0 [ckpts]=0 [ckpts_failed]=0 [restarts]=0 [reopens]=0
  [crashes]=0)
max_lag_s=0 max_lag_versions=0
deadline=""  # the end of the faults, set when the first round's nemeses start

# Slot moves, one at a time, in their own loop: a random range of 64-2048 slots to a
# random shard; a move that stops (FAILED, a restarted coordinator) is run again.
mover() {
  local n=0 tries first len to
  while [[ ! -f "$soak/stop_moves" ]]; do
    len=$((64 + RANDOM % 1985)); first=$((RANDOM * 16384 / 32768 % (16384 - len)))
    to=$((RANDOM % 3)); n=$((n + 1)); tries=0
    touch "$soak/moving"
    while true; do
      ctl slots move --slots="$first-$((first + len - 1))" --to="$to" >"$soak/move.out" 2>&1 &
      echo $! >"$soak/mover.ctl.pid"
      if wait $!; then echo "move $n: slots $first-$((first + len - 1)) -> ps-$to (tries $((tries + 1)))" >>"$soak/moves.done"; break; fi
      tries=$((tries + 1))
      if ((tries >= 30)); then echo "move $n: gave up: $(tail -1 "$soak/move.out")" >>"$soak/moves.failed"; break; fi
      sleep 1
    done
    rm -f "$soak/moving" "$soak/mover.ctl.pid"
    sleep "$((1 + RANDOM % 3))"
  done
}

nemesis() {  # KIND: one fault
  local victim pid
  case "$1" in
    ps_kill)
      victim="ps-$((RANDOM % 3))"; pid="$(pid_of "$victim")" || return 0
      kill -9 "$pid" 2>/dev/null && log "SIGKILL $victim (pid $pid) at step $(progress)" ;;
    worker_kill)
      victim="worker-$((RANDOM % 2))"; pid="$(pid_of "$victim")" || return 0
      kill -9 "$pid" 2>/dev/null && log "SIGKILL $victim (pid $pid) at step $(progress)" ;;
    follower_kill)
      pid="$(pid_of serving-0)" || return 0
      kill -9 "$pid" 2>/dev/null && log "SIGKILL serving-0 (pid $pid)" ;;
    coordinator_kill)
      pid="$(pid_of coordinator)" || return 0
      kill -9 "$pid" 2>/dev/null && log "SIGKILL coordinator (pid $pid) at step $(progress)" ;;
    pause)
      victim="ps-$((RANDOM % 3))"; pid="$(pid_of "$victim")" || return 0
      local in_move=""
      [[ -f "$soak/moving" ]] && in_move=" during a slot move" && count[pause_in_move]=$((count[pause_in_move] + 1))
      kill -STOP "$pid" 2>/dev/null || return 0
      paused_pid=$pid
      log "SIGSTOP $victim (pid $pid) for ${pause_s} s$in_move at step $(progress)"
      sleep "$pause_s"
      kill -CONT "$pid" 2>/dev/null; paused_pid=""
      log "SIGCONT $victim" ;;
    checkpoint)
      if ctl checkpoint create --job=quickstart --wait_ms=20000 >"$soak/ckpt.out" 2>&1; then
        log "on-demand checkpoint: $(tail -1 "$soak/ckpt.out")"
      else
        log "on-demand checkpoint refused (a recovery runs?): $(tail -1 "$soak/ckpt.out")"
      fi ;;
  esac
  count[$1]=$((count[$1] + 1))
}
sample_lag() {
  local status lag
  status="$(ctl --json serving status 2>/dev/null)" || return 0
  lag="$(jq -r '[.shards[].lag_seconds] | max // 0' <<<"$status" 2>/dev/null)" || return 0
  [[ "$(echo "$lag > $max_lag_s" | bc)" == 1 ]] && max_lag_s=$lag
  lag="$(jq -r '[.shards[].lag_versions] | max // 0' <<<"$status" 2>/dev/null)" || return 0
  ((lag > max_lag_versions)) && max_lag_versions=$lag
  return 0
}
wlog="" stall_step=-1 stall_since=0
progress() { awk '$1 == "step" { s = $2 } END { print s + 0 }' "$wlog" 2>/dev/null || echo 0; }
lines() { if [[ -f "$1" ]]; then wc -l <"$1"; else echo 0; fi; }
running() { kill -0 "$train_pid" 2>/dev/null; }
# stalled: the job's step has not changed for 3 minutes (a livelocked recovery).
stalled() {
  local step
  step="$(progress)"
  if [[ "$step" != "$stall_step" ]]; then stall_step=$step stall_since=$(date +%s); return 1; fi
  (( $(date +%s) - stall_since >= 180 ))
}
stall_report() {
  log "FAIL: the job has been at step $stall_step for $(( $(date +%s) - stall_since )) s; the workers' last errors:"
  grep -h 'failed, rejoining' "$soak"/logs/worker-*.log | tail -3 | cut -c1-300 | tee -a "$events"
  exit 1
}
now_s() { date +%s.%N; }
before() { [[ "$(echo "$1 < $2" | bc)" == 1 ]]; }

run_round() {  # N: one round of faults on a fresh cluster, then its checks
  local n="$1" remaining_ms window_ms until_ms
  soak="$run_dir/round-$n" wlog="$run_dir/round-$n/logs/worker-0.log"
  declare -gA before_count=()
  local k; for k in "${!count[@]}"; do before_count[$k]=${count[$k]}; done
  fault_flags=()
  if [[ -n "$disk_faults" ]]; then
    # The window's end is wall-clock, so a shard restarted after it has a healthy disk.
    if ((short)); then
      window_ms=15000
    else
      remaining_ms=$(echo "$minutes * 60000" | bc | cut -d. -f1)
      [[ -z "$deadline" ]] || remaining_ms=$(echo "($deadline - $(now_s)) * 1000" | bc | cut -d. -f1)
      window_ms=$(echo "$round_minutes * 60000" | bc | cut -d. -f1)
      ((remaining_ms < window_ms)) && window_ms=$remaining_ms
    fi
    window_ms_of_round=$window_ms
    until_ms=$(( $(date +%s%3N) + 2000 + window_ms ))
    fault_flags=(--ps_args="--test_disk_fault_rate=$disk_faults --test_disk_faults_after_ms=2000 --test_disk_faults_for_ms=$window_ms --test_disk_faults_until_unix_ms=$until_ms")
  fi
  up "$soak" "${fault_flags[@]}"
  "$cluster" add-shard --run_dir="$soak" --build_dir="$build_dir" --shard_id=2 >/dev/null </dev/null
  set -a; . "$soak/cluster.env"; set +a
  train "$soak" "$steps" &
  train_pid=$!
  until grep -q 'job quickstart: checkpoint ckpt-' "$soak/logs/coordinator.log" 2>/dev/null; do
    running || fail "round $n: the job ended before its first checkpoint (see $soak.train.out)"
    sleep 0.2
  done
  "$cluster" serve --run_dir="$soak" --build_dir="$build_dir" --follower_id=0 >"$soak.serve.out" 2>&1 </dev/null \
    || fail "round $n: the follower did not start (see $soak.serve.out)"
  set -a; . "$soak/cluster.env"; set +a
  local round_start; round_start=$(now_s)
  [[ -n "$deadline" ]] || deadline=$(echo "$round_start + $minutes * 60" | bc)
  log "round $n: cluster up: 3 shards (ps-2 empty), 2 workers, follower $EMBER_SERVING; nemeses start"

  if [[ -z "$disk_faults" ]]; then
    (RANDOM=$((seed + 1000 * n + 1)); mover) &
    mover_pid=$!
  else
    mover_pid=""
    log "round $n: disk faults: ember-ps fails $disk_faults of RocksDB's file reads and writes for $((window_ms / 1000)) s; no other nemesis"
  fi

  local schedule=() next=infinity i=0 last_progress=0 now kind r
  if [[ -z "$disk_faults" ]]; then
    ((short)) && schedule=(ps_kill worker_kill checkpoint follower_kill pause ps_kill)
    next=$(echo "$(now_s) + 2" | bc)
  fi
  stall_step=-1 stall_since=$(date +%s)
  while running && before "$(now_s)" "$deadline"; do
    sample_lag
    now=$(now_s)
    if [[ "$next" != infinity ]] && ! before "$now" "$next"; then
      if ((short)); then
        ((i < ${#schedule[@]})) || break
        kind="${schedule[$i]}"
        # The short form's pause waits for a move in flight (the mover starts one every few s).
        if [[ "$kind" == pause ]]; then
          for _ in $(seq 100); do [[ -f "$soak/moving" ]] && break; sleep 0.1; done
        fi
        i=$((i + 1)); next=$(echo "$now + 3" | bc)
      else
        r=$((RANDOM % 100))
        if ((r < 30)); then kind=ps_kill; elif ((r < 50)); then kind=worker_kill
        elif ((r < 70)); then kind=pause; elif ((r < 80)); then kind=checkpoint
        elif ((r < 92)); then kind=follower_kill; else kind=coordinator_kill; fi
        next=$(echo "$now + 4 + $RANDOM % 7" | bc)
      fi
      nemesis "$kind"
    fi
    if (( $(date +%s) - last_progress >= 15 )); then
      last_progress=$(date +%s)
      log "round $n: progress: step $(progress)/$steps, moves $(lines "$soak/moves.done"), follower lag max ${max_lag_s} s"
    fi
    if stalled; then stall_report; fi
    sleep 0.5
  done
  local round_end; round_end=$(now_s)
  log "round $n: nemeses stop; waiting for the last move and the job"
  touch "$soak/stop_moves"
  if [[ -n "$mover_pid" ]]; then
    for _ in $(seq 600); do kill -0 "$mover_pid" 2>/dev/null || break; sample_lag; sleep 0.5; done
    kill -0 "$mover_pid" 2>/dev/null && fail "round $n: the last slot move did not end within 300 s"
    wait "$mover_pid" || true; mover_pid=""
  fi
  while running; do
    if stalled; then stall_report; fi
    sleep 1
  done
  local job_rc=0
  wait "$train_pid" || job_rc=$?
  train_pid=""
  local job_end; job_end=$(now_s)
  verify_round "$n" "$job_rc" "$round_start" "$round_end" "$job_end"
}

# --- 3. verify ---------------------------------------------------------------------
failures=0
check() {  # NAME COMMAND...: runs COMMAND, counts a failure
  local name="$1"; shift
  if "$@"; then log "ok   $name"; else log "FAIL $name"; failures=$((failures + 1)); fi
}
same() { [[ "$2" == "$3" ]] || { echo "  $1: $2 != $3 (reference)"; return 1; }; }
converge_s=""
converges() {
  local start=$SECONDS
  for _ in $(seq 120); do
    ctl --json serving checksum 2>/dev/null | jq -c '.tables' >"$soak/follower.checksum" || true
    if cmp -s "$soak/follower.checksum" "$soak/soak.checksum"; then
      converge_s=$((SECONDS - start)); return 0
    fi
    sleep 0.5
  done
  return 1
}
verify_round() {  # N JOB_RC ROUND_START ROUND_END JOB_END
  local n="$1" job_rc="$2" round_start="$3" round_end="$4" job_end="$5" f
  check "round $n: the job exited 0" test "$job_rc" -eq 0
  for f in steps sparse_rows sparse_checksum dense_checksum model_checksum; do
    check "round $n: $f equals the fault-free run's" same "$f" "$(field "$soak" "$f")" "$(field "$ref" "$f")"
  done
  ctl --json checksum | jq -c '.tables' >"$soak/soak.checksum"
  check "round $n: emberctl checksum (rows, digest per table) equals the fault-free run's" \
    cmp -s "$soak/soak.checksum" "$run_dir/reference.checksum"
  local owned
  owned="$(ctl slots show | awk 'NR > 2 && $1 ~ /^[0-9]+$/ {s += $2} END {print s + 0}')"
  check "round $n: every slot has exactly one owner (16384 owned)" same owned "$owned" 16384
  # The follower's lag is against the shard versions it has heard of, so "lag 0" alone
  # can precede the last messages (a move's resync): it must reach the cluster's checksum.
  check "round $n: the follower's checksum reaches the cluster's within 60 s" converges
  local lagging bootstraps
  lagging="$(ctl --json serving status 2>/dev/null | jq '[.shards[] | select(.lag_versions != 0)] | length' || echo unknown)"
  check "round $n: and it reports lag 0 on every shard" test "$lagging" = 0
  bootstraps="$(ctl --json serving status 2>/dev/null | jq -r '"\(.bootstraps) bootstrap(s), \([.shards[].reconnects] | add) reconnect(s)"' || echo "status unavailable")"
  check "round $n: no slot move gave up" test ! -s "$soak/moves.failed"

  local moves ckpts ckpts_failed restarts disk_summary=""
  moves="$(lines "$soak/moves.done")"
  ckpts="$(grep -c 'job quickstart: checkpoint ckpt-[^ ]* at step' "$soak/logs/coordinator.log" || true)"
  ckpts_failed="$(grep -c 'job quickstart: checkpoint ckpt-[^ ]* failed' "$soak/logs/coordinator.log" || true)"
  restarts="$(cat "$soak"/logs/*.log | grep -c 'restarting' || true)"
  if [[ -n "$disk_faults" ]]; then
    # Errors as the shards' clients saw them (non-OK RPC codes) and write-backs that failed.
    # (A restarted shard has a new metrics port: the last one its log names; its counters
    # start over, so these count the errors since the last restart.)
    local i metrics rpc_errors rpc_codes writeback_errors reopens failed_attempts injected crashes
    for i in 0 1; do
      metrics="$(grep 'metrics on' "$soak/logs/ps-$i.log" | tail -1 | awk '{print $NF}')"
      curl -s "http://$metrics/metrics" >"$soak/ps-$i.metrics" || true
    done
    rpc_errors="$(cat "$soak"/ps-*.metrics | awk '/^ember_rpc_total/ && !/code="OK"/ {s += $NF} END {print s + 0}')"
    rpc_codes="$(cat "$soak"/ps-*.metrics | awk '/^ember_rpc_total/ && !/code="OK"/ && $NF > 0 {match($0, /code="[A-Z_]*"/); c[substr($0, RSTART + 6, RLENGTH - 7)] += $NF} END {for (k in c) printf "%s %d, ", k, c[k]}')"
    writeback_errors="$(cat "$soak"/ps-*.metrics | awk '/^ember_writeback_errors_total/ {s += $NF} END {print s + 0}')"
    # From the logs: ember_rocksdb_reopens_total starts over with each store a restore opens.
    reopens="$(cat "$soak"/logs/ps-*.log | grep -c 'rocksdb: reopened' || true)"
    failed_attempts="$(cat "$soak"/logs/worker-*.log | grep -c 'failed, rejoining' || true)"
    down "$soak"  # the shards log their injected-fault counts when the window ends or they stop
    # Each process logs its running count every second; the last line of each counts.
    injected="$(for f in "$soak"/logs/ps-*.log; do
      awk '/ serving .* on / {w += lw; r += lr; lw = lr = 0}
           match($0, /[0-9]+ write and [0-9]+ read faults injected/) {
             split(substr($0, RSTART, RLENGTH), a, " "); lw = a[1]; lr = a[4] }
           END {print w + lw, r + lr}' "$f"
    done | awk '{w += $1; r += $2} END {printf "%d write, %d read", w, r}')"
    crashes="$(cat "$soak"/logs/ps-*.log | grep -c 'died (status' || true)"
    check "round $n: disk faults were injected" bash -c "[[ '$injected' != '0 write, 0 read' ]]"
    check "round $n: the errors surfaced (RPC codes, write-back errors or failed attempts)" \
      test $((rpc_errors + writeback_errors + failed_attempts)) -gt 0
    # A write error makes RocksDbBackend reopen its database; no shard may die of it
    # (the disk is the only nemesis here, so any supervisor restart is a crash).
    check "round $n: no shard crashed or was restarted" test "$crashes" -eq 0 -a "$restarts" -eq 0
    total[reopens]=$((total[reopens] + reopens)); total[crashes]=$((total[crashes] + crashes))
    injected_all+=("$injected")
    printf -v disk_summary '%s\n' "disk faults:         rate $disk_faults for $((window_ms_of_round / 1000)) s: injected $injected; shard crashes $crashes, RocksDB reopens $reopens; surfaced as RPC errors ${rpc_codes:-none }write-back errors $writeback_errors, failed attempts $failed_attempts"
  fi
  if ((short)) && [[ -z "$disk_faults" ]]; then
    for k in ps_kill worker_kill follower_kill pause checkpoint; do
      check "the short form injected $k" test "${count[$k]}" -ge 1
    done
    check "at least one slot move completed" test "$moves" -ge 1
  fi
  local faults_s k
  faults_s=$(printf '%.0f' "$(echo "$round_end - $round_start" | bc)")
  total[faults_s]=$((total[faults_s] + faults_s)); total[moves]=$((total[moves] + moves))
  total[ckpts]=$((total[ckpts] + ckpts)); total[ckpts_failed]=$((total[ckpts_failed] + ckpts_failed))
  total[restarts]=$((total[restarts] + restarts))
  declare -A d=()
  for k in "${!count[@]}"; do d[$k]=$((count[$k] - before_count[$k])); done
  cat <<EOF2 | tee -a "$events"
== round $n (seed $seed)
faults for:          $faults_s s; job end $(printf '%.0f' "$(echo "$job_end - $round_start" | bc)") s after the follower started
job:                 $(field "$soak" steps)/$steps steps, attempt $(field "$soak" attempt), recoveries (rank 0) $(field "$soak" recoveries_rank0), exit $job_rc
kills survived:      PS ${d[ps_kill]}, worker ${d[worker_kill]}, coordinator ${d[coordinator_kill]}, follower ${d[follower_kill]} (supervisor restarts: $restarts)
pauses (SIGSTOP):    ${d[pause]} of ${pause_s} s (heartbeat timeout ${hb_timeout_ms} ms), ${d[pause_in_move]} during a slot move
slot moves done:     $moves (gave up: $(lines "$soak/moves.failed"))
checkpoints:         $ckpts committed, $ckpts_failed failed (${d[checkpoint]} requested on demand)
follower:            since its last restart $bootstraps; checksum $(cmp -s "$soak/follower.checksum" "$soak/soak.checksum" && echo "equals the cluster's (after ${converge_s} s)" || echo "DIFFERS from the cluster's")
model:               $(field "$soak" model_checksum) (fault-free $(field "$ref" model_checksum))
${disk_summary}result:              $( ((failures == 0)) && echo PASS || echo "FAIL ($failures checks)")
EOF2
  ((failures == 0)) || exit 1
  down "$soak"
  # A passing round keeps its logs and results, not its data (RocksDB, checkpoints).
  rm -rf "$soak/data" "$soak/checkpoints"
}

rounds=0 injected_all=() disk_total=""
while :; do
  rounds=$((rounds + 1))
  window_ms_of_round=0
  run_round "$rounds"
  ((short)) && break
  before "$(now_s)" "$deadline" || break
done
if [[ -n "$disk_faults" ]]; then
  printf -v disk_total '%s\n' "disk faults:         injected per round: ${injected_all[*]}; RocksDB reopens ${total[reopens]}, shard crashes ${total[crashes]}"
fi
cat <<EOF | tee -a "$events"
== soak summary (seed $seed): $rounds round(s) of the same $steps-step job against one fault-free reference
faults for:          ${total[faults_s]} s in all
kills survived:      PS ${count[ps_kill]}, worker ${count[worker_kill]}, coordinator ${count[coordinator_kill]}, follower ${count[follower_kill]} (supervisor restarts: ${total[restarts]})
pauses (SIGSTOP):    ${count[pause]} of ${pause_s} s, ${count[pause_in_move]} during a slot move
slot moves done:     ${total[moves]}
checkpoints:         ${total[ckpts]} committed, ${total[ckpts_failed]} failed (${count[checkpoint]} requested on demand)
follower:            max lag sampled ${max_lag_s} s / ${max_lag_versions} versions
model:               every round $(field "$ref" model_checksum), the fault-free run's
${disk_total}updates lost:        0 (every round's rows, optimizer state, counts and dense weights equal the fault-free run's)
result:              PASS
EOF
