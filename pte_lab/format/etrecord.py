"""An ETRecord (ExecuTorch's devtools record of an export), read without running anything from it.

An ETRecord is a ZIP archive (``to_edge_transform_and_lower(..., generate_etrecord=True)`` then
``get_etrecord().save(path)``). What is read here is JSON:

``debug_handle_map``
    per method, instruction index -> debug handle(s)
``delegate_map``
    per method, delegate-call instruction -> backend name
``instruction_id_to_num_outs_map``
    per method, delegate-call instruction -> number of outputs
``edge_dialect_exported_program/M``
    torch.export's serialized graph (JSON) of method ``M``'s edge program: each node's name, target and
    metadata (``debug_handle``, ``nn_module_stack``, ``stack_trace``)

Never read: ``*_state_dict``, ``*_constants`` and ``*_example_inputs`` (torch-serialized, i.e.
pickled; listed in :attr:`ETRecord.unread`), and the pre-edge ``exported_program`` (not needed).
Nothing is unpickled, torch and executorch are not imported.

What a file makes the reader do is bounded by the file: the entries read together may hold at most
``MAX_EXPANSION`` times the file's own size (plus ``EXPANSION_SLACK``), counted both as the archive's
directory declares them and as they inflate; given the program (``read_etrecord(path, program=...)``), an
ETRecord naming other methods, or instructions the program does not have, is refused before any handle list
or edge program is built, and only the program's methods are read. Every string a record holds went through
``pte_lab.printable.printable`` (``printable_text`` for a whole stack trace): an escape sequence in the file
never reaches a terminal through a record.
"""

from __future__ import annotations

import io
import json
import os
import re
import zipfile
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field
from types import MappingProxyType
from collections.abc import Callable, Iterable, Mapping

from ..errors import ETRecordError, NotARegularFileError
from ..printable import printable, printable_text
from ..units import first_few
from .regular_file import check_regular

__all__ = ["ETRecord", "MethodRecord", "NodeInfo", "SourceLine", "read_etrecord", "EDGE_PROGRAM", "innermost_user",
           "check_methods", "check_counts", "mismatch", "MAX_EXPANSION", "EXPANSION_SLACK"]

MARKER = "ETRECORD_V0"
EDGE_PROGRAM = "edge_dialect_exported_program/"
_JSON_MAPS = ("debug_handle_map", "delegate_map", "instruction_id_to_num_outs_map")
_PICKLED_SUFFIXES = ("_state_dict", "_constants", "_example_inputs")
#: the entries read from one ETRecord (its JSON maps and edge programs) may hold, all together, at most this many
#: times the bytes of the whole file plus this slack, counted as the directory declares them and again as they
#: inflate. ExecuTorch writes ETRecords uncompressed (ZIP_STORED), so a real one's entries hold at most the file
#: (1x); an archive someone deflated again still passes (its pickled weights, never inflated, count in the
#: file's size); a deflated entry of crafted JSON inflates ~1000x and is refused before it is read. The
#: slack lets a tiny ETRecord through whatever its framing. At 4x, an ETRecord of 1 MB builds at most ~5 MB of
#: JSON: benchmarks/bench_etrecord.py measures each path at that bound
MAX_EXPANSION, EXPANSION_SLACK = 4, 256 << 10
#: the JSON nesting an argument walk follows (torch.export's arguments nest two or three deep)
_MAX_DEPTH = 32
_EDGE_PREFIX = "executorch.exir.dialects.edge.ops."
#: frames of the frameworks, skipped to find the user's innermost line
_FRAMEWORK = re.compile(r"[/\\](site|dist)-packages[/\\](torch|executorch|torchao)[/\\]")
_BRACKETS = frozenset("[()]")
_FRAME = re.compile(r'File "(?P<file>[^"]*)", line (?P<line>\d+), in (?P<function>\S+)')


@dataclass(frozen=True)
class SourceLine:
    """One frame of a stack trace: ``file:line`` in ``function``, and the line's code."""

    file: str
    line: int
    function: str
    code: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} {self.code}".rstrip()


