"""pte_lab.diff on real pairs of exports, its views, and `pte-lab diff` as a CI job runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.exir")

import pte_lab
from pte_lab import examples, planning
from pte_lab.model.diff import Change, match_tensors
from pte_lab.units import human_bytes
from pte_lab.views.rows import diff_lines


def _cli(*args, timeout=300):
    exe = shutil.which("pte-lab")
    cmd = [exe, *args] if exe else [sys.executable, "-m", "pte_lab.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def planners(tmp_path_factory) -> tuple[Path, Path]:
    """One MLP exported by exir with its greedy planner and with its naive one (pte_lab.planning.compare)."""
    torch.manual_seed(0)
    c = planning.compare(examples._modules()["MLP"](), (torch.randn(4, 32),), io_planned=(True,))
    out = tmp_path_factory.mktemp("planners")
    paths = []
    for label, name in (("greedy, I/O planned", "greedy.pte"), ("naive, I/O planned", "naive.pte")):
        p = c.programs[label]
        (out / name).write_bytes(bytes(p.raw.container))
        paths.append(out / name)
    return tuple(paths)


def _same_graph(d, method="forward"):
    """Two exports of one graph emit the same value numbering: pairs must agree with it (the matcher
    never looks at value indices), and nothing may be left over."""
    md = d.methods[method]
    assert md.only_before == () and md.only_after == ()
    assert len(md.matched) == md.tensors.before == md.tensors.after > 0
    assert all(m.before.value == m.after.value for m in md.matched)
    return md


# ------------------------------------------------------------------ real pairs
def test_greedy_against_naive_planner(planners):
    greedy, naive = planners
    d = pte_lab.diff(greedy, naive)
    md = _same_graph(d)
    g, n = pte_lab.open(greedy).methods["forward"], pte_lab.open(naive).methods["forward"]
    (a,) = md.arenas
    assert a.size == Change(g.raw.buffer_sizes[1], n.raw.buffer_sizes[1]) and a.size.delta > 0
    assert a.peak.delta == 0  # the same tensors alive at once: the planner alone made it bigger
    # a planner moves tensors; it never resizes them or changes when they live
    assert {w for m in md.matched for w in m.changed} == {"offset"}
    assert md.instructions.delta == 0 and d.planned_bytes.delta == a.size.delta
    c = md.causes(1)
    assert not (c.new or c.gone or c.larger or c.longer or c.moved_in)
    assert "peak live unchanged" in str(d) and "the same tensors, placed differently" in str(d)
    loaders = {(x.loader, x.step): x.bytes.delta for x in d.load_cost}
    assert loaders == {("corrected", "load_program"): a.size.delta, ("legacy", "load_program"): a.size.delta,
                       ("module", "first_execute"): a.size.delta}
    assert [c.what for c in d.budget(10) if c.exceeded] == ["planned bytes of 'forward'"]
    assert not any(c.exceeded for c in pte_lab.diff(naive, greedy).budget(0))


def test_portable_against_xnnpack(program_path):
    before, after = program_path("portable"), program_path("xnnpack")
    d = pte_lab.diff(before, after)
    assert d.added == ("attention",) and d.removed == () and list(d.methods) == ["forward"]
    md = d.methods["forward"]
    # the delegate swallows every intermediate: only the input and the output can be paired, by position
    assert sorted(m.by for m in md.matched) == ["input", "output"]
    portable = pte_lab.open(before).methods["forward"]
    assert {t.value for t in md.only_before} == {t.value for t in portable.planned
                                                if t.role not in ("input", "output")}
    assert md.only_after == ()
    (inp,) = [m for m in md.matched if m.by == "input"]
    assert inp.before.value == portable.inputs[0].value and inp.after.shape == inp.before.shape == (4, 32)
    assert d.file_size.delta == os.path.getsize(after) - os.path.getsize(before)
    regions = {(r.region, r.name): r.bytes for r in d.regions}
    assert regions[("delegate", "XnnpackBackend")].before == 0 < regions[("delegate", "XnnpackBackend")].after
    for side, path in (("before", before), ("after", after)):  # the regions account for every byte
        assert sum(getattr(r.bytes, side) for r in d.regions) == os.path.getsize(path)
    attention = pte_lab.open(after).methods["attention"].planned_bytes
    assert d.planned_bytes == Change(portable.planned_bytes, md.planned_bytes.after + attention)
    text = str(d)
    assert "only in the second: attention" in text and "attention: planned bytes (added method)" in text


def test_replanned_against_its_original(program_path, tmp_path):
    src = program_path("transformer")
    r = planning.replan(src, "best_fit")
    out = r.write(tmp_path / "replanned.pte")
    d = pte_lab.diff(src, out)
    md = _same_graph(d)
    assert {w for m in md.matched for w in m.changed} <= {"offset"}
    for plan in r.arenas:
        a = md.arena(plan.mem_id)
        assert a.size == Change(plan.before, plan.after)
        assert a.peak.delta == 0
    changed = {m.after.value for m in md.changed}
    original = {t.value: t.offset for t in pte_lab.open(src).methods["forward"].planned}
    assert changed == {v for p in r.arenas for v, off in p.offsets.items() if off != original[v]} != set()
    regions = {(x.region, x.name): x.bytes for x in d.regions}
    assert not regions[("constant", "")].changed  # the weights are the same bytes
    assert "2 figures unchanged (file: header; file: constant)" in str(d)  # named, not just counted
    doc = d.to_dict()
    assert doc["schema"] == "pte_lab.diff" and doc["version"] == 2
    (arena,) = doc["methods"]["forward"]["arenas"]
    assert arena["size"]["delta"] == r.arenas[0].after - r.arenas[0].before < 0
    assert doc["methods"]["forward"]["tensors"]["changed_counts"] == {"offset": len(changed)}
    n = len(pte_lab.open(src).methods["forward"].planned)
    assert doc["methods"]["forward"]["planned_tensors"] == {"before": n, "after": n, "delta": 0, "growth_pct": 0.0}


def test_state_is_matched_by_its_name(program_path, tmp_path):
    """Named mutable buffers (emit_mutable_buffer_names) pair by name, whatever else moves."""
    src = program_path("shared_state")
    out = planning.replan(src, "best_fit").write(tmp_path / "replanned.pte")
    d = pte_lab.diff(src, out)
    for name in ("prefill", "decode"):
        md = _same_graph(d, name)
        (state,) = [m for m in md.matched if m.before.role == "mutable_buffer"]
        assert state.by == "name" and state.before.name == state.after.name and state.before.name
        assert md.state_bytes == Change(state.before.nbytes, state.after.nbytes)


def test_tensors_pair_across_a_change_of_shape(program_path):
    """A longer sequence changes every activation's shape: each tensor still pairs with the one the same
    operators make (its shape and bytes what changed), and no sum of tensors' bytes reads as memory."""
    short = examples.build("transformer", layers=2, seq=8)  # the cached one has seq=16
    d = pte_lab.diff(short, program_path("transformer"), labels=("seq 8", "seq 16"))
    md = d.methods["forward"]
    assert md.tensors.before == md.tensors.after and len(md.matched) == md.tensors.before
    assert md.only_before == () and md.only_after == ()
    shaped = [m for m in md.matched if "shape" in m.changed]
    assert len(shaped) > md.tensors.before // 2
    for m in md.matched:
        assert m.before.op == m.after.op and m.before.dtype == m.after.dtype and m.before.role == m.after.role
    io = [m for m in md.matched if m.by in ("input", "output")]
    assert len(io) == 2 and all({"shape", "size"} <= set(m.changed) for m in io)
    assert d.labels == ("seq 8", "seq 16") and str(d).startswith("Diff seq 8 -> seq 16")
    assert repr(d).startswith("<Diff seq 8 -> seq 16: planned bytes") and "\n" not in repr(d)  # one line
    text = str(d)
    (why,) = [line for line in text.splitlines() if line.startswith("  arena 1:")]
    arena = md.arena(1)
    # the tensors behind the change are counted, their largest change named: never a sum of their bytes
    assert "larger: " in why and "(largest change +" in why and "their own bytes" not in why
    biggest = max(m.after.nbytes - m.before.nbytes for m in md.matched if m.after.role != "view")
    assert f"largest change +{human_bytes(biggest)}" in why
    assert arena.size.delta > 0
    (rec,) = [a for a in d.to_dict()["methods"]["forward"]["arenas"] if a["mem_id"] == 1]
    (larger,) = [c for c in rec["causes"] if c["what"] == "larger"]  # counted and the largest: no summed bytes
    assert set(larger) == {"what", "tensors", "largest"} and larger["largest"] == biggest
    table = md.table()
    assert set(table.matched_by) <= {"input", "output", "operators"}
    assert table.shape_before.ne(table.shape_after).sum() == len(shaped)


