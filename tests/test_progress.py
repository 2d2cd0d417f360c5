"""Progress of long steps: lines with elapsed time for the CLI, a bar with a count for notebooks."""

from __future__ import annotations

import io
import re

import pytest

from pte_lab.progress import lines, reporter


def test_lines_carry_the_elapsed_time():
    out = io.StringIO()
    say = lines(stream=out)
    say("exporting")
    say("done")
    got = out.getvalue().splitlines()
    assert [re.sub(r"\[\s*[\d.]+ s\]", "[t]", g) for g in got] == ["pte-lab: [t] exporting", "pte-lab: [t] done"]


def test_a_reporter_speaks_to_a_callable_or_draws_a_bar():
    heard = []
    with reporter(heard.append, total=2) as r:
        r.step("one")
        r.advance()
        r.step("two")
    assert heard == ["one", "two"]
    with reporter(True, total=3, desc="sizing") as bar:  # tqdm.auto: a text bar outside a notebook
        bar.advance(2)
        assert bar._bar.n == 2 and bar._bar.total == 3
        bar.set_total(5)
        assert bar._bar.total == 5
    with reporter(None) as quiet:  # silent: nothing to call, nothing drawn
        quiet.step("x")
        quiet.advance()
    with pytest.raises(TypeError, match="progress must be None, True or a callable"):
        reporter("yes")


def test_verify_tells_each_method(program_path):
    pytest.importorskip("executorch.runtime")
    from pte_lab import planning

    heard = []
    path = program_path("xnnpack")
    planning.verify(path, path, runs=1, progress=heard.append)
    assert heard[0].startswith("loading both programs")
    assert [h.split("'")[1] for h in heard[1:]] == ["attention", "forward"]


def test_what_if_tells_the_worker_and_each_run(program_path):
    pytest.importorskip("executorch.runtime")
    import pte_lab

    heard = []
    w = pte_lab.what_if(program_path("dynamic"), {(0, 0): 20}, progress=heard.append, cache=False)
    assert w.point == (20,)
    assert heard[0] == "starting an isolated worker"
    points = [re.search(r"= (\d+) \((\d)/(\d)\)$", h).groups() for h in heard[1:]]
    assert [p[1:] for p in points] == [("1", "3"), ("2", "3"), ("3", "3")]
    assert [int(p[0]) for p in points] == [list(pt)[0] for pt in w.fit.points]


def test_in_a_notebook_the_bar_is_redrawn_in_place_and_ends_finished(monkeypatch):
    """A saved notebook keeps a display's last state: the bar must end as one finished line, never
    'sizing: 0%' (what a widget's text fallback keeps)."""
    pytest.importorskip("IPython")
    import IPython.display

    from pte_lab import progress

    shown = []

    class Handle:
        def update(self, bundle, raw=False):
            shown.append(bundle)

    def display(bundle, raw=False, display_id=False):
        assert raw and display_id  # one output, redrawn by its id
        shown.append(bundle)
        return Handle()

    monkeypatch.setattr(progress, "_in_notebook", lambda: True)
    monkeypatch.setattr(IPython.display, "display", display)
    with reporter(True, desc="verifying") as r:
        r.step("loading")
        r.set_total(2)
        r.advance()
        r.advance()
    last = shown[-1]["text/plain"]
    assert re.fullmatch(r"verifying: done, 2/2 in \d+\.\d s", last), last
    assert "<progress value='2' max='2'" in shown[-1]["text/html"]
    assert shown[-3]["text/plain"].startswith("verifying: 1/2 after ")  # counted as it went
    with pytest.raises(RuntimeError), reporter(True, total=3, desc="sizing") as r:
        r.advance()
        raise RuntimeError("boom")
    assert shown[-1]["text/plain"].startswith("sizing: stopped, 1/3 in ")  # a failure is not called done


def test_sizes_says_the_schema_check_before_the_worker(program_path, tmp_path):
    """What runs before the first worker and takes seconds (torch imported to check each operator's arguments
    against its schemas) is a step of its own: no first answer waits in silence."""
    pytest.importorskip("executorch.runtime")
    import pte_lab

    path = tmp_path / "model.pte"  # a file this process has not checked yet
    path.write_bytes(program_path("portable").read_bytes())
    heard = []
    pte_lab.sizes(str(path), runs=1, heap_runs=1, progress=heard.append, cache=False)
    assert heard[0].startswith("checking each operator's arguments against torch's schemas (importing torch: ")
    assert heard[1] == "starting an isolated worker"


def test_the_schemas_are_looked_up_once_per_set_of_operators(tmp_path, monkeypatch):
    """Kept, the schemas (and that torch has none for ExecuTorch's own et_view, which a program with a view calls)
    are looked up once: the next program with the same operators imports nothing and says nothing. An operator of
    a namespace anyone may register in (``torch.library``) is looked up each time."""
    from pte_lab.progress import telling
    from pte_lab.runtime import kept, schemas

    monkeypatch.delenv(kept.NO_CACHE_ENV, raising=False)
    monkeypatch.setenv("PTE_LAB_CACHE_DIR", str(tmp_path))
    looked = []
    real = schemas._look_up
    monkeypatch.setattr(schemas, "_look_up", lambda ops: looked.append(ops) or real(ops))
    ops = ["aten::add.out", "executorch_prim::et_view.default"]
    heard = []
    with telling(heard.append):
        first = schemas.operator_schemas(ops)
        again = schemas.operator_schemas(ops)
    assert first == again and again["executorch_prim::et_view.default"] is None
    assert again["aten::add.out"]["arguments"][0] == ("self", "Tensor")
    assert looked == [ops] and len(heard) == 1 and "once per set of operators" in heard[0]
    schemas.operator_schemas(["mylib::mine.default"])
    schemas.operator_schemas(["mylib::mine.default"])
    assert looked[1:] == [["mylib::mine.default"]] * 2


def test_a_registrar_that_lacks_a_module_is_kept_until_the_module_is_installed(tmp_path, monkeypatch):
    """Arm's Cortex-M ops (an Ethos-U program's quantize and dequantize around the NPU) register their schemas only
    with Arm's flow installed: without it, that torch has none is kept with the module the registrar lacked, so the
    next sizing imports nothing; once that module is installed, they are looked up again."""
    from pte_lab.runtime import kept, schemas

    monkeypatch.delenv(kept.NO_CACHE_ENV, raising=False)
    monkeypatch.setenv("PTE_LAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setitem(schemas.REGISTRARS, "cortex_m", "pte_lab_test_registrar_that_is_not_there")
    looked = []
    real = schemas._look_up
    monkeypatch.setattr(schemas, "_look_up", lambda ops: looked.append(ops) or real(ops))
    ops = ["cortex_m::quantize_per_tensor.out"]
    assert schemas.operator_schemas(ops) == schemas.operator_schemas(ops) == {ops[0]: None}
    assert looked == [ops]  # kept: the second asked nothing
    assert "pte_lab_test_registrar_that_is_not_there" in (tmp_path / "schemas").glob("*.json").__next__().read_text()
    monkeypatch.setattr(schemas, "_installed", lambda module: module == "pte_lab_test_registrar_that_is_not_there")
    schemas.operator_schemas(ops)
    assert looked == [ops, ops]  # the module is there now: looked up again
