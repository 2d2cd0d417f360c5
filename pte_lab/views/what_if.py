"""Views of the what-if records (:mod:`pte_lab.planning.at_bound`): text, JSON-ready dicts, HTML."""

from __future__ import annotations

import html

from ..model.dtypes import short_shape
from ..model.shape_fit import dim_name, dim_text, export_change
from ..units import count, exact_bytes, human_bytes, local_minute
from .base import delegate_heap_note, text_table

__all__ = ["what_if_text", "what_if_dict", "what_if_html", "budget_text", "budget_dict", "usage_text",
           "usage_dict", "TOP_TENSORS"]

#: how many tensors (largest first) the text lists
TOP_TENSORS = 12


def _maybe(n) -> str:
    return "not computed" if n is None else exact_bytes(n)


def _where(keys, point) -> str:
    """``input 0 axis 1 = 800``; a static prediction's key is its parameter's name: ``max_seq_len = 256``."""
    return ", ".join(f"{k} = {n:,}" if isinstance(k, str) else f"input {k[0]} axis {k[1]} = {n:,}"
                     for k, n in zip(keys, point))


def _names(w) -> list[str]:
    return [k if isinstance(k, str) else dim_name(k) for k in w.keys]


def _learnt_line(w) -> str:
    """Where the dims come from: runs of the dynamic method, or the two static exports."""
    if w.exports is not None:
        v0, v1 = w.exports.values
        key = w.keys[0]
        return (f"dims fitted tensor by tensor (paired by place in the instruction order) from the exports at "
                f"{key} = {v0:,} and {v1:,}: each affine in {key}, whole at {w.point[0]:,}")
    pts = "; ".join(_where(w.keys, p) for p in w.fit.points)
    kept = "" if w.fit.kept is None else (f" (kept: the runs were made here {local_minute(w.fit.kept)} on these same bytes "
                                          "with this pte_lab and ExecuTorch; --no-cache runs them again)")
    return f"dims learnt from runs at {pts}, each checked at the last and at the file's bound{kept}"


def _peak_lines(w, limit: int = 6) -> list[str]:
    ts = w.peak_tensors
    if not ts:
        return []
    head = (f"the peak: instruction {w.peak_instruction}, {len(ts):,} tensors alive, "
            f"{exact_bytes(w.peak_bytes)} (a view counted with its base); the largest:")
    lines = [head]
    for t in ts[:limit]:
        lines.append(f"  v{t.value} {t.dtype}{short_shape(t.shape)} {exact_bytes(t.nbytes)} ({t.op or t.role})")
    if len(ts) > limit:
        lines.append(f"  and {len(ts) - limit:,} more")
    return lines


def _heap_lines(w, what: str) -> list[str]:
    """For a delegated method: the answer is the plan only; the delegate's own memory is in the heap."""
    return [f"{what} counts the planned arenas only; {delegate_heap_note(w.backends)}"] if w.backends else []


def _applied_lines(w) -> list[str]:
    """A prediction with findings' changes made: which, the tensors they take out, the plan without them."""
    a = w.applied
    if a is None:
        return []
    swaps = [f"v{new} read in place of v{old}" for f in a.findings for old, new in f.edit.read_instead]
    saved = a.planned_without - w.planned
    return [f"a prediction with the change of finding {', '.join(a.kinds)} made: the file's tensors less the "
            f"{count(len(a.removed), 'planned tensor')} it removes"
            + (f" ({', '.join(swaps)}, alive until its last use)" if swaps else "") + ", replanned with ExecuTorch's "
            "greedy; not a measurement of a re-export",
            f"without the change it plans {exact_bytes(a.planned_without)}: the change "
            + (f"saves {exact_bytes(saved)}" if saved >= 0 else f"costs {exact_bytes(-saved)} more")
            + f" of the plan at {_where(w.keys, w.point)} (the removed tensors' bytes add up to "
            f"{exact_bytes(a.removed_bytes)} over the call, but they are not alive at once and shared their space "
            "in the arena with others: the plan shrinks by what they held at its peak)",
            *(f"the change ({f.kind}): {f.edit.change}" for f in a.findings)]


