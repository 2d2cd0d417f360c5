"""Tensors between a file's raw bytes and the runtime, built only for dtypes torch handles safely.

Runs where the runtime runs (the caller, or the isolated worker): a bundled
case's inputs become tensors here, and the outputs go back as ``(dtype, shape,
bytes)`` so the caller compares bytes with numpy and never builds a torch tensor
from the file (a packed dtype such as ``quint4x2`` built from bytes crashes torch).
"""

from __future__ import annotations

from ..errors import PteLabError
from ..model.bundled import PLAIN_DTYPES

__all__ = ["to_torch", "to_raw"]


def to_torch(v):
    """A raw value for the runtime: ``(dtype, shape, bytes)`` of a plain dtype becomes a tensor."""
    if not isinstance(v, tuple):
        return v
    import torch

    dtype, shape, data = v
    t = getattr(torch, dtype, None) if dtype in PLAIN_DTYPES else None
    if not isinstance(t, torch.dtype):
        raise PteLabError(f"a bundled test tensor has dtype {dtype!r}, which pte_lab does not build "
                          f"(plain dtypes only: {', '.join(PLAIN_DTYPES)})")
    if not data:
        return torch.zeros(tuple(shape), dtype=t)
    return torch.frombuffer(bytearray(data), dtype=t).reshape(tuple(shape))


def to_raw(o):
    """A runtime output as plain data: a tensor as ``(dtype, shape, bytes)`` (bytes None for a dtype not read)."""
    import torch

    if not isinstance(o, torch.Tensor):
        return o
    dtype = str(o.dtype).removeprefix("torch.")
    shape = tuple(o.shape)
    if dtype not in PLAIN_DTYPES:
        return dtype, shape, None
    flat = o.detach().contiguous().reshape(-1)
    return dtype, shape, flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