@dataclass(frozen=True)
class NodeInfo:
    """An FX node of a method's edge program, as the ETRecord records it."""

    name: str
    #: the operator, shortened (``aten.addmm.default``; torch.export's full target when not an edge op)
    target: str
    debug_handle: int | None
    #: ``(path, type)`` from the outermost module to the innermost (``("blocks.0.fc1",
    #: "torch.nn.modules.linear.Linear")``); empty when the node records none
    module_stack: tuple[tuple[str, str], ...]
    #: the user's innermost frame (frameworks' frames skipped); None without a stack trace
    source: SourceLine | None
    stack_trace: str | None
    #: the tensors the node reads and writes (names in the graph)
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    #: each output tensor's shape as the edge graph records it, a symbolic dimension as None
    output_shapes: tuple[tuple[int | None, ...], ...] = ()
    #: the operator's base name (``addmm``), to compare with an instruction's ``aten::addmm.out``: worked out
    #: once, when the node is read (from ``target`` when not given)
    op: str = ""

    def __post_init__(self):
        if not self.op:
            object.__setattr__(self, "op", op_base(self.target))

    @property
    def module(self) -> str | None:
        """The innermost module's path (``blocks.0.fc1``); ``""`` is the root module."""
        return self.module_stack[-1][0] if self.module_stack else None

    @property
    def module_type(self) -> str | None:
        """The innermost module's class name (``Linear``)."""
        return self.module_stack[-1][1].rpartition(".")[2] if self.module_stack else None


def op_base(name: str) -> str:
    """``aten.addmm.default``, ``aten::addmm.out``, ``llama::update_cache.out`` -> the base name."""
    name = name.replace("::", ".")
    parts = name.split(".")
    return parts[1] if len(parts) >= 2 else name


