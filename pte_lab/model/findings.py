"""Findings: what a person should know about a program before loading it. Every one is made here.

Each :class:`Kind` has one severity and one wording (the message builders
below); :func:`method_findings` and :func:`program_findings` apply the rules.
The runtime's :class:`~pte_lab.runtime.SharedArenasWarning` uses
:func:`shared_arenas_message` too, so the two say the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Iterable

from ..devices import device_problem
from ..format import ScalarType, TensorDataLocation, TensorShapeDynamism
from ..units import count, first_few, human_bytes
from .layout import duplicate_phrase

if TYPE_CHECKING:  # pragma: no cover
    from .method import Method
    from .pte import Pte
    from .validate import Conflict

__all__ = ["Kind", "Finding", "SEVERITIES", "method_findings", "delegate_memory_findings", "plan_findings",
           "program_findings", "shared_arenas_message", "sharing_host_methods", "shared_state", "duplicate_blob_findings",
           "operator_findings", "delegate_findings", "UNSAFE_TO_LOAD", "REFUSED_BY_RUNTIME",
           "REFUSED_BEFORE_LOADING", "ARGUMENT_KINDS"]

SEVERITIES = ("info", "warning", "error")


class Kind(str, Enum):
    """A stable identifier of a finding (compares equal to its string) and its severity."""

    def __new__(cls, value: str, severity: str):
        obj = str.__new__(cls, value)
        obj._value_ = value
        obj.severity = severity
        return obj

    __str__ = str.__str__
    __format__ = str.__format__

    #: host-only methods share one set of host arenas under Runtime.load_program
    SHARED_ARENAS = ("shared_arenas", "warning")
    #: methods plan the same state (same name, arena and offset): a prefill and a decode sharing a KV cache
    SHARED_STATE = ("shared_state", "info")
    #: methods plan shared state, but a loader gives one of them private arenas: its state is its own
    STATE_NOT_SHARED = ("state_not_shared", "warning")
    #: constants live in an external .ptd file
    EXTERNAL_DATA = ("external_data", "info")
    #: the .ptd given with the program lacks keys the program needs
    EXTERNAL_DATA_MISSING = ("external_data_missing", "error")
    #: constants stored inline in the deprecated constant_buffer table: ExecuTorch 1.5.1 refuses the file
    CONSTANT_BUFFER_PATH = ("constant_buffer_path", "error")
    #: identical blobs (constants, delegate blobs, named data) stored more than once in the file
    DUPLICATE_BLOBS = ("duplicate_blobs", "warning")
    #: several execution plans share a name: ExecuTorch only ever finds the first
    DUPLICATE_METHOD = ("duplicate_method", "warning")
    #: an arena lives on a device: loading needs that device's allocator
    DEVICE_ALLOCATOR = ("device_allocator", "info")
    #: tensors tagged for a device are planned in host arenas
    DEVICE_TAG_IN_HOST_ARENA = ("device_tag_in_host_arena", "warning")
    #: host tensors are planned in device arenas
    HOST_TENSOR_IN_DEVICE_ARENA = ("host_tensor_in_device_arena", "warning")
    #: the method jumps backwards; lifetimes inside the loop are extended
    LOOPS = ("loops", "info")
    #: inputs or outputs whose memory the caller provides
    UNPLANNED_IO = ("unplanned_io", "info")
    #: two live tensors overlap in memory
    PLAN_OVERLAP = ("plan_overlap", "error")
    #: a tensor runs past the end of its arena
    OUTSIDE_ARENA = ("outside_arena", "error")
    #: a tensor names an arena the method does not have
    UNKNOWN_ARENA = ("unknown_arena", "error")
    #: an arena is tagged for a device ExecuTorch cannot name (an unknown type, a negative index)
    UNKNOWN_DEVICE = ("unknown_device", "error")
    #: a kernel writes a tensor that has no memory (not planned, not a constant, not an input or output)
    UNBACKED_TENSOR = ("unbacked_tensor", "error")
    #: one segment is read as two kinds of data (a reference retargeted into another table's data)
    SEGMENT_ROLES = ("segment_roles", "error")
    #: a control instruction names a value of the wrong kind (FreeCall of a non-tensor: the runtime aborts)
    OPERAND_KINDS = ("operand_kinds", "error")
    #: a kernel call passes a value of a kind its operator's schema does not take (the kernel aborts)
    OPERATOR_ARGUMENTS = ("operator_arguments", "error")
    #: operators whose schema pte_lab found nowhere: the kinds of their arguments are not checked
    UNCHECKED_OPERATORS = ("unchecked_operators", "info")
    #: delegates called with different arguments read one blob: one compiles another's graph
    SHARED_DELEGATE_BLOB = ("shared_delegate_blob", "error")
    #: a delegate blob does not begin the way its backend's blobs do
    DELEGATE_BLOB_FORMAT = ("delegate_blob_format", "error")
    #: a delegate takes memory outside the plan at every execute (Ethos-U: its scratch from the temp allocator)
    DELEGATE_SCRATCH = ("delegate_scratch", "info")
    #: a delegate's input/output descriptors do not match the tensors the call passes: refused at execute
    DELEGATE_IO = ("delegate_io", "error")


#: plan errors that would make ExecuTorch read or write outside its buffers: never loaded
UNSAFE_TO_LOAD = frozenset({Kind.UNKNOWN_ARENA, Kind.OUTSIDE_ARENA, Kind.UNKNOWN_DEVICE, Kind.UNBACKED_TENSOR,
                            Kind.SEGMENT_ROLES, Kind.OPERAND_KINDS})
#: findings that predict ExecuTorch's runtime will refuse the program (named with its refusal)
REFUSED_BY_RUNTIME = frozenset({Kind.CONSTANT_BUFFER_PATH})
#: findings (from operator schemas the runtime layer looks up) that pte_lab.load refuses before ExecuTorch
#: sees the method: the kernel would abort the process
REFUSED_BEFORE_LOADING = frozenset({Kind.OPERATOR_ARGUMENTS})


@dataclass(frozen=True)
class Finding:
    kind: Kind
    #: the method it is about; None for the whole program
    method: str | None
    message: str
    details: dict = field(default_factory=dict, compare=False)

    @property
    def severity(self) -> str:
        """"info", "warning" or "error" (fixed by the kind)."""
        return self.kind.severity

    def __str__(self) -> str:
        from ..printable import printable_text

        where = f"[{self.method}] " if self.method else ""
        return printable_text(f"{self.severity}: {where}{self.message}")


# ------------------------------------------------------------------- wording
def shared_arenas_message(methods: Iterable[str]) -> str:
    return (f"host-only methods {', '.join(methods)} share one set of host arenas under "
            f"Runtime.load_program: running one overwrites the others' intermediate values "
            f"(outputs are copied out, so returned values stay correct)")


# --------------------------------------------------------------------- rules
def sharing_host_methods(methods) -> list[str]:
    """Host-only methods with planned arenas: the ones ``Runtime.load_program`` makes share arenas.

    ``methods`` are Method-like objects (``name``, ``is_device_method``,
    ``n_arenas``); metadata methods (``get_max_seq_len``...) plan nothing and
    share nothing.
    """
    return [m.name for m in methods if not m.is_device_method and m.n_arenas > 0]


def shared_state(methods) -> dict[tuple[int, int], dict]:
    """State planned by several methods at one place: ``{(mem_id, offset): {"methods", "names", "bytes"}}``.

    Two methods share a state tensor when both plan a state tensor
    (role ``mutable_buffer``) with the same fully qualified name in the same
    arena at the same offset (what ``share_mutable_buffers=True`` writes).
    """
    import numpy as np

    where: dict[str, dict[tuple[int, int, int], list[str]]] = {}
    for m in methods:
        c = m.analysis.columns
        named = np.flatnonzero((c["role"] == "mutable_buffer") & c["name"].astype(bool))
        for name, place in zip(c["name"][named].tolist(),
                               zip(*(c[k][named].tolist() for k in ("mem_id", "offset", "nbytes")))):
            where.setdefault(name, {}).setdefault(place, []).append(m.name)
    out: dict[tuple[int, int], dict] = {}
    for name, places in where.items():
        for (mem_id, offset, nbytes), users in places.items():
            if len(users) > 1:
                e = out.setdefault((mem_id, offset), {"methods": users, "names": [], "bytes": nbytes})
                e["names"].append(name)
    return out


def _state_findings(p: "Pte") -> list[Finding]:
    shared = shared_state(p.methods.values())
    if not shared:
        return []
    by_arena: dict[tuple[int, tuple[str, ...]], list[dict]] = {}
    for (mem_id, _), e in sorted(shared.items()):
        by_arena.setdefault((mem_id, tuple(e["methods"])), []).append(e)
    out = []
    for (mem_id, users), entries in by_arena.items():
        names = [n for e in entries for n in e["names"]]
        nbytes = sum(e["bytes"] for e in entries)
        shown = first_few(names, 4)
        private = [n for n in users if p.methods[n].is_device_method]
        sharing = [n for n in users if n not in private]
        out.append(Finding(
            Kind.SHARED_STATE, None,
            f"methods {', '.join(users)} plan the same state in arena mem_id {mem_id}: "
            f"{count(len(names), 'tensor')}, {human_bytes(nbytes)} ({shown}). Runtime.load_program gives "
            f"host-only methods one set of arenas, so what {' or '.join(sharing) or 'one'} writes there the "
            f"next call reads; _load_for_executorch (the C++ Module) gives every method private arenas, "
            f"where they would not share it",
            {"mem_id": mem_id, "methods": list(users), "names": names, "bytes": nbytes}))
        if private:
            out.append(Finding(
                Kind.STATE_NOT_SHARED, None,
                f"{', '.join(private)} plans state shared with {', '.join(sharing) or 'other methods'} but has "
                f"device arenas: Runtime.load_program gives it private arenas, so its state is its own, "
                f"not the host methods'", {"mem_id": mem_id, "methods": private}))
    return out


def plan_findings(method: str, columns, buffer_sizes, conflicts: "Iterable[Conflict]") -> list[Finding]:
    """Plan problems: tensors in arenas the method lacks or past their end, overlapping live tensors.

    ``columns`` are the planned tensors' value, mem_id, offset and nbytes (arrays, see
    :attr:`pte_lab.model.analysis.Analysis.columns`).
    """
    import numpy as np

    mem_id, end = columns["mem_id"], columns["offset"] + columns["nbytes"]
    known = (mem_id >= 1) & (mem_id < len(buffer_sizes))
    sizes = np.append(np.asarray(buffer_sizes, dtype=np.int64), 0)  # the last entry for unknown arenas
    out = []
    for i in np.flatnonzero(~known | (end > sizes[np.where(known, mem_id, -1)])).tolist():
        v, m, offset = (int(columns[k][i]) for k in ("value", "mem_id", "offset"))
        if not known[i]:
            out.append(Finding(Kind.UNKNOWN_ARENA, method,
                               f"value {v} is planned in mem_id {m}, which this method "
                               f"does not have (arenas 1..{len(buffer_sizes) - 1})", {"value": v}))
        else:
            out.append(Finding(Kind.OUTSIDE_ARENA, method,
                               f"value {v} occupies bytes [{offset}, {int(end[i])}) "
                               f"past the end of arena {m} ({buffer_sizes[m]} bytes)", {"value": v}))
    for c in conflicts:
        out.append(Finding(Kind.PLAN_OVERLAP, method, str(c), {"mem_id": c.mem_id, "values": (c.a, c.b)}))
    return out


def _unbacked_writes(m: "Method") -> list[tuple[int, int]]:
    """(value, instruction) for tensors a KernelCall or MoveCall writes that have no memory at all."""
    from .lifetimes import Writes

    raw = m.raw
    io = set(raw.inputs) | set(raw.outputs)
    out, seen, done = [], set(), set()
    writes = Writes(raw)
    for i, ins in enumerate(raw.instructions):
        if ins.kind not in ("KernelCall", "MoveCall") or id(ins) in done:
            continue
        done.add(id(ins))  # an instruction record named again writes the same values
        for v in writes(i):
            t = raw.values[v].tensor
            if (t is not None and v not in seen and v not in io and t.mem_id is None and t.data_buffer_idx == 0
                    and t.location != TensorDataLocation.EXTERNAL
                    and t.shape_dynamism != TensorShapeDynamism.DYNAMIC_UNBOUND):
                seen.add(v)
                out.append((v, i))
    return out


def _wrong_operands(m: "Method") -> list[str]:
    """Control instructions whose operand is of a kind the runtime cannot take."""
    raw, out = m.raw, []
    for i, ins in enumerate(raw.instructions):
        if ins.kind == "FreeCall" and raw.values[ins.args[0]].kind != "Tensor":
            out.append(f"instruction {i} frees v{ins.args[0]}, a {raw.values[ins.args[0]].kind}, not a tensor")
        elif ins.kind == "JumpFalseCall":
            v = raw.values[ins.args[0]]
            if not (v.kind == "Bool" or (v.kind == "Tensor" and v.tensor.scalar_type == ScalarType.BOOL)):
                out.append(f"instruction {i} branches on v{ins.args[0]}, a {v.kind}, not a boolean")
    return out


#: schema argument type -> the EValue kinds ExecuTorch's kernel wrappers unbox for it (``T?`` adds None)
ARGUMENT_KINDS: dict[str, frozenset[str]] = {
    "Tensor": frozenset({"Tensor"}), "Tensor[]": frozenset({"TensorList"}),
    "Tensor?[]": frozenset({"OptionalTensorList"}),
    "int": frozenset({"Int"}), "SymInt": frozenset({"Int"}), "ScalarType": frozenset({"Int"}),
    "Layout": frozenset({"Int"}), "MemoryFormat": frozenset({"Int"}),
    "float": frozenset({"Double"}), "bool": frozenset({"Bool"}), "Scalar": frozenset({"Int", "Double", "Bool"}),
    "int[]": frozenset({"IntList"}), "SymInt[]": frozenset({"IntList"}), "float[]": frozenset({"DoubleList"}),
    "bool[]": frozenset({"BoolList"}), "str": frozenset({"String"}),
}
_NONE = frozenset({"None", "Null"})
_A = {"Int": "an Int", "Double": "a Double", "Bool": "a Bool", "Tensor": "a Tensor", "None": "None", "Null": "None",
      "String": "a String", "IntList": "an IntList", "DoubleList": "a DoubleList", "BoolList": "a BoolList",
      "TensorList": "a TensorList", "OptionalTensorList": "an OptionalTensorList"}


def _accepts(type_: str) -> frozenset[str] | None:
    """EValue kinds a schema type takes; None when pte_lab does not know the type (not checked)."""
    optional = type_.endswith("?")
    base = type_[:-1] if optional else type_
    if base.endswith("]") and "[" in base and not base.endswith("[]"):
        base = base[: base.index("[")] + "[]"  # int[2] takes what int[] takes
    kinds = ARGUMENT_KINDS.get(base)
    if kinds is None:
        return None
    return kinds | _NONE if optional else kinds


def _argument_problems(plan, ins, i: int, op: str, schema: dict) -> list[str]:
    params = list(schema["arguments"])
    returns = schema["returns"]
    if len(returns) == 1:
        params.append(("the returned value", returns[0]))
    elif len(returns) > 1:
        params.append(("the returned values", "Tensor[]"))
    else:
        params.append(("the returned value", "?"))
    if len(ins.args) != len(params):
        return [f"instruction {i} ({op}) names {count(len(ins.args), 'value')} where its schema takes "
                f"{count(len(params) - 1, 'argument')} and a return"]
    out = []
    for (name, type_), v in zip(params, ins.args):
        kinds = _accepts(type_)
        kind = plan.values[v].kind
        if kinds is not None and kind not in kinds:
            out.append(f"instruction {i} ({op}) passes v{v}, {_A.get(kind, kind)}, as {name!r}, where its schema "
                       f"takes {type_}")
    return out


def operator_findings(m: "Method", schemas: dict) -> list[Finding]:
    """Each KernelCall's arguments against its operator's schema.

    ``schemas`` maps an operator (``"aten::add.out"``) to ``{"arguments": ((name, type), ...), "returns":
    (type, ...)}`` or None when no schema is known (see :mod:`pte_lab.runtime.schemas`, which reads torch's
    registry). A KernelCall names every argument in order, then the returned value (several: one TensorList).
    """
    plan, ops = m.raw, m.operators
    problems: list[str] = []
    unknown = sorted({ops[ins.target] for ins in plan.instructions
                      if ins.kind == "KernelCall" and schemas.get(ops[ins.target]) is None})
    done: dict[int, bool] = {}
    for i, ins in enumerate(plan.instructions):
        if ins.kind != "KernelCall" or id(ins) in done:
            continue
        done[id(ins)] = True  # one instruction record named again passes the same values
        schema = schemas.get(ops[ins.target])
        if schema is not None:
            problems += _argument_problems(plan, ins, i, ops[ins.target], schema)
    out = []
    if problems:
        out.append(Finding(Kind.OPERATOR_ARGUMENTS, m.name,
                           "; ".join(problems[:4]) + (f"; and {len(problems) - 4} more" if len(problems) > 4 else "")
                           + ": ExecuTorch's kernel would abort the process reading it, so pte_lab will not load "
                           "the program", {"problems": problems}))
    if unknown:
        shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        out.append(Finding(Kind.UNCHECKED_OPERATORS, m.name,
                           f"{count(len(unknown), 'operator')} without a schema pte_lab could find ({shown}): the "
                           f"kinds of {'its' if len(unknown) == 1 else 'their'} arguments are not checked before "
                           f"ExecuTorch runs {'it' if len(unknown) == 1 else 'them'}",
                           {"operators": unknown}))
    return out


def delegate_findings(p: "Pte") -> list[Finding]:
    """Blobs read by delegates called with different arguments, and blobs that are not their backend's."""
    from ..errors import PteLabError
    from .delegates import blob_problem, blob_uses
    from .layout import byte_reader

    if getattr(p, "raw", None) is None:  # a program-like object without its file's records
        return []
    uses = blob_uses(p)
    out = []
    by_blob: dict[tuple[str, int], list] = {}
    for u in uses:
        by_blob.setdefault((u.location, u.index), []).append(u)
    for users in by_blob.values():
        if len(users) < 2:
            continue
        if len({u.backend for u in users}) > 1 or len({u.signature for u in users if u.signature}) > 1:
            out.append(Finding(
                Kind.SHARED_DELEGATE_BLOB, None,
                f"{' and '.join(u.where for u in users[:3])}{' and more' if len(users) > 3 else ''} read one "
                f"blob ({users[0].blob}, {human_bytes(users[0].size)}) but are called with different arguments: "
                f"ExecuTorch's serializer stores a blob once only when delegates are identical, so one names "
                f"another's blob and its backend would compile the wrong graph (XNNPACK aborts the process in "
                f"load_method); pte_lab.load runs such a program in a worker",
                {"blob": users[0].blob, "delegates": [(u.method, u.delegate) for u in users]}))
    try:
        read = byte_reader(p)
    except PteLabError:  # bytes not available (an opened file object): blobs are not checked
        read = None
    if read is not None:
        for users in by_blob.values():
            u = users[0]
            try:
                problem = blob_problem(u, read)
            except OSError:  # the file went away or changed since it was opened: nothing to check
                continue
            if problem:
                out.append(Finding(
                    Kind.DELEGATE_BLOB_FORMAT, u.method,
                    f"delegate {u.delegate} ({u.backend}, {u.blob}, {human_bytes(u.size)}) is not what its backend "
                    f"reads: {problem}; the backend refuses or misreads it at load_method (pte_lab.load runs "
                    f"such a program in a worker)", {"delegate": u.delegate, "blob": u.blob}))
    return out


