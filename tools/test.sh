#!/usr/bin/env bash
# Installs dependencies if missing, configures (CMake + Ninja, Release with assertions),
# builds everything, runs the thread-safety analysis (tools/check-thread-safety.sh) and
# runs every test. The README's test command; .ci/run calls it.
#
#   tools/test.sh              # all tests
#   tools/test.sh -R Store     # extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install-deps.sh
BUILD_DIR="${EMBER_BUILD_DIR:-build}"
JOBS="${EMBER_JOBS:-$(nproc)}"
# ccache, where it is installed, makes a rebuild of unchanged files nearly free.
LAUNCHER=()
if command -v ccache >/dev/null 2>&1; then
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "${LAUNCHER[@]}"
cmake --build "$BUILD_DIR" -j "$JOBS"
# Clang's thread-safety analysis of the lock annotations (g++ ignores them); it reads the
# build's compile_commands.json and generated protobuf headers, so it runs after the build.
EMBER_JOBS="$JOBS" tools/check-thread-safety.sh "$BUILD_DIR"
cd "$BUILD_DIR"
ctest --output-on-failure -j "$JOBS" "$@"
