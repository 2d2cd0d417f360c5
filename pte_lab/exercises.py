"""The notebooks' exercises: self-checks, and reference solutions computed from real programs.

Each notebook ends with a few exercises. A learner writes an answer and runs
``check("02.1", answer)``: the verdict says whether it is right, and gives a
hint when it is not, without showing the solution. No expected value is
written down anywhere: :func:`solution` computes each one from programs it
exports (or that the notebook passes in), so the exercises follow ExecuTorch
as it changes, and the test suite runs every reference solution through its
own check. A right answer is looked up once more in a source other than
pte_lab (:func:`cross_check`: ExecuTorch's own deserializer or activation
memory profiler), and the verdict says whether it agrees.

>>> from pte_lab.exercises import check
>>> check("02.2", 112)             # doctest: +SKIP
Not quite (02.2). Hint: ...
"""

from __future__ import annotations

import functools
import json
import math
import numbers
import os
import re
import runpy
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any
from collections.abc import Callable

from . import examples, planning
from .errors import TARGET_CHANGED
from .model import open_pte
from .model.ethos_u import io_checks
from .model.diff import TargetChangeKind, diff_programs
from .planning.at_bound import Predictor, largest_bound, what_if
from .quiet import quiet, quiet_import
from .units import align_up
from .vocabulary import Role, InstructionKind

__all__ = ["check", "solution", "cross_check", "EXERCISES", "Exercise", "Verdict"]


@dataclass(frozen=True)
class Exercise:
    id: str
    #: the question, as the notebook asks it
    task: str
    #: what to look at when the answer is wrong (never the answer)
    hint: str
    #: computes the reference answer with pte_lab; keyword arguments the notebook may pass to save work
    solve: Callable[..., Any]
    #: computes the same answer from a source other than pte_lab (same keyword arguments)
    cross: Callable[..., Any]
    #: that source, as the verdict names it ("ExecuTorch's own deserializer ...")
    checked_by: str
    #: floats are compared to this relative tolerance; everything else exactly
    rel: float = 1e-3


@dataclass(frozen=True)
class Verdict:
    id: str
    #: True right, False wrong, None not answered yet
    ok: bool | None
    message: str

    def __bool__(self) -> bool:
        return bool(self.ok)

    def __repr__(self) -> str:
        return self.message

    def _repr_html_(self) -> str:
        color = {True: "#1a7f37", False: "#b35900", None: "#57606a"}[self.ok]
        mark = {True: "✔", False: "✘", None: "…"}[self.ok]
        return f"<div style='color:{color}'><b>{mark}</b> {escape(self.message)}</div>"


def _same(answer, expected, rel: float) -> bool:
    """Exact for integers and text, ``rel`` for expected floats, element-wise for tuples and lists; numpy
    numbers count as numbers, text and booleans do not."""
    if isinstance(expected, (tuple, list)):
        return (isinstance(answer, (tuple, list)) and len(answer) == len(expected)
                and all(_same(a, e, rel) for a, e in zip(answer, expected)))
    if isinstance(expected, bool) or isinstance(answer, bool):
        return answer is expected
    if isinstance(expected, numbers.Real):
        if not isinstance(answer, numbers.Real):
            return False
        if isinstance(expected, float):
            return math.isclose(float(answer), expected, rel_tol=rel)
        return answer == expected  # a count of bytes is exact
    return answer == expected


def check(exercise_id: str, answer, **context) -> Verdict:
    """Whether ``answer`` is right; ``context`` passes objects the notebook already has (see each task).

    A right answer is also looked up in a source other than pte_lab (:func:`cross_check`: ExecuTorch's
    own deserializer or its activation memory profiler), and the verdict says whether that source agrees.
    """
    ex = EXERCISES[exercise_id]
    if answer is None or answer is ...:
        return Verdict(exercise_id, None, f"Not answered yet ({exercise_id}): set `answer` and run the cell again.")
    expected = ex.solve(**context)
    if not _same(answer, expected, ex.rel):
        return Verdict(exercise_id, False, f"Not quite ({exercise_id}). Hint: {ex.hint}")
    other = cross_check(exercise_id, **context)
    if other is None:
        return Verdict(exercise_id, True, f"Right ({exercise_id}).")
    if _same(other, expected, ex.rel):
        return Verdict(exercise_id, True, f"Right ({exercise_id}); checked against {ex.checked_by}: the same answer.")
    return Verdict(exercise_id, True, f"Right by pte_lab ({exercise_id}), but {ex.checked_by} gives {other!r}: "
                                      f"one of the two is wrong; please report it to pte_lab.")


def solution(exercise_id: str, **context):
    """The reference answer, computed now by pte_lab."""
    return EXERCISES[exercise_id].solve(**context)


def cross_check(exercise_id: str, **context):
    """The same answer from a source other than pte_lab (see ``Exercise.checked_by``), computed now;
    None where that source cannot say (a program opened from bytes, an LLM export without
    ``llama::update_cache``)."""
    ex = EXERCISES[exercise_id]
    return ex.cross(**context)


# ------------------------------------------------------------------ helpers
@functools.lru_cache(maxsize=16)
def _built(builder: str, kwargs: tuple) -> bytes:
    """An example's bytes, exported once per process (the answer and its cross-check read the same file)."""
    return examples.build(builder, **dict(kwargs))


def _bytes(builder: str, **kwargs) -> bytes:
    return _built(builder, tuple(sorted(kwargs.items())))


def _open(builder: str, **kwargs):
    return open_pte(_bytes(builder, **kwargs))


def _data(pte, builder: str, **kwargs) -> bytes | None:
    """The bytes behind a program the notebook passed (read again from its file; None when it was opened
    from bytes), or the example's when it passed none."""
    if pte is None:
        return _bytes(builder, **kwargs)
    if not pte.path:
        return None
    with open(pte.path, "rb") as f:
        return f.read()


def _load_program_host_bytes(pte, loader: str) -> int:
    cost = pte.load_cost(loader)
    return int(cost[(cost.step == "load_program") & (cost.device == "cpu")].bytes.sum())


# ------------------------------------------- the other sources: ExecuTorch's own tools
def _executorch(module: str):
    """ExecuTorch's ``module``, imported quietly. The first import of exir in a process imports torchao and
    torch, which print "Failed to load .../torchao/_C_mxfp8...so" and "_C_cutlass_90a.abi3.so" (torchao's
    optional CUDA kernels, absent on a CPU host) and a torch ``_pytree`` deprecation warning: the third
    party's import-time diagnostics, not the learner's answer, so they go to :data:`pte_lab.quiet.LOG`
    instead of into the exercise's cell. Nothing else is silenced: what the cross-check itself writes shows."""
    return quiet_import(module)


def _et_plans(data: bytes) -> dict:
    """method -> ExecutionPlan, as ExecuTorch's own deserializer (exir) reads the file: not pte_lab's reader."""
    with quiet():
        # ExecuTorch's .pte (de)serializer is public only under exir._serialize
        from executorch.exir._serialize._program import deserialize_pte_binary  # noqa: PLC2701

        program = deserialize_pte_binary(data).program
    return {plan.name: plan for plan in program.execution_plan}