def _misplaced(m: "Method"):
    """Rows of the planned tensors tagged for a device in host arenas, and of host tensors in device arenas
    (tensors in arenas the method lacks are neither)."""
    import numpy as np

    c = m.analysis.columns
    arenas, row = np.unique(c["mem_id"], return_inverse=True)  # a few arenas, however many tensors
    arena_dev = {a.mem_id: a.device for a in m.arenas}
    dev = np.array([arena_dev.get(k) for k in arenas.tolist()], dtype=object)[row]
    host_tensor = c["device"] == "cpu"
    return (np.flatnonzero(~host_tensor & (dev == "cpu")),
            np.flatnonzero(host_tensor & (dev != "cpu") & (dev != None)))  # noqa: E711 (elementwise)


def _delegate_label(d) -> str:
    what = d.settings
    return f"delegate {d.index} ({d.backend}{', ' + what if what else ''})"


def delegate_memory_findings(m: "Method") -> list[Finding]:
    """What delegates' blobs declare: scratch outside the plan, descriptors that do not match the calls' tensors
    (a malformed blob is :func:`delegate_findings`'s ``delegate_blob_format``)."""
    from .delegates import io_checks

    out = []
    for d in getattr(m, "delegate_memory", ()):
        s = d.stream
        if s is None:
            continue
        if d.scratch_bytes:
            program, scratch, fast = d.places
            where = f", in {scratch}" if scratch else ""
            from_ = ("from the temp allocator at every execute" if d.scratch_from == "temp allocator"
                     else f"from {d.scratch_from}")
            extra = (f"; the NPU also uses a fast scratch the firmware provides ({fast.split(',')[0]}), whose size "
                     f"the file does not give" + (f" (Vela's limit in this mode: {human_bytes(d.fast_scratch_limit)})"
                                                  if d.fast_scratch_limit else "")) if fast else ""
            out.append(Finding(Kind.DELEGATE_SCRATCH, m.name,
                               f"{_delegate_label(d)} takes {human_bytes(d.scratch_bytes)} ({d.scratch_bytes:,} bytes) "
                               f"of scratch {from_}{where}: the planned arenas ({human_bytes(m.planned_bytes)}) do "
                               f"not include it{extra}",
                               {"delegate": d.index, "bytes": d.scratch_bytes, "allocator": d.scratch_from,
                                "memory_mode": d.memory_mode}))
        bad = [c for c in io_checks(m.raw, d) if c.refusal]
        if bad:
            shown = first_few((f"{c.direction} {c.position}" + (f" (v{c.value} {c.dtype}, {human_bytes(c.nbytes)})"
                                                                if c.value is not None and c.dtype else "")
                               + f": {c.refusal}" for c in bad), 3, "; ", "; and {n} more")
            out.append(Finding(Kind.DELEGATE_IO, m.name,
                               f"{_delegate_label(d)}: Vela's descriptors do not match the tensors the call passes: "
                               f"{shown} (ExecuTorch's {d.backend} refuses it at execute: InvalidProgram, or "
                               f"copies outside the scratch)",
                               {"delegate": d.index, "arguments": [(c.direction, c.position) for c in bad]}))
    return out


