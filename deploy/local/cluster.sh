#!/usr/bin/env bash
# Runs a whole Ember cluster on this machine: a coordinator, N PS shards and M training
# workers as processes on loopback, with logs, data and PID files under one run
# directory. `down` stops exactly the processes `up`/`train` started (by PID).
#
#   deploy/local/cluster.sh up --run_dir=run/demo --shards=2
#   deploy/local/cluster.sh train --run_dir=run/demo --workers=2 --config=configs/quickstart.pbtxt
#   deploy/local/cluster.sh train --run_dir=run/demo --workers=2:4     # elastic, then:
#   deploy/local/cluster.sh scale --run_dir=run/demo --workers=3       # (another shell)
#   deploy/local/cluster.sh scale --run_dir=run/demo --shards=3
#   deploy/local/cluster.sh add-shard --run_dir=run/demo --shard_id=2
#   deploy/local/cluster.sh stop-shard --run_dir=run/demo --shard_id=1
#   deploy/local/cluster.sh serve --run_dir=run/demo --follower_id=0
#   deploy/local/cluster.sh status --run_dir=run/demo
#   deploy/local/cluster.sh down --run_dir=run/demo
#
# Layout of the run directory:
#   cluster.env          EMBER_COORDINATOR=host:port, EMBER_ADMIN_TOKEN_FILE and the
#                        shard/metrics addresses (`set -a; . cluster.env` for emberctl)
#   admin_token          the coordinator's admin token (mode 600)
#   cluster_token        without --tls: the token the coordinator requires of shards and
#                        workers (RegisterShard, CreateTable, KvPut...; mode 600)
#   certs/               with `up --tls`: the test CA and certificates (tools/gen-certs.sh);
#                        every later command of the run directory then speaks mutual TLS,
#                        and cluster.env names the admin certificate (EMBER_TLS_*)
#   audit.jsonl          the coordinator's audit file (every admin change, JSON lines)
#   pids/NAME.pid        one per process started (coordinator, ps-0.., worker-0..,
#                        serving-0..); pids/NAME.rc its exit status once it ended
#   elastic.env          the elastic run `train --workers=MIN:MAX` runs (its run id, range,
#                        worker flags, next member number), read by `scale`
#   logs/NAME.log        its stdout and stderr
#   data/NAME/           RocksDB directories
#   checkpoints/         the coordinator's --checkpoint_dir (every job's checkpoints)
#   job/                 the training job's run directory (result.json, training.svg)
#
# Every process runs under a supervisor loop that restarts it when it dies from a
# signal (a crash, kill -9) or exits 75 ("restart me": a shard whose listener stopped
# accepting, server/shared/listener_check.h), as a Kubernetes StatefulSet would: a PS restarts on its
# data directory, the coordinator on its port and directory, a worker with its rank;
# the coordinator then rolls the job back to its newest checkpoint
# (docs/OPERATIONS.md, "Checkpoints and recovery"). `down` stops the supervisors first.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: deploy/local/cluster.sh COMMAND [--flag=value ...]

