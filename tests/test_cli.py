"""pte-lab inspect: human output, the JSON document, bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

import pte_lab
from pte_lab.cli import main


def _run(*args):
    exe = shutil.which("pte-lab")
    cmd = [exe, *args] if exe else [sys.executable, "-m", "pte_lab.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_inspect_human(program_path, capsys):
    assert main(["inspect", str(program_path("device_demo"))]) == 0
    out = capsys.readouterr().out
    assert "forward2" in out and "cuda:0" in out
    assert "mem_id  runtime  device" in out  # the arena table
    assert "arena 2 (runtime 1, cuda:0)" in out  # a picture per arena
    assert "legacy" in out and "corrected" in out and "module" in out


def test_inspect_json_document(program_path, capsys):
    assert main(["inspect", str(program_path("device_demo")), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "pte_lab.inspect" and doc["version"] == 1
    m = doc["methods"]["forward2"]
    model = pte_lab.open(program_path("device_demo")).methods["forward2"]
    assert m["instructions"] == model.n_instructions > 0
    assert len(m["tensors"]) == len(model.planned)
    (dev,) = [a for a in m["arenas"] if a["device"] == "cuda:0"]
    assert dev["mem_id"] == 2 and dev["runtime_index"] == 1 and dev["size"] == 3 * 64 * 64 * 4
    assert dev["peak_bytes"] == dev["size"]
    t = m["tensors"][0]
    for key in ("value", "role", "dtype", "shape", "nbytes", "mem_id", "offset", "device", "first", "last"):
        assert key in t
    assert set(doc["load_cost"]) == {"corrected", "legacy", "module"}
    steps = {r["step"] for r in doc["load_cost"]["corrected"]}
    assert steps == {"load_program", "load_method"}


def test_inspect_one_method(program_path, capsys):
    assert main(["inspect", str(program_path("device_demo")), "--json", "--method", "forward"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc["methods"]) == ["forward"]
    assert main(["inspect", str(program_path("device_demo")), "--method", "nope"]) == 2
    assert "no method 'nope'" in capsys.readouterr().err


def test_inspect_layout_and_its_deprecated_alias(program_path, capsys):
    """--layout is where the file's bytes go; the old --sizes does the same and says once on stderr that
    it is deprecated (every other ``sizes`` means run-time pools)."""
    path = str(program_path("portable"))
    assert main(["inspect", path, "--layout", "--rows", "3"]) == 0
    got = capsys.readouterr()
    assert "region" in got.out and "constant" in got.out and "instruction" not in got.out
    assert got.err == ""
    assert main(["inspect", path, "--sizes", "--rows", "3"]) == 0
    old = capsys.readouterr()
    assert old.out == got.out
    (line,) = old.err.splitlines()
    assert "--sizes is deprecated" in line and "--layout" in line
    with pytest.raises(SystemExit):
        main(["inspect", "-h"])
    usage = capsys.readouterr().out
    assert "--layout" in usage and "--sizes" not in usage


@pytest.mark.parametrize("content", [b"", b"hello world, not a program", b"\0" * 4 + b"ET12" + b"\xff" * 40])
def test_bad_file_one_line_exit_2(tmp_path, content):
    p = tmp_path / "bad.pte"
    p.write_bytes(content)
    r = _run("inspect", str(p))
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pte-lab: error:")
    assert "Traceback" not in r.stderr


def test_missing_file(tmp_path):
    r = _run("inspect", str(tmp_path / "missing.pte"))
    assert r.returncode == 2 and "No such file" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("argv, names", [
    (["inspect", "x.pte", "--width", "0"], "argument --width: must be at least 8"),
    (["inspect", "x.pte", "--rows", "-3"], "argument --rows: must be at least 3"),
    (["example", "portable", "{tmp}/o.pte", "--side", "8"], "argument --side: the 'portable' example has no side"),
    (["example", "device", "/no/such/dir/x.pte"], "argument out: the folder '/no/such/dir' does not exist"),
    (["replan", "{prog}", "{prog}"], "argument output: "),
    (["replan", "a.pte", "b.pte", "--runs", "0"], "argument --runs: must be at least 1"),
    (["measure", "--side", "0"], "argument --side: must be at least 1"),
    (["measure", "--legacy-python", "{prog}"], "is not an executable Python interpreter"),
])
def test_bad_arguments_are_one_line_before_any_work(argv, names, tmp_path, program_path, capsys):
    argv = [a.format(tmp=tmp_path, prog=program_path("portable")) for a in argv]
    with pytest.raises(SystemExit) as info:
        raise SystemExit(main(argv))
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pte-lab: error: ") and names in err[0]
    assert not list(tmp_path.iterdir())  # nothing was exported or written


def test_an_unknown_option_prints_the_subcommands_usage(capsys):
    with pytest.raises(SystemExit) as info:
        main(["inspect", "x.pte", "--bogus"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: pte-lab inspect") and "unrecognized arguments: --bogus" in err


def test_example_help_lists_every_example(capsys):
    from pte_lab.examples import BUILDERS

    with pytest.raises(SystemExit):
        main(["example", "--help"])
    out = capsys.readouterr().out
    assert all(name in out for name in BUILDERS)


def test_example_help_says_what_each_example_is(capsys):
    """A newcomer choosing a pair to compare learns from --help that xnnpack has a second method."""
    with pytest.raises(SystemExit):
        main(["example", "--help"])
    out = capsys.readouterr().out
    from pte_lab.examples import BUILDERS

    said = {line.split()[0]: line for line in out.split("examples:\n")[1].splitlines() if line.strip()}
    assert set(said) == set(BUILDERS)
    assert "forward (MLP) and attention" in said["xnnpack"] and "three-layer MLP" in said["portable"]


def test_each_command_is_a_module_that_registers_its_parser_and_runs():
    import pkgutil

    import pte_lab.cli as cli

    modules = {m.name for m in pkgutil.iter_modules(cli.__path__)} - {"__main__", "common"}
    assert {c.__name__.rsplit(".", 1)[1] for c in cli.COMMANDS} == modules
    parser = cli.build_parser()
    assert list(parser.commands) == [c.__name__.rsplit(".", 1)[1].replace("_", "-") for c in cli.COMMANDS]
    for command in cli.COMMANDS:
        assert parser.commands[command.__name__.rsplit(".", 1)[1].replace("_", "-")].get_default("func") is command.run


def test_help_loads_no_reader_model_runtime_or_exporter():
    """``pte-lab --help`` and each command's ``--help`` take a tenth of a second: the command modules import the
    layer they drive when they run, never at their top."""
    code = """
