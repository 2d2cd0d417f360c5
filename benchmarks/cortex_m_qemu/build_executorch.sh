#!/bin/bash
# Builds ExecuTorch's runtime and portable kernels for Cortex-M55 (bare metal, minimal PAL) from the mirror's
# commit, into /work/build/arm32. One command:  scripts/build_executorch.sh
#
# What it makes (all under $OUT, default /work/build/arm32):
#   et-src/executorch/ ExecuTorch source at $ET_COMMIT (git archive of the bare mirror; see step 1); et-src is
#                      the include root: <executorch/...> is the very source the libraries were built from
#   flatc/bin/flatc    host flatc built from google/flatbuffers v24.3.25 (the commit ExecuTorch pins)
#   et-build/          the CMake build tree (arm-none-eabi-gcc, MinSizeRel = -Os)
#   lib/               the static libraries: libexecutorch.a libexecutorch_core.a libportable_kernels.a
#                      libkernels_util_all_deps.a (+ the util libs it needs), libportable_ops_lib.a (ALL portable
#                      registrations; only to show that linking it whole overflows the board)
# Env: ET_MIRROR, ET_COMMIT, FB_MIRROR, OUT, JOBS, FLATC (a host flatc to use instead of building one).
set -euo pipefail
ET_MIRROR=${ET_MIRROR:-/work/.mirror/pytorch+executorch/repo}
ET_COMMIT=${ET_COMMIT:-cff6f4dd32e630945b7188512c1f2b4f102b05ad}
FB_MIRROR=${FB_MIRROR:-/work/.mirror/google+flatbuffers/repo}
FLATCC_MIRROR=${FLATCC_MIRROR:-/work/.mirror/dvidelabs+flatcc/repo}
FXDIV_MIRROR=${FXDIV_MIRROR:-/work/.mirror/Maratyszcza+FXdiv/repo}
OUT=${OUT:-/work/build/arm32}
JOBS=${JOBS:-$(nproc)}
PY=${PY:-/work/oc/qemu/venv/bin/python}   # for ExecuTorch's codegen (needs torchgen: the venv's torch)
SRC=$OUT/et-src/executorch   # ExecuTorch's CMake insists on a folder named exactly "executorch"
BLD=$OUT/et-build
mkdir -p "$OUT"
G="git --git-dir=$ET_MIRROR"

# ---- 1. source. The mirror lacks 7 blobs (LFS-ish .gif/tokenizer.json under examples/mediatek and
# examples/models), which makes a plain `git archive` abort; archive every top-level path but examples/, and
# examples/* but those two.
if [ ! -f "$SRC/.et_commit" ] || [ "$(cat "$SRC/.et_commit")" != "$ET_COMMIT" ]; then
  rm -rf "$SRC"; mkdir -p "$SRC"
  paths=$($G ls-tree --name-only "$ET_COMMIT" | grep -v '^examples$')
  ex=$($G ls-tree --name-only "$ET_COMMIT" examples/ | grep -v -e '^examples/mediatek$' -e '^examples/models$')
  $G archive "$ET_COMMIT" -- $paths $ex | tar -x -C "$SRC"
  # submodules: flatbuffers at the pinned commit (v24.3.25: its headers, and flatc below); flatcc at the
  # pinned commit (third-party/CMakeLists.txt add_subdirectory's it unconditionally for flatccrt, which nothing
  # built here links); json and gflags are add_subdirectory'd unconditionally too, unused: empty stubs.
  fb_pin=$($G ls-tree "$ET_COMMIT" third-party/flatbuffers | awk '{print $3}')
  git --git-dir="$FB_MIRROR" archive "$fb_pin" | tar -x -C "$SRC/third-party/flatbuffers"
  fcc_pin=$($G ls-tree "$ET_COMMIT" third-party/flatcc | awk '{print $3}')
  git --git-dir="$FLATCC_MIRROR" archive "$fcc_pin" | tar -x -C "$SRC/third-party/flatcc"
  # FXdiv (XNNPACK's submodule) is add_subdirectory'd unconditionally by the top CMakeLists.txt (header-only)
  fx_pin=$($G ls-tree "$ET_COMMIT" backends/xnnpack/third-party/FXdiv | awk '{print $3}')
  git --git-dir="$FXDIV_MIRROR" archive "$fx_pin" | tar -x -C "$SRC/backends/xnnpack/third-party/FXdiv"
  for d in json gflags; do echo "# stub: not needed for the bare-metal runtime" > "$SRC/third-party/$d/CMakeLists.txt"; done
  echo "$ET_COMMIT" > "$SRC/.et_commit"
fi
fb_pin=$($G ls-tree "$ET_COMMIT" third-party/flatbuffers | awk '{print $3}')

