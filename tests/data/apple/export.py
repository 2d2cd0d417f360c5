"""Export the two programs of tests/test_diff_backends.py: a small YOLOX-like model (its Focus layer's four
strided slices, then convolutions) lowered to Core ML and to XNNPACK, as an iOS developer exports one model for
both. Needs coremltools (Core ML converts on Linux; it does not compile or run there).

    python tests/data/apple/export.py          # writes focus_coreml.pte and focus_xnnpack.pte beside this file

Core ML's compile specs are what ExecuTorch's Core ML export script passes: compute units CPU_AND_NE, minimum
deployment target iOS 15 (stored as "6", coremltools' ``ct.target.iOS15``), compute precision float16.
"""

from pathlib import Path

import torch


class Focus(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(12, 16, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(16, 8, 3, padding=1)

    def forward(self, x):
        tl, bl = x[..., ::2, ::2], x[..., 1::2, ::2]
        tr, br = x[..., ::2, 1::2], x[..., 1::2, 1::2]
        return self.conv2(torch.relu(self.conv(torch.cat((tl, bl, tr, br), dim=1))))


def main() -> None:
    import coremltools as ct
    from executorch.backends.apple.coreml.compiler import CoreMLBackend
    from executorch.backends.apple.coreml.partition import CoreMLPartitioner
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    torch.manual_seed(0)
    ep = torch.export.export(Focus().eval(), (torch.randn(1, 3, 64, 64),))
    specs = CoreMLBackend.generate_compile_specs(compute_unit=ct.ComputeUnit.CPU_AND_NE,
                                                 minimum_deployment_target=ct.target.iOS15,
                                                 compute_precision=ct.precision.FLOAT16)
    here = Path(__file__).parent
    for name, part in (("coreml", CoreMLPartitioner(compile_specs=specs)), ("xnnpack", XnnpackPartitioner())):
        prog = to_edge_transform_and_lower(ep, partitioner=[part]).to_executorch()
        (here / f"focus_{name}.pte").write_bytes(prog.buffer)


if __name__ == "__main__":
    main()
