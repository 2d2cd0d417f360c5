"""The loader fix's before/after experiment, on CPU with the emulated device."""

from __future__ import annotations

import json
import sys

import pytest

pytest.importorskip("executorch.runtime")

from pte_lab.experiments import device_placement as dp

SIDE = 64


@pytest.fixture(scope="session")
def after_report(tmp_path_factory):
    return dp.run(side=SIDE, runtimes={"after": sys.executable}, workdir=tmp_path_factory.mktemp("dp"),
                  emulate=True)


def test_corrected_runtime_places_the_arena_on_the_device(after_report):
    (r,) = after_report.runtimes
    assert r.failure is None and r.executorch_version.startswith("1.5")
    assert "emulated" in r.measured_by
    planned = after_report.planned_device_bytes
    assert planned == 3 * SIDE * SIDE * 4 + 64  # three side x side float32 tensors + XNNPACK padding
    assert r.step("load_program")["device_bytes"] == 0
    assert r.step("load_method forward")["device_bytes"] == 0
    assert r.step("load_method forward2")["device_bytes"] == planned  # exactly, at load_method
    for s in ("execute forward2", "execute forward", "execute forward2 again"):
        assert r.step(s)["correct"] is True and r.step(s)["error"] is None
    assert r.step("release")["device_bytes"] == -planned  # everything comes back


def test_report_views(after_report, tmp_path):
    (r,) = after_report.runtimes
    measured = [s["step"] for s in r.steps]
    df = after_report.table()
    assert list(df.index) == measured  # every step the run recorded, in the order it ran
    tag = f"after ({r.executorch_version})"
    for s in r.steps:  # each row shows what was measured at that step
        assert (df.loc[s["step"], f"{tag} device bytes"], df.loc[s["step"], f"{tag} host bytes"]) == \
            (s["device_bytes"], s["host_bytes"]), s["step"]
    assert df.loc["load_method forward2", f"{tag} device bytes"] == after_report.planned_device_bytes
    assert "published after (A100)" in df.columns  # reference data, labelled as such
    md = after_report.to_markdown()
    assert "emulated device ledger" in md and "Not measured here" in md
    doc = json.loads(after_report.to_json(tmp_path / "r.json"))
    assert doc["schema"] == "pte_lab.device_placement" and (tmp_path / "r.json").exists()
    assert doc["runtimes"][0]["steps"] == r.steps  # the measurements themselves, as measured
    # this run's planned bytes, not the published run's (48 MiB on an A100), which stay apart
    assert doc["planned_device_bytes"] == after_report.planned_device_bytes != doc["published"]["planned_device_bytes"]
    html = after_report._repr_html_()
    assert "not measured here" in html.lower()
    text = repr(after_report)  # what a saved notebook and a terminal show: one short line, not the dataclass
    assert text.startswith("<Report: ") and "side 64" in text and len(text) < 300
    import matplotlib

    matplotlib.use("Agg")
    axes = after_report.plot()
    assert len(axes) == 2
    for ax, key in zip(axes, ("device_bytes", "host_bytes")):  # one bar per step: its measured bytes
        assert [p.get_height() for p in ax.patches] == [s[key] or 0 for s in r.steps], key


@pytest.mark.slow
def test_legacy_runtime_keeps_the_arena_on_the_host(legacy_python, tmp_path):
    report = dp.run(side=SIDE, runtimes={"before": legacy_python, "after": sys.executable},
                    workdir=tmp_path, emulate=True)
    before, after = report.runtimes
    assert before.failure is None, before.failure
    assert before.executorch_version == "1.4.1"
    assert before.step("load_method forward2")["device_bytes"] == 0  # its arena sits in host memory
    assert all((s["device_bytes"] or 0) == 0 for s in before.steps)
    assert after.step("load_method forward2")["device_bytes"] == report.planned_device_bytes
    # the pre-fix loader allocates every method's arenas at load_program, on the host: the device arena
    # too. Both processes count every host allocation exactly (the counter preloaded), so the difference
    # is that arena, to within what the two versions' load_program keeps besides (its own bookkeeping:
    # fixed-size records of the runtime, no kernel or XNNPACK workspace, the same on every CPU)
    assert before.host_measured_by.startswith("exact") and after.host_measured_by.startswith("exact")
    extra = before.step("load_program")["host_bytes"] - after.step("load_program")["host_bytes"]
    assert abs(extra - report.planned_device_bytes) < 1024, extra


def test_the_figure_cuts_one_bar_that_would_squash_the_rest():
    """executorch 1.4.1's first `execute forward` keeps ~9 MiB (MKL's sgemm buffers, see notebook 04) where
    everything else is under 2 MiB: the host axis stops above the others and that bar says its value."""
    import matplotlib

    matplotlib.use("Agg")
    planned = 786_496
    host = {"load_program": (1_573_944, 787_496), "execute forward": (9_527_872, 262_512),
            "release": (-1_580_504, -1_319_504)}
    runtimes = []
    for i, label in enumerate(("before", "after")):
        r = dp.RuntimeResult(label, "python", "1.4.1" if i == 0 else "1.5.1", "emulated device ledger",
                             "exact (allocation counter)")
        r.steps = [{"step": s, "device_bytes": planned if (i, s) == (1, "load_method forward2") else 0,
                    "host_bytes": host.get(s, (0, 0))[i], "correct": None, "error": None} for s in dp.STEPS]
        runtimes.append(r)
    axes = dp.Report(256, "cuda:0", planned, runtimes).plot()
    assert axes[1].get_ylim()[1] < 3 * 1_573_944  # the comparison keeps its scale
    assert [t.get_text() for t in axes[1].texts] == ["9.1 MiB, axis cut"]
    assert axes[0].get_legend() is None and axes[0].figure.legends  # one legend, below the panels
    assert axes[0].get_ylim()[1] >= planned and not axes[0].texts[1:]


def test_the_kept_executorch_1_4_1_figures_are_this_program_s_and_say_where_they_come_from():
    """Notebooks 04 and 06 show these where executorch 1.4.1's environment is missing (never making it): the
    "before" column measured once with 1.4.1, and 1.4.1's export of the device program. They must be 1.4.1's
    figures for the very program the notebooks export here, and say they were not measured here."""
    import pte_lab
    from pte_lab import examples

    basis = dp.kept_basis()
    assert basis.endswith("not here") and "executorch 1.4.1" in basis
    before = dp.kept_before(256)  # notebook 04's SIDE
    assert before.label == "before" and before.executorch_version == "1.4.1" and before.failure is None
    assert [s["step"] for s in before.steps] == dp.STEPS and basis in before.notes[0]
    assert "pte-lab legacy-env" in before.notes[0]  # the one command that measures it here
    assert all((s["device_bytes"] or 0) == 0 for s in before.steps)  # the old loader: nothing on the device
    assert all(s["correct"] for s in before.steps if s["step"].startswith("execute"))
    # load_program took every arena of the program on the host, the device's too: pte_lab's legacy loader
    program = pte_lab.open(examples.kept_path("device", side=256))
    predicted = program.load_cost("legacy").query("step == 'load_program'")
    assert set(predicted.device) == {"cpu"} and len(predicted) == 2
    assert before.step("load_program")["host_bytes"] >= int(predicted.bytes.sum())
    # 06: 1.4.1's exporter wrote the same bytes as this 1.5.1 (re-record with benchmarks/record_legacy.py if not)
    kept = dp.kept_legacy_export(side=64)
    assert kept.read_bytes() == examples.kept_path("device", side=64).read_bytes()
    with pytest.raises(ValueError, match="pte-lab legacy-env"):
        dp.kept_before(2048)
