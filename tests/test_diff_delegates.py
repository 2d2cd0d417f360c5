"""pte_lab.diff of delegated programs: each delegate call paired across the two (backend, target, memory mode,
bytes and where they live), `pte-lab diff --fail-if-grows` failing on a change of target, what one side did not
measure said and never counted, and one word for the flatbuffer in inspect and diff. The Ethos-U pairs are the
committed programs ExecuTorch's Arm flow exported (pte_lab/data/ethos_u, with what Vela printed)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

import pte_lab
from pte_lab import examples
from pte_lab.cli import TARGET_CHANGED, main as cli_main
from pte_lab.model.diff import diff_programs
from pte_lab.units import exact_bytes, human_bytes

DATA = Path(examples.ETHOS_U_PROGRAMS)
U55_SHARED = DATA / "u55_128_shared_sram.pte"
U55_SRAM = DATA / "u55_128_sram_only.pte"
U85_SRAM = DATA / "u85_256_sram_only.pte"
VELA = json.loads((DATA / "vela.json").read_text())["programs"]


def test_a_change_of_target_and_memory_mode_is_in_the_diff():
    """U55 Shared_Sram -> U85 Sram_Only: the target, system config and memory mode are what Vela printed, the
    bytes each blob declares are paired. No bytes move from flash to RAM: no memory mode puts the program in SRAM
    (ExecuTorch's Corstone build keeps it in DRAM under Sram_Only too)."""
    d = pte_lab.diff(U55_SHARED, U85_SRAM)
    (x,) = d.delegates
    a, b = pte_lab.open(U55_SHARED).delegate_memory()[0], pte_lab.open(U85_SRAM).delegate_memory()[0]
    settings = {s.what: (s.before, s.after) for s in x.changed_settings}
    (va,), (vb,) = VELA[U55_SHARED.name]["vela"], VELA[U85_SRAM.name]["vela"]
    assert settings["target"] == ("ethos-u55-128", "ethos-u85-256")
    assert settings["system config"] == (va["system_config"], vb["system_config"])
    assert settings["memory mode"] == (va["memory_mode"], vb["memory_mode"]) == ("Shared_Sram", "Sram_Only")
    assert "backend" not in settings and "scratch from" not in settings  # the same backend, the temp allocator
    assert x.scratch_bytes.before == a.scratch_bytes and x.scratch_bytes.after == b.scratch_bytes
    assert x.scratch_bytes.changed and x.command_bytes.after == b.command_bytes
    assert {c.what for c in d.target_changes} == {"target", "memory mode"}
    assert not d.methods["forward"].same  # the plan is the same, the delegate is not
    text = str(d)
    assert "Unchanged methods" not in text
    assert "target ethos-u55-128 -> ethos-u85-256" in text and "memory mode Shared_Sram -> Sram_Only" in text
    assert "must now be in RAM" not in text
    (line,) = [ln for ln in text.splitlines() if "delegate call 0 (EthosUBackend) scratch" in ln]
    assert human_bytes(a.scratch_bytes) in line and human_bytes(b.scratch_bytes) in line  # from how much to how much
    doc = d.to_dict()
    assert [c["what"] for c in doc["target_changes"]] == ["target", "memory mode"]
    assert doc["methods"]["forward"]["delegates"][0]["bytes"]["scratch"]["after"] == b.scratch_bytes


def test_the_same_target_in_another_memory_mode_changes_the_mode_only():
    d = pte_lab.diff(U55_SHARED, U55_SRAM)
    assert [c.what for c in d.target_changes] == ["memory mode"]
    back = pte_lab.diff(U55_SRAM, U55_SHARED)
    assert [c.what for c in back.target_changes] == ["memory mode"]


def test_a_scratch_inside_the_blob_moves_the_program_from_flash_to_ram(tmp_path):
    """ExecuTorch 0.7 (scratch from the temp allocator) -> 0.6 (a scratch_data block the NPU writes in): the
    program must now be in writable RAM, its command stream, weights and scratch block with it."""
    pytest.importorskip("executorch.exir")
    from pte_lab.quiet import quiet
    from tests.test_ethos_u_legacy import as_arm_backend

    before, after = tmp_path / "0_7.pte", tmp_path / "0_6.pte"
    with quiet():
        before.write_bytes(as_arm_backend(U55_SHARED, backend="EthosUBackend", scratch_in_blob=False))
        after.write_bytes(as_arm_backend(U55_SHARED, backend="EthosUBackend"))
    d = pte_lab.diff(before, after)
    (moved,) = [c for c in d.target_changes if c.what == "flash to RAM"]
    b = pte_lab.open(after).delegate_memory()[0]
    assert moved.bytes == b.command_bytes + b.weight_bytes + b.scratch_bytes > 0
    assert f"{human_bytes(moved.bytes)} (command stream and weights) must now be in RAM" in str(d)


def test_a_program_with_itself_has_its_delegates_the_same():
    d = pte_lab.diff(U55_SHARED, U55_SHARED)
    (x,) = d.delegates
    assert not x.changed and d.target_changes == () and d.methods["forward"].same
    assert "Unchanged methods (every arena, count, tensor and delegate the same): forward" in str(d)


def test_cli_fails_a_change_of_target_with_its_own_status(capsys):
    args = ["diff", str(U55_SHARED), str(U85_SRAM), "--fail-if-grows", "1000"]
    assert cli_main(args) == TARGET_CHANGED != 1
    err = capsys.readouterr().err.strip().splitlines()
    (line,) = err  # the scratch grew less than 1000%: the only failure is the target's, in one line
    assert "target ethos-u55-128 -> ethos-u85-256" in line and "must now be in RAM" not in line
    assert "--allow-target-change" in line
    assert cli_main([*args, "--allow-target-change"]) == 0
    assert cli_main(["diff", str(U55_SHARED), str(U85_SRAM)]) == 0  # no budget, no failure
    # the JSON says what the exit status says: the budget held, and the run fails unless the change is accepted
    capsys.readouterr()
    assert cli_main([*args, "--json"]) == TARGET_CHANGED
    v = json.loads(capsys.readouterr().out)["budget_verdict"]
    assert v["held"] is True and v["passes"] is False and v["text"].endswith("(said at the top)")
    assert cli_main([*args, "--json", "--allow-target-change"]) == 0
    v = json.loads(capsys.readouterr().out)["budget_verdict"]
    assert v["passes"] is True and v["text"].endswith("(said at the top; accepted: --allow-target-change)")


def test_cli_budgets_the_scratch_each_delegate_declares(capsys):
    a, b = (pte_lab.open(p).delegate_memory()[0].scratch_bytes for p in (U55_SHARED, U85_SRAM))
    assert b > a
    assert cli_main(["diff", str(U55_SHARED), str(U85_SRAM), "--fail-if-grows", "5",
                     "--allow-target-change"]) == 1
    err = capsys.readouterr().err
    assert "scratch declared by delegate call 0 of 'forward' grew" in err
    assert f"({a:,} B ({human_bytes(a)}) -> {b:,} B ({human_bytes(b)}), {b - a:+,} B)" in err  # to the byte


U55_SPLIT = DATA / "u55_128_shared_sram_split.pte"


def test_a_second_call_of_a_backend_already_linked_is_no_runner_change_and_its_scratch_is_budgeted(capsys):
    """Shared_Sram -> the same model split in two Ethos-U calls: the runner links EthosUBackend already, so
    no deployment change; the temp pool must hold the largest scratch of the two calls, which the budget
    holds (the new call has no pair)."""
    d = pte_lab.diff(U55_SHARED, U55_SPLIT)
    assert d.target_changes == ()
    largest = [pte_lab.open(p).methods["forward"].delegate_temp_bytes for p in (U55_SHARED, U55_SPLIT)]
    scratch = max(x.scratch_bytes for x in pte_lab.open(U55_SPLIT).delegate_memory())
    assert largest[1] == scratch and len(pte_lab.open(U55_SPLIT).delegate_memory()) == 2
    (row,) = [c for c in d.with_budget(5).budget() if c.what.startswith("largest delegate scratch")]
    assert (row.bytes.before, row.bytes.after) == tuple(largest) and row.kind == "scratch"
    assert cli_main(["diff", str(U55_SHARED), str(U55_SPLIT), "--fail-if-grows", "5", "--budget-on",
                     "scratch"]) == 0  # the scratch shrank; file and planned bytes grew, and are not held
    assert "runner must" not in capsys.readouterr().err


def test_a_method_gone_is_a_deployment_change(program_path, capsys):
    """A runner loads a method by name: a program without it is a change no byte budget passes."""
    three, portable = str(program_path("three_methods")), str(program_path("portable"))
    d = pte_lab.diff(three, portable)
    assert {(c.what, c.method, c.kind) for c in d.target_changes} == {
        ("method gone", n, "runner") for n in ("small", "large", "on_device")}
    assert cli_main(["diff", three, portable, "--fail-if-grows", "100000"]) == TARGET_CHANGED
    out, err = capsys.readouterr()
    assert "the second program lacks a method the first has: method 'large' only in the first program" in err
    assert "budget held: none of the " in out and "; but it does not pass: the second program lacks a method" in out
    assert cli_main(["diff", three, portable, "--fail-if-grows", "100000", "--json"]) == TARGET_CHANGED
    v = json.loads(capsys.readouterr().out)["budget_verdict"]
    assert v["exit_status"] == TARGET_CHANGED and v["passes"] is False and v["target_change_accepted"] is False
    assert cli_main(["diff", three, portable, "--fail-if-grows", "100000", "--json", "--allow-target-change"]) == 0
    v = json.loads(capsys.readouterr().out)["budget_verdict"]
    assert v["exit_status"] == 0 and v["target_change_accepted"] is True
    assert [(c.what, c.method) for c in pte_lab.diff(portable, three).target_changes] == [("method gone", "forward")]
    assert pte_lab.diff(three, three).target_changes == ()  # the added methods of a diff are no change


def test_a_budget_asked_to_hold_what_is_not_there_is_refused(program_path, capsys):
    """--budget-on kinds with no figure at all would pass whatever changed: one line, exit 2. One gate line
    serves programs with and without delegates: a kind with nothing to hold beside one that holds is said."""
    p = str(program_path("portable"))
    assert cli_main(["diff", p, p, "--fail-if-grows", "5", "--budget-on", "pools"]) == 2
    assert "--budget-on pools holds nothing here: the pools are measured only with --sizes" in capsys.readouterr().err
    assert cli_main(["diff", p, p, "--fail-if-grows", "5", "--budget-on", "scratch"]) == 2
    assert "no delegate call of either program declares a scratch" in capsys.readouterr().err
    assert cli_main(["diff", p, p, "--fail-if-grows", "5", "--budget-on", "planned", "--budget-on", "scratch"]) == 0
    out = capsys.readouterr().out
    assert "nothing to hold for scratch (no delegate call of either program declares a scratch)" in out
    assert cli_main(["diff", p, p, "--allow-target-change"]) == 2
    assert "give --fail-if-grows too" in capsys.readouterr().err
    assert cli_main(["diff", p, p, "--compact"]) == 2
    assert "--compact goes with --json" in capsys.readouterr().err


def test_inline_delegate_data_is_its_own_region_in_inspect_and_diff():
    """The same stream stored inline (ExecuTorch's serializer): the delegate's "stored" changed, its bytes
    did not, and inspect and diff give the flatbuffer the same bytes (the tables; the inline data apart)."""
    pytest.importorskip("executorch.exir")
    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary

    from pte_lab.model.layout import flatbuffer_regions
    from pte_lab.views.text import pte_text

    inline_bytes = bytes(serialize_pte_binary(deserialize_pte_binary(U55_SHARED.read_bytes()),
                                              extract_delegate_segments=False))
    seg, inline = pte_lab.open(U55_SHARED), pte_lab.open(inline_bytes)
    d = diff_programs(seg, inline)
    (x,) = d.delegates
    assert {s.what: (s.before, s.after) for s in x.changed_settings} == {"stored": ("segment", "inline")}
    assert not x.blob_bytes.changed and d.target_changes == ()
    regions = {(r.region, r.name): r.bytes for r in d.regions}
    r = flatbuffer_regions(inline)
    assert regions[("inline delegate", "EthosUBackend")].after == r["inline delegate"] == x.blob_bytes.after
    assert regions[("flatbuffer", "")].after == r["flatbuffer"] < inline.flatbuffer_size
    assert sum(r.values()) == inline.flatbuffer_size
    head = pte_text(inline).splitlines()[0]
    assert f"flatbuffer {human_bytes(r['flatbuffer'])}, inline delegate data {human_bytes(r['inline delegate'])}" in head
    doc = inline.to_dict()["file"]  # CI reads the figures diff shows: the same split, under its own key
    assert doc["flatbuffer_size"] == inline.flatbuffer_size == sum(doc["flatbuffer_size_regions"].values())
    assert doc["flatbuffer_size_regions"]["flatbuffer"] == regions[("flatbuffer", "")].after
    assert doc["flatbuffer_size_regions"]["inline delegate"] == r["inline delegate"]
    assert "the tables alone" in type(inline).flatbuffer_size.__doc__


# ------------------------------------------------------------------- what one side did not measure
def _sizes(methods: dict, skipped: dict | None = None):
    def method(planned, method_pool, temp, scratch, heap):
        parts = {"planned arenas": planned, "method allocator": method_pool, "delegate scratch": scratch,
                 "temp allocator": temp - scratch, "heap kept by load_method": heap}
        return SimpleNamespace(planned=[(1, "cpu", planned)], method_allocator=method_pool, temp_allocator=temp,
                               parts=lambda: parts)

    return SimpleNamespace(methods={n: method(*v) for n, v in methods.items()}, skipped=skipped or {},
                           executorch_version="1.5.1")


def test_a_side_not_measured_is_said_first_and_never_counted(capsys):
    """Core ML cannot run here: its side's run-time parts are not unchanged, not grown, and fail a budget."""
    d = pte_lab.diff(U55_SHARED, U55_SHARED)
    d = d.with_sizes(_sizes({}, {"forward": "CoreMLBackend is not in this executorch"}),
                     _sizes({"forward": (10240, 976, 8192, 8192, 88)}))
    text = str(d).splitlines()
    assert text[3].startswith("  not measured: 'forward' in the first program (CoreMLBackend is not in this")
    from pte_lab.views.diff import grew_and_shrank

    grew, shrank, same = grew_and_shrank(d)
    assert not [x for x in grew + shrank + same if x.kind in ("pool", "part")]
    checks = [c for c in d.budget(5) if c.unmeasured]
    assert {c.what for c in checks} == {"method pool of 'forward'", "temp pool of 'forward'"}
    assert all(c.failed and not c.exceeded for c in checks)
    (row,) = [ln for ln in text if "delegate scratch" in ln]
    assert "not measured" in row and "+" not in row


def test_a_temp_pool_that_stays_is_not_a_temp_allocator_that_grew():
    """The scratch shrank, the temp pool stayed: the pool less the scratch is not a figure that grew."""
    d = pte_lab.diff(U55_SHARED, U55_SHARED).with_sizes(_sizes({"forward": (10240, 976, 360, 144, 88)}),
                                                        _sizes({"forward": (10240, 976, 360, 48, 88)}))
    from pte_lab.views.diff import grew_and_shrank

    grew, shrank, same = grew_and_shrank(d)
    assert [x.what for x in grew] == []
    assert [x.what for x in shrank] == ["forward: delegate scratch"]
    assert "forward: temp pool" in [x.what for x in same]
    assert not any(c.failed for c in d.budget(5))


# ------------------------------------------------------------------------------------------ the picture
def test_plot_diff_counts_instructions_in_whole_numbers_and_says_what_it_leaves_out(program_path):
    """Portable against XNNPACK: XNNPACK's forward is one instruction (no -0.5 ticks), and its panel says its
    delegate's own memory is not in the picture; the portable panel has no delegate to say it of."""
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from pte_lab import plot

    d = pte_lab.diff(program_path("portable"), program_path("xnnpack"))
    assert d.methods["forward"].instructions.after == 1
    fig = plot.diff(d, "forward", 1)
    try:
        panels = [ax for ax in fig.get_axes() if "arena 1" in ax.get_title()]
        assert len(panels) == 2
        for ax in panels:
            fig.canvas.draw()
            ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
            assert ticks and all(float(t).is_integer() for t in ticks)
        notes = [[t.get_text() for t in ax.texts if t.get_gid() == "not-shown"] for ax in panels]
        assert notes[0] == []
        (note,) = notes[1]
        assert "not shown" in note and "XnnpackBackend" in note
    finally:
        plt.close(fig)


# ------------------------------------------------------------------- what a budget leaves out, and says
def test_a_budget_names_the_heap_it_did_not_budget(program_path, monkeypatch, capsys):
    """Portable -> XNNPACK with sizes: the heap kept by load_method grows (XNNPACK packs its weights there), a
    host-dependent figure no budget holds; the budget passes its exact pools and says, in one line, what it left
    out and how much each grew. XNNPACK appearing is a runner change: the runner must now link it."""
    from pte_lab.runtime.sizing import results

    def fake(d, a, b, **_):  # the shape of two pte_lab.sizes results (real sizing takes minutes)
        return d.with_sizes(_sizes({"forward": (69632, 2252, 280, 0, 0)}),
                            _sizes({"forward": (1664, 584, 0, 0, 126976)}),
                            host_dependent=results.MEASURED_PARTS)

    monkeypatch.setattr("pte_lab.runtime.sizing.sized_diff", fake)
    args = ["diff", str(program_path("portable")), str(program_path("xnnpack")), "--sizes", "--fail-if-grows", "1000"]
    assert cli_main([*args, "--allow-target-change"]) == 0
    out = capsys.readouterr().out
    budget = out[out.index("Budget: nothing may grow"):]
    assert budget.splitlines()[1].startswith("  budget held: none of the ")  # its verdict first
    assert "verdict" in budget.splitlines()[2]  # the last column is named
    assert ("not budgeted (this host's heap, moves with CPU and run): heap kept by load_method +124 KiB"
            in budget)
    assert cli_main(args) == TARGET_CHANGED
    (line,) = capsys.readouterr().err.strip().splitlines()[-1:]
    assert "backend XnnpackBackend only in the second program: the runner must now link XnnpackBackend" in line
    assert cli_main([*args, "--json"]) == TARGET_CHANGED
    doc = json.loads(capsys.readouterr().out)
    (left,) = doc["not_budgeted"]
    assert left["part"] == "heap kept by load_method" and left["bytes"]["delta"] == 126976
    assert "heap kept by load_method" not in {c["what"] for c in doc["budget"]}
    (change,) = doc["target_changes"]
    assert change["what"] == "backend" and change["kind"] == "runner"


def test_a_budget_failure_and_a_target_change_both_named_the_target_status_wins(capsys):
    args = ["diff", str(U55_SHARED), str(U85_SRAM), "--fail-if-grows", "5"]
    assert cli_main(args) == TARGET_CHANGED
    err = capsys.readouterr().err.strip().splitlines()
    assert [ln.split(":")[1].strip() for ln in err] == ["budget exceeded", "the delegates changed where the program runs"]


def test_each_figure_is_said_once_with_sizes():
    """The method pool is the method allocator, the planned buffers are the plan, the one arena is the method's
    planned bytes: what grew and shrank names each figure once."""
    from pte_lab.views.diff import grew_and_shrank

    d = pte_lab.diff(U55_SHARED, U55_SHARED).with_sizes(_sizes({"forward": (10240, 976, 360, 144, 88)}),
                                                        _sizes({"forward": (10240, 584, 0, 0, 88)}))
    grew, shrank, same = grew_and_shrank(d)
    names = [x.what for x in grew + shrank + same]
    assert len(names) == len(set(names))
    assert [x.what for x in shrank] == ["forward: method pool", "forward: temp pool", "forward: delegate scratch"]
    assert "forward: arena 1 (cpu) = planned bytes" in names
    assert not [n for n in names if "method allocator" in n or "planned buffers" in n or "all methods" in n]


def test_several_methods_say_their_planned_bytes_are_a_sum_and_what_the_loaders_allocate(program_path):
    d = pte_lab.diff(program_path("shared_state"), program_path("shared_state"))  # prefill and decode
    assert d.many_methods
    head = str(d).splitlines()[1]
    assert "planned bytes, summed over methods" in head and "what the loaders allocate: load_program" in head
    assert "planned bytes, summed over methods" in {c.what for c in d.budget(5)}


def test_inspect_and_diff_name_size_over_peak_alike(capsys):
    """One name for size/peak in both JSON documents (inspect keeps version 1's efficiency beside it)."""
    (arena,) = pte_lab.open(U55_SHARED).to_dict()["methods"]["forward"]["arenas"]
    (diffed,) = pte_lab.diff(U55_SHARED, U55_SRAM).to_dict()["methods"]["forward"]["arenas"]
    assert arena["size_over_peak"] == arena["efficiency"] == diffed["size_over_peak"]["before"]
    assert cli_main(["inspect", str(U55_SHARED)]) == 0
    text = capsys.readouterr().out
    assert "declared by the delegate blob" in text and "from the delegate blob" not in text
    assert "peak live 10.0 KiB" in text


# ------------------------------------------------------------------- the budget, in text, JSON and HTML alike
def _budget_rows_html(page: str) -> tuple[str, list[list[str]]]:
    """The budget section of a diff's HTML: its verdict line and its table's rows, as a reader sees them."""
    import html
    import re

    body = page.split("</pre>", 1)[1]  # past the text fallback
    section = body[body.index("Budget: nothing may grow"):]
    (verdict,) = re.findall(r"<div class='pte-find pte-(?:ok|error)'>(.*?)</div>", section)
    rows = [[html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr)]
            for tr in re.findall(r"<tr>(.*?)</tr>", section.split("<tbody>", 1)[1].split("</tbody>", 1)[0])]
    return html.unescape(verdict), rows