def _et_devices(plan) -> dict[int, str]:
    """mem_id -> device of the plan's non-CPU arenas (``non_const_buffer_device``), named as ``cuda:0``."""
    return {d.buffer_idx: f"{d.device_type.name.lower()}:{d.device_index}" for d in plan.non_const_buffer_device or []}


def _et_nbytes(tensor) -> int:
    """A deserialized tensor's bytes: exir's own count from its sizes and scalar type."""
    tensors = _executorch("executorch.exir.tensor")  # quietly: see _executorch
    get_scalar_type, num_bytes_from_shape_and_dtype = tensors.get_scalar_type, tensors.num_bytes_from_shape_and_dtype
    return int(num_bytes_from_shape_and_dtype(tuple(tensor.sizes), get_scalar_type(tensor.scalar_type)))


def _et_load_program_host_bytes(data: bytes, loader: str) -> int:
    """Host bytes at load_program by the loader's rule, on ExecuTorch's reading of the arena sizes: per
    runtime index the largest arena over the methods that share (corrected: host-only methods; legacy:
    all, device arenas included)."""
    plans = _et_plans(data).values()
    sharing = [p for p in plans if loader == "legacy" or not _et_devices(p)]
    width = max((len(p.non_const_buffer_sizes) for p in sharing), default=0)
    return sum(max((p.non_const_buffer_sizes[i] for p in sharing if i < len(p.non_const_buffer_sizes)), default=0)
               for i in range(1, width))


def _profiler_peak(manager, method: str = "forward") -> int:
    """The most bytes alive at once by ExecuTorch's activation memory profiler
    (``executorch.util.activation_memory_profiler``, from exir's own lifetimes), not pte_lab's."""
    # quietly (see _executorch): the first import of exir in a notebook's kernel is often this one (01.1's)
    create_tensor_allocation_info = _executorch("executorch.util.activation_memory_profiler").create_tensor_allocation_info

    timeline = create_tensor_allocation_info(manager.exported_program(method).graph)
    return max((sum(a.size_bytes for a in step.allocations) for step in timeline if step), default=0)


def _manager(builder: str, **kwargs):
    with quiet():
        return examples.manager(builder, **kwargs)


DESERIALIZER = "ExecuTorch's own deserializer (exir's deserialize_pte_binary)"
PROFILER = "ExecuTorch's activation memory profiler (exir's own lifetimes)"


# -------------------------------------------------------------- 01: explore
def _peak_without_inputs(pte=None):
    # the inputs left out of the plan: what is alive at each instruction is then the operators' outputs only
    m = (pte or _open("device", side=64)).methods["forward"]
    t = m.tensors[m.tensors.role != Role.INPUT]
    alive = [t[(t["first"] <= i) & (t["last"] >= i)] for i in range(-1, m.n_instructions + 1)]
    peak = max(alive, key=lambda a: int(a.nbytes.sum()))
    return len(peak), int(peak.nbytes.sum())


def _peak_without_inputs_by_profiler(pte=None):
    # exir's own lifetimes (its activation memory profiler), the graph's user inputs left out
    # quietly (see _executorch): the first import of exir in a notebook's kernel is often this one (01.1's)
    create_tensor_allocation_info = _executorch("executorch.util.activation_memory_profiler").create_tensor_allocation_info

    side = pte.methods["forward"].inputs[0].shape[0] if pte is not None else 64
    ep = _manager("device", side=side).exported_program("forward")
    inputs = set(ep.graph_signature.user_inputs)
    steps = [[a for a in step.allocations if a.name not in inputs]
             for step in create_tensor_allocation_info(ep.graph) if step]
    peak = max(steps, key=lambda s: sum(a.size_bytes for a in s))
    return len(peak), sum(a.size_bytes for a in peak)


def _arena_and_file_at_side_32():
    # forward's arena holds the matrices alive at its peak, a quarter as many bytes each at side 32; the file
    # holds the plan (shapes and offsets as numbers), not the arenas, so its size does not follow the matrices
    small = _open("device", side=32)
    return small.methods["forward"].arena(1).size, small.file_size


def _arena_and_file_at_side_32_by_exir():
    data = _bytes("device", side=32)
    return _et_plans(data)["forward"].non_const_buffer_sizes[1], len(data)


# ------------------------------------------------------------- 02: planning
def _greedy_and_best_fit():
    m = _open("hand_sized", extra=True).methods["forward"]
    return m.arena(1).size, planning.plan_arena(planning.build_problem(m, 1), "best_fit")[1]


def _greedy_and_best_fit_by_exir():
    # ExecuTorch's arena as written in the file, and best fit's plan is the bound by exir's own lifetimes
    return (_et_plans(_bytes("hand_sized", extra=True))["forward"].non_const_buffer_sizes[1],
            _profiler_peak(_manager("hand_sized", extra=True)))


def _aligned_lower_bound(odd=None):
    odd = odd or _open("odd").methods["forward"]
    return planning.build_problem(odd, 1, alignment=64).lower_bound


def _aligned_lower_bound_by_profiler(odd=None):
    return align_up(_profiler_peak(_manager("odd")), 64)  # the true bytes alive at once, rounded once


def _arena_by_layers():
    return tuple(_open("transformer", layers=n).methods["forward"].arena(1).size for n in (1, 6))


def _arena_by_layers_by_exir():
    return tuple(_et_plans(_bytes("transformer", layers=n))["forward"].non_const_buffer_sizes[1] for n in (1, 6))


# --------------------------------------------------------------- 03: devices
def _arenas_shrunk_to_side_64(pte=None):
    # each arena of notebook 03's side-256 program minus the same arena of the side-64 export (notebook 01's):
    # the tensors shrink sixteen times, exir's 64 bytes of XNNPACK padding do not
    big, small = pte or _open("device", side=256), _open("device", side=64)
    return tuple(big.methods[name].arena(mem_id).size - small.methods[name].arena(mem_id).size
                 for name, mem_id in SHRUNK_ARENAS)


def _arenas_shrunk_to_side_64_by_exir(pte=None):
    data = _data(pte, "device", side=256)
    if data is None:
        return None
    big, small = _et_plans(data), _et_plans(_bytes("device", side=64))
    return tuple(big[name].non_const_buffer_sizes[mem_id] - small[name].non_const_buffer_sizes[mem_id]
                 for name, mem_id in SHRUNK_ARENAS)


#: the arenas of 03.1, in the order of its answer
SHRUNK_ARENAS = (("forward", 1), ("forward2", 1), ("forward2", 2))


def _corrected_host_bytes(pte=None):
    return _load_program_host_bytes(pte or _open("three_methods", side=64), "corrected")


def _corrected_host_bytes_by_exir(pte=None):
    data = _data(pte, "three_methods", side=64)
    return None if data is None else _et_load_program_host_bytes(data, "corrected")


def _cuda_bytes_per_method():
    pte = _open("device", side=128)
    return tuple(pte.methods[n].planned_bytes_by_device().get("cuda:0", 0) for n in ("forward2", "forward"))


def _cuda_bytes_per_method_by_exir():
    plans = _et_plans(_bytes("device", side=128))
    return tuple(sum(plans[n].non_const_buffer_sizes[i] for i, d in _et_devices(plans[n]).items() if d == "cuda:0")
                 for n in ("forward2", "forward"))


