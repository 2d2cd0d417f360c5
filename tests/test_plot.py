"""Plots: content checks (what is drawn) and a look guard (image comparison at a tolerance)."""

from __future__ import annotations

from pathlib import Path

import pytest

mpl = pytest.importorskip("matplotlib")
mpl.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.collections import PolyCollection
from matplotlib.testing.compare import compare_images

import pte_lab
from pte_lab import plot

BASELINE = Path(__file__).parent / "baseline"


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _tensor_collection(ax) -> PolyCollection:
    (coll,) = [c for c in ax.collections if c.get_gid() == "tensors"]
    return coll


def test_arena_layout_draws_each_planned_tensor(program_path):
    m = pte_lab.open(program_path("device_demo")).methods["forward2"]
    fig = plot.arena_layouts(m)  # figure-level: one panel per arena
    axes = fig.axes
    assert len(axes) == len(m.arenas) == 2
    for ax, a in zip(axes, m.arenas):
        coll = _tensor_collection(ax)
        assert len(coll.get_paths()) == a.n_tensors  # one rectangle per planned tensor
        assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] >= a.size  # y range is the arena
        assert a.device in ax.get_title()
        ys = [h.get_ydata()[0] for h in ax.get_lines()]
        assert a.size in ys and a.peak_bytes in ys  # size and peak marked
    # rectangles span [offset, offset + nbytes) over [first, last]
    plt.close("all")
    ax = plot.arena_layout(m, 2)  # axes-level: always one Axes (no figure open: a new one)
    assert ax.__class__.__name__ == "Axes"
    verts = _tensor_collection(ax).get_paths()[0].vertices
    t = [x for x in m.planned if x.mem_id == 2][0]
    assert verts[:, 1].min() == t.offset and verts[:, 1].max() == t.offset + t.nbytes
    assert verts[:, 0].min() == pytest.approx(t.first - 0.45)


def test_arena_layout_on_given_axes_and_colours(program_path):
    m = pte_lab.open(program_path("transformer")).methods["forward"]
    fig, ax = plt.subplots()
    assert plot.arena_layout(m, 1, ax=ax, color_by="operator") is ax
    colours = {tuple(c) for c in _tensor_collection(ax).get_facecolors()}
    assert len(colours) > 3
    with pytest.raises(ValueError):
        plot.arena_layout(m, 1, color_by="size")
    dev = pte_lab.open(program_path("device_demo")).methods["forward2"]
    with pytest.raises(ValueError, match="pass mem_id, or draw them all with plot.arena_layouts"):
        plot.arena_layout(dev, ax=ax)
    one = pte_lab.open(program_path("portable")).methods["forward"]
    (only,) = one.arenas
    plt.close("all")
    drawn = plot.arena_layout(one)  # a single arena needs no mem_id: that one is drawn
    assert len(_tensor_collection(drawn).get_paths()) == only.n_tensors > 0
    assert f"arena {only.mem_id} " in drawn.get_title()


def test_seaborn_conventions(program_path):
    """Axes-level plots draw on the current Axes when given none, take options by keyword only and pass
    other keywords to matplotlib; figure-level plots return the Figure."""
    from matplotlib.figure import Figure

    m = pte_lab.open(program_path("device_demo")).methods["forward2"]
    fig, (left, right) = plt.subplots(1, 2)
    plt.sca(right)
    assert plot.arena_layout(m, 2, alpha=0.25) is right  # plt.gca(), as seaborn
    assert _tensor_collection(right).get_alpha() == 0.25  # **kwargs reach the collection
    assert plot.occupancy(m, ax=left, lw=0.7) is left
    assert {ln.get_linewidth() for ln in left.get_lines() if len(ln.get_xdata()) > 2} == {0.7}
    with pytest.raises(TypeError):
        plot.occupancy(m, left)  # ax is keyword-only
    plt.close("all")
    ax = plot.occupancy(m)  # no figure open: a new one, of the picture's own size
    assert tuple(ax.figure.get_size_inches()) == (9, 3.2)
    d = pte_lab.diff(program_path("device"), program_path("device_demo"))
    for drawn in (plot.arena_layouts(m), plot.layout_pair(m, m, 1), plot.diff(d)):
        assert isinstance(drawn, Figure)
    pair = plot.layout_pair(m, m, 2)
    assert len(pair.axes) == 2 and pair.axes[0].get_ylim() == pair.axes[1].get_ylim()