def test_match_tensors_of_a_method_with_itself(program_path):
    m = pte_lab.open(program_path("kv_cache")).methods["forward"]
    matched, a, b = match_tensors(m, m)
    assert a == b == () and all(x.before is x.after and not x.changed for x in matched)
    assert len(matched) == len(m.planned)


def test_a_bundled_program_diffs_as_the_program_it_carries(tmp_path):
    bpte = tmp_path / "b.bpte"
    bpte.write_bytes(examples.build("bundled"))
    from executorch.devtools.bundled_program.serialize import (
        deserialize_from_flatbuffer_to_bundled_program,
    )

    carried = tmp_path / "carried.pte"  # ExecuTorch's own reading of what the .bpte carries
    carried.write_bytes(deserialize_from_flatbuffer_to_bundled_program(bpte.read_bytes()).program)
    d = pte_lab.diff(bpte, carried)
    assert all(md.unchanged for md in d.methods.values()) and set(d.methods) == {"forward", "affine"}
    assert not any(x.change.changed for x in diff_lines(d))


def test_views(planners):
    d = pte_lab.diff(*planners, labels=("greedy", "naive"))
    html = d._repr_html_()
    assert "<script" not in html and "pte-text-fallback" in html
    body = html.split("</pre>", 1)[1]  # past the text fallback
    assert body.index("What grew") < body.index("Method forward") < body.index("File: where the bytes go")
    assert "greedy" in body and "naive" in body
    text = str(d)
    lines = text.splitlines()
    first = lines.index("  what grew, largest first:")
    assert "planned bytes, all methods" in lines[first + 3] or "forward: arena 1" in lines[first + 3]
    assert json.loads(json.dumps(d.to_dict()))["planned_bytes"]["delta"] == d.planned_bytes.delta