# ---------------------------------------------------------- 04: before/after
def _legacy_extra_host_bytes():
    pte = _open("device", side=2048)
    return _load_program_host_bytes(pte, "legacy") - _load_program_host_bytes(pte, "corrected")


def _legacy_extra_host_bytes_by_exir():
    data = _bytes("device", side=2048)
    return _et_load_program_host_bytes(data, "legacy") - _et_load_program_host_bytes(data, "corrected")


def _legacy_shared_arena_2(pte=None):
    pte = pte or _open("three_methods", side=64)
    cost = pte.load_cost("legacy")
    row = cost[cost.mem_id == 2].iloc[0]
    tagged = {a.device for m in pte.methods.values() for a in m.arenas if a.mem_id == 2} - {"cpu"}
    return int(row.bytes), sorted(tagged)[0]


def _legacy_shared_arena_2_by_exir(pte=None):
    data = _data(pte, "three_methods", side=64)
    if data is None:
        return None
    plans = _et_plans(data)
    sizes = [p.non_const_buffer_sizes[2] for p in plans.values() if len(p.non_const_buffer_sizes) > 2]
    devices = sorted({_et_devices(p)[2] for p in plans.values() if 2 in _et_devices(p)})
    return max(sizes), devices[0]


# -------------------------------------------------------------------- 05: LLM
#: 05.1's configuration, one the notebook does not export: no grouped-query attention, twice the positions
KV_VARIANT = {"n_kv_heads": 4, "max_seq_len": 64}


def _kv_cache_share(pte=None):
    # the caches of the llm exported with KV_VARIANT (pte, the notebook's program, is not that one): their
    # bytes, and the bytes each position adds to all of them
    m = _open("llm", **KV_VARIANT).methods["forward"]
    state = m.tensors[m.tensors.role == Role.MUTABLE_BUFFER]
    total = int(state.nbytes.sum())
    return total, total // KV_VARIANT["max_seq_len"]


def _kv_cache_share_by_exir(pte=None):
    # the caches are the tensors llama::update_cache writes into (its second argument), as ExecuTorch's
    # deserializer reads the instructions; positions are their second dimension
    plan = _et_plans(_bytes("llm", **KV_VARIANT))["forward"]
    ops = [o.name for o in plan.operators]
    if "llama::update_cache" not in ops:
        return None
    update = ops.index("llama::update_cache")
    caches = {i.instr_args.args[1] for i in plan.chains[0].instructions
              if getattr(i.instr_args, "op_index", None) == update}
    total = sum(_et_nbytes(plan.values[v].val) for v in caches)
    positions = {plan.values[v].val.sizes[1] for v in caches}
    return (total, total // positions.pop()) if len(positions) == 1 else None


def _shared_state_arenas():
    pte = _open("shared_state")
    out = []
    for name in ("prefill", "decode"):
        t = pte.methods[name].tensors
        state = t[t.role == Role.MUTABLE_BUFFER]
        out.append((int(state.mem_id.iloc[0]), int(state.nbytes.sum())))
    return tuple(out)


def _shared_state_arenas_by_exir():
    # the cache is the tensor the file names k_cache (emit_mutable_buffer_names=True)
    plans = _et_plans(_bytes("shared_state"))
    out = []
    for name in ("prefill", "decode"):
        (t,) = [v.val for v in plans[name].values if getattr(getattr(v.val, "extra_tensor_info", None),
                                                             "fully_qualified_name", None) == "k_cache"]
        out.append((t.allocation_info.memory_id, _et_nbytes(t)))
    return tuple(out)



def _llm_with_records(pte=None, trace=None):
    """(program opened with its ETRecord, ExecuTorch's memory trace of it): the notebook's, or the 8da4w
    llm exported once with ``records=True`` (export_llm writes both; the program's bytes are the same)."""
    if pte is not None:
        return pte, trace
    data = _bytes("llm", quantize="8da4w", records=True)
    etrecord, trace = (str(examples._records_dir(data) / name) for name in examples._RECORDS)
    return open_pte(data, etrecord=etrecord), trace


def _peak_module(pte=None, trace=None):
    # at the peak's instruction: the module of the node that writes there, the bytes alive that kernel calls
    # of that module (or of modules inside it) wrote, and the bytes alive that delegate calls wrote (the
    # ETRecord's module paths on the kernel calls' nodes; a delegate call's outputs are counted apart)
    pte, _ = _llm_with_records(pte, trace)
    m = pte.methods["forward"]
    story = m.peak
    (module,) = {m.source_of(t.value).module for t in m.planned if t.producer == story.at and t.role != Role.VIEW}
    alive = [t for t in m.planned if t.role != Role.VIEW and t.nbytes and t.mem_id == story.mem_id
             and t.first is not None and t.first <= story.at <= t.last and t.producer is not None]
    kinds = {i.index: i.kind for i in m.instructions}
    delegate = sum(t.nbytes for t in alive if kinds[t.producer] == InstructionKind.DELEGATE_CALL)
    own = sum(t.nbytes for t in alive if kinds[t.producer] == InstructionKind.KERNEL_CALL
              and _inside(m.source_of(t.value).module, module))
    return module, own, delegate


def _inside(path, module: str) -> bool:
    return path is not None and (path == module or path.startswith(module + "."))


def _peak_module_by_trace(pte=None, trace=None):
    # ExecuTorch's memory trace (generate_memory_trace, export_llm's debug.profile_memory) of the same program:
    # one step per instruction, each listing the tensors alive then in graph order with their node's op and
    # module (fqn). At the step with the most bytes alive the last tensor listed is the one just written; the
    # outputs of executorch_call_delegate carry no module there and are summed apart, by their op name alone.
    _, trace = _llm_with_records(pte, trace)
    if trace is None:
        return None
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    steps: dict[int, list] = {}
    for e in events:
        steps.setdefault(e["tid"], []).append(e)
    step = max(steps.values(), key=lambda s: sum(e["args"]["bytes"] for e in s))
    module = step[-1]["args"]["fqn"]
    own = sum(e["args"]["bytes"] for e in step if _inside(e["args"]["fqn"], module))
    delegate = sum(e["args"]["bytes"] for e in step if e["args"]["op_name"] == "executorch_call_delegate")
    return module, own, delegate


# ------------------------------------------------------------------- 06: diff
def _diff(a, b):
    return diff_programs(open_pte(_bytes(a[0], **a[1])), open_pte(_bytes(b[0], **b[1])))


#: the two exports of 06.1: as it is, and with its input and output left to the caller
CALLER_IO = ({}, {"alloc_graph_input": False, "alloc_graph_output": False})


def _caller_io_diff():
    m = _diff(("portable", CALLER_IO[0]), ("portable", CALLER_IO[1])).methods["forward"]
    return len(m.only_before), m.arena(1).peak.before - m.arena(1).peak.after


def _et_planned(data: bytes, method: str = "forward") -> dict:
    """value index -> (bytes, mem_id, offset) of each tensor the method plans, as ExecuTorch's own
    deserializer reads the file's values table (an offset is ``memory_offset_high << 32 | memory_offset_low``)."""
    out = {}
    for i, v in enumerate(_et_plans(data)[method].values):
        info = getattr(v.val, "allocation_info", None)
        if info is not None:
            offset = (info.memory_offset_high << 32) | info.memory_offset_low
            out[i] = (_et_nbytes(v.val), info.memory_id, offset)
    return out


def _caller_io_diff_by_exir():
    # one module, one graph: the emitter writes the same values table for both exports (checked: the same
    # tensors, in the same order), so a value index names the same tensor in both; the caller's input and
    # output stay in the second table, unplanned. The peaks: exir's own lifetimes (its activation memory profiler)
    first, second = (_bytes("portable", **kw) for kw in CALLER_IO)
    tables = [[(tuple(v.val.sizes), v.val.scalar_type) if hasattr(v.val, "sizes") else type(v.val).__name__
               for v in _et_plans(d)["forward"].values] for d in (first, second)]
    if tables[0] != tables[1]:
        return None
    peaks = [_profiler_peak(_manager("portable", **kw)) for kw in CALLER_IO]
    return len(_et_planned(first).keys() - _et_planned(second).keys()), peaks[0] - peaks[1]


def _extra_layer_diff():
    m = _diff(("transformer", {"layers": 2}), ("transformer", {"layers": 3})).methods["forward"]
    # a matched pair weighs the same on both sides here (paired by operators, dtype and shape): what is only in
    # one program is the whole difference in planned tensor bytes
    return (m.arena(1).size.delta,
            sum(int(t.nbytes) for t in m.only_after) - sum(int(t.nbytes) for t in m.only_before))


def _extra_layer_diff_by_exir():
    # the arena sizes and every planned tensor's bytes, as ExecuTorch's deserializer reads each file: no pairing
    two, three = (_bytes("transformer", layers=n) for n in (2, 3))
    arena = [_et_plans(d)["forward"].non_const_buffer_sizes[1] for d in (two, three)]
    planned = [sum(b for b, _, _ in _et_planned(d).values()) for d in (two, three)]
    return arena[1] - arena[0], planned[1] - planned[0]


#: 06.3's program: section 4's device example at another side than the notebook's 64 (the answer is no look-up)
DEVICE_SIDE = 32


def _device_arena_refused(pte=None):
    # 1.5.1 with no allocator for the device: the device method's load_method asks for its device arena
    # (exact, XNNPACK's padding included) and names it by runtime buffer index, mem_id - 1
    pte = pte or _open("device", side=DEVICE_SIDE)
    (arena,) = [a for m in pte.methods.values() for a in m.arenas if a.device != "cpu"]
    return arena.size, arena.mem_id - 1


#: what ExecuTorch's own runtime, in a fresh interpreter, says when load_method cannot get a device arena
_REFUSED = ("import sys\nfrom executorch.runtime import Runtime\nprogram = Runtime.get().load_program(sys.argv[1])\n"
            "for name in sorted(program.method_names):\n    try:\n        program.load_method(name)\n"
            "    except RuntimeError as exc:\n        print(exc)\n")


def _device_arena_refused_by_runtime(pte=None):
    # what the runtime did: executorch's Runtime.load_program and load_method of every method, in a fresh
    # interpreter (this one, no device allocator registered), and the allocation its error names
    side = pte.methods["forward"].inputs[0].shape[0] if pte is not None else DEVICE_SIDE
    data = _data(pte, "device", side=side)
    if data is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "device.pte")
        with open(path, "wb") as f:
            f.write(data)
        r = subprocess.run([sys.executable, "-c", _REFUSED, path], capture_output=True, text=True, timeout=900)
    got = re.findall(r"Failed to allocate (\d+) bytes for buffer (\d+) on device", r.stdout)
    return (int(got[0][0]), int(got[0][1])) if len(got) == 1 else None


