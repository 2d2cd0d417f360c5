"""Inputs for a method, made from its plan (dtype and shape, at the upper bound when dynamic).

A file declares its inputs' shapes, and a 5 KB file may declare an input of 64 GiB: nothing is built at a
declared size before ``check_build`` has compared its bytes, exact (:func:`shape_bytes`), with the limit
(``input_limit``: :data:`DEFAULT_INPUT_LIMIT`, raised with :data:`INPUT_LIMIT_ENV` or ``max_input_bytes=``,
and never beyond the memory free here). Every path that builds inputs goes through it: :func:`example_inputs`
(the runtime's sample inputs, what-if's runs), and the sizing runner's buffers (:func:`input_parts` with
``unplanned_outputs``, checked by :func:`pte_lab.runtime.sizing.sizes` before any worker starts).
"""

from __future__ import annotations

import os

from ..errors import DeclaredSizeError, PteFormatError, PteLabError
from ..model.dtypes import SCALAR_TYPES, short_shape
from ..units import INT64_MAX, check_int64, exact_bytes, first_few, parse_bytes
from ..vocabulary import DEFAULT_INPUT_LIMIT, INPUT_LIMIT_ENV, ValueKind
from .memory import host_available


#: dtype name -> bytes per element
_ELEMENT = {name: size for name, size in SCALAR_TYPES.values()}


def shape_bytes(shape, element_size: int) -> int:
    """Bytes of a tensor of ``shape`` (sizes at least 0), exact in Python ints; past :data:`~pte_lab.units.INT64_MAX`
    the product stops and ``INT64_MAX + 1`` stands for "more than int64 holds" (a long shape is never multiplied
    out)."""
    shape = [int(d) for d in shape]
    if 0 in shape:
        return 0
    n = int(element_size)
    for d in shape:
        n *= d
        if n > INT64_MAX:
            return INT64_MAX + 1
    return n


def _bytes_said(n: int) -> str:
    return exact_bytes(n) if n <= INT64_MAX else f"more than {INT64_MAX:,} B (beyond what int64 holds)"


def input_parts(method, shapes: dict | None = None, unplanned_outputs: bool = False) -> list[tuple[str, int]]:
    """``(what, bytes)`` of each tensor input of ``method`` at the shape the file declares (``shapes``: input
    position -> the shape to build instead), exact; ``unplanned_outputs``: with the outputs the caller gives
    memory to (the sizing runner's buffers). Raises :class:`~pte_lab.PteFormatError` for a declared size
    below 0."""
    out = []
    ios = [("input", s) for s in method.inputs]
    if unplanned_outputs:
        ios += [("output", s) for s in method.outputs if not s.planned]
    for kind, s in ios:
        if s.kind != ValueKind.TENSOR or s.shape is None:
            continue
        shape = tuple((shapes or {}).get(s.position, s.shape)) if kind == "input" else tuple(s.shape)
        if any(int(d) < 0 for d in shape):
            raise PteFormatError(f"method {method.name!r} {kind} {s.position} has shape {short_shape(shape)}: "
                                 f"a size below 0")
        out.append((f"{kind} {s.position} {s.dtype}{short_shape(shape)}", shape_bytes(shape, _ELEMENT.get(s.dtype, 1))))
    return out


def input_limit(limit=None) -> tuple[int, str]:
    """(the most bytes pte_lab builds at sizes a file declares, where that figure comes from: ``"max_input_bytes"``,
    :data:`INPUT_LIMIT_ENV` or ``"default"``): ``limit`` (bytes, or a size such as ``"4GiB"``) when given, else
    :data:`INPUT_LIMIT_ENV`, else :data:`DEFAULT_INPUT_LIMIT`. Raises :class:`~pte_lab.PteLabError` for a limit
    that is not a size (one line naming where it was set)."""
    if limit is not None:
        where, text = "max_input_bytes", limit
    elif os.environ.get(INPUT_LIMIT_ENV, "").strip():
        where, text = INPUT_LIMIT_ENV, os.environ[INPUT_LIMIT_ENV]
    else:
        return DEFAULT_INPUT_LIMIT, "default"
    try:
        n = check_int64(text, "limit") if isinstance(text, int) and not isinstance(text, bool) else parse_bytes(text)
    except ValueError as exc:
        raise PteLabError(f"{where}: {exc}") from None
    if n < 0:
        raise PteLabError(f"{where}: a limit of {n:,} bytes: give 0 or more")
    return n, where


