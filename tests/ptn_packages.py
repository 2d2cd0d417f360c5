"""Builders of real ``.ptn`` packages (ExecuTorch 1.5.1's ``executorch.exir.native.to_native(...).save``), for the
tests of pte_lab's reading of them (``tests/test_ptn.py``). Exported at test time into a folder the caller gives
(pytest's tmp or cache), never into the tree; torch and executorch are imported here only.

Each builder returns what the package was exported from (the exported programs, by method), so a test can set
what pte_lab reads beside what torch and ExecuTorch say of the same export.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from torch.export import Dim, export


class MLP(nn.Module):
    """Two linear layers: four distinct constants, nothing repeated, no state."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


class Repeated(nn.Module):
    """Byte-identical constants under different keys (tied layers, equal buffers): aliases.json appears."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)
        with torch.no_grad():
            self.b.weight.copy_(self.a.weight)
            self.b.bias.copy_(self.a.bias)
        self.register_buffer("k1", torch.ones(8))
        self.register_buffer("k2", torch.ones(8))

    def forward(self, x):
        return self.b(self.a(x) + self.k1) * self.k2


class KVCache(nn.Module):
    """A KV-cache-like state: two non-persistent buffers written in place each call (mutable buffers, no bytes
    stored) and a persistent step counter (its initial bytes stored); two methods share them."""

    def __init__(self):
        super().__init__()
        self.p = nn.Linear(4, 4)
        self.register_buffer("k_cache", torch.zeros(1, 16, 4), persistent=False)
        self.register_buffer("v_cache", torch.zeros(1, 16, 4), persistent=False)
        self.register_buffer("steps", torch.zeros(1), persistent=True)

    def forward(self, x, i):
        y = self.p(x)
        self.k_cache.index_copy_(1, i, y)
        self.v_cache.index_copy_(1, i, y * 2)
        self.steps.add_(1)
        return (self.k_cache * self.v_cache).sum(1) + self.steps


class Dynamic(nn.Module):
    """A sequence dimension up to 128."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)

    def forward(self, x):
        return torch.softmax(self.a(x), -1)


#: the dynamic package's bound
SEQ_MAX = 128


def _programs(name: str) -> dict:
    torch.manual_seed(0)
    if name == "mlp":
        return {"forward": export(MLP().eval(), (torch.randn(2, 8),), strict=False)}
    if name == "repeated":
        return {"forward": export(Repeated().eval(), (torch.randn(2, 8),), strict=False)}
    if name == "kv_cache":
        m, args = KVCache().eval(), (torch.randn(1, 1, 4), torch.tensor([3]))
        return {"forward": export(m, args, strict=False), "prefill": export(m, args, strict=False)}
    if name == "dynamic":
        return {"forward": export(Dynamic().eval(), (torch.randn(3, 8),), strict=False,
                                  dynamic_shapes=({0: Dim("seq", min=1, max=SEQ_MAX)},))}
    raise KeyError(name)


NAMES = ("mlp", "repeated", "kv_cache", "dynamic")


def _facts(programs: dict) -> dict:
    """What torch.export says of each method before lowering (to_native changes the exported programs): the user
    inputs' dtypes and shapes, the buffers it writes, and every tensor it holds by fully-qualified name."""
    facts = {}
    for method, ep in programs.items():
        placeholders = {n.name: n for n in ep.graph_module.graph.nodes if n.op == "placeholder"}
        inputs = [placeholders[s.arg.name].meta["val"] for s in ep.graph_signature.input_specs
                  if s.kind.name == "USER_INPUT"]
        facts[method] = {"inputs": [(t.dtype, t.element_size()) for t in inputs],
                         # torch.export's own account of the writes, once functionalized (as lowering does)
                         "mutates": set(ep.run_decompositions({}).graph_signature.buffers_to_mutate.values()),
                         "tensors": {**ep.state_dict, **ep.constants}}
    return facts


def build(name: str, folder: Path):
    """Export package ``name`` into ``folder`` as ``<name>.ptn``: (its path, what torch.export said of each method
    (:func:`_facts`), the NativeProgramManager that saved it)."""
    from executorch.exir.native import to_native

    programs = _programs(name)
    facts = _facts(programs)
    manager = to_native(programs)
    path = Path(folder) / f"{name}.ptn"
    manager.save(str(path))
    return path, facts, manager
