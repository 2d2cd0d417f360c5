"""A bare-metal runner for a 32-bit target (``pte-lab sizes FILE --example-runner DIR --target cortex-m``):
``pools.h`` (the target's pools and planned buffers, :mod:`.target_pools`), ``program.h`` (the program as a
``const`` array, in flash), ``main.cpp`` and ``build.sh``.

``main.cpp`` has no filesystem and no heap: static pools and planned buffers of the header's sizes (and, where a
delegate allocates with operator new, as EthosUBackend does its handle, operator new served from a static pool of
the bytes it asks: ``PTE_LAB_OPERATOR_NEW_POOL_BYTES``), the
program read through a ``BufferDataLoader``, a check that every kernel and backend the methods need is
registered, then each method loaded, its inputs set (zeros), executed twice, and what it used printed (the
method pool's bytes, the temp pool's most at once, a few of each output's values) with ``printf``, not
``ET_LOG``, which ExecuTorch's bare-metal platform layer drops. ``build.sh`` compiles it with
``arm-none-eabi-g++`` for Cortex-M55 against ExecuTorch's headers and links it with the target's ExecuTorch
libraries, which the user builds from source for the target (the command, with only the program's operators,
is at its top) and names with ``EXECUTORCH_CORTEX_M_LIB_DIR`` (``--compile-only``: compile, no link).
"""

from __future__ import annotations

import os
import re

from ...errors import PteLabError
from ...format.regular_file import check_writable
from ...model.backends import BACKENDS
from ...runtime.native import executorch_dir, executorch_version
from ...shell_text import sh_comment, sh_word, sh_words
from ...call_targets import namespaces
from ...vocabulary import Configuration, ValueKind
from ..c_text import c_comment, c_string
from .sizes import block_comment, c_identifiers, target_guard
from ...runtime.sizing.records import NEW_ALIGNMENT, operator_new_pool
from ...runtime.sizing.target import delegate_heap
from .target_pools import target_pools, temp_set_by_words

__all__ = ["bare_metal_runner", "target_header", "write_bare_metal_runner", "BARE_METAL_FILES", "TARGET_FLAGS", "TARGET_LIBRARIES"]

#: the files written, in order
BARE_METAL_FILES = ("pools.h", "program.h", "main.cpp", "build.sh")

#: the compiler flags that select the target
TARGET_FLAGS = {"cortex-m": "-mcpu=cortex-m55 -mthumb -mfloat-abi=hard"}

#: ExecuTorch's static libraries a bare-metal build links, by what needs them: (linked whole, so that their
#: static registrations are kept; linked as usual, for the code those call). An operator namespace's first
#: whole library is the selective build's (only the program's operators, ``EXECUTORCH_SELECT_OPS_LIST``), the
#: second, every operator's (its ``_ops_lib``), used where the selective one is not in the build
TARGET_LIBRARIES = {
    "runtime": (("libexecutorch.a", "libexecutorch_core.a"), ()),
    "aten": (("libexecutorch_selected_kernels.a|libportable_ops_lib.a",),
             ("libportable_kernels.a", "libkernels_util_all_deps.a?")),
    "quantized_decomposed": (("libquantized_ops_lib.a",), ("libquantized_kernels.a", "libportable_kernels.a")),
    "cortex_m": (("libcortex_m_ops_lib.a",), ("libcortex_m_kernels.a", "libcmsis-nn.a?")),
    # a backend's: its registration's (:attr:`pte_lab.model.backends.Backend.firmware_libraries`)
    **{b.id: b.firmware_libraries for b in BACKENDS.values() if b.firmware_libraries is not None},
}


#: what a backend needs beyond its library, said in build.sh (one line a comment): its registration's
#: (:attr:`pte_lab.model.backends.Backend.firmware_notes`)
BACKEND_BUILD_NOTES = {b.id: b.firmware_notes for b in BACKENDS.values() if b.firmware_notes}


_NOT_WORD = re.compile(r"[^0-9A-Za-z_]+")


