#!/usr/bin/env bash
# The GPU check of Ember's CUDA workers: one script that runs on a machine with an
# NVIDIA GPU and writes its results to one folder.
#
#   tools/gpu-check.sh [--bin_dir=DIR] [--out=DIR] [--quick] [--collect=DIR]
#       runs on the GPU machine, from the repository root:
#        1. the device: nvidia-smi, and what the CUDA runtime sees;
#        2. the CUDA tests, none of which may skip for want of a GPU (those that need two
#           GPUs skip on a one-GPU machine, and the summary says so):
#           cuda_status_test (which errors lose the context), cuda_dense_test (every
#           layer against the CPU tower and a rounded CPU reference, a 30-step loss
#           curve per precision, the optimizers bitwise), cuda_tower_faults_test (a CPU
#           checkpoint restored into a CUDA tower, a tower used from another thread, an
#           illegal-address kernel that must make the process exit 75),
#           nccl_collective_test (one rank; a peer that never comes; two ranks and a
#           dead peer with two GPUs); then dense_device_test (host-side);
#        3. `ember-bench dense`: the quickstart tower's step time, examples/s and
#           TFLOP/s at batch 4096 and 65536, CPU vs CUDA fp32/tf32/bf16;
#        4. end to end: the quickstart job (1 worker, 1 PS on this machine, batch 4096)
#           with --device=cpu, --device=cuda, and --device=cuda again: examples/s, loss
#           and test AUC of each; FAIL unless the CUDA run's final train loss is within
#           2% of the CPU run's and its test AUC within 0.005, and the second CUDA run
#           repeats the first one's dense and sparse checksums bit for bit.
#       Results: OUT/gpu-check.txt (summary), OUT/*.json and OUT/*.log. Exit 1 if any
#       check failed. Binaries come from --bin_dir (default: build/bin, else the
#       bundle below); with neither, it builds with cmake (needs tools/install-deps.sh).
#       --quick: the lease-sized run (estimated at about 3 minutes on an H100 with 16
#       cores, plus the machine's start; not yet run on one): shorter benchmark, 60
#       training steps (a dry run here without a GPU finished within 45 s). Each test binary is
#       bounded by `timeout` (a hang fails it instead of eating the lease).
#       --collect=DIR: also copies gpu-check.txt and one gpu-check-logs.tar.gz of OUT
#       into DIR (two files: what a device tool that returns few files can bring back).
#
#   tools/gpu-check.sh --bundle=DIR
#       runs on a build machine without a GPU: builds the binaries the check needs and
#       copies them, stripped, with the shared libraries they need that a CUDA machine
#       may lack (gRPC, RocksDB, Abseil, OpenBLAS, ..., and the CUDA runtime they were
#       built with; not the driver, cuBLAS or NCCL), into DIR/bin and DIR/lib, packed as
#       DIR.tar.xz, and says its size against the 64 MiB that a device tool carries with
#       the working tree. With --bundle=run/gpu-bundle the run above finds
#       run/gpu-bundle.tar.xz and unpacks it (with python3: no xz binary needed).
#
# What the GPU machine needs (checked first; exit 2 naming what is missing): bash, an
# NVIDIA driver for CUDA >= the toolkit the binaries were built with (13.0 here),
# nvidia-smi, libcublas.so.13 (libcublas.so.12 for a CUDA 12 build) and libnccl.so.2
# (the CUDA toolkit's, or the nvidia-cublas / nvidia-nccl-cu13 Python wheels under
# /opt or /usr), glibc >= 2.36 and a libstdc++ at least GCC 12's (Debian 12, where the
# bundle is built), python3 (to unpack the bundle), timeout and awk.
#
# On a lent device machine (one call, about 5 minutes of device time), from the build
# machine: `tools/gpu-check.sh --bundle=run/gpu-bundle`, then run there
#   tools/gpu-check.sh --quick --out=/tmp/gc --collect=$OUT
# carrying run/gpu-bundle.tar.xz, with a timeout of about 420 s.
#
# Exit status: 0 all passed, 1 a check failed, 2 usage or setup error.
set -uo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,55p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "gpu-check: $*" >&2; exit 2; }

bin_dir="" out_dir="run/gpu-check" bundle="" quick=0 collect=""
for arg in "$@"; do
  case "$arg" in
    --bin_dir=*) bin_dir="${arg#*=}" ;;
    --out=*) out_dir="${arg#*=}" ;;
    --bundle=*) bundle="${arg#*=}" ;;
    --collect=*) collect="${arg#*=}" ;;
    --quick) quick=1 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument $arg" ;;
  esac
done

tests=(cuda_status_test cuda_dense_test cuda_tower_faults_test nccl_collective_test
  dense_device_test)
