"""The first look (issue 31): what a user sees first, against ExecuTorch's deserializer, in CPU time.

    python benchmarks/bench_first_look.py [--repeat 9] [--skip-llm] [--skip-many] [--only LABEL...] [--profile LABEL]

"First look" = ``pte_lab.open`` + the summary ``repr(pte)`` (what a notebook cell prints), and
``pte-lab inspect FILE`` (its text: the summary, every method's table, findings and arena pictures),
each from a fresh open (the ETRecord read each time too). Against it:
``executorch.exir._serialize._program.deserialize_pte_binary(bytes)`` on the same file.

Programs (exported once, cached under benchmarks/out/, as bench_open.py makes them):
  * the 8da4w llama of export_llm (bench_open.LLM; about 2 minutes to export once)
  * a portable transformer of 60 layers (over 3,000 planned tensors)
  * a portable transformer of 8 layers (under 500 tensors) with its ETRecord
  * programs of many small delegated methods (issue 45): 15 and 60 XNNPACK-delegated methods, each a
    Linear (a few planned tensors each), and 15 whose inputs and outputs are left to the caller (no
    planned tensor, as a QNN LLM's methods): what is fixed per method counts there (about 20 s and
    60 s to export once; --skip-many leaves them out)

Prints CPU milliseconds (time.process_time, best of --repeat after one warm-up: the machine is
shared, and CPU time is what other jobs disturb least) and the ratios deserialize / first look.
Targets: the first look >= 5x faster than deserialize_pte_binary on the llama and the 3,000-tensor
program, <= 50 ms under 500 tensors with an ETRecord, and open+repr at least as fast as
deserialize_pte_binary (>= 1x) on the programs of many methods.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_open import LLM, OUT, program


def with_etrecord(layers: int) -> tuple[Path, Path]:
    """A portable transformer of ``layers`` layers and the ETRecord of its export."""
    pte, etr = OUT / f"transformer_etrecord_layers{layers}.pte", OUT / f"transformer_etrecord_layers{layers}.etrecord"
    if not (pte.exists() and etr.exists()):
        import torch
        from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

        from pte_lab import examples as ex

        OUT.mkdir(exist_ok=True)
        torch.manual_seed(0)
        ep = ex._export(ex._modules()["Transformer"](layers, d=64), (torch.randn(1, 16, 64),))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            et = to_edge_transform_and_lower(ep, generate_etrecord=True,
                                             compile_config=EdgeCompileConfig(_check_ir_validity=False)).to_executorch()
        pte.write_bytes(et.buffer)
        et.get_etrecord().save(str(etr))
    return pte, etr


def many_methods(n: int, planned: bool = True) -> Path:
    """A program of ``n`` methods, each a Linear(32, 32) and a relu lowered whole to XNNPACK (times its index:
    a scalar intermediate); with ``planned=False`` the methods' inputs and outputs are the caller's and the
    scalar is left out: no planned tensor at all."""
    path = OUT / f"many_methods{n}{'' if planned else '_unplanned'}.pte"
    if not path.exists():
        import torch
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
        from executorch.exir.passes import MemoryPlanningPass

        class M(torch.nn.Module):
            def __init__(self, k):
                super().__init__()
                self.l, self.k = torch.nn.Linear(32, 32), k

            def forward(self, x):
                y = torch.relu(self.l(x))
                return y * self.k if self.k is not None else y

        OUT.mkdir(exist_ok=True)
        torch.manual_seed(0)
        eps = {f"method_{k}": torch.export.export(M(k if planned else None), (torch.randn(4, 32),)) for k in range(n)}
        config = None if planned else ExecutorchBackendConfig(
            memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False, alloc_graph_output=False))
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            et = to_edge_transform_and_lower(eps, partitioner=[XnnpackPartitioner()]).to_executorch(config)
        path.write_bytes(et.buffer)
        print(f"exported {path.name} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    return path


def best_cpu(fn, repeat: int) -> float:
    fn()  # warm-up: imports, first-call caches of the interpreter
    best = float("inf")
    for _ in range(repeat):
        c = time.process_time()
        fn()
        best = min(best, time.process_time() - c)
    return best


def first_look(path: Path, etrecord: Path | None):
    import pte_lab

    def summary():
        return repr(pte_lab.open(path, etrecord=etrecord))

    from pte_lab.cli import build_parser

    # the command's own work: its arguments parsed once (argparse's setup is the same for every file)
    args = build_parser().parse_args(["inspect", str(path)] + (["--etrecord", str(etrecord)] if etrecord else []))

    def inspect():
        with contextlib.redirect_stdout(io.StringIO()):
            if args.func(args) != 0:
                raise RuntimeError(f"pte-lab inspect {path} failed")

    return summary, inspect


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--skip-llm", action="store_true", help="leave out the export_llm program")
    ap.add_argument("--skip-many", action="store_true", help="leave out the programs of many delegated methods")
    ap.add_argument("--only", nargs="+", metavar="LABEL", help="these programs alone (llama, 3000, etrecord, many15, "
                                                              "many60, unplanned15): the others are not exported")
    ap.add_argument("--llm", metavar="PTE", help="an export_llm program already exported, instead of exporting "
                                                 "bench_open.LLM (which takes minutes)")
    ap.add_argument("--profile", metavar="LABEL", help="cProfile the first look (summary then inspect) of one "
                                                        "program (llama, 3000, etrecord, many15, many60, "
                                                        "unplanned15) instead")
    args = ap.parse_args()
    makers = {"llama": lambda: (Path(args.llm) if args.llm else program("llm", **LLM), None),
              "3000": lambda: (program("transformer", layers=60), None),
              "etrecord": lambda: with_etrecord(8),
              "many15": lambda: (many_methods(15), None),
              "many60": lambda: (many_methods(60), None),
              "unplanned15": lambda: (many_methods(15, planned=False), None)}
    skipped = ({"llama"} if args.skip_llm else set()) | ({"many15", "many60", "unplanned15"} if args.skip_many else set())
    progs: dict[str, tuple[Path, Path | None]] = {key: make() for key, make in makers.items()
                                                   if key not in skipped and (args.only is None or key in args.only)}
    labels = {"llama": f"llama {'(--llm)' if args.llm else '6x288'} export_llm 8da4w", "3000": "transformer (60 layers)",
              "etrecord": "transformer (8) + ETRecord", "many15": "15 XNNPACK methods",
              "many60": "60 XNNPACK methods", "unplanned15": "15 XNNPACK methods, unplanned"}
    import pte_lab

    if args.profile:
        import cProfile
        import pstats

        summary, inspect = first_look(*progs[args.profile])
        summary(), inspect()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(3):
            summary()
            inspect()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
        return 0

    from executorch.exir._serialize._program import deserialize_pte_binary

    print(f"pte_lab from {pte_lab.__file__}; CPU ms, best of {args.repeat}")
    print(f"{'program':30s} {'tensors':>7s} | {'deserialize':>11s} | {'open+repr':>9s} {'ratio':>6s} | "
          f"{'inspect':>9s} {'ratio':>6s}")
    ok = True
    for key, (path, etr) in progs.items():
        data = path.read_bytes()
        pte = pte_lab.open(path, etrecord=etr)
        tensors = sum(len(m.planned) for m in pte.methods.values())
        theirs = best_cpu(lambda: deserialize_pte_binary(data), args.repeat)
        summary, inspect = first_look(path, etr)
        s, i = best_cpu(summary, args.repeat), best_cpu(inspect, args.repeat)
        print(f"{labels[key]:30s} {tensors:7d} | {theirs * 1e3:9.1f}ms | {s * 1e3:7.1f}ms {theirs / s:5.1f}x | "
              f"{i * 1e3:7.1f}ms {theirs / i:5.1f}x")
        if key == "etrecord":
            ok &= tensors < 500 and max(s, i) <= 0.050
        elif key in ("many15", "many60", "unplanned15"):
            ok &= theirs / s >= 1
        else:
            ok &= theirs / max(s, i) >= 5
    print("\ntargets (>= 5x faster than deserialize_pte_binary; <= 50 ms under 500 tensors with an ETRecord; "
          "open+repr >= 1x on many methods):", "met" if ok else "NOT met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
