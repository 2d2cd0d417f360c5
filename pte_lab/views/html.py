"""HTML for notebooks, in the style of xarray's ``formatting_html``.

Small functions return HTML fragments; every HTML repr and the explorer's HTML
goes out through one entry point, :func:`html_repr`, which inlines the CSS (a
package resource, ``static/pte_lab.css``) once per output, beside a ``<pre>``
text fallback. Exactly one of the two shows: the rich view is hidden by an
inline ``display:none`` that the CSS overrides, and the CSS hides the fallback,
so where ``<style>`` is stripped (a static notebook viewer, some mail readers)
the text shows and the raw HTML does not. Sections collapse with a hidden
checkbox (no JavaScript).
"""

from __future__ import annotations

import uuid
from html import escape

from ..model.ethos_u import describe_io
from ..units import PEAK_LIVE, SIZE_OVER_PEAK, count, human_bytes, ratio
from ..vocabulary import ValueKind
from .base import backend_note_line, html_repr
from .peak import cause_line, peak_head
from .rows import (ARENA_ROW, METHOD_HEADERS, TENSOR_TABLE, backend_rows, delegate_heap_rows, delegate_scratch_rows, load_cost_rows,
                   method_rows, summary_findings)
from .text import arena_text, data_text, flatbuffer_phrase, method_text, pte_text

_MAX_TENSOR_ROWS = 200


def html_page(fragment: str, title: str) -> str:
    """An :func:`html_repr` fragment as a page of its own, for a browser (``pte-lab diff --html``)."""
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title></head>"
            f"<body>{fragment}</body></html>")


def key_values(rows) -> str:
    """A two-column table of (name, value) rows, names as row headers; both escaped."""
    return "<table>" + "".join(f"<tr><th class='pte-key'>{escape(str(k))}</th><td>{escape(str(v))}</td></tr>"
                               for k, v in rows) + "</table>"


def section(title: str, body: str, count: str = "", open_: bool = False) -> str:
    sid = f"pte-{uuid.uuid4().hex[:12]}"
    checked = " checked" if open_ else ""
    cnt = f" <span class='pte-count'>({escape(count)})</span>" if count else ""
    return (f"<div class='pte-section'><input id='{sid}' type='checkbox'{checked}>"
            f"<label for='{sid}'>{escape(title)}{cnt}</label><div class='pte-body'>{body}</div></div>")


