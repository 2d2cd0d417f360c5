"""An example C++ runner for a sized program: ``pools.h``, ``main.cpp`` and ``build.sh``.

``pte-lab sizes FILE --example-runner DIR`` writes them. ``main.cpp`` takes every
size from the header's macros (static pools and planned buffers, inputs and
outputs), loads the program with a ``FileDataLoader``, and for every method
sized loads it and executes it twice, setting every input before each
execute. ``build.sh`` builds it against the installed executorch wheel twice:
``runner`` (method + temp pools) and ``runner_no_temp`` (the method pool alone,
``-DPTE_LAB_NO_TEMP_POOL``). ``--method-pool BYTES`` / ``--temp-pool BYTES`` give
the allocators fewer bytes than the static pools hold (to see one byte less
refused); a temp allocation refused during an execute that still returns Ok is
counted and makes the runner fail. Run under ``LD_PRELOAD`` of pte_lab's
allocation counter, it prints the heap it took from the data loader's creation
on (with ``--method NAME``: what the header's ``<M>_HEAP_PEAK_BYTES`` measures, the highest seen over the
sizing's fresh runs; the heap can change with the CPU and the run, the pools cannot).

On a microcontroller ExecuTorch is compiled from source for the target (with
the operators the header lists selected); ``pools.h`` and ``main.cpp`` stay the
same, the data loader is usually a ``BufferDataLoader`` over the program in
flash.
"""

from __future__ import annotations

import os
import textwrap
from typing import TYPE_CHECKING

from ...errors import PteLabError
from ...format.regular_file import check_writable
from ...runtime.libraries import AS_NEEDED, compile_flags, link_flags
from ...shell_text import sh_comment, sh_echo, sh_word, sh_words
from ...vocabulary import ValueKind
from ..c_text import c_comment as _comment
from ..c_text import c_string
from .sizes import c_header, c_identifiers

if TYPE_CHECKING:  # pragma: no cover
    from ...runtime.sizing import MethodSizes, Sizes

__all__ = ["example_runner", "write_example_runner", "left_out", "main_cpp", "build_script", "FILES"]

#: the files written, in order
FILES = ("pools.h", "main.cpp", "build.sh")


def _runnable(m: "MethodSizes") -> str | None:
    """Why the example cannot run ``m`` (None: it can)."""
    devices = sorted({d for _, d, _ in m.planned if d != "cpu"})
    if devices:
        return f"it plans memory on {', '.join(devices)}: register that device's allocator first"
    if m.stand_ins:
        return (f"it was measured with pte_lab's stand-ins for {', '.join(m.stand_ins)}, which the executorch wheel "
                f"lacks: build ExecuTorch from source with them for the target")
    odd = [io.kind for io in m.inputs if io.kind != ValueKind.TENSOR and io.value is None]
    if odd:
        return f"it takes {', '.join(odd)} inputs, which the example does not set"
    return None


