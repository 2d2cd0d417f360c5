"""Plain-text views: reprs, tables and a picture of each arena over time.

The picture follows TensorFlow Lite Micro's ``PrintMemoryPlan``: one line per
instruction (``in`` before the first, ``out`` after the last; long methods are
sampled, always keeping the peak), one character per slice of the arena; each
planned tensor gets a letter and ``.`` is free. The right column gives the
bytes alive at that instruction. The validator's conflicts (two tensors alive
at once sharing bytes, :attr:`Method.conflicts`) are drawn ``!`` where they
overlap, as TFLite Micro marks colliding buffers; anywhere else a column
holding the edges of two neighbouring tensors shows the first one's letter.
"""

from __future__ import annotations

import bisect
import weakref

import numpy as np

from ..model.ethos_u import describe_io
from ..model.dtypes import short_shape
from ..model.layout import Layout, flatbuffer_regions
from ..model.load_cost import LOADERS
from ..printable import printable_text, text_view
from ..vocabulary import OperatorTarget, Region, ValueKind, ViewOf
from ..model.backends import HEADLINE_SETTINGS, for_a_microcontroller
from .base import backend_note_line, text_table
from ..units import PEAK_LIVE, SIZE_OVER_PEAK, count, exact_bytes, first_few, human_bytes, ratio
from .peak import peak_lines
from .rows import (ARENA_ROW, METHOD_HEADERS, backend_rows, delegate_heap_rows, loader_apis, module_load_modes_line, delegate_scratch_rows, load_cost_rows, method_rows,
                   state_summary, summary_findings)

__all__ = ["pte_text", "method_text", "arena_text", "arena_picture", "data_text", "layout_text", "replan_text",
           "text_table", "indented"]

_GLYPHS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


#: how text shows a column of :data:`ARENA_ROW` when not as ``str`` under the row's header: (header or None
#: for the row's, format) per cell; narrow headers, and exact bytes beside the size
_ARENA_TEXT = {"runtime_index": [("runtime", str)], "size": [("bytes", "{:,}".format), (None, human_bytes)],
               "peak_bytes": [(None, "{:,}".format)], "size_over_peak": [(None, ratio)]}
_ARENA_COLUMNS = [(attr, h or header, fmt) for attr, header, _ in ARENA_ROW
                  for h, fmt in _ARENA_TEXT.get(attr, [(None, str)])]


@text_view
def arenas_text(method) -> str:
    """The table of a method's arenas (:data:`ARENA_ROW`)."""
    return text_table([h for _, h, _ in _ARENA_COLUMNS],
                  [[fmt(getattr(a, attr)) for attr, _, fmt in _ARENA_COLUMNS] for a in method.arenas])


@text_view
def arena_text(a) -> str:
    return (f"Arena(mem_id={a.mem_id}, runtime_index={a.runtime_index}, device={a.device!r}, "
            f"size={a.size} ({human_bytes(a.size)}), peak_bytes={a.peak_bytes}, "
            f"size_over_peak={ratio(a.size_over_peak)}, n_tensors={a.n_tensors})")


def _io_line(s) -> str:
    if s.kind != ValueKind.TENSOR:
        if s.scalar is None:
            return f"{s.kind}"
        return f"{s.kind} = {s.scalar!r} (exported value: ExecuTorch accepts no other)"
    where = f"planned mem_id {s.mem_id} @ {s.offset}" if s.planned else "caller-provided"
    dyn = " (dynamic, upper bound)" if s.dynamic else ""
    return f"{s.dtype}{list(s.shape)}{dyn} {human_bytes(s.nbytes)}, {where}, {s.device}"