def table(headers: list[str], rows: list[list[str]], numeric: frozenset[int] | set[int] = frozenset()) -> str:
    th = "".join(f"<th class='{'pte-num' if i in numeric else ''}'>{escape(h)}</th>" for i, h in enumerate(headers))
    trs = "".join(
        "<tr>" + "".join(f"<td class='{'pte-num' if i in numeric else ''}'>{c}</td>" for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    return f"<table class='pte-table'><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"


def device_badge(device: str) -> str:
    cls = "pte-badge" if device == "cpu" else "pte-badge pte-dev"
    return f"<span class='{cls}'>{escape(device)}</span>"


def _fill_bar(used: int, size: int) -> str:
    pct = 0 if not size else min(100.0, 100.0 * used / size)
    return f"<span class='pte-bar' title='peak {pct:.0f}% of the arena'><span style='width:{pct:.1f}%'></span></span>"


def _findings(findings, with_method: bool = False) -> str:
    def text(f):
        where = f"[{f.method}] " if with_method and f.method else ""
        if f.change:  # a finding that prescribes: its change stands out after its claim
            return escape(f"{where}{f.claim}; ") + f"<b>{escape(f.change)}</b>"
        return escape(f"{where}{f.claim}")

    return "".join(f"<div class='pte-find pte-{f.severity}'>{text(f)}</div>" for f in findings)


def _ratio(r: float | None) -> str:
    return escape(ratio(r, times="×"))


def _arena_cells(attr: str, a) -> list[str]:
    """The cells of one column of :data:`ARENA_ROW`; the fill bar follows size/peak under no header."""
    v = getattr(a, attr)
    if attr == "device":
        return [device_badge(v)]
    if attr in ("size", "peak_bytes"):
        return [human_bytes(v)]
    if attr == "size_over_peak":
        return [_ratio(v), _fill_bar(a.peak_bytes, a.size)]
    return [str(v)]


_ARENA_HEADERS = [h for attr, header, _ in ARENA_ROW for h in ([header, ""] if attr == "size_over_peak" else [header])]
_ARENA_NUMERIC = {i for i, h in enumerate(_ARENA_HEADERS) if h not in ("device", "")}


def arenas_table(method) -> str:
    rows = [[c for attr, _, _ in ARENA_ROW for c in _arena_cells(attr, a)] for a in method.arenas]
    return table(_ARENA_HEADERS, rows, numeric=_ARENA_NUMERIC)


def _io_table(specs) -> str:
    rows = []
    for s in specs:
        if s.kind != ValueKind.TENSOR:
            rows.append([str(s.position), escape(s.kind), "", "", "", ""])
            continue
        where = f"mem_id {s.mem_id} @ {s.offset:,}" if s.planned else "caller-provided"
        shape = escape(str(list(s.shape))) + (" (dynamic)" if s.dynamic else "")
        rows.append([str(s.position), escape(s.dtype), shape, human_bytes(s.nbytes), escape(where),
                     device_badge(s.device)])
    return table(["#", "dtype", "shape", "bytes", "memory", "device"], rows, numeric={0, 3})


def _tensor_cell(column: str, t) -> str:
    v = getattr(t, column)
    if column == "device":
        return device_badge(v)
    if column == "nbytes":
        return human_bytes(v)
    if column == "offset":
        return f"{v:,}"
    if column == "shape":
        return escape(str(list(v)))
    return "" if v is None else escape(str(v))


_TENSOR_NUMERIC = {i for i, (c, _) in enumerate(TENSOR_TABLE) if c in ("value", "nbytes", "mem_id", "offset",
                                                                       "first", "last")}


def tensors_table(method) -> str:
    planned = method.planned
    rows = [[_tensor_cell(c, t) for c, _ in TENSOR_TABLE] for t in planned[:_MAX_TENSOR_ROWS]]
    more = (f"<div class='pte-sub'>first {_MAX_TENSOR_ROWS} of {len(planned)} rows; "
            f"<span class='pte-mono'>method.tensors</span> has them all</div>") if len(planned) > _MAX_TENSOR_ROWS else ""
    return table([h for _, h in TENSOR_TABLE], rows, numeric=_TENSOR_NUMERIC) + more


def _declared_memory_table(m) -> str:
    """Per delegate whose blob pte_lab reads: each part (bytes, what says so, how the runtime gets it, where the
    memory mode needs it), Vela's I/O descriptors and what ExecuTorch's reader would refuse."""
    rows = []
    for mem in m.delegate_memory:
        said = mem.settings
        for p in mem.parts():
            rows.append([str(mem.index), escape(said), escape(p.part),
                         human_bytes(p.bytes) if p.bytes is not None else "",
                         escape(p.source), escape(p.allocator), escape(p.lives or "")])
        s = mem.stream
        if s is not None and s.inputs is not None and s.outputs is not None:
            rows.append([str(mem.index), escape(said), "Vela's I/O", "",
                         "delegate blob", escape("in " + ("; ".join(map(describe_io, s.inputs)) or "-") + ", out "
                                                 + ("; ".join(map(describe_io, s.outputs)) or "-")),
                         "shape, bytes per element, scratch offset"])
        if mem.problem:
            rows.append([str(mem.index), escape(said), "problem", "", "",
                         f"<span class='pte-error'>{escape(mem.problem)}</span>", ""])
    if not rows:
        return ""
    return table(["#", "compiled for", "part", "bytes", "from", "how the runtime gets it", "lives in"], rows,
                  numeric={0, 3})


def _peak_html(m) -> str:
    """The peak explained: its paragraph, then one item per export choice behind it."""
    s = m.peak
    if s is None:
        return ""
    causes = "".join(f"<li>{escape(cause_line(c, s))}</li>" for c in s.causes)
    return f"<div class='pte-peak'><p>{escape(peak_head(s))}</p>" + (f"<ul>{causes}</ul>" if causes else "") + "</div>"


def _method_body(m) -> str:
    parts = [f"<div class='pte-sub'>{count(m.n_instructions, 'instruction')} &middot; {count(len(m.planned), 'planned tensor')} "
             f"&middot; {human_bytes(m.planned_bytes)} planned</div>", arenas_table(m), _peak_html(m)]
    fnd = m.findings()
    if fnd:
        parts.append(_findings(fnd))
    parts.append(section("Inputs", _io_table(m.inputs), str(len(m.inputs))))
    parts.append(section("Outputs", _io_table(m.outputs), str(len(m.outputs))))
    if m.delegates:
        rows = [[str(d.index), escape(d.backend), device_badge(d.target_device) if d.target_device else "",
                 human_bytes(d.size), escape(d.location),
                 escape(", ".join(f"{k}={v!r}" for k, v in d.compile_specs.items()))] for d in m.delegates]
        declared = _declared_memory_table(m)
        parts.append(section("Delegates", table(["#", "backend", "target", "blob", "stored", "compile specs"],
                                                  rows, numeric={0, 3})
                              + (f"<div class='pte-sub'>what the blobs declare</div>{declared}" if declared else ""),
                              str(len(m.delegates)), open_=bool(declared)))
    counts = sorted(m.operator_counts.items(), key=lambda kv: (-kv[1], kv[0]))
    parts.append(section("Calls", table(["operator / delegate", "instructions"],
                                          [[escape(k), str(v)] for k, v in counts], numeric={1}),
                          str(len(counts))))
    parts.append(section("Planned tensors", tensors_table(m), str(len(m.planned))))
    return "".join(parts)


def method_html(m) -> str:
    head = (f"<div class='pte-header'>Method <span class='pte-path'>{escape(m.name)}</span> "
            + " ".join(device_badge(d) for d in sorted(m.devices)) + "</div>")
    return html_repr(head + _method_body(m), method_text(m))


def arena_html(a) -> str:
    body = (f"<div class='pte-header'>Arena mem_id {a.mem_id} "
            f"<span class='pte-count'>(runtime buffer {a.runtime_index}"
            f"{', method ' + escape(a.method) if a.method else ''})</span> {device_badge(a.device)}</div>"
            + table(["size", PEAK_LIVE, SIZE_OVER_PEAK, "", "tensors"],
                     [[human_bytes(a.size), human_bytes(a.peak_bytes), _ratio(a.size_over_peak),
                       _fill_bar(a.peak_bytes, a.size), str(a.n_tensors)]], numeric={0, 1, 2, 4}))
    return html_repr(body, arena_text(a))


def _load_cost_table(p) -> str:
    rows = [[escape(loader), escape(step), ", ".join(f"{human_bytes(b)} {device_badge(d)}" for d, b in devs)]
            for loader, step, devs in load_cost_rows(p)]
    return table(["loader", "step", "allocates"], rows)


def pte_html(p) -> str:
    src = escape(p.path or "<bytes>")
    head = (f"<div class='pte-header'>ExecuTorch program <span class='pte-path'>{src}</span></div>"
            f"<div class='pte-sub'>"
            + (f"bundled program, {human_bytes(p.bundled.file_size)} file, carrying a {human_bytes(p.file_size)} "
               f"program" if p.bundled is not None else f"{human_bytes(p.file_size)} file")
            + f" &middot; {escape(flatbuffer_phrase(p)).replace(', ', ' &middot; ')}"
            f" &middot; constants {human_bytes(p.constant_bytes)}"
            + "".join(f" &middot; {escape(b)} {human_bytes(n)}" for b, n in p.delegate_bytes.items())
            + (f" &middot; named data {human_bytes(p.named_data_bytes)}" if p.named_data_keys else "")
            + "".join(f" &middot; <b>{escape(n)}: delegates take {human_bytes(b)} of scratch from the temp "
                      f"allocator</b>" for n, b in delegate_scratch_rows(p))
            + "".join(f" &middot; {escape(n)}: {escape(note)}" for n, note in delegate_heap_rows(p))
            + (" &middot; <b>expects external .ptd data</b>" if p.expects_external_data else "")
            + "</div>"
            + "".join(f"<div class='pte-sub'>backend {escape(backend_note_line(note))}</div>"
                      for note, _ in backend_rows(p)))
    rows = [[escape(r.name), str(r.instructions), str(r.tensors), str(r.arenas), human_bytes(r.planned_bytes),
             " ".join(f"{human_bytes(b)} {device_badge(d)}" for d, b in r.by_device)] for r in method_rows(p)]
    parts = [head, table(list(METHOD_HEADERS), rows, numeric={1, 2, 3, 4})]
    warns = summary_findings(p)
    if warns:
        parts.append(_findings(warns, with_method=True))
    parts.append(section("Load cost", _load_cost_table(p), open_=True))
    for m in p.methods.values():
        parts.append(section(f"Method {m.name}", _method_body(m), human_bytes(m.planned_bytes)))
    if p.bundled is not None:
        rows = [[escape(s.method), str(s.cases), escape(", ".join(v.describe() for v in s.inputs)),
                 escape(", ".join(v.describe() for v in s.expected_outputs)), f"{len(at):,}"]
                for s, at in p.bundled.distinct_suites()]
        parts.append(section("Bundled test suites",
                              table(["method", "cases", "inputs", "expected outputs", "named"], rows,
                                     numeric={1, 4}), str(len(p.bundled.suites)), open_=True))
    if p.segments:
        seg_rows = [[str(s.index), escape(s.kind), f"{s.offset:,}", human_bytes(s.size)] for s in p.segments]
        parts.append(section("Segments", table(["#", "kind", "offset", "size"], seg_rows, numeric={0, 2, 3}),
                              str(len(p.segments))))
    return html_repr("".join(parts), pte_text(p))


def data_html(d) -> str:
    head = (f"<div class='pte-header'>ExecuTorch data file <span class='pte-path'>{escape(d.path or '<bytes>')}"
            f"</span></div><div class='pte-sub'>{human_bytes(d.file_size)} file &middot; {len(d.tensors)} named "
            f"tensors &middot; {human_bytes(d.data_bytes)} of data</div>")
    rows = [[escape(t.key), escape(t.dtype or "-"), escape(str(list(t.shape)) if t.shape is not None else "-"),
             human_bytes(t.nbytes)] for t in d.tensors]
    return html_repr(head + table(["key", "dtype", "shape", "bytes"], rows, numeric={3}), data_text(d))


def unreadable_html(what: str, exc: Exception) -> str:
    """What a notebook shows for an object whose file turned out to be invalid (never a traceback)."""
    title, problem = what.splitlines()[0], f"{type(exc).__name__}: {exc}"
    return html_repr(f"<div><b>{escape(title)}</b><div class='pte-find pte-error'>{escape(problem)}</div></div>",
                     f"{title}\n{problem}")