def what_if_text(w) -> str:
    """The prediction: totals, arenas, the peak, the largest tensors, the fit's sizes, the export change."""
    names = _names(w)
    # a static export has no bound: the figures beside the prediction are the second export's
    static = w.exports is not None
    exported = f"the second export ({_where(w.keys, w.exported)})" if static else "at the export's bound"
    out = [f"{w.method} as if exported with {_where(w.keys, w.point)}"
           + ("" if static else f" (exported: {_where(w.keys, w.exported)})"),
           *_applied_lines(w),
           f"planned (ExecuTorch's greedy: what a re-export plans): {exact_bytes(w.planned)}; "
           f"{exported}: {exact_bytes(w.exported_planned)}",
           f"pte_lab's best fit would plan {_maybe(w.best_fit)}; lower bound (bytes alive at once, no plan "
           f"is smaller): {exact_bytes(w.lower_bound)}"]
    out.append(text_table(["arena", "device", "greedy", "best fit", "lower bound", "exported"],
                          [[str(a.mem_id), a.device, f"{a.planned:,}", "-" if a.best_fit is None else f"{a.best_fit:,}", f"{a.lower_bound:,}",
                            f"{a.exported:,}"] for a in w.arenas]))
    out += _peak_lines(w)
    dims = dict(zip(w.fit.values, w.fit.dims))
    top = sorted(w.tensors, key=lambda t: (-t.nbytes, t.value))[:TOP_TENSORS]
    out.append(f"the {len(top)} largest of {len(w.tensors):,} planned tensors:")
    out.append(text_table(["value", "dtype", "shape", "bytes", "as exported", "dims"],
                          [[f"v{t.value}", t.dtype, short_shape(t.shape), f"{t.nbytes:,}",
                            f"{short_shape(t.exported_shape)} {t.exported_nbytes:,}",
                            "[" + ", ".join(dim_text(d, names) for d in dims[t.value]) + "]"] for t in top]))
    out.append(_learnt_line(w))
    out += _heap_lines(w, "this prediction")
    out.append(f"export change: {w.export_change()}")
    return "\n".join(out)


def what_if_dict(w) -> dict:
    return {
        "method": w.method,
        **({"bounds": [{"input": k[0], "axis": k[1], "bound": n, "exported": e}
                       for k, n, e in zip(w.keys, w.point, w.exported)]} if w.exports is None else
           {"parameter": {"names": list(w.exports.names), "at": w.point[0], "values": list(w.exports.values),
                          "sources": list(w.exports.sources)}}),
        "planned": w.planned, "best_fit": w.best_fit, "lower_bound": w.lower_bound,
        "exported_planned": w.exported_planned,
        "arenas": [a.__dict__ for a in w.arenas],
        "peak": {"instruction": w.peak_instruction, "values": list(w.peak_values), "bytes": w.peak_bytes},
        "tensors": [{**t.__dict__, "shape": list(t.shape), "exported_shape": list(t.exported_shape)}
                    for t in w.tensors],
        "export_change": w.export_change(),
        **({"outside_plan": delegate_heap_note(w.backends)} if w.backends else {}),
        **({"applied": _applied_dict(w.applied)} if w.applied is not None else {}),
        # when the runs the shapes were learnt from were made, where they were kept (null: made by this call)
        **({"learnt_kept": w.fit.kept} if w.exports is None else {}),
    }


def _applied_dict(a) -> dict:
    return {"prediction": True, "findings": list(a.kinds),
            "removed": [{"value": v, "nbytes": n} for v, n in a.removed],
            "read_instead": [{"removed": old, "read": new} for f in a.findings for old, new in f.edit.read_instead],
            "planned_without": a.planned_without, "changes": [f.change for f in a.findings]}


def what_if_html(w) -> str:
    return "<pre>" + html.escape(what_if_text(w)) + "</pre>"