def method_findings(m: "Method") -> list[Finding]:
    """Device findings, loops and unplanned I/O of a method, then its plan problems."""
    out = []
    in_host, on_dev = _misplaced(m)
    if len(in_host):
        devs = sorted(set(m.analysis.columns["device"][in_host].tolist()))
        out.append(Finding(
            Kind.DEVICE_TAG_IN_HOST_ARENA, m.name,
            f"{count(len(in_host), 'tensor')} tagged for {', '.join(devs)} {'is' if len(in_host) == 1 else 'are'} "
            f"planned in host arenas "
            f"(what enable_non_cpu_memory_planning=False produces): a device backend receives "
            f"host pointers for them", {"values": m.analysis.columns["value"][in_host].tolist()}))
    if len(on_dev):
        out.append(Finding(Kind.HOST_TENSOR_IN_DEVICE_ARENA, m.name,
                           f"{len(on_dev)} host tensors are planned in device arenas",
                           {"values": m.analysis.columns["value"][on_dev].tolist()}))
    for a in m.arenas:
        if a.device == "cpu":  # the usual place, and a file may list 100,000 arenas
            continue
        problem = device_problem(a.device)
        if problem:
            out.append(Finding(Kind.UNKNOWN_DEVICE, m.name,
                               f"arena mem_id {a.mem_id} is tagged {a.device!r}: {problem}, so no runtime can "
                               f"place it", {"mem_id": a.mem_id, "device": a.device}))
            continue
        if a.device != "cpu":
            out.append(Finding(
                Kind.DEVICE_ALLOCATOR, m.name,
                f"arena mem_id {a.mem_id} (runtime buffer {a.runtime_index}, {a.size} bytes) lives on "
                f"{a.device}: loading this method needs a {a.device.split(':')[0]} device allocator",
                {"mem_id": a.mem_id, "device": a.device, "bytes": a.size}))
    if m.has_loops:
        out.append(Finding(Kind.LOOPS, m.name,
                           "the method jumps backwards (a loop): lifetimes of values used inside "
                           "the loop are extended to its last instruction"))
    unbacked = _unbacked_writes(m)
    if unbacked:
        shown = ", ".join(f"v{v} (instruction {i})" for v, i in unbacked[:5])
        out.append(Finding(Kind.UNBACKED_TENSOR, m.name,
                           f"{count(len(unbacked), 'tensor')} written by a kernel {'has' if len(unbacked) == 1 else 'have'}"
                           f" no memory: not planned, not a constant, not a method input or output ({shown}); "
                           f"ExecuTorch would write through a null pointer", {"values": [v for v, _ in unbacked]}))
    wrong = _wrong_operands(m)
    if wrong:
        out.append(Finding(Kind.OPERAND_KINDS, m.name,
                           first_few(wrong, 4, "; ", "; and {n} more")
                           + " (ExecuTorch aborts or refuses the method)", {"instructions": len(wrong)}))
    unplanned = [s for s in m.inputs + m.outputs if s.kind == "Tensor" and not s.planned]
    if unplanned:
        out.append(Finding(Kind.UNPLANNED_IO, m.name,
                           f"{count(len(unplanned), 'input/output', 'inputs/outputs')} "
                           f"{'is' if len(unplanned) == 1 else 'are'} not planned: the caller provides their memory", {"values": [s.value for s in unplanned]}))
    return out + delegate_memory_findings(m) + m.validate()