targets=("${tests[@]}" ember-bench ember-worker ember-ps ember-coordinator ember-datagen)
# What a device tool carries: the working tree and the bundle together.
carry_limit_mib=64

# ---- Build machine: package the binaries and their non-CUDA libraries.
if [[ -n "$bundle" ]]; then
  build_dir="${EMBER_BUILD_DIR:-build}"
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null || die "cmake failed"
  cmake --build "$build_dir" --target "${targets[@]}" || die "build failed"
  [[ -x "$build_dir/bin/cuda_dense_test" ]] || die "no cuda_dense_test: was nvcc found by cmake?"
  rm -rf "$bundle" "$bundle.tar.xz" && mkdir -p "$bundle/bin" "$bundle/lib"
  for t in "${targets[@]}"; do
    cp "$build_dir/bin/$t" "$bundle/bin/" && strip --strip-unneeded "$bundle/bin/$t"
  done
  # Tests that start ember-coordinator find it at the absolute path they were built
  # with; the GPU run links that path to the bundle's bin/.
  (cd "$build_dir/bin" && pwd) >"$bundle/build-bin-dir"
  # Everything ldd resolves except the C runtime and what the GPU machine brings.
  for t in "${targets[@]}"; do ldd "$bundle/bin/$t"; done | awk '$3 ~ /^\// {print $3}' | sort -u |
    grep -v -E '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libstdc\+\+|libgcc_s)\.so' |
    grep -v -E '/lib(cuda|cublas|cublasLt|nccl)\.so' |
    while read -r lib; do cp -L "$lib" "$bundle/lib/"; done
  strip --strip-unneeded "$bundle"/lib/*.so* 2>/dev/null
  tar -C "$(dirname "$bundle")" -cf - "$(basename "$bundle")" | xz -9 -T0 >"$bundle.tar.xz" ||
    die "packing $bundle.tar.xz failed"
  packed_mib=$(( ($(stat -c %s "$bundle.tar.xz") + 1048575) / 1048576 ))
  # The working tree a device tool sends: tracked and untracked files git does not ignore.
  tree_mib=$(( ($(git ls-files -z --cached --others --exclude-standard |
    xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}') + 1048575) / 1048576 ))
  echo "gpu-check: bundle in $bundle ($(du -sh "$bundle" | cut -f1)): bin/ $(ls "$bundle/bin" | wc -l)" \
    "binaries, lib/ $(ls "$bundle/lib" | wc -l) libraries; packed: $bundle.tar.xz ($packed_mib MiB)"
  echo "gpu-check: to carry: $bundle.tar.xz $packed_mib MiB + working tree $tree_mib MiB =" \
    "$((packed_mib + tree_mib)) of $carry_limit_mib MiB"
  ((packed_mib + tree_mib <= carry_limit_mib)) ||
    die "the bundle and the working tree exceed the $carry_limit_mib MiB a device tool carries"
  exit 0
fi

# ---- GPU machine.
mkdir -p "$out_dir" || die "cannot create $out_dir"
out_dir="$(cd "$out_dir" && pwd)"
summary="$out_dir/gpu-check.txt"
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
failed=0
fail() { say "FAIL: $*"; failed=1; }

missing_tools=""
for tool in nvidia-smi python3 timeout awk ldd; do
  command -v "$tool" >/dev/null 2>&1 || missing_tools="$missing_tools $tool"
done
[[ -z "$missing_tools" ]] || die "this machine lacks:$missing_tools (see --help: what the GPU machine needs)"

if [[ -z "$bin_dir" ]]; then
  if [[ -x build/bin/cuda_dense_test ]]; then bin_dir=build/bin
  elif [[ -x run/gpu-bundle/bin/cuda_dense_test ]]; then bin_dir=run/gpu-bundle/bin
  elif [[ -f run/gpu-bundle.tar.xz ]]; then
    # Python's tarfile reads xz wherever python3 is, also where no xz binary is.
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
      run/gpu-bundle.tar.xz run/ || die "cannot unpack run/gpu-bundle.tar.xz"
    bin_dir=run/gpu-bundle/bin
  else
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null &&
      cmake --build build --target "${targets[@]}" >"$out_dir/build.log" 2>&1 ||
      die "build failed (see $out_dir/build.log; tools/install-deps.sh installs what it needs)"
    bin_dir=build/bin
  fi
fi
bin_dir="$(cd "$bin_dir" && pwd)"
# A bundle's tests look for ember-coordinator where they were built.
if [[ -f "$bin_dir/../build-bin-dir" ]]; then
  built="$(cat "$bin_dir/../build-bin-dir")"
  if [[ ! -e "$built/ember-coordinator" ]]; then
    mkdir -p "$(dirname "$built")" && ln -sfn "$bin_dir" "$built" ||
      die "cannot link $built to $bin_dir (the tests' path to ember-coordinator)"
  fi
fi
# A bundle's libraries, then the GPU machine's cuBLAS and NCCL wherever they are (the
# CUDA toolkit, or the Python wheels of a PyTorch image). ldconfig -p prints
# "<TAB>NAME (libc6,x86-64) => PATH": match the first field.
cublas_major="$(ldd "$bin_dir/cuda_dense_test" 2>/dev/null | grep -o 'libcudart\.so\.[0-9]*' |
  head -1 | cut -d. -f3)"
cublas_major="${cublas_major:-13}"
libs="$bin_dir/../lib"
missing_libs=""
for name in "libcublas.so.$cublas_major" "libcublasLt.so.$cublas_major" libnccl.so.2; do
  found="$(ldconfig -p 2>/dev/null | awk -v n="$name" '$1 == n {print $NF; exit}')"
  [[ -z "$found" ]] && found="$(find /usr/local/cuda*/ /usr/lib /usr/local/lib /opt -name "$name" \
    2>/dev/null | head -1)"
  if [[ -n "$found" ]]; then libs="$libs:$(dirname "$found")"; else missing_libs="$missing_libs $name"; fi