@text_view
def method_text(m, picture: bool = False, width: int = 64, max_rows: int = 48) -> str:
    lines = [f"Method {m.name!r}: {count(m.n_instructions, 'instruction')}, {count(len(m.planned), 'planned tensor')}, "
             f"{human_bytes(m.planned_bytes)} planned"]
    for label, specs in (("inputs", m.inputs), ("outputs", m.outputs)):
        for s in specs:
            lines.append(f"  {label[:-1]} {s.position}: {_io_line(s)}")
    for d, mem in zip(m.delegates, m.delegate_memory):
        lines.extend("  " + line for line in delegate_lines(d, mem))
    counts = sorted(m.operator_counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if counts:
        lines.append(f"  calls: {first_few((f'{k} x{v}' for k, v in counts), 8, more=', +{n} more')}")
    n_state, state_bytes, names = state_summary(m)
    if n_state:
        shown = f": {first_few(names, 3)}" if names else ""
        lines.append(f"  state kept between calls: {count(n_state, 'tensor')}, {human_bytes(state_bytes)}{shown}")
    if m.arenas:
        lines.append("")
        lines.append(indented(arenas_text(m)))
        lines.extend(f"  {line}" for line in peak_lines(m.peak))
    else:
        lines.append("  no planned arenas")
    findings = m.findings()
    for f in findings:
        lines.append(f"  {f}")
    if picture:
        for a in m.arenas:
            lines.append("")
            lines.append(arena_picture(m, a.mem_id, width=width, max_rows=max_rows))
    return "\n".join(lines)


def delegate_lines(d, mem) -> list[str]:
    """A delegate: backend, blob, and what the blob declares (Ethos-U: each part, where it comes from and lives)."""
    dev = f" -> {d.target_device}" if d.target_device else ""
    said = mem.settings
    out = [f"delegate {d.index}: {d.backend}{dev} ({human_bytes(d.size)} {d.location}){', ' + said if said else ''}"]
    for p in mem.parts():
        size = f"{exact_bytes(p.bytes)} declared by the {p.source}" if p.bytes is not None else p.source
        out.append(f"  {p.part}: {size}; {p.allocator}" + (f"; lives in {p.lives}" if p.lives else ""))
    s = mem.stream
    if s is not None and s.inputs is not None and s.outputs is not None:
        out.append(f"  Vela's inputs {'; '.join(map(describe_io, s.inputs)) or '-'}, outputs "
                   f"{'; '.join(map(describe_io, s.outputs)) or '-'} (shape, bytes per element, scratch offset)")
    c = mem.contents
    if c is not None:
        said = [f"{p.part} {human_bytes(p.bytes)}" for p in c.parts]
        said += [f"{x.what} {x.value}" for x in c.settings if x.what not in HEADLINE_SETTINGS]
        if said or c.problem:
            out.append("  blob: " + "; ".join(said + ([c.problem] if c.problem else [])))
    if mem.unread:
        out.append(f"  {mem.unread}")
    return out


def indented(s: str, n: int = 2) -> str:
    """Every line of ``s`` moved right by ``n`` spaces."""
    return "\n".join(" " * n + line for line in s.splitlines())


def flatbuffer_phrase(p) -> str:
    """``flatbuffer 11.9 KiB, inline delegate data 3.5 MiB``: the program's tables and, each its own region, the
    data stored inline beside them (``layout.flatbuffer_regions``; the diff's regions say the same)."""
    r = flatbuffer_regions(p)
    out = f"flatbuffer {human_bytes(r.get(Region.FLATBUFFER, 0))}"
    for region, words in ((Region.INLINE_CONSTANT, "inline constants"), (Region.INLINE_DELEGATE, "inline delegate data")):
        if region in r:
            out += f", {words} {human_bytes(r[region])}"
    return out


@text_view
def _claim_line(f) -> str:
    """A prescribing finding in a summary: what it observes; its change is left to the finding."""
    where = f"[{f.method}] " if f.method else ""
    return printable_text(f"{f.severity}: {where}{f.claim}")


def pte_text(p, methods_below: bool = False) -> str:
    """The program's summary; ``methods_below``: each method's text follows (``pte-lab inspect``), so a method's
    info findings are left to it (listed once)."""
    src = p.path or "<bytes>"
    carried = (f" (carried in a {human_bytes(p.bundled.file_size)} bundled program)"
               if p.bundled is not None else "")
    lines = [
        f"Pte {src}: {human_bytes(p.file_size)} ({p.file_size:,} bytes){carried}, "
        f"{flatbuffer_phrase(p)}, {count(len(p.methods), 'method')}",
        f"  constants {human_bytes(p.constant_bytes)}"
        + "".join(f", {b} delegate {human_bytes(n)}" for b, n in p.delegate_bytes.items())
        + (f", named data {human_bytes(p.named_data_bytes)} ({len(p.named_data_keys)} keys)"
           if p.named_data_keys else "")
        + (", expects external .ptd data" if p.expects_external_data else ""),
    ]
    for name, b in delegate_scratch_rows(p):
        lines.append(f"  {name}: delegates take up to {exact_bytes(b)} of scratch from the temp allocator per call, "
                     f"outside the planned arenas")
    for name, note in delegate_heap_rows(p):
        lines.append(f"  {name}: {note}")
    for note, _ in backend_rows(p):  # the summary names what is unknown; inspect says it whole
        lines.append(f"  backend {backend_note_line(note)}" if methods_below else
                     f"  backend {note.backend} ({note.name}): its own memory is not all in the file: "
                     f"`pte-lab inspect` says what is known, what is not and how to measure it")
    rows = [[r.name, str(r.instructions), str(r.tensors), str(r.arenas), human_bytes(r.planned_bytes),
             ", ".join(f"{d} {human_bytes(b)}" for d, b in r.by_device) or "-"] for r in method_rows(p)]
    lines.append("")
    lines.append(indented(text_table(list(METHOD_HEADERS), rows)))
    lines.append("")
    lines.append("  load cost (planned arenas):")
    by_loader: dict[str, list[str]] = {}
    for loader, step, devs in load_cost_rows(p):
        by_loader.setdefault(loader, []).append(f"{step} " + " + ".join(f"{human_bytes(b)} {d}" for d, b in devs))
    apis = loader_apis()
    for loader in LOADERS:
        parts = by_loader.get(loader)
        lines.append(f"    {loader:9s} " + ("; ".join(parts) if parts else "nothing")
                     + (f"  ({apis[loader]})" if loader in apis and methods_below else ""))
    if methods_below and not for_a_microcontroller(p):  # an app's Module; not bare-metal firmware's
        lines.append(f"    {module_load_modes_line()}")
    if p.bundled is not None:
        b = p.bundled
        lines.append("")
        lines.append(f"  bundled program (version {b.version}): {count(len(b.suites), 'test suite')}, "
                     f"{count(sum(s.cases for s in b.suites), 'case')}")
        for s, at in b.distinct_suites():
            named = f" (one suite table named {count(len(at), 'time')})" if len(at) > 1 else ""
            lines.append(f"    {s.method}: {count(s.cases, 'case')}{named}; inputs "
                         f"{', '.join(v.describe() for v in s.inputs) or '-'}; expected "
                         f"{', '.join(v.describe() for v in s.expected_outputs) or '-'}")
    warns = summary_findings(p) if methods_below else p.warnings()
    if warns:
        lines.append("")
        for w in warns:
            lines.append(f"  {w}" if methods_below or w.change is None else f"  {_claim_line(w)}")
        if not methods_below and any(w.change for w in warns):
            lines.append("  (what to change, and what it buys: `pte.findings()`, each finding's .change and .at_stake)")
    return "\n".join(lines)


_BY_ARENA: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _planned_by_arena(m) -> dict[int, list]:
    """A method's planned tensors grouped by arena, once per method (pictures are drawn arena by arena)."""
    got = _BY_ARENA.get(m)
    if got is None:
        got = {}
        for t in m.planned:
            got.setdefault(t.mem_id, []).append(t)
        _BY_ARENA[m] = got
    return got


@text_view
def arena_picture(m, mem_id: int, width: int = 64, max_rows: int = 48) -> str:
    """A text picture of arena ``mem_id`` over time (rows) and bytes (columns)."""
    arena = m.arena(mem_id)
    tensors = [t for t in _planned_by_arena(m).get(mem_id, ()) if t.first is not None and t.nbytes > 0]
    n = m.n_instructions
    all_rows = n + 2  # times -1..n
    # an arena nothing lives in is empty at every time: no curve to build (a file may list 100,000 of them)
    occ = m.occupancy(mem_id) if tensors else None
    if all_rows > max_rows:  # sample evenly, always keeping the peak row
        peak_t = int(np.argmax(occ)) - 1 if tensors else -1
        idx = np.linspace(0, all_rows - 1, max_rows).round().astype(int)
        times = sorted(set((idx - 1).tolist()) | {peak_t})
    else:
        times = list(range(-1, n + 1))
    size = max(arena.size, max((t.offset + t.nbytes for t in tensors), default=0), 1)
    scale = size / width
    glyph = {t.value: _GLYPHS[i % len(_GLYPHS)] for i, t in enumerate(tensors)}
    header = (f"arena {mem_id} (runtime {arena.runtime_index}, {arena.device}): "
              f"{human_bytes(arena.size)}, {PEAK_LIVE} {human_bytes(arena.peak_bytes)}, "
              f"{SIZE_OVER_PEAK} {ratio(arena.size_over_peak)}; 1 column = {human_bytes(int(np.ceil(scale)))}")
    lines = [header, f"{'t':>5} |{'-' * width}| live bytes"]
    conflicts = [c for c in m.conflicts if c.mem_id == mem_id]
    clashes = _clashes(conflicts, times, scale, width)
    # each tensor's columns once; a row paints the tensors alive then, the earliest listed last (it shows where
    # tensors share columns)
    spans = [(a, min(b, width), glyph[tt.value])
             for tt in tensors for a, b in (_columns(tt.offset, tt.offset + tt.nbytes, scale),)]
    firsts = np.fromiter((tt.first for tt in tensors), np.int64, len(tensors))
    lasts = np.fromiter((tt.last for tt in tensors), np.int64, len(tensors))
    for t in times:
        row = ["."] * width
        for k in np.flatnonzero((firsts <= t) & (lasts >= t))[::-1].tolist():
            a, b, g = spans[k]
            row[a:b] = [g] * (b - a)
        for c in clashes.get(t, ()):
            row[c] = CLASH
        label = "in" if t == -1 else ("out" if t == n else str(t))
        lines.append(f"{label:>5} |{''.join(row)}| {human_bytes(int(occ[t + 1]) if occ is not None else 0)}")
    if len(times) < all_rows:
        lines.append(f"({len(times)} of {all_rows} rows shown, evenly spaced, the peak row kept; "
                     f"--rows shows more)")
    shown = tensors[: len(_GLYPHS)]
    entries = [f"{glyph[t.value]}=v{t.value} {t.dtype}{short_shape(t.shape)} {_short_op(t)}"
               + (f" {t.name}" if t.name else "") + _module_of(m, t.value) for t in shown]
    if len(tensors) > len(_GLYPHS):
        entries.append(f"... ({len(tensors)} tensors: the letters repeat from v{tensors[len(_GLYPHS)].value} on)")
    lines += _wrapped("legend: ", entries, width + 20)
    if conflicts:
        lines.append(f"{CLASH}: bytes two tensors alive at once both hold, {count(len(conflicts), 'conflict')} in this "
                     f"arena" + ("" if clashes else " (none in the rows shown)") + f"; pte.methods[{m.name!r}]"
                     f".conflicts lists them")
    lines += _peak_rows(m, tensors, glyph, occ)
    return "\n".join(lines)


#: the picture's mark for bytes that two tensors alive at once both hold (TFLite Micro's for colliding buffers)
CLASH = "!"


def _columns(lo: int, hi: int, scale: float) -> tuple[int, int]:
    """The picture's columns ``[a, b)`` that bytes ``[lo, hi)`` touch (at least one)."""
    a = int(lo / scale)
    return a, max(a + 1, int(np.ceil(hi / scale)))


def _clashes(conflicts, times: list[int], scale: float, width: int) -> dict[int, set[int]]:
    """Row time -> the columns where a conflict's two tensors share bytes while both are alive."""
    out: dict[int, set[int]] = {}
    for c in conflicts:
        lo, hi = max(c.a_range[0], c.b_range[0]), min(c.a_range[1], c.b_range[1])
        start, end = max(c.a_life[0], c.b_life[0]), min(c.a_life[1], c.b_life[1])
        a, b = _columns(lo, hi, scale)
        for t in times[bisect.bisect_left(times, start):bisect.bisect_right(times, end)]:
            out.setdefault(t, set()).update(range(a, min(b, width)))
    return out


def _short_op(t) -> str:
    """What writes a tensor, short: the operator's base name (``addmm``), the delegate call, the view without its
    base's operator (``view of v12``), else its role."""
    if t.op is None:
        return t.role
    if isinstance(t.op, OperatorTarget) and t.op.namespace is not None:
        return t.op.name
    return t.op.short if isinstance(t.op, ViewOf) else t.op


def _wrapped(head: str, entries: list[str], width: int) -> list[str]:
    """``head`` then the entries joined by ``; ``, wrapped between entries at ``width`` characters."""
    out, line = [], head
    for k, e in enumerate(entries):
        piece = e + (";" if k < len(entries) - 1 else "")
        if line != head and len(line) + 1 + len(piece) > width:
            out.append(line)
            line = " " * len(head) + piece
        else:
            line = line + ("" if line == head else " ") + piece
    out.append(line)
    return out


def _module_of(m, value: int) -> str:
    """`` blocks.0.fc1`` where an ETRecord names the module writing ``value``, else ``""``."""
    src = m.source_of(value) if m.sources is not None else None
    return f" {src.module}" if src is not None and src.module else ""


def _short_path(path: str) -> str:
    """A source file as a reader knows it: its last two path parts."""
    parts = path.replace("\\", "/").split("/")
    return "/".join(parts[-2:])


#: most tensors listed at an arena's peak (the lowest offsets first)
_PEAK_ROWS = 32


def _peak_rows(m, tensors, glyph: dict, occ) -> list[str]:
    """The tensors alive at the arena's peak, each with its dtype, shape, bytes, offset and the op writing it:
    what the picture's letters stand for where it matters most."""
    n = m.n_instructions
    t = int(np.argmax(occ)) - 1
    live = sorted((x for x in tensors if x.first <= t <= x.last), key=lambda x: (x.offset, x.value))
    if not live:
        return []
    where = ("the inputs written" if t == -1 else "the outputs read" if t == n else
             f"instruction {t} ({m.instructions[t].target})")
    headers = ["letter", "value", "dtype", "shape", "bytes", "offset", "written by"]
    rows = [[glyph[x.value], f"v{x.value}", x.dtype, short_shape(x.shape), f"{x.nbytes:,}", f"{x.offset:,}",
             x.op or x.role] for x in live]
    if any(x.name for x in live):
        headers.append("name")
        for r, x in zip(rows, live):
            r.append(x.name or "")
    if m.sources is not None:  # with an ETRecord: the module and the source line writing each
        headers += ["module", "source"]
        for r, x in zip(rows, live):
            src = m.source_of(x.value)
            r.append(f"{src.module} ({src.module_type})" if src is not None and src.module is not None else "")
            r.append(f"{_short_path(src.source.file)}:{src.source.line}" if src is not None and src.source else "")
    table = [line.rstrip() for line in indented(text_table(headers, rows[:_PEAK_ROWS])).splitlines()]
    if len(rows) > _PEAK_ROWS:
        table.append(f"  ... and {count(len(rows) - _PEAK_ROWS, 'more tensor')} (inspect --json, or "
                     f"pte.methods[{m.name!r}].tensors, has them all)")
    return [f"at the peak, {where}: {count(len(live), 'tensor')} alive, {human_bytes(int(occ[t + 1]))}"] + table


@text_view
def data_text(d) -> str:
    """A ``.ptd`` data file: its named tensors."""
    lines = [f"Ptd {d.path or '<bytes>'}: {human_bytes(d.file_size)} ({d.file_size:,} bytes), "
             f"{count(len(d.tensors), 'named tensor')}, {human_bytes(d.data_bytes)} of data"
             + (f"; {count(d.repeated_entries, 'more entry', 'more entries')} "
                f"{'repeats' if d.repeated_entries == 1 else 'repeat'} a key listed before them "
                f"(ExecuTorch reads the first)" if d.repeated_entries else "")]
    rows = [[t.key, t.dtype or "-", str(list(t.shape)) if t.shape is not None else "-", f"{t.nbytes:,}",
             human_bytes(t.nbytes)] for t in d.tensors]
    if rows:
        lines.append("")
        lines.append(indented(text_table(["key", "dtype", "shape", "bytes", "size"], rows)))
    return "\n".join(lines)


@text_view
def layout_text(rows, findings=(), name: str = "<bytes>", top: int = 12) -> str:
    """Where a program file's bytes go: per region, the largest blobs, and duplicates.

    ``rows`` are the file's :class:`~pte_lab.model.layout.LayoutRow` (``Pte.layout()``), ``findings`` what to
    say under them (``Pte.duplicate_blobs()``), ``name`` the file's.
    """
    rows = Layout.of(rows)  # read by column: a file may hold 110,000 constants, and 12 blobs are shown
    total = sum(rows.bytes)
    by_region: dict[str, int] = {}
    for region, n in zip(rows.region, rows.bytes):
        by_region[region] = by_region.get(region, 0) + n
    lines = [f"{name}: {human_bytes(total)} ({total:,} bytes)", ""]
    lines.append(indented(text_table(["region", "bytes", "size", "share"],
                              [[k, f"{v:,}", human_bytes(v), f"{100 * v / total:.1f}%"]
                               for k, v in sorted(by_region.items(), key=lambda kv: -kv[1])])))
    hashed = [i for i, digest in enumerate(rows.sha256) if digest is not None]  # LayoutRow.is_blob
    blobs = rows.rows(sorted(hashed, key=lambda i: -rows.bytes[i])[:max(0, top)])
    if blobs:
        lines += ["", f"  largest blobs (of {len(hashed)}):"]
        lines.append(indented(text_table(["region", "name", "owner", "offset", "bytes"],
                                  [[r.region, r.name, r.owner or "-", f"{r.offset:,}", human_bytes(r.bytes)]
                                   for r in blobs]), 4))
    for f in findings:
        lines += ["", f"  {f}"]
    return "\n".join(lines)


@text_view
def replan_text(r) -> str:
    """A :class:`pte_lab.planning.Replan` per arena: sizes before and after, the bound, each over it."""
    def over(x: float | None) -> float:
        return float("nan") if x is None else x

    lines = [f"{'method':16s} {'arena':>5s} {'device':>8s} {'before':>12s} {'after':>12s} {'lower bound':>12s}"
             f" {'before/bound':>12s} {'after/bound':>11s}"]
    for a in r.arenas:
        lines.append(f"{a.method:16s} {a.mem_id:5d} {a.device:>8s} {human_bytes(a.before):>12s} "
                     f"{human_bytes(a.after):>12s} {human_bytes(a.lower_bound):>12s} "
                     f"{over(a.before_over_bound):11.3f}x {over(a.after_over_bound):10.3f}x"
                     + ("  (kept)" if a.kept else ""))
    lines += input_reuse_lines(r)
    return "\n".join(lines)


def input_reuse_lines(r) -> list[str]:
    """What a replan (:class:`pte_lab.planning.Replan`) puts over a planned input, and what that means for an app
    that executes again: one line per input, then the option that keeps inputs and outputs apart."""
    reuses = r.input_reuses()
    if r.keep_io:
        return ["planned inputs and outputs kept apart from every other tensor (--keep-io): an input keeps its "
                "bytes from one execute to the next"]
    out = [f"{x.method!r} input {x.position} (v{x.value}, arena {x.mem_id}) shares its bytes with v{x.over} "
           f"({x.over_role}, written from instruction {x.over_first}): an app that executes again without setting "
           f"the input reads that tensor's bytes as its input (garbage)"
           + ("; the original plan did the same" if x.original_too else "; the original plan did not")
           for x in reuses]
    if out:
        out.append("set every input before every execute, or replan with --keep-io (replan(..., keep_io=True)) to "
                   "keep planned inputs and outputs apart")
    return out