def _method_block(m: "MethodSizes", up: str, low: str) -> list[str]:
    """Static pools, planned buffers and inputs of one method, and its setup record."""
    P = f"PTE_LAB_{up}"
    out = [f"// ---- method \"{_comment(m.method)}\": every size from pools.h",
           "#ifdef PTE_LAB_NO_TEMP_POOL",
           f"#ifdef {P}_METHOD_POOL_ALONE_BYTES",
           f"#define {up}_POOL_BYTES {P}_METHOD_POOL_ALONE_BYTES",
           "#else",
           f"#define {up}_POOL_BYTES 0u  // it cannot run without a temp allocator (see pools.h)",
           "#endif",
           f"uint8_t* const {low}_temp_pool = nullptr;",
           f"const size_t {low}_temp_pool_bytes = 0;",
           "#else",
           f"#define {up}_POOL_BYTES {P}_METHOD_POOL_BYTES",
           f"alignas(PTE_LAB_POOL_ALIGNMENT) uint8_t {low}_temp_pool[PTE_LAB_ARRAY({P}_TEMP_POOL_BYTES)];",
           f"const size_t {low}_temp_pool_bytes = {P}_TEMP_POOL_BYTES;",
           "#endif",
           f"alignas(PTE_LAB_POOL_ALIGNMENT) uint8_t {low}_method_pool[PTE_LAB_ARRAY({up}_POOL_BYTES)];"]
    spans = []
    for i in range(len(m.planned)):
        out.append(f"alignas(PTE_LAB_PLANNED_BUFFER_ALIGNMENT) uint8_t {low}_planned_{i}"
                   f"[PTE_LAB_ARRAY({P}_PLANNED_BUFFER_{i}_BYTES)];")
        spans.append(f"{{{low}_planned_{i}, {P}_PLANNED_BUFFER_{i}_BYTES}}")
    n_planned = len(spans)
    if spans:
        out.append(f"Span<uint8_t> {low}_planned[] = {{{', '.join(spans)}}};")
    else:
        out.append(f"Span<uint8_t>* const {low}_planned = nullptr;")
    # inputs: a zeroed buffer and a TensorImpl per tensor, rebuilt from the header's arrays
    setters = []
    for io in m.inputs:
        p, q = f"{P}_INPUT_{io.index}", f"pte_lab_{low}_input_{io.index}"
        if io.kind == ValueKind.TENSOR:
            buf = f"{low}_input_{io.index}"
            out.append(f"alignas(PTE_LAB_PLANNED_BUFFER_ALIGNMENT) uint8_t {buf}[PTE_LAB_ARRAY({p}_BYTES)];")
            if io.shape:
                out.append(f"TensorMeta {buf}_meta({p}_DIM, {q}_sizes, {q}_dim_order, {q}_strides);")
            else:
                out.append(f"TensorMeta {buf}_meta(0, nullptr, nullptr, nullptr);")
            out.append(f"TensorImpl {buf}_impl(static_cast<ScalarType>({p}_SCALAR_TYPE), {p}_DIM, "
                       f"{buf}_meta.sizes, {buf}, {buf}_meta.dim_order, {buf}_meta.strides);")
            setters.append(f"  std::memset({buf}, 0, {p}_BYTES);  // zeros, as pte_lab sized it\n"
                           f"  if (Error e = method.set_input(EValue(Tensor(&{buf}_impl)), {io.index}); e != Error::Ok) "
                           f"return e;")
        else:
            kind = {"Bool": "BOOL", "Double": "DOUBLE"}.get(io.kind, "INT")
            ctype = {"BOOL": "bool", "DOUBLE": "double", "INT": "int64_t"}[kind]
            setters.append(f"  if (Error e = method.set_input(EValue(static_cast<{ctype}>({p}_{kind}_VALUE)), "
                           f"{io.index}); e != Error::Ok) return e;  // the value the program holds")
    out.append(f"Error {low}_set_inputs(Method& method) {{")
    out += setters or ["  (void)method;"]
    out += ["  return Error::Ok;", "}"]
    # outputs the caller provides (alloc_graph_output=False)
    outs = [io for io in m.outputs if io.kind == ValueKind.TENSOR and not io.planned]
    provide = []
    for io in outs:
        p = f"{P}_OUTPUT_{io.index}"
        out.append(f"alignas(PTE_LAB_PLANNED_BUFFER_ALIGNMENT) uint8_t {low}_output_{io.index}"
                   f"[PTE_LAB_ARRAY({p}_BYTES)];")
        provide.append(f"  if (Error e = method.set_output_data_ptr({low}_output_{io.index}, {p}_BYTES, {io.index}); "
                       f"e != Error::Ok) return e;")
    out.append(f"Error {low}_provide_outputs(Method& method) {{")
    out += provide or ["  (void)method;"]
    out += ["  return Error::Ok;", "}"]
    out.append(f"const MethodSetup {low}_setup = {{{c_string(m.method)}, {low}_method_pool, {up}_POOL_BYTES, "
               f"{low}_temp_pool, {low}_temp_pool_bytes, {low}_planned, {n_planned}, "
               f"{low}_set_inputs, {low}_provide_outputs}};")
    return out