def _libraries(methods) -> tuple[list[str], list[str]]:
    """(the libraries linked whole, those linked as usual): each a file name, ``a|b`` (the first found), or
    ``name?`` (linked where the build has it)."""
    whole, usual = list(TARGET_LIBRARIES["runtime"][0]), []
    keys = sorted(namespaces(op for m in methods for op in m.operators) & set(TARGET_LIBRARIES))
    keys += sorted({b for m in methods for b in m.backends})
    for key in keys:
        # a backend pte_lab has no library for: a placeholder that names it in letters, digits and '_' alone (the
        # script's find_lib splits at '|' and spaces)
        w, u = TARGET_LIBRARIES.get(key, ((f"lib<the library registering {_NOT_WORD.sub('_', key)}>.a",), ()))
        whole += [x for x in w if x not in whole]
        usual += [x for x in u if x not in usual]
    return whole, usual


def _alone(p, up: str, target: str, m) -> list[str]:
    """The "method alone" pool (main.cpp built with -DPTE_LAB_NO_TEMP_POOL: no temp allocator), where it runs on
    a heap-less target; else a comment saying why it is not given."""
    bare = m.holds_on(Configuration.METHOD_ALONE).get("bare-metal")
    if p.method_pool_alone is not None and bare is not None and bare.runnable:
        return [*block_comment(f"method alone (main.cpp built with -DPTE_LAB_NO_TEMP_POOL: no temp allocator, "
                                f"kernel resolution in the method pool): runs on a heap-less {target}, checked "
                                f"on this host under a platform layer whose et_pal_allocate fails"),
                f"#define PTE_LAB_{up}_METHOD_POOL_ALONE_BYTES {p.method_pool_alone}u"]
    why = ("it was not possible on this host" if p.method_pool_alone is None else
           "whether it runs under a bare-metal platform layer was not measured" if bare is None else
           f"not runnable on a heap-less {target}: with no temp allocator, ExecuTorch takes temp memory from "
           f"et_pal_allocate, which returns nullptr there")
    return block_comment(f"method alone (no temp allocator): not given: {why}")


def new_blocks(pte, methods, target: str) -> list[tuple[str, int]]:
    """What the methods' delegates ask operator new for at load_method on ``target``: (what, bytes) per block."""
    return [(f"{h.backend}'s {h.what}", h.each) for n in methods for h in delegate_heap(pte, n, target)
            for _ in range(h.count)]


def _new_pool_h(blocks: list[tuple[str, int]]) -> list[str]:
    if not blocks:
        return []
    what = sorted({w for w, _ in blocks})
    return ["", *block_comment(
        f"operator new at load_method ({', '.join(what)}: {len(blocks)} block(s), {sum(b for _, b in blocks)} B): "
        f"main.cpp serves it from a static pool of this size, each block {NEW_ALIGNMENT}-byte aligned (build with "
        f"-DPTE_LAB_USE_HEAP to take it from your C library's heap instead, which then needs these bytes plus its "
        f"per-block overhead)"),
        f"#define PTE_LAB_OPERATOR_NEW_POOL_BYTES {operator_new_pool(b for _, b in blocks)}u"]


_NEW_POOL = r'''
// The delegates allocate with operator new at load_method (see PTE_LAB_OPERATOR_NEW_POOL_BYTES in pools.h). This
// board has no heap: operator new is served from a static pool of exactly that size, one block after another;
// delete gives nothing back (each method's blocks are counted in the pool). -DPTE_LAB_USE_HEAP: your C library's
// operator new and heap instead.
#if defined(PTE_LAB_OPERATOR_NEW_POOL_BYTES) && !defined(PTE_LAB_USE_HEAP)
#include <cstdlib>
#include <new>
alignas(8) static uint8_t pte_lab_new_pool[PTE_LAB_OPERATOR_NEW_POOL_BYTES];
static size_t pte_lab_new_used = 0;
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  const size_t at = (pte_lab_new_used + 7u) & ~static_cast<size_t>(7u);
  if (at + size > sizeof(pte_lab_new_pool)) {
    return nullptr;  // a delegate then fails load_method with MemoryAllocationFailed
  }
  pte_lab_new_used = at + size;
  return pte_lab_new_pool + at;
}
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept { return operator new(size, tag); }
void* operator new(std::size_t size) {  // no exceptions here: a full pool stops the program
  void* p = operator new(size, std::nothrow);
  if (p == nullptr) {
    std::abort();
  }
  return p;
}
void* operator new[](std::size_t size) { return operator new(size); }
void operator delete(void*) noexcept {}
void operator delete[](void*) noexcept {}
void operator delete(void*, std::size_t) noexcept {}
void operator delete[](void*, std::size_t) noexcept {}
void operator delete(void*, const std::nothrow_t&) noexcept {}
void operator delete[](void*, const std::nothrow_t&) noexcept {}
#endif
'''


