#!/usr/bin/env bash
# Clang's thread-safety analysis over Ember's product sources: every ABSL_GUARDED_BY,
# ABSL_EXCLUSIVE_LOCKS_REQUIRED, ABSL_LOCKS_EXCLUDED, ... is checked against the code that
# reads the member or calls the function (g++ ignores them). For each .cc under common/,
# server/, worker/ and tools/ in BUILD_DIR/compile_commands.json (not tests/, not the
# generated *.pb.cc, not .cu), or only the SOURCEs named, runs clang++-14 -fsyntax-only
# with that file's include directories and defines, -Wthread-safety -Wthread-safety-beta
# as errors and no other warning, files in parallel. Prints each finding once (a header's
# shows up in every file that includes it) as file:line with its notes, then one summary
# line: files checked, warnings, seconds. The generated protobuf headers live in
# BUILD_DIR: build (or at least `ninja -C BUILD_DIR ember_proto`) first. About 500 s of
# CPU for the 147 sources (4 minutes on 2 idle cores).
#
# Exit status: 0 when clang finds nothing; 1 on any thread-safety warning, or when clang
# cannot compile a file (printed as such: the analysis did not run there); 2 on a usage
# error (no compile_commands.json, no generated headers, no clang).
#
#   tools/check-thread-safety.sh build
#   tools/check-thread-safety.sh build server/ps/ps_service.cc   # only these sources
#   EMBER_CLANG=clang++-15 tools/check-thread-safety.sh build   # another clang
#   EMBER_JOBS=1 tools/check-thread-safety.sh build             # parallelism (default nproc)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
}
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
esac
if [ $# -lt 1 ] || [ "${1#-}" != "$1" ]; then
  echo "usage: tools/check-thread-safety.sh BUILD_DIR [SOURCE...]   (--help for more)" >&2
  exit 2
fi
build_dir="$(cd "$1" 2>/dev/null && pwd)" || {
  echo "check-thread-safety: no build directory $1" >&2
  exit 2
}
db="$build_dir/compile_commands.json"
if [ ! -f "$db" ]; then
  echo "check-thread-safety: no $db (configure with CMake first)" >&2
  exit 2
fi
if [ -z "$(find "$build_dir/proto" -name '*.pb.h' -print -quit 2>/dev/null)" ]; then
  echo "check-thread-safety: no generated protobuf headers under $build_dir/proto" \
    "(run \`ninja -C $1 ember_proto\` or the build first)" >&2
  exit 2
fi
clang="${EMBER_CLANG:-clang++-14}"
if ! command -v "$clang" >/dev/null 2>&1; then
  echo "check-thread-safety: $clang not found (tools/install-deps.sh installs clang-14)" >&2
  exit 2
fi
jobs="${EMBER_JOBS:-$(nproc)}"
shift
only="$*"
start=$(date +%s)

tmp="$(mktemp -d "${TMPDIR:-/tmp}/ember-tsa.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

# The analysis: every thread-safety group clang has (beta included), nothing else.
analysis="-Wno-everything -Wthread-safety -Wthread-safety-beta -Werror=thread-safety"
analysis+=" -Werror=thread-safety-beta"

# One script per product source, holding its compile command rewritten for clang.
# compile_commands.json as CMake writes it: one "directory", "command", "file" line per
# entry, the command a shell-quoted string with JSON's \\ and \" escapes. The rewrite
# keeps the command's -I/-isystem/-D/-std/-f flags and drops the compiler (and a
# launcher before it), -o FILE, -c, the optimisation/debug flags and every -W flag.
awk -v root="$root/" -v out="$tmp" -v clang="$clang" -v only="$only" -v analysis="$analysis" '
  BEGIN { n = split(only, o, " "); for (i = 1; i <= n; i++) wanted[o[i]] = 1 }
  function unjson(s,   r, i, c) {
    r = ""
    for (i = 1; i <= length(s); i++) {
      c = substr(s, i, 1)
      if (c == "\\") { i++; c = substr(s, i, 1) }
      r = r c
    }
    return r
  }
  function field(line) {
    sub(/^[ \t]*"[a-z]+": "/, "", line)
    sub(/",?[ \t]*$/, "", line)
    return unjson(line)
  }
  /^[ \t]*"directory": / { dir = field($0) }
  /^[ \t]*"command": /   { cmd = field($0) }
  /^[ \t]*"file": / {
    file = field($0)
    if (index(file, root) != 1) next
    rel = substr(file, length(root) + 1)
    if (rel !~ /^(common|server|worker|tools)\/.*\.cc$/ || rel ~ /\.pb\.cc$/) next
    if (rel in seen || (only != "" && !(rel in wanted))) next
    seen[rel] = 1
    n = split(cmd, t, /[ \t]+/)
    first = 2
    if (t[1] ~ /(^|\/)ccache$/) first = 3
    args = ""
    for (i = first; i <= n; i++) {
      if (t[i] == "-o") { i++; continue }
      if (t[i] == "-c" || t[i] ~ /^-(W|O|g)/) continue
      args = args " " t[i]
    }
    count++
    script = sprintf("%s/%04d.sh", out, count)
    printf "cd \"%s\" || exit 99\nexec %s -fsyntax-only %s -ferror-limit=0 -fno-caret-diagnostics%s\n", dir, clang, analysis, args > script
    close(script)
    print rel > (out "/files")
  }
' "$db"

if [ ! -s "$tmp/files" ]; then
  echo "check-thread-safety: no product sources${only:+ among $only} in $db" >&2
  exit 2
fi
files=$(wc -l <"$tmp/files")

# Each file: its diagnostics in NNNN.out, clang's exit status in NNNN.rc.
# The CPU seconds clang used (user + system), for the summary.
TIMEFORMAT='%U %S'
# shellcheck disable=SC2016  # the inner script's $1 is bash -c's, not this shell's
{
  time find "$tmp" -maxdepth 1 -name '[0-9]*.sh' -print0 | sort -z |
    xargs -0 -n 1 -P "$jobs" bash -c '
      bash "$1" >"${1%.sh}.out" 2>&1 && rc=0 || rc=$?
      echo "$rc" >"${1%.sh}.rc"' _
} 2>"$tmp/cpu"
cpu=$(awk '{ printf "%d", $1 + $2 }' "$tmp/cpu")

# A header's finding shows up in every file that includes it: print and count it once.
findings="$tmp/findings"
broken=()
: >"$findings"
i=0
while IFS= read -r rel; do
  i=$((i + 1))
  base=$(printf '%s/%04d' "$tmp" "$i")
  rc=$(cat "$base.rc")
  if grep -q -- '-Wthread-safety' "$base.out"; then
    # A finding and the notes after it, one block per finding, paths relative to root.
    awk -v root="$root/" '
      { gsub(root, "") }
      /: error: .*\[-Werror,-Wthread-safety/ { if (b != "") print b "\n"; b = $0; next }
      /: note: / && b != "" { b = b "\n    " $0; next }
      /: (error|warning): / { if (b != "") print b "\n"; b = ""; next }
      END { if (b != "") print b "\n" }' "$base.out" >>"$findings"
  fi
  if [ "$rc" -ne 0 ] && grep -v -- '-Wthread-safety' "$base.out" | grep -q ': error: '; then
    broken+=("$rel")
    echo "check-thread-safety: clang cannot compile $rel (the analysis did not run there):"
    grep -v -- '-Wthread-safety' "$base.out" | grep ': error: ' | head -5 | sed "s|$root/||;s/^/  /"
  elif [ "$rc" -ne 0 ] && ! grep -q -- '-Wthread-safety' "$base.out"; then
    broken+=("$rel")
    echo "check-thread-safety: clang failed on $rel (exit $rc):"
    head -5 "$base.out" | sed 's/^/  /'
  fi
done <"$tmp/files"

# Unique findings: blocks separated by blank lines; the first line names file:line.
warnings=0
if [ -s "$findings" ]; then
  awk 'BEGIN { RS = ""; ORS = "\n\n" } !seen[$0]++' "$findings" >"$tmp/unique"
  warnings=$(awk 'BEGIN { RS = "" } END { print NR }' "$tmp/unique")
  sed '/^$/d' "$tmp/unique"
fi
seconds=$(($(date +%s) - start))
echo "check-thread-safety: $files files checked, $warnings warnings," \
  "${#broken[@]} files clang could not compile, ${seconds}s (${cpu}s of CPU, $jobs jobs," \
  "$clang)"
if [ "$warnings" -ne 0 ] || [ "${#broken[@]}" -ne 0 ]; then
  exit 1
fi
