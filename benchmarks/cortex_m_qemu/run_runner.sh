#!/bin/bash
# run_runner.sh RUNNER_DIR [ELF_OUT]
#
# Builds a pte_lab-written bare-metal runner (pte-lab sizes P.pte --target cortex-m --example-runner DIR:
# pools.h program.h main.cpp build.sh) for QEMU's mps3-an547 (Cortex-M55) against the libraries of
# build_executorch.sh, and runs it under qemu-system-arm with semihosting. Prints the guest's output and its
# exit status (main's return: 0 every method ran, 1 a method failed, 2 a kernel missing; 3 a fault; 124 timeout).
# RUNNER_DIR is only read: everything is built in a work folder (default /work/build/arm32/runs/<name>).
#
# Env:
#   POOLS_H=FILE   use FILE instead of RUNNER_DIR/pools.h (e.g. a copy with a pool one byte smaller)
#   NO_TEMP=1      "method alone": main.cpp built with -DPTE_LAB_NO_TEMP_POOL (no temp allocator)
#   NONZERO=1      fill every input with a fixed pattern (pte_lab_qemu_support.cpp) instead of zeros
#   WORK=DIR       the work folder (the kernel registration is generated once per operator list into $ET/regs/);  QEMU_TIMEOUT=s (default 300);  ET=/work/build/arm32 (build_executorch's OUT)
#   KEEP_GOING=1   no error when main.cpp's text does not match a patch (default: stop)
#
# What is changed in the written main.cpp (in the work folder's copy; all by sed below, each checked to match):
#   1. before each `method.set_input(EValue(Tensor(&X_impl)), i)`: pte_lab_qemu_fill(X_impl, i) (a no-op
#      unless NONZERO=1; the runner sets zeros)
#   2. `if (!method.ok()) return method.error();` -> also says that the error came from load_method
#   3. before the runner's `method %s: loaded and executed twice` line: pte_lab_qemu_after_run() (every output
#      value, for compare_outputs.py; the runner prints the first eight)
# NO_TEMP=1 builds the runner's own "method alone" switch (-DPTE_LAB_NO_TEMP_POOL: no temp allocator, the method
# pool of pools.h's METHOD_POOL_ALONE_BYTES).
# and, not in main.cpp: the kernel registration is generated for exactly the operators main.cpp's kOperators
# lists (ExecuTorch's codegen: gen_oplist + codegen.gen over kernels/portable/functions.yaml) and linked as an
# object, the portable kernels as a plain archive (only the kernels used are pulled), instead of build.sh's
# whole-archive libportable_ops_lib.a + libportable_kernels.a (every portable kernel: does not fit 512 KiB ITCM);
# a startup (an547/startup.c), a linker script (an547/link.ld), -nostartfiles --specs=rdimon.specs instead of
# build.sh's --specs=nosys.specs (no vector table, no startup, no output); an ET_LOG sink
# (an547/pte_lab_qemu_support.cpp: the minimal PAL's et_pal_emit_log_message prints nothing).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
RUNNER=$(cd "${1:?usage: run_runner.sh RUNNER_DIR [ELF_OUT]}" && pwd)
ET=${ET:-/work/build/arm32}
PY=${PY:-python3}   # a Python with torch (torchgen) for ExecuTorch's codegen
SRC=$ET/et-src/executorch
BLD=$ET/et-build
LIB=${LIB:-$ET/lib}
name=$(basename "$RUNNER")
WORK=${WORK:-$ET/runs/$name}
ELF=${2:-$WORK/runner.elf}
mkdir -p "$WORK" "$(dirname "$ELF")"
for f in main.cpp program.h pools.h; do [ -f "$RUNNER/$f" ] || { echo "run_runner: $RUNNER/$f missing" >&2; exit 64; }; done
[ -f "$LIB/libexecutorch.a" ] || { echo "run_runner: no $LIB/libexecutorch.a: run build_executorch.sh" >&2; exit 64; }

CPU="-mcpu=cortex-m55 -mthumb -mfloat-abi=hard"
# the defines the libraries were compiled with (from the CMake build), so that main.cpp sees the same headers
DEFS="-DC10_USING_CUSTOM_GENERATED_MACROS -DET_ENABLE_DEPRECATED_CONSTANT_BUFFER=0 -DET_ENABLE_PROGRAM_VERIFICATION=0 -DET_LOG_ENABLED=1 -DET_MIN_LOG_LEVEL=Info -DFLATBUFFERS_MAX_ALIGNMENT=1024 -DNDEBUG"
INCS="-I$ET/et-src -I$SRC/runtime/core/portable_type/c10 -I$BLD/include -I$BLD/schema/include -I$SRC/third-party/flatbuffers/include"
CXXFLAGS="$CPU -std=c++17 -Os -fno-exceptions -fno-rtti -ffunction-sections -fdata-sections -Wno-psabi $DEFS $INCS"