def budget_text(b) -> str:
    """The largest bound under the budget, what plans it, the peak's tensors, then the export change."""
    key = f"input {b.key[0]} axis {b.key[1]}"
    w = b.at
    asked = f"{b.asked} = {exact_bytes(b.budget)}" if b.asked else exact_bytes(b.budget)
    whole = ("the planned arenas, the pools and the loader's heap together" if b.beyond is not None
             else "the planned arenas alone")
    out = [f"largest bound of {key} under {asked}: {b.bound:,} (exported: {b.exported:,}; counted: {whole})"]
    out += _counted_lines(b)
    if b.dim_chosen:
        out.append(f"(no --bound given: {key} is the method's one dynamic dim, so it is the one searched)")
    out += _applied_lines(w)
    out += _need_lines(b)
    out += [
           f"at {b.bound:,} exir's greedy (as pte_lab replans it) plans {exact_bytes(w.planned)} "
           f"(pte_lab's best fit {_maybe(w.best_fit)}, lower bound {exact_bytes(w.lower_bound)})"]
    if b.next_total is not None:
        # bytes only: a rounded "(256 KiB)" beside a budget of "(256 KiB)" reads as equal, not as over it
        at, heap = b.next_heap
        where = (f"measured there, {heap:,} B" if at == b.bound + 1 else
                 f"at least the {heap:,} B measured at bound {at:,}")
        out.append(f"at {b.bound + 1:,} it would plan {b.next_planned:,} B; with the pools and the heap ({where}) "
                   f"the app needs {b.next_total:,} B, {b.next_total - b.budget:,} B over the budget")
    elif b.next_planned is not None:
        share = "the planned arenas' share" if b.beyond is not None else "the budget"
        out.append(f"at {b.bound + 1:,} it would plan {b.next_planned:,} B, "
                   f"{b.next_planned - b.plan_budget:,} B over {share} of {b.plan_budget:,} B")
    # a .pte keeps no Dim's min: the smallest bound here is the first that gives whole shapes, not the export's min
    out.append(f"the smallest bound tried, {b.smallest_bound:,}, plans {exact_bytes(b.smallest)} (the file does not "
               f"keep the export's minimum: it may be below it); the export's "
               f"({b.exported:,}) {exact_bytes(w.exported_planned)}")
    out += _peak_lines(w)
    if b.beyond is None:
        out += _heap_lines(w, "the budget")
    out.append(_learnt_line(w))
    if b.covers_need is False:
        out.append(f"export change: {w.export_change()} fits the budget but refuses inputs over {b.bound:,}; "
                   + (f"for {b.need:,}, see the changes above" if b.fitting else
                      f"no change pte_lab predicts plans {b.need:,} under it"))
    else:
        out.append(f"export change: {w.export_change()}")
    return "\n".join(out)


def _counted_lines(b) -> list[str]:
    """What the budget was set against: the planned arenas with what the app needs beyond them (their bytes and
    basis, the loader), or the planned arenas alone, with what comes on top and how to measure it."""
    if b.beyond is None:
        delegated = b.at is not None and b.at.backends
        return [f"planned bytes only{' (the delegates own memory is outside them)' if delegated else ''}; the method "
                f"pool, temp pool and heap come on top: `pte-lab sizes FILE` measures them"]
    y = b.beyond
    parts = " + ".join(f"{p.what} {p.bytes:,} ({p.basis}{', at least' if p.lower else ''})" for p in y.parts)
    if b.heap is not None:
        at_bound = ("the pools, at the exported bound: they do not change with the bound; the heap measured at each "
                    "bound tried, below")
    else:
        at_bound = ("at the exported bound; the pools do not change with the bound, and the heap measured there is "
                    "an upper figure for a smaller one (what kernels malloc may shrink with the shapes)")
    kept = "kept: the next question reads it" if y.keeping else "not kept: --no-cache"
    src = (f"a kept sizing of these bytes ({local_minute(y.kept)}, {at_bound})" if y.kept is not None else
           f"a sizing of these bytes made now for this answer ({at_bound}; {kept})"
           if y.measured else "the file (the method pool replayed from its tables with this host's ABI)")
    out = [f"beside the planned arenas, an app with {y.loader} needs, from {src}: {parts} = {exact_bytes(y.total)}; "
           f"the planned arenas get the rest of the budget, {exact_bytes(b.plan_budget)}"]
    if b.heap is not None:
        out += _heap_search_lines(b)
    if y.lower:
        out.append("not counted: what kernels malloc at run time beyond these, and the app's own memory: "
                   + (f"no sizing of these bytes could be made here ({y.unsized})" if y.unsized else
                      "`pte-lab sizes FILE` measures them (kept, this answer then counts its figures)"))
    return out


