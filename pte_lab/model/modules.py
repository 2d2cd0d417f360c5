"""A method's memory by module: the bytes each level of the model's module hierarchy holds.

With an ETRecord (``pte_lab.open(path, etrecord=...)``) every planned tensor has the module whose node
writes it (:mod:`pte_lab.model.attribution`). ``module_memory`` adds each tensor's bytes to that
module and to every module above it (``layers``, ``layers.0``, ``layers.0.attention``...):

- ``peak_bytes``: bytes alive at the method's peak (the instruction and arena :attr:`Method.peak` explains);
- ``max_live``: per arena, the most bytes the module's tensors hold at once over the run;
- ``constant_bytes``: constants (weights) stored in the program that its kernel calls read;
- ``named_data_bytes``: named data (a ``.ptd`` file's or the program's named data) that its calls read;
- ``delegate_bytes``: the blobs of the delegate calls that swallowed it.

A delegate call swallows several modules: a tensor it writes belongs to the node that leaves the
delegated subgraph where the ETRecord names one, else to the innermost module holding every module it
swallowed; the constants and named data it reads (XNNPACK names its weights' keys in its blob) and its
blob go to that module too. A tensor no node writes (a copy the runtime inserts) goes to the module of the
first call that reads it; the method's inputs and what nothing names stay in rows of their own
(:data:`INPUTS`, :data:`NO_MODULE`), never invented modules.

Work is O(n log n) in the tensors times the depth of the module paths.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING
from collections.abc import Mapping

from ..errors import PteLabError
from ..format.blobs import delegate_span
from ..format.schema import TensorDataLocation
from ..vocabulary import Role, InstructionKind, ValueKind
from .analysis import tensor_meta
from .attribution import kernel_node
from .backends import XNNPACK

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from .method import Method

__all__ = ["ModuleRow", "ModuleMemory", "module_memory", "NoModulesError", "INPUTS", "NO_MODULE", "MODULE_COLUMNS",
           "lowest_common", "no_modules_message"]

#: the rows of tensors that belong to no module: the method's inputs, and tensors nothing attributes
INPUTS = "(method inputs)"
#: the row of the tensors nothing attributes to a module
NO_MODULE = "(no module)"
#: XNNPACK names each weight it reads from named data by its key: a SHA-256 in hex, maybe after a prefix
#: (``scale_`` for a quantized weight's scales)
_HEX_KEY = re.compile(rb"([A-Za-z_]{0,16})([0-9a-f]{64})")


class NoModulesError(PteLabError, LookupError):
    """Raised for memory by module of a program opened without its ETRecord: nothing names the modules."""


def no_modules_message(method: str) -> str:
    """What to pass for memory by module: the one home of that wording."""
    return (f"method {method!r}: memory by module needs the program's ETRecord, which names each tensor's "
            f"module: pte_lab.open(path, etrecord='model.etrecord') (export with generate_etrecord=True, then "
            f"get_etrecord().save(path); export_llm: debug.generate_etrecord=true)")


@dataclass(frozen=True)
class ModuleRow:
    """One module of the hierarchy (or a row of :data:`INPUTS` / :data:`NO_MODULE`); bytes count the module
    and every module inside it."""

    #: dotted path (``layers.0.attention``; ``""`` is the root module), or :data:`INPUTS` / :data:`NO_MODULE`
    module: str
    #: the module's class name (``Linear``) where a node records it (a ``ModuleList`` is never called: None)
    module_type: str | None
    #: 0 for the root and the rows outside it, 1 for ``layers``, 2 for ``layers.0``...
    depth: int
    parent: str | None
    tensors: int
    peak_bytes: int
    #: per arena of :attr:`ModuleMemory.arenas`, the most bytes its tensors hold at once over the run
    max_live: tuple[int, ...]
    constant_bytes: int
    named_data_bytes: int
    delegate_bytes: int


#: the DataFrame's columns before the arenas' (``max_live_arena_<mem_id>``) and after them
MODULE_COLUMNS = (("module", "module_type", "depth", "parent", "tensors", "peak_bytes"),
                  ("constant_bytes", "named_data_bytes", "delegate_bytes"))


@dataclass(frozen=True)
class ModuleMemory:
    """A method's memory by module: rows parent first, siblings by the bytes they hold at the peak."""

    method: str
    #: the arena and instruction of the peak (:attr:`Method.peak`), None without live tensors
    peak_mem_id: int | None
    peak_at: int | None
    arenas: tuple[int, ...]
    rows: tuple[ModuleRow, ...]
    #: named data of the program that no call of this method is seen to read
    unplaced_named_data: int
    #: planned value -> the row its bytes count in first (its module, :data:`INPUTS` or :data:`NO_MODULE`);
    #: views and empty tensors are left out
    owner: Mapping[int, str]

    def row(self, module: str) -> ModuleRow:
        """The row of ``module`` (a dotted path; ``""`` the root); ``KeyError`` for a module it lacks."""
        for r in self.rows:
            if r.module == module:
                return r
        raise KeyError(f"no module {module!r} in method {self.method!r}")

    def frame(self) -> "pd.DataFrame":
        """The rows as a DataFrame (:data:`MODULE_COLUMNS`, ``max_live_arena_<mem_id>`` between them)."""
        import pandas as pd

        head, tail = MODULE_COLUMNS
        cols = [*head, *(f"max_live_arena_{a}" for a in self.arenas), *tail]
        data = [[r.module, r.module_type, r.depth, r.parent, r.tensors, r.peak_bytes, *r.max_live,
                 r.constant_bytes, r.named_data_bytes, r.delegate_bytes] for r in self.rows]
        return pd.DataFrame(data, columns=cols)


