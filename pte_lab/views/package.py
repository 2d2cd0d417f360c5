"""Views of a ``.ptn`` package (:class:`~pte_lab.model.package.NativePackage`): text, HTML and the JSON document.

The format's name and why it has no plan are worded once, in :mod:`pte_lab.format.mixups` (``PTN_NAME``,
``NO_PLAN``), where the commands that need a plan say it too.
"""

from __future__ import annotations

from html import escape

from ..format.mixups import NO_PLAN, PTN_NAME
from ..model.package import NativeRole, StateKind
from ..printable import text_view
from ..units import count, human_bytes
from .base import html_repr, text_table

__all__ = ["package_text", "package_html", "package_document", "method_lines"]

#: the most graph tensors a method's text lists (the largest); --json and NativeMethod.table() have them all
MOST_TENSOR_ROWS = 24

_ROLE_WORDS = {NativeRole.INPUT: "input", NativeRole.OUTPUT: "result", NativeRole.WRITE_BACK: "write-back",
               NativeRole.CONSTANT: "constant", NativeRole.STATE: "state", NativeRole.INTERMEDIATE: "intermediate"}


def _bytes(n: int | None) -> str:
    return "unknown" if n is None else f"{n:,}"


def _size(n: int | None) -> str:
    return "-" if n is None else human_bytes(n)


def _shape(shape, mins=None) -> str:
    if mins is None:
        return str(list(shape))
    dims = [str(hi) if lo == hi else (f"{lo}..{hi}" if hi >= 0 else f"{lo}..") for lo, hi in zip(mins, shape)]
    return "[" + ", ".join(dims) + "]"


def _indent(s: str, n: int = 2) -> str:
    return "\n".join((" " * n + line) if line else line for line in s.splitlines())


def summary_lines(p) -> list[str]:
    """The package's head: what it is, its members, the missing plan, its methods, constants and state."""
    name = p.path or "<bytes>"
    what = ("a bare program.ptg: the native program of " + PTN_NAME) if p.graph_only else PTN_NAME
    lines = [f"Ptn {name}: {what}; {human_bytes(p.file_size)} ({p.file_size:,} bytes), native program version "
             f"{p.version or '?'}"]
    if p.members:
        lines.append("  members: " + ", ".join(f"{n} {human_bytes(s)}" for n, s in p.members))
    lines.append(f"  it {NO_PLAN}")
    lines.append(f"  {count(len(p.methods), 'method')}: {', '.join(p.methods)}")
    aliased = [c for c in p.constants if c.alias]
    if p.graph_only:
        lines.append(f"  constants: {count(len(p.constants), 'data key')}; their bytes are in the package's "
                     f"program.safetensors, not in this file")
    else:
        ref = p.referenced_bytes
        lines.append(f"  constants: {count(len(p.constants), 'data key')}, {_size(p.stored_bytes)} stored "
                     f"({_bytes(p.stored_bytes)} bytes)"
                     + (f"; {count(len(aliased), 'key')} {'shares' if len(aliased) == 1 else 'share'} the bytes of "
                        f"another (aliases.json), so {_size(ref)} referenced take {_size(p.stored_bytes)}"
                        if aliased else ""))
    zeros = [s for s in p.state if s.kind is StateKind.ZEROS]
    stored = [s for s in p.state if s.kind is StateKind.STORED]
    if p.state:
        parts = []
        if zeros:
            parts.append(f"{count(len(zeros), 'mutable buffer')} ({_size(p.zero_state_bytes)}), zero-initialised "
                         f"at load, no bytes stored")
        if stored:
            parts.append(f"{count(len(stored), 'persistent buffer')} "
                         f"({_size(sum(s.nbytes or 0 for s in stored))}) starting from stored bytes")
        lines.append("  state kept between calls: " + "; ".join(parts))
    else:
        lines.append("  state kept between calls: none")
    if p.missing:
        lines.append(f"  PROBLEM: {count(len(p.missing), 'data key')} the methods use {'is' if len(p.missing) == 1 else 'are'}"
                     f" not stored: {', '.join(p.missing[:8])}{' ...' if len(p.missing) > 8 else ''} (the package "
                     f"will not load)")
    if p.unreferenced:
        lines.append(f"  {count(len(p.unreferenced), 'stored tensor')} no method uses: "
                     f"{', '.join(p.unreferenced[:8])}{' ...' if len(p.unreferenced) > 8 else ''}")
    return lines


