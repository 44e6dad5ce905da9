#!/usr/bin/env bash
# Installs every Debian 12 package Ember needs to build, test and benchmark.
# Idempotent: packages already present are skipped; safe to run any number of times.
# Only Debian's package registry is used; nothing is downloaded from elsewhere.
#
#   tools/install-deps.sh               # build, test, quickstart
#   tools/install-deps.sh --with-torch  # also PyTorch, for `ember-bench training`
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  librocksdb-dev libabsl-dev
  prometheus-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libgloo-dev libopenblas-dev zlib1g-dev
  redis-server prometheus
  clang-format
)
case "${1:-}" in
  "") ;;
  --with-torch) PACKAGES+=(python3 python3-torch python3-numpy python3-protobuf) ;;
  *) echo "usage: tools/install-deps.sh [--with-torch]" >&2; exit 2 ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
# The Debian redis/prometheus packages start system services on install in some
# environments; Ember's tests start their own instances on ephemeral ports.
echo "install-deps: done"