_PRELUDE = r'''#include <executorch/extension/data_loader/file_data_loader.h>
#include <executorch/extension/flat_tensor/flat_tensor_data_map.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/core/memory_allocator.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/platform/runtime.h>

#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using executorch::aten::TensorImpl;
using executorch::extension::FileDataLoader;
using executorch::extension::FlatTensorDataMap;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::HierarchicalAllocator;
using executorch::runtime::MemoryAllocator;
using executorch::runtime::MemoryManager;
using executorch::runtime::Method;
using executorch::runtime::NamedDataMap;
using executorch::runtime::Program;
using executorch::runtime::Result;
using executorch::runtime::Span;

// C and C++ have no zero-length arrays: a zero-byte buffer gets one byte (the runtime is told 0)
#define PTE_LAB_ARRAY(n) ((n) > 0 ? (n) : 1)
#ifndef PTE_LAB_FILE_LOADER_ALIGNMENT
#define PTE_LAB_FILE_LOADER_ALIGNMENT alignof(std::max_align_t)
#endif

namespace {

// A tensor's sizes, dim order and strides from pools.h, in the mutable arrays TensorImpl takes.
struct TensorMeta {
  executorch::aten::SizesType sizes[16];
  executorch::aten::DimOrderType dim_order[16];
  executorch::aten::StridesType strides[16];
  TensorMeta(size_t dim, const int32_t* s, const uint8_t* d, const int32_t* st) {
    for (size_t i = 0; i < dim; i++) {
      sizes[i] = s[i];
      dim_order[i] = d[i];
      strides[i] = st[i];
    }
  }
};

// A MemoryAllocator that counts what it refuses: a kernel's temp allocation refused during execute is
// only logged by ExecuTorch ("Failed to allocate temp memory"), and execute may still return Ok.
class CountingAllocator final : public MemoryAllocator {
 public:
  CountingAllocator(uint32_t size, uint8_t* base) : MemoryAllocator(size, base) {}
  void* allocate(size_t size, size_t alignment = kDefaultAlignment) override {
    void* p = MemoryAllocator::allocate(size, alignment);
    if (p == nullptr) refused++;
    return p;
  }
  size_t refused = 0;
};

// pte_lab's allocation counter, when preloaded (LD_PRELOAD=libpte_lab_counter.so): the heap this runner
// takes. Its record starts with the heap's live bytes and their peak since the last reset.
struct HeapCounts {
  int64_t live, peak, rest[30];
};
struct HeapCounter {
  void (*read)(HeapCounts*) = reinterpret_cast<void (*)(HeapCounts*)>(dlsym(RTLD_DEFAULT, "pte_lab_counter_read"));
  void (*reset)() = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "pte_lab_counter_reset_peaks"));
  HeapCounts start{};
  bool on() const { return read != nullptr && reset != nullptr; }
  void begin() {
    if (!on()) return;
    reset();
    read(&start);
  }
  int64_t peak() {
    HeapCounts now{};
    read(&now);
    return now.peak - start.live;
  }
};

struct MethodSetup {
  const char* name;
  uint8_t* method_pool;
  size_t method_pool_bytes;  // 0: the method cannot run in this configuration
  uint8_t* temp_pool;        // nullptr: no temp allocator
  size_t temp_pool_bytes;
  Span<uint8_t>* planned;
  size_t num_planned;
  Error (*set_inputs)(Method&);
  Error (*provide_outputs)(Method&);
};
'''

