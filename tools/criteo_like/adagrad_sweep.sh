#!/usr/bin/env bash
# The Adagrad sweep of docs/PERFORMANCE.md ("A dataset Ember did not generate"): test AUC
# after one epoch (2 BSP workers, 2 shards, a fresh local cluster per run) for every
# table's Adagrad learning rate in LRS and initial accumulator in ACCS, on
#   A: tools/criteo_like/gen.py data (300k rows) with tools/criteo_like/criteo_like.pbtxt;
#   B: ember-datagen --zipf=1.3 --seed=23 (400k rows) with configs/quickstart.pbtxt's
#      features and tower, every table on the default initializer.
# Prints "dataset lr accumulator auc" lines. Needs a build (build/bin) and python3.
#
#   tools/criteo_like/adagrad_sweep.sh [LRS] [ACCS]   # default "0.05 0.1 0.2" "0.1 0.01 0.001 0.000001 0"
set -euo pipefail
cd "$(dirname "$0")/../.."
lrs="${1:-0.05 0.1 0.2}" accs="${2:-0.1 0.01 0.001 0.000001 0}"
work=run/adagrad_sweep
mkdir -p "$work"
if [[ ! -d run/criteo_like/train ]]; then
  tools/criteo_like/gen.py 300000 30000 run/criteo_like >/dev/null
  mkdir -p run/criteo_like/train
  split -n l/4 -d run/criteo_like/train.txt run/criteo_like/train/part-
fi
if [[ ! -f "$work/b/oracle.json" ]]; then
  build/bin/ember-datagen --out="$work/b" --train_examples=400000 --test_examples=40000 \
    --train_files=4 --users=20000 --items=10000 --zipf=1.3 --seed=23 >/dev/null
fi
# config DATASET LR ACC: the variant's config file, printed to stdout.
config() {
  python3 - "$@" <<'PY'
import re, sys
dataset, lr, acc = sys.argv[1:]
opt = f"optimizer {{ kind: ADAGRAD learning_rate: {lr} initial_accumulator: {acc} }}"
if dataset == "A":
    s = open("tools/criteo_like/criteo_like.pbtxt").read()
    s = re.sub(r"(?<!dense_)optimizer \{[^}]*\}", opt, s)  # the tables', not the tower's
else:
    s = open("configs/quickstart.pbtxt").read()
    s = re.sub(r"  initializer \{[^}]*\}\n", "", s)
    s = re.sub(r"  optimizer \{[^}]*\}\n", "  " + opt + "\n", s)
    s = s.replace("../run/quickstart/data", "../../run/adagrad_sweep/b")
print(s)
PY
}
for dataset in A B; do
  for lr in $lrs; do
    for acc in $accs; do
      cfg="tools/criteo_like/.sweep-$dataset.pbtxt"
      config "$dataset" "$lr" "$acc" >"$cfg"
      rm -rf "$work/cluster"
      deploy/local/cluster.sh up --run_dir="$work/cluster" </dev/null >/dev/null
      auc="$(deploy/local/cluster.sh train --run_dir="$work/cluster" --workers=2 --config="$cfg" \
               --worker_args="--epochs=1 --eval_every_steps=0" </dev/null 2>&1 |
             grep 'eval at' | tail -1 | sed -E 's/.*test AUC ([0-9.]+).*/\1/')"
      deploy/local/cluster.sh down --run_dir="$work/cluster" </dev/null >/dev/null
      rm -f "$cfg"
      echo "$dataset $lr $acc ${auc:-failed}"
    done
  done
done
