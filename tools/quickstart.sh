#!/usr/bin/env bash
# The README's first command: installs the dependencies, builds Ember, generates a
# synthetic e-commerce click dataset (about 1M training examples with a planted
# truth), starts a local cluster (coordinator + 2 PS shards, mutual TLS on every
# channel with a test CA from tools/gen-certs.sh), trains the quickstart
# model (configs/quickstart.pbtxt) with 2 workers, prints the test AUC next to the
# oracle AUC (checkpointing every 200 steps), starts a serving follower (ember-serving)
# from the job's last checkpoint, shows its status, a lookup and the click probabilities
# of three test rows, and stops the cluster.
#
#   tools/quickstart.sh                    # everything
#   tools/quickstart.sh --max_steps=200    # extra flags go to every ember-worker
#
# Everything lands under run/quickstart/: data/, cluster/logs/, cluster/job/
# (result.json, metrics.tsv, training.svg).
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install-deps.sh
BUILD_DIR="${EMBER_BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" \
  --target ember-coordinator ember-ps ember-worker ember-datagen ember-serving emberctl \
  ember_python

RUN=run/quickstart
if [[ ! -f "$RUN/data/oracle.json" ]]; then
  echo "== generating the dataset into $RUN/data"
  "$BUILD_DIR/bin/ember-datagen" --out="$RUN/data"
fi

CLUSTER="$RUN/cluster"
deploy/local/cluster.sh down --run_dir="$CLUSTER" >/dev/null
rm -rf "$CLUSTER"
trap 'deploy/local/cluster.sh down --run_dir="$CLUSTER" --build_dir="$BUILD_DIR"' EXIT

echo "== starting a local cluster (coordinator + 2 PS shards, mutual TLS) in $CLUSTER"
deploy/local/cluster.sh up --run_dir="$CLUSTER" --build_dir="$BUILD_DIR" --shards=2 --tls
echo "== training configs/quickstart.pbtxt with 2 workers"
deploy/local/cluster.sh train --run_dir="$CLUSTER" --build_dir="$BUILD_DIR" --workers=2 \
  --config=configs/quickstart.pbtxt --worker_args="--checkpoint_every_steps=200 $*"

result="$CLUSTER/job/result.json"
field() { grep -o "\"$1\": [^,]*" "$result" | head -1 | cut -d' ' -f2 | tr -d '"'; }
echo
echo "== result ($result)"
printf '  test AUC        %s   (oracle AUC %s, gap %s)\n' \
  "$(field test_auc)" "$(field oracle_auc)" "$(field oracle_auc_gap)"
printf '  test logloss    %s   (oracle %s)\n' "$(field test_logloss)" "$(field oracle_logloss)"
printf '  AUC hot/warm/cold items  %s / %s / %s;  cold-start users %s\n' \
  "$(field auc_hot)" "$(field auc_warm)" "$(field auc_cold)" "$(field auc_cold_users)"
printf '  %s steps, %s examples/s, model checksum %s\n' \
  "$(field steps)" "$(field examples_per_sec)" "$(field model_checksum)"
echo "  plot: $CLUSTER/job/training.svg   curves: $CLUSTER/job/metrics.tsv"
echo "  logs: $CLUSTER/logs/   (PS metrics endpoints were printed above)"

echo
echo "== serving: a follower bootstraps from the last checkpoint and follows both shards"
deploy/local/cluster.sh serve --run_dir="$CLUSTER" --build_dir="$BUILD_DIR" --follower_id=0
set -a; . "$CLUSTER/cluster.env"; set +a
for _ in $(seq 50); do
  "$BUILD_DIR/bin/emberctl" serving status --json 2>/dev/null | grep -q '"ready":true' && break
  sleep 0.2
done
"$BUILD_DIR/bin/emberctl" serving status
"$BUILD_DIR/bin/emberctl" serving lookup --table=item --ids=1,2,3
echo "  click probabilities of the first 3 test rows (emberctl serving predict):"
head -n 4 "$RUN/data/test/part-00000.tsv" | "$BUILD_DIR/bin/emberctl" serving predict --header
echo "  (docs/OPERATIONS.md, \"Serving\": emberctl serving versions|pin|checksum, emberctl export)"

echo
echo "== skew: the hot set the shards reported during training, and the per-shard load"
"$BUILD_DIR/bin/emberctl" hotkeys --top=3
echo "  (docs/OPERATIONS.md, \"Skew: hot keys and cold IDs\": --hot_replicas, cold-ID options)"

echo
echo "== security: every channel used mutual TLS; admin changes are audited"
"$BUILD_DIR/bin/emberctl" audit --limit=5
echo "  (docs/OPERATIONS.md, \"Security\": a worker's certificate cannot make admin calls; $CLUSTER/audit.jsonl)"

echo
echo "== Python and PyTorch: the same model in PyTorch on ember.torch (README, docs/PYTHON.md)"
echo "  export PYTHONPATH=\$PWD/$BUILD_DIR/python"
echo "  /usr/bin/python3 examples/dlrm.py      # or examples/din.py: target attention"
