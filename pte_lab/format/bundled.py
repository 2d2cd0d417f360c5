"""Bundled programs (``.bpte``, identifier ``BP08``): a program plus test cases for its methods.

Schema: ``devtools/bundled_program/schema/bundled_program_schema.fbs`` of
ExecuTorch::

    BundledProgram { version: uint; method_test_suites: [BundledMethodTestSuite];
                     program: [ubyte] }          // the complete .pte bytes
    BundledMethodTestSuite { method_name: string; test_cases: [BundledMethodTestCase] }
    BundledMethodTestCase { inputs: [Value]; expected_outputs: [Value] }
    Value { val: ValueUnion }                    // Tensor = 1, Int = 2, Bool = 3, Double = 4
    Tensor { scalar_type: byte; sizes: [int]; data: [ubyte]; dim_order: [ubyte] }

Tensor data is located (offset, length), never copied here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import PteFormatError
from ..vocabulary import ValueKind
from ._flat import Table, root_table

IDENTIFIER = b"BP08"
VALUE_KINDS = {1: ValueKind.TENSOR, 2: ValueKind.INT, 3: ValueKind.BOOL, 4: ValueKind.DOUBLE}

__all__ = ["IDENTIFIER", "RawBundled", "RawSuite", "RawCase", "RawBundledValue", "decode_bundled"]


@dataclass(slots=True)
class RawBundledValue:
    """One input or expected output of a bundled test case: a tensor's type, sizes and bytes, or a scalar's
    value."""
    kind: ValueKind
    scalar_type: int | None = None
    sizes: tuple[int, ...] | None = None
    #: (offset, length) of a tensor's bytes in the bundled file
    data: tuple[int, int] | None = None
    #: an Int, Bool or Double value
    value: int | bool | float | None = None


@dataclass(slots=True)
class RawCase:
    """One test case of a bundled program: its inputs and expected outputs."""
    inputs: list[RawBundledValue]
    expected_outputs: list[RawBundledValue]


@dataclass(slots=True)
class RawSuite:
    """One test suite of a bundled program: the method it tests and its cases."""
    method: str
    cases: list[RawCase]


@dataclass(slots=True)
class RawBundled:
    """A bundled program (``.bpte``) as it stores its tables: the version, the test suites, where the program's
    bytes are."""
    version: int
    suites: list[RawSuite]
    #: (offset, length) of the carried program's bytes in the bundled file
    program: tuple[int, int]


def _value(v: Table) -> RawBundledValue:
    tag, t = v.union(0, 1, "val")
    kind = VALUE_KINDS.get(tag)
    if kind is None or t is None:
        raise PteFormatError(f"{v.where}: unknown or empty bundled value (type {tag})")
    if kind == ValueKind.TENSOR:
        sizes = t.int_tuple(1, "int32", "sizes")
        if sizes and min(sizes) < 0:
            raise PteFormatError(f"{t.where}.sizes: negative dimension {min(sizes)}")
        return RawBundledValue(kind, t.scalar(0, "int8"), sizes, t.bytes_vector_span(2, "data"))
    if kind == ValueKind.INT:
        return RawBundledValue(kind, value=t.scalar(0, "int64"))
    if kind == ValueKind.BOOL:
        return RawBundledValue(kind, value=t.scalar(0, "bool", False))
    return RawBundledValue(kind, value=t.scalar(0, "float64", 0.0))


def decode_bundled(buf: memoryview) -> RawBundled:
    """Decode a bundled program's tables (the carried program is only located)."""
    root = root_table(buf, "bundled_program")
    # tables named many times (one suite, case or value table shared by many references) are decoded once,
    # by position, and shared: the records are never changed
    memo: dict[int, object] = {}

    def each(vec, decode):
        out = []
        for i, pos in enumerate(vec.positions().tolist()):
            rec = memo.get(pos)
            if rec is None:
                rec = memo[pos] = decode(vec.table_at(i, pos))
            out.append(rec)
        return out

    def case(c: Table) -> RawCase:
        return RawCase(each(c.tables(0, "inputs"), _value), each(c.tables(1, "expected_outputs"), _value))

    def suite(s: Table) -> RawSuite:
        return RawSuite(s.string(0, "method_name", ""), each(s.tables(1, "test_cases"), case))

    suites = each(root.tables(1, "method_test_suites"), suite)
    start, length = root.bytes_vector_span(2, "program")
    if length == 0:
        raise PteFormatError("bundled_program.program: the bundled program carries no program")
    return RawBundled(root.scalar(0, "uint32"), suites, (start, length))
