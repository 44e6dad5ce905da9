#!/usr/bin/env bash
# Rebalance drill (a soak of online slot migration under training, with faults): on a
# local cluster (deploy/local/cluster.sh: every process supervised and restarted) a
# 2-worker BSP job trains with a checkpoint every 50 steps while the drill repeatedly
# grows the cluster to 3 shards (`emberctl rebalance`) and drains shard 2 again
# (`emberctl shards drain`). With --kill, a random PS shard is SIGKILLed in the middle
# of every migration: the supervisor restarts it, the job rolls back to its newest
# checkpoint, and the migration starts its copy over (or stops FAILED, and the drill
# runs the same command again, which resumes it). With --own_tables the job trains on
# tables of its own (a store of the job's on every shard), which every move then carries.
#
#   tools/rebalance_drill.sh [--build_dir=build] [--rounds=3] [--kill] [--own_tables] [--run_dir=run/rebalance-drill]
#
# Prints each migration's outcome and time; at the end every slot must have an owner,
# the job must finish with exit 0, and its recoveries are printed. Exit 1 otherwise.
set -euo pipefail

build_dir=build rounds=3 kill=0 own_tables="" run_dir=run/rebalance-drill
for arg in "$@"; do
  case "$arg" in
    --build_dir=*) build_dir="${arg#*=}" ;;
    --rounds=*) rounds="${arg#*=}" ;;
    --kill) kill=1 ;;
    --own_tables) own_tables=--own_tables ;;
    --run_dir=*) run_dir="${arg#*=}" ;;
    --help|-h) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "rebalance_drill.sh: unknown flag $arg" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
cluster=deploy/local/cluster.sh
ctl="$build_dir/bin/emberctl"
rm -rf "$run_dir"
mkdir -p "$run_dir"
"$build_dir/bin/ember-datagen" --out="$run_dir/data" --train_examples=400000 \
  --test_examples=1000 --train_files=4 >/dev/null
trap '"$cluster" down --run_dir="$run_dir" >/dev/null 2>&1 || true' EXIT
"$cluster" up --run_dir="$run_dir" --build_dir="$build_dir" --shards=2 >/dev/null </dev/null
set -a; . "$run_dir/cluster.env"; set +a
"$cluster" train --run_dir="$run_dir" --build_dir="$build_dir" --workers=2 \
  --worker_args="--train=$run_dir/data/train --skip_eval --batch_size=256 --epochs=$((4 + 2 * rounds)) --checkpoint_every_steps=50 --log_every_steps=100 --ps_deadline_ms=5000 --collective_timeout_ms=15000 $own_tables" \
  >"$run_dir/train.out" 2>&1 </dev/null &
train_pid=$!
"$cluster" add-shard --run_dir="$run_dir" --build_dir="$build_dir" --shard_id=2 >/dev/null </dev/null
set -a; . "$run_dir/cluster.env"; set +a
until grep -q "step    100" "$run_dir/logs/worker-0.log" 2>/dev/null; do
  kill -0 "$train_pid" 2>/dev/null || { cat "$run_dir/train.out"; exit 1; }
  sleep 0.2
done

# Runs one emberctl migration command (re-running it while it ends FAILED), killing a
# random shard once its copy is under way when --kill is on.
migrate() {
  local what="$1" start end tries=0 killer=""
  shift
  start=$(date +%s.%N)
  if ((kill)); then
    (
      while ! "$ctl" --json migrations show 2>/dev/null | grep -q '"phase":"COPYING"\|"phase":"CATCHING_UP"'; do
        sleep 0.05
      done
      victim=$((RANDOM % 3))
      kill -9 "$(cat "$run_dir/pids/ps-$victim.pid")" 2>/dev/null && echo "  killed ps-$victim mid-migration"
    ) &
    killer=$!
  fi
  until "$ctl" "$@" >"$run_dir/ctl.out" 2>"$run_dir/ctl.err"; do
    tries=$((tries + 1))
    ((tries < 5)) || { cat "$run_dir/ctl.err"; return 1; }
    echo "  $what stopped ($(tail -1 "$run_dir/ctl.out")); running it again"
    sleep 2
  done
  [[ -n "$killer" ]] && { kill "$killer" 2>/dev/null || true; wait "$killer" 2>/dev/null || true; }
  end=$(date +%s.%N)
  printf '%s: %s in %.1f s\n' "$what" "$(grep -m1 'DONE' "$run_dir/ctl.out" || echo done)" \
    "$(echo "$end - $start" | bc)"
}

for ((r = 1; r <= rounds; r++)); do
  echo "== round $r"
  migrate "grow to 3 shards" rebalance --by=slots
  migrate "drain shard 2" shards drain --id=2
done
if "$ctl" slots show | grep -q unowned.*[1-9]; then
  echo "rebalance_drill.sh: slots without an owner:" >&2
  "$ctl" slots show >&2
  exit 1
fi
wait "$train_pid" || { echo "rebalance_drill.sh: the job failed" >&2; tail -20 "$run_dir/train.out" >&2; exit 1; }
echo "job finished: $(grep -h 'done:' "$run_dir/logs/worker-0.log" | tail -1)"
"$ctl" status --sample_ms=0 | sed -n '/^JOB/,/^$/p'