def test_bad_sources_are_named(program_bytes):
    data = program_bytes("portable")
    with pytest.raises(pte_lab.PteLabError, match="no method 'nope' in either program"):
        pte_lab.diff(data, data, methods=["nope"])
    with pytest.raises(pte_lab.PteFormatError):
        pte_lab.diff(b"not a program at all", data)
    with pytest.raises(pte_lab.PteLabError, match="give paths, not bytes"):
        pte_lab.diff(data, data, sizes=True)


# ---------------------------------------------------------------------- the CLI
def test_cli_holds_a_budget(planners):
    greedy, naive = map(str, planners)
    r = _cli("diff", greedy, naive, "--fail-if-grows", "10")
    assert r.returncode == 1, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("pte-lab: budget exceeded: planned bytes of 'forward' grew +")
    assert "Budget: nothing may grow more than 10%" in r.stdout and "EXCEEDED" in r.stdout
    r = _cli("diff", naive, greedy, "--fail-if-grows", "0")
    assert r.returncode == 0 and r.stderr == "" and "EXCEEDED" not in r.stdout
    r = _cli("diff", greedy, naive)  # no budget: a report, never a failure
    assert r.returncode == 0 and "what grew, largest first" in r.stdout


def test_cli_json_carries_the_budget(planners):
    r = _cli("diff", *map(str, planners), "--json", "--fail-if-grows", "10%")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["schema"] == "pte_lab.diff" and doc["version"] == 2
    budget = {c["what"]: c["exceeded"] for c in doc["budget"]}
    assert budget == {"file bytes": False, "planned bytes of 'forward'": True}
    assert doc["budget_verdict"]["held"] is False and doc["budget_verdict"]["exceeded"] == 1
    (arena,) = doc["methods"]["forward"]["arenas"]
    assert arena["size"]["delta"] == doc["planned_bytes"]["delta"] > 0


