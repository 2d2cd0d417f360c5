"""Check a replanned program against its original with ExecuTorch: outputs must be bit-identical."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass


@dataclass
class Verification:
    method: str
    runs: int
    identical: bool
    detail: str = ""
    #: the first call (1-based) whose outputs differ; None when every call matched
    failed_call: int | None = None


def verify(original, replanned, runs: int = 3, seed: int = 0, progress=None) -> list[Verification]:
    """Load both programs with ExecuTorch's runtime and call every method ``runs`` times in a row.

    Each method is loaded once per program and called ``runs`` times with its
    state carried from call to call, on the same inputs for both programs
    (:func:`pte_lab.runtime.call_sequence`: for an LLM, a prefill and then
    decode steps at increasing positions). Every output of every call is
    compared with ``torch.equal`` (bit for bit), so a plan that lets an
    intermediate overwrite a KV cache fails on the first decode step. Device
    methods run on the emulated device when no real allocator is registered.
    Returns one record per method; raises nothing for a mismatch (look at
    ``identical``). ``progress``: None, True (a bar over the methods) or a
    callable taking a line per method (see :mod:`pte_lab.progress`).
    """
    import torch

    from ..progress import reporter
    from ..runtime import call_sequence, emulate_device, load
    from ..runtime.device import allocator_registered

    out = []
    with ExitStack() as stack:  # whatever fails, both programs are released
        report = stack.enter_context(reporter(progress, desc="verifying"))
        report.step("loading both programs with ExecuTorch")
        a = stack.enter_context(load(original))
        b = stack.enter_context(load(replanned))
        for d in sorted({d for m in a.plan.methods.values() for d in m.devices}):
            if not allocator_registered(d):
                emulate_device(d)
        report.set_total(len(a.method_names))
        for k, name in enumerate(a.method_names, 1):
            report.step(f"method {name!r} ({k}/{len(a.method_names)}): {runs} calls in a row on both programs")
            plan = a.plan.methods[name]
            ma, mb = a.load_method(name), b.load_method(name)
            identical, detail, failed = True, "", None
            for r, inputs in enumerate(call_sequence(plan, runs, seed=seed)):
                oa = ma(*[x.clone() for x in inputs])
                ob = mb(*[x.clone() for x in inputs])
                same = len(oa) == len(ob) and all(
                    (torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y) for x, y in zip(oa, ob))
                if not same:
                    identical, detail, failed = False, f"call {r + 1} of {runs}: outputs differ", r + 1
                    break
            out.append(Verification(name, runs, identical, detail, failed))
            report.advance()
    return out