def lowest_common(paths) -> str | None:
    """The innermost module holding every path (``layers.0.fc1``, ``layers.0.fc2`` -> ``layers.0``)."""
    common: list[str] | None = None
    for p in paths:
        parts = p.split(".") if p else []
        if common is None:
            common = parts
        else:
            k = 0
            while k < min(len(common), len(parts)) and common[k] == parts[k]:
                k += 1
            common = common[:k]
    return None if common is None else ".".join(common)


def _prefixes(path: str) -> list[str]:
    """``a.b.c`` -> ``["", "a", "a.b", "a.b.c"]``."""
    if not path:
        return [""]
    parts = path.split(".")
    return [""] + [".".join(parts[:k]) for k in range(1, len(parts) + 1)]


def _handle_owners(rec, h: int) -> tuple[str | None, str | None]:
    """(the innermost module holding every module of handle ``h``'s nodes, the innermost module owning every
    buffer they read), None where they name none; worked out once per handle (kept in the record's memo)."""
    memo = rec.memo.setdefault("modules", {})
    got = memo.get(h)
    if got is None:
        nodes = rec.by_handle.get(h, ())
        names = rec.buffers
        mods = dict.fromkeys(nd.module for nd in nodes if nd.module is not None)
        owners = dict.fromkeys(names[i].rpartition(".")[0] for nd in nodes for i in nd.inputs if i in names)
        got = memo[h] = (lowest_common(mods) if mods else None, lowest_common(owners) if owners else None)
    return got


def _instruction_modules(m: "Method") -> dict[int, str]:
    """Instruction -> the module it belongs to (a delegate call: the innermost module of all it swallowed)."""
    rec = m.etrecord
    out: dict[int, str] = {}
    for ins in m.instructions:
        hs = [h for h in rec.handles_of(ins.index) if h in rec.by_handle]
        if not hs:
            continue
        if ins.kind == InstructionKind.DELEGATE_CALL:  # the innermost module of all is that of each handle's innermost
            mods = [mod for h in hs if (mod := _handle_owners(rec, h)[0]) is not None]
            mod = lowest_common(mods) if mods else None
        else:  # the module of the node it is attributed to
            mod = kernel_node(rec, ins).module
        if mod is not None:
            out[ins.index] = mod
    return out


def _buffer_owner(rec, ins) -> str | None:
    """The innermost module owning every buffer the instruction's nodes read (None: they name none)."""
    owners = [o for h in rec.handles_of(ins.index) if (o := _handle_owners(rec, h)[1]) is not None]
    return lowest_common(owners) if owners else None


