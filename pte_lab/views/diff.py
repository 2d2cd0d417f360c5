"""Views of a :class:`~pte_lab.model.diff.Diff`: text, HTML (what grew, first) and the JSON document.

The JSON document (``pte-lab diff --json``, :meth:`Diff.to_dict`), schema ``pte_lab.diff`` version 2
(additions keep the version; a removal or a change of meaning bumps it). A *change* is
``{"before", "after", "delta", "growth_pct"}`` (``before``/``after`` null where that side has no such
thing, ``growth_pct`` null there and where it grew from 0)::

    {
      "schema": "pte_lab.diff", "version": 2,
      "before": {"path", "size"}, "after": {"path", "size"},
      "file": {"size": change,
               "regions": [{"region", "name", "bytes": change, "count": change}],   # name: a delegate's backend
               "duplicates_gained"/"duplicates_lost": [{"region", "name", "bytes", "duplicate_of"}]},
      "planned_bytes": change,                                  # every method compared
      "added": [method], "removed": [method],
      "only_in": {"before": {method: lone}, "after": {method: lone}},  # the removed and added methods: lone =
                 # {"instructions", "planned_tensors", "planned_bytes", "arenas": [{"mem_id", "device", "size"}]}
      "methods": {
        name: {
          "instructions": change, "planned_tensors": change, "planned_bytes": change,
          "by_device": {device: change},
          "state": {"tensors": change, "bytes": change},
          "arenas": [{"mem_id", "device": {"before", "after"}, "size": change, "peak_bytes": change,
                      "size_over_peak": {"before", "after"}, "tensors": change,
                      "causes": [{"what", "tensors", "largest"}]}],
                      # largest: one tensor's bytes (or change); tensors' bytes are never summed (rows.cause_summary)
          "tensors": {"matched": int, "matched_by": {rule: int}, "changed_counts": {what: int},
                      "changed": [{"matched_by", "changed": [what], "before": tensor, "after": tensor}],
                      "only_before": [tensor], "only_after": [tensor]},
          "delegates": [{"call",                                # paired within a backend (model.diff.pair_delegates)
                         "backend_changed",                     # one backend replaced by another: bytes not compared
                         "settings": [{"what", "before", "after"}],   # what: model.diff.DELEGATE_SETTINGS
                         "bytes": {"blob"|"command stream"|"weights"|"scratch"|"blob's <part>": change},
                         "sides": {"before"|"after": null | {"backend", "blob_bytes", "parts": [{"part", "bytes"}],
                                   "settings": [{"what", "value", "stored", "source"}], "text"}},
                         "target_changes": [target_change]}]
        }
      },
      "target_changes": [{"method", "call", "what", "kind", "before", "after", "bytes", "text"}],
                      # what: TARGET_CHANGES ("backend", "target", "memory mode", "flash to RAM", "method gone";
                      # call null for "method gone"); kind: "runner" (link another backend, or a method gone) |
                      # "board" (another target or memory mode, RAM for bytes flash held): TARGET_CHANGE_KINDS
      "load_cost": [{"loader", "step", "device", "bytes": change}],
      "sizes": null | {"executorch": [before, after],
                       "parts": [{"method", "part", "bytes": change, "unmeasured", "basis": [before, after]}],
                                 # basis: how each side's figure was had ("file", "runner", "counter"...; null:
                                 # none); a side that cannot run the method keeps what its file declares
                       "pools": [{"method", "pool", "bytes": change, "unmeasured"}],   # unmeasured: null|first|second|both
                       "kept": [before, after],   # when a side's kept figures were measured (seconds since the
                                                  # epoch); null: measured by this call
                       "totals": [{"method", "total", "bytes": change, "unmeasured", "target", "loader",
                                   "basis": [before, after], "applies"}],   # applies: both programs run on
                                                                             # that target (model.diff_backends)
                       "cannot_run_here": [{"side", "method"}],   # not measured: this host cannot run it
                       "skipped_before": {method: why}, "skipped_after": {method: why},
                       "not_measured": [{"side", "method", "why"}]},
      "backend_verdict": null | {"first"/"second": {"backends", "planned", "delegate_bytes", "delegate_parts",
                                 "debug_bytes", "from_file", "measured_here", "loader", "heap_here", "not_run_here",
                                 "not_known": [{"backend", "what", "measure"}]},
                                 "compared" ("file" | "measured here"), "before", "after", "less" (first |
                                 second | null), "by", "unknown": [backend], "text"},
                                 # where the programs call different backends: what is known of each
      "budget_on": [kind],                                     # with a limit: what it holds (BUDGET_KINDS:
                                                               # "file", "planned", "scratch", "pools")
      "budget": [{"what", "kind", "bytes": change, "limit_pct", "exceeded", "unmeasured"}],  # with a limit only
      "budget_verdict": {"held", "exceeded", "unmeasured", "passes", "exit_status", "target_change_accepted",
                         "text"},                              # with a limit: held (no check failed), how many
                                                               # exceeded / not measured, passes (what
                                                               # --fail-if-grows exits 0 for: held, and no
                                                               # target change unless accepted), exit_status
                                                               # (0, 1, 4, 5: model.diff_backends.exit_status), whether a
                                                               # target change was accepted, the text's line
      "not_budgeted": [{"method", "part", "bytes": change}]   # with a limit and sizes: this host's heap figures,
                                                               # most grown first, never budgeted
    }

Version 2 (from version 1): ``causes[].bytes`` (the causes' tensor bytes summed, a figure a reader could take
for memory, which it is not) is gone (``largest`` and ``tensors`` stay; the arena's ``size`` is the memory), and
tensors are paired by their place in the computation, not by their shape (a shape is one of what changed).

Tensors are the ``pte_lab.inspect`` document's tensor records (:data:`pte_lab.model.TENSOR_COLUMNS`);
``rule`` is one of :data:`pte_lab.model.diff.MATCHED_BY`, ``what`` a key of
:data:`pte_lab.model.diff.TENSOR_CHANGES`; ``pool`` a :class:`pte_lab.vocabulary.Pool`
(``planned_buffers``, ``method_pool``, ``temp_pool``: the columns of ``Sizes.pools()``).
"""

from __future__ import annotations

from collections import Counter
from html import escape

from ..model.diff import BUDGET_KINDS, MATCHED_BY, PLANNED_SUM, TargetChangeKind
from ..model.backends import SettingSource
from ..model.many_records import paused_gc
from ..printable import text_view
from ..units import (PEAK_LIVE, SIZE_OVER_PEAK, count, delta_bytes, exact_bytes, first_few, growth, human_bytes,
                     local_minute, ratio)
