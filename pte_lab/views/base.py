"""What every view frames its content in, importing nothing of the model or the runtime (a kept answer is shown
with these alone): :func:`text_table`, the plain-text table, and :func:`html_repr`, the one way HTML leaves
pte_lab (:mod:`pte_lab.views.html` says how its rich view and its text fallback take turns); and the words
views of the file and of a what-if share (:func:`delegate_heap_note`)."""

from __future__ import annotations

from functools import cache
from html import escape
from importlib.resources import files

from ..model.backends import registration
from ..printable import printable

__all__ = ["text_table", "html_repr", "delegate_heap_note", "backend_note_line"]


def _numeric(cell: str) -> bool:
    """Right-aligned: a number, signed or not (``4,096``, ``+36 KiB``, ``-12.5%``)."""
    return cell[:1].isdigit() or (cell[:1] in "+-" and cell[1:2].isdigit())


def text_table(headers: list[str], rows: list[list[str]]) -> str:
    """A plain-text table: a header, a rule, and the rows (numbers right-aligned, every cell on one line)."""
    rows = [[printable(c) for c in r] for r in rows]  # a name from the file is one cell on one line
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    for r in rows:
        out.append("  ".join(c.rjust(w) if _numeric(c) else c.ljust(w) for c, w in zip(r, widths)))
    # no trailing blanks: a long last cell (a verdict) would pad every other row out to its width
    return "\n".join(x.rstrip() for x in out)


@cache
def _css() -> str:
    return files("pte_lab.views").joinpath("static/pte_lab.css").read_text(encoding="utf-8")


def html_repr(body: str, fallback: str) -> str:
    """The one way HTML leaves pte_lab: ``body`` (rich HTML) and ``fallback`` (its plain text), of which
    exactly one shows, with styles or without them (:mod:`pte_lab.views.html`'s docstring says how)."""
    return (f"<div><style>{_css()}</style>"
            f"<pre class='pte-text-fallback'>{escape(fallback)}</pre>"
            f"<div class='pte-wrap' style='display:none'>{body}</div></div>")


def delegate_heap_note(backends, not_here=()) -> str:
    """What the plan leaves out for a method that calls ``backends``: their own memory, in the heap;
    ``not_here``: the backends pte_lab cannot run on this host (``pte-lab sizes`` does not measure them)."""
    regs = [registration(b) for b in backends]
    # backends whose own memory is named (XNNPACK's packed weights and workspaces), first, each once
    said = list({r.id: r for r in regs if r.own_memory is not None}.values())
    parts = [r.own_memory or "" for r in said] + [f"what {r.id} allocates for itself" for r in regs
                                                  if r.own_memory is None]
    verb = "live" if said or len(parts) > 1 else "lives"
    measured = " and ".join(f"{r.user_name}'s" for r in said)
    if not not_here:
        return (f"the plan leaves out the delegate's own memory: {' and '.join(parts)} {verb} in the heap, outside "
                f"the planned arenas; `pte-lab sizes FILE` measures them")
    return (f"the plan leaves out the delegate's own memory: {' and '.join(parts)} {verb} in the heap or the "
            f"accelerator's memory, outside the planned arenas; "
            + (f"`pte-lab sizes FILE` measures {measured}; " if said else "")
            + _not_here_words([registration(b) for b in not_here]))


def _not_here_words(regs) -> str:
    """What is said of backends pte_lab cannot run on this host: those with a stand-in run here as it (their pools
    sized, nothing computed), the others not at all; what each allocates inside is measured on the device."""
    stood = [r.id for r in regs if r.stand_in is not None]
    rest = [r.id for r in regs if r.stand_in is None]
    said = []
    if stood:
        said.append(f"{' and '.join(stood)} run{'s' if len(stood) == 1 else ''} here only as pte_lab's stand-in "
                    f"(`pte-lab sizes FILE` sizes the pools with it; it computes nothing)")
    if rest:
        said.append(f"{' and '.join(rest)} cannot run here")
    return "; ".join(said) + ": measure what it allocates inside on the device (its backend line says how)"


def backend_note_line(note) -> str:
    """One backend's line (a ``pte_lab.model.backends.BackendNote``): what is known of its memory, what is not,
    and how to measure that."""
    return (f"{note.backend} ({note.name}): known: the planned arenas and {note.known}; not known: {note.unknown}; "
            f"measure: {note.measure}")
