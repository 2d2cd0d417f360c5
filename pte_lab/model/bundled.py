"""The test suites a bundled program (``.bpte``) carries, per method."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import PteFormatError, PteLabError
from ..format import RawBundled
from ..units import count, first_few
from ..vocabulary import ValueKind
from .dtypes import nbytes, scalar_type

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["Bundled", "TestSuite", "BundledValue", "OutputsVerdict", "compare_outputs", "PLAIN_DTYPES", "unplain"]


@dataclass(frozen=True)
class BundledValue:
    """One input or expected output of a test case."""

    kind: str  # Tensor | Int | Bool | Double
    dtype: str | None = None
    shape: tuple[int, ...] | None = None
    nbytes: int | None = None
    value: int | bool | float | None = None

    def describe(self) -> str:
        return f"{self.dtype}{list(self.shape)}" if self.kind == ValueKind.TENSOR else f"{self.kind} {self.value!r}"


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
        self._checked: dict[int, tuple[str, int]] = {}
        self._distinct: list | None = None
        self.version: int = raw.version
        #: bytes of the carried program, and of the whole bundled file
        self.program_bytes: int = raw.program[1]
        self.file_size: int = len(container)
        self.suites: list[TestSuite] = []
        #: method -> its first suite's position (ExecuTorch's bundled runner uses that one)
        self._first: dict[str, int] = {}
        for k, s in enumerate(raw.suites):
            self._first.setdefault(s.method, k)
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
        if v.kind != ValueKind.TENSOR:
            return BundledValue(v.kind, value=v.value)
        dtype, elsize = scalar_type(v.scalar_type, f"bundled test of method {method!r}")
        return BundledValue("Tensor", dtype, v.sizes, nbytes(v.sizes, elsize))

    def _suite(self, suite: "str | int"):
        suites = self._raw.suites
        if isinstance(suite, int) and not isinstance(suite, bool):
            if not 0 <= suite < len(suites):
                raise PteLabError(f"no test suite {suite}: the bundled program has {len(suites)}")
            return suites[suite]
        k = self._first.get(suite)  # the first suite of that method, as ExecuTorch's bundled runner picks it
        if k is not None:
            return suites[k]

        raise PteLabError(f"no test suite for method {suite!r}; suites: "
                          f"{first_few((repr(m) for m in self._first), 8) or 'none'}")

    def distinct_suites(self) -> "list[tuple[TestSuite, tuple[int, ...]]]":
        """Each distinct suite once, with the positions in :attr:`suites` that name it (a file may name one
        suite table many times: it is shown once, not once per name)."""
        if self._distinct is None:
            at: dict[int, int] = {}
            out: list[tuple[TestSuite, list[int]]] = []
            for k, s in enumerate(self.suites):
                j = at.get(id(s))
                if j is None:
                    at[id(s)] = len(out)
                    out.append((s, [k]))
                else:
                    out[j][1].append(k)
            self._distinct = [(s, tuple(ks)) for s, ks in out]
        return self._distinct

    def case(self, suite: "str | int", index: int) -> tuple[list, list]:
        """(inputs, expected outputs) of one case: tensors as ``(dtype, shape, bytes)``, scalars as values.

        ``suite`` is a method name (its first suite, as ExecuTorch picks it) or a
        suite's position in :attr:`suites` (a file may give one method two suites).
        Raises :class:`PteFormatError` when a tensor's bytes do not match its dtype and shape,
        :class:`PteLabError` for a suite or case the file does not have.
        """
        s = self._suite(suite)
        method = s.method
        if not 0 <= index < len(s.cases):
            raise PteLabError(f"test suite of method {method!r} has {len(s.cases)} cases, not case {index}")
        c = s.cases[index]
        checked = self._checked  # value tables named by many cases: dtype and bytes worked out once

        def value(v):
            if v.kind != ValueKind.TENSOR:
                return v.value
            got = checked.get(id(v))
            if got is None:
                dtype, elsize = scalar_type(v.scalar_type, f"bundled test of method {method!r}")
                got = checked[id(v)] = (dtype, nbytes(v.sizes, elsize))
            dtype, need = got
            start, length = v.data
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
        return (f"<Bundled: {count(len(self.suites), 'test suite')}, "
                f"{count(sum(s.cases for s in self.suites), 'case')}, program {self.program_bytes:,} bytes>")


# ------------------------------------------------------------------ comparing outputs on raw bytes
#: dtypes compared (and fed to the runtime) from raw bytes: name -> numpy's dtype ("bfloat16" widened by hand).
#: Packed, quantized and bit dtypes (quint4x2, qint8, bits8...) are not: torch crashes on such a tensor built
#: from bytes, so pte_lab never builds one.
PLAIN_DTYPES: dict[str, str] = {
    "bool": "?", "uint8": "u1", "int8": "i1", "int16": "<i2", "int32": "<i4", "int64": "<i8", "uint16": "<u2",
    "uint32": "<u4", "uint64": "<u8", "float16": "<f2", "float32": "<f4", "float64": "<f8", "bfloat16": "<u2",
    "complex64": "<c8", "complex128": "<c16",
}
_FLOATING = {"float16", "float32", "float64", "bfloat16", "complex64", "complex128"}


def unplain(values) -> str | None:
    """Why these raw values cannot be fed to the runtime (a tensor of a dtype pte_lab does not build), or None."""
    for k, v in enumerate(values):
        if isinstance(v, tuple) and v[0] not in PLAIN_DTYPES:
            return (f"input {k} is a {v[0]} tensor: pte_lab builds only plain dtypes from a file's bytes "
                    f"({', '.join(PLAIN_DTYPES)}), so the case was not run")
    return None


@dataclass(frozen=True)
class OutputsVerdict:
    """One bundled case's outputs against the expected ones."""

    passed: bool
    #: the largest |actual - expected| over the compared tensors (None when nothing was compared)
    max_abs_error: float | None
    #: why an output could not be compared or matched in kind ("" when all were compared: ``passed`` says
    #: whether the values agree)
    why: str = ""