def program_findings(p: "Pte", schemas: dict | None = None) -> list[Finding]:
    """Segments, delegate blobs, sharing between methods, external data, then every method's findings
    (with ``schemas``, each KernelCall's arguments against its operator's schema too)."""
    out: list[Finding] = []
    for seg in getattr(getattr(p, "raw", None), "segments", []):
        if len(seg.roles) > 1:
            out.append(Finding(Kind.SEGMENT_ROLES, None,
                               f"segment {seg.index} is read as {' and as '.join(seg.roles)}: one table points "
                               f"into another's data, which a backend or kernel would misread", {"segment": seg.index,
                                                                                                  "roles": seg.roles}))
    names = list(getattr(getattr(p, "raw", None), "plan_names", []))
    for name in dict.fromkeys(n for n in names if names.count(n) > 1):
        plans = [i for i, n in enumerate(names) if n == name]
        out.append(Finding(Kind.DUPLICATE_METHOD, None,
                           f"{len(plans)} execution plans are named {name!r} (plans {plans}): ExecuTorch loads "
                           f"the first (plan {plans[0]}); the others can never be loaded", {"plans": plans}))
    out.extend(delegate_findings(p))
    host = sharing_host_methods(p.methods.values())
    if len(host) > 1:
        out.append(Finding(Kind.SHARED_ARENAS, None, shared_arenas_message(host), {"methods": host}))
    out.extend(_state_findings(p))
    if p.expects_external_data:
        keys = p.external_keys
        data = getattr(p, "data", None)
        if data is None:
            out.append(Finding(Kind.EXTERNAL_DATA, None,
                               f"{count(len(keys), 'constant')} {'lives' if len(keys) == 1 else 'live'} in an external .ptd file: "
                               f"pass it as data_path when loading", {"keys": keys}))
        else:
            have = set(data.keys)
            missing = [k for k in keys if k not in have]
            name = data.path or "the .ptd file"
            if missing:
                shown = first_few(map(repr, missing), 5)
                out.append(Finding(Kind.EXTERNAL_DATA_MISSING, None,
                                   f"{name} lacks {len(missing):,} of the {count(len(keys), 'key')} the program needs ({shown}): "
                                   f"loading a method that uses them fails", {"missing": missing}))
            else:
                per = p.external_bytes_by_method()
                out.append(Finding(Kind.EXTERNAL_DATA, None,
                                   f"{name} has {'the one key' if len(keys) == 1 else f'all {len(keys):,} keys'} the program needs; "
                                   + ", ".join(f"{m} maps {human_bytes(b)}" for m, b in per.items()),
                                   {"keys": keys, "bytes_by_method": per}))
    inline = getattr(p, "inline_constant_bytes", 0)
    if inline:
        out.append(Finding(Kind.CONSTANT_BUFFER_PATH, None,
                           f"{human_bytes(inline)} of constants are stored inline in the deprecated "
                           f"constant_buffer table: ExecuTorch 1.5.1's runtime refuses such a file at "
                           f"load_program (error 0x23, the constant_buffer path is disabled in its builds); "
                           f"re-export it with a current ExecuTorch", {"bytes": inline}))
    for m in p.methods.values():
        out.extend(m.findings(schemas))
    return out


def duplicate_blob_findings(layout) -> list[Finding]:
    """From :func:`pte_lab.model.layout.file_layout` rows: identical blobs stored more than once."""
    dups = [(name, region, n, first) for region, name, _, _, n, _, first in layout if first is not None]
    if not dups:
        return []
    wasted = sum(n for _, _, n, _ in dups)
    shown = first_few((duplicate_phrase(*d) for d in dups), 4, "; ", "; and {n} more")
    return [Finding(Kind.DUPLICATE_BLOBS, None,
                    f"{count(len(dups), 'blob')} repeat{'s' if len(dups) == 1 else ''} bytes stored earlier in "
                    f"the file: {human_bytes(wasted)} could be stored once ({shown})",
                    {"bytes": wasted, "blobs": [{"name": d[0], "region": d[1], "bytes": d[2], "same_as": d[3]}
                                                for d in dups]})]