_MAIN = r'''
const MethodSetup* const kMethods[] = {%(methods)s};

// FNV-1a of an output's bytes: the same inputs must give the same bytes on every execute
uint64_t fingerprint(const void* data, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ static_cast<const uint8_t*>(data)[i]) * 1099511628211ull;
  return h;
}

int fail(const char* method, const char* step, Error e) {
  std::printf("%%s: %%s failed: %%s (0x%%02x)\n", method, step, executorch::runtime::to_string(e),
              static_cast<unsigned>(e));
  return 1;
}

int run(const MethodSetup& s, const Program& program, const NamedDataMap* data, size_t method_pool_bytes,
        size_t temp_pool_bytes) {
  if (s.method_pool_bytes == 0) {
    std::printf("%%s: skipped: it cannot run without a temp allocator (pools.h)\n", s.name);
    return 0;
  }
  if (method_pool_bytes == 0 || method_pool_bytes > s.method_pool_bytes) method_pool_bytes = s.method_pool_bytes;
  if (temp_pool_bytes == SIZE_MAX || temp_pool_bytes > s.temp_pool_bytes) temp_pool_bytes = s.temp_pool_bytes;
  MemoryAllocator method_allocator(static_cast<uint32_t>(method_pool_bytes), s.method_pool);
  CountingAllocator temp_allocator(static_cast<uint32_t>(temp_pool_bytes), s.temp_pool);
  HierarchicalAllocator planned(Span<Span<uint8_t>>(s.planned, s.num_planned));
  MemoryManager memory(&method_allocator, &planned, s.temp_pool != nullptr ? &temp_allocator : nullptr);
  Result<Method> method = program.load_method(s.name, &memory, nullptr, data);
  if (!method.ok()) return fail(s.name, "load_method", method.error());
  std::printf("%%s: loaded: method pool %%zu of %%zu bytes used, temp pool %%s%%zu bytes\n", s.name,
              method_allocator.used_size(), method_pool_bytes, s.temp_pool ? "" : "none, ",
              s.temp_pool ? temp_pool_bytes : 0);
  if (Error e = s.provide_outputs(*method); e != Error::Ok) return fail(s.name, "set_output_data_ptr", e);
  for (int run = 1; run <= 2; run++) {
    if (Error e = s.set_inputs(*method); e != Error::Ok) return fail(s.name, "set_input", e);  // before every execute
    if (Error e = method->execute(); e != Error::Ok) return fail(s.name, "execute", e);
    std::printf("%%s: execute %%d ok", s.name, run);
    for (size_t i = 0; i < method->outputs_size(); i++) {
      const EValue& out = method->get_output(i);
      if (out.isTensor()) {
        std::printf(", output %%zu: %%zu bytes, fingerprint %%016llx", i, out.toTensor().nbytes(),
                    static_cast<unsigned long long>(fingerprint(out.toTensor().const_data_ptr(), out.toTensor().nbytes())));
      } else if (out.isInt()) {
        std::printf(", output %%zu: %%lld", i, static_cast<long long>(out.toInt()));
      } else if (out.isBool()) {
        std::printf(", output %%zu: %%s", i, out.toBool() ? "true" : "false");
      }
    }
    std::printf("\n");
  }
  if (temp_allocator.refused != 0) {  // execute returned Ok, but a kernel went without its scratch
    std::printf("%%s: %%zu temp allocations refused during execute (it returned Ok)\n", s.name,
                temp_allocator.refused);
    return 1;
  }
  return 0;
}

int usage(const char* argv0) {
  std::printf("usage: %%s PROGRAM.pte [--data FILE.ptd] [--method NAME] [--method-pool BYTES] [--temp-pool BYTES]\n",
              argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const char* path = nullptr;
  const char* data_path = nullptr;
  const char* only = nullptr;
  size_t method_pool_bytes = 0;       // 0: the static pool's size (pools.h)
  size_t temp_pool_bytes = SIZE_MAX;  // SIZE_MAX: the static pool's size
  for (int a = 1; a < argc; a++) {
    if (std::strcmp(argv[a], "--data") == 0 && a + 1 < argc) {
      data_path = argv[++a];
    } else if (std::strcmp(argv[a], "--method") == 0 && a + 1 < argc) {
      only = argv[++a];
    } else if (std::strcmp(argv[a], "--method-pool") == 0 && a + 1 < argc) {
      method_pool_bytes = std::strtoull(argv[++a], nullptr, 10);
    } else if (std::strcmp(argv[a], "--temp-pool") == 0 && a + 1 < argc) {
      temp_pool_bytes = std::strtoull(argv[++a], nullptr, 10);
    } else if (path == nullptr && argv[a][0] != '-') {
      path = argv[a];
    } else {
      return usage(argv[0]);
    }
  }
  if (path == nullptr) return usage(argv[0]);
  executorch::runtime::runtime_init();
#ifdef PTE_LAB_NO_TEMP_POOL
  std::printf("configuration: method pool alone (no temp allocator)\n");
#else
  std::printf("configuration: method + temp pools\n");
#endif
  HeapCounter heap;
  heap.begin();  // from the data loader's creation on, as pools.h's HEAP figures (the highest seen while sizing:
                 // this run's can differ, with the CPU and the run)
  // FileDataLoader reads the program's flatbuffer and segments into heap buffers (pools.h's HEAP figures
  // count them); on a board a BufferDataLoader over the program in flash reads nothing
  Result<FileDataLoader> loader = FileDataLoader::from(path, PTE_LAB_FILE_LOADER_ALIGNMENT);
  if (!loader.ok()) return fail(path, "FileDataLoader::from", loader.error());
  Result<Program> program = Program::load(&loader.get());
  if (!program.ok()) return fail(path, "Program::load", program.error());
  std::optional<FileDataLoader> data_loader;
  std::optional<FlatTensorDataMap> data_map;
  if (data_path != nullptr) {
    Result<FileDataLoader> l = FileDataLoader::from(data_path, PTE_LAB_FILE_LOADER_ALIGNMENT);
    if (!l.ok()) return fail(data_path, "FileDataLoader::from", l.error());
    data_loader.emplace(std::move(l.get()));
    Result<FlatTensorDataMap> m = FlatTensorDataMap::load(&*data_loader);
    if (!m.ok()) return fail(data_path, "FlatTensorDataMap::load", m.error());
    data_map.emplace(std::move(m.get()));
  }
  int status = 0, ran = 0;
  for (const MethodSetup* s : kMethods) {
    if (only != nullptr && std::strcmp(only, s->name) != 0) continue;
    ran++;
    status |= run(*s, program.get(), data_map ? &*data_map : nullptr, method_pool_bytes, temp_pool_bytes);
  }
  if (ran == 0) {
    std::printf("no method %%s in this runner\n", only ? only : "");
    return 2;
  }
  if (heap.on()) {
    std::printf("heap: peak %%lld bytes from the data loader's creation through the executes\n",
                static_cast<long long>(heap.peak()));
  }
  return status;
}
'''


