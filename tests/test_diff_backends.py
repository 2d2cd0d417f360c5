"""An iOS developer's diff: one model exported for Core ML and for XNNPACK (tests/data/apple, made by its
export.py with ExecuTorch 1.5.1 and coremltools 9.0). Delegate calls are paired within a backend; a change of
backend is one row that says so, each side with what its blob and compile specs say (Core ML's deployment
target "6" named iOS 15), and no byte of one backend's blob compared with the other's."""

from __future__ import annotations

import html
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

import pte_lab
from pte_lab.cli import TARGET_CHANGED, main as cli_main
from pte_lab.model.backends import BACKEND_NOTES, SettingSource, backend_note
from pte_lab.model.diff import pair_delegates
from pte_lab.units import human_bytes

DATA = Path(__file__).parent / "data" / "apple"
COREML = DATA / "focus_coreml.pte"
XNNPACK = DATA / "focus_xnnpack.pte"


def test_core_ml_settings_are_read_and_named():
    (d,) = pte_lab.open(COREML).methods["forward"].delegate_memory
    c = d.contents
    got = {s.what: (s.value, s.stored, s.source) for s in c.settings}
    assert got["deployment target"] == ("iOS 15 / macOS 12", "6", SettingSource.COMPILE_SPEC)
    assert got["compute units"] == ("CPU and Neural Engine", "cpu_and_ne", SettingSource.COMPILE_SPEC)
    assert got["precision"] == ("float16", "float16", SettingSource.COMPILE_SPEC)
    assert got["Core ML specification"][1:] == ("6", SettingSource.BLOB)  # read from the model file in the blob
    parts = {p.part: p.bytes for p in c.parts}
    assert set(parts) == {"model", "weights", "debug files"} and sum(parts.values()) < d.blob_bytes
    assert parts["weights"] >= 2 * (16 * 12 * 9 + 8 * 16 * 9)  # the convolutions' weights, in float16 at least


def test_xnnpack_header_is_read():
    (d,) = pte_lab.open(XNNPACK).methods["forward"].delegate_memory
    parts = {p.part: p.bytes for p in d.contents.parts}
    assert set(parts) == {"graph", "constant data"} and 0 < parts["graph"] < d.blob_bytes
    assert parts["constant data"] == 0  # the weights are the program's named data, not the blob's


def test_a_change_of_backend_is_one_row_that_says_so(capsys):
    d = pte_lab.diff(COREML, XNNPACK)
    (x,) = d.delegates
    assert x.backend_changed and x.byte_changes == ()  # 40.9 KiB of Core ML is not "-95%" of an XNNPACK blob
    assert [c.what for c in d.target_changes] == ["backend"]  # not "precision float16 -> not recorded"
    text = str(d)
    (head,) = [ln for ln in text.splitlines() if "delegate call 0" in ln and "->" in ln and "backend" in ln
               and "(another backend" in ln]
    assert "backend CoreMLBackend -> XnnpackBackend" in head
    first = next(ln for ln in text.splitlines() if ln.strip().startswith("first:"))
    assert "deployment target iOS 15 / macOS 12" in first and "compute units CPU and Neural Engine" in first
    assert "precision float16" in first and '"6"' not in first
    second = next(ln for ln in text.splitlines() if ln.strip().startswith("second:"))
    assert "XnnpackBackend" in second and "graph" in second
    assert not [ln for ln in text.splitlines() if ln.strip().startswith("blob ") and "%" in ln]
    assert cli_main(["diff", str(COREML), str(XNNPACK), "--json"]) == 0
    (rec,) = json.loads(capsys.readouterr().out)["methods"]["forward"]["delegates"]
    assert rec["backend_changed"] is True and rec["bytes"] == {}
    target = {s["what"]: s for s in rec["sides"]["before"]["settings"]}["deployment target"]
    assert target == {"what": "deployment target", "value": "iOS 15 / macOS 12", "stored": "6",
                      "source": "compile spec"}
    assert "backend CoreMLBackend -> XnnpackBackend" in html.unescape(pte_lab.diff(COREML, XNNPACK)._repr_html_())