def _heap_search_lines(b) -> list[str]:
    """How a whole-app search counted the heap (:class:`~pte_lab.planning.at_bound.HeapSearch`): where it measured
    it, how each bound was counted, whether every bound above the answer is ruled out."""
    h = b.heap
    key = f"input {b.key[0]} axis {b.key[1]}"
    seen = "; ".join(f"{m:,}: {n:,} B" + (" (the sizing's)" if k == 0 else "") for k, (m, n) in enumerate(h.measured))
    out = [f"the heap peak, which kernels and delegates malloc by the shapes they run at, measured at each bound "
           f"tried (the method run with {key} at it in a fresh worker, as the sizing measures its heap"
           + (f"; XNNPACK sizes {h.xnnpack_resized} tensors of its workspace by their declared shapes, the "
              f"export's bound, so the runs declared them at the shapes they run at, as an export at that bound "
              f"does" if h.xnnpack_resized else "")
           + f"): {seen}"]
    if b.at is not None and b.at.applied is not None:
        out.append("the heap is the program's as it is: what the changes made before replanning would take off it "
                   "is not measured")
    rule = ("each bound is counted with the heap measured at the nearest bound at or above it, and ruled out "
            "where its plan with the heap measured at the nearest bound at or below it is over the budget (the heap "
            "grows with the bound)")
    if h.exact and h.basis == b.bound:
        out.append(f"{rule}: every bound above {b.bound:,} is ruled out")
    elif h.exact:
        out.append(f"{rule}: every bound above {b.bound:,} is ruled out; {b.bound:,} itself is counted with the heap "
                   f"measured at {h.basis:,}" + (f" (the search stopped: {h.stopped})" if h.stopped else ""))
    else:
        why = (f"a heap measurement failed: {h.stopped}" if h.stopped else
               f"it measures the heap at most {len(h.measured) - 1} times")
        out.append(f"{rule}: bounds {b.bound + 1:,} to {h.upper:,} are not ruled out ({why}); one of them may fit "
                   f"too")
    if h.falls is not None:
        a, c = h.falls
        out.append(f"the heap does not grow with the bound here: {h.at(a):,} B at {a:,}, {h.at(c):,} B at {c:,} (a "
                   f"kernel that mallocs at some shapes and not at others), so a bound above {b.bound + 1:,} ruled out "
                   f"with a smaller bound's heap may fit after all")
    return out


def _need_lines(b) -> list[str]:
    """Whether the answer runs the longest input given and, where it does not, what plans that input instead."""
    if b.need is None:
        return []
    if b.covers_need:
        return [f"it covers the longest input you run, {b.need:,}: "
                f"{b.bound - b.need:,} to spare" if b.bound > b.need else
                f"it is the longest input you run, {b.need:,}"]
    plain = {o.planner: o for o in b.options if not o.kinds}
    greedy = plain["greedy"].planned
    share = b.need_share
    y = b.need_beyond if b.need_beyond is not None else b.beyond
    against = "the budget" if y is None else (
        f"the planned arenas' share (with the heap measured at {y.heap_bound:,})" if y.heap_bound is not None else
        "the planned arenas' share")
    out = [f"that is below the longest input you run, {b.need:,}: a program exported at "
           f"{export_change(b.at.keys, (b.bound,))} refuses inputs over {b.bound:,} on that axis",
           f"at {b.need:,} exir's greedy plans {exact_bytes(greedy)}, {exact_bytes(greedy - share)} over "
           f"{against}; what plans {b.need:,} under it (predictions: the file's tensors at that bound, with each "
           f"finding's change made, replanned):"]
    # a Planner is a str enum: its value is the key
    labels = {"greedy": "a re-export (ExecuTorch's greedy)",
              "best_fit": "that re-export replanned (pte-lab replan, pte_lab's best fit)"}
    rows = []
    greedy_of = {o.kinds: o.planned for o in b.options if o.planner == "greedy"}
    for o in b.options:
        if o.planner != "greedy" and o.planned >= greedy_of.get(o.kinds, o.planned + 1):
            continue  # a replan that gains nothing is not a way
        what = " + ".join(o.kinds) if o.kinds else "as exported"
        left = (f"fits, {exact_bytes(share - o.planned)} left" if o.fits
                else f"over by {exact_bytes(o.planned - share)}")
        rows.append([what, labels[o.planner], f"{o.planned:,}", left])
    out.append(text_table(["change", "plan", f"bytes at {b.need:,}", f"against {exact_bytes(share)}"], rows))
    fit = b.fitting
    if fit:
        o = fit[0]
        how = " and ".join(o.kinds) if o.kinds else "no model change"
        then = "" if o.planner == "greedy" else ", then pte-lab replan it"
        whole = ("" if y is None else
                 f"; with the {exact_bytes(y.total)} beside the plan, the app's {exact_bytes(o.planned + y.total)}"
                 f" of the budget's {exact_bytes(b.budget)}, {exact_bytes(b.budget - o.planned - y.total)} left")
        out.append(f"the fewest changes that fit: {how}, re-exported with {export_change(b.at.keys, (b.need,))}"
                   f"{then}: {exact_bytes(o.planned)} planned, predicted{whole}")
    else:
        out.append(f"none of these fits at {b.need:,}: a bound of {b.bound:,} is the most this budget plans, "
                   f"unless a change pte_lab cannot predict from the file takes more out (the findings: pte-lab "
                   f"inspect FILE)")
    for f in b.findings:
        out.append(f"the change ({f.kind}): {f.edit.change}")
    if not b.findings:
        out.append("no finding of this method carries a change pte_lab can make on the file's tensors "
                   "(pte-lab inspect FILE lists the findings)")
    return out