#: the pair of 06.4: the portable transformer lowered to XNNPACK, then the same one with portable kernels (back)
BACKEND_PAIR = ({"layers": 2, "backend": "xnnpack"}, {"layers": 2})
#: the budget of 06.4, in percent
BACKEND_BUDGET = 5


def _backend_change_verdict():
    d = diff_programs(*(open_pte(_bytes("transformer", **kw)) for kw in BACKEND_PAIR))
    kinds = {c.kind for c in d.target_changes}
    return TargetChangeKind.RUNNER in kinds, TargetChangeKind.BOARD in kinds, any(c.failed for c in d.budget(BACKEND_BUDGET))


def _backend_change_verdict_by_exir():
    # each file as ExecuTorch's deserializer reads it: the backend each delegate call names, in call order, with
    # its compile specs, and the arenas; the file's bytes. A backend in only one file is a runner change; a
    # delegate call both files make with other compile specs (a target, a memory mode) is a board change; the
    # budget: the file or the planned bytes grew by more than BACKEND_BUDGET percent
    sides = []
    for kw in BACKEND_PAIR:
        data = _bytes("transformer", **kw)
        plan = _et_plans(data)["forward"]
        calls = [plan.delegates[i.instr_args.delegate_index] for i in plan.chains[0].instructions
                 if hasattr(i.instr_args, "delegate_index")]
        sides.append(({c.id for c in plan.delegates}, [(c.id, sorted((s.key, bytes(s.value)) for s in c.compile_specs))
                                                       for c in calls],
                      len(data), sum(plan.non_const_buffer_sizes[1:])))
    (backends_a, calls_a, file_a, planned_a), (backends_b, calls_b, file_b, planned_b) = sides
    board = any(a[0] == b[0] and a[1] != b[1] for a, b in zip(calls_a, calls_b))
    over = any(b > a * (1 + BACKEND_BUDGET / 100) for a, b in ((file_a, file_b), (planned_a, planned_b)))
    return backends_a != backends_b, board, over


#: the pair of 06.5: one model, re-exported by Vela for another board (target and memory mode)
BOARD_PAIR = ("u55_128_shared_sram", "u85_256_sram_only")
#: the budget of 06.5, in percent
BOARD_BUDGET = 20


def _board_change():
    # the temp pool holds one delegate scratch at a time (the largest); the command's exit status, as pte-lab diff
    # --fail-if-grows BOARD_BUDGET says it (a change of board is TARGET_CHANGED whatever the bytes do)
    a, b = (_ethos_u(n) for n in BOARD_PAIR)
    grow = b.methods["forward"].delegate_temp_bytes - a.methods["forward"].delegate_temp_bytes
    d = diff_programs(a, b).with_budget(BOARD_BUDGET)
    status = TARGET_CHANGED if d.target_changes else 1 if any(c.failed for c in d.budget()) else 0
    return grow, status


def _board_change_by_executorch():
    # the scratch as ExecuTorch's own Arm script reads each blob (largest per file), against what Vela printed
    # ("Total SRAM used", vela.json); the board from the compile specs as exir reads them: the same backend with
    # another target or memory mode is a change no byte budget passes (exit 4); else the bytes decide (exit 1 or 0)
    datas = [Path(examples.ethos_u_program(n)).read_bytes() for n in BOARD_PAIR]
    scratch = [_et_scratch(data) for data in datas]
    vela = json.loads((Path(examples.ETHOS_U_PROGRAMS) / "vela.json").read_text())["programs"]
    printed = [round(float(vela[f"{n}.pte"]["vela"][0]["sram_used"].split()[0]) * 1024) for n in BOARD_PAIR]
    if scratch != printed:
        return None
    specs = [[(d.id, sorted((c.key, bytes(c.value)) for c in d.compile_specs))
              for d in _et_plans(data)["forward"].delegates] for data in datas]
    board = any(x[0] == y[0] and x[1] != y[1] for x, y in zip(*specs))
    planned = [sum(_et_plans(data)["forward"].non_const_buffer_sizes[1:]) for data in datas]
    over = any(y > x * (1 + BOARD_BUDGET / 100) for x, y in (tuple(map(len, datas)), planned, scratch))
    return scratch[1] - scratch[0], TARGET_CHANGED if board else 1 if over else 0


