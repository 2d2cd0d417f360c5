"""The explorer: an ipywidgets view of a program's memory (ipywidgets 8, offline, no extra extension).

``pte_lab.explore(path_or_pte)`` shows, per method and arena, the arena layout
with an instruction slider that highlights the tensors alive there and lists
them; picking one in the list shows its details. A second tab compares where
the three loaders put planned bytes; a third loads and runs the methods
through :func:`pte_lab.load` (optionally on the emulated device) in a
background thread, so the kernel is never blocked, and shows predicted vs
measured memory.

The layout is drawn once per arena with matplotlib's Agg canvas; a slider
step only restores that background and draws the highlighted tensors and the
instruction marker, which keeps a step fast on methods with thousands of
tensors.
"""

from __future__ import annotations

import io
import os
import threading
from html import escape

import ipywidgets as W
import numpy as np

from . import plot
from .arguments import NAME, PROGRAM, arguments, optional
from .errors import NotFoundError
from .model import Pte, open_pte
from .model.dtypes import short_shape
from .runtime import run_all
from .printable import printable
from .runtime.loaded import HOST_BYTES_NOTE
from .units import count, first_few, human_bytes
from .views.html import html_repr, key_values
from .vocabulary import Role, ViewOf

__all__ = ["explore", "Explorer"]


def _png(canvas) -> bytes:
    from PIL import Image as PILImage

    buf = np.asarray(canvas.buffer_rgba())
    out = io.BytesIO()
    PILImage.fromarray(buf[..., :3]).save(out, format="png", compress_level=1)
    return out.getvalue()


class _LayoutCanvas:
    """One arena's layout on an Agg canvas, with a cheap per-instruction overlay."""

    def __init__(self, method, mem_id: int, color_by: str, width_px: int = 860):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.collections import PolyCollection
        from matplotlib.figure import Figure


        dpi = 100
        self.fig = Figure(figsize=(width_px / dpi, 3.8), dpi=dpi, layout="constrained")
        self.canvas = FigureCanvasAgg(self.fig)
        ax = self.fig.add_subplot()
        plot.arena_layout(method, mem_id, ax=ax, color_by=color_by)
        self.tensors, self.verts = plot.tensor_rects(method, mem_id)
        self.first = np.array([t.first for t in self.tensors], dtype=np.int64)
        self.last = np.array([t.last for t in self.tensors], dtype=np.int64)
        self.canvas.draw()
        self.background = self.canvas.copy_from_bbox(self.fig.bbox)
        self.ax = ax
        self.live_coll = PolyCollection([], facecolors="none", edgecolors="black", linewidths=1.4, animated=True)
        # the picked tensor: darkened and outlined (yellow would read as a view, which is yellow now)
        self.pick_coll = PolyCollection([], facecolors="#000000", edgecolors="black", linewidths=2.0,
                                        alpha=0.45, animated=True)
        ax.add_collection(self.live_coll)
        ax.add_collection(self.pick_coll)
        self.marker = ax.axvline(-1, color="black", lw=1.0, ls="-", animated=True)

    def live(self, t: int) -> np.ndarray:
        return np.flatnonzero((self.first <= t) & (self.last >= t))

    def render(self, t: int, picked: int | None = None) -> bytes:
        idx = self.live(t)
        self.canvas.restore_region(self.background)
        self.live_coll.set_verts(self.verts[idx])
        self.pick_coll.set_verts(self.verts[[picked]] if picked is not None else [])
        self.marker.set_xdata([t, t])
        for art in (self.live_coll, self.pick_coll, self.marker):
            self.ax.draw_artist(art)
        self.canvas.blit(self.fig.bbox)
        return _png(self.canvas)


def _tensor_details(t, method=None) -> str:
    rows = [("value", t.value), ("role", t.role), ("dtype", t.dtype), ("shape", list(t.shape)),
            ("bytes", f"{t.nbytes:,} ({human_bytes(t.nbytes)})"), ("arena (mem_id)", t.mem_id),
            ("offset", f"{t.offset:,}"), ("device", t.device), ("alive", f"[{t.first}, {t.last}]"),
            ("produced by", "-" if t.producer is None else f"instruction {t.producer}: {t.op}")]
    if t.name:
        rows.append(("name", t.name))
    rows += source_rows(method, t)
    w = max(len(k) for k, _ in rows)
    return html_repr(f"<div class='pte-lab-details'><b>Tensor v{t.value}</b>{key_values(rows)}</div>",
                     "\n".join([f"Tensor v{t.value}"] + [f"  {k.ljust(w)}  {v}" for k, v in rows]))


