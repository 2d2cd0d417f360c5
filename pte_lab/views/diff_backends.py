"""Views of a diff's run-time figures and of a change of backend: each figure with its basis, the totals per
target with their target, loader and basis (only the targets both programs run on), one line per side of what
is known and what is not (:func:`~pte_lab.model.diff_backends.backend_verdict`), and the exit status of a
budget that only a method this host cannot run left unheld."""

from __future__ import annotations

from ..errors import NOT_RUN_HERE
from ..model.diff_backends import applicable_targets, backend_verdict, not_run_here_only
from ..units import delta_bytes, exact_bytes, growth, human_bytes

__all__ = ["part_basis", "totals_table", "totals_left_out_line", "backend_verdict_lines", "backend_verdict_record",
           "not_run_here_line",
           "TARGET_WORDS"]

#: how a total's kind of target is said (``pte_lab.sizes``' target kinds)
TARGET_WORDS = {"host": "in an app or on this host", "bare-metal": "on a bare-metal board"}


def _loader(words: str) -> str:
    """A loader's name, without what it does (``FileDataLoader``)."""
    return words.split(" (", 1)[0]


def part_basis(p) -> str:
    """How each side's figure was had (``file``, ``runner``...), once where both sides say the same: the
    ``from`` column."""
    a, b = p.basis
    if a == b or b is None:
        return a or "-"
    return b if a is None else f"{a} / {b}"


def _cells(c, unmeasured) -> list[str]:
    first = "not measured" if unmeasured in ("first", "both") else human_bytes(c.before)
    second = "not measured" if unmeasured in ("second", "both") else human_bytes(c.after)
    if unmeasured is not None:
        return [first, second, "-", "-"]
    return [first, second, delta_bytes(c.delta), growth(c.growth)]


def totals_table(d) -> tuple[list[str], list[list[str]]]:
    """(headers, rows) of each method's total per kind of target both programs run on
    (:func:`~pte_lab.model.diff_backends.applicable_targets`): its target, the loader it assumes, each side's
    basis."""
    kept, _ = applicable_targets(d)
    rows = []
    for t in d.sizes.totals:
        if t.target not in kept:
            continue
        where = TARGET_WORDS.get(t.target, t.target) + (f" ({_loader(t.loader)})" if t.loader else "")
        rows.append([t.method, f"total {where}", *_cells(t.bytes, t.unmeasured), part_basis(t)])
    return ["method", "total", "before", "after", "change", "growth", "basis"], rows


def totals_left_out_line(d) -> str | None:
    """The kinds of target a total is left out for, and the backends that do not run there (None: none left
    out)."""
    if d.sizes is None or not d.sizes.totals:
        return None
    _, left = applicable_targets(d)
    if not left:
        return None
    return "; ".join(f"no total {TARGET_WORDS.get(k, k)}: {', '.join(bs)} run{'s' if len(bs) == 1 else ''} "
                     f"only {'in an OS process (an app, this host)' if k == 'bare-metal' else 'on a board'}"
                     for k, bs in left.items())


def _side_line(d, s, label: str) -> str:
    who = ", ".join(s.backends) or "portable kernels only"
    parts = ", ".join(f"{'blob' if r != 'named data' else 'named data'}{' ' + n if n and r != 'named data' else ''}"
                      f" {human_bytes(b)}" for r, n, b in s.delegate_parts)
    debug = (f"; of the blobs, ExecuTorch's debug files {human_bytes(s.debug_bytes)} (the profiler's map from the "
             f"model's operations to the program's debug handles, not the model: read with the blob at load_method "
             f"like the rest of it)" if s.debug_bytes else "")
    known = (f"planned {human_bytes(s.planned)} + the delegates' bytes {human_bytes(s.delegate_bytes)}"
             + (f" ({parts}{debug})" if parts else "") + f" = {exact_bytes(s.from_file)} (file)")
    if s.measured_here is not None:
        here = (f"total of {s.method!r} on this host{' with a ' + _loader(s.loader) if s.loader else ''} "
                f"{exact_bytes(s.measured_here)}"
                + (f", of it heap kept by load_method and execute {human_bytes(s.heap_here)}" if s.heap_here else "")
                + " (measured-here)")
    elif s.not_run_here is not None:
        here = f"nothing: it cannot run here ({s.not_run_here})"
    elif d.sizes is not None:
        here = "per method, in the Totals table (several methods in both programs)"
    else:
        here = "nothing (pte-lab diff --sizes measures what runs here)"
    unknown = "; ".join(f"{n.name}: {n.unknown} (measure {n.measure})" for n in s.notes) or "nothing beyond this"
    return f"{label} ({who}): known: {known}; measured here: {here}; not known: {unknown}"


