#!/usr/bin/env bash
# Installs every Debian 12 package Ember needs to build, test and benchmark.
# Idempotent: packages already present are skipped; safe to run any number of times.
# Debian's package registry is used for packages; the npm registry only for the pinned
# packages of tests/deploy (package-lock.json), which checks the deploy/ manifests.
#
#   tools/install-deps.sh               # build, test (clang-14: tools/check-thread-safety.sh),
#                                       # quickstart
#   tools/install-deps.sh --with-torch  # accepted for old scripts: PyTorch is always installed
#   tools/install-deps.sh --with-fuzz   # also libFuzzer (clang-14's), for tools/fuzz.sh
#   EMBER_DEPS_NODE=0 tools/install-deps.sh  # without Node.js and tests/deploy's packages
#                                            # (the Docker build stages)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  librocksdb-dev libabsl-dev
  prometheus-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libgloo-dev libopenblas-dev zlib1g-dev
  redis-server libhiredis-dev prometheus openssl  # libhiredis-dev: ember-bench cluster's Redis client
  clang-format clang-14
  python3  # docs/EXPORT_FORMAT.md's example reader runs in the tests
  # The Python package (python/: the pybind11 module `ember._ember`) and its tests and
  # examples: PyTorch, NumPy and pytest, Debian's (use /usr/bin/python3).
  python3-dev pybind11-dev python3-torch python3-numpy python3-pytest python3-protobuf
)
case "${1:-}" in
  "") ;;
  --with-torch) ;;
  --with-fuzz) PACKAGES+=(libfuzzer-14-dev) ;;
  *) echo "usage: tools/install-deps.sh [--with-torch | --with-fuzz]" >&2; exit 2 ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
  # The Debian redis/prometheus packages start system services on install in some
  # environments; Ember's tests start their own instances on ephemeral ports.
fi

# Node.js and the npm packages of tests/deploy (node --test: kustomize renders, schema
# validation, alert rules, dashboard, Dockerfile lint). Debian's nodejs/npm when no
# node is installed; `npm ci` only when node_modules is missing or older than the lock.
if [ "${EMBER_DEPS_NODE:-1}" != 0 ]; then
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "install-deps: installing nodejs npm"
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q --no-install-recommends nodejs npm
  fi
  deploy_tests="$root/tests/deploy"
  if [ ! -f "$deploy_tests/node_modules/.package-lock.json" ] ||
     [ "$deploy_tests/package-lock.json" -nt "$deploy_tests/node_modules/.package-lock.json" ]; then
    echo "install-deps: npm ci --prefix tests/deploy"
    npm ci --prefix "$deploy_tests" --no-audit --no-fund
  fi
fi
echo "install-deps: done"