@dataclass(frozen=True)
class MethodRecord:
    """What an ETRecord says about one method."""

    name: str
    #: instruction index -> the debug handles it carries (a delegate call carries several)
    handles: Mapping[int, tuple[int, ...]]
    #: delegate-call instruction -> backend name (``XnnpackBackend``)
    delegates: Mapping[int, str]
    #: delegate-call instruction -> number of outputs
    num_outs: Mapping[int, int]
    #: the edge program's call nodes in graph order; empty when the ETRecord has no edge program for it
    nodes: tuple[NodeInfo, ...]
    #: debug handle -> its nodes, in graph order
    by_handle: Mapping[int, tuple[NodeInfo, ...]]
    #: the names of the graph's outputs
    graph_outputs: tuple[str, ...]
    has_graph: bool
    #: graph name of a buffer (its placeholder, or the value a mutation writes back) -> the buffer's fully
    #: qualified name (``layers.0.attention.kv_cache.k_cache``), from the edge program's graph signature
    buffers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: what the analysis derives from the record once and asks for from several places (key -> result; not a
    #: fact of the file, and not compared: the record is never changed)
    memo: dict = field(default_factory=dict, compare=False, repr=False)

    def handles_of(self, instruction: int) -> tuple[int, ...]:
        """The distinct debug handles an instruction carries, in the ETRecord's order (a handle may be listed
        twice)."""
        hs = self.handles.get(instruction, ())
        return hs if len(hs) < 2 else tuple(dict.fromkeys(hs))

    def nodes_of(self, instruction: int) -> tuple[NodeInfo, ...]:
        """The nodes an instruction came from (all the swallowed nodes for a delegate call). Builds the tuple
        each call: a loop over instructions asks :attr:`by_handle` per handle of :meth:`handles_of` instead."""
        out: list[NodeInfo] = []
        for h in self.handles_of(instruction):
            out.extend(self.by_handle.get(h, ()))
        return tuple(out)


@dataclass(frozen=True)
class ETRecord:
    """An ETRecord's graph metadata, by method (names as ``printable`` shows them)."""

    path: str | None
    methods: Mapping[str, MethodRecord]
    #: entries present but not read because they are pickled (state dicts, constants, example inputs)
    unread: tuple[str, ...]

    def __getitem__(self, name: str) -> MethodRecord:
        return self.methods[printable(name)]

    def method(self, name: str) -> MethodRecord | None:
        """The record of the program's method ``name`` (as the program spells it), None when the ETRecord has
        none."""
        return self.methods.get(printable(name))


def _fail(where: str, what: str) -> ETRecordError:
    return ETRecordError(f"{where}: not a readable ETRecord: {what}")


def mismatch(method: str, what: str) -> ETRecordError:
    """The error for an ETRecord from another export, about one method: the one home of its wording."""
    return ETRecordError(f"the ETRecord does not belong to this program: method {printable(method)!r}: {what}")


def check_methods(theirs: Iterable[str], ours: Iterable[str], instructions: Callable[[str], int] | None = None) -> None:
    """Refuse an ETRecord whose methods (``theirs``) are not the program's (``ours``). ``instructions(name)`` (a
    method's instruction count) lets the ETRecord leave out methods that run nothing (export_llm's
    ``get_max_seq_len``...: constant methods ExecuTorch records no graph of)."""
    theirs = [printable(n) for n in theirs]
    spelled = {printable(n): n for n in ours}  # as the record shows it -> as the program spells it
    missing = set(spelled) - set(theirs)
    if instructions is not None and missing and set(theirs) <= set(spelled):
        missing = {n for n in missing if instructions(spelled[n])}
    if missing or set(theirs) - set(spelled):
        raise ETRecordError(f"the ETRecord does not belong to this program: it has methods "
                            f"{first_few(theirs, 12) or 'none'}, the program has {first_few(spelled, 12) or 'none'}")


def check_counts(method: str, n: int, handles: Iterable[int], delegates: Iterable[int] = (),
                 num_outs: Iterable[int] = ()) -> None:
    """Refuse a method record naming instructions the program's method (``n`` instructions) does not have."""
    for what, keys in (("handles", handles), ("delegate calls", delegates), ("output counts", num_outs)):
        top = max(keys, default=-1)
        if top >= n:
            raise mismatch(method, f"the ETRecord has {what} for instructions up to {top}, the program has {n} "
                                   f"instructions")


class _Budget:
    """The bytes the entries of one archive may still hold (``MAX_EXPANSION``)."""

    def __init__(self, where: str, size: int):
        self.where, self.size = where, size
        self.limit = self.left = MAX_EXPANSION * size + EXPANSION_SLACK

    def refuse(self, what: str) -> ETRecordError:
        return _fail(self.where, f"{what}, more than the {self.limit:,} bytes ({MAX_EXPANSION}x the "
                                 f"{self.size:,}-byte file plus {EXPANSION_SLACK:,}) an ETRecord's entries may "
                                 f"hold: a ZIP bomb or a crafted file (ExecuTorch writes ETRecords uncompressed)")


def _declared(infos: list[zipfile.ZipInfo], budget: _Budget) -> None:
    """Refuse, before reading any, entries whose directory declares more than the budget (or data past the file)."""
    for info in infos:
        if info.header_offset + info.compress_size > budget.size:
            raise _fail(budget.where, f"entry {info.filename!r} declares {info.compress_size:,} stored bytes at "
                                      f"offset {info.header_offset:,}, past the end of the {budget.size:,}-byte "
                                      f"file (truncated or crafted)")
    total = sum(i.file_size for i in infos)
    if total > budget.limit:
        big = max(infos, key=lambda i: i.file_size)
        raise budget.refuse(f"the {len(infos)} entries it reads declare {total:,} bytes (the largest, "
                            f"{big.filename!r}, {big.file_size:,} from {big.compress_size:,} stored)")


def _read_entry(z: zipfile.ZipFile, info: zipfile.ZipInfo, budget: _Budget) -> bytes:
    """An entry's bytes, inflated at most to what it declares and to what the budget has left (the bytes read
    are counted, whatever the directory says)."""
    with z.open(info) as f:
        data = f.read(min(info.file_size, budget.left) + 1)
    if len(data) > budget.left:
        raise budget.refuse(f"entry {info.filename!r} inflates past {budget.limit - budget.left + len(data):,} "
                            f"bytes read in all")
    budget.left -= len(data)
    if len(data) != info.file_size:
        raise _fail(budget.where, f"entry {info.filename!r} holds {len(data):,} bytes, not the "
                                  f"{info.file_size:,} it declares")
    return data


def _json(z, info, budget: _Budget):
    data = _read_entry(z, info, budget)
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as e:
        raise _fail(budget.where, f"entry {info.filename!r} is not JSON ({type(e).__name__}: "
                                  f"{str(e).splitlines()[0][:120] if str(e) else ''})") from None


def _int(v, what: str, where: str) -> int:
    if type(v) is int:
        return v
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise _fail(where, f"{printable(what)} is {type(v).__name__}, not an integer")
    try:
        return int(v)
    except ValueError:
        raise _fail(where, f"{printable(what)} is {printable(str(v)[:40])!r}, not an integer") from None


def _index(k, what: str, where: str) -> int:
    """An instruction index (a map's key): an integer, not negative."""
    i = _int(k, what, where)
    if i < 0:
        raise _fail(where, f"{printable(what)} is negative")
    return i


def _per_method(raw, name: str, where: str) -> dict:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise _fail(where, f"{name} is not a map of methods to maps")
    return raw


def _keys(raw: dict, what: str, where: str) -> list[int]:
    """A per-instruction map's keys as instruction indices (``what``: the method's ..., named in an error)."""
    out = []
    for k in raw:  # JSON keys are strings: ExecuTorch's are decimal, read without a message made for each
        out.append(int(k) if k.isascii() and k.isdigit() and len(k) < 19 else _index(k, f"{what} {k!r}", where))
    return out


def _handles(v, what, where) -> tuple[int, ...]:
    """One instruction's debug handles (``what()``: what to call them in an error)."""
    if type(v) is list:
        if all(type(x) is int for x in v):  # as ExecuTorch writes them
            return tuple(v)
        return tuple(_int(x, what(), where) for x in v)
    return (v,) if type(v) is int else (_int(v, what(), where),)


def _split_meta(item: str) -> list[str]:
    """``key,path,type`` split at commas outside brackets (a path may hold ``[...]`` or ``(...)``)."""
    if not _BRACKETS.intersection(item):
        return item.split(",")
    parts, depth, start = [], 0, 0
    for i, c in enumerate(item):
        if c in "[(":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(item[start:i])
            start = i + 1
    parts.append(item[start:])
    return parts


def _module_stack(text) -> tuple[tuple[str, str], ...]:
    if not isinstance(text, str) or not text:
        return ()
    out = []
    for item in text.split(";"):
        parts = _split_meta(item)
        if len(parts) >= 3:
            out.append((printable(",".join(parts[1:-1])), printable(parts[-1])))
    return tuple(out)


def user_frame(trace) -> SourceLine | None:
    """The innermost frame of a stack trace outside torch/executorch (the innermost one if all are); its file,
    function and code as ``printable`` shows them."""
    if not isinstance(trace, str) or not trace:
        return None
    lines = trace.splitlines()
    frames = []
    for i, line in enumerate(lines):
        m = _FRAME.search(line)
        if m:
            code = lines[i + 1].strip() if i + 1 < len(lines) and not _FRAME.search(lines[i + 1]) else ""
            frames.append((m["file"], int(m["line"]), m["function"], code))
    if not frames:
        return None
    users = [f for f in frames if not _FRAMEWORK.search(f[0]) and not f[0].startswith("<")]
    file, line, function, code = (users or frames)[-1]
    return SourceLine(printable(file), line, printable(function), printable(code))


def innermost_user(frames) -> SourceLine | None:
    """The innermost of ``frames`` (outermost first) outside torch/executorch (the innermost one if all are)."""
    if not frames:
        return None
    users = [f for f in frames if not _FRAMEWORK.search(f.file) and not f.file.startswith("<")]
    return (users or frames)[-1]


def _names(arg, out: list[str]) -> None:
    """The tensor names an argument of torch.export's JSON graph mentions (bounded depth)."""
    _walk(arg, out, 0)


def _walk(a, out: list[str], depth: int) -> None:
    """:func:`_names` below ``depth`` (in order: each container's items first to last)."""
    if depth > _MAX_DEPTH:
        return
    if type(a) is dict:
        t = a.get("as_tensor")
        if type(t) is dict and type(t.get("name")) is str:
            out.append(t["name"])
            return
        a = a.values()
    elif type(a) is not list:
        return
    for v in a:
        if type(v) is dict or type(v) is list:
            _walk(v, out, depth + 1)


def _shape(meta: dict) -> tuple[int | None, ...]:
    """A tensor's sizes from torch.export's JSON (``{"as_int": 8}``; a symbolic size is None)."""
    sizes = meta.get("sizes")
    if not isinstance(sizes, list):
        return ()
    return tuple(d["as_int"] if isinstance(d, dict) and type(d.get("as_int")) is int else None for d in sizes)


def _graph(doc, where: str) -> tuple[tuple[NodeInfo, ...], tuple[str, ...]]:
    graph = doc.get("graph_module") if type(doc) is dict else None
    graph = graph.get("graph") if type(graph) is dict else None
    nodes = graph.get("nodes") if type(graph) is dict else None
    if type(nodes) is not list:
        raise _fail(where, "the edge program has no graph_module.graph.nodes")
    values = graph.get("tensor_values") if isinstance(graph.get("tensor_values"), dict) else {}
    out = []
    # nodes of one module, or of one line, repeat its stack and their operator: each distinct one is read once
    stacks: dict[str, tuple] = {}
    traces: dict[str, tuple[SourceLine | None, str]] = {}
    targets: dict[str, tuple[str, str]] = {}
    for i, n in enumerate(nodes):
        if type(n) is not dict or type(n.get("name")) is not str:
            raise _fail(where, f"node {i} of the edge program has no name")
        name = printable(n["name"])
        md = n.get("metadata") or {}
        if type(md) is not dict:
            raise _fail(where, f"node {name!r} has metadata that is not a map")
        h = md.get("debug_handle")
        handle = None if h is None or h == "" else _int(h, f"node {name!r}'s debug_handle", where)
        target = n.get("target") if type(n.get("target")) is str else ""
        known = targets.get(target)
        if known is None:
            shown = printable(target.removeprefix(_EDGE_PREFIX))
            known = targets[target] = (shown, op_base(shown))
        ins: list[str] = []
        outs: list[str] = []
        _names(n.get("inputs"), ins)
        _names(n.get("outputs"), outs)
        trace = md.get("stack_trace")
        stack = md.get("nn_module_stack")
        if type(stack) is str:
            modules = stacks.get(stack)
            if modules is None:
                modules = stacks[stack] = _module_stack(stack)
        else:
            modules = ()
        if type(trace) is str:
            frame = traces.get(trace)
            if frame is None:
                frame = traces[trace] = (user_frame(trace), printable_text(trace))
        else:
            frame = (None, None)
        shapes = tuple(_shape(values[o]) for o in outs if type(values.get(o)) is dict)
        out.append(NodeInfo(name, known[0], handle, modules, frame[0], frame[1], tuple(map(printable, ins)),
                            tuple(map(printable, outs)), shapes, known[1]))
    graph_out: list[str] = []
    _names(graph.get("outputs"), graph_out)
    return tuple(out), tuple(map(printable, graph_out))


def _buffer_names(doc) -> dict[str, str]:
    """Graph name -> buffer name, from the graph signature's buffer inputs and buffer mutations (an
    ETRecord without a signature, or with one of another shape, names none)."""
    gm = doc.get("graph_module") if type(doc) is dict else None
    sig = gm.get("signature") if type(gm) is dict else None
    out: dict[str, str] = {}
    if type(sig) is not dict:
        return out
    for key, kind in (("input_specs", "buffer"), ("output_specs", "buffer_mutation")):
        specs = sig.get(key)
        if type(specs) is not list:
            continue
        for spec in specs:
            entry = spec.get(kind) if type(spec) is dict else None
            arg = entry.get("arg") if type(entry) is dict else None
            if type(arg) is dict and type(arg.get("name")) is str and type(entry.get("buffer_name")) is str:
                out[printable(arg["name"])] = printable(entry["buffer_name"])
    return out


#: the ETRecords last read from files, by (path, inode, size, mtime): a notebook re-opening a program with its
#: ETRecord parses it once (the records are immutable); a file written again is read again
_READ: "OrderedDict[tuple, ETRecord]" = OrderedDict()
_KEEP = 4


def read_etrecord(source, program: Mapping[str, int] | None = None) -> ETRecord:
    """Read an ETRecord (a path, or its bytes) into records, unpickling nothing; a file read before and
    unchanged since (same inode, size and modification time) gives the records it gave then.

    ``program`` maps the program's methods to their instruction counts (a count is asked for only where it is
    needed): an ETRecord from another export is then refused before its graphs are read, and reading costs no
    more than the program needs.

    Raises :class:`~pte_lab.errors.ETRecordError` (one line) for anything that is not a readable ETRecord, or
    (given ``program``) that belongs to another program.
    """
    key = None
    where = "ETRecord"
    try:
        if isinstance(source, (bytes, bytearray, memoryview)):
            opened, size = io.BytesIO(bytes(source)), len(source)
        else:
            where = opened = os.fspath(source)
            check_regular(where, "an ETRecord")  # a FIFO or a device: refused before it is opened
            st = os.stat(where)
            size = st.st_size
            key = (where, os.path.abspath(where), st.st_ino, size, st.st_mtime_ns)
            known = _READ.get(key)
            if known is not None:
                if program is not None:
                    _check_program(known, program)
                return known
        with zipfile.ZipFile(opened) as z:
            record = _read(z, where if isinstance(opened, str) else None, where, size, program)
    except (ETRecordError, NotARegularFileError):
        raise
    except FileNotFoundError:
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError,
            ValueError) as e:
        raise _fail(where, f"not a complete ZIP archive ({type(e).__name__}: "
                           f"{printable(str(e).splitlines()[0][:160]) if str(e) else 'cut short'}); truncated, or "
                           f"not an ETRecord? Save it again with get_etrecord().save(path)") from None
    except (TypeError, KeyError, AttributeError, IndexError, RecursionError, OverflowError) as e:
        # a field of another type than the reader checks for: the file's doing, said as one line
        raise _fail(where, f"a field of an unexpected kind ({type(e).__name__}: "
                           f"{printable(str(e).splitlines()[0][:160]) if str(e) else ''})") from None
    if key is not None:
        _READ[key] = record
        while len(_READ) > _KEEP:  # the oldest read goes first
            _READ.popitem(last=False)
    return record