_NEW_POOL_REPORT = r'''#if !defined(PTE_LAB_USE_HEAP)
  PTE_LAB_PRINT("operator new pool: %u B used of %u\n", static_cast<unsigned>(pte_lab_new_used),
                static_cast<unsigned>(PTE_LAB_OPERATOR_NEW_POOL_BYTES));
#endif
'''


def _pools_h(pools, ids, target: str, stem: str, sizes, blocks=()) -> str:
    out = [f"/* {c_comment(stem)}: pools on {target} ({next(iter(pools.values())).abi}), from pte_lab's model of Method::init",
           " * checked against this host's measurement (pte-lab sizes --target " + target + "). */",
           "#ifndef PTE_LAB_BARE_METAL_POOLS_H", "#define PTE_LAB_BARE_METAL_POOLS_H", "", *target_guard(target), "",
           "/* pool bases: ExecuTorch's objects ask for at most 8; planned buffers: exir plans at 16 */",
           "#define PTE_LAB_POOL_ALIGNMENT 16u", "#define PTE_LAB_PLANNED_BUFFER_ALIGNMENT 16u"]
    for name, p in pools.items():
        up = ids[name].upper()
        out += ["", f"/* method \"{c_comment(name)}\" on {target} */",
                f"#define PTE_LAB_{up}_METHOD_POOL_BYTES {p.method_pool}u",
                *block_comment("temp pool: " + temp_set_by_words(p)),
                f"#define PTE_LAB_{up}_TEMP_POOL_BYTES {p.temp_pool}u"
                + ("" if p.temp_exact else f" /* at least {p.temp_low} B: see pte-lab sizes --target {target} */"),
                f"#define PTE_LAB_{up}_NUM_PLANNED_BUFFERS {len(p.planned)}u"]
        out += [f"#define PTE_LAB_{up}_PLANNED_BUFFER_{i}_BYTES {b}u" for i, (_, _, b) in enumerate(p.planned)]
        out += _alone(p, up, target, sizes.methods[name])
    out += _new_pool_h(list(blocks))
    return "\n".join(out + ["", "#endif", ""])


def _program_h(data: bytes, in_ram: str | None = None) -> str:
    """The program as an array read through a BufferDataLoader: ``const`` (in flash), or, where ``in_ram`` says
    why its bytes must be in RAM (an Ethos-U blob whose scratch is a block of it, before ExecuTorch 0.7), a
    writable array (in RAM, .data)."""
    rows = [", ".join(f"0x{b:02x}" for b in data[i:i + 24]) for i in range(0, len(data), 24)]
    head = (f"/* the program, in RAM (.data): {c_comment(in_ram)}; read through a BufferDataLoader */" if in_ram
            else "/* the program, as a const array (in flash): read through a BufferDataLoader */")
    return "\n".join([head, "#include <stddef.h>", "#include <stdint.h>",
                      f"alignas(16) static {'' if in_ram else 'const '}uint8_t pte_lab_program[{max(len(data), 1)}] = {{",
                      *(f"  {r}," for r in rows), "};", f"static const size_t pte_lab_program_bytes = {len(data)}u;",
                      ""])


#: the runner's one buffer its planned inputs are copied from (zeros): beyond the board's total, which has
#: planned inputs in their planned buffers
STAGING = "pte_lab_input_staging"


def staging_bytes(methods) -> int:
    """The runner's staging buffer: the largest planned tensor input (0: none)."""
    return max((io.nbytes for m in methods for io in m.inputs if io.kind == ValueKind.TENSOR and io.planned), default=0)


