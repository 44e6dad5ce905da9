#!/usr/bin/env bash
# Installs dependencies, builds Ember and runs the main job.
#
# Until the training workers land (issue "Training"), the main job is the storage
# benchmark at a small size: it creates a shard store on real RocksDB, fills it, and
# prints pull/push rates against a raw-memory baseline measured in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install-deps.sh
BUILD_DIR="${EMBER_BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD_DIR" -j "$(nproc)" --target ember-bench
"$BUILD_DIR/bin/ember-bench" storage --rows_small=200000 --rows_large=1000000 "$@"