def check_build(parts: list[tuple[str, int]], *, method: str | None, doing: str, limit=None) -> int:
    """The bytes of ``parts`` (``(what, bytes)``: :func:`input_parts`, and whatever else one run builds) when they
    are within the limit (``input_limit``) and the memory free here; else :class:`~pte_lab.errors.DeclaredSizeError`
    before anything is built, one line giving the bytes exactly and the largest parts. ``doing`` says what would
    build them (``"its inputs at the shapes the file declares"``)."""
    total = sum(n for _, n in parts)
    cap, source = input_limit(limit)
    free = host_available()
    if total <= cap and (free is None or total <= free):
        return total
    if total > cap:
        how = (f"the default: raise it with --max-input-bytes, max_input_bytes= or {INPUT_LIMIT_ENV}"
               if source == "default" else f"set by {source}")
        over, available = f"the {exact_bytes(cap)} pte_lab builds at a size a file declares ({how})", cap
    else:
        over, available, source = f"the {exact_bytes(free)} free on this machine (MemAvailable)", free, "free memory"
    largest = first_few((f"{what}: {_bytes_said(n)}" for what, n in sorted(parts, key=lambda p: -p[1])), 3, "; ")
    who = f"method {method!r}: " if method else ""
    raise DeclaredSizeError(f"{who}{doing} would build {_bytes_said(total)} ({largest}), more than {over}; "
                            f"nothing was built", step=doing, method=method, needed=total, available=available,
                            limit_source=source)


#: what a scalar input gets when the file holds no value for it
SCALAR_DEFAULTS = {"Int": 0, "Double": 0.0, "Bool": False}


def scalar_default(s) -> "int | float | bool | None":
    """The value :func:`example_inputs` passes for scalar input ``s`` (an IOSpec); None: not a scalar.

    The value the file holds for it (the one the program was exported with: ExecuTorch's ``set_input``
    refuses any other, InvalidArgument 0x12), else ``Int`` 0, ``Double`` 0.0, ``Bool`` false.
    """
    if s.kind not in SCALAR_DEFAULTS:
        return None
    return s.scalar if s.scalar is not None else SCALAR_DEFAULTS[s.kind]


def defaulted_inputs(method) -> tuple[str, ...]:
    """The scalar inputs :func:`example_inputs` gives a value of its own, as a reader reads them:
    ``"input 1 (Double) = 2.0, the value the program holds"`` or ``"input 2 (Int) = 0, none in the file"``."""
    return tuple(f"input {s.position} ({s.kind}) = {scalar_default(s)!r}, "
                 + ("the value the program holds" if s.scalar is not None else "none in the file")
                 for s in method.inputs if scalar_default(s) is not None)


def _spec(s) -> str:
    if s.kind != ValueKind.TENSOR:
        return s.kind if s.scalar is None else f"{s.kind} = {s.scalar!r}"
    return f"{s.dtype}{list(s.shape)}" + (" (dynamic: at most this)" if s.dynamic else "")


def input_problem(method, inputs) -> "tuple[int | None, str] | None":
    """What is wrong with ``inputs`` for ``method`` (an IOSpec list's owner), as ``(position, why)``, or None.

    Checked before ExecuTorch is called, which otherwise answers InvalidArgument (0x12) without naming
    the input: the number of inputs, a tensor's dtype and shape (a dynamic dimension may be smaller than
    its bound, never larger), and a scalar's value (``set_input`` accepts only the one exported).
    """
    specs = method.inputs
    if len(inputs) != len(specs):
        return None, (f"method {method.name!r} takes {len(specs)} input{'s' if len(specs) != 1 else ''} "
                      f"({'; '.join(f'{s.position}: {_spec(s)}' for s in specs) or 'none'}), "
                      f"got {len(inputs)}")
    for s, v in zip(specs, inputs):
        if s.kind == ValueKind.TENSOR and s.shape is not None and hasattr(v, "shape") and hasattr(v, "dtype"):
            dtype = str(v.dtype).removeprefix("torch.")
            shape = tuple(v.shape)
            if s.dtype and dtype != s.dtype:
                return s.position, f"input {s.position} is {dtype}{list(shape)}; the method takes {_spec(s)}"
            bad = len(shape) != len(s.shape) or any(
                (g > b) if s.dynamic else (g != b) for g, b in zip(shape, s.shape))
            if bad:
                return s.position, f"input {s.position} has shape {list(shape)}; the method takes {_spec(s)}"
        elif s.kind in SCALAR_DEFAULTS and s.scalar is not None and not hasattr(v, "shape"):
            if type(v) is not type(s.scalar) and not (s.kind == ValueKind.DOUBLE and isinstance(v, int)
                                                      and not isinstance(v, bool)) or v != s.scalar:
                return s.position, (f"input {s.position} ({s.kind}) is {v!r}; ExecuTorch accepts only the "
                                    f"value the program was exported with, {s.scalar!r} (set_input refuses "
                                    f"any other): pass {s.scalar!r}, or re-export with the value you need "
                                    f"or with it as a tensor input")
    return None