from ..vocabulary import MemoryPart
from .html import device_badge as _device_badge, html_repr, section as _section, table as _html_table
from .diff_backends import (backend_verdict_lines, backend_verdict_record, not_run_here_line,
                            part_basis, totals_left_out_line, totals_table)
from ..model.diff_backends import applicable_targets, exit_status
from .rows import cause_summary, change_record, diff_lines, tensor_record
from .text import indented, text_table

__all__ = ["diff_summary", "diff_text", "diff_html", "diff_document", "SCHEMA", "VERSION", "grew_and_shrank", "tensor_change",
           "target_change_text", "target_changes_line", "not_measured_lines", "budget_text", "not_budgeted_line",
           "NOT_BUDGETED", "budget_failure_lines", "planned_head", "budget_head",
           "budget_verdict",
           "check_verdict", "budget_html"]

SCHEMA = "pte_lab.diff"
VERSION = 2
#: rows of a long list shown in text and HTML (the JSON document and ``MethodDiff.table()`` have all)
_ROWS = 12
_HTML_ROWS = 200
#: most arenas a method's text section lists (the largest changes; JSON lists all)
_ARENA_ROWS = 32


# ------------------------------------------------------------------ shared words
def grew_and_shrank(d):
    """(grew, largest first; shrank, largest first; the unchanged figures, in reading order)."""
    lines = diff_lines(d)
    grew = sorted((x for x in lines if x.change.delta > 0), key=lambda x: -x.change.delta)
    shrank = sorted((x for x in lines if x.change.delta < 0), key=lambda x: x.change.delta)
    return grew, shrank, [x for x in lines if x.change.delta == 0]


def _unchanged_line(grew, shrank, same) -> str:
    """``2 figures unchanged (file: header; file: constant)``: the first few named."""
    names = f" ({first_few((x.what for x in same), 6, '; ', '; and {n} more')})" if same else ""
    none = "nothing grew or shrank; " if not grew and not shrank else ""
    return f"{none}{count(len(same), 'figure')} unchanged{names}"


def _change_cells(c) -> list[str]:
    return [human_bytes(c.before), human_bytes(c.after), delta_bytes(c.delta), growth(c.growth)]


def _arrow(before, after, fmt=str) -> str:
    if before == after:
        return fmt(before)
    return f"{'-' if before is None else fmt(before)} -> {'-' if after is None else fmt(after)}"


def _shape(s) -> str:
    return f"[{', '.join(str(x) for x in s)}]"


def tensor_change(m) -> str:
    """What changed for a matched pair, in words: ``offset 0 -> 4,096; lifetime [3, 5] -> [3, 9]``."""
    a, b = m.before, m.after
    parts = []
    for what in m.changed:
        if what == "size":
            parts.append(f"size {human_bytes(a.nbytes)} -> {human_bytes(b.nbytes)}")
        elif what == "arena":
            parts.append(f"arena {a.mem_id} -> {b.mem_id}")
        elif what == "offset":
            parts.append(f"offset {a.offset:,} -> {b.offset:,}")
        elif what == "lifetime":
            parts.append(f"lifetime [{a.first}, {a.last}] -> [{b.first}, {b.last}]")
        elif what == "shape":
            parts.append(f"shape {_shape(a.shape)} -> {_shape(b.shape)}")
        else:
            parts.append(f"{what} {getattr(a, what)} -> {getattr(b, what)}")
    return "; ".join(parts)


def _tensor_label(t) -> str:
    return t.name or t.op or t.role


def _changed_sorted(md):
    return sorted(md.changed, key=lambda m: (-abs(m.after.nbytes - m.before.nbytes), -m.after.nbytes,
                                             m.after.value))


def _matching_line(md) -> str:
    by = Counter(m.by for m in md.matched)
    what = Counter(w for m in md.matched for w in m.changed)
    how = ", ".join(f"{by[k]} by {k}" for k in MATCHED_BY if by[k])
    changed = ", ".join(f"{k} {n}" for k, n in what.most_common())
    return (f"{count(len(md.matched), 'tensor')} matched" + (f" ({how})" if how else "")
            + f"; {len(md.changed)} changed" + (f" ({changed})" if changed else "")
            + f"; {len(md.only_before)} only in the first, {len(md.only_after)} only in the second")


def _arena_why(md, a) -> str:
    """One sentence on why an arena's size changed."""
    size, peak = a.size, a.peak
    if a.before is None or a.after is None:
        return f"arena {a.mem_id} is only in the {'second' if a.before is None else 'first'} program"
    causes = cause_summary(md.causes(a.mem_id))
    behind = "; ".join(f"{what}: {count(n, 'tensor')} "
                       + (f"(largest change {delta_bytes(big)})" if signed else f"(largest {human_bytes(big)})")
                       for what, n, big, signed in causes)
    padding = _padding_cause(md, a)
    lead = "the tensors behind it"
    if padding is not None and peak.delta == 0 and size.delta == a.padding.delta:
        lead = "the tensors changed too, not the size"
    if peak.delta == 0:
        how = "the same tensors, placed differently" if not causes else "the plan packs its tensors differently"
        if padding is not None:  # a known cause first: exir's padding; packing only for what it leaves
            rest = size.delta - a.padding.delta
            how = padding + (f"; the other {delta_bytes(rest)}: {how}" if rest else "")
        head = (f"arena {a.mem_id}: size {delta_bytes(size.delta)} with {PEAK_LIVE} unchanged "
                f"({human_bytes(peak.after)}): {how} "
                f"({SIZE_OVER_PEAK} {ratio(a.before.size_over_peak)} -> {ratio(a.after.size_over_peak)})")
    else:
        head = (f"arena {a.mem_id}: size {delta_bytes(size.delta)}, {PEAK_LIVE} {delta_bytes(peak.delta)} "
                f"({human_bytes(peak.before)} -> {human_bytes(peak.after)}; {SIZE_OVER_PEAK} "
                f"{ratio(a.before.size_over_peak)} -> {ratio(a.after.size_over_peak)})"
                + (f"; of the size, {padding}" if padding is not None else ""))
    # tensors alive at different times share an arena's bytes: their bytes are never summed (a sum would
    # read as memory); the largest says which tensors weigh most, the arena's size is the memory
    return head + (f"; {lead}: {behind}" if behind else "")


def _padding_cause(md, a) -> str | None:
    """The arena's change of exir's padding past its last tensor, in words (None: it did not change), with the
    delegate that brings it: ``exir's padding past the last tensor 0 B -> 64 B (+64 B: exir pads every arena
    of a method with a XnnpackBackend delegate)``."""
    pad = a.padding
    if pad.before is None or pad.after is None or not pad.changed:
        return None
    side = "after" if pad.delta > 0 else "before"
    backends = list(dict.fromkeys(getattr(x, side).backend for x in md.delegates if getattr(x, side) is not None))
    who = f"a delegate of {' or '.join(backends)}" if backends else "a delegate"
    return (f"exir's padding past the last tensor {human_bytes(pad.before)} -> {human_bytes(pad.after)} "
            f"({delta_bytes(pad.delta)}: exir pads the end of every arena of a method with {who}; not the plan)")