def _method_block(m, up: str, low: str) -> list[str]:
    P = f"PTE_LAB_{up}"
    out = [f"// ---- method \"{c_comment(m.method)}\": every size from pools.h",
           "#ifdef PTE_LAB_NO_TEMP_POOL  // \"method alone\": no temp allocator",
           f"#ifndef {P}_METHOD_POOL_ALONE_BYTES",
           f"#error \"method {c_comment(m.method)} has no method-alone pool on this target: see pools.h\"",
           "#endif",
           f"alignas(PTE_LAB_POOL_ALIGNMENT) uint8_t {low}_method_pool[{P}_METHOD_POOL_ALONE_BYTES];",
           f"uint8_t* const {low}_temp_pool = nullptr;",
           f"const size_t {low}_temp_pool_bytes = 0;",
           "#else",
           f"alignas(PTE_LAB_POOL_ALIGNMENT) uint8_t {low}_method_pool[{P}_METHOD_POOL_BYTES];",
           f"alignas(PTE_LAB_POOL_ALIGNMENT) uint8_t {low}_temp_pool[{P}_TEMP_POOL_BYTES > 0 ? {P}_TEMP_POOL_BYTES : 1];",
           f"const size_t {low}_temp_pool_bytes = {P}_TEMP_POOL_BYTES;",
           "#endif"]
    spans = []
    for i in range(len(m.planned)):
        out.append(f"alignas(PTE_LAB_PLANNED_BUFFER_ALIGNMENT) uint8_t {low}_planned_{i}[{P}_PLANNED_BUFFER_{i}_BYTES];")
        spans.append(f"{{{low}_planned_{i}, {P}_PLANNED_BUFFER_{i}_BYTES}}")
    out.append(f"Span<uint8_t> {low}_planned[] = {{{', '.join(spans)}}};" if spans
               else f"Span<uint8_t>* const {low}_planned = nullptr;")
    setters = []
    for io in m.inputs:
        if io.kind != ValueKind.TENSOR:
            ctype = {"Int": "int64_t", "Bool": "bool", "Double": "double"}.get(io.kind)
            if ctype is not None and io.value is not None:  # the value the program holds (set_input takes only it)
                literal = str(io.value).lower() if io.kind == ValueKind.BOOL else repr(io.value)
                setters.append(f"  if (Error e = method.set_input(EValue(static_cast<{ctype}>({literal})), "
                               f"{io.index}); e != Error::Ok) return e;")
            continue
        b = f"{low}_input_{io.index}"
        dims = len(io.shape)
        strides, acc = [0] * dims, 1
        for d in reversed(io.dim_order):
            strides[d], acc = acc, acc * io.shape[d]

        def arr(xs):
            return "{" + ", ".join(map(str, xs or [0])) + "}"

        # a planned input: set_input copies it into its planned buffer, so one staging buffer serves them all
        data = STAGING if io.planned else b
        out += ([] if io.planned else [f"alignas(16) uint8_t {b}[{max(io.nbytes, 1)}];"]) + [
                f"SizesType {b}_sizes[] = {arr(io.shape)};", f"DimOrderType {b}_dim_order[] = {arr(io.dim_order)};",
                f"StridesType {b}_strides[] = {arr(strides)};",
                f"TensorImpl {b}_impl(static_cast<ScalarType>({io.scalar_type}), {dims}, {b}_sizes, {data}, "
                f"{b}_dim_order, {b}_strides);"]
        setters.append(f"  if (Error e = method.set_input(EValue(Tensor(&{b}_impl)), {io.index}); e != Error::Ok) return e;")
    out += [f"Error {low}_set_inputs(Method& method) {{", *(setters or ["  (void)method;"]), "  return Error::Ok;", "}",
            f"const MethodSetup {low}_setup = {{{c_string(m.method)}, {low}_method_pool, sizeof({low}_method_pool), "
            f"{low}_temp_pool, {low}_temp_pool_bytes, {low}_planned, {len(m.planned)}, {low}_set_inputs}};"]
    return out