def example_inputs(method, seed: int = 0, *, shapes: dict | None = None, limit=None) -> list:
    """Seeded random tensors matching ``method``'s inputs (a :class:`pte_lab.model.Method`), at the shapes the
    file declares (``shapes``: input position -> the shape to build instead, a dynamic input's smaller one).

    Floating point: standard normal; integers: small non-negative values (safe
    as indices); bool: random. ``Int``, ``Double`` and ``Bool`` inputs get the
    value the file holds for them, else 0, 0.0, false (``scalar_default``;
    ``defaulted_inputs`` lists them). Other inputs (strings, lists, None)
    cannot be made up: ValueError. Nothing is built before the tensors' bytes are checked
    (``check_build``; ``limit``: see ``input_limit``).

    Returns a list with one value per input (torch tensors, Python scalars). Raises ``ValueError`` as above, and
    :class:`~pte_lab.errors.DeclaredSizeError` for tensors over the limit or the memory free (their bytes in
    the message).
    """
    def drawing():
        import torch  # after the check: a refused input imports nothing

        g = torch.Generator().manual_seed(seed)

        def draw(s, shape):
            dtype = getattr(torch, s.dtype, None)
            if not isinstance(dtype, torch.dtype):
                raise ValueError(f"method {method.name!r} input {s.position}: no torch dtype {s.dtype!r}")
            if dtype.is_floating_point:
                return torch.randn(shape, generator=g).to(dtype)
            if dtype == torch.bool:
                return torch.randint(0, 2, shape, generator=g).bool()
            return torch.randint(0, 4, shape, generator=g).to(dtype)

        return draw

    return _each_input(method, shapes, limit, drawing)


def _each_input(method, shapes: dict | None, limit, drawing) -> list:
    """One value per input of ``method``: a scalar's (:func:`scalar_default`), a tensor's drawn by
    ``drawing()(spec, shape)`` at its shape (``shapes``' where given), after ``check_build`` passed (``drawing`` is
    called then: nothing is imported or built for inputs refused); other inputs cannot be made up: ValueError."""
    doing = "its inputs at the shapes " + ("asked" if shapes else "the file declares")
    check_build(input_parts(method, shapes), method=method.name, doing=doing, limit=limit)
    draw = drawing()
    out: list = []
    for s in method.inputs:
        if s.kind in SCALAR_DEFAULTS:
            out.append(scalar_default(s))
        elif s.kind != ValueKind.TENSOR:
            raise ValueError(f"method {method.name!r} input {s.position} is a {s.kind}: pass inputs yourself")
        else:
            out.append(draw(s, tuple(int(d) for d in (shapes or {}).get(s.position, s.shape))))
    return out


#: dtype name -> the numpy dtype a plain input of it is drawn in (bfloat16: drawn in float32, its upper half kept)
_NUMPY_DRAWN = {"float16": "float16", "float32": "float32", "float64": "float64", "bfloat16": "float32",
                "complex64": "complex64", "complex128": "complex128", "bool": "bool", "uint8": "uint8",
                "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint16": "uint16",
                "uint32": "uint32", "uint64": "uint64"}


