"""Export a few programs with whatever executorch this interpreter has (the suite runs it under 1.4.1).

Standalone: imports torch and executorch only. Usage: ``python legacy_export.py OUTDIR``. Writes
``NAME.pte`` and ``NAME.ref.pt`` (``{"inputs": [...], "outputs": [...]}`` from eager PyTorch) for
each program, and prints the executorch version.
"""

import importlib.metadata as md
import sys
import warnings
from pathlib import Path

import torch


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(32, 64), torch.nn.Linear(64, 16)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Buffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(16, 8))
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, pos, x):
        self.k_cache.index_copy_(0, pos, self.proj(x))
        return self.k_cache.sum(dim=0)


def export(module, inputs, partitioner=None):
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    with torch.no_grad():
        ep = torch.export.export(module.eval(), inputs)
    edge = to_edge_transform_and_lower(ep, partitioner=partitioner,
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    return bytes(edge.to_executorch().buffer)


def main(out: Path) -> None:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    warnings.simplefilter("ignore")
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    x = torch.randn(4, 32)
    pos, k = torch.tensor([3]), torch.randn(1, 8)
    cases = {
        "mlp_portable": (MLP(), (x,), None),
        "mlp_xnnpack": (MLP(), (x,), [XnnpackPartitioner()]),
        "buffer": (Buffer(), (pos, k), None),
    }
    for name, (module, inputs, part) in cases.items():
        with torch.no_grad():
            expected = module(*inputs)  # before export: the buffer starts from zeros, as in the program
        (out / f"{name}.pte").write_bytes(export(module, inputs, part))
        torch.save({"inputs": list(inputs), "outputs": [expected]}, out / f"{name}.ref.pt")
    print(md.version("executorch"))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