def _max_live(spans: list[tuple[int, int, int]]) -> int:
    """The most bytes alive at once among ``(first, last, nbytes)`` spans (a sweep over sorted events)."""
    events = sorted([(f, b) for f, _, b in spans] + [(la + 1, -b) for _, la, b in spans], key=lambda e: (e[0], e[1]))
    best = cur = 0
    for _, b in events:
        cur += b
        best = max(best, cur)
    return best


def _constants(m: "Method", ins_module: dict[int, str], blobs) -> tuple[dict, dict, dict, int]:
    """(module -> constant bytes, module -> named data bytes, module -> delegate blob bytes, named data
    bytes of the program no call is seen to read)."""
    raw = m.raw
    values = raw.values
    readers: dict[tuple, set[str]] = {}  # constant (buffer index or key) -> modules of the calls reading it
    size: dict[tuple, int] = {}
    delegate: dict[str, int] = {}
    program_named = _program_named(blobs)
    blob_keys: dict[int, list] = {}  # per delegate: a method may call one delegate many times
    for ins in m.instructions:
        mod = ins_module.get(ins.index)
        if mod is None:
            continue
        for v in ins.args:
            rv = values[v] if 0 <= v < len(values) else None
            if rv is None:
                continue
            items = [v] if rv.kind == ValueKind.TENSOR else [i for i in rv.items if 0 <= i < len(values)]
            for i in items:
                t = values[i].tensor
                if t is None or t.mem_id is not None:
                    continue
                if t.location == TensorDataLocation.EXTERNAL and t.fqn:
                    key = ("named", t.fqn)
                elif t.data_buffer_idx > 0:
                    key = ("constant", t.data_buffer_idx)
                else:
                    continue
                if key not in size:
                    size[key] = tensor_meta(raw, i)[2]
                readers.setdefault(key, set()).add(mod)
        if ins.kind == InstructionKind.DELEGATE_CALL:
            d = raw.instructions[ins.index].target
            if 0 <= d < len(m.delegates):
                delegate[mod] = delegate.get(mod, 0) + m.delegates[d].size
                if d not in blob_keys:
                    blob_keys[d] = _blob_keys(m, d, blobs, program_named)
                for k, n in blob_keys[d]:
                    size[("named", k)] = n
                    readers.setdefault(("named", k), set()).add(mod)
    const: dict[str, int] = {}
    named: dict[str, int] = {}
    for key, mods in readers.items():
        owner = lowest_common(sorted(mods))
        into = named if key[0] == "named" else const
        into[owner] = into.get(owner, 0) + size[key]
    read = sum(n for k, n in size.items() if k[0] == "named" and k[1] in program_named)
    return const, named, delegate, max(0, sum(program_named.values()) - read)


def _program_named(blobs) -> dict[str, int]:
    """The program's own named data: key -> bytes (the first entry of a key, as ExecuTorch looks it up)."""
    if blobs is None:
        return {}
    raw = blobs.raw
    out: dict[str, int] = {}
    for k, idx in raw.named_data:
        if k not in out and 0 <= idx < len(raw.segments):
            out[k] = raw.segments[idx].size
    return out


def _blob_keys(m: "Method", d: int, blobs, named: dict[str, int]) -> list[tuple[str, int]]:
    """The named data keys an XNNPACK blob names (its weights), with their bytes; [] for other backends."""
    if blobs is None or m.delegates[d].backend != XNNPACK.id:
        return []
    if not named:
        return []
    read = getattr(blobs, "_read", None)
    if read is None:
        return []
    offset, size = delegate_span(blobs.raw, m.raw.delegates[d])
    data = read(offset, size)
    keys: dict[str, None] = {}
    for prefix, digest in _HEX_KEY.findall(data):
        for k in range(len(prefix) + 1):  # the longest prefix that makes a key the program has
            key = (prefix[k:] + digest).decode()
            if key in named:
                keys[key] = None
                break
    return [(k, named[k]) for k in keys]