def backend_verdict_lines(d) -> list[str]:
    """Which backend needs less memory, as far as is known: one line per side (known, measured here, not
    known), then one verdict on what both sides know, never more (empty where both call the same backends)."""
    v = backend_verdict(d)
    if v is None:
        return []
    return ["Which backend needs less memory (what is known of each side, and what is not)",
            f"  {_side_line(d, v.first, 'first ')}", f"  {_side_line(d, v.second, 'second')}",
            f"  verdict: {_verdict_words(v)}"]


def _verdict_words(v) -> str:
    """The verdict on what both sides know (the last line of :func:`backend_verdict_lines`, and the JSON's
    ``text``)."""
    what = ("their totals on this host (measured-here)" if v.compared == "measured here"
            else "planned + the delegates' bytes (file)")
    if v.less is None:
        said = f"of what both sides know ({what}), neither needs less: {exact_bytes(v.before)} each"
    else:
        said = (f"of what both sides know ({what}), the {v.less} needs {exact_bytes(v.by)} less "
                f"({exact_bytes(v.before)} -> {exact_bytes(v.after)})")
    one = v.measured_one_side
    if one is not None:
        # what one side alone was measured to need comes first: the file's difference does not decide it
        other = v.second if one is v.first else v.first
        who = " and ".join(one.backends) or "the portable kernels"
        total = one.measured_here or 0  # measured: measured_one_side is the side with a total
        heap = (f"{human_bytes(one.heap_here)} of heap measured here (kept by load_method and execute on this CPU: "
                f"where {who} keeps its own memory), in a total of {exact_bytes(total)} on this host"
                if one.heap_here else f"a total of {exact_bytes(total)} measured on this host")
        theirs = (f"the {other.side}'s unknown {' and '.join(n.name for n in other.notes)} memory"
                  if other.notes else f"what the {other.side} needs beyond the file (not measured here)")
        said = f"the {one.side} also needs {heap}, which {theirs} may or may not exceed; beside that, {said}, " \
            "which does not decide it"
    if v.unknown:
        said += (f"; not known: what {' and '.join(v.unknown)} allocate{'s' if len(v.unknown) == 1 else ''} on the "
                 "device, so which needs less in all is not known here: measure each on the device (above)")
    return said


def not_run_here_line(d) -> str | None:
    """Said under a budget that only a method this host cannot run left unheld
    (:func:`~pte_lab.model.diff_backends.not_run_here_only`); None otherwise."""
    if not not_run_here_only(d):
        return None
    who = "; ".join(f"{n!r} in the {side} program" for side, n in d.sizes.cannot_run_here)
    return (f"not run here: {who} cannot run on this host, so its pools were not measured: not a failed budget "
            f"(exit status {NOT_RUN_HERE} where nothing else fails); the file's figures above were compared")


def _side_record(s) -> dict:
    return {"backends": list(s.backends), "planned": s.planned, "delegate_bytes": s.delegate_bytes,
            "delegate_parts": [{"region": r, "backend": n, "bytes": b} for r, n, b in s.delegate_parts],
            "debug_bytes": s.debug_bytes, "from_file": s.from_file, "measured_here": s.measured_here, "loader": s.loader,
            "heap_here": s.heap_here, "not_run_here": s.not_run_here,
            "not_known": [{"backend": n.backend, "what": n.unknown, "measure": n.measure} for n in s.notes]}


def backend_verdict_record(d) -> dict | None:
    """The JSON of :func:`~pte_lab.model.diff_backends.backend_verdict` (None: both call the same backends)."""
    v = backend_verdict(d)
    if v is None:
        return None
    return {"first": _side_record(v.first), "second": _side_record(v.second), "compared": v.compared,
            "before": v.before, "after": v.after, "less": v.less, "by": v.by, "unknown": list(v.unknown),
            "text": _verdict_words(v)}