# ---- main.cpp, patched (see above)
cp "$RUNNER/program.h" "$WORK/program.h"
cp "${POOLS_H:-$RUNNER/pools.h}" "$WORK/pools.h"
cp "$RUNNER/main.cpp" "$WORK/main.cpp"
patch_check() {  # what, count
  if [ "$2" -lt 1 ]; then
    echo "run_runner: main.cpp patch '$1' did not match: the runner's text changed" >&2
    [ -n "${KEEP_GOING:-}" ] || exit 65
  fi
}
m=$(grep -c 'method\.set_input(EValue(Tensor(&[A-Za-z0-9_]*_impl)), [0-9]*)' "$WORK/main.cpp" || true)
if grep -q 'TensorImpl ' "$WORK/main.cpp"; then patch_check "input fill" "$m"; fi
sed -i -E 's/^(\s*)(if \(Error e = method\.set_input\(EValue\(Tensor\(&([A-Za-z0-9_]+_impl)\)\), ([0-9]+)\);)/\1pte_lab_qemu_fill(\3, \4);\n\1\2/' "$WORK/main.cpp"
m=$(grep -c 'if (!method.ok()) return method.error();' "$WORK/main.cpp" || true)
patch_check "load_method outcome" "$m"
sed -i 's/if (!method.ok()) return method.error();/if (!method.ok()) { pte_lab_qemu_load_failed(s.name, method.error()); return method.error(); }/' "$WORK/main.cpp"
m=$(grep -c '^ *PTE_LAB_PRINT("method %s: loaded and executed' "$WORK/main.cpp" || true)
patch_check "after run" "$m"
sed -i -E 's/^(\s*)(PTE_LAB_PRINT\("method %s: loaded and executed)/\1pte_lab_qemu_after_run(*method, method_allocator, temp_allocator);\n\1\2/' "$WORK/main.cpp"

# ---- the kernel registration for main.cpp's operators
ops_line=$(grep -m1 '^const char\* const kOperators\[\]' "$WORK/main.cpp" || true)
ops=$(echo "$ops_line" | grep -o '"[^"]*"' | tr -d '"' | tr '\n' ' ')
# every operator but executorch_prim's (registered by libexecutorch itself) goes to the codegen: aten:: and
# the portable library's own namespaces (dim_order_ops::, ...) are all in kernels/portable/functions.yaml
aten=$(for o in $ops; do case $o in executorch_prim::*) ;; *) echo "$o";; esac; done | sort -u | paste -sd, -)
echo "run_runner: operators to register: ${aten:-none}"
key=$(echo "$aten" | sha1sum | cut -c1-12)
REG=$ET/regs/$key
if [ -n "$aten" ] && [ ! -f "$REG/reg.o" ]; then
  mkdir -p "$REG"
  TG=$("$PY" -c 'import torchgen, os; print(os.path.dirname(torchgen.__file__))')
  (cd "$SRC" && "$PY" -m codegen.tools.gen_oplist --output_path="$REG/selected_operators.yaml" \
      --root_ops="$aten" > "$REG/gen.log" 2>&1 &&
   "$PY" -m codegen.gen --source-path="$SRC/codegen" --install-dir="$REG" \
      --tags-path="$TG/packaged/ATen/native/tags.yaml" --aten-yaml-path="$TG/packaged/ATen/native/native_functions.yaml" \
      --op-selection-yaml-path="$REG/selected_operators.yaml" \
      --functions-yaml-path="$SRC/kernels/portable/functions.yaml" >> "$REG/gen.log" 2>&1) \
    || { cat "$REG/gen.log"; exit 66; }
  arm-none-eabi-g++ $CXXFLAGS -I"$REG" -c "$REG/RegisterCodegenUnboxedKernelsEverything.cpp" -o "$REG/reg.o"
  echo "$aten" > "$REG/ops.txt"
fi
REGO=""; [ -n "$aten" ] && REGO="$REG/reg.o"

# ---- compile and link
arm-none-eabi-g++ $CXXFLAGS -include "$HERE/an547/pte_lab_qemu_hooks.h" \
  $( [ -n "${NO_TEMP:-}" ] && echo -DPTE_LAB_NO_TEMP_POOL ) $( [ -n "${NONZERO:-}" ] && echo -DPTE_LAB_QEMU_NONZERO ) \
  -c "$WORK/main.cpp" -o "$WORK/main.o"
arm-none-eabi-g++ $CXXFLAGS $( [ -n "${NONZERO:-}" ] && echo -DPTE_LAB_QEMU_NONZERO ) \
  -c "$HERE/an547/pte_lab_qemu_support.cpp" -o "$WORK/support.o"
arm-none-eabi-gcc $CPU -Os -c "$HERE/an547/startup.c" -o "$WORK/startup.o"
KLIBS=$(ls "$LIB"/libportable_kernels.a "$LIB"/libkernels_util_all_deps.a "$LIB"/lib*util*.a 2>/dev/null | sort -u | tr '\n' ' ')
arm-none-eabi-g++ $CPU -nostartfiles --specs=rdimon.specs -T "$HERE/an547/link.ld" -Wl,--gc-sections \
  -Wl,-Map="$WORK/runner.map" "$WORK/startup.o" "$WORK/support.o" "$WORK/main.o" $REGO \
  -Wl,--whole-archive "$LIB/libexecutorch.a" "$LIB/libexecutorch_core.a" -Wl,--no-whole-archive \
  -Wl,--start-group $KLIBS -Wl,--end-group -o "$ELF"
itcm=$(arm-none-eabi-nm "$ELF" | awk '$3=="__itcm_used_end"{print $1}')
echo "run_runner: $ELF: ITCM used $((16#$itcm)) of 524288 B"
arm-none-eabi-size -A "$ELF" | awk '$1 ~ /^\.(text|rodata|program|data|bss|ddr_bss)$/ {printf "  %-9s %9d B\n", $1, $2}'

# ---- run
set +e
timeout "${QEMU_TIMEOUT:-300}" qemu-system-arm -M mps3-an547 -nographic -semihosting -kernel "$ELF" 2>&1 | tee "$WORK/qemu.log"
rc=${PIPESTATUS[0]}
echo "run_runner: exit $rc"
exit $rc
