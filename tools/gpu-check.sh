#!/usr/bin/env bash
# The GPU check of Ember's CUDA workers: one script that runs on a machine with an
# NVIDIA GPU and writes its results to one file.
#
#   tools/gpu-check.sh [--bin_dir=DIR] [--out=DIR] [--quick]
#       runs on the GPU machine, from the repository root:
#        1. the device: nvidia-smi, and what the CUDA runtime sees;
#        2. cuda_dense_test: every layer's forward/backward, the loss and the optimizers
#           against the CPU backend (tolerances in the test), a 2-step training run on
#           CPU and GPU, NCCL all-reduce with one rank; no case may skip;
#        3. dense_device_test (host-side);
#        4. `ember-bench dense`: the quickstart tower's step time, examples/s and
#           TFLOP/s at batch 4096 and 65536, CPU vs CUDA fp32/tf32/bf16;
#        5. end to end: the quickstart job (1 worker, 1 PS on this machine, batch 4096)
#           with --device=cpu and with --device=cuda; examples/s and the loss of each.
#       Results: OUT/gpu-check.txt (summary), OUT/*.json and OUT/*.log. Exit 1 if any
#       check failed. Binaries come from --bin_dir (default: build/bin, else the
#       bundle below); with neither, it builds with cmake (needs tools/install-deps.sh).
#       --quick: shorter benchmark and training (for a tight device lease).
#
#   tools/gpu-check.sh --bundle=DIR
#       runs on a build machine without a GPU: builds the binaries the check needs and
#       copies them, with the shared libraries they need that a CUDA image lacks (gRPC,
#       RocksDB, Abseil, OpenBLAS, ...; not the CUDA driver, cuBLAS or NCCL, which the GPU
#       machine has), into DIR/bin and DIR/lib, packed as DIR.tar.xz, for a GPU machine
#       with nothing installed: with --bundle=run/gpu-bundle, the run above finds
#       run/gpu-bundle.tar.xz and unpacks it.
#
# Exit status: 0 all passed, 1 a check failed, 2 usage or setup error.
set -uo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "gpu-check: $*" >&2; exit 2; }

bin_dir="" out_dir="run/gpu-check" bundle="" quick=0
for arg in "$@"; do
  case "$arg" in
    --bin_dir=*) bin_dir="${arg#*=}" ;;
    --out=*) out_dir="${arg#*=}" ;;
    --bundle=*) bundle="${arg#*=}" ;;
    --quick) quick=1 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument $arg" ;;
  esac
done

targets=(cuda_dense_test dense_device_test ember-bench ember-worker ember-ps ember-coordinator
  ember-datagen)

# ---- Build machine: package the binaries and their non-CUDA libraries.
if [[ -n "$bundle" ]]; then
  build_dir="${EMBER_BUILD_DIR:-build}"
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null || die "cmake failed"
  cmake --build "$build_dir" --target "${targets[@]}" || die "build failed"
  [[ -x "$build_dir/bin/cuda_dense_test" ]] || die "no cuda_dense_test: was nvcc found by cmake?"
  rm -rf "$bundle" && mkdir -p "$bundle/bin" "$bundle/lib"
  for t in "${targets[@]}"; do
    cp "$build_dir/bin/$t" "$bundle/bin/" && strip --strip-unneeded "$bundle/bin/$t"
  done
  # Everything ldd resolves except the C runtime and what the GPU machine brings.
  for t in "${targets[@]}"; do ldd "$bundle/bin/$t"; done | awk '$3 ~ /^\// {print $3}' | sort -u |
    grep -v -E '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libstdc\+\+|libgcc_s)\.so' |
    grep -v -E '/lib(cuda|cudart|cublas|cublasLt|nccl)\.so' |
    while read -r lib; do cp -L "$lib" "$bundle/lib/"; done
  cp -L "$(ldd "$bundle/bin/cuda_dense_test" | awk '/libcudart/ {print $3}')" "$bundle/lib/"
  strip --strip-unneeded "$bundle"/lib/*.so* 2>/dev/null
  tar -C "$(dirname "$bundle")" -cf - "$(basename "$bundle")" | xz -9 -T0 >"$bundle.tar.xz" ||
    die "packing $bundle.tar.xz failed"
  echo "gpu-check: bundle in $bundle ($(du -sh "$bundle" | cut -f1)): bin/ $(ls "$bundle/bin" | wc -l)" \
    "binaries, lib/ $(ls "$bundle/lib" | wc -l) libraries; packed: $bundle.tar.xz" \
    "($(du -sh "$bundle.tar.xz" | cut -f1))"
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
# A bundle's libraries, then the GPU machine's cuBLAS and NCCL wherever they are (the
# CUDA toolkit, or the Python wheels of a PyTorch image).
libs="$bin_dir/../lib"
for name in libcublas.so.13 libnccl.so.2 libcublasLt.so.13; do
  found="$(ldconfig -p 2>/dev/null | grep -m1 " $name " | awk '{print $NF}')"
  [[ -z "$found" ]] && found="$(find /usr/local/cuda*/ /usr/lib /opt -name "$name" 2>/dev/null | head -1)"
  [[ -n "$found" ]] && libs="$libs:$(dirname "$found")"
