"""Check a replanned program against its original with ExecuTorch: outputs must be bit-identical.

Bit for bit means bytes: two outputs are the same when their dtype, shape and
raw bytes are (``same_bits``), so NaN equals NaN with the same bits and
-0.0 differs from 0.0, where ``torch.equal`` says the opposite of both. Outputs
that are not finite are reported (an ``export_llm`` program exported without a
checkpoint computes NaN: its norm weights are uninitialised memory).
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass

from ..progress import reporter
from .. import runtime
from ..runtime.device import allocator_registered
from ..units import count

__all__ = ["verify", "Verification", "same_bits", "not_finite"]


@dataclass
class Verification:
    """One method of two programs run alike: whether every output was bit-identical, and where not."""
    method: str
    runs: int
    identical: bool
    detail: str = ""
    #: outputs that were not finite (NaN or infinite), on both programs alike: "" when all were finite
    not_finite: str = ""
    #: the first call (1-based) whose outputs differ; None when every call matched
    failed_call: int | None = None


def same_bits(a, b) -> str | None:
    """Why two outputs differ, comparing dtype, shape and raw bytes (None: they are the same bits).

    Tensors are compared byte for byte (NaN == NaN with the same payload, -0.0 != 0.0); other values
    with ``==`` and their type.
    """
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return f"a {type(a).__name__} against a {type(b).__name__}"
        if a.dtype != b.dtype:
            return f"dtype {a.dtype} against {b.dtype}"
        if a.shape != b.shape:
            return f"shape {list(a.shape)} against {list(b.shape)}"
        x, y = (t.detach().contiguous().reshape(-1).view(torch.uint8) for t in (a, b))
        if not torch.equal(x, y):
            first = int((x != y).nonzero()[0]) // max(1, a.element_size())
            return f"bytes differ (first at element {first} of {a.numel()})"
        return None
    if type(a) is not type(b) or a != b:
        return f"{a!r} against {b!r}"
    return None


def not_finite(value) -> str | None:
    """How many NaN and infinite values a floating-point output holds (None: all finite, or not a float)."""
    import torch

    if not isinstance(value, torch.Tensor) or not (value.is_floating_point() or value.is_complex()):
        return None
    nan = int(torch.isnan(value).sum())
    inf = int(torch.isinf(value).sum())
    if not nan and not inf:
        return None
    return ", ".join(f"{n:,} {what}" for n, what in ((nan, "NaN"), (inf, "infinite")) if n) + f" of {value.numel():,}"


def verify(original, replanned, runs: int = 3, seed: int = 0, progress=None, data_path=None) -> list[Verification]:
    """Load both programs with ExecuTorch's runtime and call every method ``runs`` times in a row.

    Each method is loaded once per program and called ``runs`` times with its
    state carried from call to call, on the same inputs for both programs
    (:func:`pte_lab.runtime.call_sequence`: for an LLM, a prefill and then
    decode steps at increasing positions). Every output of every call is
    compared bit for bit (``same_bits``: dtype, shape and raw bytes), so a
    plan that lets an intermediate overwrite a KV cache fails on the first
    decode step; outputs that are not finite are named in ``not_finite``. Device
    methods run on the emulated device when no real allocator is registered.
    Returns one record per method; raises nothing for a mismatch (look at
    ``identical``). ``progress``: None, True (a bar over the methods) or a
    callable taking a line per method (see :mod:`pte_lab.progress`). ``data_path``: the ``.ptd`` both
    programs take their external data from (a replan rewrites the ``.pte`` only, so both read the same one).
    """
    out = []
    with ExitStack() as stack:  # whatever fails, both programs are released
        report = stack.enter_context(reporter(progress, desc="verifying"))
        report.step("loading both programs with ExecuTorch")
        a = stack.enter_context(runtime.load(original, data_path=data_path))
        b = stack.enter_context(runtime.load(replanned, data_path=data_path))
        for d in sorted({d for m in a.plan.methods.values() for d in m.devices}):
            if not allocator_registered(d):
                runtime.emulate_device(d)
        report.set_total(len(a.method_names))
        for k, name in enumerate(a.method_names, 1):
            report.step(f"method {name!r} ({k}/{len(a.method_names)}): {runs} calls in a row on both programs")
            plan = a.plan.methods[name]
            ma, mb = a.load_method(name), b.load_method(name)
            identical, detail, odd, failed = True, "", "", None
            for r, inputs in enumerate(runtime.call_sequence(plan, runs, seed=seed)):
                oa = ma(*[x.clone() for x in inputs])
                ob = mb(*[x.clone() for x in inputs])
                why = (f"{count(len(oa), 'output')} against {len(ob):,}" if len(oa) != len(ob) else
                       next((f"output {k}: {w}" for k, (x, y) in enumerate(zip(oa, ob))
                             if (w := same_bits(x, y)) is not None), None))
                if not odd:
                    odd = next((f"call {r + 1}, output {k}: {w}" for k, x in enumerate(oa)
                                if (w := not_finite(x)) is not None), "")
                if why is not None:
                    identical, detail, failed = False, f"call {r + 1} of {runs}: {why}", r + 1
                    break
            out.append(Verification(name, runs, identical, detail, odd, failed))
            report.advance()
    return out