def plain_example_inputs(method, seed: int = 0, *, shapes: dict | None = None, limit=None) -> list:
    """:func:`example_inputs` as plain data, without torch: a tensor as ``(ScalarType code, shape, its contiguous
    bytes)``, a scalar as it is (what the native shape recorder takes, :func:`pte_lab.runtime.recorder.record`).
    Drawn as :func:`example_inputs` draws them (floating point standard normal, integers 0 to 3, bool random;
    seeded, with numpy's generator, so not the same numbers as torch's): a run's shapes do not depend on them.
    A dtype numpy cannot draw (quantized, 8-bit float) is built as :func:`example_inputs` builds it, with torch.
    Checked and refused as :func:`example_inputs` is."""
    tensors = [s for s in method.inputs if s.kind == ValueKind.TENSOR]
    if any(s.dtype not in _NUMPY_DRAWN for s in tensors):
        return plain_inputs(method, example_inputs(method, seed, shapes=shapes, limit=limit))

    def drawing():
        import numpy as np

        rng = np.random.default_rng(seed)

        def draw(s, shape):
            drawn = np.dtype(_NUMPY_DRAWN[s.dtype])
            if np.issubdtype(drawn, np.inexact):  # floating point and complex
                a = rng.standard_normal(shape)
                if np.issubdtype(drawn, np.complexfloating):
                    a = a + 1j * rng.standard_normal(shape)
                a = a.astype(drawn)
                if s.dtype == "bfloat16":  # bfloat16 is float32's upper 16 bits (truncated)
                    a = (a.view(np.uint32) >> 16).astype(np.uint16)
            elif drawn == np.bool_:
                a = rng.integers(0, 2, shape).astype(bool)
            else:
                a = rng.integers(0, 4, shape).astype(drawn)
            code = method.raw.values[s.value].tensor.scalar_type
            return int(code), shape, np.ascontiguousarray(a).tobytes()

        return draw

    return _each_input(method, shapes, limit, drawing)


def plain_inputs(method, inputs: list) -> list:
    """``inputs`` for ``method`` (a :class:`pte_lab.model.Method`; torch tensors and Python scalars, as
    :func:`example_inputs` makes them) as plain data for the native shape recorder
    (:func:`pte_lab.runtime.recorder.record`): a tensor as ``(ScalarType code of the method's input, shape, its
    contiguous bytes)``, a scalar as it is."""
    out = []
    for spec, v in zip(method.inputs, inputs):
        if hasattr(v, "shape") and hasattr(v, "dtype"):
            import torch

            code = method.raw.values[spec.value].tensor.scalar_type
            flat = v.detach().contiguous().reshape(-1)
            data = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
            out.append((int(code), tuple(int(d) for d in v.shape), data))
        else:
            out.append(v)
    return out


def is_token_position(method) -> bool:
    """Whether ``method`` takes ``(tokens int64[1, n], input_pos int64[1])``: an LLM's forward."""
    ins = method.inputs
    return (len(ins) == 2 and all(s.kind == ValueKind.TENSOR and s.dtype == "int64" for s in ins)
            and len(ins[0].shape) == 2 and ins[0].shape[0] == 1 and ins[1].shape == (1,))


def call_sequence(method, calls: int = 4, seed: int = 0, prefill: int = 8) -> list[list]:
    """Inputs for ``calls`` successive calls of ``method``, for running with its state carried over.

    An LLM forward (``is_token_position``) gets a prefill of ``prefill``
    tokens at position 0 (fewer when its token dimension is smaller; one
    token when it is static), then one token per call at the next positions.
    Any other method gets fresh seeded random inputs for every call
    (:func:`example_inputs`).

    Returns a list of ``calls`` input lists. Raises ``ValueError`` where :func:`example_inputs` does, and
    :class:`~pte_lab.errors.DeclaredSizeError` for all the calls' inputs together over the limit
    (``check_build``; they are held at once).
    """
    if not is_token_position(method):
        check_build([(f"{what}, {calls:,} calls' worth", n * calls) for what, n in input_parts(method)],
                    method=method.name, doing=f"the inputs of {calls:,} calls at the shapes the file declares")
        return [example_inputs(method, seed=seed + k) for k in range(calls)]
    bound = method.inputs[0].shape[1]
    first = max(1, min(prefill, bound)) if method.inputs[0].dynamic else bound
    later = 1 if method.inputs[0].dynamic else bound
    check_build([(f"int64 tokens of {calls:,} calls", 8 * (first + max(0, calls - 1) * later)),
                 (f"int64 positions of {calls:,} calls", 8 * calls)], method=method.name,
                doing=f"the inputs of {calls:,} calls (a prefill of {first:,} tokens, then {later:,} a call)")
    import torch

    g = torch.Generator().manual_seed(seed)
    out, pos = [], 0
    for k in range(calls):
        n = first if k == 0 else later
        out.append([torch.randint(0, 4, (1, n), generator=g, dtype=torch.int64), torch.tensor([pos])])
        pos += n
    return out
