"""Survival: a file from anyone ends in success or a PteLabError, and the caller's process lives.

Bundled tests on dtypes torch cannot build from bytes, suites the program does not match, names that
carry escape sequences, the CLI's line for a bug in pte_lab, and seeded mutants of real and crafted
files through every public path that takes a file.
"""

from __future__ import annotations

import importlib
import io
import os
import subprocess
import sys
import warnings
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest

import pte_lab
from pte_lab import PteLabError
from pte_lab.cli import main
from pte_lab.errors import BUG_EXIT_CODE
from pte_lab.model.bundled import compare_outputs
from pte_lab.printable import printable
from tests.crafting import build_bundled, build_program
from tests.fuzzing import mutations

ROOT = Path(__file__).resolve().parents[1]
FLOAT, INT32, BOOL, QUINT4X2 = 6, 3, 11, 16
BAD = "fo\x1b[2J\x1b[31mrw\x07ard\r\n\u202e"


def _cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


def _raw_controls(text: str) -> set[str]:
    return {c for c in text if not c.isprintable() and c not in "\n\t"}


# ----------------------------------------------------------------------- comparing on raw bytes
def test_outputs_compare_on_raw_bytes_and_passed_is_always_a_bool():
    ints = np.arange(6, dtype=np.int32)
    t = ("int32", (2, 3), ints.tobytes())
    cases = [
        ([t], [t], True, ""),
        ([("int32", (2, 3), (ints + 1).tobytes())], [t], False, ""),  # ints are compared exactly
        ([("float32", (2, 3), ints.astype(np.float32).tobytes())], [t], False, "float32, expected int32"),
        ([t], [3], False, "expected int 3"),  # an Int expected, a tensor given: was a tensor in `passed`
        ([3], [3], True, ""),
        ([t], [("quint4x2", (2, 3), bytes(6))], False, "int32, expected quint4x2"),
        ([("quint4x2", (2, 3), None)], [("quint4x2", (2, 3), bytes(6))], False, "not compared"),
        ([t], [t, t], False, "1 output, 2 expected"),
    ]
    for actual, expected, passed, why in cases:
        v = compare_outputs(actual, expected, 1e-5, 1e-8)
        assert type(v.passed) is bool and v.passed is passed and why in v.why, (actual, expected, v)
    nan = np.array([np.nan, 1.0], dtype=np.float32)
    assert compare_outputs([("float32", (2,), nan.tobytes())], [("float32", (2,), nan.tobytes())], 1e-5, 0).passed
    bf = (np.array([1.5, -2.0], dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
    assert compare_outputs([("bfloat16", (2,), bf)], [("bfloat16", (2,), bf)], 0, 0).max_abs_error == 0.0


# ------------------------------------------------------------------------------- bundled programs
@pytest.fixture(scope="module")
def carried(program_path):
    """A program ExecuTorch runs, and a case for its ``forward`` (input, eager output)."""
    pytest.importorskip("executorch.runtime")
    torch = pytest.importorskip("torch")
    path = program_path("portable")
    (spec,) = pte_lab.open(path).methods["forward"].inputs
    x = torch.randn(*spec.shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pte_lab.load(path) as prog:
            (y,) = prog.load_method("forward")(x)
    def value(t):
        return ("tensor", FLOAT, list(t.shape), t.numpy().tobytes())

    return path.read_bytes(), value(x), value(y)


@pytest.mark.parametrize("isolate", [True, False])
def test_bundled_cases_the_runtime_cannot_compare_fail_with_a_reason_and_the_caller_lives(carried, tmp_path,
                                                                                         isolate):
    program, x, y = carried
    q_out = ("tensor", QUINT4X2, y[2], bytes(int(np.prod(y[2]))))
    q_in = ("tensor", QUINT4X2, x[2], bytes(int(np.prod(x[2]))))
    suites = [
        ("forward", [([x], [y]), ([x], [q_out]), ([q_in], [y]), ([x], [("int", 3)])]),
        ("forward", [([x], [y])]),  # a second suite for the same method: run too
        ("nope", [([x], [y])]),  # a method the program lacks
    ]
    path = tmp_path / "crafted.bpte"
    path.write_bytes(build_bundled(program, suites))
    with pte_lab.load(path, isolate=isolate) as prog:
        df = prog.run_bundled_tests()
    assert df.passed.dtype == bool
    rows = {(r.suite, r.case): r for r in df.itertuples()}
    assert len(rows) == 6
    assert rows[0, 0].passed and rows[0, 0].error == "" and rows[1, 0].passed  # both suites of forward ran
    assert not rows[0, 1].passed and "expected quint4x2" in rows[0, 1].error
    assert not rows[0, 2].passed and "quint4x2 tensor" in rows[0, 2].error and "not run" in rows[0, 2].error
    assert not rows[0, 3].passed and "expected int 3" in rows[0, 3].error
    assert rows[2, 0].method == "nope" and "no method 'nope'" in rows[2, 0].error


def test_a_bundled_case_is_asked_for_by_name_or_position(carried):
    program, x, y = carried
    b = pte_lab.open(build_bundled(program, [("forward", [([x], [y])]), ("forward", [([y], [x])])])).bundled
    assert b.case("forward", 0) == b.case(0, 0) != b.case(1, 0)
    for bad in (("nope", 0), (2, 0), ("forward", 1)):
        with pytest.raises(PteLabError):
            b.case(*bad)


# ------------------------------------------------------------------------------ names and errors
def test_names_from_the_file_reach_no_terminal_raw(tmp_path):
    data = build_program([("tensor", 1, 0, 4), ("tensor", 1, 16, 4)], [[0, 1]],
                         operators=((BAD + "op", "o\x1but"),), name=BAD)
    path = tmp_path / "names.pte"
    path.write_bytes(data)
    pte = pte_lab.open(path)
    m = pte.methods[BAD]
    assert printable("\x1b[2J") == "\\x1b[2J"
    texts = [repr(pte), repr(m), str(m), repr(m.arenas[0]), *map(str, pte.warnings()),
             # the records a notebook prints as they are: the tensor table's text columns, the peak's story
             str(m.tensors), m.tensors.to_string(), repr(m.peak), str(m.instructions)]
    for argv in (["inspect", path], ["inspect", path, "--layout"], ["inspect", path, "-m", "x"],
                 ["diff", path, path]):
        rc, out, err = _cli(*argv)
        assert rc in (0, 2)
        texts += [out, err]
    for t in texts:
        assert not _raw_controls(t), repr(t[:200])
    assert "fo\\x1b[2J\\x1b[31mrw\\x07ard\\r\\n\\u202e" in _cli("inspect", path)[1]


def test_a_bug_is_one_line_that_says_so_with_its_own_exit_status(tmp_path, monkeypatch):
    from pte_lab.cli import inspect as command

    path = tmp_path / "p.pte"
    path.write_bytes(build_program([("tensor", 1, 0, 4), ("tensor", 1, 16, 4)], [[0, 1]]))

    def broken(*a, **k):
        raise TypeError("object of type 'NoneType' has no len()")

    monkeypatch.setattr(command, "run", broken)  # a bug anywhere under the command
    rc, out, err = _cli("inspect", path)
    assert rc == BUG_EXIT_CODE == 3 and out == ""
    (line,) = err.splitlines()
    assert "bug in pte_lab" in line and "TypeError: object of type 'NoneType' has no len()" in line
    assert "report" in line and "Traceback" not in err
    rc, _, err = _cli("inspect", path, "--debug")
    assert rc == 3 and "Traceback" in err and err.splitlines()[-1] == line
    rc, _, err = _cli("diff", tmp_path / "missing.pte", path)  # bad input stays bad input
    assert rc == 2 and "bug in pte_lab" not in err


def test_run_all_on_an_undefined_device_is_a_named_error(tmp_path):
    from pte_lab.runtime import run_all

    path = tmp_path / "type2.pte"  # arena 1 on device type 2: not one ExecuTorch defines
    path.write_bytes(build_program([("tensor", 1, 0, 4), ("tensor", 1, 16, 4)], [[0, 1]], devices=[(1, 2, 0)]))
    assert set(pte_lab.open(path).methods["forward"].devices) == {"device2:0"}
    with pytest.raises(pte_lab.PteFormatError, match="not one ExecuTorch defines"):  # was a ValueError
        run_all(path)
    with pytest.raises(pte_lab.UnknownDeviceError):
        pte_lab.emulate_device("device2:0")


def test_run_all_names_a_bug_as_one_and_runs_the_other_methods(program_path, monkeypatch):
    pytest.importorskip("executorch.runtime")
    from pte_lab.runtime import run_all

    where = importlib.import_module("pte_lab.runtime.run_all")  # the module run_all looks its helpers up in

    def broken(method):
        raise TypeError("unsupported operand type(s) for +: 'int' and 'NoneType'")

    monkeypatch.setattr(where, "example_inputs", broken)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run_all(program_path("portable"))
    (run,) = result.runs
    assert not run.ok and "bug in pte_lab" in run.error and "TypeError: unsupported operand" in run.error
    monkeypatch.setattr(where, "open_pte", lambda p: 1 / 0)  # before any method: raised, named
    with pytest.raises(pte_lab.PteLabBug, match="bug in pte_lab.*ZeroDivisionError") as e:
        run_all(program_path("portable"))
    assert isinstance(e.value.__cause__, ZeroDivisionError)


@pytest.mark.slow
def test_sizes_under_an_address_space_limit_blames_the_limit_in_one_line(program_path):
    pytest.importorskip("executorch.runtime")
    path = program_path("portable")
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, resource.RLIM_INFINITY)); "
            "from pte_lab.cli import main; sys.exit(main(['sizes', sys.argv[1], '--runs', '1']))")
    r = subprocess.run([sys.executable, "-c", code, str(path)], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 1, r.stderr[-2000:]  # nothing measured: a check that failed, said in one line
    (line,) = [ln for ln in r.stderr.splitlines() if ln.startswith("pte-lab: error:")]
    assert "no method could be sized" in line and "'forward'" in line
    assert "ran out of the memory it was allowed" in line and "RLIMIT_AS" in line


# -------------------------------------------------------------------------- mutants, every path
def _seeds(program_path) -> dict[str, bytes]:
    crafted = build_program([("tensor", 1, 0, 4), ("tensor", 1, 16, 4), ("int", 3), ("tensor", 2, 0, [2, 2])],
                            [[0, 1], [1, 3]], sizes=(0, 64, 32), inputs=[0], outputs=[3])
    return {"crafted": crafted, "portable": program_path("portable").read_bytes()}


def _static_paths(path: Path, out: Path) -> None:
    """Every public path that reads a file without running it (the CLI's exit status 3 is a bug)."""
    from pte_lab.model.layout import file_regions
    from pte_lab.views.json_doc import document
    from pte_lab.views.text import layout_text

    pte = pte_lab.open(path)
    repr(pte), pte._repr_html_(), document(pte), pte.to_dict(), pte.warnings(), file_regions(pte)
    layout_text(pte.layout(), pte.duplicate_blobs())
    for m in pte.methods.values():
        repr(m), m._repr_html_()
    if pte.bundled is not None:
        for k, s in enumerate(pte.bundled.suites):
            for i in range(s.cases):
                pte.bundled.case(k, i)
    pte_lab.diff(path, path)
    from pte_lab.planning import replan

    replan(path)


def _assert_survives(fn, what: str) -> str:
    try:
        fn()
        return "ok"
    except PteLabError:
        return "refused"
    except Exception as exc:  # noqa: BLE001 - the failure this test exists for
        pytest.fail(f"{what}: {type(exc).__name__}: {exc} (not a PteLabError: a bug)")


def test_mutants_end_in_success_or_a_pte_lab_error_on_every_reading_path(program_path, tmp_path):
    n = int(os.environ.get("PTE_LAB_SURVIVAL_CASES", "60"))
    outcomes = []
    for name, data in _seeds(program_path).items():
        for k, buf in enumerate(mutations(data, min(len(data), 4096), f"survival-{name}", n)):
            path = tmp_path / f"{name}{k}.pte"
            path.write_bytes(buf)
            outcomes.append(_assert_survives(lambda: _static_paths(path, tmp_path), f"{name} mutant {k}"))
            for argv in (["inspect", path], ["inspect", path, "--json"], ["inspect", path, "--layout"],
                         ["diff", path, path, "--json"], ["replan", path, tmp_path / "out.pte"]):
                rc, _, err = _cli(*argv)
                assert rc != BUG_EXIT_CODE, (name, k, argv, err)
    assert "refused" in outcomes and "ok" in outcomes  # the mutants reach both ends


_NATIVE_CHILD = r"""
import sys, warnings
warnings.simplefilter("ignore")
import pte_lab
from pte_lab import PteLabError
from pte_lab.runtime import run_all
for path in sys.argv[1:]:
    for what, fn in (("run_all", lambda: run_all(path)),
                     ("bundled", lambda: pte_lab.load(path, isolate=True).run_bundled_tests()),
                     ("sizes", lambda: pte_lab.sizes(path, runs=1))):
        try:
            fn()
            print("ok", what, path, flush=True)
        except PteLabError:
            print("refused", what, path, flush=True)
        except Exception as exc:
            print("BUG", what, path, type(exc).__name__, str(exc)[:200], flush=True)
"""


@pytest.mark.slow
def test_mutants_through_the_native_paths_leave_the_caller_alive(carried, tmp_path):
    """run_all runs ExecuTorch in its own process (a child here), run_bundled_tests and sizes in a worker."""
    program, x, y = carried
    bundled = build_bundled(program, [("forward", [([x], [y])])])
    paths = []
    for name, data in (("portable", program), ("bundled", bundled)):
        for k, buf in enumerate(mutations(data, min(len(data), 4096), f"native-{name}", 8)):
            p = tmp_path / f"{name}{k}.{'bpte' if name == 'bundled' else 'pte'}"
            p.write_bytes(buf)
            paths.append(str(p))
    r = subprocess.run([sys.executable, "-c", _NATIVE_CHILD, *paths], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    lines = r.stdout.splitlines()
    assert r.returncode == 0, (r.returncode, lines[-3:], r.stderr[-1500:])
    assert not [ln for ln in lines if ln.startswith("BUG")], lines
    assert len(lines) == 3 * len(paths)