def module_memory(m: "Method") -> ModuleMemory:
    """:class:`ModuleMemory` of ``m``; raises :class:`NoModulesError` without an ETRecord."""
    if m.etrecord is None or m.sources is None:
        raise NoModulesError(no_modules_message(m.name))
    ins_module = _instruction_modules(m)
    types: dict[str, str] = {}
    for nd in m.etrecord.nodes:
        for path, typ in nd.module_stack:
            types.setdefault(path, typ.rpartition(".")[2])
    planned = [t for t in m.planned if t.role != Role.VIEW and t.nbytes]
    # a tensor nothing writes takes the module of the first call reading it; state (a buffer kept between
    # calls) takes the module owning the buffers that call's node reads, by the graph signature's names
    state = {t.value for t in planned if t.role == Role.MUTABLE_BUFFER}
    first_reader: dict[int, str] = {}
    for ins in m.instructions:
        mod = ins_module.get(ins.index)
        if mod is not None:
            owner_of_state = _buffer_owner(m.etrecord, ins) if state.intersection(ins.args) else None
            for v in ins.args:
                first_reader.setdefault(v, owner_of_state if v in state and owner_of_state is not None else mod)
    owner: dict[int, str] = {}
    for t in planned:
        src = m.source_of(t.value)
        mod = None
        if src is not None:
            mod = src.module if src.module is not None else (
                lowest_common(p for p, _ in src.modules) if src.modules else None)
        if mod is None and t.role not in (Role.INPUT, Role.INPUT_OUTPUT):
            mod = first_reader.get(t.value)
        owner[t.value] = mod if mod is not None else (INPUTS if t.role in (Role.INPUT, Role.INPUT_OUTPUT) else NO_MODULE)
    story = m.peak
    at, peak_mem = (story.at, story.mem_id) if story is not None else (None, None)
    arenas = tuple(a.mem_id for a in m.arenas)
    # every level of each tensor's path
    members: dict[str, list] = {}
    for t in planned:
        path = owner[t.value]
        for p in ([path] if path in (INPUTS, NO_MODULE) else _prefixes(path)):
            members.setdefault(p, []).append(t)
    const, named, delegate, unplaced = _constants(m, ins_module, m._blobs)
    extra: dict[str, list[int]] = {}
    for k, into in enumerate((const, named, delegate)):
        for path, n in into.items():
            for p in _prefixes(path):
                extra.setdefault(p, [0, 0, 0])[k] += n
                members.setdefault(p, [])
    rows = []
    for path, ts in members.items():
        special = path in (INPUTS, NO_MODULE)
        depth = 0 if special or not path else path.count(".") + 1
        parent = None if special or not path else path.rpartition(".")[0]
        peak = sum(t.nbytes for t in ts if t.mem_id == peak_mem and t.first is not None and t.first <= at <= t.last)
        live = tuple(_max_live([(t.first, t.last, t.nbytes) for t in ts if t.mem_id == a and t.first is not None])
                     for a in arenas)
        c, nd, dl = extra.get(path, (0, 0, 0))
        rows.append(ModuleRow(path, None if special else types.get(path), depth, parent, len(ts), peak, live,
                              c, nd, dl))
    return ModuleMemory(m.name, peak_mem, at, arenas, _ordered(rows), unplaced, MappingProxyType(owner))


def _ordered(rows: list[ModuleRow]) -> tuple[ModuleRow, ...]:
    """Parents before children, siblings by bytes at the peak (then their run's most, then path); the root first,
    the rows outside it last."""
    children: dict[str | None, list[ModuleRow]] = {}
    for r in rows:
        children.setdefault(r.parent, []).append(r)

    def key(r):
        return (r.module in (INPUTS, NO_MODULE), r.module != "", -r.peak_bytes, -max(r.max_live, default=0),
                -r.constant_bytes, r.module)

    out: list[ModuleRow] = []
    stack = sorted(children.get(None, []), key=key)[::-1]
    while stack:
        r = stack.pop()
        out.append(r)
        stack.extend(sorted(children.get(r.module, []), key=key)[::-1])
    return tuple(out)