# ---- 2. host flatc from the pinned flatbuffers (Debian's flatc 2.0.8 cannot compile program.fbs)
if [ -z "${FLATC:-}" ]; then
  FLATC=$OUT/flatc/bin/flatc
  if [ ! -x "$FLATC" ]; then
    cmake -S "$SRC/third-party/flatbuffers" -B "$OUT/flatc-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DFLATBUFFERS_BUILD_FLATC=ON -DFLATBUFFERS_BUILD_TESTS=OFF -DFLATBUFFERS_BUILD_FLATLIB=OFF \
      -DFLATBUFFERS_BUILD_FLATHASH=OFF -DCMAKE_INSTALL_PREFIX="$OUT/flatc" >/dev/null
    cmake --build "$OUT/flatc-build" -j"$JOBS" --target install >/dev/null
  fi
fi
echo "flatc: $FLATC ($("$FLATC" --version)), flatbuffers $fb_pin"

# ---- 3. configure. Not the arm-baremetal preset: it turns on EXECUTORCH_BUILD_ARM_BAREMETAL (the Ethos-U
# backend, which fetches ethos-u-core-driver) and EXECUTORCH_BUILD_CORTEX_M (fetches CMSIS-NN), neither
# reachable nor needed for portable kernels. Its toolchain file is used as is.
cmake -S "$SRC" -B "$BLD" -G Ninja \
  -DCMAKE_TOOLCHAIN_FILE="$SRC/examples/arm/ethos-u-setup/arm-none-eabi-gcc.cmake" \
  -DTARGET_CPU=cortex-m55 \
  -DCMAKE_CXX_COMPILER_LAUNCHER="$(cd "$(dirname "$0")" && pwd)/cc_retry_O1.sh" \
  -DCMAKE_C_COMPILER_LAUNCHER="$(cd "$(dirname "$0")" && pwd)/cc_retry_O1.sh" \
  -DCMAKE_BUILD_TYPE=MinSizeRel \
  -DPYTHON_EXECUTABLE="$PY" \
  -DFLATC_EXECUTABLE="$FLATC" \
  -DFLATCC_EXECUTABLE=/bin/false \
  -DEXECUTORCH_PAL_DEFAULT=minimal \
  -DEXECUTORCH_ENABLE_LOGGING=ON \
  -DEXECUTORCH_LOG_LEVEL=Info \
  -DEXECUTORCH_BUILD_PORTABLE_OPS=ON \
  -DEXECUTORCH_BUILD_KERNELS_OPTIMIZED=OFF \
  -DEXECUTORCH_BUILD_KERNELS_QUANTIZED=OFF \
  -DEXECUTORCH_BUILD_PTHREADPOOL=OFF \
  -DEXECUTORCH_BUILD_CPUINFO=OFF \
  -DEXECUTORCH_BUILD_EXECUTOR_RUNNER=OFF \
  -DEXECUTORCH_BUILD_EXTENSION_DATA_LOADER=OFF \
  -DEXECUTORCH_BUILD_EXTENSION_FLAT_TENSOR=OFF \
  -DEXECUTORCH_BUILD_EXTENSION_MODULE=OFF \
  -DEXECUTORCH_BUILD_EXTENSION_TENSOR=OFF \
  -DEXECUTORCH_BUILD_EXTENSION_RUNNER_UTIL=OFF \
  -DEXECUTORCH_BUILD_DEVTOOLS=OFF \
  -DEXECUTORCH_ENABLE_EVENT_TRACER=OFF \
  -DEXECUTORCH_USE_DL=OFF \
  -DEXECUTORCH_BUILD_TESTS=OFF \
  -DBUILD_TESTING=OFF \
  > "$OUT/cmake-configure.log" 2>&1 || { tail -40 "$OUT/cmake-configure.log"; exit 1; }

# ---- 4. build the runtime, the portable kernels (every op compiled: selection happens at link time, see
# run_runner.sh) and the all-ops registration library
# (compiled through scripts/cc_retry_O1.sh: Debian's binutils 2.40 rejects one object GCC 12 emits at -Os for
# cortex-m55, op_remainder.cpp; that file is compiled again at -O1)
cmake --build "$BLD" -j"$JOBS" --target executorch executorch_core portable_kernels portable_ops_lib \
  > "$OUT/cmake-build.log" 2>&1 || { grep -m5 -B2 -A10 'rror' "$OUT/cmake-build.log"; exit 1; }
grep 'cc_retry_O1:' "$OUT/cmake-build.log" || true

# ---- 5. collect
rm -rf "$OUT/lib"; mkdir -p "$OUT/lib"
find "$BLD" -name '*.a' -not -path '*/flatc_ep/*' -exec cp {} "$OUT/lib/" \;
# generated schema headers stay in $BLD/schema/include (run_runner.sh puts it on the include path)
echo "$ET_COMMIT" > "$OUT/lib/ET_COMMIT"
grep -E 'CMAKE_CXX_FLAGS_MINSIZEREL|EXECUTORCH_PAL_DEFAULT|EXECUTORCH_ENABLE_LOGGING|MAX_KERNEL_NUM' "$BLD/CMakeCache.txt" \
  > "$OUT/lib/CONFIG" || true
ls -la "$OUT/lib"
