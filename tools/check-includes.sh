#!/usr/bin/env bash
# The layering rule of docs/ARCHITECTURE.md ("Layout"), checked with grep. Exits 1
# naming each forbidden include, 0 when the tree keeps the rule:
#   - common/ includes nothing of server/, worker/ or tools/;
#   - server/ and worker/ never include each other, nor tools/;
#   - python/ (the Python package's native module, a front end of the worker's runtime)
#     includes common/ and worker/, never server/ or tools/;
#   - server/ps, server/coordinator and server/serving never include each other
#     (what two of them use lives in server/shared/ or server/store/);
#   - nothing outside server/store/ (and its tests) includes server/store/internal/;
#   - nothing outside worker/dense/ includes worker/dense/cuda/;
#   - nothing outside tests/ includes tests/;
#   - no file cites a path outside the repository (the team folder beside it);
#   - no test names a fixed directory under ::testing::TempDir() (parallel cases of a
#     suite would share it: tests/support/scratch_dir.h).
#
#   tools/check-includes.sh
set -euo pipefail
cd "$(dirname "$0")/.."

failures=0
# forbid LABEL WHERE PATTERN [EXCEPT]: every #include of PATTERN in the files under
# WHERE (a git pathspec) is a failure, unless the including file matches EXCEPT.
forbid() {
  local label="$1" where="$2" pattern="$3" except="${4:-^$}"
  local hits
  hits=$(git grep -n -E "^#include \"($pattern)" -- "$where" ':!*.pb.h' ':!*.pb.cc' \
    | grep -v -E "$except" || true)
  if [ -n "$hits" ]; then
    echo "check-includes: $label:"
    echo "$hits" | sed 's/^/  /'
    failures=$((failures + 1))
  fi
}

forbid "common/ includes a layer above it" 'common/*' 'server/|worker/|tools/'
forbid "server/ includes worker/ or tools/" 'server/*' 'worker/|tools/'
forbid "worker/ includes server/ or tools/" 'worker/*' 'server/|tools/|python/'
forbid "python/ includes server/ or tools/" 'python/*' 'server/|tools/'
forbid "common/ or server/ includes python/" ':(glob)**' 'python/' '^(python/|tests/)'
for binary in ps coordinator serving; do
  others=$(echo "ps coordinator serving" | tr ' ' '\n' | grep -v "^$binary$" | paste -sd'|')
  forbid "server/$binary includes another binary's folder (move the piece to server/shared/)" \
    "server/$binary/*" "server/($others)/"
done
forbid "the storage engine's internals included from outside server/store/" \
  ':(glob)**' 'server/store/internal/' '^(server/store/|tests/server/store/)'
forbid "the CUDA tower's internals included from outside worker/dense/" \
  ':(glob)**' 'worker/dense/cuda/' '^(worker/dense/|tests/worker/dense/)'
forbid "product code includes tests/" ':(glob)**' 'tests/' '^tests/'

outside=$(git grep -n -I -E '\.\./shared/' -- ':!tools/check-includes.sh' || true)
if [ -n "$outside" ]; then
  echo "check-includes: files cite a path outside the repository:"
  echo "$outside" | sed 's/^/  /'
  failures=$((failures + 1))
fi

fixed_tmp=$(git grep -n -E 'TempDir\(\) \+ "/[^"]*"' -- 'tests/*' | grep -v 'XXXXXX' || true)
if [ -n "$fixed_tmp" ]; then
  echo "check-includes: tests use a fixed directory under TempDir() (use ScratchDir):"
  echo "$fixed_tmp" | sed 's/^/  /'
  failures=$((failures + 1))
fi

if [ "$failures" -ne 0 ]; then
  echo "check-includes: $failures rule(s) broken (docs/ARCHITECTURE.md, \"Layout\")"
  exit 1
fi
echo "check-includes: the layering rule holds"