def main_cpp(sizes: "Sizes", methods: list[str] | None = None) -> str:
    """``main.cpp``: static pools and buffers from ``pools.h``'s macros, two executes per method."""
    names = [n for n in (methods or list(sizes.methods)) if n in sizes.methods]
    idents = c_identifiers(sizes.methods)
    head = [f"// An example runner for {_comment(os.path.basename(sizes.path))}, written by pte_lab from pools.h: every size",
            "// is one of its macros. Each method is loaded with static pools of exactly those sizes and executed",
            "// twice, every input set (zeros) before each execute. Build: ./build.sh (against the executorch",
            "// wheel); -DPTE_LAB_NO_TEMP_POOL gives the method pool alone, with no temp allocator. On a",
            "// microcontroller, compile ExecuTorch from source for the target: pools.h and this file stay the same.",
            "",
            '#include "pools.h"', "", _PRELUDE]
    body, setups = [], []
    for n in names:
        m = sizes.methods[n]
        why = _runnable(m)
        if why is not None:
            body += [f"// method \"{_comment(n)}\" is not in this example: {_comment(why)}", ""]
            continue
        body += _method_block(m, idents[n].upper(), idents[n]) + [""]
        setups.append(f"&{idents[n]}_setup")
    return "\n".join(head + body) + _MAIN % {"methods": ", ".join(setups)}