# ------------------------------------------------------------------- 07: a microcontroller
#: the pair of 07.1: one model, compiled by Vela for two memory modes
SRAM_PAIR = ("u55_128_sram_only", "u55_128_shared_sram")
#: the program of 07.2: two Ethos-U delegates, a CPU flip between them
SPLIT = "u55_128_shared_sram_split"


def _ethos_u(name: str):
    return open_pte(examples.ethos_u_program(name))


#: 07.1's board, the one layout the exercise states: the CPU's RAM is SRAM, and the NPU reaches SRAM only
#: through its SRAM port (AXI0) and flash only through its second port (AXI1). The memory mode that reads the
#: command stream and the weights through the SRAM port then needs the program's bytes in SRAM.
SRAM_PORT_MODES = ("Sram_Only",)


def _sram_fixed_bytes(name: str) -> int:
    """SRAM the file fixes for ``name`` on 07.1's board (the method pool left out): the planned buffers, a temp
    pool of the largest scratch where the memory mode puts the scratch in SRAM, and the program's bytes where
    the NPU reads them through its SRAM port (:data:`SRAM_PORT_MODES`) or a delegate writes in them."""
    pte = _ethos_u(name)
    m = pte.methods["forward"]
    (mode,) = {d.placement for d in m.delegate_memory}
    in_sram = mode.name in SRAM_PORT_MODES or any(d.program_in_ram for d in m.delegate_memory)
    return (m.planned_bytes + (m.delegate_temp_bytes if mode.scratch.startswith("SRAM") else 0)
            + (pte.file_size if in_sram else 0))


def _sram_by_memory_mode() -> tuple[int, int]:
    return tuple(_sram_fixed_bytes(n) for n in SRAM_PAIR)


def _arm_script():
    """ExecuTorch's own Arm script (backends/arm/scripts/get_ethosu_scratch_from_pte.py, shipped in the wheel)."""
    import executorch

    return runpy.run_path(str(Path(list(executorch.__path__)[0]) / "backends/arm/scripts/get_ethosu_scratch_from_pte.py"))


def _et_blobs(data: bytes) -> list[bytes]:
    """The forward's Ethos-U delegate blobs, in call order, as exir's deserializer reads them."""
    with quiet():
        # ExecuTorch's .pte (de)serializer is public only under exir._serialize
        from executorch.exir._serialize._program import deserialize_pte_binary  # noqa: PLC2701

        program = deserialize_pte_binary(data).program
    plan = next(p for p in program.execution_plan if p.name == "forward")
    return [program.backend_delegate_data[d.processed.index].data for d in plan.delegates]


def _et_scratch(data: bytes) -> int:
    """The largest delegate scratch by the Arm script's own reader of Vela's blocks: one temp allocation
    at a time."""
    sizes = _arm_script()["get_scratch_size_from_delegate"]
    return max(sizes(blob) for blob in _et_blobs(data))


def _sram_by_memory_mode_by_executorch() -> tuple[int, int]:
    # the arenas as exir reads them, the scratch as ExecuTorch's Arm script reads it, the memory mode from the
    # compile specs as exir reads them, and 07.1's board: the scratch in SRAM for Shared_Sram and Sram_Only, in
    # DRAM for Dedicated_Sram (as ExecuTorch's corstone_utils.cmake places it); the program's bytes in SRAM
    # where the mode reads them through the SRAM port (Sram_Only), else in flash
    out = []
    for name in SRAM_PAIR:
        with open(examples.ethos_u_program(name), "rb") as f:
            data = f.read()
        plan = _et_plans(data)["forward"]
        specs = b" ".join(bytes(c.value) for d in plan.delegates for c in d.compile_specs)
        scratch_in_sram = b"Dedicated_Sram" not in specs
        program_in_sram = any(m.encode() in specs for m in SRAM_PORT_MODES)
        out.append(sum(plan.non_const_buffer_sizes[1:]) + (_et_scratch(data) if scratch_in_sram else 0)
                   + (len(data) if program_in_sram else 0))
    return tuple(out)


def _distinct(spans) -> int:
    """Bytes covered by (start, bytes) spans, a byte two spans share counted once."""
    total, end = 0, None
    for start, n in sorted(spans):
        if end is None or start >= end:
            total, end = total + n, start + n
        elif start + n > end:
            total, end = total + start + n - end, start + n
    return total


def _delegate_io_copies() -> tuple[int, int]:
    # the first delegate's input and output: planned in the arena, and copied into its scratch at the offsets
    # Vela gives them (one base for inputs and outputs, so they may share bytes), all held while the NPU runs;
    # the distinct bytes in each place
    m = _ethos_u(SPLIT).methods["forward"]
    checks = io_checks(m.raw, m.delegate_memory[0])
    planned = m.tensors.set_index("value")
    in_arena = _distinct((int(planned.offset[c.value]), int(planned.nbytes[c.value])) for c in checks)
    return in_arena, _distinct((c.io.offset, c.io.nbytes) for c in checks)


def _delegate_io_copies_by_executorch() -> tuple[int, int]:
    # the delegate call's arguments as exir's deserializer reads them (offsets and bytes by exir's own count),
    # and the blob's inputs/outputs descriptors (int32 count, then shape[6], elem_size, offset, region each)
    # split into blocks by ExecuTorch's Arm script's own reader; in the scratch, both at offsets from one base
    # (EthosUBackend: ethosu_scratch + io.offset, for inputs and outputs alike)
    with open(examples.ethos_u_program(SPLIT), "rb") as f:
        data = f.read()
    plan = _et_plans(data)["forward"]
    call = next(i.instr_args for i in plan.chains[0].instructions if hasattr(i.instr_args, "delegate_index"))
    tensors = [plan.values[v].val for v in call.args]
    in_arena = _distinct((t.allocation_info.memory_offset_low + (t.allocation_info.memory_offset_high << 32),
                          _et_nbytes(t)) for t in tensors)
    scratch = []
    for name, block in _arm_script()["iter_vela_blocks"](_et_blobs(data)[0]):
        if name in ("inputs", "outputs"):
            (count,) = struct.unpack_from("<i", block)
            for k in range(count):
                *shape, elem_size, offset, _region = struct.unpack_from("<9i", block, 4 + 36 * k)
                scratch.append((offset, math.prod(shape) * elem_size))
    return in_arena, _distinct(scratch)


