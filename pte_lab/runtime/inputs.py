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