def build_script(sizes: "Sizes", methods: list[str] | None = None) -> str:
    """``build.sh``: builds ``runner`` and ``runner_no_temp`` against the installed executorch wheel."""
    names = [n for n in (methods or list(sizes.methods)) if n in sizes.methods]
    libs, seen = [], set()
    for n in names:
        for lib in sizes.methods[n].libraries:
            if lib.path not in seen:
                seen.add(lib.path)
                libs.append(lib)
    cflags = sh_words(["-std=c++17", "-O2", *compile_flags()])
    lflags = sh_words(link_flags(libs))
    run = "./runner " + sh_word(os.path.abspath(sizes.path))

    why = "\n".join("# " + line for line in textwrap.wrap(AS_NEEDED[0].upper() + AS_NEEDED[1:] + ".", 100))
    return f"""#!/bin/sh
# Builds the example runner against the executorch {sh_comment(sizes.executorch_version)} wheel this machine has
# (written by pte_lab). runner: method + temp pools; runner_no_temp: the method pool alone.
# A microcontroller build compiles ExecuTorch from source instead; pools.h and main.cpp stay the same.
# CXX picks the compiler (default c++); CXXFLAGS adds flags of your own.
{why}
set -e
cd "$(dirname "$0")"
CXX="${{CXX:-c++}}"
$CXX ${{CXXFLAGS:-}} {cflags} main.cpp -o runner {lflags}
$CXX ${{CXXFLAGS:-}} {cflags} -DPTE_LAB_NO_TEMP_POOL main.cpp -o runner_no_temp {lflags}
{sh_echo("built runner and runner_no_temp; run: " + run)}
"""


def example_runner(sizes: "Sizes", methods: list[str] | None = None) -> dict[str, str]:
    """The example runner's files (:data:`FILES`): name -> text."""
    return {"pools.h": c_header(sizes), "main.cpp": main_cpp(sizes, methods), "build.sh": build_script(sizes, methods)}


def left_out(sizes: "Sizes", methods: list[str] | None = None) -> dict[str, str]:
    """The methods the example runner leaves out, each with why (a device allocator, stand-ins, inputs)."""
    names = [n for n in (methods or list(sizes.methods)) if n in sizes.methods]
    return {n: why for n in names if (why := _runnable(sizes.methods[n])) is not None}


def write_example_runner(sizes: "Sizes", folder, methods: list[str] | None = None) -> list[str]:
    """Write the example runner's files into ``folder`` (created); returns their paths.

    Raises :class:`~pte_lab.PteLabError`, writing nothing, when the runner would run no method.
    """
    names = [n for n in (methods or list(sizes.methods)) if n in sizes.methods]
    out = left_out(sizes, names)
    if names and len(out) == len(names):
        raise PteLabError(
            f"nothing runnable to write: the example runner would run no method of "
            f"{os.path.basename(sizes.path)} ("
            + "; ".join(f"method {n!r}: {why}" for n, why in out.items())
            + "). No file was written; the C header alone (pte-lab sizes --c-header) still gives the pools")
    folder = os.fspath(folder)
    files = example_runner(sizes, methods)
    for name in files:  # before any is written: none may be a FIFO, a device or a link
        check_writable(os.path.join(folder, name), "a file to write")
    os.makedirs(folder, exist_ok=True)
    paths = []
    for name, text in files.items():
        path = os.path.join(folder, name)
        with open(path, "w") as f:
            f.write(text)
        if name.endswith(".sh"):
            os.chmod(path, 0o755)
        paths.append(path)
    return paths