EXERCISES: dict[str, Exercise] = {e.id: e for e in [
    Exercise("01.1", "Suppose `forward`'s two inputs were left to the caller (not planned). Which tensors would "
                     "then be alive at arena 1's peak? Answer `(tensors, bytes)`: how many are alive there at "
                     "once, and their bytes, the smallest arena 1 any plan could then give.",
             "Work it from m.tensors: drop the inputs, then at each instruction add the bytes of the tensors "
             "whose first <= instruction <= last. A tensor is alive from the instruction that writes it to the "
             "last one that reads it.", _peak_without_inputs, _peak_without_inputs_by_profiler,
             "ExecuTorch's activation memory profiler (exir's own lifetimes, the graph's inputs left out)"),
    Exercise("01.2", "Predict, without exporting it: the same program with 32 x 32 matrices "
                     "(`examples.build('device', side=32)`). How many bytes is forward's arena 1, and how many "
                     "bytes is the whole file? Answer `(arena, file)`. The check exports it and compares your "
                     "prediction.",
             "Count the matrices alive at arena 1's peak (the tensor table: first <= instruction <= last); a "
             "32 x 32 float32 matrix holds a quarter of the bytes of a 64 x 64 one. Then the file: which of its "
             "regions holds a matrix's bytes? The plan stores each tensor's shape and offset as numbers.",
             _arena_and_file_at_side_32, _arena_and_file_at_side_32_by_exir,
             "ExecuTorch's own deserializer (the arena exir wrote) and the exported program's length"),
    Exercise("02.1", "Return `torch.sigmoid(e)` from the hand-sized module instead of `e` "
                     "(`examples.build('hand_sized', extra=True)`): an eighth planned tensor. "
                     "What arena does ExecuTorch's greedy plan give, and what does pte_lab's best_fit give "
                     "(`planning.plan_arena(problem, 'best_fit')`: the smallest of its four orders)? "
                     "Answer `(greedy, best_fit)` in bytes.",
             "Work it on paper first: the sigmoid's output is 512 bytes, written by a new last instruction (6) "
             "and read as the output; the add's output is no longer the output, so it dies at the sigmoid. Then "
             "export it and compare.", _greedy_and_best_fit, _greedy_and_best_fit_by_exir,
             "ExecuTorch's own deserializer (the arena exir wrote) and its activation memory profiler "
             "(best fit reaches the most bytes alive at once)"),
    Exercise("02.2", "Work out the `Odd` arena's lower bound at 64-byte alignment before computing it: which "
                     "bytes does the bound add up, and where does the alignment enter? Then answer the number "
                     "(`planning.build_problem(odd, 1, alignment=64)` checks it after).",
             "The bound takes the true bytes of the tensors alive at each instruction (52 each, not rounded), "
             "the most of them at any instruction, and rounds that sum up to the alignment once. "
             "Pass odd=... to check() to reuse your program.", _aligned_lower_bound, _aligned_lower_bound_by_profiler,
             "ExecuTorch's activation memory profiler (the most true bytes alive at once, rounded up to 64 once)"),
    Exercise("02.3", "Export the transformer with 1 and with 6 layers. How many bytes is ExecuTorch's arena 1 for "
                     "each? Answer `(one_layer, six_layers)`.",
             "examples.build('transformer', layers=L); the arena's size. Which tensors are alive at the peak: "
             "those of one layer, or of all of them?", _arena_by_layers, _arena_by_layers_by_exir, DESERIALIZER),
    Exercise("03.1", "Predict, without exporting it: the same program with 64 x 64 matrices (notebook 01's) "
                     "instead of 256 x 256: by how many bytes is each arena smaller? Answer `(forward arena 1, "
                     "forward2 arena 1, forward2 arena 2)`. The check exports it and compares your prediction.",
             "Which part of each arena scales with the matrices, and which does not? A 64 x 64 float32 matrix "
             "holds a sixteenth of the bytes of a 256 x 256 one; count the matrices each arena holds at its peak "
             "(the tensor tables of both methods), and mind exir's 64 bytes of XNNPACK padding. Pass pte=... "
             "(the side-256 program) to reuse it.",
             _arenas_shrunk_to_side_64, _arenas_shrunk_to_side_64_by_exir, DESERIALIZER),
    Exercise("03.2", "Export the device program with `side=128`. How many bytes does each method plan on "
                     "cuda:0? Answer `(forward2, forward)`: the bytes in arenas tagged cuda:0, for each method.",
             "Three side x side float32 tensors, plus XNNPACK's 64 bytes of arena padding; and which arenas "
             "does forward have?", _cuda_bytes_per_method, _cuda_bytes_per_method_by_exir, DESERIALIZER),
    Exercise("03.3", "How many bytes of planned arenas does `Runtime.load_program` (the corrected loader) allocate "
                     "on the host, at load_program, for the three-method program? (Planned arenas only, not what "
                     "ExecuTorch keeps of the program itself.)",
             "Host-only methods share arenas sized by the largest per index; the device method's arenas "
             "wait for load_method. pte.load_cost('corrected').", _corrected_host_bytes, _corrected_host_bytes_by_exir,
             "the same rule on ExecuTorch's own deserializer's arena sizes"),
    Exercise("04.1", "For the published experiment (`side=2048`), how many more bytes of planned arenas does the "
                     "legacy loader allocate on the host at load_program than the corrected one?",
             "The legacy loader puts every arena, the device one too, on the host at load_program: count the "
             "device arena's bytes exactly, XNNPACK's 64 bytes of arena padding included.", _legacy_extra_host_bytes, _legacy_extra_host_bytes_by_exir,
             "the same rules on ExecuTorch's own deserializer's arena sizes"),
    Exercise("04.2", "In the three-method program, the legacy loader's shared arena for runtime buffer 1 (mem_id 2): "
                     "how many bytes, and which device did the file tag it for? Answer `(bytes, device)`.",
             "pte.load_cost('legacy') lists the shared arenas; which method has a mem_id 2, and on what device?",
             _legacy_shared_arena_2, _legacy_shared_arena_2_by_exir, DESERIALIZER),
    Exercise("05.1", "Export the same llm with `n_kv_heads=4` (no grouped-query attention) and `max_seq_len=64`. "
                     "How many bytes do its KV caches take, and how many bytes does each position add to all of "
                     "them? Predict it from the cache shape rule before you export. Answer `(bytes, per_position)`.",
             "One cache per layer for K and one for V, each [batch, positions, KV heads, head_dim] in float32; "
             "head_dim = dim / n_heads. examples.build('llm', n_kv_heads=4, max_seq_len=64) exports it (a "
             "minute or more).",
             _kv_cache_share, _kv_cache_share_by_exir, "ExecuTorch's own deserializer (the tensors llama::update_cache writes into)"),
    Exercise("05.2", "In `examples.build('shared_state')`, prefill and decode share one [16, 8] float32 cache "
                     "(`share_mutable_buffers=True`). Predict, for each method, which mem_id holds its state and "
                     "how many bytes, before you open the file. Answer `((mem_id, bytes), (mem_id, bytes))` for "
                     "prefill then decode.",
             "Bytes: elements times 4. Each method plans its own activations in arena 1; exir gives the state "
             "the methods share an arena of its own, the next mem_id, so one buffer can serve both. Check with "
             "pte.methods[name].tensors (role mutable_buffer).",
             _shared_state_arenas, _shared_state_arenas_by_exir, "ExecuTorch's own deserializer (the tensor the file names k_cache)"),
    Exercise("05.3", "At forward's peak: which module's node writes the tensor of the peak's instruction, how many "
                     "of the bytes alive there did kernel calls of that module (or of modules inside it) write, "
                     "and how many did XNNPACK delegate calls write? Answer `(module, module_bytes, "
                     "delegate_bytes)`, the module as a dotted path (`layers.1.attention`).",
             "m.peak.at is the instruction; m.source_of(value).module the module of a tensor's node. Alive at "
             "the peak: first <= at <= last in the peak's arena. m.instructions[t.producer].kind tells a "
             "delegate call's output from a kernel call's. Pass pte=... and trace=... to reuse your export.",
             _peak_module, _peak_module_by_trace,
             "ExecuTorch's memory trace of the same program (generate_memory_trace: at the step with the most "
             "bytes alive, the last tensor's module, the bytes of that module's nodes, and the bytes of "
             "executorch_call_delegate's outputs)"),
    Exercise("06.1", "Diff the portable example against the same export with its input and output left to the "
                     "caller. How many planned tensors are only in the first, and by how many bytes is arena 1's "
                     "peak live (the most bytes alive at once) lower in the second? Answer "
                     "`(only_in_first, peak_drop)`.",
             "A tensor the caller provides is not planned: it is in neither arena. For the peak: find the "
             "instruction where the most bytes are alive in the first program (m.tensors: first <= i <= last), "
             "and ask whether the input or the output is alive there. d.methods['forward'].only_before and "
             ".arena(1).peak.", _caller_io_diff, _caller_io_diff_by_exir,
             "ExecuTorch's own deserializer (which values each file plans) and its activation memory profiler "
             "(the most bytes alive at once, from exir's own lifetimes)"),
    Exercise("06.2", "Diff the portable transformer with 2 layers against the one with 3. By how many bytes does "
                     "arena 1 change (0 if it does not), and by how many bytes do all the planned tensors of the "
                     "3-layer program outweigh those of the 2-layer one (every planned tensor's bytes, views "
                     "included, summed in each file)? Answer `(arena_bytes, planned_tensor_bytes)`.",
             "Which tensors are alive at arena 1's peak: those of one layer, or of all of them? For the tensors: "
             "a pair the diff matched weighs the same in both files, so only what is in one program counts: "
             "d.methods['forward'].only_after less .only_before, by nbytes.",
             _extra_layer_diff, _extra_layer_diff_by_exir,
             "ExecuTorch's own deserializer (the arena sizes, and every planned tensor's bytes, in each file)"),
    Exercise("06.3", f"Section 4's program exported at side={DEVICE_SIDE} (`examples.save(\"device\", path, "
                     f"side={DEVICE_SIDE})`), under executorch 1.5.1 with no allocator registered for the device "
                     "(none is, here): `Runtime.load_program`, then `load_method` of each method. One "
                     "`load_method` fails, and ExecuTorch's error names the bytes it could not allocate and the "
                     "runtime's index of that buffer. Predict both before you export it. Answer "
                     "`(bytes, buffer_index)`.",
             "The device arena holds what the delegate touches there: its two inputs copied to the device and "
             "its output, side x side float32 each, and exir's padding for a method with an XNNPACK delegate "
             "(notebook 03). The runtime counts its planned buffers from zero: runtime index = mem_id less one.",
             _device_arena_refused, _device_arena_refused_by_runtime,
             "ExecuTorch's own runtime (Runtime.load_program and load_method in a fresh interpreter: its error)"),
    Exercise("06.4", "Run the budget of section 6 the other way round: from the XNNPACK transformer back to the "
                     "portable one, `--fail-if-grows 5`. Which does the command report: a change of what the "
                     "runner must link, a change of the board, a budget exceeded? Answer "
                     "`(runner_changed, board_changed, over_budget)`, each a bool.",
             "XNNPACK runs on the CPU: does it have a target or a memory mode? A backend in only one of the "
             "two programs changes what the runner links, whichever side it is on. And the plan: which program "
             "had the larger arena 1 in section 2?",
             _backend_change_verdict, _backend_change_verdict_by_exir,
             "ExecuTorch's own deserializer (each file's delegates, compile specs and arenas) and the file sizes"),
    Exercise("06.5", "A vendor's CI re-exported the program for a new board: "
                     "`examples.ethos_u_program('u55_128_shared_sram')`, then `('u85_256_sram_only')`. Your "
                     "runner's temp pool (`ET_ARM_BAREMETAL_SCRATCH_TEMP_ALLOCATOR_POOL_SIZE`) was sized for the "
                     "first. By how many bytes must it grow to run the second, and what does "
                     "`pte-lab diff A B --fail-if-grows 20` exit with? Answer `(temp_pool_growth, exit_status)`.",
             "The temp pool holds one delegate scratch at a time: the largest (pte.delegate_memory()[i]."
             "scratch_bytes of each). A budget's bytes and a change of target are two verdicts: section 6 says "
             "which exit status a change of board gives, whatever the bytes do.",
             _board_change, _board_change_by_executorch,
             "ExecuTorch's own Arm script (the scratch each blob declares), Vela's printed \"Total SRAM used\" "
             "when it compiled each file, and exir's deserializer (each delegate's compile specs, the arenas)"),
    Exercise("07.1", "`examples.ethos_u_program('u55_128_sram_only')` and `('u55_128_shared_sram')` hold one "
                     "model, compiled by Vela for two memory modes. The board: its CPU's RAM is SRAM, and its NPU "
                     "reaches SRAM only through the SRAM port (AXI0) and flash only through the second port "
                     "(AXI1). How many bytes of SRAM does each program need for what the file fixes: the planned "
                     "buffers, a temp pool that holds the largest scratch where the mode puts the scratch in "
                     "SRAM, and the program's bytes where the NPU must read them from SRAM? Leave the method pool "
                     "out (it depends on the target's ABI). Answer `(sram_only, shared_sram)`.",
             "On this board a part the NPU reads through its SRAM port must sit in SRAM. Which port does each "
             "mode read the command stream and the weights through (the section \"Memory modes\")? The "
             "planned buffers are always in SRAM here, the scratch where the mode puts it; then each part's "
             "bytes: the modes table prints them.",
             _sram_by_memory_mode, _sram_by_memory_mode_by_executorch,
             "exir's deserializer (arenas, compile specs) and ExecuTorch's own Arm script "
             "(get_ethosu_scratch_from_pte.py) for the sizes, with where each part lives on the board the "
             "exercise states (the scratch in SRAM unless Dedicated_Sram, as corstone_utils.cmake places it; "
             "the program in SRAM where the mode reads it through the SRAM port), not ExecuTorch's code"),
    Exercise("07.2", "In the split program, while the first Ethos-U delegate (delegate 0) runs, its input and "
                     "its output are held in two places: the planned arena, where the CPU's kernels read and "
                     "write them, and its scratch, where the NPU does. How many distinct bytes hold them in "
                     "each place (a byte the two share counts once)? Answer `(in_arena, in_scratch)`.",
             "In each place, take the input's and the output's span, offset to offset + bytes (the arena's "
             "from m.tensors, the scratch's from io_checks), and count the bytes their union covers: the "
             "scratch's offsets are from one base for inputs and outputs alike, so do the two spans overlap "
             "there? And in the arena?",
             _delegate_io_copies, _delegate_io_copies_by_executorch,
             "exir's deserializer (the delegate call's arguments, their offsets) and ExecuTorch's own Arm "
             "script's reader of the blob's blocks (Vela's inputs and outputs)"),
]}