def test_cli_budget_on_holds_only_the_kinds_asked(planners):
    """A CI job whose weights are meant to change budgets memory alone: --budget-on narrows what is held, and the
    heading says what it left out."""
    greedy, naive = map(str, planners)
    r = _cli("diff", greedy, naive, "--fail-if-grows", "10", "--budget-on", "file")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert "(held: file; not held, by --budget-on: planned, scratch, pools)" in r.stdout
    assert "planned bytes of 'forward'" not in r.stdout.split("Budget:")[1]
    r = _cli("diff", greedy, naive, "--json", "--fail-if-grows", "10", "--budget-on", "planned")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["budget_on"] == ["planned"]
    assert [(c["what"], c["kind"]) for c in doc["budget"]] == [("planned bytes of 'forward'", "planned")]
    _one_line_error(_cli("diff", greedy, naive, "--budget-on", "planned"), "give --fail-if-grows too")
    with pytest.raises(pte_lab.PteLabError, match="a budget holds one or more of file, planned"):
        pte_lab.diff(greedy, naive).with_budget(5, on=["weights"])


def test_json_describes_a_method_only_one_side_has(program_path):
    """An added or removed method has its own entry: what it plans, arena by arena."""
    r = _cli("diff", str(program_path("portable")), str(program_path("three_methods")), "--json")
    doc = json.loads(r.stdout)
    assert doc["removed"] == ["forward"] and set(doc["added"]) == {"small", "large", "on_device"}
    assert set(doc["only_in"]["before"]) == {"forward"} and set(doc["only_in"]["after"]) == set(doc["added"])
    after = pte_lab.open(program_path("three_methods"))
    for name, lone in doc["only_in"]["after"].items():
        m = after.methods[name]
        assert lone["planned_bytes"] == sum(a["size"] for a in lone["arenas"]) == m.planned_bytes
        assert [(a["mem_id"], a["device"]) for a in lone["arenas"]] == [(a.mem_id, a.device) for a in m.arenas]
    assert {a["device"] for a in doc["only_in"]["after"]["on_device"]["arenas"]} == {"cpu", "cuda:0"}


@pytest.mark.parametrize("args, says", [
    (["{missing}", "{a}"], "No such file"),
    (["{a}", "{garbage}"], "pte-lab: error: "),
    (["{a}", "{a}", "--method", "nope"], "no method 'nope' in either program"),
    (["{a}", "{a}", "--fail-if-grows", "-3"], "argument --fail-if-grows: must be a percentage of at least 0"),
    (["{a}", "{a}", "--fail-if-grows", "ten"], "argument --fail-if-grows: 'ten' is not a percentage"),
    (["{a}", "{a}", "--json", "--html"], "diff prints --json or --html, not both"),
])
def test_cli_errors_are_one_line(args, says, planners, tmp_path):
    garbage = tmp_path / "garbage.pte"
    garbage.write_bytes(b"\0" * 4 + b"ET12" + b"\xff" * 40)
    args = [x.format(missing=tmp_path / "missing.pte", a=planners[0], garbage=garbage) for x in args]
    _one_line_error(_cli("diff", *args), says)


def _one_line_error(r, says):
    assert r.returncode == 2 and r.stdout == ""
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("pte-lab: error: ") and says in line


def test_cli_refuses_a_data_file(tmp_path, program_path):
    examples.save("external", tmp_path / "m.pte")
    (ptd,) = tmp_path.glob("*.ptd")
    _one_line_error(_cli("diff", str(program_path("portable")), str(ptd)),
                    "is a .ptd data file: diff compares programs")
    with pytest.raises(pte_lab.PteLabError, match="is a .ptd data file"):
        pte_lab.diff(ptd, program_path("portable"))