def _arenas_shown(md, rows: int) -> tuple[list, int]:
    """The arenas a reader sees, in mem_id order: all of them up to ``rows``, else the ``rows`` whose size
    (then peak) changed most; and how many are left out (the JSON document has them all)."""
    arenas = md.arenas
    if len(arenas) <= rows:
        return list(arenas), 0
    top = sorted(arenas, key=lambda a: (-abs(a.size.delta or 0), -abs(a.peak.delta or 0), a.mem_id))[:rows]
    return sorted(top, key=lambda a: a.mem_id), len(arenas) - rows


def _arenas_left(n: int) -> str:
    return (f"and {count(n, 'more arena')}, smaller changes (pte-lab diff --json, or the Diff's methods, "
            f"has every one)")


def _duplicates(dups) -> str:
    """Blobs stored twice, the first few (the JSON document has them all), each ``name (region, 1.0 KiB) =
    first``."""
    return first_few((f"{x.name} ({x.region}, {human_bytes(x.bytes)}) = {x.duplicate_of}" for x in dups), 4, "; ",
                     "; and {n} more")


def _only_row(t) -> list[str]:
    return [f"v{t.value}", t.role, _tensor_label(t), t.dtype, _shape(t.shape), human_bytes(t.nbytes),
            str(t.mem_id), f"{t.offset:,}", f"[{t.first}, {t.last}]"]


_ONLY_HEADERS = ["value", "role", "op / name", "dtype", "shape", "bytes", "arena", "offset", "lifetime"]
_ARENA_HEADERS = ["mem_id", "device", "size before", "after", "change", "growth", f"{PEAK_LIVE} before", "after",
                  f"{SIZE_OVER_PEAK} before", "after"]
_CHANGED_HEADERS = ["value", "op / name", "dtype", "bytes", "matched by", "what changed"]


def _arena_tail(a, times: str = "x") -> list[str]:
    """The cells of an arena's row after its size change: peak live and size/peak, before and after."""
    return [human_bytes(a.peak.before), human_bytes(a.peak.after),
            *(ratio(getattr(x, "size_over_peak", None), times) for x in (a.before, a.after))]


def _changed_row(m) -> list[str]:
    return [_arrow(f"v{m.before.value}", f"v{m.after.value}"), _tensor_label(m.after), m.after.dtype,
            human_bytes(m.after.nbytes), m.by, tensor_change(m)]


# ------------------------------------------------------------------ delegates
def target_change_text(c) -> str:
    """A delegate change a memory budget does not pass, in words (:class:`~pte_lab.model.diff.TargetChange`),
    without the delegate it is of."""
    if c.what == "flash to RAM":
        return f"{human_bytes(c.bytes)} (command stream and weights) must now be in RAM where flash held them"
    if c.what == "method gone":
        return f"method {c.method!r} only in the first program: a runner that loads it by name fails on the second"
    if c.what == "backend":
        if c.before is None:
            return f"backend {c.after} only in the second program: the runner must now link {c.after}"
        if c.after is None:
            return (f"backend {c.before} only in the first program: what it ran now runs on the runner's own "
                    f"kernels")
        return f"backend {c.before} -> {c.after}: the runner must now link {c.after}"
    return f"{c.what} {c.before or NOT_SAID} -> {c.after or NOT_SAID}"


#: how :func:`target_changes_line` opens, per kind of deployment change (:data:`TARGET_CHANGE_KINDS`)
_TARGET_LEADS = {TargetChangeKind.RUNNER: "the delegates changed what the runner must link",
                 TargetChangeKind.BOARD: "the delegates changed where the program runs"}


#: how :func:`target_changes_line` opens for methods the second program lacks
_GONE_LEAD = "the second program lacks a method the first has"


#: what is said where a program's delegate does not record a setting
NOT_SAID = "not recorded"


def target_changes_line(d) -> str | None:
    """All of a diff's :attr:`~pte_lab.model.diff.Diff.target_changes` in one line, delegate by delegate
    (None: none)."""
    out = []
    gone = [c for c in d.target_changes if c.call is None]
    if gone:
        out.append(f"{_GONE_LEAD}: " + "; ".join(target_change_text(c) for c in gone))
    for kind, lead in _TARGET_LEADS.items():
        by: dict[tuple[str, int], list] = {}
        for c in d.target_changes:
            if c.kind == kind and c.call is not None:
                by.setdefault((c.method, c.call), []).append(target_change_text(c))
        calls: dict[tuple[str, str], list[int]] = {}  # delegate calls that changed alike are said once
        for (m, k), texts in by.items():
            calls.setdefault((m, ", ".join(texts)), []).append(k)
        if calls:
            out.append(f"{lead}: " + "; ".join(
                f"{m!r} delegate call{'s' if len(ks) > 1 else ''} {first_few(map(str, ks), 6, ', ', ' and {n} more')}"
                f": {texts}" for (m, texts), ks in calls.items()))
    return ". ".join(out) or None


def _delegate_name(dm) -> str:
    return "-" if dm is None else f"{dm.backend} ({dm.location})"


def _said(value: str | None, side) -> str:
    """A delegate setting on one side: "-" where that side has no such call, "not recorded" where its call
    does not say."""
    return value if value is not None else "-" if side is None else NOT_SAID


def delegate_side(dm) -> str:
    """One side of a change of backend, in words: the backend, its blob's bytes and parts, its settings (each
    side's own: a blob of one backend is not a size of the other's)."""
    parts = [] if dm.contents is None else [f"{p.part} {human_bytes(p.bytes)}" for p in dm.contents.parts]
    if dm.command_bytes is not None:
        parts.append(f"command stream {human_bytes(dm.command_bytes)}")
    if dm.weight_bytes is not None:
        parts.append(f"weights {human_bytes(dm.weight_bytes)}")
    said = [] if dm.contents is None else [
        f"{st.what} {st.value}" + (" (the backend's default)" if st.source is SettingSource.DEFAULT else "")
        for st in dm.contents.settings]
    if dm.contents is None and dm.settings:
        said.append(dm.settings)
    if dm.scratch_bytes:
        said.append(f"scratch {human_bytes(dm.scratch_bytes)} from the {dm.scratch_from}")
    return (f"{dm.backend} ({dm.location}): blob {human_bytes(dm.blob_bytes)}"
            + (f" ({', '.join(parts)})" if parts else "") + (f"; {', '.join(said)}" if said else ""))