def test_a_deployment_target_change_is_a_change_no_budget_passes(tmp_path, capsys):
    """The same Core ML program with its minimum deployment target raised to iOS 17: the app's older devices
    no longer run it, which --fail-if-grows reports whatever the bytes did."""
    data = COREML.read_bytes()
    at = data.index(b"\x01\x00\x00\x006")  # its value: a one-byte vector, "6" (the only one in the file)
    assert data.count(b"\x01\x00\x00\x006") == 1
    later = tmp_path / "ios17.pte"
    later.write_bytes(data[:at + 4] + b"8" + data[at + 5:])
    d = pte_lab.diff(COREML, later)
    (x,) = d.delegates
    assert not x.backend_changed
    (c,) = d.target_changes
    assert (c.what, c.before, c.after, c.kind) == ("deployment target", "iOS 15 / macOS 12", "iOS 17 / macOS 14",
                                                   "board")
    assert cli_main(["diff", str(COREML), str(later), "--fail-if-grows", "5"]) == TARGET_CHANGED
    assert "deployment target iOS 15 / macOS 12 -> iOS 17 / macOS 14" in capsys.readouterr().err


def _method(name, backends):
    """A method-like object calling one delegate per backend, in that order."""
    mems = [SimpleNamespace(backend=b, contents=None, blob_bytes=100 * (i + 1), command_bytes=None,
                            weight_bytes=None, scratch_bytes=None, stream=None)
            for i, b in enumerate(backends)]
    instructions = [SimpleNamespace(kind="DelegateCall", target=i) for i in range(len(backends))]
    return SimpleNamespace(name=name, delegate_memory=mems,
                           raw=SimpleNamespace(instructions=instructions, delegates=[SimpleNamespace(id=b) for b in backends]))


def test_calls_pair_within_their_backend():
    """[Core ML, XNNPACK] -> [XNNPACK, XNNPACK]: XNNPACK's first call pairs with XNNPACK's first call (not with
    Core ML's, which came first); Core ML's call and the second XNNPACK call are one change of backend."""
    a, b = _method("forward", ["CoreMLBackend", "XnnpackBackend"]), _method("forward", ["XnnpackBackend"] * 2)
    rows = pair_delegates(a, b)
    got = [((x.before.backend, x.before.blob_bytes) if x.before else None,
            (x.after.backend, x.after.blob_bytes) if x.after else None) for x in rows]
    assert got == [(("CoreMLBackend", 100), ("XnnpackBackend", 200)),
                   (("XnnpackBackend", 200), ("XnnpackBackend", 100))]
    assert [x.backend_changed for x in rows] == [True, False] and [x.call for x in rows] == [0, 1]
    one = pair_delegates(_method("f", ["XnnpackBackend"] * 2), _method("f", ["XnnpackBackend"]))
    assert [(x.before is not None, x.after is not None) for x in one] == [(True, True), (True, False)]


def test_each_backend_says_what_is_known_and_what_is_not(capsys):
    """One line per backend in inspect: Core ML's planned and blob bytes are known, what it allocates inside is
    not, and how to measure that on the device."""
    for b in ("CoreMLBackend", "XnnpackBackend", "EthosUBackend", "QnnBackend", "VulkanBackend", "MPSBackend",
              "OpenvinoBackend"):
        note = BACKEND_NOTES[b]
        assert note.known and note.unknown and "on the" in note.measure
    assert backend_note("SomeoneElsesBackend").unknown.startswith("everything")
    assert cli_main(["inspect", str(COREML)]) == 0
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if ln.strip().startswith("backend CoreMLBackend")]
    assert "known: the planned arenas and the blob's bytes" in line
    assert "not known: what Core ML allocates inside" in line and "float16" in line
    assert "Instruments" in line and "os_proc_available_memory" in line
    assert "`pte-lab sizes FILE` measures them" not in out  # sizes cannot run Core ML here
    assert cli_main(["inspect", str(XNNPACK)]) == 0
    out = capsys.readouterr().out
    assert "backend XnnpackBackend (XNNPACK): known: " in out and "`pte-lab sizes FILE` measures them" in out


@pytest.mark.parametrize("path", [COREML, XNNPACK])
def test_inspect_shows_what_the_blob_holds(path, capsys):
    assert cli_main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    (blob,) = [ln for ln in out.splitlines() if ln.strip().startswith("blob:")]
    assert ("Core ML specification 6 (iOS 15" in blob) if path == COREML else ("graph" in blob)