_PRELUDE = r'''// A bare-metal ExecuTorch runner written by pte_lab: no filesystem, no heap. Every pool is static, of
// the sizes pools.h gives for this target; the program is the const array of program.h.
#include <executorch/extension/data_loader/buffer_data_loader.h>
#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/core/memory_allocator.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/kernel/operator_registry.h>
#include <executorch/runtime/platform/runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "pools.h"
#include "program.h"

using executorch::aten::DimOrderType;
using executorch::aten::ScalarType;
using executorch::aten::SizesType;
using executorch::aten::StridesType;
using executorch::aten::Tensor;
using executorch::aten::TensorImpl;
using executorch::extension::BufferDataLoader;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::HierarchicalAllocator;
using executorch::runtime::MemoryAllocator;
using executorch::runtime::MemoryManager;
using executorch::runtime::Method;
using executorch::runtime::Program;
using executorch::runtime::Span;

// The runner's own lines, not ET_LOG (ExecuTorch's minimal platform layer, the bare-metal one, and Release
// builds drop ET_LOG's output): printf by default, which reaches the host under semihosting
// (--specs=rdimon.specs) or your UART where newlib's _write is retargeted to it; or define PTE_LAB_PRINT as your
// own printf-like function (-DPTE_LAB_PRINT=my_uart_printf).
#ifndef PTE_LAB_PRINT
#define PTE_LAB_PRINT std::printf
#endif

namespace {

// A pool that counts: the most it held at once (ExecuTorch resets the temp allocator after each kernel call,
// so its used_size() after a run says nothing), and the first request it refused, with what was free then.
class CountingAllocator : public MemoryAllocator {
 public:
  CountingAllocator(const char* name, const char* hint, uint32_t size, uint8_t* base)
      : MemoryAllocator(size, base), name(name), hint(hint) {}
  void* allocate(size_t size, size_t alignment = kDefaultAlignment) override {
    const size_t free_before = free_size();
    void* p = MemoryAllocator::allocate(size, alignment);
    if (p != nullptr && used_size() > peak) peak = used_size();
    if (p == nullptr && refused == 0) {
      refused = size;
      refused_free = free_before;
    }
    return p;
  }
  // said once the method is done with the pools: which pool was short, by how much at least
  ~CountingAllocator() override {
    if (refused != 0) {
      PTE_LAB_PRINT("%s: refused a request of %u B with %u B free (a pool too small%s)\n", name,
                    static_cast<unsigned>(refused), static_cast<unsigned>(refused_free), hint);
    }
  }
  const char* name;
  const char* hint;
  size_t peak = 0;
  size_t refused = 0;
  size_t refused_free = 0;
};

// A few of an output's values, to compare with the same method run on the host (pte_lab's load, the same
// inputs: zeros unless set_inputs says otherwise)
void print_output(const char* method, size_t i, const EValue& v) {
  if (!v.isTensor()) {
    PTE_LAB_PRINT("method %s: output %u: not a tensor (tag %d)\n", method, static_cast<unsigned>(i),
                  static_cast<int>(v.tag));
    return;
  }
  const Tensor& t = v.toTensor();
  PTE_LAB_PRINT("method %s: output %u: scalar type %d, %ld elements:", method, static_cast<unsigned>(i),
                static_cast<int>(t.scalar_type()), static_cast<long>(t.numel()));
  const long shown = t.numel() < 8 ? static_cast<long>(t.numel()) : 8;
  for (long k = 0; k < shown; k++) {
    double x;
    switch (t.scalar_type()) {
      case ScalarType::Float: x = t.const_data_ptr<float>()[k]; break;
      case ScalarType::Double: x = t.const_data_ptr<double>()[k]; break;
      case ScalarType::Long: x = static_cast<double>(t.const_data_ptr<int64_t>()[k]); break;
      case ScalarType::Int: x = t.const_data_ptr<int32_t>()[k]; break;
      case ScalarType::Short: x = t.const_data_ptr<int16_t>()[k]; break;
      case ScalarType::Char: x = t.const_data_ptr<int8_t>()[k]; break;
      case ScalarType::Byte: x = t.const_data_ptr<uint8_t>()[k]; break;
      case ScalarType::Bool: x = t.const_data_ptr<bool>()[k] ? 1 : 0; break;
      default: PTE_LAB_PRINT(" (values of this type not shown)\n"); return;
    }
    PTE_LAB_PRINT(" %g", x);
  }
  PTE_LAB_PRINT("%s\n", shown < t.numel() ? " ..." : "");
}

struct MethodSetup {
  const char* name;
  uint8_t* method_pool;
  size_t method_pool_bytes;
  uint8_t* temp_pool;
  size_t temp_pool_bytes;
  Span<uint8_t>* planned;
  size_t num_planned;
  Error (*set_inputs)(Method&);
};
'''

