"""Check a replanned program against its original with ExecuTorch: outputs must be bit-identical."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Verification:
    method: str
    runs: int
    identical: bool
    detail: str = ""


def verify(original, replanned, runs: int = 3, seed: int = 0) -> list[Verification]:
    """Load both programs with ExecuTorch's runtime and run every method ``runs`` times.

    Each run uses fresh random inputs (the same for both programs); outputs are
    compared with ``torch.equal`` (bit for bit). Device methods run on the
    emulated device when no real allocator is registered. Returns one record
    per method; raises nothing for a mismatch (look at ``identical``).
    """
    import torch

    import pte_lab
    from pte_lab.runtime import example_inputs
    from pte_lab.runtime.device import allocator_registered

    a = pte_lab.load(original)
    b = pte_lab.load(replanned)
    for d in sorted({d for m in a.plan.methods.values() for d in m.devices}):
        if not allocator_registered(d):
            pte_lab.emulate_device(d)
    out = []
    try:
        for name in a.method_names:
            plan = a.plan.methods[name]
            ma, mb = a.load_method(name), b.load_method(name)
            identical, detail = True, ""
            for r in range(runs):
                inputs = example_inputs(plan, seed=seed + r)
                oa = ma(*[x.clone() for x in inputs])
                ob = mb(*[x.clone() for x in inputs])
                same = len(oa) == len(ob) and all(
                    (torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y) for x, y in zip(oa, ob))
                if not same:
                    identical, detail = False, f"run {r}: outputs differ"
                    break
            out.append(Verification(name, runs, identical, detail))
    finally:
        a.close()
        b.close()
    return out