commands:
  up       start the coordinator and the PS shards, wait until they serve
  add-shard  start one more PS shard (--shard_id) in a running cluster; it joins
           with no slots until `emberctl rebalance` (or `shards add --rebalance`).
           Also restarts a shard that stop-shard stopped, on its data directory
  stop-shard stop one PS shard (--shard_id) and its supervisor: it stays down (its
           slots are unavailable until it is back or `emberctl shards remove`)
  train    start the workers of a training job and wait for them (cluster must be up).
           --workers=MIN:MAX: an elastic run (ember-worker --workers=MIN:MAX); starts
           MIN workers, and `scale --workers=N` changes their number while it trains
  scale    --workers=N: start elastic workers, or make the highest-numbered ones leave
           (SIGTERM: each leaves at the next checkpoint), until N run; N within the run's
           MIN:MAX. --shards=N: start shards (add-shard; they get slots from `emberctl
           rebalance` or the coordinator's --auto_rebalance), or drain, stop and remove
           the highest ids (emberctl shards drain/remove), until N run
  serve    start a serving follower (ember-serving, --follower_id) of a running cluster;
           it bootstraps from the newest checkpoint and follows every shard
  status   show every process of the run directory and whether it is alive
  down     stop every process this run directory started (SIGTERM, then SIGKILL)

flags:
  --run_dir=DIR          run directory. Default: run/local
  --build_dir=DIR        where the binaries are (DIR/bin). Default: build
  --shards=N             PS shards (up, scale). Default: 2
  --shard_id=N           the shard's id (add-shard, stop-shard). Required there
  --follower_id=N        the follower's id (serve): its data dir and log. Default: 0
  --serving_args="..."   extra ember-serving flags (serve), e.g. "--max_staleness_steps=50"
  --coordinator_args="..."  extra ember-coordinator flags (up), e.g. hot-key replication:
                         "--hot_replicas=2 --hot_min_share=0.01"
  --memory_budget_mb=N   memory tier per shard (up). Default: the PS default
  --ps_args="..."        extra ember-ps flags (up, add-shard), e.g. fault tests'
                         "--test_disk_fault_rate=0.01"
  --workers=N            training workers (train, scale). Default: 2. MIN:MAX (train):
                         an elastic run of MIN to MAX workers
  --config=FILE          model config (train). Default: configs/quickstart.pbtxt
  --worker_args="..."    extra ember-worker flags (train), e.g. "--max_steps=100"
  --timeout=SECONDS      how long `up` waits for a process to serve, and `scale` for
                         workers to leave. Default: 60
  --tls                  (up) mutual TLS on every channel, with a test CA made by
                         tools/gen-certs.sh in RUN_DIR/certs; admin calls need the
                         admin certificate or the token. Default: plaintext
EOF
}

die() { echo "cluster.sh: $*" >&2; exit 1; }

cmd="${1:-}"
[[ -z "$cmd" || "$cmd" == "--help" || "$cmd" == "-h" ]] && { usage; exit 0; }
shift
run_dir=run/local build_dir=build shards=2 workers=2 config=configs/quickstart.pbtxt
worker_args="" timeout=60 memory_budget_mb="" shard_id="" follower_id=0 serving_args=""
coordinator_args="" tls=0 ps_args="" scale_workers="" scale_shards=""
for arg in "$@"; do
  case "$arg" in
    --run_dir=*) run_dir="${arg#*=}" ;;
    --build_dir=*) build_dir="${arg#*=}" ;;
    --shards=*) shards="${arg#*=}"; scale_shards="$shards" ;;
    --shard_id=*) shard_id="${arg#*=}" ;;
    --follower_id=*) follower_id="${arg#*=}" ;;
    --serving_args=*) serving_args="${arg#*=}" ;;
    --coordinator_args=*) coordinator_args="${arg#*=}" ;;
    --ps_args=*) ps_args="${arg#*=}" ;;
    --workers=*) workers="${arg#*=}"; scale_workers="$workers" ;;
    --config=*) config="${arg#*=}" ;;
    --worker_args=*) worker_args="${arg#*=}" ;;
    --timeout=*) timeout="${arg#*=}" ;;
    --memory_budget_mb=*) memory_budget_mb="${arg#*=}" ;;
    --tls) tls=1 ;;
    --help|-h) usage; exit 0 ;;
    *) echo "cluster.sh: unknown flag $arg" >&2; usage >&2; exit 2 ;;
  esac