def _budget_rows_text(out: str) -> tuple[str, list[list[str]]]:
    """The budget of a diff's text: its verdict line and its table's rows (columns split where 2 spaces are)."""
    import re

    lines = out[out.index("Budget: nothing may grow"):].splitlines()
    rows = [re.split(r"\s{2,}", ln.strip()) for ln in lines[4:] if not ln.startswith("  not budgeted")]
    return lines[1].strip(), rows


def test_the_budget_is_the_same_in_text_json_and_html(monkeypatch, capsys):
    """`pte-lab diff A B --fail-if-grows 5` as text, --json and --html: the same rows, each quantity once (a
    method's planned buffers are its planned bytes), the same verdict; the heap no budget holds is named under
    the table, and a side that was not measured is said in each."""
    from html import unescape

    from pte_lab.runtime.sizing import results

    def sized(first, second):
        def fake(d, a, b, **_):  # the shape of two pte_lab.sizes results (real sizing takes minutes)
            return d.with_sizes(first, second, host_dependent=results.MEASURED_PARTS)
        return fake

    def run(*extra):
        outs = {}
        for how in ("text", "--json", "--html"):
            assert cli_main(args + list(extra) + ([] if how == "text" else [how])) == 1
            outs[how] = capsys.readouterr().out
        return (*_budget_rows_text(outs["text"]), json.loads(outs["--json"]), *_budget_rows_html(outs["--html"]),
                outs)

    args = ["diff", str(U55_SHARED), str(U85_SRAM), "--fail-if-grows", "5", "--allow-target-change"]
    verdict, rows, doc, html_verdict, html_rows, outs = run()
    assert [r[0] for r in rows] == [c["what"] for c in doc["budget"]] == [r[0] for r in html_rows] == [
        "file bytes", "planned bytes of 'forward'", "scratch declared by delegate call 0 of 'forward'"]
    assert verdict == doc["budget_verdict"]["text"] == html_verdict == (
        "budget exceeded: 1 of 3 figures grew more than 5% (scratch declared by delegate call 0 of 'forward'); "
        "and the delegates changed where the program runs (said at the top; accepted: --allow-target-change)")
    assert [r[-1] for r in rows] == [r[-1] for r in html_rows] == [
        "EXCEEDED" if c["exceeded"] else "ok" for c in doc["budget"]] == ["ok", "ok", "EXCEEDED"]
    assert [r[1:4] for r in rows] == [r[1:4] for r in html_rows]  # before, after, growth
    assert outs["--html"].startswith("<!doctype html>")
    assert "<div class='pte-find pte-error'>" in outs["--html"]  # a failed budget says so, in the error style
    assert cli_main(["diff", str(U55_SHARED), str(U55_SHARED), "--fail-if-grows", "5", "--html"]) == 0
    held, _ = _budget_rows_html(capsys.readouterr().out)
    assert held == "budget held: none of the 3 figures grew more than 5%"

    monkeypatch.setattr("pte_lab.runtime.sizing.sized_diff",  # both measured: the heap grew, not budgeted
                        sized(_sizes({"forward": (10240, 976, 8192, 8192, 88)}),
                              _sizes({"forward": (10240, 976, 8192, 8192, 4184)})))
    verdict, rows, doc, html_verdict, html_rows, outs = run("--sizes")
    whats = [c["what"] for c in doc["budget"]]
    assert len(whats) == len(set(whats)) and not [w for w in whats if "planned buffers" in w]
    assert [r[0] for r in rows] == whats == [r[0] for r in html_rows]
    assert whats[-2:] == ["method pool of 'forward'", "temp pool of 'forward'"]
    assert html_verdict == verdict == doc["budget_verdict"]["text"]
    left = "not budgeted (this host's heap, moves with CPU and run): heap kept by load_method +4.0 KiB"
    assert left in outs["text"] and left in unescape(outs["--html"]) and doc["not_budgeted"][0]["bytes"]["delta"] == 4096

    monkeypatch.setattr("pte_lab.runtime.sizing.sized_diff",  # the first could not run its method (Core ML here)
                        sized(_sizes({}, {"forward": "CoreMLBackend is not in this executorch"}),
                              _sizes({"forward": (10240, 976, 8192, 8192, 88)})))
    verdict, rows, doc, html_verdict, html_rows, outs = run("--sizes")
    assert [r[0] for r in rows] == [c["what"] for c in doc["budget"]] == [r[0] for r in html_rows] == whats
    assert verdict == doc["budget_verdict"]["text"] == html_verdict and doc["budget_verdict"]["unmeasured"] == 2
    assert "not held: 2 of 5 figures not measured on a side (method pool of 'forward'; temp pool" in verdict
    assert html_rows[-1][1:3] == rows[-1][1:3] == ["not measured", exact_bytes(8192)]
    assert html_rows[-1][-1] == rows[-1][-1] == "NOT MEASURED (first)"
    assert "not measured: 'forward' in the first program" in unescape(outs["--html"])  # said at the top, too


