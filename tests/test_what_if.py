"""What if the program had been exported at another bound (issue 32): predictions against real re-exports."""

from __future__ import annotations

import json

import numpy as np
import pytest

import pte_lab
from pte_lab.model.shape_fit import WhatIfError, check_axes, check_bounds, fit_shapes, read_axes, sample_points
from pte_lab.planning.at_bound import parse_budget


def _transformer_at(bound: int, backend: str = "portable") -> bytes:
    """pte_lab's transformer example (2 layers) with a dynamic sequence of at most ``bound``."""
    import torch

    from pte_lab import examples as ex

    torch.manual_seed(0)
    m = ex._modules()["Transformer"](2, d=64)
    parts = None
    if backend == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        parts = [XnnpackPartitioner()]
    seq = torch.export.Dim("seq", min=2, max=bound)
    return ex._lower(ex._export(m, (torch.randn(1, 8, 64),), dynamic_shapes=({1: seq},)), partitioner=parts)


def _dynamic_batch_xnnpack_at(bound: int) -> bytes:
    """The ``dynamic`` example (a linear layer, tanh, a scale) lowered to XNNPACK, batch at most ``bound``."""
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    from pte_lab import examples as ex

    torch.manual_seed(0)
    batch = torch.export.Dim("batch", min=1, max=bound)
    return ex._lower(ex._export(ex._modules()["Dynamic"](), (torch.randn(4, 16),), dynamic_shapes=({0: batch},)),
                     partitioner=[XnnpackPartitioner()])


def _assert_same_as_reexport(w, path):
    """The prediction is ExecuTorch's own reading of the re-export: arenas, every planned tensor's bytes."""
    m = pte_lab.open(path).methods[w.method]
    assert [(a.mem_id, a.planned) for a in w.arenas] == [(a.mem_id, a.size) for a in m.arenas]
    assert {t.value: (t.shape, t.nbytes) for t in w.tensors} == {t.value: (t.shape, t.nbytes) for t in m.planned}
    assert {t.value: t.offset for t in w.tensors} == {t.value: t.offset for t in m.planned}
    assert w.lower_bound <= w.best_fit <= w.planned


# ------------------------------------------------------------------ without running anything
def test_bad_bounds_are_one_clear_line(program_path):
    dyn = pte_lab.open(program_path("dynamic")).methods["forward"]
    with pytest.raises(WhatIfError, match=r"bound 33 for input 0 axis 0 is above the exported one \(32\)"):
        check_bounds(dyn, {(0, 0): 33})
    with pytest.raises(WhatIfError, match="has no dynamic input"):
        check_bounds(pte_lab.open(program_path("portable")).methods["forward"], {(0, 0): 2})
    with pytest.raises(WhatIfError, match="axis 3 is none of them"):
        check_bounds(dyn, {(0, 3): 2})
    assert check_bounds(dyn, {(0, 0): 7}) == (((0, 0),), (7,), (32,))


def test_a_static_axis_is_refused_before_any_run_naming_the_dynamic_axes(tmp_path, capsys):
    """Axis 2 (the model width) is static: ExecuTorch would refuse to resize it at the first run."""
    from pte_lab.cli import main
    from pte_lab.runtime.shapes import program_scalars

    path = tmp_path / "seq16.pte"
    path.write_bytes(_transformer_at(16))
    m = pte_lab.open(str(path)).methods["forward"]
    axes = read_axes(m, program_scalars(str(path), "forward")[0])
    assert axes == {0: frozenset({1})}
    assert pte_lab.planning.at_bound.dynamic_dims(str(path)) == ((0, 1),)  # what --budget without --bound searches
    check_axes(m, ((0, 1),), axes)
    with pytest.raises(WhatIfError, match=r"input 0 axis 2 is static .* reads are input 0 axis 1$"):
        check_axes(m, ((0, 2),), axes)
    capsys.readouterr()  # the export's own warnings
    assert main(["what-if", str(path), "--bound", "0:2=8"]) == 2
    err = [x for x in capsys.readouterr().err.strip().splitlines() if not x.startswith("pte-lab: [")]  # progress
    assert len(err) == 1 and "input 0 axis 2 is static" in err[0] and "did not run" not in err[0]


def test_budgets_read_binary_units():
    assert parse_budget("300MiB") == 300 << 20
    assert parse_budget("1.5 KiB") == 1536
    assert parse_budget(4096) == 4096
    assert parse_budget("2GiB") == 2 << 30
    with pytest.raises(WhatIfError, match="not a size"):
        parse_budget("lots")
    assert parse_budget(2 ** 63 - 1) == 2 ** 63 - 1
    for huge in (2 ** 63, "1" + "0" * 309, 10 ** 400):  # past 1e308 a float division once raised OverflowError
        with pytest.raises(WhatIfError, match=r"budget .* is beyond what int64 holds"):
            parse_budget(huge)


