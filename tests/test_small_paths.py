"""The plain-Python paths the analysis takes on a method of a few values give what its numpy paths give: the
roles of every planned tensor, and the set operations (``pte_lab.model.arrays``) against numpy's own."""

from __future__ import annotations

import numpy as np
import pytest

import pte_lab
from pte_lab.model import arrays, roles
from pte_lab.vocabulary import Role

#: small programs of every kind of value the roles name: inputs, outputs, views, state, unused
PROGRAMS = ("portable", "xnnpack", "device", "three_methods", "kv_cache", "dynamic", "cond", "external")


def _roles(path) -> dict[str, list]:
    return {name: m.analysis.columns["role"].tolist() for name, m in pte_lab.open(path).methods.items()}


@pytest.mark.parametrize("name", PROGRAMS)
def test_roles_of_a_few_values_are_the_masks_roles(program_path, monkeypatch, name):
    path = program_path(name)
    few = _roles(path)
    monkeypatch.setattr(roles, "_FEW_ROLES", -1)  # every method by the masks
    assert _roles(path) == few
    assert any(len(r) <= 32 for r in few.values())  # the plain path was taken


def test_every_role_is_given_alike(monkeypatch):
    """Each rule, and rules that hold together, on crafted columns: the first rule that holds wins (state, then
    input and output, input, output, unused, view), the same on both paths."""
    R = Role
    values = np.arange(12, dtype=np.int64)
    kwargs = dict(inputs=[0, 1, 5, 9], outputs=[1, 2, 4, 6, 9], state=frozenset({5, 6, 9, 10}),
                  named=np.array([True] * 3 + [False] * 2 + [True] * 4 + [False, True, True]),
                  views={3: 8, 7: 8, 11: 8})
    want = [R.INPUT, R.INPUT_OUTPUT, R.OUTPUT, R.UNUSED, R.OUTPUT, R.MUTABLE_BUFFER, R.MUTABLE_BUFFER, R.VIEW,
            R.INTERMEDIATE, R.MUTABLE_BUFFER, R.MUTABLE_BUFFER, R.VIEW]
    assert roles.roles_of(values, **kwargs).tolist() == want
    monkeypatch.setattr(roles, "_FEW_ROLES", -1)
    assert roles.roles_of(values, **kwargs).tolist() == want


@pytest.mark.parametrize("n, m", [(0, 3), (5, 0), (4, 3), (30, 30), (200, 40), (3000, 2000)])
def test_set_operations_are_numpys(n, m):
    rng = np.random.default_rng(n * 7 + m)
    a = rng.integers(0, 50, n).astype(np.int64)
    b = rng.integers(0, 50, m).astype(np.int64)
    assert np.array_equal(arrays.isin(a, b), np.isin(a, b))
    assert arrays.isin(a, b).dtype == bool and arrays.isin(a, b).shape == (n,)
    for got, want in zip(arrays.unique(a, return_index=True, return_inverse=True, return_counts=True),
                         np.unique(a, return_index=True, return_inverse=True, return_counts=True)):
        assert np.array_equal(got, want.reshape(-1))