# ------------------------------------------------------------------- 08: what if
#: 08.1 and 08.2's program: exported with a sequence (input 0, axis 1) of at most this many tokens
WHAT_IF_EXPORTED = 128
#: 08.1's budget for the planned arenas, in bytes
WHAT_IF_BUDGET = 160 * 1024
#: 08.2's call: this many tokens (the notebook's usage_at shows another length: the exercise is no look-up)
WHAT_IF_RUN = 40
#: the dynamic dim: input 0, axis 1
SEQ = (0, 1)


@functools.lru_cache(maxsize=1)
def _work_dir() -> str:
    return tempfile.mkdtemp(prefix="pte_lab_exercises_08_")


def _transformer_program(bound: int):
    """pte_lab's transformer example (2 blocks, width 64) exported with a sequence of at most ``bound``:
    exir's ``ExecutorchProgramManager``. The notebook passes its own ``program``."""
    import torch

    to_edge_transform_and_lower = _executorch("executorch.exir").to_edge_transform_and_lower  # see _executorch
    torch.manual_seed(0)
    model = examples._modules()["Transformer"](2, d=64)
    seq = torch.export.Dim("seq", min=2, max=bound)
    with quiet():
        ep = examples._export(model, (torch.randn(1, 8, 64),), dynamic_shapes=({1: seq},))
        return to_edge_transform_and_lower(ep).to_executorch()


