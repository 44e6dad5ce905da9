#!/usr/bin/env bash
# End to end over mutual TLS, as a user runs it: deploy/local/cluster.sh up --tls
# (certificates from tools/gen-certs.sh), two training workers, a serving follower and
# emberctl, every channel with certificates. Asserts: the job trains and checkpoints,
# the follower catches up, the admin certificate runs emberctl while the workers'
# certificate and plaintext are refused, and the audit file names the certificates.
#
#   tests/tools/tls_cluster_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
# shellcheck source=tests/tools/cluster_test_lib.sh
. "$(dirname "$0")/cluster_test_lib.sh"
ctl() { "$build/bin/emberctl" --timeout_ms=5000 "$@"; }

"$build/bin/ember-datagen" --out="$work/data" --train_examples=20000 --test_examples=2000 \
  --users=2000 --items=1000 --shops=100 --categories=50 --train_files=2 >/dev/null
deploy/local/cluster.sh up --tls --run_dir="$cluster" --build_dir="$build" --shards=2 </dev/null
check "every server runs with mutual TLS" \
  bash -c "grep -l '(mutual TLS)' '$cluster'/logs/ps-*.log | wc -l | grep -qx 2 && \
           grep -q 'mutual TLS' '$cluster/logs/coordinator.log'"

deploy/local/cluster.sh train --run_dir="$cluster" --build_dir="$build" --workers=2 \
  --worker_args="--train=$work/data/train --test=$work/data/test --epochs=5 --max_steps=30 --checkpoint_every_steps=10" \
  </dev/null >"$work/train.log" 2>&1 || { tail -20 "$work/train.log"; }
check "the job trained 30 steps over TLS" grep -q '"steps": 30' "$cluster/job/result.json"

deploy/local/cluster.sh serve --run_dir="$cluster" --build_dir="$build" --follower_id=0 </dev/null >/dev/null
set -a; . "$cluster/cluster.env"; set +a
ready() {
  for _ in $(seq 100); do
    ctl serving status --json 2>/dev/null | grep -q '"ready":true' && return 0
    sleep 0.2
  done
  return 1
}
check "the follower bootstrapped and follows over TLS" ready
check "emberctl with the admin certificate" bash -c "'$build/bin/emberctl' status | grep -q 'shards 2 (2 alive)'"
check "emberctl with a worker certificate is refused" bash -c \
  "! EMBER_TLS_CERT='$cluster/certs/client.pem' EMBER_TLS_KEY='$cluster/certs/client.key' \
     EMBER_ADMIN_TOKEN_FILE= '$build/bin/emberctl' status 2>&1 | grep -q 'shards 2' && \
   EMBER_TLS_CERT='$cluster/certs/client.pem' EMBER_TLS_KEY='$cluster/certs/client.key' \
     EMBER_ADMIN_TOKEN_FILE= '$build/bin/emberctl' status 2>&1 | grep -q 'not an admin identity'"
check "plaintext emberctl is refused" bash -c \
  "EMBER_TLS_CA= EMBER_TLS_CERT= EMBER_TLS_KEY= '$build/bin/emberctl' --timeout_ms=2000 status 2>&1 \
     | grep -q 'UNAVAILABLE'"
# A plaintext worker of this TLS cluster says so and stops within its collective timeout.
plaintext_worker() {
  local start=$SECONDS out
  out="$(env -u EMBER_TLS_CA -u EMBER_TLS_CERT -u EMBER_TLS_KEY timeout 60 \
    "$build/bin/ember-worker" --config=configs/quickstart.pbtxt \
    --coordinator="$EMBER_COORDINATOR" --rank=0 --world_size=1 --generation=1 \
    --collective_timeout_ms=3000 --metrics_port=-1 --train="$work/data/train" \
    --run_dir="$work/plain" 2>&1)" && return 1
  (( SECONDS - start < 30 )) && grep -q 'if the cluster runs with mutual TLS' <<<"$out"
}
check "a plaintext worker is told about TLS and exits within its timeout" plaintext_worker
audited() {
  local registrations
  registrations="$(grep -c 'register_shard' "$cluster/audit.jsonl")"
  (( registrations >= 2 )) && grep -q 'cert=ember-server' "$cluster/audit.jsonl"
}
check "the audit file names the certificates" audited

# cluster.sh itself: a second run shows only its own worker lines, and one shard can
# be stopped (it stays down) and started again.
deploy/local/cluster.sh train --run_dir="$cluster" --build_dir="$build" --workers=2 \
  --worker_args="--train=$work/data/train --test=$work/data/test --epochs=5 --max_steps=10 --rows=continue" \
  </dev/null >"$work/train2.log" 2>&1 || { tail -20 "$work/train2.log"; }
check "a second train shows only its own run's lines" \
  bash -c "grep -c 'joining job' '$work/train2.log' | grep -qx 1"
deploy/local/cluster.sh stop-shard --run_dir="$cluster" --build_dir="$build" --shard_id=1 \
  </dev/null >/dev/null
stays_down() {
  sleep 2  # a supervisor would have restarted it within 0.5 s
  ! deploy/local/cluster.sh status --run_dir="$cluster" | grep -q '^ps-1 ' &&
    ! grep -q '^EMBER_PS_1=' "$cluster/cluster.env" &&
    ! pgrep -f -- "--data_dir=$cluster/data/ps-1 " >/dev/null
}
check "stop-shard stops one shard and it stays down" stays_down
deploy/local/cluster.sh add-shard --run_dir="$cluster" --build_dir="$build" --shard_id=1 \
  </dev/null >/dev/null
back() {
  for _ in $(seq 100); do
    ctl status 2>/dev/null | grep -q 'shards 2 (2 alive)' && break
    sleep 0.2
  done
  ctl status | grep -q 'shards 2 (2 alive)' && grep -c '^EMBER_PS_1=' "$cluster/cluster.env" | grep -qx 1
}
check "add-shard starts the stopped shard again" back

# The run directory again, after down: up reads this start's addresses, not the old logs'.
deploy/local/cluster.sh down --run_dir="$cluster" --build_dir="$build" >/dev/null </dev/null
old_coordinator="$EMBER_COORDINATOR"
deploy/local/cluster.sh up --tls --run_dir="$cluster" --build_dir="$build" --shards=2 \
  </dev/null >/dev/null
set -a; . "$cluster/cluster.env"; set +a
up_again() {
  [[ "$EMBER_COORDINATOR" != "$old_coordinator" ]] || return 1
  [[ "$(grep 'listening on' "$cluster/logs/coordinator.log" | tail -1 | awk '{print $NF}')" == \
     "$EMBER_COORDINATOR" ]] || return 1
  for _ in $(seq 100); do
    ctl status 2>/dev/null | grep -q 'shards 2 (2 alive)' && return 0
    sleep 0.2
  done
  return 1
}
check "up again in the same run directory names the new processes" up_again
echo "$passed passed, $failed failed"
(( failed == 0 ))