def _check_program(record: ETRecord, program: Mapping[str, int]) -> None:
    """What :func:`_read` checks against the program, for records read before."""
    check_methods(record.methods, program, program.__getitem__)
    spelled = {printable(n): n for n in program}
    for name, rec in record.methods.items():
        check_counts(name, program[spelled[name]], rec.handles, rec.delegates, rec.num_outs)


def _read(z: zipfile.ZipFile, path: str | None, where: str, size: int, program: Mapping[str, int] | None) -> ETRecord:
    infos = {i.filename: i for i in z.infolist()}
    if "debug_handle_map" not in infos:
        kind = f"{MARKER} but" if MARKER in infos else "a ZIP archive without ETRecord entries:"
        raise _fail(where, f"{kind} no debug_handle_map entry (entries: {printable(first_few(sorted(infos), 6))}); "
                           f"if the file was cut short, save it again with get_etrecord().save(path)")
    edge = {n[len(EDGE_PROGRAM):]: info for n, info in infos.items()
            if n.startswith(EDGE_PROGRAM) and not n.endswith(_PICKLED_SUFFIXES)}
    unread = tuple(sorted(printable(n) for n in infos if n.endswith(_PICKLED_SUFFIXES)))
    budget = _Budget(where, size)
    _declared([infos[k] for k in _JSON_MAPS if k in infos] + list(edge.values()), budget)
    handle_map = _per_method(_json(z, infos["debug_handle_map"], budget), "debug_handle_map", where)
    names = list(dict.fromkeys([*handle_map, *edge]))
    shown = {}
    for name in names:  # a record holds each name as printable() shows it: two names may not show alike
        if shown.setdefault(printable(name), name) != name:
            raise _fail(where, f"methods {printable(shown[printable(name)])!r} and {printable(name)!r} show alike")
    spelled = None
    if program is not None:  # another program's ETRecord is refused before anything is built from it
        check_methods(names, program, program.__getitem__)
        spelled = {printable(n): n for n in program}
    maps = {k: _per_method(_json(z, infos[k], budget), k, where) if k in infos else {} for k in _JSON_MAPS[1:]}
    methods = {}
    for name in names:
        label = printable(name)
        raw = handle_map.get(name, {})
        keys = _keys(raw, f"{name}'s instruction", where)
        delegate_keys = _keys(maps["delegate_map"].get(name, {}), f"{name}'s delegate", where)
        outs_raw = maps["instruction_id_to_num_outs_map"].get(name, {})
        outs_keys = _keys(outs_raw, f"{name}'s instruction", where)
        if spelled is not None:
            check_counts(label, program[spelled[label]], keys, delegate_keys, outs_keys)
        # B023: _handles calls ``what`` at once, inside this iteration, to word an error
        handles = {i: _handles(v, lambda: f"{name}'s handle of {k!r}", where)  # noqa: B023
                   for i, (k, v) in zip(keys, raw.items())}
        delegates = {}
        for i, v in zip(delegate_keys, maps["delegate_map"].get(name, {}).values()):
            backend = v.get("name") if type(v) is dict else None
            delegates[i] = printable(backend) if type(backend) is str else "?"
        num_outs = {i: _int(v, f"{name}'s output count", where) for i, v in zip(outs_keys, outs_raw.values())}
        doc = _json(z, edge[name], budget) if name in edge else None
        nodes, graph_out = _graph(doc, where) if doc is not None else ((), ())
        by_handle: dict[int, list[NodeInfo]] = {}
        for n in nodes:
            if n.debug_handle is not None:
                by_handle.setdefault(n.debug_handle, []).append(n)
        methods[label] = MethodRecord(
            label, MappingProxyType(handles), MappingProxyType(delegates), MappingProxyType(num_outs), nodes,
            MappingProxyType({h: tuple(v) for h, v in by_handle.items()}), graph_out, name in edge,
            MappingProxyType(_buffer_names(doc)))
        del doc
    return ETRecord(path, MappingProxyType(methods), unread)
