"""Inputs for a method, made from its plan (dtype and shape, at the upper bound when dynamic)."""

from __future__ import annotations


def example_inputs(method, seed: int = 0) -> list:
    """Seeded random tensors matching ``method``'s inputs (a :class:`pte_lab.model.Method`).

    Floating point: standard normal; integers: small non-negative values (safe
    as indices); bool: random. Non-tensor inputs cannot be made up: ValueError.
    """
    import torch

    g = torch.Generator().manual_seed(seed)
    out = []
    for s in method.inputs:
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