def constant_lines(p) -> list[str]:
    if not p.constants:
        return []
    rows = [[c.key, c.dtype or "-", _shape(c.shape), _bytes(c.nbytes),
             ("(not in this file)" if p.graph_only else "MISSING") if c.owner is None
             else (f"alias of {c.owner}" if c.alias else "stored"),
             c.kind + (", written" if c.mutated else ""), ", ".join(c.methods)] for c in p.constants]
    return [f"constants ({len(p.constants)})", _indent(text_table(["key", "dtype", "shape", "bytes", "bytes stored",
                                                                  "kind", "methods"], rows))]


def state_lines(p) -> list[str]:
    if not p.state:
        return []
    rows = [[s.fqn, s.dtype or "-", _shape(s.shape), _bytes(s.nbytes), s.kind.value, ", ".join(s.methods)]
            for s in p.state]
    return [f"state kept between calls ({len(p.state)})",
            _indent(text_table(["fqn", "dtype", "shape", "bytes", "starts", "methods"], rows))]


def method_lines(m, most: int = MOST_TENSOR_ROWS) -> list[str]:
    """A method: its inputs, outputs, largest graph tensors at their bounds, operators."""
    results = [t for t in m.outputs if t is not None and t.role is NativeRole.OUTPUT]
    backs = [t for t in m.outputs if t is not None and t.role is NativeRole.WRITE_BACK]
    calls = sum(m.operator_counts.values())
    lines = [f"Method {m.name}: {count(len(m.inputs), 'input')}, {count(len(results), 'result')}"
             + (f" and {count(len(backs), 'write-back')} into state" if backs else "")
             + f", {count(len(m.tensors), 'graph tensor')}, {count(calls, 'operator call')}"
             + (" (dynamic shapes: each at its upper bound)" if m.dynamic else "")]
    io = [[f"in {i}", t.name, "input", t.dtype or "-", _shape(t.shape, t.min_shape), _bytes(t.nbytes), ""]
          for i, t in enumerate(m.inputs) if t is not None]
    io += [[f"out {i}", t.name, _ROLE_WORDS[t.role], t.dtype or "-", _shape(t.shape, t.min_shape), _bytes(t.nbytes),
            t.writes or ""] for i, t in enumerate(m.outputs) if t is not None]
    lines.append(_indent(text_table(["#", "name", "is", "dtype", "shape", "bytes at bound", "writes"], io)))
    if m.unknown_io:
        lines.append(f"  (no dtype or shape in the file for: {', '.join(m.unknown_io)})")
    fresh = m.fresh_bytes
    lines.append(f"  the tensors it makes take {_size(fresh)}"
                 + (f" ({fresh:,} bytes)" if fresh is not None else " (one is unbounded or packed)")
                 + " at their bounds if none shared bytes (views and in-place results share their input's); not a "
                   "plan: the runtime's planner lets tensors not alive together share bytes")
    made = sorted((t for t in m.tensors if t.role not in (NativeRole.CONSTANT,)),
                  key=lambda t: (-(t.nbytes or 0), t.name))
    rows = [[t.name, _ROLE_WORDS[t.role], t.dtype or "-", _shape(t.shape, t.min_shape), _bytes(t.nbytes),
             t.alias_of or "", t.producer or ""] for t in made[:most]]
    lines.append(_indent(text_table(["graph tensor (largest first)", "is", "dtype", "shape", "bytes at bound", "shares bytes of",
                                     "made by"], rows)))
    if len(made) > most:
        lines.append(f"  ... and {count(len(made) - most, 'more tensor')} (--json, or "
                     f"pkg.methods[{m.name!r}].table(), has them all)")
    if m.operator_counts:
        lines.append("  operators: " + ", ".join(f"{op} x{n}" for op, n in m.operator_counts.items()))
    return lines


@text_view
def package_text(p, methods=None) -> str:
    """A ``.ptn`` package: what it is, its constants and state, each method."""
    out = summary_lines(p)
    for part in (constant_lines(p), state_lines(p)):
        if part:
            out += [""] + part
    for name in (methods if methods is not None else p.methods):
        out += [""] + method_lines(p.methods[name])
    return "\n".join(line.rstrip() for part in out for line in part.splitlines() or [""])