def test_occupancy_lines_follow_the_model(program_path):
    m = pte_lab.open(program_path("device_demo")).methods["forward2"]
    ax = plot.occupancy(m)
    steps = [ln for ln in ax.get_lines() if len(ln.get_xdata()) > 2]
    assert len(steps) == len(m.arenas)
    for ln, a in zip(steps, m.arenas):
        assert list(ln.get_ydata()) == list(m.occupancy(a.mem_id))


@pytest.mark.parametrize("loader", ["corrected", "legacy", "module"])
def test_placement_bars_sum_to_the_load_cost_model(program_path, loader):
    pte = pte_lab.open(program_path("device_demo"))
    ax = plot.placement(pte, loader)
    bars = [p for p in ax.patches if p.get_gid()]
    assert sum(p.get_height() for p in bars) == pte.load_cost(loader).bytes.sum()
    on_device = sum(p.get_height() for p in bars if p.get_gid().endswith("cuda:0"))
    cost = pte.load_cost(loader)
    assert on_device == cost[cost.device == "cuda:0"].bytes.sum()


def test_placement_side_by_side(program_path):
    pte = pte_lab.open(program_path("device_demo"))
    ax = plot.placement(pte, "all")
    loaders = {p.get_gid().split("|")[0] for p in ax.patches if p.get_gid()}
    assert loaders == {"corrected", "legacy", "module"}


@pytest.mark.parametrize("name", ["layout", "placement"])
def test_look(program_path, tmp_path, name):
    """Guard the look against a committed baseline (RMS tolerance absorbs font hinting)."""
    pte = pte_lab.open(program_path("device_demo"))
    with mpl.rc_context({"font.family": "DejaVu Sans", "figure.dpi": 72}):
        if name == "layout":
            ax = plot.arena_layout(pte.methods["forward"], 1)
        else:
            ax = plot.placement(pte, "all")
        out = tmp_path / f"{name}.png"
        ax.figure.savefig(out, dpi=72, bbox_inches="tight")
    expected = BASELINE / f"{name}.png"
    assert expected.exists(), (f"no baseline {expected.relative_to(BASELINE.parent.parent)}: look at {out}, "
                               f"and commit it there if it is right")
    assert compare_images(str(expected), str(out), tol=12) is None


def test_placement_draws_the_legacy_bug_and_says_the_device_gets_nothing(program_path):
    pte = pte_lab.open(program_path("device"))
    ax = plot.placement(pte, "legacy")
    bars = {p.get_gid().split("|")[2]: p for p in ax.patches if p.get_gid()}
    bug = bars["cuda:0 arena on the host"]  # the file tags it cuda:0; the legacy loader puts it on the host
    device_arena = [a for a in pte.methods["forward2"].arenas if a.device == "cuda:0"][0]
    assert bug.get_height() == device_arena.size and bug.get_hatch()
    assert "0 B on cuda:0" in [t.get_text() for t in ax.texts]
    assert "(the bug)" in " ".join(t.get_text() for t in ax.get_legend().get_texts())
    plt.close("all")  # axes-level: a second call without ax would draw on this Axes (plt.gca())
    ax = plot.placement(pte, "corrected")  # the fix: the arena is on the device, nothing marked
    assert not [p for p in ax.patches if p.get_gid() and "on the host" in p.get_gid()]
    assert not [t for t in ax.texts if t.get_text().startswith("0 B on")]
    # it fits a notebook column (JupyterLab shows about 9.5 in at 100 dpi)
    plt.close("all")
    assert plot.placement(pte, "all").figure.get_size_inches()[0] <= 9.5


