"""Inputs for a method, made from its plan (dtype and shape, at the upper bound when dynamic)."""

from __future__ import annotations


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
    if s.kind != "Tensor":
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
        if s.kind == "Tensor" and s.shape is not None and hasattr(v, "shape") and hasattr(v, "dtype"):
            dtype = str(v.dtype).removeprefix("torch.")
            shape = tuple(v.shape)
            if s.dtype and dtype != s.dtype:
                return s.position, f"input {s.position} is {dtype}{list(shape)}; the method takes {_spec(s)}"
            bad = len(shape) != len(s.shape) or any(
                (g > b) if s.dynamic else (g != b) for g, b in zip(shape, s.shape))
            if bad:
                return s.position, f"input {s.position} has shape {list(shape)}; the method takes {_spec(s)}"
        elif s.kind in SCALAR_DEFAULTS and s.scalar is not None and not hasattr(v, "shape"):
            if type(v) is not type(s.scalar) and not (s.kind == "Double" and isinstance(v, int)
                                                      and not isinstance(v, bool)) or v != s.scalar:
                return s.position, (f"input {s.position} ({s.kind}) is {v!r}; ExecuTorch accepts only the "
                                    f"value the program was exported with, {s.scalar!r} (set_input refuses "
                                    f"any other): pass {s.scalar!r}, or re-export with the value you need "
                                    f"or with it as a tensor input")
    return None


def example_inputs(method, seed: int = 0) -> list:
    """Seeded random tensors matching ``method``'s inputs (a :class:`pte_lab.model.Method`).

    Floating point: standard normal; integers: small non-negative values (safe
    as indices); bool: random. ``Int``, ``Double`` and ``Bool`` inputs get the
    value the file holds for them, else 0, 0.0, false (:func:`scalar_default`;
    :func:`defaulted_inputs` lists them). Other inputs (strings, lists, None)
    cannot be made up: ValueError.

    Returns a list with one value per input (torch tensors, Python scalars). Raises ``ValueError`` as above.
    """
    import torch

    g = torch.Generator().manual_seed(seed)
    out = []
    for s in method.inputs:
        if s.kind in SCALAR_DEFAULTS:
            out.append(scalar_default(s))
            continue
        if s.kind != "Tensor":
            raise ValueError(f"method {method.name!r} input {s.position} is a {s.kind}: pass inputs yourself")
        dtype = getattr(torch, s.dtype, None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"method {method.name!r} input {s.position}: no torch dtype {s.dtype!r}")
        shape = tuple(s.shape)
        if dtype.is_floating_point:
            out.append(torch.randn(shape, generator=g).to(dtype))
        elif dtype == torch.bool:
            out.append(torch.randint(0, 2, shape, generator=g).bool())
        else:
            out.append(torch.randint(0, 4, shape, generator=g).to(dtype))
    return out


def is_token_position(method) -> bool:
    """Whether ``method`` takes ``(tokens int64[1, n], input_pos int64[1])``: an LLM's forward."""
    ins = method.inputs
    return (len(ins) == 2 and all(s.kind == "Tensor" and s.dtype == "int64" for s in ins)
            and len(ins[0].shape) == 2 and ins[0].shape[0] == 1 and ins[1].shape == (1,))


def call_sequence(method, calls: int = 4, seed: int = 0, prefill: int = 8) -> list[list]:
    """Inputs for ``calls`` successive calls of ``method``, for running with its state carried over.

    An LLM forward (:func:`is_token_position`) gets a prefill of ``prefill``
    tokens at position 0 (fewer when its token dimension is smaller; one
    token when it is static), then one token per call at the next positions.
    Any other method gets fresh seeded random inputs for every call
    (:func:`example_inputs`).

    Returns a list of ``calls`` input lists. Raises ``ValueError`` where :func:`example_inputs` does.
    """
    import torch

    if not is_token_position(method):
        return [example_inputs(method, seed=seed + k) for k in range(calls)]
    bound = method.inputs[0].shape[1]
    first = max(1, min(prefill, bound)) if method.inputs[0].dynamic else bound
    g = torch.Generator().manual_seed(seed)
    out, pos = [], 0
    for k in range(calls):
        n = first if k == 0 else (1 if method.inputs[0].dynamic else bound)
        out.append([torch.randint(0, 4, (1, n), generator=g, dtype=torch.int64), torch.tensor([pos])])
        pos += n
    return out