done
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
say "== gpu-check $(date -u +%FT%TZ) on $(uname -n); binaries $bin_dir"
for t in "${targets[@]}"; do
  missing="$(ldd "$bin_dir/$t" 2>/dev/null | grep 'not found' | awk '{print $1}' | tr '\n' ' ')"
  [[ -n "$missing" ]] && die "$t: missing libraries: $missing"
done

# 1. The device.
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm \
  --format=csv,noheader 2>&1 | sed 's/^/   nvidia-smi: /' | tee -a "$summary"
nproc_gpu="$(nvidia-smi -L 2>/dev/null | wc -l)"
say "   GPUs visible: $nproc_gpu; CPU cores: $(nproc)"

# 2-3. Correctness.
run_test() {
  local name="$1"; shift
  local start=$SECONDS
  "$bin_dir/$name" --gtest_output="json:$out_dir/$name.json" "$@" >"$out_dir/$name.log" 2>&1
  local rc=$?
  local passed skipped total
  passed="$(grep -c '^\[       OK \]' "$out_dir/$name.log")"
  skipped="$(grep -c '^\[  SKIPPED \].*ms)$' "$out_dir/$name.log")"
  total="$(grep -m1 -o '[0-9]* tests\? from [0-9]* test suites\? ran' "$out_dir/$name.log" | cut -d' ' -f1)"
  say "== $name: $passed passed, $skipped skipped of ${total:-?} ($((SECONDS - start)) s)"
  [[ $rc -eq 0 ]] || { grep -E '^\[  FAILED  \]|Failure|Expected|Which is|actual' "$out_dir/$name.log" |
    head -30 | tee -a "$summary"; fail "$name exited $rc"; }
}
run_test cuda_dense_test
if grep -q '^\[  SKIPPED \]' "$out_dir/cuda_dense_test.log"; then
  grep -m1 'needs a GPU' "$out_dir/cuda_dense_test.log" | tee -a "$summary"
  fail "cuda_dense_test skipped cases on a GPU machine"
fi
run_test dense_device_test

# 4. The dense tower benchmark.
bench_flags=(--min_time=1 --warmup=1 --repetitions=5)
((quick)) && bench_flags=(--min_time=0.3 --warmup=0.3 --repetitions=3)
say "== ember-bench dense ${bench_flags[*]}"
if "$bin_dir/ember-bench" dense --json "${bench_flags[@]}" >"$out_dir/dense_bench.json" \
    2>"$out_dir/dense_bench.log"; then
  grep '^dense:' "$out_dir/dense_bench.log" | sed 's/^/   /' | tee -a "$summary"
else
  tail -5 "$out_dir/dense_bench.log" | tee -a "$summary"
  fail "ember-bench dense"
fi

# 5. End to end: quickstart job, 1 worker + 1 PS on this machine, CPU and CUDA.
steps=200
((quick)) && steps=80
e2e="$out_dir/e2e"
rm -rf "$e2e" && mkdir -p "$e2e"
say "== end to end: quickstart, 1 worker + 1 PS, batch 4096, $steps steps"
if "$bin_dir/ember-datagen" --out="$e2e/data" --train_examples=$((4096 * steps + 4096)) \
    --test_examples=20000 >"$e2e/datagen.log" 2>&1; then
  for device in cpu cuda; do
    cluster="$e2e/cluster-$device"
    if ! deploy/local/cluster.sh up --run_dir="$cluster" --build_dir="$bin_dir/.." --shards=1 \
        </dev/null >"$e2e/up-$device.log" 2>&1; then
      tail -5 "$e2e/up-$device.log" | tee -a "$summary"
      fail "cluster up ($device)"
      continue
    fi
    deploy/local/cluster.sh train --run_dir="$cluster" --build_dir="$bin_dir/.." --workers=1 \
      --config=configs/quickstart.pbtxt --worker_args="--device=$device --batch_size=4096 \
      --max_steps=$steps --skip_eval --train=$e2e/data/train --test=$e2e/data/test \
      --log_every_steps=20" </dev/null >"$e2e/train-$device.log" 2>&1
    rc=$?
    deploy/local/cluster.sh down --run_dir="$cluster" >/dev/null 2>&1
    result="$cluster/job/result.json"
    if [[ $rc -ne 0 || ! -f "$result" ]]; then
      tail -8 "$e2e/train-$device.log" | tee -a "$summary"
      fail "training with --device=$device"
      continue
    fi
    cp "$result" "$out_dir/e2e-$device.json"
    cp "$cluster/logs/worker-0.log" "$out_dir/e2e-worker-$device.log"
    field() { grep -o "\"$1\": [^,}]*" "$result" | head -1 | cut -d' ' -f2 | tr -d '"'; }
    say "   --device=$device: $(field steps) steps, $(field examples_per_sec) examples/s," \
      "final train loss $(field final_train_loss), $(field train_seconds) s"
    grep -E '^step' "$cluster/logs/worker-0.log" | head -2 | sed "s/^/     $device /" |
      tee -a "$summary"
  done
else
  fail "ember-datagen"
fi

if ((failed)); then say "== gpu-check FAILED"; else say "== gpu-check passed"; fi
exit "$failed"