done
[[ "$shards" =~ ^[1-9][0-9]*$ ]] || { echo "cluster.sh: --shards must be >= 1" >&2; exit 2; }
[[ "$workers" =~ ^[1-9][0-9]*(:[1-9][0-9]*)?$ ]] && (( ${workers%:*} <= ${workers#*:} )) ||
  { echo "cluster.sh: --workers must be N >= 1, or MIN:MAX with 1 <= MIN <= MAX" >&2; exit 2; }
if [[ "$cmd" == scale ]]; then
  [[ -n "$scale_workers$scale_shards" ]] || { echo "cluster.sh: scale needs --workers=N or --shards=N" >&2; exit 2; }
  [[ "$workers" != *:* ]] || { echo "cluster.sh: scale --workers takes a number, not a range" >&2; exit 2; }
elif [[ "$workers" == *:* && "$cmd" != train ]]; then
  echo "cluster.sh: --workers=MIN:MAX is for train" >&2; exit 2
fi
bin="$build_dir/bin"
mkdir -p "$run_dir"
run_dir="$(cd "$run_dir" && pwd)"
mkdir -p "$run_dir/pids" "$run_dir/logs" "$run_dir/data"

# tls_flags ROLE: the --tls_* flags of ROLE's certificate (server, client, admin) when
# the run directory's cluster runs with TLS (`up --tls` made certs/), else nothing.
# cluster_token_flag: a plaintext run's cluster token (docs/SECURITY.md), for the
# coordinator, the shards and the workers: without TLS it is what tells them from a
# stranger on the network. Nothing with TLS (the certificates decide).
cluster_token_flag() {
  [[ -f "$run_dir/certs/ca.pem" ]] && return 0
  echo "--cluster_token_file=$run_dir/cluster_token"
}

tls_flags() {
  [[ -f "$run_dir/certs/ca.pem" ]] || return 0
  echo "--tls_ca=$run_dir/certs/ca.pem --tls_cert=$run_dir/certs/$1.pem --tls_key=$run_dir/certs/$1.key"
  [[ "$1" == server ]] && echo "--admin_identities=ember-admin,ember-server"
  return 0
}

# start NAME COMMAND...: runs COMMAND in the background under a supervisor, logging to
# logs/NAME.log; pids/NAME.pid holds the current process, pids/NAME.supervisor its
# supervisor. The supervisor restarts COMMAND when it dies from a signal (exit status
# > 128) or exits 75 (restart me), and exits with COMMAND's status otherwise. In COMMAND, the word @PORT@ is
# replaced by the port in NAME.port once known (the coordinator keeps its port).
start() {
  local name="$1"; shift
  rm -f "$run_dir/pids/$name.pid" "$run_dir/pids/$name.rc" "$run_dir/stopping-$name"
  # Logs are appended to, start after start: wait_for reads only this start's lines.
  echo $(( $(stat -c %s "$run_dir/logs/$name.log" 2>/dev/null || echo 0) + 1 )) \
    >"$run_dir/pids/$name.logstart"
  (
    trap '' TERM  # only `down` (which kills the child first) ends the supervisor
    while true; do
      port="$(cat "$run_dir/$name.port" 2>/dev/null || echo 0)"
      args=("${@//@PORT@/$port}")
      "${args[@]}" >>"$run_dir/logs/$name.log" 2>&1 &
      echo $! >"$run_dir/pids/$name.pid"
      rc=0
      wait $! 2>/dev/null || rc=$?
      if [[ -f "$run_dir/stopping" || -f "$run_dir/stopping-$name" ]] || (( rc <= 128 && rc != 75 )); then
        echo "$rc" >"$run_dir/pids/$name.rc"
        exit "$rc"
      fi
      echo "cluster.sh: $name died (status $rc); restarting" >>"$run_dir/logs/$name.log"
      sleep 0.5
    done
  ) </dev/null >>"$run_dir/logs/$name.log" 2>&1 &  # not the caller's: `up | tail` ends
  echo $! >"$run_dir/pids/$name.supervisor"
  for _ in $(seq 100); do [[ -s "$run_dir/pids/$name.pid" ]] && break; sleep 0.05; done
}

# alive NAME: the process of pids/NAME.pid runs and is one of ours (an ember binary).
alive() {
  local pidfile="$run_dir/pids/$1.pid" pid
  [[ -f "$pidfile" ]] || return 1
  pid="$(cat "$pidfile")"
  # The process may exit between the test and the read: both stay quiet then.
  [[ -r "/proc/$pid/cmdline" ]] || return 1
  { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -q "ember-" && return 0
  # Just forked by its supervisor and not yet an ember binary (the pid file is written
  # before the child's exec): still ours while its parent is NAME's supervisor.
  local supervisor ppid
  supervisor="$(cat "$run_dir/pids/$1.supervisor" 2>/dev/null || true)"
  ppid="$(awk '/^PPid:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)"
  [[ -n "$supervisor" && "$ppid" == "$supervisor" ]]
}

# this_start NAME: the lines logs/NAME.log got since NAME's last start (earlier runs of
# the run directory wrote the lines before).
this_start() {
  tail -c "+$(cat "$run_dir/pids/$1.logstart" 2>/dev/null || echo 1)" "$run_dir/logs/$1.log" \
    2>/dev/null
}

# wait_for NAME PATTERN: waits until this start of NAME logged a line matching PATTERN
# and prints its last field (the address); fails if the process dies or on timeout.
wait_for() {
  local name="$1" pattern="$2" deadline=$((SECONDS + timeout)) line
  while (( SECONDS < deadline )); do
    line="$(this_start "$name" | grep -m1 "$pattern" || true)"
    if [[ -n "$line" ]]; then
      awk '{print $NF}' <<<"$line"
      return 0
    fi
    alive "$name" || { tail -5 "$run_dir/logs/$name.log" >&2; die "$name exited during startup"; }
    sleep 0.1
  done
  die "$name did not print '$pattern' within ${timeout}s (see $run_dir/logs/$name.log)"
}

stop() {
  local name="$1" pidfile="$run_dir/pids/$1.pid" pid
  [[ -f "$pidfile" ]] || return 0
  pid="$(cat "$pidfile")"
  if alive "$name"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do alive "$name" || break; sleep 0.1; done
    if alive "$name"; then kill -KILL "$pid" 2>/dev/null || true; fi
    echo "stopped $name (pid $pid)"
  fi
  rm -f "$pidfile"
}

# add_shard ID: starts PS shard ID in the running cluster (add-shard, scale --shards).
add_shard() {
  local id="$1" coordinator address metrics extra
  [[ -f "$run_dir/cluster.env" ]] && alive coordinator || die "no cluster runs in $run_dir (cluster.sh up first)"
  alive "ps-$id" && die "ps-$id already runs"
  coordinator="$(grep '^EMBER_COORDINATOR=' "$run_dir/cluster.env" | cut -d= -f2)"
  extra=()
  [[ -n "$memory_budget_mb" ]] && extra+=(--memory_budget_mb="$memory_budget_mb")
  start "ps-$id" "$bin/ember-ps" --data_dir="$run_dir/data/ps-$id" --port=0 \
    --shard_id="$id" --coordinator="$coordinator" --metrics_port=0 \
    --admin_token_file="$run_dir/admin_token" $(tls_flags server) $(cluster_token_flag) \
    "${extra[@]}" $ps_args
  address="$(wait_for "ps-$id" "listening on")"
  metrics="$(wait_for "ps-$id" "metrics on")"
  sed -i "/^EMBER_PS_${id}=/d;/^EMBER_PS_${id}_METRICS=/d" "$run_dir/cluster.env"
  echo "EMBER_PS_$id=$address" >>"$run_dir/cluster.env"
  echo "EMBER_PS_${id}_METRICS=$metrics" >>"$run_dir/cluster.env"
  echo "ps-$id on $address (a new shard has no slots: emberctl rebalance moves some to it)"
}

# stop_shard ID: stops PS shard ID and its supervisor; it stays down.
stop_shard() {
  local id="$1" supervisor wait_pid
  [[ -f "$run_dir/pids/ps-$id.pid" ]] || die "ps-$id was not started in $run_dir"
  touch "$run_dir/stopping-ps-$id"  # its supervisor exits instead of restarting
  stop "ps-$id"
  supervisor="$run_dir/pids/ps-$id.supervisor"
  if [[ -f "$supervisor" ]]; then
    wait_pid="$(cat "$supervisor")"
    for _ in $(seq 50); do kill -0 "$wait_pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$supervisor"
  fi
  sed -i "/^EMBER_PS_${id}=/d;/^EMBER_PS_${id}_METRICS=/d" "$run_dir/cluster.env"
  echo "ps-$id stays down (cluster.sh add-shard --shard_id=$id starts it again)"
}

# start_worker N: starts elastic worker N (member worker-N) of the run in elastic.env.
# Member ids are never reused within a run: each process is a new member.
start_worker() {
  # shellcheck disable=SC2086
  start "worker-$1" "$bin/ember-worker" --config="$config" --coordinator="$coordinator" \
    --workers="$min_workers:$max_workers" --member="worker-$1" --run_id="$run_id" \
    --run_dir="$run_dir/job" $( (($1 == 0)) && echo "--metrics_port=0" ) $(tls_flags client) \
    $(cluster_token_flag) $worker_args
  echo "next_worker=$(($1 + 1))" >>"$run_dir/elastic.env"  # the last assignment wins
}

# The workers that run and are not leaving, by number (worker-N -> N), ascending.
running_workers() {
  local pidfile name
  for pidfile in "$run_dir"/pids/worker-*.pid; do
    name="$(basename "$pidfile" .pid)"
    [[ ! -f "$run_dir/stopping-$name" ]] && alive "$name" && echo "${name#worker-}"
  done | sort -n
}

# scale_workers N: starts elastic workers or makes the highest-numbered ones leave.
scale_workers() {
  local want="$1" n leaving=() name deadline running
  [[ -f "$run_dir/elastic.env" ]] || die "no elastic run in $run_dir (train --workers=MIN:MAX first)"
  # shellcheck disable=SC1091
  . "$run_dir/elastic.env"
  (( want >= min_workers && want <= max_workers )) ||
    die "--workers=$want is outside the run's range $min_workers:$max_workers"
  cd "$workdir"  # the run's relative paths (--config, --worker_args) hold from there
  mapfile -t running < <(running_workers)
  for ((n = ${#running[@]}; n < want; n++)); do
    start_worker "$next_worker"
    echo "worker-$next_worker started: it joins at the next checkpoint"
    next_worker=$((next_worker + 1))
  done
  for ((n = ${#running[@]} - 1; n >= want; n--)); do
    name="worker-${running[n]}"
    touch "$run_dir/stopping-$name"  # its supervisor exits instead of restarting
    kill -TERM "$(cat "$run_dir/pids/$name.pid")" 2>/dev/null || true
    leaving+=("$name")
  done
  deadline=$((SECONDS + timeout))
  for name in "${leaving[@]}"; do
    while alive "$name" && (( SECONDS < deadline )); do sleep 0.2; done
    alive "$name" && die "$name did not leave within ${timeout}s (see $run_dir/logs/$name.log)"
    echo "$name left the run (status $(cat "$run_dir/pids/$name.rc" 2>/dev/null || echo '?'))"
  done
}

# scale_shards N: starts the lowest shard ids that do not run, or drains, stops and
# removes the highest ones, until N shards run.
scale_shards() {
  local want="$1" ids id ctl=("$bin/emberctl")
  [[ "$want" =~ ^[1-9][0-9]*$ ]] || die "--shards must be >= 1"
  mapfile -t ids < <(for f in "$run_dir"/pids/ps-*.pid; do
    id="$(basename "$f" .pid)"; alive "$id" && echo "${id#ps-}"; done | sort -n)
  for ((id = 0; ${#ids[@]} < want; id++)); do
    alive "ps-$id" && continue
    add_shard "$id"
    ids+=("$id")
  done
  while (( ${#ids[@]} > want )); do
    id="${ids[-1]}"
    [[ -x "${ctl[0]}" ]] || die "${ctl[0]} not found: build first (a shard is drained before it stops)"
    (set -a; . "$run_dir/cluster.env"; "${ctl[@]}" shards drain --id="$id") || die "draining ps-$id failed"
    stop_shard "$id"
    (set -a; . "$run_dir/cluster.env"; "${ctl[@]}" shards remove --id="$id") || die "removing ps-$id failed"
    unset 'ids[-1]'
  done
}

case "$cmd" in
  up)
    for b in ember-coordinator ember-ps; do
      [[ -x "$bin/$b" ]] || die "$bin/$b not found: build first (cmake --build $build_dir)"
    done
    alive coordinator && die "a cluster already runs in $run_dir (cluster.sh down first)"
    rm -f "$run_dir/stopping" "$run_dir/coordinator.port"
    if (( tls )) && [[ ! -f "$run_dir/certs/ca.pem" ]]; then
      "$(dirname "$0")/../../tools/gen-certs.sh" "$run_dir/certs" >/dev/null
    elif (( ! tls )); then
      rm -rf "$run_dir/certs"
    fi
    # The admin credential emberctl needs for cluster changes (kept across restarts).
    if [[ ! -s "$run_dir/admin_token" ]]; then
      (umask 077; od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$run_dir/admin_token")
    fi
    # The shards' and workers' credential in a plaintext run (kept across restarts).
    if [[ ! -s "$run_dir/cluster_token" ]]; then
      (umask 077; od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$run_dir/cluster_token")
    fi
    start coordinator "$bin/ember-coordinator" --data_dir="$run_dir/data/coordinator" \
      --port=@PORT@ --expected_shards="$shards" --checkpoint_dir="$run_dir/checkpoints" \
      --admin_token_file="$run_dir/admin_token" --metrics_port=0 --audit_log="$run_dir/audit.jsonl" \
      $(tls_flags server) $(cluster_token_flag) $coordinator_args
    coordinator="$(wait_for coordinator "listening on")"
    coordinator_metrics="$(wait_for coordinator "metrics on")"
    echo "${coordinator##*:}" >"$run_dir/coordinator.port"
    echo "EMBER_COORDINATOR=$coordinator" >"$run_dir/cluster.env"
    echo "EMBER_ADMIN_TOKEN_FILE=$(cd "$run_dir" && pwd)/admin_token" >>"$run_dir/cluster.env"
    if [[ ! -f "$run_dir/certs/ca.pem" ]]; then
      echo "EMBER_CLUSTER_TOKEN_FILE=$(cd "$run_dir" && pwd)/cluster_token" >>"$run_dir/cluster.env"
    fi
    echo "EMBER_COORDINATOR_METRICS=$coordinator_metrics" >>"$run_dir/cluster.env"
    if [[ -f "$run_dir/certs/ca.pem" ]]; then
      { echo "EMBER_TLS_CA=$run_dir/certs/ca.pem"; echo "EMBER_TLS_CERT=$run_dir/certs/admin.pem"
        echo "EMBER_TLS_KEY=$run_dir/certs/admin.key"; } >>"$run_dir/cluster.env"
      echo "mutual TLS: CA and certificates in $run_dir/certs (emberctl uses admin.pem via cluster.env)"
    fi
    echo "coordinator on $coordinator (metrics http://$coordinator_metrics/metrics)"
    for ((i = 0; i < shards; i++)); do
      extra=()
      [[ -n "$memory_budget_mb" ]] && extra+=(--memory_budget_mb="$memory_budget_mb")
      start "ps-$i" "$bin/ember-ps" --data_dir="$run_dir/data/ps-$i" --port=0 --shard_id="$i" \
        --coordinator="$coordinator" --metrics_port=0 --admin_token_file="$run_dir/admin_token" \
        $(tls_flags server) $(cluster_token_flag) "${extra[@]}" $ps_args
    done
    for ((i = 0; i < shards; i++)); do
      address="$(wait_for "ps-$i" "listening on")"
      metrics="$(wait_for "ps-$i" "metrics on")"
      echo "EMBER_PS_$i=$address" >>"$run_dir/cluster.env"
      echo "EMBER_PS_${i}_METRICS=$metrics" >>"$run_dir/cluster.env"
      echo "ps-$i on $address (metrics http://$metrics/metrics)"
    done
    ;;
  add-shard)
    [[ -n "$shard_id" ]] || die "add-shard needs --shard_id=N"
    add_shard "$shard_id"
    ;;
  stop-shard)
    [[ -n "$shard_id" ]] || die "stop-shard needs --shard_id=N"
    stop_shard "$shard_id"
    ;;
  serve)
    [[ -x "$bin/ember-serving" ]] || die "$bin/ember-serving not found: build first"
    [[ -f "$run_dir/cluster.env" ]] && alive coordinator || die "no cluster runs in $run_dir (cluster.sh up first)"
    [[ "$follower_id" =~ ^[0-9]+$ ]] || die "--follower_id must be a number"
    name="serving-$follower_id"
    alive "$name" && die "$name already runs"
    coordinator="$(grep '^EMBER_COORDINATOR=' "$run_dir/cluster.env" | cut -d= -f2)"
    # shellcheck disable=SC2086
    start "$name" "$bin/ember-serving" --coordinator="$coordinator" \
      --checkpoint_dir="$run_dir/checkpoints" --data_dir="$run_dir/data/$name" --port=@PORT@ \
      --metrics_port=0 --admin_token_file="$run_dir/admin_token" $(tls_flags server) $serving_args
    address="$(wait_for "$name" "listening on")"
    metrics="$(wait_for "$name" "metrics on")"
    echo "${address##*:}" >"$run_dir/$name.port"  # a restarted follower keeps its address
    echo "EMBER_SERVING_$follower_id=$address" >>"$run_dir/cluster.env"
    echo "EMBER_SERVING_${follower_id}_METRICS=$metrics" >>"$run_dir/cluster.env"
    grep -q '^EMBER_SERVING=' "$run_dir/cluster.env" || echo "EMBER_SERVING=$address" >>"$run_dir/cluster.env"
    echo "$name on $address (metrics http://$metrics/metrics; emberctl serving status --serving=$address)"
    ;;
  train)
    [[ -x "$bin/ember-worker" ]] || die "$bin/ember-worker not found: build first"
    [[ -f "$run_dir/cluster.env" ]] && alive coordinator || die "no cluster runs in $run_dir (cluster.sh up first)"
    coordinator="$(grep '^EMBER_COORDINATOR=' "$run_dir/cluster.env" | cut -d= -f2)"
    if [[ "$workers" == *:* ]]; then
      # Elastic: a fresh run id per run. `scale` starts more workers of it from
      # elastic.env (from this directory, with these binaries); workers that leave
      # exit 0.
      min_workers="${workers%:*}" max_workers="${workers#*:}" run_id="local-$(date +%s%N)"
      workdir="$PWD" bin="$(cd "$bin" && pwd)"
      declare -p run_id min_workers max_workers config worker_args coordinator workdir bin \
        >"$run_dir/elastic.env"
      shopt -s nullglob
      rm -f "$run_dir"/pids/worker-*.rc "$run_dir"/stopping-worker-*
      for ((n = 0; n < min_workers; n++)); do start_worker "$n"; done
      echo "training elastically, $min_workers to $max_workers workers (cluster.sh scale" \
        "--workers=N); progress: $run_dir/logs/worker-0.log (rank 0 while it runs)"
      # Read here, not in the background tail: a worker that fails at once has its
      # pid files removed by the loop below before a background expansion would run.
      logstart="$(cat "$run_dir/pids/worker-0.logstart")"
      supervisor0="$(cat "$run_dir/pids/worker-0.supervisor")"
      tail -c "+$logstart" -f "$run_dir/logs/worker-0.log" --pid="$supervisor0" &
      # Until every worker of the run ended, those `scale` started too (not children
      # of this shell: their supervisors leave pids/NAME.rc).
      while true; do
        waiting=0
        for sup in "$run_dir"/pids/worker-*.supervisor; do
          name="$(basename "$sup" .supervisor)"
          [[ -f "$run_dir/pids/$name.rc" ]] || ! kill -0 "$(cat "$sup")" 2>/dev/null || waiting=1
        done
        (( waiting )) || break
        sleep 0.5
      done
      wait
      failed=0
      for rcfile in "$run_dir"/pids/worker-*.rc; do
        name="$(basename "$rcfile" .rc)"
        (( $(cat "$rcfile") == 0 )) && continue
        failed=1
        echo "$name failed (status $(cat "$rcfile")); last lines of $run_dir/logs/$name.log:" >&2
        tail -5 "$run_dir/logs/$name.log" >&2
      done
      rm -f "$run_dir"/pids/worker-*.pid "$run_dir"/pids/worker-*.supervisor \
        "$run_dir"/stopping-worker-* "$run_dir/elastic.env"
      exit "$failed"
    fi
    # A fresh rendezvous generation per job, so a rerun never meets an old one.
    generation="$(date +%s%N)"
    for ((r = 0; r < workers; r++)); do
      # shellcheck disable=SC2086
      start "worker-$r" "$bin/ember-worker" --config="$config" --coordinator="$coordinator" \
        --rank="$r" --world_size="$workers" --generation="$generation" \
        --run_dir="$run_dir/job" $( ((r == 0)) && echo "--metrics_port=0" ) $(tls_flags client) \
        $(cluster_token_flag) $worker_args
    done
    echo "training with $workers worker(s); progress: $run_dir/logs/worker-0.log"
    # The log is appended to run after run: show this run's lines only. The pid files
    # are read here, not in the background tail: the loop below removes them as soon
    # as a worker that failed at once is reported.
    logstart="$(cat "$run_dir/pids/worker-0.logstart")"
    supervisor0="$(cat "$run_dir/pids/worker-0.supervisor")"
    tail -c "+$logstart" -f "$run_dir/logs/worker-0.log" --pid="$supervisor0" &
    tail_pid=$!
    failed=0
    for ((r = 0; r < workers; r++)); do
      if ! wait "$(cat "$run_dir/pids/worker-$r.supervisor")"; then
        failed=1
        echo "worker-$r failed; last lines of $run_dir/logs/worker-$r.log:" >&2
        tail -5 "$run_dir/logs/worker-$r.log" >&2
      fi
      rm -f "$run_dir/pids/worker-$r.pid" "$run_dir/pids/worker-$r.supervisor"
    done
    wait "$tail_pid" 2>/dev/null || true
    exit "$failed"
    ;;
  scale)
    [[ -f "$run_dir/cluster.env" ]] && alive coordinator || die "no cluster runs in $run_dir (cluster.sh up first)"
    shopt -s nullglob
    if [[ -n "$scale_shards" ]]; then scale_shards "$scale_shards"; fi
    if [[ -n "$scale_workers" ]]; then scale_workers "$scale_workers"; fi
    ;;
  status)
    [[ -f "$run_dir/cluster.env" ]] && cat "$run_dir/cluster.env"
    shopt -s nullglob
    grep -h "restarting" "$run_dir"/logs/*.log 2>/dev/null || true
    for pidfile in "$run_dir"/pids/*.pid; do
      name="$(basename "$pidfile" .pid)"
      if alive "$name"; then state=running; else state=dead; fi
      printf '%-12s pid %-8s %s\n' "$name" "$(cat "$pidfile")" "$state"
    done
    ;;
  down)
    shopt -s nullglob
    touch "$run_dir/stopping"  # supervisors exit instead of restarting
    for pidfile in "$run_dir"/pids/worker-*.pid; do stop "$(basename "$pidfile" .pid)"; done
    for pidfile in "$run_dir"/pids/serving-*.pid; do stop "$(basename "$pidfile" .pid)"; done
    for pidfile in "$run_dir"/pids/ps-*.pid; do stop "$(basename "$pidfile" .pid)"; done
    stop coordinator
    rm -f "$run_dir"/pids/*.supervisor "$run_dir"/pids/*.logstart "$run_dir"/pids/*.rc \
      "$run_dir/stopping" "$run_dir"/stopping-* "$run_dir/elastic.env"
    ;;
  *)
    echo "cluster.sh: unknown command $cmd" >&2; usage >&2; exit 2 ;;
esac