import contextlib, io, sys
from pte_lab.cli import build_parser, main
for argv in [["--help"], *[[name, "--help"] for name in build_parser().commands]]:
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            main(argv)
        except SystemExit:
            pass
print(" ".join(sorted(sys.modules)))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    loaded = r.stdout.split()
    assert "pte_lab.cli.what_if" in loaded
    heavy = [m for m in loaded if m.split(".")[0] in ("torch", "executorch", "pandas", "matplotlib", "flatbuffers")
             or m.split(".")[:2] in [["pte_lab", layer] for layer in ("format", "model", "runtime", "planning",
                                                                     "experiments", "plot", "widgets")]]
    assert heavy == []


def test_json_is_printed_one_row_per_line_and_parses_to_the_document(program_path, capsys):
    """The CLI's JSON: containers indented, each row (a tensor, an arena) on one line; the text parses to the
    very document the views make, with strings that hold braces and the row separator too."""
    from pte_lab.views.json_doc import document
    from pte_lab.views.json_text import json_text

    path = program_path("transformer")
    assert main(["inspect", str(path), "--json"]) == 0
    text = capsys.readouterr().out
    pte = pte_lab.open(path)
    assert json.loads(text) == json.loads(json.dumps(document(pte, list(pte.methods))))
    rows = [ln for ln in text.splitlines() if ln.lstrip().startswith('{"mem_id": 1, "runtime_index": 0')]
    assert len(rows) == 1 and json.loads(rows[0].strip().rstrip(","))["mem_id"] == 1  # an arena row, whole
    tricky = {"methods": {"a}, {b": [{"name": "x}, {y", "shape": [1, 2]}, {"name": "{", "shape": []}],
                          "ok": [{"a": 1}, {"b": {"nested": [{"c": None}]}}], "": [], "e": {}},
              "n": [1.5, float("inf")], 3: "int key", True: "bool key"}
    for doc in (tricky, [], {}, [[1, [2, [3]]]], "s", None):
        assert json.loads(json_text(doc)) == json.loads(json.dumps(doc))
        assert json_text(doc, compact=True) == json.dumps(doc)