def test_operators_left_before_the_first_delegate_call_are_a_finding_with_their_bytes():
    """XNNPACK did not take the Focus layer's 8 strided slices, which run before its one call: a finding names
    them, where they run, and the bytes at stake (alive at the peak, and planned), read from the plan."""
    from pte_lab.model.findings import Kind, OutsideDelegateDetails

    m = pte_lab.open(XNNPACK).methods["forward"]
    (f,) = [f for f in m.findings() if f.kind == Kind.OUTSIDE_DELEGATE]
    d = f.details
    assert isinstance(d, OutsideDelegateDetails) and d.backends == ("XnnpackBackend",)
    (op,) = d.operators
    assert op.operator == "aten::slice_copy.Tensor_out" and op.where == "before the first delegate call"
    assert len(op.instructions) == 8
    slices = [t for t in m.planned if t.op == "aten::slice_copy.Tensor_out"]
    assert op.planned == d.planned == sum(t.nbytes for t in slices) > 0
    peak = m.peak
    alive = sum(t.nbytes for t in slices if t.first <= peak.at <= t.last)
    assert f.at_stake == op.at_peak == alive > 0
    assert f"{human_bytes(alive)} alive at the peak" in f.message and "before the first delegate call" in f.message
    assert not [f for f in pte_lab.open(COREML).methods["forward"].findings() if f.kind == Kind.OUTSIDE_DELEGATE]


# ------------------------------------------------------------------------------- loaders, as an app meets them
def test_inspect_says_which_loader_each_api_behaves_as(capsys):
    """Python's three loaders against the mobile APIs: an iOS or Android app's Module allocates arenas as
    _load_for_executorch does, and reads the program by its Module::LoadMode (File by default)."""
    from pte_lab.model.load_cost import LOADERS, MODULE_LOAD_MODES, PROGRAM_APIS, DataLoaderKind

    assert {a.arenas_as for a in PROGRAM_APIS} == set(LOADERS)
    mobile = [a for a in PROGRAM_APIS if a.api.startswith(("iOS", "Android", "C++"))]
    assert len(mobile) == 3 and {a.arenas_as for a in mobile} == {"module"}
    assert [m.name for m in MODULE_LOAD_MODES][:4] == ["File", "Mmap", "MmapUseMlock", "MmapUseMlockIgnoreErrors"]
    (default,) = [m for m in MODULE_LOAD_MODES if m.default]
    assert default.name == "File" and default.data_loader is DataLoaderKind.FILE
    assert cli_main(["inspect", str(XNNPACK)]) == 0
    out = capsys.readouterr().out
    (module,) = [ln for ln in out.splitlines() if ln.strip().startswith("module ")]
    assert "_load_for_executorch" in module and "iOS ExecuTorchModule" in module and "Android" in module
    (modes,) = [ln for ln in out.splitlines() if "Module::LoadMode" in ln]
    assert "File (the default) = FileDataLoader" in modes and "MmapUseMlock = MmapDataLoader" in modes


def test_sizes_names_what_it_cannot_know_of_core_ml(capsys):
    """Core ML does not run here: sizes says what the file gives, and the backend's line what is not known and
    how to measure it on the device."""
    assert cli_main(["sizes", str(COREML)]) != 0
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("backend CoreMLBackend")]
    assert "not known: what Core ML allocates inside" in line and "os_proc_available_memory" in line


def test_sizes_rows_name_their_loader():
    """The host rows are the program mapped; the FileDataLoader an app's Module uses by default is its own
    line: the rows say which they are."""
    from pte_lab.views.runtime.sizes import sizes_text

    text = sizes_text(pte_lab.sizes(XNNPACK))
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("rows measured with the program mapped"))
    assert "heap kept by load_method" in "\n".join(lines[at:at + 6])
    assert "LoadMode Mmap (iOS .mmap, Android LOAD_MODE_MMAP)" in lines[at]
    assert "reads with a FileDataLoader by default (LoadMode File)" in lines[at]
    assert any(ln.startswith("heap outside the pools (the counter), FileDataLoader(") for ln in lines[at:])