def test_a_diff_held_to_a_budget_shows_it_in_a_notebook():
    d = pte_lab.diff(U55_SHARED, U85_SRAM)
    assert "Budget: nothing may grow" not in d._repr_html_() and "Budget" not in str(d)
    held = d.with_budget(5)
    assert "Budget: nothing may grow more than 5%" in held._repr_html_().split("</pre>", 1)[1]
    text = str(held)  # the report as it was, then the budget
    assert text.startswith(str(d)) and text[len(str(d)):].startswith("\n\nBudget: nothing may grow more than 5%")
    assert [c.what for c in held.budget()] == [c.what for c in d.budget(5)]
    with pytest.raises(ValueError, match="no budget"):
        d.budget()


def test_diff_with_sizes_gives_each_sides_total_per_target(program_path, capsys):
    """Which of two exports needs less: one total per side and target, the figure ``pte-lab sizes`` gives,
    not a sum the user makes from the parts (the outside check of issue 45, Q3)."""
    a, b = str(program_path("portable")), str(program_path("xnnpack"))
    d = pte_lab.diff(a, b, sizes=True)
    sa, sb = pte_lab.sizes(a), pte_lab.sizes(b)
    totals = {(p.method, p.part): (p.bytes.before, p.bytes.after) for p in d.sizes.totals}
    for target in ("host", "bare-metal"):
        want_a = sa.methods["forward"].totals()[target].bytes
        want_b = sb.methods["forward"].totals()[target].bytes
        got = totals[("forward", f"total ({target})")]
        if target == "bare-metal":  # the portable side exact; the XNNPACK side its pools and XNNPACK's own heap,
            mb = sb.methods["forward"]  # this host's figure (it moves from run to run: never asserted as a band)
            assert got[0] == want_a
            assert got[1] > sum(x for _, _, x in mb.planned) + mb.method_allocator + mb.temp_allocator
        else:  # this host's heap moves from run to run
            assert all(g > 0 for g in got) and want_a > 0 and want_b > 0
    assert cli_main(["diff", a, b, "--sizes"]) == 0
    out = capsys.readouterr().out
    assert "Totals (each method's, per target both programs run on, as pte-lab sizes gives them)" in out
    # each total says its target and loader (portable and XNNPACK both run on a board and in an app)
    assert "total in an app or on this host (FileDataLoader)" in out
    assert "total on a bare-metal board (BufferDataLoader over the program in flash)" in out
    assert cli_main(["diff", a, b, "--sizes", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {t["total"] for t in doc["sizes"]["totals"]} == {"total (host)", "total (bare-metal)"}
    assert all(t["applies"] and t["basis"][1] == "measured-here" for t in doc["sizes"]["totals"])
