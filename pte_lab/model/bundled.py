"""The test suites a bundled program (``.bpte``) carries, per method."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..format import RawBundled
from .dtypes import nbytes, scalar_type

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["Bundled", "TestSuite", "BundledValue"]


@dataclass(frozen=True)
class BundledValue:
    """One input or expected output of a test case."""

    kind: str  # Tensor | Int | Bool | Double
    dtype: str | None = None
    shape: tuple[int, ...] | None = None
    nbytes: int | None = None
    value: int | bool | float | None = None

    def describe(self) -> str:
        return f"{self.dtype}{list(self.shape)}" if self.kind == "Tensor" else f"{self.kind} {self.value!r}"


@dataclass(frozen=True)
class TestSuite:
    """The test cases of one method (the signature is the first case's)."""

    __test__ = False  # not a pytest class

    method: str
    cases: int
    inputs: tuple[BundledValue, ...]
    expected_outputs: tuple[BundledValue, ...]


class Bundled:
    """What a ``.bpte`` adds to its program: test suites with inputs and expected outputs."""

    def __init__(self, raw: RawBundled, container: memoryview):
        self._raw = raw
        self._container = container
        self._by_method: dict | None = None
        self._values: dict[int, tuple] = {}
        self.version: int = raw.version
        #: bytes of the carried program, and of the whole bundled file
        self.program_bytes: int = raw.program[1]
        self.file_size: int = len(container)
        self.suites: list[TestSuite] = []
        made: dict[int, TestSuite] = {}  # suites that share one table share one record: worked out once
        for s in raw.suites:
            suite = made.get(id(s))
            if suite is None:
                first = s.cases[0] if s.cases else None
                suite = made[id(s)] = TestSuite(
                    s.method, len(s.cases),
                    tuple(self._value(v, s.method) for v in (first.inputs if first else ())),
                    tuple(self._value(v, s.method) for v in (first.expected_outputs if first else ())))
            self.suites.append(suite)

    def _value(self, v, method: str) -> BundledValue:
        got = self._values.get(id(v))  # value tables named many times: one record, described once
        if got is None or got[0] != method:
            got = self._values[id(v)] = (method, self._describe(v, method))
        return got[1]

    def _describe(self, v, method: str) -> BundledValue:
        if v.kind != "Tensor":
            return BundledValue(v.kind, value=v.value)
        dtype, elsize = scalar_type(v.scalar_type, f"bundled test of method {method!r}")
        return BundledValue("Tensor", dtype, v.sizes, nbytes(v.sizes, elsize))

    def case(self, method: str, index: int) -> tuple[list, list]:
        """(inputs, expected outputs) of one case: tensors as ``(dtype, shape, bytes)``, scalars as values.

        Raises :class:`PteFormatError` when a tensor's bytes do not match its dtype and shape.
        """
        from ..errors import PteFormatError

        if self._by_method is None:  # one pass, not one per case (the first suite of a method)
            self._by_method = {}
            for s in self._raw.suites:
                self._by_method.setdefault(s.method, s)
        suite = self._by_method.get(method)
        if suite is None:
            raise KeyError(f"no test suite for method {method!r}; suites: {[s.method for s in self._raw.suites]}")
        c = suite.cases[index]

        def value(v):
            if v.kind != "Tensor":
                return v.value
            dtype, elsize = scalar_type(v.scalar_type, f"bundled test of method {method!r}")
            start, length = v.data
            need = nbytes(v.sizes, elsize)
            if need != length:
                raise PteFormatError(f"bundled test {method!r}[{index}]: a {dtype}{list(v.sizes)} tensor needs "
                                     f"{need} bytes, the file gives {length}")
            return dtype, v.sizes, bytes(self._container[start : start + length])

        return [value(v) for v in c.inputs], [value(v) for v in c.expected_outputs]

    def table(self) -> "pd.DataFrame":
        """One row per method: cases, input and expected-output signatures."""
        import pandas as pd

        return pd.DataFrame([(s.method, s.cases, ", ".join(v.describe() for v in s.inputs),
                              ", ".join(v.describe() for v in s.expected_outputs)) for s in self.suites],
                            columns=["method", "cases", "inputs", "expected_outputs"])

    def __repr__(self) -> str:
        return (f"<Bundled: {len(self.suites)} test suites, "
                f"{sum(s.cases for s in self.suites)} cases, program {self.program_bytes:,} bytes>")