def backend_change_head(x) -> str:
    """The one row a change of backend is (:attr:`~pte_lab.model.diff.DelegateDiff.backend_changed`)."""
    return (f"delegate call {x.call}: backend {x.before.backend} -> {x.after.backend} (another backend: each side's "
            f"bytes and settings are its own, not compared)")


def _delegate_text(x) -> list[str]:
    if x.backend_changed:
        return [f"  {backend_change_head(x)}", f"    first:  {delegate_side(x.before)}",
                f"    second: {delegate_side(x.after)}"]
    head = f"  delegate call {x.call}: {_arrow(_delegate_name(x.before), _delegate_name(x.after))}"
    if not x.changed:
        return [head + ", the same (settings and bytes)"]
    out = [head] + [f"    {st.what}: {_said(st.before, x.before)} -> {_said(st.after, x.after)}"
                    for st in x.settings if st.changed and st.what not in ("backend", "stored")]
    rows = [[w, *_change_cells(c)] for w, c in x.byte_changes]
    if rows:
        out.append(indented(text_table(["bytes of", "before", "after", "change", "growth"], rows), 4))
    same = [st.what for st in x.settings if not st.changed]
    if same:
        out.append(f"    the same: {', '.join(same)}")
    return out


def not_measured_lines(d) -> list[str]:
    """What one side did not measure (with sizes), said first: each method a side could not size, and the
    figures a sized method lacks."""
    if d.sizes is None:
        return []
    out = [f"not measured: {n!r} in the {side} program ({why}): its run-time parts are left out of what grew, "
           f"shrank and stayed the same, and no budget is computed from them"
           for side, n, why in d.sizes.not_measured]
    skipped = {n for _, n, _ in d.sizes.not_measured}
    parts = [p for p in (*d.sizes.pools, *d.sizes.parts) if p.unmeasured is not None and p.method not in skipped]
    if parts:
        out.append("not measured on a side, left out of what grew and stayed the same: "
                   + first_few((f"{p.method}: {p.part.replace('_', ' ')} ({p.unmeasured})" for p in parts), 6, "; ",
                               "; and {n} more"))
    return out


def _part_cells(p) -> list[str]:
    if p.unmeasured is None:
        return _change_cells(p.bytes)
    first = "not measured" if p.unmeasured in ("first", "both") else human_bytes(p.bytes.before)
    second = "not measured" if p.unmeasured in ("second", "both") else human_bytes(p.bytes.after)
    return [first, second, "-", "-"]


def _part_label(p) -> str:
    remainder = isinstance(p.part, MemoryPart) and p.part.remainder_of is not None
    return f"{p.part} (the pool less the delegates' scratch)" if remainder else p.part


# ------------------------------------------------------------------ the budget
#: what a budget says of the host-dependent parts it leaves out (one home for the wording)
NOT_BUDGETED = "not budgeted (this host's heap, moves with CPU and run)"


def not_budgeted_line(d) -> str | None:
    """The host-dependent parts a budget leaves out (:meth:`~pte_lab.model.diff.Diff.not_budgeted`), each with
    how much it grew: ``not budgeted (...): forward: heap kept by load_method +124 KiB; ...`` (None: no sizes)."""
    parts = d.not_budgeted()
    if not parts:
        return None
    many = len({p.method for p in parts}) > 1
    return f"{NOT_BUDGETED}: " + "; ".join(
        f"{p.method + ': ' if many else ''}{p.part} {delta_bytes(p.bytes.delta)}" for p in parts)


def _budgeted(d, limit: float | None):
    """The diff held to ``limit`` (None: to the budget it carries, :attr:`~pte_lab.model.diff.Diff.limit_pct`)."""
    return d if limit is None else d.with_budget(limit, d.target_change_allowed, d.budget_on)


def budget_head(d) -> str:
    """The budget's heading: its limit and, when ``--budget-on`` narrowed it, what it holds and what not."""
    head = f"Budget: nothing may grow more than {d.limit_pct:g}% of its first size"
    left = [k for k in BUDGET_KINDS if k not in d.budget_on]
    if left:
        head += f" (held: {', '.join(d.budget_on)}; not held, by --budget-on: {', '.join(left)})"
    empty = d.nothing_to_hold() if left else {}  # narrowed to kinds by name: say which have no figure
    if empty:
        head += "; nothing to hold for " + "; ".join(f"{k} ({why})" for k, why in empty.items())
    return head


def check_verdict(c) -> str:
    """One check's verdict, as the budget table's last column says it."""
    return "EXCEEDED" if c.exceeded else f"NOT MEASURED ({c.unmeasured})" if c.unmeasured else "ok"


def _check_sides(c) -> list[str]:
    """before, after: 'not measured' on a side that did not measure it."""
    first = c.unmeasured in ("first", "both")
    second = c.unmeasured in ("second", "both")
    return ["not measured" if first else _exact(c.bytes.before),
            "not measured" if second else _exact(c.bytes.after)]


def _exact(n: int | None) -> str:
    """A budgeted figure to the byte, as a CI log compares it (and rounded, to read)."""
    return human_bytes(n) if n is None else exact_bytes(n)


def budget_verdict(d, limit: float | None = None) -> str:
    """The budget's verdict in one line (the text, the HTML and the JSON's ``budget_verdict.text``): held, or
    which figures grew past it and which were not measured; a deployment change is named beside it."""
    d = _budgeted(d, limit)
    v = d.budget_result()
    checks = v.checks
    over = [c.what for c in v.exceeded]
    unmeasured = [c.what for c in v.unmeasured]
    said = []
    if over:
        said.append(f"exceeded: {len(over)} of {count(len(checks), 'figure')} grew more than {d.limit_pct:g}% "
                    f"({first_few(over, 4, '; ', '; and {n} more')})")
    if unmeasured:
        said.append(f"not held: {len(unmeasured)} of {count(len(checks), 'figure')} not measured on a side "
                    f"({first_few(unmeasured, 4, '; ', '; and {n} more')})")
    line = "budget " + ("; ".join(said) if said else
                        f"held: none of the {count(len(checks), 'figure')} grew more than {d.limit_pct:g}%")
    leads = dict.fromkeys(_GONE_LEAD if c.call is None else _TARGET_LEADS[c.kind]  # a deployment change,
                          for c in v.target_changes)                              # which no budget passes
    if leads:
        accepted = v.target_change_accepted
        line += ("; and " if said or accepted else "; but it does not pass: ") + "; and ".join(leads) + (
            " (said at the top; accepted: --allow-target-change)" if accepted else " (said at the top)")
    return line