_MAIN = r'''
const MethodSetup* const kMethods[] = {%(methods)s};
// what the methods need registered: build.sh links the libraries that register them (only these operators)
const char* const kOperators[] = {%(operators)s};
const char* const kBackends[] = {%(backends)s};

Error run(const Program& program, const MethodSetup& s) {
  CountingAllocator method_allocator(
      "method pool", "; or the temp pool below its threshold: kernel resolution then comes here, see pools.h",
      static_cast<uint32_t>(s.method_pool_bytes), s.method_pool);
  CountingAllocator temp_allocator("temp pool", "", static_cast<uint32_t>(s.temp_pool_bytes), s.temp_pool);
  HierarchicalAllocator planned(Span<Span<uint8_t>>(s.planned, s.num_planned));
  // no temp pool (-DPTE_LAB_NO_TEMP_POOL): no temp allocator, as a runner that passes none
  MemoryManager memory(&method_allocator, &planned, s.temp_pool != nullptr ? &temp_allocator : nullptr);
  auto method = program.load_method(s.name, &memory);
  if (!method.ok()) return method.error();
  for (int i = 0; i < 2; i++) {
    if (Error e = s.set_inputs(*method); e != Error::Ok) return e;
    if (Error e = method->execute(); e != Error::Ok) return e;
  }
  PTE_LAB_PRINT("method %%s: loaded and executed twice; method pool %%u B used of %%u; temp pool: at most %%u B "
                "held at once, of %%u\n", s.name, static_cast<unsigned>(method_allocator.used_size()),
                static_cast<unsigned>(s.method_pool_bytes), static_cast<unsigned>(temp_allocator.peak),
                static_cast<unsigned>(s.temp_pool_bytes));
  for (size_t i = 0; i < method->outputs_size(); i++) print_output(s.name, i, method->get_output(i));
  return Error::Ok;
}

}  // namespace

int main() {
  executorch::runtime::runtime_init();
  int missing = 0;
  for (const char* op : kOperators) {
    if (op != nullptr && !executorch::runtime::registry_has_op_function(op)) {
      PTE_LAB_PRINT("operator %%s is not registered: build its kernel into the target's libraries (see build.sh)\n", op);
      missing++;
    }
  }
  for (const char* b : kBackends) {
    if (b != nullptr && executorch::runtime::get_backend_class(b) == nullptr) {
      PTE_LAB_PRINT("backend %%s is not registered: link its library whole (see build.sh)\n", b);
      missing++;
    }
  }
  if (missing) return 2;
  BufferDataLoader loader(pte_lab_program, pte_lab_program_bytes);
  auto program = Program::load(&loader);
  if (!program.ok()) {
    PTE_LAB_PRINT("Program::load: error 0x%%x\n", static_cast<unsigned>(program.error()));
    return 1;
  }
  int failed = 0;
  for (const MethodSetup* s : kMethods) {
    Error e = run(*program, *s);
    if (e != Error::Ok) {
      PTE_LAB_PRINT("method %%s: error 0x%%x (0x21: MemoryAllocationFailed, a pool too small)\n", s->name,
                    static_cast<unsigned>(e));
      failed++;
    }
  }
%(new_pool_report)s  PTE_LAB_PRINT(failed ? "pte_lab runner: %%d method(s) failed\n"
                        : "pte_lab runner: ok, every method loaded and executed in the pools of pools.h\n", failed);
  return failed ? 1 : 0;
}
'''