def _array(dtype: str, shape, data: bytes):
    a = np.frombuffer(data, dtype=PLAIN_DTYPES[dtype])
    if dtype == "bfloat16":  # the high half of a float32
        a = (a.astype(np.uint32) << 16).view(np.float32)
    return a.reshape(tuple(shape))


def _close(a, e, rtol: float, atol: float):
    """ExecuTorch's closeness (bundled_program.cpp): NaN equals NaN, infinities of one sign are equal."""
    with np.errstate(all="ignore"):
        a, e = a.astype(np.complex128 if np.iscomplexobj(a) else np.float64), \
            e.astype(np.complex128 if np.iscomplexobj(e) else np.float64)
        err = np.abs(a - e)
        same = (a == e) | (np.isnan(a) & np.isnan(e))
        ok = same | (np.isfinite(err) & (err <= atol + rtol * np.abs(e)))
        finite = err[np.isfinite(err)]
    return bool(ok.all()), float(finite.max()) if finite.size else 0.0


def compare_outputs(actual: list, expected: list, rtol: float, atol: float) -> OutputsVerdict:
    """Outputs against expected outputs, on raw bytes: ``(dtype, shape, bytes)`` tensors, or scalars.

    As ExecuTorch's ``verify_result_with_bundled_expected_output``: dtype and
    shape must match; floating tensors pass when ``|actual - expected| <= atol +
    rtol * |expected|`` everywhere, other tensors when their bytes are equal. A
    tensor of a dtype pte_lab does not read (``bytes`` None, or a packed or
    quantized dtype) fails as "not compared", never crashes.
    """
    if len(actual) != len(expected):
        return OutputsVerdict(False, None, f"{count(len(actual), 'output')}, {len(expected):,} expected")
    worst, compared, differs, whys = 0.0, False, False, []
    for k, (o, e) in enumerate(zip(actual, expected)):
        if isinstance(e, tuple):
            if not isinstance(o, tuple):
                whys.append(f"output {k} is {type(o).__name__} {o!r}, expected a {e[0]}{list(e[1])} tensor")
                continue
            if o[0] != e[0]:
                whys.append(f"output {k} is {o[0]}, expected {e[0]}")
                continue
            if tuple(o[1]) != tuple(e[1]):
                whys.append(f"output {k} has shape {list(o[1])}, expected {list(e[1])}")
                continue
            if e[0] not in PLAIN_DTYPES or o[2] is None:
                whys.append(f"output {k} not compared: pte_lab does not compare {e[0]} tensors")
                continue
            a, x = _array(*o), _array(*e)
            compared = True
            if e[0] in _FLOATING:
                ok, err = _close(a, x, rtol, atol)
                worst = max(worst, err)
            else:
                ok = o[2] == e[2]
                if a.size and e[0] != "bool":
                    with np.errstate(all="ignore"):
                        worst = max(worst, float(np.abs(a.astype(np.float64) - x.astype(np.float64)).max()))
            differs = differs or not ok
        else:
            if isinstance(o, tuple):
                whys.append(f"output {k} is a {o[0]}{list(o[1])} tensor, expected {type(e).__name__} {e!r}")
            elif isinstance(e, float) and not isinstance(e, bool):
                ok, err = _close(np.asarray(o), np.asarray(e), rtol, atol)
                compared, worst = True, max(worst, err)
                differs = differs or not ok
            else:
                compared = True
                if type(o) is not type(e) or o != e:
                    whys.append(f"output {k} is {o!r}, expected {e!r}")
    return OutputsVerdict(not whys and not differs, worst if compared else None, "; ".join(whys))
