"""Pictures of memory with matplotlib, with seaborn's conventions.

Axes-level functions (:func:`arena_layout`, :func:`occupancy`, :func:`placement`,
:func:`file_layout`, :func:`run_memory`, :func:`diff_bars`, :func:`by_module`) draw on ``ax``, else on the current
Axes (``plt.gca()``) where a figure is open, else on a new figure sized for the picture; they take
their options by keyword, pass other keywords on to the matplotlib call that draws the data (named
in each docstring), and return that one Axes. Figure-level functions (:func:`arena_layouts`,
:func:`layout_pair`, :func:`diff`) make their own panels and return the matplotlib ``Figure``
(``fig.axes`` holds the panels).
Tensors are drawn with one collection per call, not one patch each, so a
method with thousands of tensors draws in well under a second. Colours come
from the Okabe-Ito palette (safe for colour-blind readers); byte axes use
binary units.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, NamedTuple
from collections.abc import Sequence

import numpy as np

from .model.backends import XNNPACK
from .model.diff import Change
from .model.load_cost import LOADERS
from .model.modules import NO_MODULE
from .runtime.sizing import PARTS
from .units import PEAK_LIVE, SIZE_OVER_PEAK, delta_bytes, growth, human_bytes, ratio, tick_bytes
from .vocabulary import MemoryPart, Region, Role

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

    from matplotlib.figure import Figure

    from .model import Method, Pte
    from .model.diff import Diff

#: Okabe & Ito's colour-blind-safe palette (black left out)
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999"]
ROLE_COLORS = {
    Role.INPUT: "#0072B2", Role.OUTPUT: "#D55E00", Role.INPUT_OUTPUT: "#CC79A7", Role.INTERMEDIATE: "#56B4E9",
    Role.MUTABLE_BUFFER: "#009E73", Role.VIEW: "#F0E442", Role.UNUSED: "#999999",
}
#: for more categories than PALETTE holds (operators): matplotlib's tab20 without its greys
WIDE_PALETTE = ["#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a", "#d62728", "#ff9896",
                "#9467bd", "#c5b0d5", "#8c564b", "#c49c94", "#e377c2", "#f7b6d2", "#bcbd22", "#dbdb8d",
                "#17becf", "#9edae5"]
#: the colour of the categories past the palette's end, listed together in the legend
OTHERS = "#BBBBBB"
PLACE_COLORS = {"shared host arenas": "#56B4E9", "private host arenas": "#0072B2"}
#: an arena the file tags for a device, placed on the host by the loader: the bug the fix removed
MISPLACED = "#D55E00"
DEVICE_COLORS = ["#D55E00", "#E69F00", "#CC79A7", "#009E73"]
#: every legend's font size (points): readable beside the 10-point titles (7 was too small on the site)
LEGEND_SIZE = 9


def _plt():
    import matplotlib.pyplot as plt

    return plt


def _axes(ax, figsize: tuple[float, float]) -> "Axes":
    """``ax``; else the current Axes where a figure is open (seaborn's ``plt.gca()``); else a new figure of
    ``figsize`` (the size the picture was designed for, not matplotlib's default)."""
    if ax is not None:
        return ax
    plt = _plt()
    if plt.get_fignums():
        return plt.gca()
    return plt.subplots(figsize=figsize, layout="constrained")[1]


def bytes_axis(axis, top: float, ticks: int | None = None, signed: bool = False) -> None:
    """Ticks at multiples of a power of two (4 KiB, 8 MiB...) labelled in binary units.

    ``ticks`` caps how many there are (a horizontal axis has room for fewer labels);
    ``signed`` labels negative ticks too (bytes returned), else they are left blank. Sets ``axis`` (a
    matplotlib axis) in place and returns None; raises nothing of its own.
    """
    from matplotlib.ticker import FuncFormatter, MultipleLocator

    if ticks is None:
        step = 2.0 ** max(0, int(np.floor(np.log2(max(top, 1) / 5))))
    else:
        step = 2.0 ** max(0, int(np.ceil(np.log2(max(top, 1) / ticks))))
    axis.set_major_locator(MultipleLocator(step))
    axis.set_major_formatter(FuncFormatter(
        lambda v, _: tick_bytes(int(v)) if v >= 0 else ("−" + tick_bytes(int(-v)) if signed else "")))


def _categories(values: Sequence[str], fixed: dict[str, str] | None = None) -> dict[str, str]:
    """One colour per category, never reused: PALETTE for up to 8 categories, WIDE_PALETTE for up to
    18; past that, the most frequent keep their colours and the rest share :data:`OTHERS`."""
    if fixed:
        return {v: fixed.get(v, OTHERS) for v in dict.fromkeys(values)}
    counts = Counter(values)
    distinct = list(dict.fromkeys(values))
    palette = PALETTE if len(distinct) <= len(PALETTE) else WIDE_PALETTE
    keep = set(sorted(distinct, key=lambda v: -counts[v])[:len(palette)])
    out: dict[str, str] = {}
    for v in distinct:
        out[v] = palette[len([k for k in out if out[k] != OTHERS])] if v in keep else OTHERS
    return out


def _legend_handles(colors: dict[str, str]) -> list:
    """Legend entries for :func:`_categories`' colours: one per colour, the shared grey says how many."""
    from matplotlib.patches import Patch

    own = [Patch(color=c, label=k) for k, c in colors.items() if c != OTHERS]
    rest = [k for k, c in colors.items() if c == OTHERS]
    if rest:
        own.append(Patch(color=OTHERS, label=rest[0] if len(rest) == 1 else f"{len(rest)} others"))
    return own


def tensor_rects(method: "Method", mem_id: int) -> tuple[list, np.ndarray]:
    """(tensors, vertices): one rectangle per planned tensor of the arena over its lifetime.

    Returns the planned tensors of arena ``mem_id`` and a ``(n, 4, 2)`` array of their corners (x:
    instructions, y: bytes); an arena without tensors gives empty ones. Raises nothing of its own."""
    ts = [t for t in method.planned if t.mem_id == mem_id and t.first is not None and t.last is not None]
    if not ts:
        return ts, np.zeros((0, 4, 2))
    x0 = np.array([t.first for t in ts], float) - 0.45
    x1 = np.array([t.last for t in ts], float) + 0.45
    y0 = np.array([t.offset for t in ts], float)
    y1 = y0 + np.array([max(t.nbytes, 1) for t in ts], float)
    verts = np.stack([np.stack([x0, y0], 1), np.stack([x1, y0], 1), np.stack([x1, y1], 1),
                      np.stack([x0, y1], 1)], 1)
    return ts, verts


def _module_keys(method: "Method", ts) -> list[str]:
    """Each tensor's module (a view's: its base's), cut to the deepest level of the path that still fits the palette (``blocks.0`` when
    ``blocks.0.fc1``, ``blocks.0.fc2``... are too many); raises NoModulesError (what to pass) without an ETRecord."""
    owner = method.modules.owner
    paths = [owner.get(method.storage_of(t.value) if t.role == Role.VIEW else t.value, NO_MODULE) for t in ts]
    split = [p.split(".") if p and not p.startswith("(") else [p or "(root)"] for p in paths]
    deepest = max((len(p) for p in split), default=1)
    for depth in range(deepest, 0, -1):
        keys = [".".join(p[:depth]) for p in split]
        if len(set(keys)) <= len(PALETTE) or depth == 1:
            return keys
    return paths


def _color_key(t, color_by: str) -> str:
    if color_by == "role":
        return t.role
    if color_by == "operator":
        if t.role == Role.VIEW:
            return "(view: its base's bytes)"
        return t.op or "(input / state)"
    if color_by == "device":
        return t.device
    raise ValueError(f"color_by must be 'role', 'operator', 'device' or 'module', not {color_by!r}")


def _one_arena(method: "Method", mem_id: int | None):
    if mem_id is not None:
        return method.arena(mem_id)
    arenas = method.arenas
    if len(arenas) == 1:
        return arenas[0]
    if not arenas:
        raise ValueError(f"method {method.name!r} has no planned arenas")
    raise ValueError(f"method {method.name!r} has {len(arenas)} arenas (mem_id "
                     f"{', '.join(str(a.mem_id) for a in arenas)}): pass mem_id, or draw them all with "
                     f"plot.arena_layouts(method)")


def arena_layout(method: "Method", mem_id: int | None = None, *, ax: "Axes | None" = None,
                 color_by: str = "role", legend: bool = True, **kwargs) -> "Axes":
    """Where each planned tensor of one arena sits (y, bytes) and when it is alive (x, instructions).

    One rectangle per tensor; the arena size is the solid line, the peak of
    live bytes (the lower bound for any plan) the dashed one, drawn on top (where the two are equal, the
    dashes lie on the solid line and the legend says "= arena size"). ``color_by``: ``"role"``, ``"operator"``,
    ``"device"`` or ``"module"`` (with an ETRecord: the module writing each tensor, at the deepest level of
    the path that the palette tells apart). ``mem_id`` may be
    left out when the method has a single arena; :func:`arena_layouts` draws
    every arena. Other keywords go to the tensors' ``PolyCollection`` (``alpha``, ``edgecolors``...).
    Returns the Axes.

    Raises ``ValueError`` when ``mem_id`` is left out and the method has no arena or several, ``KeyError``
    for a ``mem_id`` it lacks. Example: ``plot.arena_layout(pte.methods["forward"], mem_id=1)``.
    """
    from matplotlib.collections import PolyCollection

    a = _one_arena(method, mem_id)
    ax = _axes(ax, (9, 3.6))
    ts, verts = tensor_rects(method, a.mem_id)
    keys = _module_keys(method, ts) if color_by == "module" else [_color_key(t, color_by) for t in ts]
    colors = _categories(keys, ROLE_COLORS if color_by == "role" else None)
    coll = PolyCollection(verts, **{"facecolors": [colors[k] for k in keys], "edgecolors": "white",
                                    "linewidths": 0.3 if len(ts) < 500 else 0.0, "alpha": 0.9, **kwargs})
    coll.set_gid("tensors")
    ax.add_collection(coll)
    _label_tensors(ax, ts, verts, max(a.size, a.peak_bytes, 1))
    _size_and_peak_lines(ax, a, size_color=SIZE_LINE, peak_color=PEAK_LINE)
    n = method.n_instructions
    right = n + 0.5
    top = max(a.size, a.peak_bytes, 1)
    padding = method.tail_padding(a.mem_id)
    waste = method.waste(a.mem_id)
    notes = []  # what the arena holds beyond peak live, said in the legend when too thin to draw
    if waste > 0 and waste >= 0.03 * top:  # what the plan spends beyond the bound, as a bracket
        room = max(2.4, 0.16 * (n + 2))
        x = right + 0.15 * room
        ax.annotate("", (x, a.peak_bytes + waste), (x, a.peak_bytes),
                    arrowprops=dict(arrowstyle="<->", color="#333333", lw=0.8, shrinkA=0, shrinkB=0))
        ax.annotate(f"waste\n{human_bytes(waste)}", (x + 0.25 * room, a.peak_bytes + waste / 2),
                    va="center", fontsize=7)
        notes.append(f"waste: room above {PEAK_LIVE}")
        right += room
    elif waste > 0:
        notes.append(f"+ waste {human_bytes(waste)} above {PEAK_LIVE}")
    if padding:
        who = f"an {XNNPACK.name} delegate" if any(d.backend == XNNPACK.id for d in method.delegates) else "a delegate"
        notes.append(f"+ {human_bytes(padding)} past the last tensor:\n   exir's padding of every arena of a method\n"
                     f"   with {who} (the planner's, not the plan's waste)")
    ax.set_xlim(-1.5, right)
    ax.set_ylim(0, top * 1.04)
    bytes_axis(ax.yaxis, top)
    _instruction_axis(ax.xaxis)
    ax.set_xlabel("instruction (-1: inputs written, N: outputs read)")
    ax.set_ylabel("offset in arena")
    eff = "" if a.size_over_peak is None else f", {SIZE_OVER_PEAK} {ratio(a.size_over_peak, times='×')}"
    ax.set_title(f"{method.name} · arena {a.mem_id} (runtime {a.runtime_index}) on {a.device}{eff}", fontsize=10)
    if legend:
        from matplotlib.lines import Line2D

        handles = _legend_handles(colors) + ax.get_legend_handles_labels()[0]
        handles += [Line2D([], [], ls="none", label=note) for note in notes]
        ax.legend(handles=handles, fontsize=LEGEND_SIZE, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return ax


#: an arena's size: a wide pale solid line, under the tensors (it does not cover a tensor's top bytes: its upper
#: half shows above them); its peak live bytes: narrow dark dashes drawn on top of everything, so where the two
#: are equal (a plan as small as any can be) the dashes show on the solid line instead of hiding under it
SIZE_LINE, PEAK_LINE = "#777777", "#000000"


def _size_and_peak_lines(ax, a, *, size_color: str, peak_color: str, arena: str = "") -> None:
    """Arena ``a``'s size (solid) and peak live bytes (dashed, on top); ``arena`` starts each label ("arena 2 ")
    where a panel holds several arenas. The legend says "= arena size" when the two are equal (both lines at
    one height)."""
    ax.axhline(a.size, color=size_color, lw=3.0, alpha=0.5, zorder=0.9, solid_capstyle="butt",
               label=f"{arena or 'arena '}size {human_bytes(a.size)}")
    if a.peak_bytes:
        same = " = arena size" if a.peak_bytes == a.size else ""
        ax.axhline(a.peak_bytes, color=peak_color, lw=1.1, ls=(0, (4, 3)), zorder=2.5,
                   label=f"{arena}{PEAK_LIVE}{same} {human_bytes(a.peak_bytes)}: no plan can be smaller")


def _instruction_axis(axis) -> None:
    """Instructions are counted: whole-number ticks only (a one-instruction program gets no -0.5)."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def _delegates_not_shown(ax, method: "Method") -> None:
    """Say on the panel that the method's delegates' own memory is not in the picture (the planned arena only)."""
    backends = list(dict.fromkeys(d.backend for d in method.delegates))
    if backends:
        ax.text(0.99, 0.02, f"not shown: the delegates' own memory ({', '.join(backends)}; outside the plan)",
                transform=ax.transAxes, ha="right", va="bottom", fontsize=7, color="#555555", gid="not-shown")


#: a tensor is named on its rectangle when the arena has at most this many and the rectangle is at least this
#: tall (a share of the byte axis drawn) and this wide (instructions): two tensors of one colour side by side
#: (two inputs) read as two, and a crowded arena is not covered in text. A rectangle at least SMALL_NAMED_HEIGHT
#: tall gets a smaller font (a 2 KiB tensor on the 60 KiB scale two plans share)
MAX_NAMED, NAMED_HEIGHT, SMALL_NAMED_HEIGHT, NAMED_WIDTH = 40, 0.07, 0.03, 0.9


def _label_tensors(ax, ts, verts, top: int) -> None:
    """Each rectangle big enough for it gets its value's number (``v3``: the ``value`` column of the tables),
    judged on the byte axis as drawn (``top``); names drawn before on ``ax`` (at another scale) are replaced."""
    for old in [t for t in ax.texts if t.get_gid() == "tensor name"]:
        old.remove()
    if len(ts) > MAX_NAMED:
        return
    for t, v in zip(ts, verts):
        (x0, y0), (x1, _), (_, y1) = v[0], v[1], v[2]
        if y1 - y0 >= SMALL_NAMED_HEIGHT * top and x1 - x0 >= NAMED_WIDTH:
            ax.text((x0 + x1) / 2, (y0 + y1) / 2, f"v{t.value}", ha="center", va="center", color="white",
                    fontsize=7 if y1 - y0 >= NAMED_HEIGHT * top else 6, clip_on=True, gid="tensor name")


def arena_layouts(method: "Method", *, color_by: str = "role", legend: bool = True, **kwargs) -> "Figure":
    """Figure-level :func:`arena_layout`: one panel per arena of ``method``, stacked (other keywords go to
    each panel's :func:`arena_layout`); returns the Figure.

    Raises ``ValueError`` for a method without planned arenas."""
    arenas = method.arenas
    if not arenas:
        raise ValueError(f"method {method.name!r} has no planned arenas")
    fig, axes = _plt().subplots(len(arenas), 1, figsize=(9, 3.2 * len(arenas)), squeeze=False,
                                layout="constrained")
    for ax, a in zip(axes[:, 0], arenas):
        arena_layout(method, a.mem_id, ax=ax, color_by=color_by, legend=legend, **kwargs)
    return fig


def occupancy(method: "Method", *, ax: "Axes | None" = None, **kwargs) -> "Axes":
    """Occupied bytes per instruction for each arena, against its size. Other keywords go to each arena's
    curve (``Axes.step``: ``lw``, ``alpha``...).

    Returns the Axes (a curve per arena; its size a solid line, its peak live bytes dashed on top). Raises
    nothing of its own."""
    ax = _axes(ax, (9, 3.2))
    t = np.arange(-1, method.n_instructions + 1)
    for i, a in enumerate(method.arenas):
        color = DEVICE_COLORS[i % len(DEVICE_COLORS)] if a.device != "cpu" else PALETTE[i % len(PALETTE)]
        occ = method.occupancy(a.mem_id)
        # the curve on top, its area shaded: at its peak it touches the peak line and must still show
        ax.fill_between(t, occ, step="mid", color=color, alpha=0.15, lw=0, zorder=1)
        ax.step(t, occ, **{"where": "mid", "color": color, "lw": 1.8, "zorder": 3,
                           "label": f"arena {a.mem_id} ({a.device}) live bytes", **kwargs})
        _size_and_peak_lines(ax, a, size_color=color, peak_color=color, arena=f"arena {a.mem_id} ")
    top = max([a.size for a in method.arenas] + [1])
    ax.set_ylim(0, top * 1.05)
    ax.set_xlim(-1.5, method.n_instructions + 0.5)  # from the inputs written (-1) to the outputs read (N), no further
    bytes_axis(ax.yaxis, top)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # instructions are whole numbers
    ax.set_xlabel("instruction (-1: inputs written, N: outputs read)")
    ax.set_ylabel("bytes")
    ax.set_title(f"{method.name} · bytes alive per instruction", fontsize=10)
    ax.legend(fontsize=LEGEND_SIZE, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return ax


#: what :func:`by_module` can size the modules by: bytes that add up from a module's children to it
MODULE_VALUES = {"peak_bytes": "bytes alive at the peak", "constant_bytes": "constants (weights) in the program",
                 "named_data_bytes": "named data its calls read", "weight_bytes": "weights: constants and named data",
                 "delegate_bytes": "delegate blobs"}


def by_module(method: "Method", *, ax: "Axes | None" = None, value: str = "peak_bytes", max_depth: int | None = None,
              **kwargs) -> "Axes":
    """Memory by module as an icicle: one row per level of the module hierarchy (the root on top), each module
    as wide as its bytes, inside its parent's span; what a parent holds beyond its children is its own.

    ``value`` is one of :data:`MODULE_VALUES` (``"peak_bytes"``: the bytes alive at the peak that
    :attr:`Method.peak` explains); ``max_depth`` cuts the hierarchy. Other keywords go to the modules'
    ``Axes.barh``. Returns the Axes. Raises :class:`~pte_lab.model.modules.NoModulesError` without an
    ETRecord (the message says what to pass), ``ValueError`` for another ``value``.
    Example: ``plot.by_module(pte_lab.open("model.pte", etrecord="model.etrecord").methods["forward"])``."""
    if value not in MODULE_VALUES:
        raise ValueError(f"value must be one of {', '.join(MODULE_VALUES)}, not {value!r}")
    table = method.modules

    def size(r) -> int:
        return r.constant_bytes + r.named_data_bytes if value == "weight_bytes" else getattr(r, value)

    rows = [r for r in table.rows if size(r) > 0 and (max_depth is None or r.depth <= max_depth)]
    tops = [r for r in rows if r.parent is None]
    ax = _axes(ax, (10, 1.0 + 0.6 * (1 + max((r.depth for r in rows), default=0))))
    left: dict[str, float] = {}  # module -> where its next child starts
    start: dict[str, float] = {}
    x = 0.0
    for r in tops:
        start[r.module] = left[r.module] = x
        x += size(r)
    total = x
    # the first level where the hierarchy branches sets the colours (the levels above and the rows outside the
    # model are grey): each module takes its ancestor's colour at that level
    depths: dict[int, int] = {}
    for r in rows:
        if r.depth >= 1:
            depths[r.depth] = depths.get(r.depth, 0) + 1
    level = min((d for d, k in depths.items() if k > 1), default=min(depths, default=1))
    firsts = [r.module for r in rows if r.depth == level]
    colors = dict(zip(firsts, (PALETTE + WIDE_PALETTE)[:len(firsts)]))
    xs, ws, ys, cs, labels = [], [], [], [], []
    for r in rows:  # parents come before their children
        if r.parent is not None:
            if r.parent not in left:
                continue
            start[r.module] = left[r.module] = left[r.parent]
            left[r.parent] += size(r)
        head = ".".join(r.module.split(".")[:level]) if r.depth >= level else None
        xs.append(start[r.module])
        ws.append(size(r))
        ys.append(r.depth)
        cs.append(colors.get(head, OTHERS) if head is not None and not r.module.startswith("(") else "#DDDDDD")
        labels.append(r)
    px = ax.bbox.width  # the Axes' width in pixels: how much label a bar has room for
    ax.barh(ys, ws, left=xs, **{"height": 0.92, "color": cs, "edgecolor": "white", "linewidth": 0.6, **kwargs})
    for x0, w, y, r in zip(xs, ws, ys, labels):
        parts = r.module.split(".")
        # the last part of the path, with its list's name for an index (``blocks.0``, not ``0``)
        name = (r.module or "root") if r.module.startswith("(") or r.depth < 2 else (
            ".".join(parts[-2:]) if parts[-1].isdigit() else parts[-1])
        room = w / max(total, 1) * px / 5.4  # characters of 7-point text that fit the bar
        amount = human_bytes(size(r))
        typed = f"{name} ({r.module_type})" if r.module_type else name
        text = next((t for t in (typed, name) if len(t) <= room), None)
        if text is not None and len(amount) <= room:
            ax.annotate(f"{text}\n{amount}", (x0 + w / 2, y), ha="center", va="center", fontsize=7)
    ax.set_ylim(max(ys, default=0) + 0.6, -0.6)
    ax.set_xlim(0, max(total, 1))
    bytes_axis(ax.xaxis, max(total, 1), ticks=6)
    ax.set_yticks(range(0, max(ys, default=0) + 1), ["model" if d == 0 else f"depth {d}"
                                                      for d in range(0, max(ys, default=0) + 1)], fontsize=8)
    ax.set_xlabel(MODULE_VALUES[value])
    at = "" if value != "peak_bytes" or table.peak_at is None else (
        f" at instruction {table.peak_at} (arena {table.peak_mem_id})")
    ax.set_title(f"{method.name} · {MODULE_VALUES[value]}{at}, by module: {human_bytes(int(total))}", fontsize=10)
    return ax


class PlacementRow(NamedTuple):
    """One planned-arena allocation as the placement picture draws it."""

    #: "shared arenas", or the method whose own arenas these are
    bar: str
    #: "shared host arenas", "private host arenas", a device, or "<device> arena on the host"
    category: str
    bytes: int
    #: the loader step that allocates it
    step: str
    #: an arena the file tags for a device that the loader places in host memory
    misplaced: bool


def placement_table(pte: "Pte", loader: str = "corrected") -> list[PlacementRow]:
    """The shared arenas as one bar, each method's own arenas as another.

    Categories: "shared host arenas", "private host arenas", one per device, and
    "<device> arena on the host" for an arena the file tags for a device that the
    loader places in host memory (the legacy loader's bug: the method then crashes
    at execute). Their sum is the load-cost model's total for ``loader``.

    Returns a list of :class:`PlacementRow` (what :func:`placement` draws). Raises ``ValueError`` for an
    unknown ``loader``.
    """
    tagged = {(m.name, a.mem_id): a.device for m in pte.methods.values() for a in m.arenas}
    rows = []
    for r in pte.allocations(loader):
        if r.sharing == "shared":
            bar, cat = "shared arenas", "shared host arenas"
        else:
            bar = r.method
            cat = "private host arenas" if r.device == "cpu" else r.device
        wanted = sorted({tagged.get((u, r.mem_id), "cpu") for u in (r.used_by or (r.method,))} - {"cpu"})
        misplaced = r.device == "cpu" and bool(wanted)
        if misplaced:
            cat = f"{wanted[0]} arena on the host"
        rows.append(PlacementRow(bar, cat, r.bytes, r.step, misplaced))
    return rows


def placement(pte: "Pte", loader="corrected", *, ax: "Axes | None" = None, **kwargs) -> "Axes":
    """Where planned bytes live under a loader: stacked bars, the shared arenas and each method, each
    labelled with the loader step that allocates it.

    ``loader`` is one of "corrected", "legacy", "module", or a list of them
    (or "all") for the side-by-side comparison, one group of bars per loader.
    An arena tagged for a device but placed on the host is drawn hatched, as the
    bug it is; a device that gets nothing under a loader is marked "0 B on it". Other keywords go to
    ``Axes.bar``.

    Returns the Axes. Raises ``ValueError`` for an unknown loader. Example: ``plot.placement(pte, "all")``.
    """
    from matplotlib.patches import Patch


    loaders = list(LOADERS) if loader == "all" else ([loader] if isinstance(loader, str) else list(loader))
    devices = sorted({d for m in pte.methods.values() for d in m.devices})
    tables = {ld: placement_table(pte, ld) for ld in loaders}
    n_bars = sum(len({r[0] for r in rows}) or 1 for rows in tables.values())
    ax = _axes(ax, (min(9.5, max(5.0, 1.6 + 0.85 * n_bars)), 4.2))
    cats: dict[str, str] = {}
    misplaced: set[str] = set()
    x = 0.0
    ticks, labels, group_centres = [], [], []
    for ld in loaders:
        rows = tables[ld]
        bars = ["shared arenas"] + list(pte.methods)
        bars = [b for b in bars if any(r.bar == b for r in rows)] or bars[:1]
        start = x
        order = ["shared host arenas", "private host arenas"]
        for b in bars:
            bottom = 0
            mine = [r for r in rows if r.bar == b]
            for cat in order + sorted({r.category for r in rows} - set(order)):
                v = sum(r.bytes for r in mine if r.category == cat)
                if not v:
                    continue
                bug = any(r.misplaced for r in mine if r.category == cat)
                if bug:
                    misplaced.add(cat)
                if cat not in cats:
                    cats[cat] = PLACE_COLORS.get(cat) or (MISPLACED if bug else DEVICE_COLORS[
                        len([c for c in cats if c not in PLACE_COLORS and c not in misplaced]) % len(DEVICE_COLORS)])
                rect = ax.bar(x, v, **{"bottom": bottom, "width": 0.8, "color": "white" if bug else cats[cat],
                                       "edgecolor": cats[cat] if bug else "white", "hatch": "xx" if bug else None,
                                       "lw": 1.0, **kwargs})
                rect.patches[0].set_gid(f"{ld}|{b}|{cat}")
                bottom += v
            ticks.append(x)
            steps = sorted({r.step for r in mine})
            labels.append(f"{b}\n{', '.join(steps)}" if steps else b)
            x += 1
        empty = [d for d in devices if not any(r.category == d for r in rows)]
        group_centres.append(((start + x - 1) / 2, ld, empty))
        x += 0.8
    ax.set_xticks(ticks, labels, fontsize=7)
    pad = max(0.8, (4 - (ticks[-1] - ticks[0])) / 2)  # a lone bar is not drawn as wide as the figure
    ax.set_xlim(ticks[0] - pad, ticks[-1] + pad)
    top = max((p.get_y() + p.get_height() for p in ax.patches), default=1)
    ax.set_ylim(0, top * 1.18)  # room for the "0 B on <device>" marks
    bytes_axis(ax.yaxis, top)
    ax.set_ylabel("planned bytes allocated")
    for cx, ld, empty in group_centres:
        if len(loaders) > 1:
            ax.annotate(ld, (cx, 1.0), xycoords=("data", "axes fraction"), ha="center", va="bottom",
                        fontsize=9, fontweight="bold")
        if empty:  # say it: the device gets nothing under this loader
            ax.annotate("\n".join(f"0 B on {d}" for d in empty), (cx, top * 1.01), ha="center", va="bottom",
                        fontsize=8, color=MISPLACED, fontweight="bold")
    if len(loaders) > 1:
        ax.set_title("where planned arenas live, per loader", fontsize=10, pad=18)
    else:
        ax.set_title(f"where planned arenas live · loader {loaders[0]}", fontsize=10)
    handles = [Patch(facecolor="white" if k in misplaced else c, edgecolor=c if k in misplaced else "white",
                     hatch="xx" if k in misplaced else None, label=f"{k} (the bug)" if k in misplaced else k)
               for k, c in cats.items()]
    ax.legend(handles=handles, fontsize=LEGEND_SIZE, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.16),
              ncol=2)
    return ax


#: colours of the file's regions (Okabe-Ito)
REGION_COLORS = {
    Region.CONSTANT: "#0072B2", Region.INLINE_CONSTANT: "#56B4E9", Region.NAMED_DATA: "#009E73",
    Region.DELEGATE: "#E69F00", Region.INLINE_DELEGATE: "#F0E442", Region.MUTABLE_DATA: "#CC79A7",
    Region.FLATBUFFER: "#D55E00", Region.HEADER: "#999999", Region.PADDING: "#DDDDDD", Region.UNUSED_SEGMENT: "#000000",
}


def file_layout(pte: "Pte", *, ax: "Axes | None" = None, hashes: bool = True, **kwargs) -> "Axes":
    """Where the file's bytes go: one bar per region, longest first, with bytes and share of the file.

    Regions holding identical blobs stored twice get a hatched segment for the repeated bytes. Other
    keywords go to the regions' ``Axes.barh``.

    Returns the Axes. Raises nothing of its own (the file was read by :func:`pte_lab.open`).
    """
    df = pte.file_layout(hashes=hashes)
    total = int(df.bytes.sum())
    by = df.groupby("region").bytes.sum().sort_values()
    dup = df[df.duplicate_of.notna()].groupby("region").bytes.sum() if hashes else {}
    ax = _axes(ax, (8, 0.45 * len(by) + 1.2))
    y = np.arange(len(by))
    ax.barh(y, by.values, **{"color": [REGION_COLORS.get(r, "#999999") for r in by.index], "height": 0.7, **kwargs})
    for i, (region, v) in enumerate(by.items()):
        d = int(dup.get(region, 0)) if hashes else 0
        if d:
            ax.barh(i, d, left=v - d, height=0.7, color="none", edgecolor="black", hatch="///", lw=0.6,
                    label="identical bytes stored again" if "identical" not in ax.get_legend_handles_labels()[1]
                    else None)
        ax.annotate(f" {human_bytes(int(v))} ({100 * v / total:.1f}%)", (v, i), va="center", fontsize=8)
    ax.set_yticks(y, list(by.index), fontsize=9)
    ax.set_xlim(0, by.max() * 1.3)
    bytes_axis(ax.xaxis, by.max() * 1.3, ticks=5)
    ax.set_xlabel("bytes in the file")
    # the file's name, not the folder it was saved in (a notebook's is a temporary one)
    name = str(pte.path).replace("\\", "/").rsplit("/", 1)[-1] if pte.path else "program"
    ax.set_title(f"{name} · {human_bytes(total)}: where the bytes go", fontsize=10)
    if hashes and len(dup):
        ax.legend(fontsize=LEGEND_SIZE, frameon=False, loc="lower right")
    return ax


#: colours of the parts of a method's run-time memory, in the order of
#: :data:`pte_lab.runtime.sizing.PARTS` (Okabe-Ito; the plan in blues, beyond it warm)
PART_PALETTE = ("#0072B2", "#56B4E9", "#000000", "#009E73", "#F0E442", "#E69F00", "#D55E00", "#CC79A7", "#999999")


def _part_colors() -> dict[MemoryPart, str]:
    return dict(zip(PARTS, PART_PALETTE))


#: how a run-memory bar marks what was not measured: device arenas, and parts the file declares (a delegate's
#: scratch read from its blob)
DEVICE_HATCH, DECLARED_HATCH = "//", "xx"
DECLARED_SOURCE = "delegate blob"


def run_memory(sizes, *, ax: "Axes | None" = None, methods: Sequence[str] | None = None, **kwargs) -> "Axes":
    """Where each method's run-time memory goes: one stacked bar per method (a :func:`pte_lab.sizes`
    result), the plan first, then what lies beyond it; device arenas hatched ``//``, parts the file declares
    rather than a run measured (a delegate's scratch, from its blob) hatched ``xx``.

    The bar's end is annotated with its total on this host (heap and resident pages are this host's), how
    many times the plan it is, and apart from it the method's total on a bare-metal board (planned buffers,
    pools, the program's bytes where they must be in RAM: no page cache, no host heap). A method measured with
    stand-ins (a backend or kernels the wheel lacks) says so in its label; one that could not run shows what
    the file declares, labelled "not measured". Other keywords go to ``Axes.barh``.

    Returns the Axes. Raises nothing of its own. Example: ``plot.run_memory(pte_lab.sizes("model.pte"))``.
    """
    from matplotlib.patches import Patch

    colors = _part_colors()
    table = sizes.table()
    names = list(methods) if methods is not None else list(dict.fromkeys(table.method))
    ax = _axes(ax, (8, 0.5 * len(names) + 1.6))
    seen: dict[tuple[str, str, bool], None] = {}  # (part, device, declared) in the order drawn
    top = 1
    for y, name in enumerate(names):
        left = 0
        rows = table[table.method == name]
        for part in colors:
            for _, r in rows[rows.part == part].iterrows():
                if not r.bytes:
                    continue
                declared = r.source == DECLARED_SOURCE
                ax.barh(y, r.bytes, **{"left": left, "height": 0.6, "color": colors[part], "edgecolor": "white",
                                       "lw": 0.5, "hatch": DECLARED_HATCH if declared else (
                                           DEVICE_HATCH if r.device != "cpu" else None), **kwargs})
                seen[(part, r.device, declared)] = None
                left += int(r.bytes)
        plan = int(rows[rows.part == MemoryPart.PLANNED_ARENAS].bytes.sum())
        mapped = int(rows[rows.part == MemoryPart.FILE_RESIDENT].bytes.sum())
        times = f", {left / plan:.1f}x the plan" if plan else ""
        # short lines: the note stays inside the axes, left of the legend (a long one ran over it)
        file_note = f"\n (of it {human_bytes(mapped)}: the file's pages\n  in this host's page cache)" if mapped else ""
        board = sizes.methods[name].totals()["bare-metal"] if name in getattr(sizes, "methods", {}) else None
        board_note = (f"\n a bare-metal board: {human_bytes(board.bytes)}\n ({board.configuration}; no page cache,\n"
                      f"  no host heap)" if board is not None else "")
        ax.annotate(f" {human_bytes(left)} on this host{times}{file_note}{board_note}", (left, y), va="center",
                    fontsize=8)
        top = max(top, left)
    labels = [f"{n}\n(stand-ins)" if n in sizes.methods and sizes.methods[n].stand_ins
              else (f"{n}\n(not measured)" if n in getattr(sizes, "declared", {}) else n) for n in names]
    ax.set_yticks(range(len(names)), labels, fontsize=9)
    ax.invert_yaxis()
    ax.set_xlim(0, top * 1.8)  # room for the totals
    bytes_axis(ax.xaxis, top * 1.8, ticks=5)
    ax.set_xlabel("bytes at run time (after the runs)")
    ax.set_title(f"{sizes.path.rsplit('/', 1)[-1]}: the plan and what lies beyond it", fontsize=10)
    order = list(colors)

    def label(part: str, dev: str, declared: bool) -> str:
        return (f"{part} ({dev})" if dev != "cpu" else part) + (" (declared in the blob)" if declared else "")

    handles = [Patch(facecolor=colors[part], edgecolor="white",
                     hatch=DECLARED_HATCH if declared else (DEVICE_HATCH if dev != "cpu" else None),
                     label=label(part, dev, declared))
               for part, dev, declared in sorted(seen, key=lambda k: (order.index(k[0]), k[1] != "cpu"))]
    ax.legend(handles=handles, fontsize=LEGEND_SIZE, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return ax


def layout_pair(a: "Method", b: "Method", mem_id: int = 1, *, axes=None,
                titles: tuple[str, str] = ("before", "after"), color_by: str = "role", sharex: bool = True,
                **kwargs) -> "Figure":
    """Figure-level: arena ``mem_id`` of two versions of a method, one above the other on one byte
    scale; returns the Figure (``axes``, two Axes to draw on, else a new figure's; other keywords go to
    each panel's :func:`arena_layout`).

    Each panel is an :func:`arena_layout` with its own legend (size, peak live, waste); the shared
    byte scale makes the difference in height the difference in bytes. ``sharex=False`` gives each
    panel its own instruction axis (two programs with different instruction streams). A side
    without that arena says so, and raises nothing.
    """
    if axes is None:
        _, axes = _plt().subplots(2, 1, figsize=(9, 7.6), sharex=sharex, sharey=True, layout="constrained")
    top, rights = 1, []
    for ax, m, title in zip(axes, (a, b), titles):
        try:
            arena = m.arena(mem_id)
        except KeyError:
            ax.text(0.5, 0.5, f"{m.name}: no arena {mem_id} here", transform=ax.transAxes, ha="center",
                    va="center", fontsize=9, color="#555555")
            ax.set_title(f"{title}: {m.name}", fontsize=9)
            continue
        arena_layout(m, mem_id, ax=ax, color_by=color_by, **kwargs)
        _delegates_not_shown(ax, m)
        ax.set_title(f"{title}: {ax.get_title()}", fontsize=9)
        top = max(top, arena.size, arena.peak_bytes)
        rights.append(ax.get_xlim()[1])  # room for a waste bracket, if the plan has one
    for ax, m in zip(axes, (a, b)):
        ax.set_ylim(0, top * 1.04)
        bytes_axis(ax.yaxis, top)
        if any(t.mem_id == mem_id for t in m.planned):  # named again on the shared scale: thin now, if smaller
            _label_tensors(ax, *tensor_rects(m, mem_id), top)
        if sharex and rights:
            ax.set_xlim(ax.get_xlim()[0], max(rights))
    if sharex and getattr(axes[0], "get_subplotspec", None) and axes[0].get_subplotspec() is not None:
        axes[0].set_xlabel("")
    return axes[0].get_figure(root=True)


#: the two sides of a diff's paired bars
DIFF_COLORS = ("#999999", "#0072B2")


def _diff_pairs(d: "Diff", parts: str) -> list[tuple[str, "Change"]]:
    """(label, change in bytes) for :func:`diff_bars`."""
    if parts == "arenas":
        rows = [(f"{name} · arena {a.mem_id} ({a.devices[1] or a.devices[0]})", a.size)
                for name, md in d.methods.items() for a in md.arenas]
        rows += [(f"{n} · arena {a.mem_id} ({a.device})", Change(a.size, None))
                 for n in d.removed for a in d.before.methods[n].arenas]
        rows += [(f"{n} · arena {a.mem_id} ({a.device})", Change(None, a.size))
                 for n in d.added for a in d.after.methods[n].arenas]
        return rows
    if parts == "sizes":
        if d.sizes is None:
            raise ValueError("this diff has no run-time sizes: pte_lab.diff(a, b, sizes=True) measures them")
        return [(f"{p.method} · {p.part}", p.bytes) for p in d.sizes.parts
                if p.bytes.before or p.bytes.after or p.unmeasured]
    if parts == "file":
        return [(r.region + (f" {r.name}" if r.name else ""), r.bytes) for r in d.regions
                if r.region != Region.PADDING or r.bytes.before or r.bytes.after]
    raise ValueError(f"parts must be 'arenas', 'sizes' or 'file', not {parts!r}")


def diff_bars(d: "Diff", parts: str = "arenas", *, ax: "Axes | None" = None, **kwargs) -> "Axes":
    """Paired bars, before (grey) and after (blue), per method and part, each labelled with its change.

    ``parts``: ``"arenas"`` (each planned arena of each method, methods only in one program
    included), ``"sizes"`` (each run-time part of each method, from ``pte_lab.diff(a, b, sizes=True)``)
    or ``"file"`` (where the file's bytes go). Other keywords go to ``Axes.barh``. Returns the Axes.

    Raises ``ValueError`` for another ``parts``, or ``"sizes"`` of a diff made without sizes.
    """
    from matplotlib.patches import Patch

    rows = _diff_pairs(d, parts)
    unmeasured = ({f"{p.method} · {p.part}": p.unmeasured for p in d.sizes.parts if p.unmeasured}
                  if parts == "sizes" and d.sizes is not None else {})
    ax = _axes(ax, (9, 0.55 * max(1, len(rows)) + 1.3))
    h = 0.38
    top = max([1] + [v for _, c in rows for v in (c.before, c.after) if v])
    for i, (label, c) in enumerate(rows):
        for k, v in enumerate((c.before, c.after)):
            if v is not None:
                bar = ax.barh(i + (k - 0.5) * h, v, **{"height": h, "color": DIFF_COLORS[k], "edgecolor": "white",
                                                       "lw": 0.5, **kwargs})
                bar.patches[0].set_gid(f"{label}|{('before', 'after')[k]}")
        missing = unmeasured.get(label)
        if missing:
            note = f" not measured ({missing} program)" if missing != "both" else " not measured"
        elif c.before is None or c.after is None:
            note = " only after" if c.before is None else " only before"
        elif c.changed:
            of = f" of {human_bytes(c.before)}" if c.before else ""
            note = f" {delta_bytes(c.delta)} ({growth(c.growth)}{of})"
        else:
            note = " unchanged"
        # right-aligned at the axes' right edge: however narrow a figure-level layout makes the axes, the label
        # stays inside it (to the right of the bars, which end by 60% of the width)
        ax.annotate(note.strip(), (0.995, i), xycoords=("axes fraction", "data"), ha="right", va="center",
                    fontsize=8, color="#D55E00" if c.delta > 0 and c.before is not None else "#333333")
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, top * 1.65)
    bytes_axis(ax.xaxis, top * 1.65, ticks=5)
    ax.set_xlabel({"arenas": "planned bytes", "sizes": "bytes at run time", "file": "bytes in the file"}[parts])
    a, b = _short_labels(d)
    what = {"arenas": "planned arenas", "sizes": "run-time memory", "file": "the file"}[parts]
    ax.set_title(f"{what}: {a} → {b}", fontsize=10)
    ax.legend(handles=[Patch(color=DIFF_COLORS[0], label=f"before ({a})"),
                       Patch(color=DIFF_COLORS[1], label=f"after ({b})")],
              fontsize=LEGEND_SIZE, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return ax


def _short_labels(d: "Diff") -> tuple[str, str]:
    """The two programs' file names; where the names are the same, each with as few of its folders as tell the
    two apart (``old/model.pte``, ``new/model.pte``), a long folder name cut to its start."""
    pa, pb = (lbl.split("/") for lbl in d.labels)
    for k in range(1, max(len(pa), len(pb)) + 1):
        a, b = "/".join(pa[-k:]), "/".join(pb[-k:])
        if a != b:
            break
    else:
        return d.labels
    if k == 1:
        return a, b

    def cut(parts):
        return "/".join((p if len(p) <= 12 else p[:8] + "…") for p in parts[:-1]) + "/" + parts[-1]

    return cut(pa[-k:]), cut(pb[-k:])


def _chosen(d: "Diff", method: str | None, mem_id: int | None):
    if method is None:
        if not d.methods:
            return None, None
        method = max(d.methods, key=lambda n: (abs(d.methods[n].planned_bytes.delta), -list(d.methods).index(n)))
    if method not in d.methods:
        raise KeyError(f"no method {method!r} in both programs (in both: {', '.join(d.methods) or 'none'})")
    md = d.methods[method]
    if mem_id is None:
        if not md.arenas:
            return method, None
        mem_id = max(md.arenas, key=lambda a: (abs(a.size.delta), abs(a.peak.delta), -a.mem_id)).mem_id
    md.arena(mem_id)
    return method, mem_id


def diff(d: "Diff", method: str | None = None, mem_id: int | None = None, *, parts: str | None = None,
         color_by: str = "role") -> "Figure":
    """Figure-level: what changed, as pictures. A panel of paired bars (:func:`diff_bars`: the
    planned arenas, or the run-time parts when the diff has sizes), then arena ``mem_id`` of
    ``method`` before and after (:func:`layout_pair`) on one byte scale.

    By default the method whose planned bytes changed most and its arena that changed most.
    Returns the Figure. Raises ``KeyError`` for a ``method`` not in both programs, ``ValueError`` as
    :func:`diff_bars` does. Example: ``plot.diff(pte_lab.diff("old.pte", "new.pte"))``.
    """
    parts = parts or ("sizes" if d.sizes is not None else "arenas")
    method, mem_id = _chosen(d, method, mem_id)
    n_rows = len(_diff_pairs(d, parts))
    bar_h = 0.5 * max(1, n_rows) + 1.3
    layouts = method is not None and mem_id is not None
    fig = _plt().figure(figsize=(9, bar_h + (6.4 if layouts else 0)), layout="constrained")
    if not layouts:
        diff_bars(d, parts, ax=fig.add_subplot(1, 1, 1))
        return fig
    top, bottom = fig.subfigures(2, 1, height_ratios=[bar_h, 6.4])
    diff_bars(d, parts, ax=top.add_subplot(1, 1, 1))
    md = d.methods[method]
    same_stream = md.instructions.before == md.instructions.after
    axes = bottom.subplots(2, 1, sharex=same_stream, sharey=True)
    a, b = _short_labels(d)
    layout_pair(d.before.methods[method], d.after.methods[method], mem_id, axes=axes,
                titles=(f"before ({a})", f"after ({b})"), color_by=color_by, sharex=same_stream)
    return fig


def what_if_curve(b, *, ax: "Axes | None" = None, **kwargs) -> "Axes":
    """Planned bytes against the export bound (a :class:`~pte_lab.planning.at_bound.BoundUnderBudget`):
    ExecuTorch's greedy as pte_lab predicts it and the lower bound, the budget dashed, the answer marked. Every
    point is a prediction from the shapes learnt at a few small sizes (no bound is re-exported here), and the
    legend says so. Other keywords go to the greedy curve (``Axes.plot``). Returns the Axes. Raises nothing of
    its own."""
    ax = _axes(ax, (7, 3.2))
    xs = [c[0] for c in b.curve]
    ax.plot(xs, [c[1] for c in b.curve], **{"color": PALETTE[0], "lw": 1.8,
                                            "label": "planned, predicted (ExecuTorch's greedy replayed)", **kwargs})
    ax.plot(xs, [c[2] for c in b.curve], color=PALETTE[1], lw=1.2, ls=(0, (5, 4)),
            label="lower bound (bytes alive at once)")
    ax.axhline(b.budget, color=MISPLACED, lw=0.9, ls=":", label=f"budget {human_bytes(b.budget)}")
    if b.bound is not None and b.at is not None:
        ax.plot([b.bound], [b.at.planned], "o", color=PALETTE[0], ms=5,
                label=f"largest bound under it: {b.bound:,}")
    top = max([c[1] for c in b.curve] + [b.budget, 1])
    ax.set_ylim(0, top * 1.05)
    bytes_axis(ax.yaxis, top)
    ax.set_xlabel(f"bound of input {b.key[0]}, axis {b.key[1]}")
    ax.set_ylabel("planned bytes")
    ax.set_title("planned bytes against the export bound", fontsize=10)
    ax.legend(fontsize=LEGEND_SIZE, frameon=False, loc="upper left")
    return ax