_BUILD = r'''#!/bin/sh
# Builds the bare-metal runner for %(target)s with arm-none-eabi-g++ (Debian's gcc-arm-none-eabi).
#   EXECUTORCH_INCLUDE           ExecuTorch's headers: those of the source you built the libraries from
#                                (default: the executorch %(version)s wheel's, which must be that version)
#   EXECUTORCH_CORTEX_M_LIB_DIR  your build of ExecuTorch's static libraries for the target (searched below)
#   LDFLAGS                      your board's startup code and linker script (see "To boot" below)
#   CXXFLAGS_EXTRA               e.g. -DPTE_LAB_NO_TEMP_POOL: the "method alone" pools of pools.h (no temp
#                                allocator), where the method has them
# ./build.sh --compile-only compiles main.cpp without linking (no target libraries needed).
#
# The libraries for the target: ExecuTorch %(version)s's source (the same version as the headers), configured
# for the target and its bare-metal platform layer, with only this program's operators:
#   cmake -S executorch -B build-%(target)s --preset arm-baremetal -DCMAKE_BUILD_TYPE=Release \
#     -DEXECUTORCH_PAL_DEFAULT=minimal -DEXECUTORCH_SELECT_OPS_LIST=%(ops)s
#   cmake --build build-%(target)s -j
# - the minimal platform layer: its et_pal_allocate returns nullptr, as pools.h assumes (posix's mallocs);
# - -DEXECUTORCH_SELECT_OPS_LIST (or -DEXECUTORCH_SELECT_OPS_MODEL=the .pte): the operators above, %(n_ops)d of
#   them; every portable kernel (about 180) does not fit a microcontroller's flash;
# - the same CPU flags as below (%(flags)s) in the toolchain file, and
#   -DC10_USING_CUSTOM_GENERATED_MACROS, as ExecuTorch's own Arm build sets them;
# - flatc from ExecuTorch's pinned flatbuffers (its third-party/flatbuffers, v24.3.25): an older one (Debian's
#   2.0.8) fails on its schema;
# - ExecuTorch's CMake builds position-independent code: keep .got inside the .data your startup copies to
#   RAM, or configure with -DCMAKE_POSITION_INDEPENDENT_CODE=OFF (a .got left out reads zeros: outputs are NaN,
#   with no error);
# - -DEXECUTORCH_ENABLE_LOGGING=ON keeps the runtime's own error lines (Release drops them); the runner's
#   lines are printf's either way.
# Placement: program.h's array, %(program_bytes)s B, is %(program_place)s; the pools and planned buffers
# (pools.h) are zero-initialised RAM (.bss): put each where your linker script says, by section if need be.
# To boot: newlib's default, --specs=nosys.specs, links but has no vector table, startup code or memory map, so
# the ELF does not run. Give LDFLAGS your board's (a CMSIS device's startup and linker script; Arm's
# Corstone targets: ethos-u-core-platform), and route printf (the runner's lines) to your UART, or use
# semihosting under a debugger or QEMU (--specs=rdimon.specs, or define PTE_LAB_PRINT: see main.cpp). pte_lab's
# repository has a startup and linker script for QEMU's Cortex-M55 board (mps3-an547), and a script that builds
# these libraries and runs this runner there: benchmarks/cortex_m_qemu/.
%(notes)sset -eu
cd "$(dirname "$0")"
INC_DEFAULT=%(include)s
INC="${EXECUTORCH_INCLUDE:-$INC_DEFAULT}"
CXXFLAGS="%(flags)s -std=c++17 -Os -fno-exceptions -fno-rtti -DC10_USING_CUSTOM_GENERATED_MACROS ${CXXFLAGS_EXTRA:-}"
arm-none-eabi-g++ $CXXFLAGS -I"$INC" -I"$INC/executorch/runtime/core/portable_type/c10" -c main.cpp -o main.o
if [ "${1:-}" = "--compile-only" ]; then
  echo "build.sh: compiled main.o against ExecuTorch's headers (not linked: set EXECUTORCH_CORTEX_M_LIB_DIR and run build.sh without --compile-only to link the runner)"
  exit 0
fi
LIB="${EXECUTORCH_CORTEX_M_LIB_DIR:?set EXECUTORCH_CORTEX_M_LIB_DIR to your ExecuTorch build for the target}"
# find NAME: the library's path under $LIB; "a|b": the first found; "name?": optional
find_lib() {
  for name in $(echo "${1%%\?}" | tr '|' ' '); do
    found=$(find "$LIB" -name "$name" -print 2>/dev/null | head -n 1)
    [ -n "$found" ] && { echo "$found"; return 0; }
  done
  case "$1" in *\?) return 0 ;; esac
  echo "build.sh: $1 is not under $LIB: build it (see the top of this file)" >&2
  exit 1
}
WHOLE=""; for l in %(whole)s; do WHOLE="$WHOLE $(find_lib "$l")"; done
USUAL=""; for l in %(usual)s; do USUAL="$USUAL $(find_lib "$l")"; done
# the registering libraries linked whole (their kernels and backends register from static initialisers)
arm-none-eabi-g++ %(flags)s main.o -Wl,--whole-archive $WHOLE -Wl,--no-whole-archive $USUAL \
  ${LDFLAGS:---specs=nosys.specs} -o runner.elf
echo "built runner.elf: run it on the board (or a simulator); it prints each method's pools used and outputs, and"
echo "exits 0 when every method loaded and executed twice in the pools of pools.h (1: a method failed, 2: a"
echo "kernel or backend is missing)"
'''


def _given(sizes, pte, target: str, methods: list[str] | None):
    if target not in TARGET_FLAGS:
        raise PteLabError(f"no bare-metal runner for target {target!r} (pte_lab writes one for "
                          f"{', '.join(TARGET_FLAGS)})")
    pools = {n: p for n, p in target_pools(sizes, pte, target).items()
             if (methods is None or n in methods) and p.method_pool is not None}
    if not pools:
        raise PteLabError(f"{sizes.path}: no method has pools on {target}: see pte-lab sizes --target {target}")
    return pools, c_identifiers(list(pools))