def budget_text(d, limit: float | None = None) -> str:
    """The budget table (``--fail-if-grows``): its verdict, a row per figure, the parts it did not budget."""
    d = _budgeted(d, limit)
    rows = [[c.what, *_check_sides(c), growth(c.bytes.growth), check_verdict(c)] for c in d.budget()]
    out = [budget_head(d), f"  {budget_verdict(d)}",
           indented(text_table(_BUDGET_HEADERS, rows))]
    line = not_budgeted_line(d)
    if line:
        out.append(f"  {line}")
    return "\n".join(out)


def budget_failure_lines(d, limit: float | None = None) -> list[str]:
    """One line per failed check (:attr:`~pte_lab.model.diff.BudgetCheck.failed`): what, of what size, from
    how much to how much."""
    d = _budgeted(d, limit)
    out = []
    for c in d.budget_result().failed:
        if c.unmeasured:
            out.append(f"budget not held: {c.what} was not measured in the "
                       f"{'two programs' if c.unmeasured == 'both' else c.unmeasured + ' program'}")
        else:
            out.append(f"budget exceeded: {c.what} grew {growth(c.bytes.growth)} "
                       f"({_exact(c.bytes.before)} -> {_exact(c.bytes.after)}, {c.bytes.delta:+,} B), "
                       f"more than {d.limit_pct:g}%")
    return out


_BUDGET_HEADERS = ["what", "before", "after", "growth", "verdict"]


# ----------------------------------------------------------------------- text
def _method_text(md, rows: int) -> list[str]:
    out = [f"Method {md.name!r}: instructions {_arrow(md.instructions.before, md.instructions.after)}, "
           f"planned tensors {_arrow(md.tensors.before, md.tensors.after)}, planned "
           f"{_arrow(md.planned_bytes.before, md.planned_bytes.after, human_bytes)}, state "
           f"{_arrow(md.state_bytes.before, md.state_bytes.after, human_bytes)} "
           f"({_arrow(md.state_tensors.before, md.state_tensors.after)} tensors)"]
    shown, left = _arenas_shown(md, max(rows, _ARENA_ROWS))
    table = []
    for a in shown:
        table.append([str(a.mem_id), _arrow(*a.devices), *_change_cells(a.size), *_arena_tail(a)])
    if table:
        out.append(indented(text_table(_ARENA_HEADERS, table)))
    for a in shown:
        if a.size.changed or a.peak.changed:
            out.append(f"  {_arena_why(md, a)}")
    if left:
        out.append(f"  {_arenas_left(left)}")
    for x in md.delegates:
        out += _delegate_text(x)
    out.append(f"  tensors: {_matching_line(md)}")
    changed = _changed_sorted(md)
    if changed:
        shown = changed[:rows]
        out.append(f"  changed, largest change first ({len(shown)} of {len(changed)}):")
        out.append(indented(text_table(_CHANGED_HEADERS, [_changed_row(m) for m in shown]), 4))
    for label, ts in (("only in the first", md.only_before), ("only in the second", md.only_after)):
        if ts:
            ts = sorted(ts, key=lambda t: (-t.nbytes, t.value))
            out.append(f"  {label} (not matched; {len(ts[:rows])} of {len(ts)}, largest first):")
            out.append(indented(text_table(_ONLY_HEADERS, [_only_row(t) for t in ts[:rows]]), 4))
    return out


def planned_head(d) -> str:
    """The planned bytes, as the headline says them: of the one method, or with several methods their sum
    (:data:`~pte_lab.model.diff.PLANNED_SUM`) and then what each loader allocates at each step, since no
    loader allocates the sum (``load_program`` shares arenas between host-only methods)."""
    c = d.planned_bytes
    head = (f"{PLANNED_SUM if d.many_methods else 'planned bytes'} {human_bytes(c.before)} -> "
            f"{human_bytes(c.after)} ({delta_bytes(c.delta)}, {growth(c.growth)})")
    if not d.many_methods:
        return head
    steps: dict[tuple[str, int, int], list[str]] = {}  # loaders that allocate alike at a step are said once
    for x in d.load_cost:
        steps.setdefault((x.step, x.loader), [0, 0])
        acc = steps[(x.step, x.loader)]
        acc[0] += x.bytes.before or 0
        acc[1] += x.bytes.after or 0
    alike: dict[tuple[str, int, int], list[str]] = {}
    for (step, loader), (before, after) in steps.items():
        alike.setdefault((step, before, after), []).append(loader)
    return head + "; what the loaders allocate: " + "; ".join(
        f"{step} {human_bytes(before)} -> {human_bytes(after)} ({', '.join(loaders)})"
        for (step, before, after), loaders in alike.items())


@text_view
def diff_summary(d) -> str:
    """One line: the two programs, planned bytes and file size (a terminal's and a saved notebook's repr)."""
    a, b = d.labels
    return (f"<Diff {a} -> {b}: {PLANNED_SUM if d.many_methods else 'planned bytes'} "
            f"{human_bytes(d.planned_bytes.before)} -> "
            f"{human_bytes(d.planned_bytes.after)} ({delta_bytes(d.planned_bytes.delta)}), file "
            f"{delta_bytes(d.file_size.delta)}, {count(len(d.methods), 'method')} in both; print() it for all>")


def kept_lines(s) -> list[str]:
    """The line that says which side's run-time sizes are kept figures, and when they were measured (none where
    both were measured by this call), as ``pte-lab sizes`` says it."""
    when = [(side, t) for side, t in zip(("first", "second"), s.kept) if t is not None]
    if not when:
        return []
    said = " and ".join(f"the {side} program's figures, measured here {local_minute(t)}" if k == 0 else
                        f"the {side}'s, {local_minute(t)}" for k, (side, t) in enumerate(when))
    return [f"(kept: {said}, from these same bytes with this pte_lab and ExecuTorch; --no-cache measures again)"]


