#!/usr/bin/env bash
# Checks that every C++ and CUDA source of the repository is formatted as .clang-format
# says (clang-format 14, Debian's). Exits 1 naming each file that drifts, 0 when none does.
#
#   tools/check-format.sh          # check
#   tools/check-format.sh --fix    # reformat the drifting files in place
set -euo pipefail
cd "$(dirname "$0")/.."

fix=0
case "${1:-}" in
  "") ;;
  --fix) fix=1 ;;
  -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "usage: tools/check-format.sh [--fix]" >&2; exit 2 ;;
esac
command -v clang-format >/dev/null || { echo "check-format: clang-format not found (tools/install-deps.sh installs it)" >&2; exit 2; }

mapfile -t files < <(git ls-files '*.h' '*.cc' '*.cu' '*.cuh' | grep -v '^tests/fuzz/corpus/')
# One clang-format process for every file; a drifting file is named in its diagnostics.
mapfile -t drift < <(clang-format --dry-run "${files[@]}" 2>&1 \
  | sed -n -E 's/^([^:]+):[0-9]+:[0-9]+: (warning|error): code should be clang-formatted.*/\1/p' \
  | sort -u)
if [ ${#drift[@]} -eq 0 ]; then
  echo "check-format: ${#files[@]} files formatted as .clang-format says"
  exit 0
fi
if [ "$fix" = 1 ]; then
  clang-format -i "${drift[@]}"
  echo "check-format: reformatted ${#drift[@]} files"
  exit 0
fi
echo "check-format: ${#drift[@]} of ${#files[@]} files drift from .clang-format (tools/check-format.sh --fix):"
printf '  %s\n' "${drift[@]}"
exit 1