def test_operator_colours_are_never_reused(program_path):
    m = pte_lab.open(program_path("transformer")).methods["forward"]
    ax = plot.arena_layout(m, 1, color_by="operator")
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    handles = ax.get_legend().legend_handles
    colours = [tuple(h.get_facecolor()) for h, lab in zip(handles, labels)  # the operators' patches (notes are lines)
               if hasattr(h, "get_facecolor") and not lab.startswith(("arena", "peak"))]
    assert len(colours) == len(set(colours)) > 8  # more operators than the 8-colour palette, none sharing
    ops = {t.op for t in m.planned if t.mem_id == 1 and t.role != "view" and t.op}
    assert ops <= set(labels)  # every operator named in the legend


def test_arena_layout_marks_the_waste(program_path):
    m = pte_lab.open(program_path("transformer")).methods["forward"]
    a = m.arena(1)
    assert a.size > a.peak_bytes
    ax = plot.arena_layout(m, 1)
    texts = [t.get_text() for t in ax.texts]
    assert f"waste\n{pte_lab.units.human_bytes(a.size - a.peak_bytes)}" in texts
    one = pte_lab.open(program_path("portable")).methods["forward"]  # no waste: no bracket
    assert one.arena(1).size == one.arena(1).peak_bytes
    plt.close("all")
    assert not [t for t in plot.arena_layout(one).texts if t.get_text().startswith("waste")]


def test_xnnpack_padding_is_not_called_waste(program_path):
    """exir adds 64 bytes past the end of every arena of a method with an XNNPACK delegate (the host arena XNNPACK
    never touches included): the planner's padding, not the plan's 'waste', and never said to be required (exir
    gives no reason); a sliver that thin is said in the legend, not drawn as a bracket collapsed into an X."""
    m = pte_lab.open(program_path("device")).methods["forward2"]
    for a in m.arenas:
        assert a.size - a.peak_bytes == 64
        plt.close("all")
        ax = plot.arena_layout(m, a.mem_id)
        assert not [t for t in ax.texts if "waste" in t.get_text()]
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert ("+ 64 B past the last tensor:\n   exir's padding of every arena of a method\n"
                "   with an XNNPACK delegate (the planner's, not the plan's waste)") in legend
    tr = pte_lab.open(program_path("transformer")).methods["forward"]  # no padding: none said
    plt.close("all")
    legend = [t.get_text() for t in plot.arena_layout(tr).get_legend().get_texts()]
    assert not [t for t in legend if "padding" in t]


def test_occupancy_draws_the_live_curve_above_the_size_and_peak_lines(program_path):
    m = pte_lab.open(program_path("device")).methods["forward2"]
    ax = plot.occupancy(m)
    curves = [ln for ln in ax.get_lines() if len(ln.get_xdata()) > 2]
    flat = [ln for ln in ax.get_lines() if len(ln.get_xdata()) <= 2]
    assert min(c.get_zorder() for c in curves) > max(f.get_zorder() for f in flat)


def test_run_memory_says_what_the_total_holds(program_path):
    pytest.importorskip("executorch.runtime")
    s = pte_lab.sizes(program_path("portable"))
    ax = plot.run_memory(s)
    (note,) = [t.get_text() for t in ax.texts]
    total = int(s.table().bytes.sum())
    plan = s.methods["forward"].parts()["planned arenas"]
    mapped = s.methods["forward"].file_resident
    assert note.startswith(f" {pte_lab.units.human_bytes(total)} on this host, {total / plan:.1f}x the plan")
    assert f"(of it {pte_lab.units.human_bytes(mapped)}: the file's pages\n  in this host's page cache)" in note