@text_view
@paused_gc()  # many rows, no cycles (model.many_records)
def diff_text(d, rows: int = _ROWS) -> str:
    """The diff as text: the summary, what grew and shrank, each method, the file, the loaders, sizes."""
    a, b = d.labels
    out = [f"Diff {a} -> {b}",
           f"  file {human_bytes(d.file_size.before)} -> {human_bytes(d.file_size.after)} "
           f"({delta_bytes(d.file_size.delta)}, {growth(d.file_size.growth)}); {planned_head(d)}",
           f"  methods in both: {', '.join(d.methods) or '-'}; only in the first: {', '.join(d.removed) or '-'}; "
           f"only in the second: {', '.join(d.added) or '-'}"]
    out += [f"  {x}" for x in not_measured_lines(d)]
    targets = target_changes_line(d)
    if targets:
        out.append(f"  {targets}")
    grew, shrank, same = grew_and_shrank(d)
    for title, lines in (("what grew, largest first", grew), ("what shrank, largest first", shrank)):
        if lines:
            out += ["", f"  {title}:",
                    indented(text_table(["what", "before", "after", "change", "growth"],
                                   [[x.what, *_change_cells(x.change)] for x in lines[:_ARENA_ROWS]]), 4)]
            if len(lines) > _ARENA_ROWS:
                out.append(f"    {_lines_left(len(lines) - _ARENA_ROWS)}")
    out += ["", f"  {_unchanged_line(grew, shrank, same)}"]
    same = [n for n, md in d.methods.items() if md.same]
    for md in d.methods.values():
        if not md.same:
            out += [""] + _method_text(md, rows)
    if same:
        out += ["", f"Unchanged methods (every arena, count, tensor and delegate the same): {', '.join(same)}"]
    out += ["", "File: where the bytes go",
            indented(text_table(["region", "before", "after", "change", "growth", "blobs"],
                           [[r.region + (f" {r.name}" if r.name else ""), *_change_cells(r.bytes),
                             _arrow(r.count.before, r.count.after)] for r in d.regions]))]
    for label, dups in (("identical blobs stored twice, new", d.duplicates_gained),
                        ("identical blobs stored twice, gone", d.duplicates_lost)):
        if dups:
            out.append(f"  {label}: {_duplicates(dups)}")
    out += ["", "Load cost (planned arenas, per loader and step)",
            indented(text_table(["loader", "step", "device", "before", "after", "change", "growth"],
                           [[c.loader, c.step, c.device, *_change_cells(c.bytes)] for c in d.load_cost]))]
    if d.sizes is not None:
        s = d.sizes
        out += ["", f"Run-time sizes (pte_lab.sizes; executorch {_arrow(*s.executorch)})",
                *(f"  {x}" for x in kept_lines(s)),
                indented(text_table(["method", "part", "before", "after", "change", "growth", "from"],
                               [[p.method, _part_label(p), *_part_cells(p), part_basis(p)] for p in s.parts]))]
        if s.totals:  # the one figure per side and target to decide on, as pte-lab sizes totals them
            headers, rows = totals_table(d)
            out += ["Totals (each method's, per target both programs run on, as pte-lab sizes gives them)",
                    indented(text_table(headers, rows))]
            left = totals_left_out_line(d)
            if left:
                out.append(f"  {left}")
        for side, skipped in (("first", s.skipped_before), ("second", s.skipped_after)):
            for n, why in skipped.items():
                out.append(f"  {n!r} not sized in the {side}: {why}")
    weighed = backend_verdict_lines(d)
    if weighed:
        out += [""] + weighed
    if d.limit_pct is not None:
        out += ["", budget_text(d)]
        line = not_run_here_line(d)
        if line:
            out.append(f"  {line}")
    return "\n".join(out)


# ----------------------------------------------------------------------- HTML
def _html_change(c) -> list[str]:
    """before, after, change, growth as HTML cells; a change coloured by its direction."""
    cells = [escape(x) for x in _change_cells(c)]
    cls = "pte-grew" if c.delta > 0 else ("pte-shrank" if c.delta < 0 else "")
    return cells[:2] + [f"<span class='{cls}'>{x}</span>" if cls else x for x in cells[2:]]


def _lines_table(lines) -> str:
    table = _html_table(["what", "before", "after", "change", "growth"],
                        [[escape(x.what), *_html_change(x.change)] for x in lines[:_HTML_ROWS]],
                        numeric={1, 2, 3, 4})
    left = len(lines) - _HTML_ROWS
    return table + (f"<div class='pte-sub'>{escape(_lines_left(left))}</div>" if left > 0 else "")


def _lines_left(n: int) -> str:
    return f"and {count(n, 'more line')}, smaller changes (pte-lab diff --json has every one)"


def _devices_cell(a) -> str:
    x, y = a.devices
    if x == y or y is None:
        return _device_badge(x)
    return _device_badge(y) if x is None else f"{_device_badge(x)} &rarr; {_device_badge(y)}"


def _delegate_html(x) -> str:
    if x.backend_changed:
        return (f"<div><b>{escape(backend_change_head(x))}</b></div>"
                f"<div class='pte-sub'>first: {escape(delegate_side(x.before))}</div>"
                f"<div class='pte-sub'>second: {escape(delegate_side(x.after))}</div>")
    head = f"delegate call {x.call}: {_arrow(_delegate_name(x.before), _delegate_name(x.after))}"
    if not x.changed:
        return f"<div class='pte-sub'>{escape(head)}, the same (settings and bytes)</div>"
    rows = [[escape(st.what), escape(_said(st.before, x.before)), escape(_said(st.after, x.after)), "", ""]
            for st in x.settings if st.changed and st.what not in ("backend", "stored")]
    rows += [[escape(w), *_html_change(c)] for w, c in x.byte_changes]
    same = [st.what for st in x.settings if not st.changed]
    return (f"<div>{escape(head)}</div>" + _html_table(["what", "before", "after", "change", "growth"], rows)
            + (f"<div class='pte-sub'>the same: {escape(', '.join(same))}</div>" if same else ""))


def _method_html(md) -> str:
    parts = [f"<div class='pte-sub'>instructions {escape(_arrow(md.instructions.before, md.instructions.after))}"
             f" &middot; planned tensors {escape(_arrow(md.tensors.before, md.tensors.after))} &middot; state "
             f"{escape(_arrow(md.state_bytes.before, md.state_bytes.after, human_bytes))}</div>"]
    shown, left = _arenas_shown(md, _HTML_ROWS)
    rows = [[str(a.mem_id), _devices_cell(a), *_html_change(a.size), *map(escape, _arena_tail(a, "×"))]
            for a in shown]
    if rows:
        parts.append(_html_table(_ARENA_HEADERS, rows, numeric={0, 2, 3, 4, 5, 6, 7, 8, 9}))
    for a in shown:
        if a.size.changed or a.peak.changed:
            parts.append(f"<div>{escape(_arena_why(md, a))}</div>")
    if left:
        parts.append(f"<div class='pte-sub'>{escape(_arenas_left(left))}</div>")
    for x in md.delegates:
        parts.append(_delegate_html(x))
    parts.append(f"<div class='pte-sub'>tensors: {escape(_matching_line(md))}</div>")
    changed = _changed_sorted(md)
    if changed:
        shown = changed[:_HTML_ROWS]
        body = _html_table(_CHANGED_HEADERS, [[escape(c) for c in _changed_row(m)] for m in shown], numeric={3})
        more = (f"<div class='pte-sub'>first {len(shown)} of {len(changed)}; <span class='pte-mono'>"
                f"diff.methods[{escape(repr(md.name))}].table()</span> has them all</div>"
                if len(shown) < len(changed) else "")
        parts.append(_section("Changed tensors, largest change first", body + more, str(len(changed))))
    for label, ts in (("Only in the first (not matched)", md.only_before),
                      ("Only in the second (not matched)", md.only_after)):
        if ts:
            ts = sorted(ts, key=lambda t: (-t.nbytes, t.value))
            body = _html_table(_ONLY_HEADERS, [[escape(c) for c in _only_row(t)] for t in ts[:_HTML_ROWS]],
                               numeric={5, 6, 7})
            parts.append(_section(label, body, str(len(ts))))
    return "".join(parts)