def test_a_closed_standard_output_is_one_line_not_a_bug(program_path):
    import subprocess
    import sys

    r = subprocess.run(f"{sys.executable} -m pte_lab.cli inspect {program_path('portable')} >&-", shell=True,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr == "pte-lab: error: standard output is closed: nowhere to write the answer\n"


@pytest.mark.parametrize("argv, said", [
    (["inspect", "{p}", "--width", "100000000"], "argument --width: must be at most 10,000, not 100,000,000"),
    (["example", "three_methods", "{out}", "--side", "4294967296"],
     "argument --side: must be at most 16,384, not 4,294,967,296")])
def test_a_count_that_would_only_cost_memory_is_bounded(program_path, tmp_path, capsys, argv, said):
    with pytest.raises(SystemExit) as e:
        main([a.format(p=program_path("portable"), out=tmp_path / "x.pte") for a in argv])
    assert e.value.code == 2 and said in capsys.readouterr().err


def test_an_error_quoting_a_huge_name_is_a_line_one_can_read():
    from pte_lab.cli import MOST_ERROR_CHARACTERS, one_line
    from pte_lab.errors import PteLabError

    text = f"method {'m' * 100_000!r}: not in the program"
    line = one_line(PteLabError(text))
    assert len(line) < MOST_ERROR_CHARACTERS + 100 and line.startswith("method 'mmm")
    assert line.endswith("mmm': not in the program")
    assert f"({len(text) - MOST_ERROR_CHARACTERS:,} characters left out)" in line


def test_sizes_budget_is_an_apps_total_with_its_loader_and_a_large_plan_is_said_before_the_runs(
        program_path, capsys, monkeypatch, tmp_path):
    """On a program for a host or a phone, --budget checks the total an app pays with Module's default
    FileDataLoader (the bare-metal total apart, not the verdict); a large plan is said before the long runs; the
    kernel library is said to serve the program's operators by name."""
    import pte_lab.cli.sizes as cli_sizes
    from pte_lab.runtime.sizing.kept_sizes import kept_sizes

    monkeypatch.setenv("PTE_LAB_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("PTE_LAB_NO_CACHE")
    monkeypatch.setattr(cli_sizes, "LARGE_PLAN", 1)  # every plan is large: the warning shows
    path = str(program_path("portable"))
    assert main(["sizes", path, "--budget", "1GB"]) == 0
    out, err = capsys.readouterr()
    assert "planned: sizing executes each at its bound" in err and "--runs 1 and --method NAME shorten it" in err
    totals = kept_sizes(path).methods["forward"].totals()
    app, bare = totals["host"].bytes, totals["bare-metal"].bytes
    assert bare < app
    # the heap is this host's: not said to hold on a phone (a second new user's note)
    assert (f"method 'forward' on an app (the heap as measured on this host; a phone's CPU may differ: measure it "
            f"there), with FileDataLoader (it mallocs the program's "
            f"bytes it reads) as an app's Module reads by default (LoadMode File) (method + temp): {app:,} B against "
            f"a budget of 1,000,000,000 B") in out
    # what the budget leaves, as a board's line says it (issue 45: the app's line gave no bytes left)
    from pte_lab.units import capacity_bytes
    assert f"a budget of 1,000,000,000 B (953.7 MiB): fits, {capacity_bytes(10**9 - app)} left" in out
    assert "libexecutorch_kernels_optimized.so: the program names operators, not a kernel library" in out
    # a budget the bare-metal total fits but the app's does not: refused (exit 1), the bare-metal total apart
    assert main(["sizes", path, "--budget", str(app - 1)]) == 1
    out, err = capsys.readouterr()
    assert "planned: sizing executes" not in err  # kept: nothing runs, nothing to warn of
    assert f": {app:,} B against a budget of {app - 1:,} B" in out and "DOES NOT FIT (over by 1 B" in out
    assert f"  apart, on a bare-metal target with this ABI's (x86-64 LP64) pools: {bare:,} B ({app - 1 - bare:,} B left" in out
    assert main(["sizes", path, "--json", "--budget", str(app - 1)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["fits"]["forward"]["target"] == "host" and doc["fits"]["forward"]["fits"] is False


def test_sizes_of_an_apps_program_leads_with_the_apps_total_and_says_its_verification(program_path, capsys, tmp_path,
                                                                                      monkeypatch):
    """Issue 45: plain ``sizes`` on an XNNPACK program said "total on a bare-metal target ... 444,744 B" among what
    holds on any target, noise to a phone developer: an app's program leads with the app's total, the bare-metal
    one an aside after it, as --budget says it. --example-runner implies --verify and now says what it proved,
    one line per method, as --verify does."""
    from pte_lab.runtime.sizing.kept_sizes import kept_sizes

    monkeypatch.setenv("PTE_LAB_CACHE_DIR", str(tmp_path / "cache"))  # the figures the command gave, read back
    monkeypatch.delenv("PTE_LAB_NO_CACHE")
    path = str(program_path("xnnpack"))
    assert main(["sizes", path, "--method", "forward"]) == 0
    lines = capsys.readouterr().out.splitlines()
    bare = kept_sizes(path, ["forward"]).methods["forward"].totals()["bare-metal"].bytes
    assert not any(line.startswith("total on a bare-metal target") for line in lines)
    at = next(i for i, line in enumerate(lines) if line.startswith("total on this host (method + temp"))
    assert lines[at + 1].startswith(f"  apart, on a bare-metal target with this ABI's (x86-64 LP64) pools: {bare:,} B "
                                    f"(the program read in place: no loader's copy on the heap; NOT EXACT: ")
    portable = str(program_path("portable"))
    assert main(["sizes", portable, "--example-runner", str(tmp_path / "runner")]) == 0
    out = capsys.readouterr().out
    v = kept_sizes(portable, verify=True).verified["forward"]
    assert (f"verified on this host: method 'forward', this host's pools ({v.method_pool:,} B method, "
            f"{v.temp_pool:,} B temp): verified: these pools load and run it; tight: one byte less is refused") in out