def budget_dict(b) -> dict:
    return {"budget": b.budget, "input": b.key[0], "axis": b.key[1], "bound": b.bound, "exported": b.exported,
            "smallest": b.smallest, "smallest_bound": b.smallest_bound, "plan_budget": b.plan_budget,
            # what the budget counts beside the planned arenas (null: the planned arenas alone)
            "beyond_plan": None if b.beyond is None else {
                "loader": str(b.beyond.loader), "total": b.beyond.total, "kept": b.beyond.kept, "measured": b.beyond.measured,
                "unsized": b.beyond.unsized,
                # the bound the heap part was measured at (null: the sizing's, at the exported bound, or the file's)
                "heap_bound": b.beyond.heap_bound,
                "parts": [{"what": p.what, "bytes": p.bytes, "basis": str(p.basis), "at_least": p.lower}
                          for p in b.beyond.parts]},
            # the heap measured at each bound the whole-app search tried (null: not measured beyond the sizing)
            "heap_search": None if b.heap is None else {
                "measured": [{"bound": m, "heap_peak": n} for m, n in b.heap.measured], "counted_at": b.heap.basis,
                "exact": b.heap.exact, "not_ruled_out_up_to": b.heap.upper, "stopped": b.heap.stopped,
                "xnnpack_tensors_resized": b.heap.xnnpack_resized,
                "falls": None if b.heap.falls is None else list(b.heap.falls)},
            **({"next": {"bound": b.bound + 1, "planned": b.next_planned, "heap_bound": b.next_heap[0],
                         "heap_peak": b.next_heap[1], "total": b.next_total}} if b.next_total is not None else {}),
            **({"need": b.need, "covers_need": b.covers_need, "need_share": b.need_share,
                "options": [{"findings": list(o.kinds), "planner": str(o.planner), "planned": o.planned,
                             "fits": o.fits, "prediction": True} for o in b.options]} if b.need is not None else {}),
            "curve": [{"bound": n, "planned": p, "lower_bound": lb} for n, p, lb in b.curve],
            "at": b.at.to_dict() if b.at is not None else None}


def usage_text(u) -> str:
    """One call's bytes against the plan for its shape and the plan at the bound, then the tensors that
    the bound's plan sizes largest (of equal ones, the larger at this shape first), with their bytes at this
    shape."""
    top = sorted(u.tensors, key=lambda r: (-r[4], -r[3], r[0]))[:TOP_TENSORS]
    out = [
        f"{u.method} run at {_where(u.keys, u.point)}",
        f"sum of the planned tensors' bytes at this shape: {exact_bytes(u.used)}, each storage counted once over "
        f"the whole call (per tensor: .tensors); they are not all alive at once, so it is more than any plan "
        f"needs",
        f"at most at once (lower_bound, no plan can be smaller): {exact_bytes(u.lower_bound)}",
        f"a plan made for this shape (ExecuTorch's greedy) needs {exact_bytes(u.plan_for_shape)}",
        f"the plan at the bound, allocated whole whatever the shape: {exact_bytes(u.planned_at_bound)}, "
        f"{human_bytes(u.gap)} more than this shape needs",
        (f"the {len(top)} of {len(u.tensors):,} planned tensors with the most bytes planned at the bound (the JSON "
         f"lists every one), with their bytes at this shape:" if len(top) < len(u.tensors) else
         f"the {len(top)} planned tensors, the most bytes planned at the bound first, with their bytes at this "
         f"shape:"),
        text_table(["value", "role", "shape run at", "bytes at this shape", "planned at the bound"],
                   [[f"v{v}", role, short_shape(shape), f"{used:,}", f"{bound:,}"]
                    for v, role, shape, used, bound in top]),
    ]
    return "\n".join(out)


def usage_dict(u) -> dict:
    return {"method": u.method, "point": [{"input": k[0], "axis": k[1], "size": n} for k, n in zip(u.keys, u.point)],
            "used": u.used, "plan_for_shape": u.plan_for_shape, "lower_bound": u.lower_bound,
            "planned_at_bound": u.planned_at_bound, "gap": u.gap,
            "tensors": [{"value": v, "role": r, "shape": list(s), "used": n, "planned_at_bound": b}
                        for v, r, s, n, b in u.tensors]}