def source_rows(method, t) -> list[tuple[str, str]]:
    """(what, text) for where a tensor comes from in the model, with an ETRecord: its node, module (a delegate
    output's: the module holding all it swallowed) and source line; [] without one."""
    if method is None or method.sources is None:
        return []
    src = method.source_of(t.value)
    owner = method.modules.owner.get(method.storage_of(t.value) if t.role == Role.VIEW else t.value)
    out = []
    if src is not None and src.node:
        out.append(("node", f"{src.node} ({src.op})" if src.op else src.node))
    if src is not None and src.module is not None:
        out.append(("module", f"{src.module or '(root)'} ({src.module_type})"))
    elif owner is not None:
        out.append(("module", owner or "(root)"))
    if src is not None and src.source is not None:
        out.append(("source", str(src.source)))
    return out


def hover_text(method, t) -> str:
    """One tensor in a line (the alive list's tooltip): value, shape, bytes, and its node, module and source."""
    return " · ".join([f"v{t.value} {t.dtype}{short_shape(t.shape)} {human_bytes(t.nbytes)}"]
                      + [f"{k} {v}" for k, v in source_rows(method, t)])


class Explorer(W.VBox):
    """The explorer widget; ``highlighted`` is the set of values alive at the slider's instruction."""

    def __init__(self, pte, method: str | None = None):
        self.pte = pte
        self._canvases: dict = {}
        self._written: dict[str, dict[int, list]] = {}
        names = list(pte.methods)
        if not names:
            raise ValueError("the program has no methods")
        if method is not None and method not in pte.methods:
            raise NotFoundError(f"no method {printable(method)!r}; the program has {first_few(names, 12)}")
        self.method_dd = W.Dropdown(options=names, value=method or names[0], description="method")
        self.arena_dd = W.Dropdown(description="arena")
        colours = ["role", "operator", "device"] + (["module"] if pte.etrecord is not None else [])
        self.color_dd = W.Dropdown(options=colours, value="role", description="colour by")
        self.slider = W.IntSlider(min=-1, max=0, value=-1, description="instruction", continuous_update=True,
                                  layout=W.Layout(width="860px"))
        self.image = W.Image(format="png", layout=W.Layout(width="860px"))
        self.status = W.HTML()
        self.live_list = W.Select(options=[], rows=12, description="alive", layout=W.Layout(width="430px"))
        self.details = W.HTML(layout=W.Layout(width="420px"))
        self.highlighted: set[int] = set()
        layout_tab = W.VBox([
            W.HBox([self.method_dd, self.arena_dd, self.color_dd]),
            self.image, self.slider, self.status, W.HBox([self.live_list, self.details]),
        ])
        self.placement_image = W.Image(format="png")
        placement_tab = W.VBox([W.HTML("<b>Planned bytes by where they live, per loader</b> "
                                       "(corrected: executorch &ge; 1.5 Runtime.load_program; legacy: before "
                                       "1.5; module: _load_for_executorch)"), self.placement_image])
        self.emulate_cb = W.Checkbox(value=True, description="emulated device (host memory)", indent=False)
        self.run_button = W.Button(description="Load & run", button_style="primary", icon="play")
        self.run_output = W.HTML("<i>Loads the program with pte_lab.load, loads every method and runs it "
                                 "once on random inputs, in the background.</i>")
        run_tab = W.VBox([W.HBox([self.run_button, self.emulate_cb]), self.run_output])
        self.tabs = W.Tab(children=[layout_tab, placement_tab, run_tab],
                          titles=["arena layout", "placement", "load & run"])
        super().__init__([W.HTML(self._header()), self.tabs])
        self.add_class("pte-lab-explorer")
        self.method_dd.observe(self._on_method, names="value")
        self.arena_dd.observe(self._on_arena, names="value")
        self.color_dd.observe(self._on_arena, names="value")
        self.slider.observe(self._on_slider, names="value")
        self.live_list.observe(self._on_pick, names="value")
        self.tabs.observe(self._on_tab, names="selected_index")
        self.run_button.on_click(self._on_run)
        self._run_thread: threading.Thread | None = None
        self._on_method()

    def __repr__(self) -> str:  # the text a saved notebook shows in place of the widget
        where = "" if self.arena_dd.value is None else f", arena {self.arena_dd.value}, instruction {self.slider.value}"
        return (f"<Explorer of {os.path.basename(self.pte.path or '<bytes>')}: method {self.method_dd.value!r}"
                f"{where}: {count(len(self.highlighted), 'tensor')} alive>")

    # ---------------------------------------------------------------- parts
    def _header(self) -> str:
        p = self.pte
        return (f"<b>{escape(p.path or '<bytes>')}</b> &middot; {count(len(p.methods), 'method')} &middot; "
                f"{human_bytes(p.file_size)}")

    @property
    def method(self):
        return self.pte.methods[self.method_dd.value]

    def _canvas(self) -> _LayoutCanvas | None:
        if self.arena_dd.value is None:
            return None
        key = (self.method_dd.value, self.arena_dd.value, self.color_dd.value)
        if key not in self._canvases:
            self._canvases[key] = _LayoutCanvas(self.method, self.arena_dd.value, self.color_dd.value)
        return self._canvases[key]

    # -------------------------------------------------------------- events
    def _on_method(self, *_):
        m = self.method
        opts = [(f"{a.mem_id} · {a.device} · {human_bytes(a.size)}", a.mem_id) for a in m.arenas]
        self.slider.max = m.n_instructions
        self.arena_dd.options = opts
        self.arena_dd.value = opts[0][1] if opts else None
        self._on_arena()

    def _on_arena(self, *_):
        self._render()

    def _on_slider(self, *_):
        self._render()

    def _render(self):
        c = self._canvas()
        if c is None:
            self.image.value = b""
            self.highlighted = set()
            self.live_list.options = []
            self.status.value = "<i>this method has no planned arenas</i>"
            return
        t = self.slider.value
        idx = c.live(t)
        picked = self.live_list.value
        pick_idx = next((i for i in idx if c.tensors[i].value == picked), None)
        self.image.value = c.render(t, pick_idx)
        self.highlighted = {c.tensors[i].value for i in idx}
        live = sorted((c.tensors[i] for i in idx), key=lambda t: t.offset)
        self.live_list.options = [(live_label(x, module=self._module(x)), x.value) for x in live]
        if picked in self.highlighted:
            self.live_list.value = picked
        # hovering the picture tells what the instruction is in the model's terms
        self.image.tooltip = self._instruction_hover(t)
        occ = int(self.method.occupancy(self.arena_dd.value)[t + 1])
        a = self.method.arena(self.arena_dd.value)
        where = "inputs written" if t == -1 else ("outputs read" if t == self.method.n_instructions else
                                                  escape(self.method.instructions[t].target))
        self.status.value = (f"<span class='pte-lab-status'>instruction <b>{t}</b> ({where}): "
                             f"<b>{count(len(idx), 'tensor')}</b> alive, {human_bytes(occ)} of "
                             f"{human_bytes(a.size)}</span>")

    def _module(self, t) -> str | None:
        m = self.method
        if m.sources is None:
            return None
        owner = m.modules.owner.get(m.storage_of(t.value) if t.role == Role.VIEW else t.value)
        return None if owner is None else (owner or "(root)")

    def _instruction_hover(self, t: int) -> str | None:
        m = self.method
        if m.sources is None or not 0 <= t < m.n_instructions:
            return None
        by = self._written.get(m.name)
        if by is None:  # once per method: a slider step looks up one instruction
            by = self._written[m.name] = {}
            for x in m.planned:
                if x.producer is not None and x.role != Role.VIEW:
                    by.setdefault(x.producer, []).append(x)
        written = by.get(t, [])
        if not written:
            return f"instruction {t}: {m.instructions[t].target}"
        return f"instruction {t}: {m.instructions[t].target}: " + "; ".join(hover_text(m, x) for x in written[:3])

    def _on_pick(self, change):
        v = change["new"]
        if v is None:
            return
        t = next((x for x in self.method.planned if x.value == v), None)
        if t is not None:
            self.details.value = _tensor_details(t, self.method)
            self.live_list.tooltip = hover_text(self.method, t)
            c = self._canvas()
            idx = c.live(self.slider.value)
            pick_idx = next((i for i in idx if c.tensors[i].value == v), None)
            self.image.value = c.render(self.slider.value, pick_idx)

    def _on_tab(self, change):
        if change["new"] == 1 and not self.placement_image.value:
            from matplotlib.backends.backend_agg import FigureCanvasAgg
            from matplotlib.figure import Figure


            fig = Figure(figsize=(9.5, 3.8), dpi=100, layout="constrained")
            canvas = FigureCanvasAgg(fig)
            plot.placement(self.pte, "all", ax=fig.add_subplot())
            canvas.draw()
            self.placement_image.value = _png(canvas)

    # ------------------------------------------------------------ load & run
    def _on_run(self, _=None):
        if self._run_thread is not None and self._run_thread.is_alive():
            return
        if not self.pte.path:
            self.run_output.value = "<b>Open the program from a file to load it.</b>"
            return
        self.run_button.disabled = True
        self.run_output.value = "<i>loading ExecuTorch and the program…</i>"
        self._run_thread = threading.Thread(target=self._run, daemon=True)
        self._run_thread.start()

    def _run(self):
        try:
            self.run_output.value = run_all_html(self.pte, emulate=self.emulate_cb.value)
        except Exception as exc:  # noqa: BLE001 - shown to the person, never raised in a thread
            self.run_output.value = f"<b>{escape(type(exc).__name__)}</b>: {escape(str(exc))}"
        finally:
            self.run_button.disabled = False