def target_header(sizes, pte, target: str = "cortex-m", methods: list[str] | None = None) -> str:
    """``pools.h`` alone: the pools and planned buffers of every method that has pools on ``target``."""
    pools, ids = _given(sizes, pte, target, methods)
    return _pools_h(pools, ids, target, os.path.basename(sizes.path), sizes, new_blocks(pte, pools, target))


def bare_metal_runner(sizes, pte, target: str = "cortex-m", methods: list[str] | None = None) -> dict[str, str]:
    """The files (name -> text) of the bare-metal runner for ``target``; raises :class:`PteLabError` when no
    method has pools there."""
    pools, ids = _given(sizes, pte, target, methods)
    sized = [sizes.methods[n] for n in pools]
    blocks = new_blocks(pte, pools, target)
    # operator new and delete replaced in the global namespace, before the runner's own (anonymous) one
    body = [_PRELUDE.replace("\nnamespace {\n", _NEW_POOL + "\nnamespace {\n", 1).replace(
        "Every pool is static, of\n// the sizes pools.h gives for this target;",
        "Every pool is static, of\n// the sizes pools.h gives for this target, operator new's too (below);", 1)
        if blocks else _PRELUDE]
    staging = staging_bytes(sized)
    if staging:
        body += ["// the planned inputs' source (zeros): set_input copies each into its planned buffer, so one buffer",
                 f"// of the largest serves them all; the runner's own, {staging} B beyond the board's total",
                 f"alignas(16) uint8_t {STAGING}[{staging}];", ""]
    for m in sized:
        body += [*_method_block(m, ids[m.method].upper(), ids[m.method]), ""]
    ops = sorted({o for m in sized for o in m.operators})
    backends = sorted({b for m in sized for b in m.backends})
    body.append(_MAIN % {"methods": ", ".join(f"&{ids[m.method]}_setup" for m in sized),
                         "operators": ", ".join(map(c_string, ops)) or "nullptr",
                         "backends": ", ".join(map(c_string, backends)) or "nullptr",
                         "new_pool_report": _NEW_POOL_REPORT if blocks else ""})
    main = "\n".join(body)
    with open(sizes.path, "rb") as f:
        data = f.read()
    notes = "".join(f"# {line}\n" for b in backends for line in BACKEND_BUILD_NOTES.get(b, ()))
    if blocks:
        notes += (f"# operator new: the delegates allocate {sum(b for _, b in blocks)} B with it at load_method "
                  f"({sh_comment(', '.join(sorted({w for w, _ in blocks})))}); main.cpp serves it from a static "
                  f"pool of\n# PTE_LAB_OPERATOR_NEW_POOL_BYTES (pools.h): no heap needed. CXXFLAGS_EXTRA="
                  f"-DPTE_LAB_USE_HEAP takes it from your C library's\n# heap instead (these bytes plus its per-block "
                  f"overhead).\n")
    whole, usual = _libraries(sized)
    build = _BUILD % {"target": target, "notes": notes, "include": sh_word(executorch_dir() / "include"),
                      "flags": TARGET_FLAGS[target], "version": sh_comment(executorch_version()),
                      "ops": sh_comment(sh_word(",".join(ops))),
                      "n_ops": len(ops), "program_bytes": f"{len(data):,}",
                      "program_place": "writable, in RAM (.data): the Ethos-U blob's scratch is a block of it"
                      if any(m.program_in_ram for m in sized) else "const, in flash (.rodata)", "whole": sh_words(whole),
                      "usual": sh_words(usual)}
    return {"pools.h": _pools_h(pools, ids, target, os.path.basename(sizes.path), sizes, blocks), "program.h": _program_h(data, next((m.program_in_ram_why for m in sized if m.program_in_ram), None)),
            "main.cpp": main, "build.sh": build}


def write_bare_metal_runner(sizes, pte, folder, target: str = "cortex-m", methods: list[str] | None = None) -> list[str]:
    """Write :func:`bare_metal_runner`'s files into ``folder`` (made if missing); returns their paths."""
    files = bare_metal_runner(sizes, pte, target, methods)
    for name in BARE_METAL_FILES:  # before any is written: none may be a FIFO, a device or a link
        check_writable(os.path.join(folder, name), "a file to write")
    os.makedirs(folder, exist_ok=True)
    paths = []
    for name in BARE_METAL_FILES:
        path = os.path.join(folder, name)
        with open(path, "w") as f:
            f.write(files[name])
        if name.endswith(".sh"):
            os.chmod(path, 0o755)
        paths.append(path)
    return paths