def test_a_budget_beyond_int64_is_one_line_exit_2(program_path, capsys):
    from pte_lab.cli import main

    assert main(["what-if", str(program_path("dynamic")), "--bound", "0:0", "--budget", "1" + "0" * 309]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "(310 characters) is beyond what int64 holds" in err[0], err


def test_a_dim_that_is_not_affine_is_refused_naming_the_tensor(program_path):
    """Runs (made up here) where one tensor's first dim grows as N*N: the check run catches it."""
    m = pte_lab.open(program_path("dynamic")).methods["forward"]
    keys, _, exported = check_bounds(m, {(0, 0): 4})
    points = sample_points(keys, exported)
    runs = []
    for (n,) in points:
        shapes = {t.value: tuple(n if s == 32 else s for s in t.shape) for t in m.planned}
        shapes[8] = (n * n // 2, 8)  # v8 is no affine function of n
        runs.append(((n,), shapes))
    with pytest.raises(WhatIfError, match=r"tensor v8 .* is not affine in the sizes sampled"):
        fit_shapes(m, keys, exported, runs)
    for (n,), shapes in runs:
        shapes[8] = (2 * n - 1, 8)  # affine, but not what the file plans at the bound (63, not 32)
    with pytest.raises(WhatIfError, match=r"tensor v8 .*the upper bound the file plans"):
        fit_shapes(m, keys, exported, runs)


def test_cli_bad_input_exits_2_with_one_line(program_path, capsys):
    from pte_lab.cli import main

    assert main(["what-if", str(program_path("dynamic")), "--bound", "0:0=99"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "above the exported one (32)" in err[0]
    assert main(["what-if", str(program_path("portable")), "--bound", "0:0=2"]) == 2
    assert "no method of this program has a dynamic input" in capsys.readouterr().err
    assert main(["what-if", str(program_path("dynamic")), "--bound", "zero"]) == 2
    assert "INPUT:AXIS=N" in capsys.readouterr().err


# ------------------------------------------------------------------ what a file declares is never built unchecked
def _declared(program_path, tmp_path, shape) -> str:
    """The ``dynamic`` example with its input declared at ``shape`` (a 2.4 KB file), nothing else changed."""
    from crafting import with_sizes

    path = tmp_path / f"declared_{'x'.join(map(str, shape))}.pte"
    path.write_bytes(with_sizes(program_path("dynamic").read_bytes(), [32, 16], shape))
    return str(path)


@pytest.fixture
def built(monkeypatch):
    """The shapes pte_lab draws a run's inputs at (numpy's generator: what-if's runs take plain data, never torch
    tensors): recorded, and refused (never allocated) from 1 Mi elements on."""
    shapes, real = [], np.random.default_rng

    class Drawing:
        def __init__(self, seed):
            self._rng = real(seed)

        def _drawn(self, size):
            shapes.append(tuple(size))
            assert np.prod(size, dtype=object) < 2 ** 20, f"inputs drawn at {tuple(size)}: a declared size"
            return tuple(size)

        def standard_normal(self, size, *a, **k):
            return self._rng.standard_normal(self._drawn(size), *a, **k)

        def integers(self, low, high, size, *a, **k):
            return self._rng.integers(low, high, self._drawn(size), *a, **k)

    monkeypatch.setattr(np.random, "default_rng", Drawing)
    return shapes


@pytest.mark.parametrize("width", [2 ** 25, 2 ** 31 - 1])
def test_inputs_over_the_limit_are_refused_before_anything_is_built(program_path, tmp_path, built, monkeypatch,
                                                                     capsys, width):
    """A static axis declared 2**25 (1 GiB at 8 rows) or 2**31 - 1 wide (64 GiB): the same quick refusal, the
    exact bytes in its one line, nothing built and no worker started."""
    import pte_lab.planning.at_bound as pw
    from pte_lab.cli import main
    from pte_lab.errors import DeclaredSizeError

    path = _declared(program_path, tmp_path, [32, width])
    monkeypatch.setattr(pw, "Worker", lambda *a, **k: pytest.fail("a worker started"))
    monkeypatch.setattr(pte_lab.runtime.inputs, "host_available", lambda: 1 << 50)  # the limit decides, not this host
    n = 8 * width * 4
    with pytest.raises(DeclaredSizeError) as e:
        pte_lab.what_if(path, {(0, 0): 8})
    assert e.value.needed > n and e.value.available == 1 << 30
    assert f"a run at input 0 axis 0 = 8 would build {e.value.needed:,} B" in str(e.value)
    assert f"input 0 float32[8, {width}]: {n:,} B" in str(e.value) and "nothing was built" in str(e.value)
    for argv in (["--bound", "0:0=8"], ["--at-shape", f"0=8,{width}"]):
        assert main(["what-if", path, *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"input 0 float32[8, {width}]: {n:,} B" in err[0], err
    assert built == []


def test_the_limit_is_the_users_to_set(program_path, monkeypatch, capsys):
    """max_input_bytes= (--max-input-bytes) and PTE_LAB_MAX_INPUT_BYTES set it: here below one run's debug buffer."""
    from pte_lab.cli import main
    from pte_lab.errors import DeclaredSizeError
    from pte_lab.runtime.inputs import INPUT_LIMIT_ENV

    path = str(program_path("dynamic"))
    with pytest.raises(DeclaredSizeError, match=r"input 0 float32\[8, 16\]: 512 B.* more than the 4,096 B \(4.0 KiB\) "
                                                r"pte_lab builds at a size a file declares \(set by max_input_bytes\)"):
        pte_lab.what_if(path, {(0, 0): 8}, max_input_bytes=4096)
    assert main(["what-if", path, "--bound", "0:0=8", "--max-input-bytes", "4KiB"]) == 2
    assert "(4.0 KiB) pte_lab builds at a size a file declares (set by max_input_bytes)" in capsys.readouterr().err
    monkeypatch.setenv(INPUT_LIMIT_ENV, "4KiB")
    with pytest.raises(DeclaredSizeError, match=f"\\(set by {INPUT_LIMIT_ENV}\\)"):
        pte_lab.usage_at(path, {(0, 0): 8})
    monkeypatch.setenv(INPUT_LIMIT_ENV, "lots")
    assert main(["what-if", path, "--bound", "0:0=8"]) == 2
    assert f"{INPUT_LIMIT_ENV}: 'lots' is not a size" in capsys.readouterr().err


def test_runs_build_their_inputs_at_the_sizes_sampled_never_at_the_bound(program_path, tmp_path, built,
                                                                         monkeypatch):
    """The prediction comes from runs at 8, 16 and 13 rows: those are the inputs built, never the bound's 32 rows
    (nor 2**25 where the file declares that bound)."""
    import pte_lab.planning.at_bound as pw

    monkeypatch.setattr(pw, "_FITS", {})
    w = pte_lab.what_if(str(program_path("dynamic")), {(0, 0): 8})
    assert w.point == (8,) and built == [(8, 16), (16, 16), (13, 16)]
    built.clear()
    with pytest.raises(WhatIfError, match=r"did not run at \(8,\)"):  # ExecuTorch: the input overflows its arena
        pte_lab.what_if(_declared(program_path, tmp_path, [2 ** 25, 16]), {(0, 0): 8})
    assert built == [(8, 16)]


# ------------------------------------------------------------------ running the method (a worker each)
@pytest.mark.slow
def test_dynamic_batch_prediction_budget_and_usage(program_path, capsys):
    """The cached ``dynamic`` program: the prediction at the bound is the file; a budget's answer fits and the
    next bound does not; a call at 5 rows needs what the plan at bound 5 plans."""
    path = str(program_path("dynamic"))
    at_bound = pte_lab.what_if(path, {(0, 0): 32})
    _assert_same_as_reexport(at_bound, path)
    b = pte_lab.largest_bound(path, "2KiB", (0, 0))
    assert b.at.planned <= 2048 < pte_lab.what_if(path, {(0, 0): b.bound + 1}).planned
    assert str(b).splitlines()[-1] == f'export change: Dim("batch", max={b.bound}) for input 0, axis 0'
    # one bound over: in bytes only, a rounded "(2.0 KiB)" beside the budget's would read as equal, not over
    over = b.next_planned - 2048
    assert over > 0 and (f"at {b.bound + 1} it would plan {b.next_planned:,} B, {over:,} B over the budget of 2,048 B"
                         in str(b).splitlines())
    assert "outside the planned arenas" not in str(b)  # no delegate: the plan is all of it
    with pytest.raises(WhatIfError, match=r"below what any bound plans: the smallest, at bound 1, plans"):
        pte_lab.largest_bound(path, 16, (0, 0))
    u = pte_lab.usage_at(path, {(0, 0): 5})
    assert u.plan_for_shape == pte_lab.what_if(path, {(0, 0): 5}).planned
    assert u.planned_at_bound == pte_lab.open(path).methods["forward"].planned_bytes
    assert u.gap == u.planned_at_bound - u.plan_for_shape > 0
    assert {r[0]: r[3] for r in u.tensors}[8] == 5 * 8 * 4  # the linear layer's output: 5 rows of 8 floats

    import matplotlib.pyplot as plt

    ax = b.plot()
    # every point predicted (no bound re-exported here): the legend says so (issue 49.7)
    assert [ln.get_label() for ln in ax.get_lines()][:2] == ["planned, predicted (ExecuTorch's greedy replayed)",
                                                             "lower bound (bytes alive at once)"]
    plt.close("all")


@pytest.mark.slow
def test_transformer_prediction_equals_the_reexport(tmp_path):
    """Exported at 48, predicted at 33 and 20: what ExecuTorch plans when re-exported there, byte for byte."""
    big = tmp_path / "seq48.pte"
    big.write_bytes(_transformer_at(48))
    for n in (33, 20):
        small = tmp_path / f"seq{n}.pte"
        small.write_bytes(_transformer_at(n))
        _assert_same_as_reexport(pte_lab.what_if(str(big), {(0, 1): n}), small)


@pytest.mark.slow
def test_xnnpack_dynamic_batch_prediction_equals_the_reexport(tmp_path):
    """XNNPACK (its 64-byte arena tail kept): exported at 32, predicted at 20."""
    big, small = tmp_path / "b32.pte", tmp_path / "b20.pte"
    big.write_bytes(_dynamic_batch_xnnpack_at(32))
    small.write_bytes(_dynamic_batch_xnnpack_at(20))
    w = pte_lab.what_if(str(big), {(0, 0): 20})
    _assert_same_as_reexport(w, small)
    # the answer is the plan; XNNPACK's own memory is in the heap, and sizes measures it
    assert "XNNPACK's packed weights and workspaces" in str(w) and "`pte-lab sizes FILE`" in str(w)
    assert "outside_plan" in w.to_dict()
    b = pte_lab.largest_bound(str(big), w.planned, (0, 0))
    assert "the budget counts the planned arenas only" in str(b) and str(b).splitlines()[-1].startswith("export")


def test_cli_at_shape_prints_each_tensors_bytes_and_the_gap(program_path, capsys):
    """``what-if FILE --at-shape 0=5,16`` on the dynamic batch (bound 32): one run at 5 rows. Each planned
    tensor's bytes at that shape, what a plan for it needs, and the gap to the plan at the bound."""
    from pte_lab.cli import main

    path = str(program_path("dynamic"))
    assert main(["what-if", path, "--at-shape", "0=5,16", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    planned = pte_lab.open(path).methods["forward"].planned_bytes
    assert doc["point"] == [{"input": 0, "axis": 0, "size": 5}] and doc["planned_at_bound"] == planned
    assert doc["gap"] == planned - doc["plan_for_shape"] > 0
    rows = {r["value"]: r for r in doc["tensors"]}
    assert rows[8]["shape"] == [5, 8] and rows[8]["used"] == 5 * 8 * 4 and rows[8]["planned_at_bound"] == 32 * 8 * 4
    # the text of the same record (one run is enough: the view renders what the JSON holds)
    from pte_lab.planning.at_bound import UsageAt

    text = str(UsageAt(doc["method"], ((0, 0),), (5,), [(r["value"], r["role"], tuple(r["shape"]), r["used"],
                                                        r["planned_at_bound"]) for r in doc["tensors"]],
                       doc["used"], doc["plan_for_shape"], doc["lower_bound"], doc["planned_at_bound"]))
    assert f"allocated whole whatever the shape: {planned:,} B" in text
    assert any(ln.split()[:5] == ["v8", "intermediate", "[5,", "8]", "160"] for ln in text.splitlines())
    # the sum is named for what it is (it is more than the plan at the bound can be: not "used"), and the table
    # says its order, which is the order of its last column
    lines = text.splitlines()
    assert f"sum of the planned tensors' bytes at this shape: {doc['used']:,} B" in text and "not all alive at once" in text
    assert not [ln for ln in lines if ln.startswith("used")]
    head = next(i for i, ln in enumerate(lines) if "the most bytes planned at the bound first" in ln)  # all 5
    at_bound = [int(ln.split()[-1].replace(",", "")) for ln in lines[head + 3:] if ln.startswith("v")]
    assert len(at_bound) > 1 and at_bound == sorted(at_bound, reverse=True)
    for bad, says in ((["0=5,16,3"], "exported with 2 axes [32, 16]"), (["0=32,16"], "that is the exported shape"),
                      (["0=five"], "write INPUT=D0,D1,...")):
        assert main(["what-if", path, "--at-shape", *bad]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0], err


# ------------------------------------------------------------------ wording and the budget search (issue wiffix)
def _made_up_fit(m):
    """The ``dynamic`` program's fit from runs made up here: every dim at the bound (32) scales with the batch."""
    keys, _, exported = check_bounds(m, {(0, 0): 4})
    runs = [((n,), {t.value: tuple(n if s == 32 else s for s in t.shape) for t in m.planned})
            for (n,) in sample_points(keys, exported)]
    return fit_shapes(m, keys, exported, runs)


def test_an_unrecorded_tensor_is_refused_alike_by_bound_and_at_shape_naming_its_operator(program_path, monkeypatch):
    """A run that logged nothing for v8: --bound (the fit) and --at-shape (usage_at) give one wording, naming the
    operator that writes it, why and what to do."""
    import pte_lab.planning.at_bound as pw

    path = str(program_path("dynamic"))
    monkeypatch.setattr(pw, "_FITS", {})
    monkeypatch.setattr(pw, "_run_shapes", lambda path, m, keys, points, data_path=None, **limit: [
        (p, {t.value: tuple(p[0] if s == 32 else s for s in t.shape) for t in m.planned if t.value != 8})
        for p in points])
    says = []
    for call in (lambda: pte_lab.what_if(path, {(0, 0): 8}), lambda: pte_lab.usage_at(path, {(0, 0): 8})):
        with pytest.raises(WhatIfError) as e:
            call()
        says.append(str(e.value))
    op = next(t.op for t in pte_lab.open(path).methods["forward"].planned if t.value == 8)
    for text in says:
        assert f"no shape was recorded for tensor v8 (written by {op}) at input 0 axis 0 = " in text, text
        assert "re-export at the bound you want" in text
    assert says[1].endswith(says[0].split(" = ", 1)[1].split(" ", 1)[1])  # the same words after the point


def test_the_budget_search_is_exact_though_the_plan_dips():
    """The greedy's plan is not monotonic in the bound (a larger bound can plan less): the answer is the largest
    bound whose plan fits, as a brute force over every bound finds it, at every budget."""
    from pte_lab.planning.at_bound import _search

    planned = {n: 100 * n + (500 if n in (47, 59, 60) else 0) for n in range(1, 101)}  # dips after 47 and 60

    class Fit:
        def _arrays(self):  # one tensor of n bytes: the lower bound is n * 90, below every plan
            return (np.zeros((1, 1), np.int64), np.ones((1, 1, 1), np.int64), np.ones((1, 1), np.int64),
                    np.ones(1, np.int64))

        def nbytes_at(self, point, round_up=False):
            return np.array([point[0]])

    class Pred:
        fit = Fit()

        def lower_bound(self, nbytes):
            return int(nbytes[0]) * 90

        def planned_at(self, point):
            return planned[point[0]]

        def nbytes_at(self, point):
            return np.array([point[0]])

    for budget in range(50, 10_700, 37):
        fits = [n for n, p in planned.items() if p <= budget]
        assert _search(Pred(), budget, 1, 100) == (max(fits) if fits else None), budget
    assert _search(Pred(), 4_850, 1, 100) == 48  # 47 plans 5,200, over it; 48 plans 4,800


def test_budget_text_names_the_smallest_bound_and_budget_without_bound_uses_the_one_dim(program_path, capsys,
                                                                                         monkeypatch):
    import pte_lab.planning.at_bound as pw
    from pte_lab.cli import main

    path = str(program_path("dynamic"))
    m = pte_lab.open(path).methods["forward"]
    fit = _made_up_fit(m)
    b = pw.search_budget(pw.Predictor(m, fit), 2048, path)
    assert f"the smallest bound tried, 1, plans {b.smallest:,} B" in str(b)
    assert (b.bound, b.at.planned) in [(n, p) for n, p, _ in b.curve]  # the curve is drawn from the same plans
    assert main(["what-if", path, "--budget", "2KiB"]) == 2  # its linear layer reads no size: not in the file
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "reads no axis of its dynamic inputs (0 [32, 16]) as a size" in err[0], err
    monkeypatch.setattr(pw, "learn", lambda *a, **k: fit)
    monkeypatch.setattr(pw, "dynamic_dims", lambda *a, **k: ((0, 0),))  # read from a file: the test above
    assert main(["what-if", path, "--budget", "2KiB", "--planned-only"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"largest bound of input 0 axis 0 under 2KiB = 2,048 B (2.0 KiB): {b.bound:,} ")
    assert "no --bound given: input 0 axis 0 is the method's one dynamic dim" in out
    monkeypatch.setattr(pw, "dynamic_dims", lambda *a, **k: ((0, 0), (0, 1)))
    assert main(["what-if", path, "--budget", "2KiB"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has 2 dynamic dims (0:0, 0:1): name the one to search" in err[0], err


def test_a_static_program_given_a_bound_points_to_two_exports(program_path, capsys):
    from pte_lab.cli import main

    assert main(["what-if", str(program_path("portable")), "--bound", "0:0=2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pte-lab what-if A.pte B.pte --values V1,V2 --at V3" in err[0], err


def _fused_qkv_at(bound: int) -> bytes:
    """A fused qkv (one linear layer, then ``chunk(3)``: ``split_with_sizes_copy``, a tensor-list output), with a
    dynamic sequence of at most ``bound``."""
    import torch

    from pte_lab import examples as ex

    class FusedQkv(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = torch.nn.Linear(8, 24)

        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            return q * k + v

    torch.manual_seed(0)
    seq = torch.export.Dim("seq", min=2, max=bound)
    return ex._lower(ex._export(FusedQkv().eval(), (torch.randn(1, 8, 8),), dynamic_shapes=({1: seq},)))


@pytest.mark.slow
def test_a_list_output_is_recorded_so_fused_qkv_predicts_the_reexport(tmp_path):
    """Every tensor of ``chunk``'s list output is recorded: the prediction at 20 is the re-export at 20."""
    big, small = tmp_path / "seq64.pte", tmp_path / "seq20.pte"
    big.write_bytes(_fused_qkv_at(64))
    small.write_bytes(_fused_qkv_at(20))
    m = pte_lab.open(str(big)).methods["forward"]
    assert any(i.target == "aten::split_with_sizes_copy.out" for i in m.instructions)
    _assert_same_as_reexport(pte_lab.what_if(str(big), {(0, 1): 20}), str(small))


@pytest.mark.slow
def test_export_llm_dynamic_prompt_prediction_equals_the_reexport(program_path, program_dir):
    """export_llm's program (``model.enable_dynamic_shape``, its default: the prompt's length is dynamic up to
    max_seq_length - 1), exported at 32 and predicted at a 15-token bound, is what export_llm plans at
    ``export.max_seq_length=16`` with the caches kept at ``export.max_context_length=32``: every arena, every
    planned tensor's shape, bytes and offset, the KV caches included."""
    import os

    from filelock import FileLock

    from pte_lab import examples

    small = program_dir / "llm_fp32_seq16_ctx32.pte"
    with FileLock(str(small) + ".lock"):
        if not small.exists():
            tmp = small.with_suffix(f".{os.getpid()}.tmp")
            examples.save("llm", str(tmp), max_seq_len=16, max_context_len=32)
            os.replace(tmp, small)
    big = pte_lab.open(str(program_path("llm_fp32"))).methods["forward"]
    assert tuple(big.inputs[0].shape) == (1, 31)  # the bound export_llm gave the prompt: max_seq_length - 1
    w = pte_lab.what_if(str(program_path("llm_fp32")), {(0, 1): 15})
    _assert_same_as_reexport(w, small)
    caches = [t for t in w.tensors if tuple(t.shape) == (1, 32, 2, 16)]
    assert len(caches) == 4  # two layers' K and V caches, at the context length, not the bound
    assert w.export_change().startswith('Dim("seq", max=15)')


def test_planned_arenas_beyond_the_memory_free_are_refused_before_a_worker(program_path, monkeypatch):
    """ExecuTorch's Module allocates a method's planned arenas whole when it loads it: a file declaring more
    than this machine has free is refused in one line giving the bytes, and no worker starts (a 2 KB file
    declaring 96 GiB ended in std::bad_alloc)."""
    from pte_lab.errors import DeclaredSizeError
    from pte_lab.planning import at_bound as planning
    from pte_lab.runtime import inputs

    def no_worker(*a, **k):
        raise AssertionError("a worker was started")

    monkeypatch.setattr(planning, "Worker", no_worker)
    monkeypatch.setattr(inputs, "host_available", lambda: 1000)  # this machine, as if nearly full
    path = program_path("dynamic")
    arena = pte_lab.open(path).methods["forward"].raw.buffer_sizes[1]
    assert arena > 1000
    with pytest.raises(DeclaredSizeError, match=rf"planned arena 1: {arena:,} B.*more than the 1,000 B free"):
        pte_lab.what_if(path, {(0, 0): 8}, cache=False)


# ------------------------------------------------------------------ the whole-app budget: the heap at each bound
class _LinearFit:
    """A made-up fit: one tensor of ``n`` bytes at bound ``n`` (its lower bound ``90 * n``, below every plan)."""

    keys = ((0, 1),)

    def __init__(self, top: int):
        self.exported = (top,)

    def _arrays(self):
        return (np.zeros((1, 1), np.int64), np.ones((1, 1, 1), np.int64), np.ones((1, 1), np.int64),
                np.ones(1, np.int64))

    def nbytes_at(self, point, round_up=False):
        return np.array([point[0]])


class _Pred:
    def __init__(self, planned: dict[int, int]):
        self.fit, self.planned = _LinearFit(max(planned)), planned

    def lower_bound(self, nbytes):
        return int(nbytes[0]) * 90

    def planned_at(self, point):
        return self.planned[point[0]]

    def nbytes_at(self, point):
        return np.array([point[0]])


def _beyond(heap: int):
    from pte_lab.planning.at_bound import HEAP_AT_BOUND, BeyondPart, BeyondPlan
    from pte_lab.runtime.sizing.records import Basis

    return BeyondPlan("forward", (BeyondPart("method pool", 700, Basis.MEASURED_HERE),
                                  BeyondPart("temp pool", 300, Basis.MEASURED_HERE),
                                  BeyondPart(HEAP_AT_BOUND, heap, Basis.MEASURED_HERE)))


def test_the_whole_budget_counts_the_heap_measured_at_the_answer_and_rules_out_every_bound_above():
    """Kernels and delegates malloc by the shapes, so the heap at a smaller bound is smaller: the answer is the
    largest bound whose plan, pools and heap measured at that very bound fit, as a brute force over every bound
    with its own heap finds it; the bound past it is measured too (it does not fit with its own heap), a few
    fresh runs in all; the heap at the exported bound alone would give a smaller answer."""
    from pte_lab.planning.at_bound import HEAP_MEASUREMENTS, _answer, _heap_search, _search

    top = 400
    planned = {n: 1_000 * n + (30_000 if n in (150, 151, 290) else 0) for n in range(1, top + 1)}  # the plan dips
    heap = {n: 20 * n * n + 50_000 for n in range(1, top + 1)}  # a workspace of the bound's square
    pred = _Pred(planned)
    beyond = _beyond(heap[top])
    for budget in range(80_000, 3_600_000, 17_321):
        fits = [n for n in planned if planned[n] + 1_000 + heap[n] <= budget]
        asked = []

        def measure(n):
            asked.append(n)
            return heap[n], 0

        h = _heap_search(pred, budget, beyond, measure)
        got = _answer(pred, budget, beyond, dict(h.measured), 1, top)[0]
        assert got == (max(fits) if fits else None), budget
        assert len(asked) <= HEAP_MEASUREMENTS and len(set(asked)) == len(asked), (budget, asked)
        if got is None:
            continue
        assert h.exact and h.basis == got and h.at(got) == heap[got], (budget, h)  # measured at the answer itself
        assert got == top or h.at(got + 1) == heap[got + 1], (budget, h)  # and one past it
        old = _search(pred, budget - 1_000 - heap[top], 1, top) if budget > 1_000 + heap[top] else None
        assert old is None or old <= got  # the exported bound's heap: never a larger answer


def test_the_whole_budget_says_where_the_heap_does_not_grow_and_stops_on_a_failed_measurement():
    """A kernel that mallocs at some shapes and not at others: the answer still counts the heap measured at itself
    (it fits), and the search says the heap falls between two bounds it measured; a measurement that fails stops
    the search, the answer then counting the heap measured at a larger bound (no smaller), said."""
    from pte_lab.errors import PteLabError
    from pte_lab.planning.at_bound import HEAP_NOISE, _answer, _heap_search

    top = 300
    planned = {n: 1_000 * n for n in range(1, top + 1)}
    heap = {n: (900_000 if 100 <= n <= 200 else 0) + 10_000 for n in range(1, top + 1)}  # a bump in the middle
    pred = _Pred(planned)
    h = _heap_search(pred, 171_000, _beyond(heap[top]), lambda n: (heap[n], 0))
    a, b = h.falls
    assert a < b and h.at(a) > h.at(b) + HEAP_NOISE  # measured: more heap at the smaller bound
    got = _answer(pred, 171_000, _beyond(heap[top]), dict(h.measured), 1, top)[0]
    assert h.basis == got and planned[got] + 1_000 + heap[got] <= 171_000  # measured at itself: it fits

    def fails(n):
        raise PteLabError("forward: the runtime refused it")

    h = _heap_search(pred, 2_000_000, _beyond(20_000), fails)  # everything fits beside the exported bound's heap
    assert (h.measured, h.basis, h.exact, h.stopped) == (((top, 20_000),), top, True, None)
    h = _heap_search(pred, 250_000, _beyond(20_000), fails)
    assert (h.measured, h.stopped, h.basis, h.exact) == (((top, 20_000),), "forward: the runtime refused it", top,
                                                          False)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["xnnpack", "portable"])
def test_the_whole_budget_answer_is_the_largest_reexport_that_fits_whichever_export_is_asked(tmp_path, backend):
    """Issue 45/48: the whole-app budget's answer counts the heap at the bound it answers, not at the exported one
    (XNNPACK's workspace and the kernels' buffers shrink with the bound): with the budget between what re-exports at
    K and at K + 1 need in all (``pte_lab.sizes``' total on this host: planned, pools, FileDataLoader's heap peak),
    the answer is K, asked of the export at the top bound or of the one at K + 1; the exported bound's heap alone
    would answer less where XNNPACK's workspace shrinks with the bound."""
    from pte_lab.planning.at_bound import search_budget

    top, k = 192, 120
    paths = {}
    for n in (top, k, k + 1):
        paths[n] = str(tmp_path / f"seq{n}.pte")
        with open(paths[n], "wb") as f:
            f.write(_transformer_at(n, backend))
    need = {n: pte_lab.sizes(paths[n], cache=False).totals()["forward"]["host"].bytes for n in (k, k + 1)}
    budget = (need[k] + need[k + 1]) // 2  # K fits, K + 1 does not, each by far more than a heap's run-to-run noise
    answers = {}
    for asked in (top, k + 1):
        b = answers[asked] = pte_lab.largest_bound(paths[asked], budget, whole=True, cache=False)
        assert b.bound == k, (asked, b.heap)
        assert b.heap.exact and b.heap.basis == k and b.beyond.heap.bytes == b.heap.at(k), b.heap
        assert b.at.planned + b.beyond.total <= budget < b.next_total
        assert b.heap.at(k + 1) is not None  # one past the answer: measured, over the budget with its own heap
        assert f"every bound above {k} is ruled out" in str(b)
        assert b.to_dict()["beyond_plan"]["heap_bound"] == k
    if backend == "xnnpack":
        b = answers[top]
        assert b.heap.xnnpack_resized > 0
        at_top = b.beyond.with_heap(top, b.heap.measured[0][1])  # the sizing's heap, at the export's bound
        assert search_budget(b._pred, budget, beyond=at_top).bound < k


def test_asking_about_a_need_does_not_change_the_answer(program_path, monkeypatch, tmp_path):
    """``--need N`` measures the heap at N for what plans N: a heap measured there may be smaller than at the
    bounds below it (a kernel that mallocs at some shapes and not at others), and counted for those bounds it would
    let an unmeasured one through. The answer with a need is the answer without one."""
    import pte_lab.planning.at_bound as ab
    from pte_lab.runtime.sizing.records import HeapAt

    monkeypatch.setenv("PTE_LAB_CACHE_DIR", str(tmp_path))
    path = str(program_path("dynamic"))  # batch up to 32
    pools = pte_lab.sizes(path).methods["forward"]  # the sizing's heap, at 32
    big, small = pools.file_heap_peak + 1_000, 100  # more heap below 31 rows than at the bound, little at 31

    def heap_at(path, method, shapes, **kwargs):  # the heap as a kernel mallocing below 31 rows would have it
        return HeapAt(method, tuple(shapes.items()), small if shapes[0][0] == 31 else big)

    monkeypatch.setattr(ab, "heap_at", heap_at)
    plan_12 = pte_lab.what_if(path, {(0, 0): 12}).planned
    budget = pools.method_allocator + pools.temp_allocator + big + plan_12  # 12 fits, with the heap below 31
    plain = pte_lab.largest_bound(path, budget, (0, 0), whole=True)
    asked = pte_lab.largest_bound(path, budget, (0, 0), whole=True, need=31)
    assert plain.bound == asked.bound and plain.heap.at(plain.bound) == big and asked.need == 31
    assert plain.bound < 31 and 31 not in dict(asked.heap.measured)  # 31, with its small heap, was never the answer
