#!/usr/bin/env bash
# The feature-transforms measurement of docs/PERFORMANCE.md ("Feature transforms"): test
# AUC after one epoch of configs/criteo.pbtxt and of variants that transform Criteo's
# integer columns (heavy-tailed counts) or cross two categorical columns, on
# tools/criteo_like/gen.py data (300k rows; 1 BSP worker, 2 shards, a fresh local cluster
# per run), and of configs/quickstart.pbtxt and variants on ember-datagen's default data
# (1M rows, run/quickstart/data as tools/quickstart.sh makes it). Prints "variant auc"
# lines. Needs a build (build/bin) and python3.
#
#   tools/criteo_like/transforms_sweep.sh [VARIANTS]   # default: every variant below
#
# Variants (I1..I13 are LOG1P DENSE columns in configs/criteo.pbtxt):
#   base          configs/criteo.pbtxt as it is
#   standardize   I1..I13 LOG1P, then standardized (mean and std from the data)
#   raw_clip_std  I1..I13 without LOG1P, clipped to [0, 200], then standardized
#   bucketize     I1..I13 BUCKETIZED into 32 quantile buckets from the data, each a
#                 feature with its own table (no dense column left: the tower is
#                 the pooled features only)
#   cross         base plus a C1 x C4 cross as a feature with its own table
# and on the quickstart data (whose planted truth has a price term relative to the item's
# category, a per-category price level: a price x category interaction):
#   q_base        configs/quickstart.pbtxt as it is
#   q_standardize price and session_depth LOG1P then standardized, user_age standardized
#   q_price_x_category  q_standardize plus "price" bucketized (source: "price", 32
#                 quantile buckets) and crossed with category_id, both features in a new
#                 table
#   q_user_x_item q_base plus a user_id x item_id cross in a new table
set -euo pipefail
cd "$(dirname "$0")/../.."
variants="${1:-base standardize raw_clip_std bucketize cross q_base q_standardize q_price_x_category q_user_x_item}"
work=run/transforms_sweep
mkdir -p "$work"
if [[ ! -d run/criteo/train ]]; then
  tools/criteo_like/gen.py 300000 30000 run/criteo >/dev/null
  mkdir -p run/criteo/train
  split -n l/4 -d run/criteo/train.txt run/criteo/train/part-
fi
if [[ "$variants" == *q_* && ! -f run/quickstart/data/oracle.json ]]; then
  build/bin/ember-datagen --out=run/quickstart/data >/dev/null
fi
# config VARIANT: the variant's config file, printed to stdout.
config() {
  python3 - "$@" <<'PY'
import os, sys
variant = sys.argv[1]
if variant.startswith("q_"):
    s = open("configs/quickstart.pbtxt").read()
    s = s.replace("../run/quickstart/data", os.path.abspath("run/quickstart/data"))
    opt = 'initializer { kind: UNIFORM scale: 0.05 } optimizer { kind: ADAGRAD learning_rate: 0.1 initial_accumulator: 0.000001 }'
    def sub(old, new):
        global s
        assert old in s, old
        s = s.replace(old, new)
    if variant in ("q_standardize", "q_price_x_category"):
        sub('name: "price" kind: DENSE transform: LOG1P }', 'name: "price" kind: DENSE transform: LOG1P standardize: true }')
        sub('name: "user_age" kind: DENSE }', 'name: "user_age" kind: DENSE standardize: true }')
        sub('name: "session_depth" kind: DENSE transform: LOG1P }', 'name: "session_depth" kind: DENSE transform: LOG1P standardize: true }')
    extra_cols, extra = "", ""
    if variant == "q_price_x_category":
        extra_cols = ('  columns { name: "price_bucket" source: "price" kind: BUCKETIZED quantiles: 32 }\n'
                      '  columns { name: "price_x_category" kind: CROSS cross_of: ["price_bucket", "category_id"] }\n')
        extra = (f'tables {{ name: "price" dim: 16 {opt} }}\n'
                 'features { column: "price_bucket" table: "price" }\n'
                 'features { column: "price_x_category" table: "price" }\n')
    if variant == "q_user_x_item":
        extra_cols = '  columns { name: "user_x_item" kind: CROSS cross_of: ["user_id", "item_id"] }\n'
        extra = (f'tables {{ name: "user_x_item" dim: 16 {opt} }}\n'
                 'features { column: "user_x_item" table: "user_x_item" }\n')
    sub('  columns { name: "cold_user" kind: EVAL }\n', '  columns { name: "cold_user" kind: EVAL }\n' + extra_cols)
    print(s + extra)
    sys.exit(0)
s = open("configs/criteo.pbtxt").read()
root = os.path.abspath("run/criteo")
s = s.replace('"../run/criteo/train"', f'"{root}/train"').replace('"../run/criteo/test.txt"', f'"{root}/test.txt"')
table = 'tables {{ name: "{}" dim: 16 optimizer {{ kind: ADAGRAD learning_rate: 0.1 initial_accumulator: 0 }} }}\n'
cols, extra = ['columns { name: "label" kind: LABEL }'], ""
for i in range(1, 14):
    if variant == "standardize":
        cols.append(f'columns {{ name: "I{i}" kind: DENSE transform: LOG1P standardize: true }}')
    elif variant == "raw_clip_std":
        cols.append(f'columns {{ name: "I{i}" kind: DENSE clip_min: 0 clip_max: 200 standardize: true }}')
    elif variant == "bucketize":
        cols.append(f'columns {{ name: "I{i}" kind: BUCKETIZED quantiles: 32 }}')
        extra += table.format(f"i{i}") + f'features {{ column: "I{i}" table: "i{i}" }}\n'
    else:
        cols.append(f'columns {{ name: "I{i}" kind: DENSE transform: LOG1P }}')
for j in range(1, 27):
    cols.append(f'columns {{ name: "C{j}" kind: CATEGORICAL id_encoding: HEX }}')
if variant == "cross":
    cols.append('columns { name: "C1_x_C4" kind: CROSS cross_of: ["C1", "C4"] }')
    extra += table.format("c1x4") + 'features { column: "C1_x_C4" table: "c1x4" }\n'
if variant != "base":
    s = s.replace(f'test_path: "{root}/test.txt"\n', f'test_path: "{root}/test.txt"\n  ' + "\n  ".join(cols) + "\n")
print(s + extra)
PY
}
for variant in $variants; do
  cfg="$work/$variant.pbtxt"
  config "$variant" >"$cfg"
  rm -rf "$work/cluster"
  deploy/local/cluster.sh up --run_dir="$work/cluster" </dev/null >/dev/null
  start=$(date +%s)
  auc="$(deploy/local/cluster.sh train --run_dir="$work/cluster" --workers=1 --config="$cfg" \
           </dev/null 2>&1 | tee "$work/$variant.log" |
         grep 'eval at' | tail -1 | sed -E 's/.*test AUC ([0-9.]+).*/\1/')"
  deploy/local/cluster.sh down --run_dir="$work/cluster" </dev/null >/dev/null
  echo "$variant ${auc:-failed} ($(( $(date +%s) - start ))s)"
done