@paused_gc()  # many rows, no cycles (model.many_records)
def diff_html(d) -> str:
    a, b = d.labels
    head = (f"<div class='pte-header'>What changed: <span class='pte-path'>{escape(a)}</span> &rarr; "
            f"<span class='pte-path'>{escape(b)}</span></div>"
            f"<div class='pte-sub'>file {human_bytes(d.file_size.before)} &rarr; {human_bytes(d.file_size.after)}"
            f" ({escape(delta_bytes(d.file_size.delta))}) &middot; {escape(planned_head(d))}"
            + (f" &middot; only in the first: {escape(', '.join(d.removed))}" if d.removed else "")
            + (f" &middot; only in the second: {escape(', '.join(d.added))}" if d.added else "") + "</div>")
    grew, shrank, same = grew_and_shrank(d)
    parts = [head] + [f"<div class='pte-find pte-warning'>{escape(x)}</div>" for x in not_measured_lines(d)]
    targets = target_changes_line(d)
    if targets:
        parts.append(f"<div class='pte-find pte-warning'>{escape(targets)}</div>")
    if grew:
        parts.append(_section("What grew, largest first", _lines_table(grew), str(len(grew)), open_=True))
    if shrank:
        parts.append(_section("What shrank, largest first", _lines_table(shrank), str(len(shrank)), open_=True))
    parts.append(f"<div class='pte-sub'>{escape(_unchanged_line(grew, shrank, same))}</div>")
    same = [n for n, md in d.methods.items() if md.same]
    for md in d.methods.values():
        if not md.same:
            changed = md.planned_bytes.changed or any(a.size.changed or a.peak.changed for a in md.arenas)
            parts.append(_section(f"Method {md.name}", _method_html(md),
                                  f"{delta_bytes(md.planned_bytes.delta)} planned", open_=changed))
    if same:
        parts.append(f"<div class='pte-sub'>unchanged methods (every arena, count, tensor and delegate the same): "
                     f"{escape(', '.join(same))}</div>")
    regions = _html_table(["region", "before", "after", "change", "growth", "blobs"],
                          [[escape(r.region + (f" {r.name}" if r.name else "")),
                            *_html_change(r.bytes), escape(_arrow(r.count.before, r.count.after))]
                           for r in d.regions], numeric={1, 2, 3, 4, 5})
    for label, dups in (("identical blobs stored twice, new", d.duplicates_gained),
                        ("identical blobs stored twice, gone", d.duplicates_lost)):
        if dups:
            regions += f"<div class='pte-find pte-warning'>{escape(label)}: {escape(_duplicates(dups))}</div>"
    parts.append(_section("File: where the bytes go", regions, delta_bytes(d.file_size.delta)))
    parts.append(_section("Load cost", _html_table(
        ["loader", "step", "device", "before", "after", "change", "growth"],
        [[escape(c.loader), escape(c.step), _device_badge(c.device), *_html_change(c.bytes)]
         for c in d.load_cost], numeric={3, 4, 5, 6})))
    if d.sizes is not None:
        s = d.sizes
        body = _html_table(["method", "part", "before", "after", "change", "growth", "from"],
                           [[escape(p.method), escape(_part_label(p)),
                             *(_html_change(p.bytes) if p.unmeasured is None else map(escape, _part_cells(p))),
                             escape(part_basis(p))]
                            for p in s.parts], numeric={2, 3, 4, 5})
        headers, rows = totals_table(d)
        if rows:
            body += _html_table(headers, [[escape(c) for c in r] for r in rows], numeric={2, 3, 4, 5})
        left = totals_left_out_line(d)
        if left:
            body += f"<div class='pte-find pte-info'>{escape(left)}</div>"
        for side, skipped in (("first", s.skipped_before), ("second", s.skipped_after)):
            for n, why in skipped.items():
                body += f"<div class='pte-find pte-info'>{escape(n)} not sized in the {side}: {escape(why)}</div>"
        body = "".join(f"<div class='pte-find pte-info'>{escape(x)}</div>" for x in kept_lines(s)) + body
        parts.append(_section(f"Run-time sizes (executorch {_arrow(*s.executorch)})", body, open_=True))
    weighed = backend_verdict_lines(d)
    if weighed:
        parts.append(_section(weighed[0], "".join(f"<div>{escape(x.strip())}</div>" for x in weighed[1:]),
                              open_=True))
    if d.limit_pct is not None:
        parts.append(budget_html(d))
        line = not_run_here_line(d)
        if line:
            parts.append(f"<div class='pte-find pte-info'>{escape(line)}</div>")
    return html_repr("".join(parts), diff_text(d))


def _check_html(c) -> list[str]:
    """A budget check's row: what, before, after, growth (coloured by direction), its verdict."""
    g = escape(growth(c.bytes.growth))
    if c.unmeasured is None and c.bytes.delta:
        g = f"<span class='{'pte-grew' if c.bytes.delta > 0 else 'pte-shrank'}'>{g}</span>"
    cls = "pte-over" if c.exceeded else "pte-unmeasured" if c.unmeasured else "pte-held"
    return [escape(c.what), *map(escape, _check_sides(c)), g, f"<span class='{cls}'>{escape(check_verdict(c))}</span>"]


def _verdict_html(d) -> str:
    return f"<div class='pte-find {'pte-ok' if d.budget_result().held else 'pte-error'}'>{escape(budget_verdict(d))}</div>"


def budget_html(d, limit: float | None = None) -> str:
    """The budget as an HTML section, as the text says it: its verdict, a row per figure, what it did not
    budget (this host's heap)."""
    d = _budgeted(d, limit)
    v = d.budget_result()
    failed = len(v.failed)
    body = _verdict_html(d) + _html_table(_BUDGET_HEADERS, [_check_html(c) for c in v.checks], numeric={1, 2, 3})
    line = not_budgeted_line(d)
    if line:
        body += f"<div class='pte-find pte-info'>{escape(line)}</div>"
    return _section(budget_head(d), body, f"{failed} failed" if failed else "held", open_=True)