# ------------------------------------------------------------------- the diff a user runs on the two exports
def test_a_size_change_of_exirs_padding_is_said_as_that(tmp_path):
    """The XNNPACK export's arena with and without exir's 64 B tail past its last tensor (the same plan, the
    same peak): the size change is said as that padding, not as a plan that packs its tensors differently; the
    Core ML export against it says the padding beside the growth of the peak."""
    import struct

    data = XNNPACK.read_bytes()
    size = pte_lab.open(XNNPACK).methods["forward"].arena(1).size
    assert data.count(struct.pack("<q", size)) == 1  # non_const_buffer_sizes[1]
    bare = tmp_path / "no_tail.pte"
    bare.write_bytes(data.replace(struct.pack("<q", size), struct.pack("<q", size - 64)))
    d = pte_lab.diff(bare, XNNPACK)
    a = d.methods["forward"].arena(1)
    assert a.peak.delta == 0 and a.size.delta == a.padding.delta == 64 and a.padding.before == 0
    (line,) = [ln for ln in str(d).splitlines() if ln.strip().startswith("arena 1:")]
    assert "with peak live unchanged" in line and "exir's padding past the last tensor 0 B -> 64 B" in line
    assert "XnnpackBackend" in line and "packs its tensors differently" not in line
    (line,) = [ln for ln in str(pte_lab.diff(XNNPACK, bare)).splitlines() if ln.strip().startswith("arena 1:")]
    assert "64 B -> 0 B" in line and "packs its tensors differently" not in line
    other = pte_lab.diff(COREML, XNNPACK).methods["forward"].arena(1)
    assert other.padding.before == 0 and other.padding.after == 64
    (line,) = [ln for ln in str(pte_lab.diff(COREML, XNNPACK)).splitlines() if ln.strip().startswith("arena 1:")]
    assert "of the size, exir's padding past the last tensor 0 B -> 64 B" in line


@pytest.fixture(scope="module")
def sized():
    """The two exports diffed with --sizes: Core ML cannot run here, XNNPACK is measured."""
    return pte_lab.diff(COREML, XNNPACK, sizes=True)


def test_a_side_that_cannot_run_keeps_what_its_file_says(sized):
    """sizes prints Core ML's planned arena from its file; diff --sizes shows it too, with its basis, and only
    what running measures is 'not measured'."""
    parts = {p.part: p for p in sized.sizes.parts}
    planned = parts["planned arenas"]
    arenas = {a.mem_id: a for a in sized.methods["forward"].arenas}
    assert (planned.bytes.before, planned.bytes.after) == (arenas[1].size.before, arenas[1].size.after)
    assert planned.unmeasured is None and planned.basis == ("file", "file")
    assert parts["method allocator"].unmeasured == "first" and parts["method allocator"].basis == (None, "runner")
    text = str(sized).splitlines()
    (row,) = [ln for ln in text if ln.strip().startswith("forward  planned arenas")]
    assert "not measured" not in row and row.split()[-1] == "file"
    (row,) = [ln for ln in text if ln.strip().startswith("forward  method allocator")]
    assert "not measured" in row
    assert ("first", "forward") in sized.sizes.cannot_run_here


def test_totals_name_their_target_and_leave_out_one_core_ml_cannot_run_on(sized, capsys):
    """An iOS comparison: no bare-metal total (XNNPACK's holds a host heap and Core ML runs in an app only);
    the app's total names its loader and basis."""
    text = str(sized)
    totals = text[text.index("Totals ("):text.index("Which backend")]
    assert "total in an app or on this host (FileDataLoader)" in totals and "measured-here" in totals
    assert "bare-metal board (" not in totals
    assert "no total on a bare-metal board: CoreMLBackend runs only in an OS process" in totals
    doc = sized.to_dict()
    got = {t["target"]: t for t in doc["sizes"]["totals"]}
    assert got["host"]["applies"] and not got["bare-metal"]["applies"]
    assert got["host"]["loader"].startswith("FileDataLoader") and got["host"]["basis"] == [None, "measured-here"]


