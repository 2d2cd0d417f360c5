"""Methods taking Int, Double and Bool inputs run on made-up inputs too (run_all, the explorer's button):
each scalar gets the value the file holds for it (the only one ExecuTorch's set_input takes), else 0, 0.0,
false, and the run says which inputs were given a value."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.runtime")

import pte_lab
from pte_lab.runtime import example_inputs, run_all


class _Scalars(torch.nn.Module):
    def forward(self, x, s: float, n: int, b: bool):
        return x * s + n if b else x - n


def _export(path, s, n, b):
    from executorch.exir import to_edge

    ep = torch.export.export(_Scalars(), (torch.ones(2), s, n, b))
    path.write_bytes(to_edge(ep).to_executorch().buffer)
    return path


@pytest.fixture(scope="module")
def scalar_programs(tmp_path_factory):
    d = tmp_path_factory.mktemp("scalars")
    return _export(d / "values.pte", 2.5, 3, True), _export(d / "zeros.pte", 0.0, 0, False)


def test_scalar_inputs_get_the_files_value_and_the_run_says_so(scalar_programs):
    values, zeros = scalar_programs
    m = pte_lab.open(values).methods["forward"]
    assert [s.kind for s in m.inputs] == ["Tensor", "Double", "Int", "Bool"]
    assert example_inputs(m)[1:] == [2.5, 3, True]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (run,) = run_all(values).runs
    assert run.ok and run.error is None and run.output_shapes == ((2,),)
    assert run.defaulted == ("input 1 (Double) = 2.5, the value the program holds",
                             "input 2 (Int) = 3, the value the program holds",
                             "input 3 (Bool) = True, the value the program holds")


def test_scalars_the_file_leaves_at_their_default_are_zero_and_false(scalar_programs):
    _, zeros = scalar_programs
    m = pte_lab.open(zeros).methods["forward"]
    got = example_inputs(m)[1:]
    assert got == [0.0, 0, False] and [type(v) for v in got] == [float, int, bool]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (run,) = run_all(zeros).runs
    assert run.ok and [d.split(",")[0] for d in run.defaulted] == [
        "input 1 (Double) = 0.0", "input 2 (Int) = 0", "input 3 (Bool) = False"]


def test_the_explorer_says_which_inputs_it_gave_a_value(scalar_programs):
    pytest.importorskip("ipywidgets")
    from pte_lab.widgets import run_all_html

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        html = run_all_html(pte_lab.open(scalar_programs[0]))
    assert "✔ <b>forward</b> ran" in html
    assert "scalar inputs given a value" in html and "input 1 (Double) = 2.5" in html


def test_a_call_with_inputs_the_method_does_not_take_names_the_input_before_executorch_runs(scalar_programs):
    """ExecuTorch answers InvalidArgument (0x12) without naming the input; pte_lab says which and why."""
    values, _ = scalar_programs
    x = torch.ones(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pte_lab.load(values) as prog:
            f = prog.load_method("forward")
            assert torch.equal(f(x, 2.5, 3, True)[0], x * 2.5 + 3)
            for args, position, words in [
                ((x, 3.0, 3, True), 1, "exported with, 2.5"),
                ((x, 2.5, 3), None, "takes 4 inputs"),
                ((torch.ones(3), 2.5, 3, True), 0, "has shape [3]; the method takes float32[2]"),
                ((torch.ones(2, dtype=torch.int64), 2.5, 3, True), 0, "is int64[2]"),
            ]:
                with pytest.raises(pte_lab.InputError, match=None) as e:
                    f(*args)
                assert e.value.position == position and words in str(e.value), str(e.value)


def test_inspect_shows_the_value_a_scalar_input_was_exported_with(scalar_programs, capsys):
    from pte_lab.cli import main

    assert main(["inspect", str(scalar_programs[0])]) == 0
    assert "input 1: Double = 2.5 (exported value: ExecuTorch accepts no other)" in capsys.readouterr().out
