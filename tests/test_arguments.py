"""The public functions given an argument of the wrong kind: one line naming the function, the argument,
what it takes and what it got (:class:`pte_lab.ArgumentTypeError`, a PteLabError and a TypeError), before
any work; the right kinds still work, and each function's signature still reads as written."""

from __future__ import annotations

import inspect
import reprlib

import pytest

import pte_lab
from pte_lab.arguments import arguments, NAMES, optional

#: (function, the good arguments, the argument made wrong, the wrong value)
CASES = [
    ("open", {"source": "{p}"}, "source", 123),
    ("open", {"source": "{p}"}, "etrecord", 123),
    ("open", {"source": "{p}"}, "data", 1.5),
    ("diff", {"a": "{p}", "b": "{p}"}, "b", None),
    ("diff", {"a": "{p}", "b": "{p}"}, "methods", "forward"),
    ("diff", {"a": "{p}", "b": "{p}"}, "labels", ("a",)),
    ("diff", {"a": "{p}", "b": "{p}"}, "sizes", "yes"),
    ("load", {"path": "{p}"}, "path", b"\x00"),
    ("load", {"path": "{p}"}, "data_path", 7),
    ("load", {"path": "{p}"}, "isolate", "no"),
    ("sizes", {"source": "{p}"}, "source", 3),
    ("sizes", {"source": "{p}"}, "methods", "forward"),
    ("sizes", {"source": "{p}"}, "runs", "2"),
    ("sizes", {"source": "{p}"}, "verify", 1),
    ("explore", {"source": "{p}"}, "source", 2.5),
    ("explore", {"source": "{p}"}, "method", 0),
    ("emulate_device", {"device": "cuda:0"}, "device", 0),
    ("emulate_device", {"device": "cuda:0"}, "capacity", "1GB"),
    ("sizes", {"source": "{p}"}, "progress", 5),
    ("what_if", {"source": "{p}", "bounds": {(0, 0): 8}}, "bounds", {0: 8}),
    ("what_if", {"source": "{p}", "bounds": {(0, 0): 8}}, "bounds", {(0, 0): 8.5}),
    ("what_if", {"source": "{p}", "bounds": {(0, 0): 8}}, "bounds", {(0, 0): True}),
    ("largest_bound", {"source": "{p}", "budget": "1MiB"}, "budget", 1.5),
    ("largest_bound", {"source": "{p}", "budget": "1MiB"}, "dim", (0, "a")),
    ("usage_at", {"source": "{p}", "shape": {(0, 0): 8}}, "shape", [8]),
    ("what_if_from", {"a": "{p}", "b": "{p}", "values": (4, 8), "at": 16}, "values", {4, 8}),
]

#: the right kind, a value the function does not take: ArgumentValueError (a PteLabError and a ValueError)
VALUES = [
    ("sizes", {"source": "{p}"}, "runs", 0),
    ("sizes", {"source": "{p}"}, "heap_runs", 2 ** 70),
    ("emulate_device", {"device": "cuda:0"}, "capacity", -1),
]


def _refused(error, program_path, name, good, wrong, value):
    """What ``pte_lab.<name>(**good, wrong=value)`` raised (``{p}`` in ``good`` is the portable example)."""
    path = str(program_path("portable"))
    kwargs = {k: v.format(p=path) if isinstance(v, str) else v for k, v in good.items()} | {wrong: value}
    with pytest.raises(error) as e:
        getattr(pte_lab, name)(**kwargs)
    return e


@pytest.mark.parametrize("name, good, wrong, value", VALUES, ids=[f"{c[0]}-{c[2]}" for c in VALUES])
def test_a_value_out_of_range_is_named_in_one_line(program_path, name, good, wrong, value):
    e = _refused(pte_lab.ArgumentValueError, program_path, name, good, wrong, value)
    assert str(e.value).startswith(f"pte_lab.{name}(): argument {wrong!r} takes ")
    assert str(e.value).endswith(f"; got {value!r}") and isinstance(e.value, ValueError)


def test_a_text_file_a_missing_method_and_an_unknown_loader_are_the_project_s_errors(program_path):
    path = program_path("portable")
    with open(path) as text, pytest.raises(pte_lab.ArgumentTypeError, match="a binary file"):
        pte_lab.open(text)
    with pytest.raises(pte_lab.NotFoundError, match="no method 'nope'; the program has forward"):
        pte_lab.explore(path, method="nope")
    with pytest.raises(pte_lab.ArgumentValueError, match="unknown loader 5; choose one of corrected"):
        pte_lab.open(path).load_cost(5)
    with pytest.raises(pte_lab.ArgumentValueError, match=r"unknown loader \['module'\]"):
        pte_lab.open(path).load_cost(["module"])
    with pytest.raises(pte_lab.ArgumentTypeError, match="takes a dict"):
        pte_lab.what_if(path, {(0, 0): None})
    for missing in (path.parent / "nope.pte", "a\0b"):
        with pytest.raises(pte_lab.UnreadableFileError):
            pte_lab.open(missing)
    with pytest.raises(FileNotFoundError):  # what Python's open raises, and the project's error too
        pte_lab.open(path.parent / "nope.pte")


@pytest.mark.parametrize("name, good, wrong, value", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_a_wrong_kind_is_named_in_one_line(program_path, name, good, wrong, value):
    e = _refused(pte_lab.ArgumentTypeError, program_path, name, good, wrong, value)
    text = str(e.value)
    assert text.startswith(f"pte_lab.{name}(): argument {wrong!r} takes ") and "\n" not in text
    assert text.endswith(f"; got {type(value).__name__} {reprlib.repr(value)}")  # bounded: reprlib's
    assert isinstance(e.value, pte_lab.PteLabError) and isinstance(e.value, TypeError)


def test_the_right_kinds_still_work(program_path, tmp_path):
    path = program_path("portable")
    for source in (str(path), path, path.read_bytes(), open(path, "rb")):
        assert list(pte_lab.open(source).methods) == ["forward"]
    pte = pte_lab.open(path)
    assert pte_lab.diff(pte, str(path), methods=["forward"], labels=("a", "b")).labels == ("a", "b")
    assert pte_lab.diff(pte, pte, methods=(m for m in ["forward"])).labels  # an iterator is not consumed here


def test_a_missing_or_unknown_argument_is_the_project_s_error_too(program_path):
    with pytest.raises(pte_lab.ArgumentTypeError, match=r"^pte_lab\.open\(\): got an unexpected keyword argument"):
        pte_lab.open(str(program_path("portable")), etrecod="x")
    with pytest.raises(pte_lab.ArgumentTypeError, match=r"^pte_lab\.diff\(\): missing a required argument: 'b'"):
        pte_lab.diff(str(program_path("portable")))


def test_signatures_read_as_written():
    assert str(inspect.signature(pte_lab.open)) == "(source, data=None, *, etrecord=None)"
    assert "data_path=None" in str(inspect.signature(pte_lab.load))


def test_a_value_shown_in_the_message_is_short_and_terminal_safe():
    @arguments(names=optional(NAMES))
    def f(names=None):
        return names

    with pytest.raises(pte_lab.ArgumentTypeError) as e:
        f(names=["\x1b]0;title\x07"] * 10_000 + [1])
    assert "\x1b" not in str(e.value) and len(str(e.value)) < 300
    with pytest.raises(AssertionError, match="has no argument nope"):
        arguments(nope=NAMES)(f)