done
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
say "== gpu-check $(date -u +%FT%TZ) on $(uname -n); binaries $bin_dir"
[[ -z "$missing_libs" ]] || die "not found on this machine:$missing_libs (cuBLAS and NCCL are loaded with dlopen)"
for t in "${targets[@]}"; do
  missing="$(ldd "$bin_dir/$t" 2>&1 | grep 'not found' | tr -s ' \t' ' ' | tr '\n' ';')"
  [[ -n "$missing" ]] && die "$t: $missing"
done

# 1. The device.
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm \
  --format=csv,noheader 2>&1 | sed 's/^/   nvidia-smi: /' | tee -a "$summary"
gpus="$(nvidia-smi -L 2>/dev/null | wc -l)"
say "   GPUs visible: $gpus; CPU cores: $(nproc)"

# 2. Correctness. A skip for want of a GPU is a failure here; one for want of a second
# GPU is reported.
run_test() {
  local name="$1" limit="$2"; shift 2
  local start=$SECONDS
  timeout -k 10 "$limit" "$bin_dir/$name" --gtest_output="json:$out_dir/$name.json" "$@" \
    >"$out_dir/$name.log" 2>&1
  local rc=$?
  local passed skipped total
  passed="$(grep -c '^\[       OK \]' "$out_dir/$name.log")"
  skipped="$(grep -c '^\[  SKIPPED \].*ms)$' "$out_dir/$name.log")"
  total="$(grep -m1 -o '[0-9]* tests\? from [0-9]* test suites\? ran' "$out_dir/$name.log" | cut -d' ' -f1)"
  say "== $name: $passed passed, $skipped skipped of ${total:-?} ($((SECONDS - start)) s)"
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    grep '^\[ RUN      \]' "$out_dir/$name.log" | tail -1 | sed 's/^/   hung in: /' | tee -a "$summary"
    fail "$name did not finish within $limit s"
  elif [[ $rc -ne 0 ]]; then
    grep -E '^\[  FAILED  \]|Failure|Expected|Which is|actual|error' "$out_dir/$name.log" |
      head -30 | tee -a "$summary"
    fail "$name exited $rc"
  fi
  if grep -q 'needs a GPU' "$out_dir/$name.log"; then
    grep -m1 'needs a GPU' "$out_dir/$name.log" | tee -a "$summary"
    fail "$name skipped cases on a GPU machine"
  fi
  grep -A1 'needs 2 GPUs' "$out_dir/$name.log" | grep -o '^\[  SKIPPED \] [A-Za-z0-9_./]*' |
    sed 's/^\[  SKIPPED \]/   not run (needs 2 GPUs):/' | tee -a "$summary"
}
run_test cuda_status_test 30
run_test cuda_dense_test 240
grep -m2 '^tf32 reference errors' "$out_dir/cuda_dense_test.log" | sed 's/^/   /' | tee -a "$summary"
run_test cuda_tower_faults_test 120
run_test nccl_collective_test 120
run_test dense_device_test 60

# 3. The dense tower benchmark.
bench_flags=(--min_time=1 --warmup=1 --repetitions=5)
((quick)) && bench_flags=(--min_time=0.3 --warmup=0.3 --repetitions=3)
say "== ember-bench dense ${bench_flags[*]}"
if timeout -k 10 300 "$bin_dir/ember-bench" dense --json "${bench_flags[@]}" \
    >"$out_dir/dense_bench.json" 2>"$out_dir/dense_bench.log"; then
  grep '^dense:' "$out_dir/dense_bench.log" | sed 's/^/   /' | tee -a "$summary"
