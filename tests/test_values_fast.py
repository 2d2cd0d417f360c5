"""The all-at-once reader of a method's values gives what the checked reader gives: the same records on
real programs, and on mutants the same records or the same error, word for word (with the same budget
charged)."""

from __future__ import annotations

import pytest

from pte_lab.errors import PteLabError
from pte_lab.format import _values_fast
from pte_lab.format import program_tables as P
from pte_lab.format import read

from tests.crafting import build_program
from tests.fuzzing import mutations

REAL = ("portable", "xnnpack", "device", "three_methods", "kv_cache", "dynamic", "cond", "external",
        "transformer")


def _plans(data: bytes):
    """Every plan's values, or the error reading them gave (type and message)."""
    try:
        raw, _ = read(data)
        plans = [(raw.plan(i).values, raw.plan(i).records) for i in range(len(raw.plan_names))]
        return {"plans": plans, "budget left": raw._root._budget[0]}  # each reader charges the same
    except PteLabError as exc:
        return (type(exc).__name__, str(exc))


def _both(data: bytes, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(_values_fast, "FEW", 0)  # the all-at-once reader on every table, however few
        m.setattr(P, "FEW", 0)
        fast = _plans(data)
    with monkeypatch.context() as m:
        m.setattr(P, "read_values", lambda buf, positions, *a: [None] * len(positions))
        checked = _plans(data)
    return fast, checked


@pytest.mark.parametrize("name", REAL)
def test_real_programs_read_the_same_values(name, program_bytes, monkeypatch):
    fast, checked = _both(program_bytes(name), monkeypatch)
    assert isinstance(fast, dict) and fast == checked
    assert any(v.tensor is not None for values, _ in fast["plans"] for v in values)


def test_tensor_details_come_through(program_bytes, monkeypatch):
    """Names, devices and data locations (extra_tensor_info), allocation info and dynamism."""
    fast, _ = _both(program_bytes("external"), monkeypatch)
    assert any(v.tensor is not None and v.tensor.location for values, _ in fast["plans"] for v in values)
    fast, _ = _both(program_bytes("device"), monkeypatch)
    assert any(v.tensor is not None and v.tensor.device != "cpu" for values, _ in fast["plans"] for v in values)
    fast, _ = _both(program_bytes("dynamic"), monkeypatch)
    assert any(v.tensor is not None and v.tensor.shape_dynamism for values, _ in fast["plans"] for v in values)
    big = build_program([("tensor", 1, (1 << 32) + 16, 4), ("tensor", 1, 16, 4)], [[0, 1]], sizes=(0, (1 << 32) + 64))
    fast, checked = _both(big, monkeypatch)
    assert fast == checked and fast["plans"][0][0][0].tensor.offset == (1 << 32) + 16  # memory_offset_high read


@pytest.mark.parametrize("seed", ["portable", "crafted"])
def test_mutants_read_the_same_values_or_fail_with_the_same_words(seed, program_bytes, monkeypatch):
    data = program_bytes("portable") if seed == "portable" else build_program(
        [("tensor", 1, 0, 4), ("tensor", 1, 16, 4), ("int", 3), ("tensor", 2, 0, [2, 2])],
        [[0, 1], [1, 3]], sizes=(0, 64, 32), inputs=[0], outputs=[3])
    outcomes = set()
    for buf in mutations(data, min(len(data), 4096), f"values-{seed}", 150):
        fast, checked = _both(bytes(buf), monkeypatch)
        assert fast == checked
        outcomes.add(isinstance(fast, dict))
    assert outcomes == {True, False}  # the mutants reach both ends