def test_two_tensors_side_by_side_are_named_apart(program_path):
    """forward2's two inputs share one colour and touch: each rectangle carries its value's number (issue 49.7);
    a crowded arena (the transformer's) is not covered in text."""
    m = pte_lab.open(program_path("device")).methods["forward2"]
    ax = plot.arena_layout(m, m.arenas[0].mem_id)
    names = {t.get_text() for t in ax.texts if t.get_gid() == "tensor name"}
    inputs = {f"v{t.value}" for t in m.planned if t.role == "input" and t.mem_id == m.arenas[0].mem_id}
    assert len(inputs) == 2 and inputs <= names
    plt.close("all")
    tr = pte_lab.open(program_path("transformer")).methods["forward"]
    assert not [t for t in plot.arena_layout(tr).texts if t.get_gid() == "tensor name"]
    plt.close("all")


def test_a_peak_equal_to_the_size_shows_on_the_size_line(program_path):
    """device's forward plans as small as any plan can be (peak live = size): the peak's dashes are drawn on
    top of the size line, in another colour, and the legend says they coincide (a learner saw one line)."""
    m = pte_lab.open(program_path("device")).methods["forward"]
    a = m.arena(1)
    assert a.size == a.peak_bytes
    for draw in (plot.arena_layout, plot.occupancy):
        ax = draw(m, ax=plt.subplots()[1])
        flat = {ln.get_label(): ln for ln in ax.get_lines() if len(ln.get_xdata()) <= 2}
        (size,) = [ln for lab, ln in flat.items() if "size" in lab and "peak" not in lab]
        (peak,) = [ln for lab, ln in flat.items() if "peak live = arena size" in lab]
        assert size.get_ydata()[0] == peak.get_ydata()[0] == a.size
        assert peak.get_zorder() > size.get_zorder() and peak.get_linestyle() == "--"
        assert peak.get_linewidth() < size.get_linewidth()  # the solid shows past the dashes' edges
    plt.close("all")
    tr = pte_lab.open(program_path("transformer")).methods["forward"]  # unequal: no "="
    labels = [ln.get_label() for ln in plot.arena_layout(tr, 1).get_lines()]
    assert not [lab for lab in labels if "=" in lab] and [lab for lab in labels if lab.startswith("peak live ")]


def test_file_layout_titles_the_file_by_its_name(program_path, tmp_path):
    """A notebook saves its program in a temporary folder: the title names the file, not the folder."""
    path = tmp_path / "device.pte"
    path.write_bytes(Path(program_path("device")).read_bytes())
    title = plot.file_layout(pte_lab.open(path)).get_title()
    assert title.startswith("device.pte · ") and str(tmp_path) not in title


def test_a_pair_names_its_tensors_on_the_scale_it_shares(program_path, tmp_path):
    """Greedy beside naive (notebook 02): the greedy panel is drawn on naive's larger byte scale, where its
    2 KiB tensors are thin. Names are judged on that shared scale: each tensor tall enough there is named
    (thin ones in a smaller font), none is named where its rectangle is too thin for the text."""
    from pte_lab import planning

    src = program_path("portable")
    greedy = pte_lab.open(src).methods["forward"]
    naive = pte_lab.open(planning.replan(src, "naive", smaller_only=False).write(tmp_path / "naive.pte")).methods["forward"]
    top = max(naive.arena(1).size, greedy.arena(1).size)
    assert naive.arena(1).size > greedy.arena(1).size
    fig = plot.layout_pair(greedy, naive, titles=("greedy", "naive"))
    for ax, m in zip(fig.axes, (greedy, naive)):
        named = {t.get_text(): t.get_fontsize() for t in ax.texts if t.get_gid() == "tensor name"}
        for t in m.planned:
            share = t.nbytes / top
            if share < plot.SMALL_NAMED_HEIGHT or t.last - t.first + 0.9 < plot.NAMED_WIDTH:
                assert f"v{t.value}" not in named
            else:
                assert named[f"v{t.value}"] == (7 if share >= plot.NAMED_HEIGHT else 6)
        assert 6 in named.values()  # the thin ones are named too