def _html_table(headers, rows, numeric=frozenset()) -> str:
    th = "".join(f"<th class='{'pte-num' if i in numeric else ''}'>{escape(h)}</th>" for i, h in enumerate(headers))
    trs = "".join("<tr>" + "".join(f"<td class='{'pte-num' if i in numeric else ''}'>{escape(c)}</td>"
                                   for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table class='pte-table'><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"


def package_html(p) -> str:
    """A ``.ptn`` package for a notebook: its head, constants, state and methods' inputs and outputs."""
    head = summary_lines(p)
    parts = [f"<div class='pte-header'>ExecuTorch native program package <span class='pte-path'>"
             f"{escape(p.path or '<bytes>')}</span></div>",
             "".join(f"<div class='pte-sub'>{escape(line.strip())}</div>" for line in head[1:])]
    if p.constants:
        parts.append("<div class='pte-sub'><b>constants</b></div>" + _html_table(
            ["key", "dtype", "shape", "bytes", "bytes stored", "kind"],
            [[c.key, c.dtype or "-", _shape(c.shape), _bytes(c.nbytes),
              "-" if c.owner is None else (f"alias of {c.owner}" if c.alias else "stored"), c.kind]
             for c in p.constants], {3}))
    if p.state:
        parts.append("<div class='pte-sub'><b>state kept between calls</b></div>" + _html_table(
            ["fqn", "dtype", "shape", "bytes", "starts"],
            [[s.fqn, s.dtype or "-", _shape(s.shape), _bytes(s.nbytes), s.kind.value] for s in p.state], {3}))
    for m in p.methods.values():
        rows = [[t.name, _ROLE_WORDS[t.role], t.dtype or "-", _shape(t.shape, t.min_shape), _bytes(t.nbytes),
                 t.writes or ""] for t in [*m.inputs, *m.outputs] if t is not None]
        parts.append(f"<div class='pte-sub'><b>method {escape(m.name)}</b> &middot; {len(m.tensors)} graph tensors "
                     f"&middot; made at their bounds: {escape(_size(m.fresh_bytes))} if none shared bytes</div>"
                     + _html_table(["name", "is", "dtype", "shape", "bytes at bound", "writes"], rows, {4}))
    return html_repr("".join(parts), package_text(p))


def _tensor_record(t) -> dict:
    return {"name": t.name, "role": t.role.value, "dtype": t.dtype, "shape": list(t.shape),
            "min_shape": list(t.min_shape), "dynamic": t.dynamic, "nbytes": t.nbytes, "alias_of": t.alias_of,
            "producer": t.producer, "writes": t.writes, "quant": t.quant}


def package_document(p, methods=None) -> dict:
    """The JSON document of a ``.ptn`` package: schema ``pte_lab.package`` version 1::

        {"schema", "version",
         "file": {"path", "size", "format": "ptn", "graph_only", "program_version",
                  "members": [{"name", "size"}], "memory_plan": null},   # null: the runtime plans at load
         "constants": [{"key", "dtype", "shape", "nbytes", "owner", "alias", "kind", "mutated", "methods"}],
         "aliases": {key: owner}, "stored_bytes", "referenced_bytes", "missing", "unreferenced",
         "state": [{"fqn", "dtype", "shape", "nbytes", "starts": "zero-initialised"|"initial bytes stored",
                    "methods"}],
         "methods": {name: {"inputs", "outputs": [tensor], "tensors": [tensor], "operator_counts",
                            "fresh_bytes"}}}

    A tensor is ``{"name", "role", "dtype", "shape" (upper bounds; -1 unbounded), "min_shape", "dynamic",
    "nbytes" (at the bound; null unknown), "alias_of", "producer", "writes", "quant"}``.
    """
    names = list(methods if methods is not None else p.methods)
    return {
        "schema": "pte_lab.package", "version": 1,
        "file": {"path": p.path, "size": p.file_size, "format": "ptn", "graph_only": p.graph_only,
                 "program_version": p.version, "members": [{"name": n, "size": s} for n, s in p.members],
                 "memory_plan": None},
        "constants": [{"key": c.key, "dtype": c.dtype, "shape": list(c.shape), "nbytes": c.nbytes, "owner": c.owner,
                       "alias": c.alias, "kind": c.kind, "mutated": c.mutated, "methods": list(c.methods)}
                      for c in p.constants],
        "aliases": p.aliases, "stored_bytes": p.stored_bytes, "referenced_bytes": p.referenced_bytes,
        "missing": p.missing, "unreferenced": p.unreferenced,
        "state": [{"fqn": s.fqn, "dtype": s.dtype, "shape": list(s.shape), "nbytes": s.nbytes, "starts": s.kind.value,
                   "methods": list(s.methods)} for s in p.state],
        "methods": {n: {"inputs": [_tensor_record(t) for t in p.methods[n].inputs if t is not None],
                        "outputs": [_tensor_record(t) for t in p.methods[n].outputs if t is not None],
                        "tensors": [_tensor_record(t) for t in p.methods[n].tensors],
                        "operator_counts": p.methods[n].operator_counts,
                        "fresh_bytes": p.methods[n].fresh_bytes} for n in names},
    }
