"""The notebooks' exercises: self-checks, and reference solutions computed from real programs.

Each notebook ends with a few exercises. A learner writes an answer and runs
``check("02.1", answer)``: the verdict says whether it is right, and gives a
hint when it is not, without showing the solution. No expected value is
written down anywhere: :func:`solution` computes each one from programs it
exports (or that the notebook passes in), so the exercises follow ExecuTorch
as it changes, and the test suite runs every reference solution through its
own check.

>>> from pte_lab.exercises import check
>>> check("02.2", 118784)          # doctest: +SKIP
Not quite (02.2). Hint: ...
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from html import escape
from typing import Any, Callable

__all__ = ["check", "solution", "EXERCISES", "Exercise", "Verdict"]


@dataclass(frozen=True)
class Exercise:
    id: str
    #: the question, as the notebook asks it
    task: str
    #: what to look at when the answer is wrong (never the answer)
    hint: str
    #: computes the reference answer; keyword arguments the notebook may pass to save work
    solve: Callable[..., Any]
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
    """Whether ``answer`` is right; ``context`` passes objects the notebook already has (see each task)."""
    ex = EXERCISES[exercise_id]
    if answer is None or answer is ...:
        return Verdict(exercise_id, None, f"Not answered yet ({exercise_id}): set `answer` and run the cell again.")
    expected = ex.solve(**context)
    if _same(answer, expected, ex.rel):
        return Verdict(exercise_id, True, f"Right ({exercise_id}).")
    return Verdict(exercise_id, False, f"Not quite ({exercise_id}). Hint: {ex.hint}")


def solution(exercise_id: str, **context):
    """The reference answer, computed now."""
    return EXERCISES[exercise_id].solve(**context)


# ------------------------------------------------------------------ helpers
def _open(builder: str, **kwargs):
    from . import examples
    from .model import open_pte

    return open_pte(examples.build(builder, **kwargs))


def _peak_instruction(method, mem_id: int) -> tuple[int, int]:
    occ = method.occupancy(mem_id)
    i = int(occ.argmax())
    return i - 1, int(occ[i])  # index 0 is time -1 (the inputs written)


def _load_program_host_bytes(pte, loader: str) -> int:
    cost = pte.load_cost(loader)
    return int(cost[(cost.step == "load_program") & (cost.device == "cpu")].bytes.sum())


# -------------------------------------------------------------- 01: explore
def _01_1(pte=None):
    pte = pte or _open("device", side=64)
    return _peak_instruction(pte.methods["forward"], 1)


def _01_2():
    planned = _open("portable").methods["forward"].arena(1).size
    caller = _open("portable", alloc_graph_input=False, alloc_graph_output=False)
    return planned - caller.methods["forward"].arena(1).size


# ------------------------------------------------------------- 02: planning
def _02_1():
    from . import planning

    m = _open("hand_sized", extra=True).methods["forward"]
    return m.arena(1).size, planning.plan_arena(planning.build_problem(m, 1), "best_fit")[1]


def _02_2(tr=None):
    from . import planning

    tr = tr or _open("transformer", layers=4).methods["forward"]
    return planning.build_problem(tr, 1, alignment=64).lower_bound


def _02_3():
    out = []
    for layers in (1, 4):
        a = _open("transformer", layers=layers).methods["forward"].arena(1)
        out.append(round(a.size_over_peak, 3))
    return tuple(out)


# --------------------------------------------------------------- 03: devices
def _03_1(pte=None):
    return _load_program_host_bytes(pte or _open("three_methods", side=64), "corrected")


def _03_2():
    pte = _open("device", side=128)
    return pte.methods["forward2"].planned_bytes_by_device().get("cuda:0", 0), \
        pte.methods["forward"].planned_bytes_by_device().get("cuda:0", 0)


# ---------------------------------------------------------- 04: before/after
def _04_1():
    pte = _open("device", side=2048)
    return _load_program_host_bytes(pte, "legacy") - _load_program_host_bytes(pte, "corrected")


def _04_2(pte=None):
    pte = pte or _open("three_methods", side=64)
    cost = pte.load_cost("legacy")
    row = cost[cost.mem_id == 2].iloc[0]
    tagged = {a.device for m in pte.methods.values() for a in m.arenas if a.mem_id == 2} - {"cpu"}
    return int(row.bytes), sorted(tagged)[0]


# -------------------------------------------------------------------- 05: LLM
def _05_1(pte=None):
    pte = pte or _open("llm")
    m = pte.methods["forward"]
    state = m.tensors[m.tensors.role == "mutable_buffer"]
    return int(state.nbytes.sum()), round(float(state.nbytes.sum()) / m.arena(1).size, 3)


def _05_2():
    pte = _open("shared_state")
    out = []
    for name in ("prefill", "decode"):
        t = pte.methods[name].tensors
        state = t[t.role == "mutable_buffer"]
        out.append((int(state.mem_id.iloc[0]), int(state.nbytes.sum())))
    return tuple(out)


# ------------------------------------------------------------------- 06: diff
def _diff(a, b):
    from . import examples
    from .model import open_pte
    from .model.diff import diff_programs

    return diff_programs(open_pte(examples.build(*a[:1], **a[1])), open_pte(examples.build(*b[:1], **b[1])))


def _06_1():
    d = _diff(("portable", {}), ("portable", {"alloc_graph_input": False, "alloc_graph_output": False}))
    m = d.methods["forward"]
    return len(m.only_before), sum(1 for x in m.matched if x.by == "operators")


def _06_2():
    m = _diff(("transformer", {"layers": 2}), ("transformer", {"layers": 3})).methods["forward"]
    return m.arena(1).size.delta, len(m.only_after)


# ------------------------------------------------------------------- 07: a microcontroller
def _ethos_u(name: str):
    from . import examples
    from .model import open_pte

    return open_pte(examples.ethos_u_program(name))


def _07_1() -> int:
    return _ethos_u("u85_256_dedicated_sram_384kb").methods["forward"].delegate_temp_bytes


def _07_2() -> int:
    return _ethos_u("u55_128_shared_sram_split").methods["forward"].delegate_temp_bytes


EXERCISES: dict[str, Exercise] = {e.id: e for e in [
    Exercise("01.1", "In `forward` (the host method), at which instruction are the most bytes alive in arena 1, "
                     "and how many? Answer `(instruction, bytes)`; -1 means 'before the first instruction'.",
             "plot.occupancy(m) draws the curve; m.occupancy(1) holds it, its first entry being instruction -1. "
             "Which tensors are alive while the matrix product is written?", _01_1),
    Exercise("01.2", "Export the portable example with its input and output left to the caller "
                     "(`MemoryPlanningPass(alloc_graph_input=False, alloc_graph_output=False)`, see notebook 02). "
                     "How many bytes smaller is its arena 1? Think about when the input and output are alive "
                     "before you export.",
             "examples.build('portable', alloc_graph_input=False, alloc_graph_output=False) exports it; compare "
             "arena(1).size with the planned program's. Is the input alive at the arena's peak?", _01_2),
    Exercise("02.1", "Return `torch.sigmoid(e)` from the hand-sized module instead of `e` (a seventh tensor). "
                     "What arena does ExecuTorch's greedy plan give, and what does best fit give? "
                     "Answer `(greedy, best_fit)` in bytes.",
             "Work it on paper first: the new tensor is 512 bytes, alive from the add to the end. Then export "
             "it (examples.build('hand_sized', extra=True)) and compare.", _02_1),
    Exercise("02.2", "Plan the transformer's arena with 64-byte alignment "
                     "(`planning.build_problem(tr, 1, alignment=64)`). What is its lower bound?",
             "Every group's size is rounded up to the alignment; the bound is the most rounded bytes alive "
             "at once. Pass tr=... to check() to reuse your program.", _02_2),
    Exercise("02.3", "Export the transformer with 1 and with 4 layers. What is ExecuTorch's size/peak for each "
                     "(three decimals)? Answer `(one_layer, four_layers)`.",
             "examples.build('transformer', layers=L); the arena's size_over_peak.", _02_3),
    Exercise("03.1", "How many bytes does `Runtime.load_program` (the corrected loader) allocate on the host, at "
                     "load_program, for the three-method program?",
             "Host-only methods share arenas sized by the largest per index; the device method's arenas "
             "wait for load_method. pte.load_cost('corrected').", _03_1),
    Exercise("03.2", "Export the device program with `side=128`. How many bytes does `forward2` plan on cuda:0, "
                     "and how many does `forward`? Answer `(forward2, forward)`.",
             "Three side x side float32 tensors, plus XNNPACK's 64 bytes of arena padding.", _03_2),
    Exercise("04.1", "For the published experiment (`side=2048`), how many more host bytes does the legacy loader "
                     "allocate at load_program than the corrected one?",
             "The legacy loader puts every arena, the device one too, on the host at load_program.", _04_1),
    Exercise("04.2", "In the three-method program, the legacy loader's shared arena for runtime buffer 1 (mem_id 2): "
                     "how many bytes, and which device did the file tag it for? Answer `(bytes, device)`.",
             "pte.load_cost('legacy') lists the shared arenas; which method has a mem_id 2, and on what device?",
             _04_2),
    Exercise("05.1", "How many bytes do the KV caches of the exported forward take, and what fraction of arena 1 "
                     "is that (three decimals)? Answer `(bytes, fraction)`.",
             "The caches are the tensors whose role is mutable_buffer. Pass pte=... to reuse your export.", _05_1),
    Exercise("05.2", "In `examples.build('shared_state')`, prefill and decode share one cache. For each method, "
                     "which mem_id holds its state, and how many bytes? Answer `((mem_id, bytes), (mem_id, bytes))` "
                     "for prefill then decode.",
             "Look at the mutable_buffer rows of each method's tensors; the shared_state finding names the arena.",
             _05_2),
    Exercise("06.1", "Diff the portable example against the same export with its input and output left to the "
                     "caller. How many planned tensors are only in the first, and how many pair by operators? "
                     "Answer `(only_in_first, by_operators)`.",
             "A tensor the caller provides is not planned: it is in neither table. d.methods['forward'] has "
             "only_before and matched (each pair's `by`); md.table().matched_by counts them.", _06_1),
    Exercise("06.2", "Diff the portable transformer with 2 layers against the one with 3. By how many bytes does "
                     "arena 1 grow, and how many planned tensors are only in the 3-layer program? "
                     "Answer `(bytes, tensors)`.",
             "d.methods['forward'].arena(1).size.delta, and only_after. Tensors pair in instruction order when "
             "the operator, dtype and shape agree: which layer's tensors find no partner?", _06_2),
    Exercise("07.1", "Open `examples.ethos_u_program('u85_256_dedicated_sram_384kb')`. At least how many bytes must "
                     "its temp pool hold, before anything else the runtime puts there?",
             "The delegate takes its scratch from the temp allocator at every execute; pte.delegates says how much. "
             "The fast scratch is the firmware's, not the temp pool's.", _07_1),
    Exercise("07.2", "The split program's `forward` calls two Ethos-U delegates, one after the other. How many bytes "
                     "of temp pool do their scratches need together?",
             "ExecuTorch resets the temp allocator after every instruction: is a delegate's scratch still held "
             "when the next delegate runs?", _07_2),
]}
