# shellcheck shell=bash
# Sourced by the script tests that drive deploy/local/cluster.sh (tls_cluster_test.sh,
# elastic_cluster_test.sh), called as `TEST.sh SOURCE_DIR BUILD_DIR`: sets src, build,
# work (a scratch directory; the cluster of `cluster` in it is stopped and the directory
# removed on exit), passed and failed; cds to src; defines check NAME COMMAND...
src="$(cd "$1" && pwd)"
build="$(cd "$2" && pwd)"
cd "$src" || exit 1
work="$(mktemp -d "${TMPDIR:-/tmp}/$(basename "$0" .sh).XXXXXX")"
cluster="$work/cluster"
passed=0 failed=0
cleanup() {
  deploy/local/cluster.sh down --run_dir="$cluster" --build_dir="$build" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
check() {  # NAME COMMAND...: runs COMMAND, counts the outcome
  local name="$1"; shift
  if "$@"; then passed=$((passed + 1)); echo "ok   $name"
  else failed=$((failed + 1)); echo "FAIL $name"; fi
}
# eventually COMMAND...: COMMAND succeeds within 20 s (tried every 0.2 s).
eventually() {
  for _ in $(seq 100); do "$@" 2>/dev/null && return 0; sleep 0.2; done
  return 1
}
