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