@functools.lru_cache(maxsize=16)
def _program_at(program, bound: int):
    """``program(bound)`` (the notebook's, or :func:`_transformer_program`), once per process and bound."""
    return (program or _transformer_program)(bound)


@functools.lru_cache(maxsize=16)
def _exported_at(program, bound: int) -> str:
    """That program written to a file (what-if runs the method: it needs a path)."""
    path = Path(_work_dir()) / f"{id(program or _transformer_program):x}-seq{bound}.pte"
    path.write_bytes(bytes(_program_at(program, bound).buffer))
    return str(path)


def _et_planned_bytes(path: str) -> int:
    """forward's planned bytes as ExecuTorch's own deserializer reads the file: every arena it sizes."""
    with open(path, "rb") as f:
        return sum(_et_plans(f.read())["forward"].non_const_buffer_sizes[1:])


@functools.lru_cache(maxsize=4)
def _bounds_under_budget(program=None) -> tuple[int, int]:
    """(the largest bound whose plan by ExecuTorch's greedy fits, the largest whose bytes alive at once fit:
    no planner fits a larger one, as no plan is below them)."""
    path = _exported_at(program, WHAT_IF_EXPORTED)
    b = largest_bound(path, WHAT_IF_BUDGET, SEQ)
    pred = Predictor(open_pte(path).methods["forward"], b.at.fit)
    alive = max(n for n in range(b.bound, b.exported + 1)
                if pred.lower_bound(pred.nbytes_at((n,))) <= WHAT_IF_BUDGET)
    return b.bound, alive


def _last_fitting(fits, start: int) -> int:
    """From ``start`` (only where to start), walk down while ``fits`` says no, then up while the next bound
    fits: the bound that fits and whose next does not (or the exported bound)."""
    n = min(max(2, start), WHAT_IF_EXPORTED)
    while n > 2 and not fits(n):
        n -= 1
    while n < WHAT_IF_EXPORTED and fits(n + 1):
        n += 1
    return n


def _bounds_under_budget_by_reexport(program=None) -> tuple[int, int]:
    # re-exports decide, from pte_lab's answer as the starting points: the greedy's plan as exir's deserializer
    # reads each file, the bytes alive at once as ExecuTorch's activation memory profiler adds them up
    greedy, alive = _bounds_under_budget(program)
    return (_last_fitting(lambda n: _et_planned_bytes(_exported_at(program, n)) <= WHAT_IF_BUDGET, greedy),
            _last_fitting(lambda n: _profiler_peak(_program_at(program, n)) <= WHAT_IF_BUDGET, alive))


def _plan_for_a_short_call(program=None) -> tuple[int, int]:
    w = what_if(_exported_at(program, WHAT_IF_EXPORTED), {SEQ: WHAT_IF_RUN})
    return w.planned, w.exported_planned - w.planned


def _plan_for_a_short_call_by_reexport(program=None) -> tuple[int, int]:
    # a plan made for the call's shape is what a re-export with the call's length as its bound plans; the
    # loader allocates the plan at the export's bound whole: both as exir's deserializer reads the two files
    short, full = (_et_planned_bytes(_exported_at(program, n)) for n in (WHAT_IF_RUN, WHAT_IF_EXPORTED))
    return short, full - short


EXERCISES.update({e.id: e for e in [
    Exercise("08.1", f"The model is exported with a sequence of at most {WHAT_IF_EXPORTED} tokens. The device leaves "
                     f"its planned arenas {WHAT_IF_BUDGET // 1024} KiB. What is the largest bound of the sequence "
                     f"(input 0, axis 1) whose plan fits, as exir's greedy would plan a re-export there (predict "
                     f"it from the curve's straight start before you search), and the largest that any planner, "
                     f"however good, could fit? Answer `(greedy_bound, any_planner_bound)`. Pass program=... "
                     f"(bound -> exir's ExecutorchProgramManager of the model exported there) to check your own "
                     f"model.",
             "The greedy's bound: on the straight start the plan is the smallest bound's plus the slope per token "
             "more (1 KiB is 1,024 bytes); pte_lab.largest_bound(model, budget, (input, axis)) confirms it. Any "
             "planner's: no plan is below the bytes alive at once (the lower bound), and that never dips as the "
             "bound grows. pte_lab.what_if(model, {(input, axis): n}).lower_bound is it at bound n (quick after "
             "the first call: the shapes are learnt once), so step n up from the greedy's bound until the next "
             "one's is over the budget (largest_bound's curve draws only some bounds). One more token must not "
             "fit, for either.",
             _bounds_under_budget, _bounds_under_budget_by_reexport,
             "re-exports at that bound and the next: ExecuTorch's own deserializer's arena sizes, and the bytes "
             "alive at once by ExecuTorch's activation memory profiler"),
    Exercise("08.2", f"A call with a sequence of {WHAT_IF_RUN} tokens, on the model exported at {WHAT_IF_EXPORTED}: "
                     f"predict, from what the notebook printed (the plan at the smallest bound tried; the slope "
                     f"of the curve's straight start), how many bytes a plan made for that shape needs (exir's "
                     f"greedy, as a re-export with Dim(\"seq\", max={WHAT_IF_RUN}) plans), and how many bytes "
                     f"the plan at the bound, which the loader allocates whole, holds beyond it. Answer "
                     f"`(plan_for_shape, gap)`. The check re-exports at {WHAT_IF_RUN}.",
             f"Is {WHAT_IF_RUN} on the straight start? There the plan grows by the same bytes per token: the plan "
             "at the smallest bound, plus that many bytes for each token more. The gap is against the plan in "
             "the file at the export's bound (answer.curve has it), the arenas the loader allocates whole.",
             _plan_for_a_short_call, _plan_for_a_short_call_by_reexport,
             "ExecuTorch's own deserializer's arena sizes of a re-export at that bound and of the file"),
]})