# -------------------------------------------------------- slow: sizes, LLM, 1.4.1
@pytest.mark.slow
def test_run_time_sizes_side_by_side_and_pool_budgets(planners):
    greedy, naive = planners
    d = pte_lab.diff(greedy, naive, sizes=True)
    pools = {p.part: p.bytes for p in d.sizes.pools if p.method == "forward"}
    assert pools["planned_buffers"] == d.methods["forward"].planned_bytes  # the runner allocates the plan
    assert set(pools) == {"planned_buffers", "method_pool", "temp_pool"}
    parts = {p.part: p.bytes for p in d.sizes.parts}
    assert parts["planned arenas"] == d.methods["forward"].planned_bytes
    budgeted = d.budget(10)  # the planned buffers are the planned bytes: one row, not two
    assert "planned bytes of 'forward'" in [c.what for c in budgeted if c.exceeded]
    assert not [c for c in budgeted if "planned buffers" in c.what]
    r = _cli("diff", str(greedy), str(naive), "--sizes", "--json", "--fail-if-grows", "10", timeout=600)
    assert r.returncode == 1, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    exceeded = {c["what"] for c in doc["budget"] if c["exceeded"]}
    assert "planned bytes of 'forward'" in exceeded and len(doc["budget"]) == len(budgeted)
    assert doc["sizes"]["pools"][0]["bytes"]["before"] == d.sizes.pools[0].bytes.before


@pytest.mark.slow
def test_llm_fp32_against_8da4w(program_path):
    """Quantizing the linear layers shrinks the weights in the file; the plan stays what it was."""
    fp32, q = program_path("llm_fp32"), program_path("llm")
    d = pte_lab.diff(fp32, q)
    md = _same_graph(d)
    assert md.unchanged and md.state_tensors == Change(4, 4)  # K and V caches, two layers, matched
    caches = [m for m in md.matched if m.before.role == "mutable_buffer"]
    assert len(caches) == 4 and all(m.by == "operators" and not m.changed for m in caches)
    regions = {(r.region, r.name): r.bytes for r in d.regions}
    assert regions[("named data", "")].delta < 0  # the 8da4w weights XNNPACK takes
    assert d.file_size.delta == os.path.getsize(q) - os.path.getsize(fp32) < 0
    assert not any(c.exceeded for c in d.budget(0))
    r = _cli("diff", str(fp32), str(q), "--fail-if-grows", "0")
    assert r.returncode == 0 and d.target_changes == ()  # XNNPACK on both sides: no change of backend
    # the plan is the same; the method is listed unchanged only if its XNNPACK blobs are too
    line = "Unchanged methods (every arena, count, tensor and delegate the same): forward"
    assert (line in r.stdout) == md.same
    assert all(x.before.backend == x.after.backend == "XnnpackBackend" for x in md.delegates)


@pytest.mark.slow
def test_executorch_1_4_1_against_1_5_1(legacy_programs, tmp_path):
    """The same modules exported by executorch 1.4.1 and by this 1.5.1: the memory plans are the same,
    and so are the files, byte for byte."""
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        import legacy_export
    finally:
        sys.path.pop(0)
    legacy_export.main(tmp_path)  # the same script, under executorch 1.5.1
    for name in ("mlp_portable", "mlp_xnnpack", "buffer"):
        old, new = legacy_programs / f"{name}.pte", tmp_path / f"{name}.pte"
        d = pte_lab.diff(old, new)
        md = _same_graph(d)
        assert md.unchanged and not d.duplicates_gained and not d.duplicates_lost
        assert not any(r.bytes.changed for r in d.regions)
        assert old.read_bytes() == new.read_bytes()
    r = _cli("diff", str(legacy_programs / "buffer.pte"), str(tmp_path / "buffer.pte"), "--fail-if-grows", "0")
    assert r.returncode == 0 and "nothing grew or shrank" in r.stdout


# --------------------------------------------------------------------- pictures
def test_plot_diff_draws_the_pairs_and_one_arena_on_one_scale(planners):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pte_lab import plot

    d = pte_lab.diff(*planners, labels=("greedy", "naive"))
    try:
        fig = plot.diff(d)
        bars, before, after = fig.axes
        a = d.methods["forward"].arena(1)
        heights = {p.get_gid(): p.get_width() for p in bars.patches if p.get_gid()}
        label = "forward · arena 1 (cpu)"
        assert heights == {f"{label}|before": a.size.before, f"{label}|after": a.size.after}
        assert "+" in " ".join(t.get_text() for t in bars.texts)  # the change is written beside the pair
        assert before.get_ylim() == after.get_ylim() and before.get_ylim()[1] >= a.size.after  # one byte scale
        assert before.get_title().startswith("before (greedy)") and after.get_title().startswith("after (naive)")
        ax = plot.diff_bars(d, "file")
        assert {p.get_gid().split("|")[0] for p in ax.patches if p.get_gid()} >= {"flatbuffer", "constant"}
        with pytest.raises(ValueError, match="sizes=True"):
            plot.diff_bars(d, "sizes")
    finally:
        plt.close("all")


