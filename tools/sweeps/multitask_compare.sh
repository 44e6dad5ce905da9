#!/usr/bin/env bash
# The multi-task comparison of docs/PERFORMANCE.md ("Multi-task heads"): on
# ember-datagen --conversions data (default sizes, seed SEED), one epoch of ember-worker
# (1 BSP worker, 1 PS shard, a fresh local cluster per run) of four models over the same
# columns, tables and features (configs/quickstart_cvr.pbtxt's):
#   click        configs/quickstart_cvr.pbtxt: the click model alone
#   cvr_only     the same with `converted` (click and conversion) as the LABEL: a
#                single-task model of the conversion label over every example
#   esmm         configs/quickstart_esmm.pbtxt: click + an ESMM_CTCVR head
#   independent  the same with an INDEPENDENT head on `converted`
# and prints one line per model: seed, model, click test AUC, conversion test AUC (the
# LABEL's for cvr_only, the task's for the two-task models), the CTCVR oracle AUC.
#
#   tools/sweeps/multitask_compare.sh [SEED] [WORK_DIR]   # defaults 1, /tmp/ember-multitask
set -euo pipefail
cd "$(dirname "$0")/../.."
SEED=${1:-1}
W=${2:-/tmp/ember-multitask}
BUILD_DIR="${EMBER_BUILD_DIR:-build}"
D=$W/data-$SEED
mkdir -p "$W"
[[ -f $D/oracle.json ]] || "$BUILD_DIR/bin/ember-datagen" --out="$D" --conversions --seed="$SEED" >/dev/null
sed -e 's/columns { name: "label" kind: LABEL }/columns { name: "label" kind: IGNORE }/' \
  -e 's/columns { name: "converted" kind: EVAL }/columns { name: "converted" kind: LABEL }/' \
  -e 's/^  true_prob_column: "true_prob"$//' -e 's/^name: "quickstart_cvr"/name: "cvr_only"/' \
  configs/quickstart_cvr.pbtxt > "$W/cvr_only.pbtxt"
sed -e 's/kind: ESMM_CTCVR/kind: INDEPENDENT/' -e 's/^    true_prob_column: "true_cvr_prob"$//' \
  -e 's/^name: "quickstart_esmm"/name: "mt_independent"/' \
  configs/quickstart_esmm.pbtxt > "$W/independent.pbtxt"
oracle=$(grep -o '"ctcvr_test_auc": [0-9.]*' "$D/oracle.json" | cut -d' ' -f2)
for spec in click:configs/quickstart_cvr.pbtxt "cvr_only:$W/cvr_only.pbtxt" \
  esmm:configs/quickstart_esmm.pbtxt "independent:$W/independent.pbtxt"; do
  name=${spec%%:*}
  R=$W/run-$name-$SEED
  deploy/local/cluster.sh down --run_dir="$R" --build_dir="$BUILD_DIR" >/dev/null 2>&1 || true
  rm -rf "$R"
  deploy/local/cluster.sh up --run_dir="$R" --build_dir="$BUILD_DIR" --shards=1 >/dev/null
  deploy/local/cluster.sh train --run_dir="$R" --build_dir="$BUILD_DIR" --workers=1 \
    --config="${spec#*:}" --worker_args="--train=$D/train --test=$D/test" >"$R.log" 2>&1 ||
    echo "$name: training failed, see $R.log" >&2
  deploy/local/cluster.sh down --run_dir="$R" --build_dir="$BUILD_DIR" >/dev/null 2>&1 || true
  json=$(cat "$R/job/result.json")
  auc=$(grep -o '^  "test_auc": [0-9.]*' <<<"$json" | cut -d' ' -f4)
  task=$(grep -o '"ctcvr": {[^}]*}' <<<"$json" | grep -o '"test_auc": [0-9.]*' | cut -d' ' -f2 || true)
  case $name in
    click) echo "$SEED $name click_auc=$auc conversion_auc=- ctcvr_oracle=$oracle" ;;
    cvr_only) echo "$SEED $name click_auc=- conversion_auc=$auc ctcvr_oracle=$oracle" ;;
    *) echo "$SEED $name click_auc=$auc conversion_auc=$task ctcvr_oracle=$oracle" ;;
  esac
done