# ----------------------------------------------------------------------- JSON
def _method_record(md) -> dict:
    return {
        "instructions": change_record(md.instructions), "planned_tensors": change_record(md.tensors),
        "planned_bytes": change_record(md.planned_bytes),
        "by_device": {dev: change_record(c) for dev, c in md.by_device},
        "state": {"tensors": change_record(md.state_tensors), "bytes": change_record(md.state_bytes)},
        "arenas": [{"mem_id": a.mem_id, "device": dict(zip(("before", "after"), a.devices)),
                    "size": change_record(a.size), "peak_bytes": change_record(a.peak),
                    "size_over_peak": {"before": getattr(a.before, "size_over_peak", None),
                                       "after": getattr(a.after, "size_over_peak", None)},
                    "tensors": change_record(a.tensors),
                    "causes": ([{"what": w, "tensors": n, "largest": big}
                                for w, n, big, _ in cause_summary(md.causes(a.mem_id))]
                               if a.before is not None and a.after is not None else [])}
                   for a in md.arenas],
        "tensors": {
            "matched": len(md.matched), "matched_by": dict(Counter(m.by for m in md.matched)),
            "changed_counts": dict(Counter(w for m in md.matched for w in m.changed)),
            "changed": [{"matched_by": m.by, "changed": list(m.changed), "before": tensor_record(m.before),
                         "after": tensor_record(m.after)} for m in md.changed],
            "only_before": [tensor_record(t) for t in md.only_before],
            "only_after": [tensor_record(t) for t in md.only_after],
        },
        "delegates": [_delegate_record(x) for x in md.delegates],
    }


def _lone_method_record(m) -> dict:
    """A method only one program has: what it plans there (nothing to compare it with)."""
    return {"instructions": len(m.instructions), "planned_tensors": len(m.planned), "planned_bytes": m.planned_bytes,
            "arenas": [{"mem_id": a.mem_id, "device": a.device, "size": a.size} for a in m.arenas]}


def _side_record(dm) -> dict | None:
    if dm is None:
        return None
    c = dm.contents
    return {"backend": dm.backend, "blob_bytes": dm.blob_bytes,
            "parts": [] if c is None else [{"part": p.part, "bytes": p.bytes} for p in c.parts],
            "settings": [] if c is None else [{"what": st.what, "value": st.value, "stored": st.stored,
                                               "source": st.source.value} for st in c.settings],
            "text": delegate_side(dm)}


def _delegate_record(x) -> dict:
    return {"call": x.call, "backend_changed": x.backend_changed,
            "settings": [{"what": st.what, "before": st.before, "after": st.after} for st in x.settings],
            "bytes": {w: change_record(c) for w, c in x.byte_changes},
            "sides": {"before": _side_record(x.before), "after": _side_record(x.after)},
            "target_changes": [_target_record(c) for c in x.target_changes]}


def _target_record(c) -> dict:
    return {"method": c.method, "call": c.call, "what": c.what, "kind": c.kind, "before": c.before,
            "after": c.after, "bytes": c.bytes, "text": target_change_text(c)}


@paused_gc()  # many rows, no cycles (model.many_records)
def diff_document(d, limit_pct: float | None = None) -> dict:
    """The ``pte_lab.diff`` document (version 2); with ``limit_pct`` (or a diff held to a budget,
    :meth:`~pte_lab.model.diff.Diff.with_budget`), the budget checks and verdict too."""
    doc = {
        "schema": SCHEMA, "version": VERSION,
        "before": {"path": d.before.path, "size": d.file_size.before},
        "after": {"path": d.after.path, "size": d.file_size.after},
        "file": {
            "size": change_record(d.file_size),
            "regions": [{"region": r.region, "name": r.name, "bytes": change_record(r.bytes),
                         "count": change_record(r.count)} for r in d.regions],
            "duplicates_gained": [_duplicate_record(x) for x in d.duplicates_gained],
            "duplicates_lost": [_duplicate_record(x) for x in d.duplicates_lost],
        },
        "planned_bytes": change_record(d.planned_bytes),
        "added": list(d.added), "removed": list(d.removed),
        "only_in": {"before": {n: _lone_method_record(d.before.methods[n]) for n in d.removed},
                    "after": {n: _lone_method_record(d.after.methods[n]) for n in d.added}},
        "methods": {n: _method_record(md) for n, md in d.methods.items()},
        "load_cost": [{"loader": c.loader, "step": c.step, "device": c.device, "bytes": change_record(c.bytes)}
                      for c in d.load_cost],
        "sizes": None if d.sizes is None else {
            "executorch": list(d.sizes.executorch),
            "parts": [{"method": p.method, "part": p.part, "bytes": change_record(p.bytes),
                       "unmeasured": p.unmeasured, "basis": list(p.basis)} for p in d.sizes.parts],
            "pools": [{"method": p.method, "pool": p.part, "bytes": change_record(p.bytes),
                       "unmeasured": p.unmeasured} for p in d.sizes.pools],
            "totals": [{"method": p.method, "total": p.part, "bytes": change_record(p.bytes),
                        "unmeasured": p.unmeasured, "target": p.target, "loader": p.loader, "basis": list(p.basis),
                        "applies": p.target in applicable_targets(d)[0]} for p in d.sizes.totals],
            "cannot_run_here": [{"side": side, "method": n} for side, n in d.sizes.cannot_run_here],
            "kept": list(d.sizes.kept),
            "skipped_before": dict(d.sizes.skipped_before), "skipped_after": dict(d.sizes.skipped_after),
            "not_measured": [{"side": side, "method": n, "why": why} for side, n, why in d.sizes.not_measured],
        },
        "target_changes": [_target_record(c) for c in d.target_changes],
        "backend_verdict": backend_verdict_record(d),
    }
    d = _budgeted(d, limit_pct)
    if d.limit_pct is not None:
        v = d.budget_result()
        checks = v.checks
        doc["not_budgeted"] = [{"method": p.method, "part": p.part, "bytes": change_record(p.bytes)}
                               for p in d.not_budgeted()]
        doc["budget_on"] = list(d.budget_on)
        doc["budget"] = [{"what": c.what, "kind": c.kind, "bytes": change_record(c.bytes), "limit_pct": c.limit_pct,
                          "exceeded": c.exceeded, "unmeasured": c.unmeasured} for c in checks]
        doc["budget_verdict"] = {"held": v.held, "exceeded": len(v.exceeded), "unmeasured": len(v.unmeasured),
                                 "passes": v.passes, "exit_status": exit_status(d, v.exit_status),
                                 "target_change_accepted": bool(v.target_changes) and v.target_change_accepted,
                                 "text": budget_verdict(d)}
    return doc


def _duplicate_record(x) -> dict:
    return {"region": x.region, "name": x.name, "bytes": x.bytes, "duplicate_of": x.duplicate_of}