else
  tail -5 "$out_dir/dense_bench.log" | tee -a "$summary"
  fail "ember-bench dense"
fi

# 4. End to end: quickstart job, 1 worker + 1 PS on this machine: CPU, CUDA, CUDA again.
steps=200 train_limit=300
((quick)) && steps=60 train_limit=120
e2e="$out_dir/e2e"
rm -rf "$e2e" && mkdir -p "$e2e"
say "== end to end: quickstart, 1 worker + 1 PS, batch 4096, $steps steps"
field() { grep -o "\"$2\": [^,}]*" "$1" | head -1 | cut -d' ' -f2 | tr -d '"'; }
train() {  # train NAME DEVICE: one job on a fresh cluster; result in $out_dir/e2e-NAME.json
  local name="$1" device="$2" cluster="$e2e/cluster-$1" rc
  if ! deploy/local/cluster.sh up --run_dir="$cluster" --build_dir="$bin_dir/.." --shards=1 \
      </dev/null >"$e2e/up-$name.log" 2>&1; then
    tail -5 "$e2e/up-$name.log" | tee -a "$summary"
    fail "cluster up ($name)"
    return 1
  fi
  timeout -k 10 "$train_limit" deploy/local/cluster.sh train --run_dir="$cluster" --build_dir="$bin_dir/.." \
    --workers=1 --config=configs/quickstart.pbtxt --worker_args="--device=$device \
    --batch_size=4096 --max_steps=$steps --train=$e2e/data/train --test=$e2e/data/test \
    --log_every_steps=20" </dev/null >"$e2e/train-$name.log" 2>&1
  rc=$?
  deploy/local/cluster.sh down --run_dir="$cluster" >/dev/null 2>&1
  local result="$cluster/job/result.json"
  if [[ $rc -ne 0 || ! -f "$result" ]]; then
    tail -8 "$e2e/train-$name.log" | tee -a "$summary"
    fail "training $name (--device=$device, exit $rc)"
    return 1
  fi
  cp "$result" "$out_dir/e2e-$name.json"
  cp "$cluster/logs/worker-0.log" "$out_dir/e2e-worker-$name.log"
  say "   $name (--device=$device): $(field "$result" steps) steps," \
    "$(field "$result" examples_per_sec) examples/s, final train loss" \
    "$(field "$result" final_train_loss), test AUC $(field "$result" test_auc)," \
    "$(field "$result" train_seconds) s"
}
if timeout 120 "$bin_dir/ember-datagen" --out="$e2e/data" --train_examples=$((4096 * steps + 4096)) \
    --test_examples=20000 >"$e2e/datagen.log" 2>&1; then
  if train cpu cpu && train cuda cuda && train cuda-again cuda; then
    python3 - "$out_dir" <<'EOF' 2>&1 | tee -a "$summary" || { failed=1; say "FAIL: end to end"; }
import json, sys
d = sys.argv[1]
cpu, cuda, again = (json.load(open(f"{d}/e2e-{n}.json")) for n in ("cpu", "cuda", "cuda-again"))
bad = []
loss_gap = abs(cuda["final_train_loss"] - cpu["final_train_loss"]) / cpu["final_train_loss"]
auc_gap = abs(cuda["test_auc"] - cpu["test_auc"])
print(f"   CUDA vs CPU: final train loss {loss_gap:.2%} apart (at most 2%), "
      f"test AUC {auc_gap:.4f} apart (at most 0.005)")
if loss_gap > 0.02: bad.append("final train loss")
if auc_gap > 0.005: bad.append("test AUC")
for k in ("dense_checksum", "sparse_checksum"):
    same = cuda[k] == again[k]
    print(f"   CUDA run repeated: {k} {'equal' if same else 'DIFFERS'} ({cuda[k]} / {again[k]})")
    if not same: bad.append(k + " of the repeated run")
if bad: print("   differ: " + ", ".join(bad))
sys.exit(1 if bad else 0)
EOF
  fi
else
  fail "ember-datagen"
fi

if ((failed)); then say "== gpu-check FAILED ($SECONDS s)"; else say "== gpu-check passed ($SECONDS s)"; fi
if [[ -n "$collect" ]]; then
  mkdir -p "$collect" && cp "$summary" "$collect/" &&
    tar -C "$out_dir" --exclude='cluster-*' --exclude='data' -czf "$collect/gpu-check-logs.tar.gz" . ||
    say "gpu-check: could not collect into $collect"
fi
exit "$failed"