#: characters of an "alive" option that fit the 430 px list beside its label; the browser cuts a longer one at
#: the edge, wherever that falls (``@ 98,`` in mid-number)
LIVE_LABEL_CHARS = 46


def live_label(t, limit: int = LIVE_LABEL_CHARS, module: str | None = None) -> str:
    """One "alive" option: value, shape, bytes, module (with an ETRecord), offset, writer, name, as many whole
    items as fit in ``limit`` characters, then "…" (a pick shows the tensor in full beside the list). Never cut
    inside an item."""
    items = [f"v{t.value}", short_shape(t.shape), human_bytes(t.nbytes), module or "", f"@ {t.offset:,}",
             # a view's op names its base's operator too; the list keeps it short ("view of v186")
             t.op.short if isinstance(t.op, ViewOf) else t.op or t.role, t.name or ""]
    items = [i for i in items if i]
    if len(" ".join(items)) <= limit:
        return " ".join(items)
    out = items[0]
    for item in items[1:]:
        if len(out) + 1 + len(item) + 2 > limit:
            break
        out += " " + item
    return out + " …"


def run_all_html(pte, emulate: bool = True) -> str:
    """:func:`pte_lab.runtime.run_all` on the program's file, as the explorer shows it."""
    result = run_all(pte.path, emulate=emulate)
    html = [f"<div>{escape(d)}: {escape(how)}</div>" for d, how in result.devices.items()]
    text = [f"{d}: {how}" for d, how in result.devices.items()]
    for r in result.runs:
        said = (f"ran: outputs {', '.join(str(list(s)) for s in r.output_shapes)}" if r.ok else r.error)
        html.append(f"<div>{'✔' if r.ok else '✖'} <b>{escape(r.method)}</b>{' ' if r.ok else ': '}{escape(said)}</div>")
        text.append(f"{'✔' if r.ok else '✖'} {r.method}{' ' if r.ok else ': '}{said}")
        if r.defaulted:
            given = f"scalar inputs given a value (the file's, else 0, 0.0, false): {'; '.join(r.defaulted)}"
            html.append(f"<div class='pte-indent'><i>{escape(given)}</i></div>")
            text.append(f"    {given}")
    return html_repr("".join(html) + "<b>memory: predicted vs measured</b>" + result.report.to_html(index=False)
                     + f"<div><i>{escape(HOST_BYTES_NOTE)}</i></div>",
                     "\n".join(text + ["memory: predicted vs measured", result.report.to_string(index=False),
                                        HOST_BYTES_NOTE]))


@arguments(source=PROGRAM, method=optional(NAME))
def explore(source, method: str | None = None) -> Explorer:
    """The explorer for a path, bytes or an opened :class:`~pte_lab.Pte`.

    Parameters
    ----------
    source : str or os.PathLike or bytes or pte_lab.Pte
        The program.
    method : str, optional
        The method shown first (default: the program's first).

    Returns
    -------
    Explorer
        The widget (display it as a cell's last value).

    Raises
    ------
    PteFormatError
        For a file that is not a program.
    ValueError
        For a program without methods.

    Examples
    --------
    ``pte_lab.explore("model.pte")``
    """
    pte = source if isinstance(source, Pte) else open_pte(source)
    return Explorer(pte, method)