def test_a_diff_of_many_changed_arenas_shows_the_largest_and_says_how_many_more():
    """A reader gets the largest changes and a count of the rest, not one line per arena; JSON keeps all."""
    from crafting import many_arenas_many_tensors

    from pte_lab.views.diff import diff_document

    n = 100
    d = pte_lab.diff(pte_lab.open(many_arenas_many_tensors(n)), pte_lab.open(many_arenas_many_tensors(n, grow=4)))
    text, html = str(d), d._repr_html_()
    assert sum(line.startswith("  arena ") for line in text.splitlines()) == 32
    assert f"and {n - 32} more arenas, smaller changes" in text
    assert "and 70 more lines, smaller changes" in text  # what grew: planned bytes, state, 100 arenas: 102
    assert html.count("arena ") < 3 * n and len(diff_document(d)["methods"]["forward"]["arenas"]) == n


def test_a_method_on_two_devices_budgets_each_device(program_path):
    """A device arena is another memory than the host's: each device's planned bytes is a check of its own."""
    p = program_path("three_methods")
    checks = {c.what: c for c in pte_lab.diff(p, p).with_budget(5).budget()}
    m = pte_lab.open(p).methods["on_device"]
    for dev in ("cpu", "cuda:0"):
        c = checks[f"planned bytes of 'on_device' on {dev}"]
        assert c.bytes.after == sum(a.size for a in m.arenas if a.device == dev) and c.kind == "planned"
    assert not any(" on " in w for w in checks if "'small'" in w or "'large'" in w)  # host-only methods: none


def test_a_method_that_cannot_run_here_is_not_a_failed_budget_but_one_that_crashed_is(program_path):
    """A side not sized because this host cannot run it (its backend is not here) leaves the pools unheld:
    exit 5 (not run here), with its planned arenas still compared from the file; a side whose run crashed is a
    failure (1)."""
    from types import SimpleNamespace

    from pte_lab.errors import CHECK_FAILED, NOT_RUN_HERE
    from pte_lab.model.diff_backends import exit_status, not_run_here_only

    p = program_path("portable")
    d = pte_lab.diff(p, p)
    planned = d.methods["forward"].arenas[0].after.size
    measured = SimpleNamespace(planned=[(1, "cpu", planned)], method_allocator=1024, temp_allocator=64,
                               parts=lambda: {"planned arenas": planned, "method allocator": 1024,
                                              "delegate scratch": 0, "temp allocator": 64})
    declared = SimpleNamespace(planned=((1, "cpu", planned),), delegate_scratch=0, delegates=())

    def side(why, cannot):
        return SimpleNamespace(methods={}, skipped={"forward": why}, declared={"forward": declared},
                               executorch_version="1.5.1", cannot_run_here=("forward",) if cannot else ())

    after = SimpleNamespace(methods={"forward": measured}, skipped={}, executorch_version="1.5.1")
    here = d.with_sizes(side("backend X is not registered in this ExecuTorch build", True), after).with_budget(5)
    (row,) = [x for x in here.sizes.parts if x.part == "planned arenas"]
    assert row.unmeasured is None and row.bytes == Change(planned, planned) and row.basis[0] == "file"
    assert not_run_here_only(here) and exit_status(here, here.budget_result().exit_status) == NOT_RUN_HERE
    assert "not run here: 'forward' in the first program cannot run on this host" in str(here)
    crashed = d.with_sizes(side("the runtime crashed (SIGSEGV) while sizing it", False), after).with_budget(5)
    assert not not_run_here_only(crashed) and exit_status(crashed, crashed.budget_result().exit_status) == CHECK_FAILED
    assert "not run here" not in str(crashed)