def test_one_verdict_line_per_backend_says_what_is_known_and_what_is_not(sized):
    """Which backend needs less memory, without adding by hand: per side the planned and delegate bytes (file)
    and what was measured here; what each backend allocates on the device is not known, and said so."""
    lines = str(sized).splitlines()
    at = lines.index("Which backend needs less memory (what is known of each side, and what is not)")
    first, second, verdict = (ln.strip() for ln in lines[at + 1:at + 4])
    assert first.startswith("first  (CoreMLBackend): known: planned ") and "(file)" in first
    assert "measured here: nothing: it cannot run here" in first and "not known: Core ML: what Core ML" in first
    assert second.startswith("second (XnnpackBackend): known: ") and "named data" in second
    assert "total of 'forward' on this host with a FileDataLoader" in second
    v = sized.to_dict()["backend_verdict"]
    a, b = v["first"], v["second"]
    assert a["from_file"] == a["planned"] + a["delegate_bytes"] and a["measured_here"] is None
    # of Core ML's known bytes, its blob's debug files are said for what they are (not the model); XNNPACK has none
    (d,) = pte_lab.open(COREML).methods["forward"].delegate_memory
    debug = {p.part: p.bytes for p in d.contents.parts}["debug files"]
    assert a["debug_bytes"] == debug > 0 and b["debug_bytes"] == 0
    assert f"of the blobs, ExecuTorch's debug files {human_bytes(debug)} (the profiler's map" in first
    assert "debug files" not in second
    assert b["measured_here"] > b["planned"]
    assert v["compared"] == "file" and (v["before"], v["after"]) == (a["from_file"], b["from_file"])
    assert v["less"] == ("second" if b["from_file"] < a["from_file"] else "first")
    assert verdict == f"verdict: {v['text']}" and f"the {v['less']} needs " in verdict
    assert "which needs less in all is not known here" in verdict and "CoreMLBackend" in v["unknown"]
    # what only the second was measured to need (XNNPACK's heap, here) is said first, not the file's difference
    assert verdict.startswith(f"verdict: the second also needs {human_bytes(b['heap_here'])} of heap measured here")
    assert "which the first's unknown Core ML memory may or may not exceed; beside that, of what both" in verdict
    assert "which does not decide it" in verdict
    assert pte_lab.diff(XNNPACK, XNNPACK).to_dict()["backend_verdict"] is None  # one backend: nothing to weigh


def test_cannot_run_here_is_its_own_exit_status_not_a_failed_budget(sized, monkeypatch, capsys):
    """sizes on Core ML exits NOT_RUN_HERE (5), not 1; diff --sizes --fail-if-grows says 4 for the change of
    backend, 5 once that is accepted and nothing grew past the budget, and 1 when a figure did (a failure
    wins)."""
    from pte_lab.cli import NOT_RUN_HERE

    assert NOT_RUN_HERE not in (0, 1, 2, 3, TARGET_CHANGED)
    assert cli_main(["sizes", str(COREML)]) == NOT_RUN_HERE
    err = capsys.readouterr().err
    assert err.startswith("pte-lab: not run here: ") and "error" not in err.split(":")[1]
    monkeypatch.setattr("pte_lab.runtime.sizing.sized_diff", lambda d, a, b, **_: d.with_sizes(
        *sized_sides(sized), host_dependent=sized.sizes.host_dependent))
    args = ["diff", str(COREML), str(XNNPACK), "--sizes", "--fail-if-grows"]
    assert cli_main(args + ["1000"]) == TARGET_CHANGED
    capsys.readouterr()
    assert cli_main(args + ["1000", "--allow-target-change"]) == NOT_RUN_HERE  # nothing grew past 1000%
    out, err = capsys.readouterr()
    assert "not run here: 'forward' in the first program cannot run on this host" in out + err
    assert cli_main(args + ["1000", "--allow-target-change", "--json"]) == NOT_RUN_HERE
    assert json.loads(capsys.readouterr().out)["budget_verdict"]["exit_status"] == NOT_RUN_HERE
    assert cli_main(args + ["5", "--allow-target-change"]) == 1  # the planned bytes grew past 5%: a failure
    import pte_lab.cli as cli

    assert "5 (:data:`~pte_lab.errors.NOT_RUN_HERE`): not run here" in cli.__doc__
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    assert "5 not run here" in readme and "4 wins over 1, and 1 over 5" in readme


def sized_sides(d):
    """The two pte_lab.sizes results behind a sized diff (kept figures: no new measurement)."""
    return pte_lab.sizes(COREML), pte_lab.sizes(XNNPACK)
