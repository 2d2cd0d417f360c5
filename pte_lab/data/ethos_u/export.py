"""Export the committed Ethos-U programs and what Vela printed while compiling them.

They ship with pte_lab (``pte_lab.examples.ethos_u_program``) so that the notebook, the views, the sizing
and the tests have Ethos-U programs without Arm's flow installed. Run from the repository root, with the
``arm`` extra installed::

    pip install -e ".[test,arm]"
    python pte_lab/data/ethos_u/export.py

Each program is ``pte_lab.examples.ethos_u`` (two int8 convolutions on 16 x 16 images, Arm's flow:
EthosUQuantizer, EthosUPartitioner, EthosUCompileSpec, Vela, then the quantize/dequantize at the edges
as ``cortex_m::`` kernels) for one target and memory mode. ``vela.json`` keeps, per file, Vela's
compile-time summary of each delegated partition (its "Total SRAM used" and the like), so the suite
compares the scratch each blob declares with what Vela printed, without the extra.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

#: file -> the example's arguments
PROGRAMS = {
    "u55_128_shared_sram.pte": {"target": "ethos-u55-128", "memory_mode": "Shared_Sram"},
    "u55_128_sram_only.pte": {"target": "ethos-u55-128", "memory_mode": "Sram_Only"},
    "u55_128_shared_sram_split.pte": {"target": "ethos-u55-128", "memory_mode": "Shared_Sram", "split": True},
    "u85_256_sram_only.pte": {"target": "ethos-u85-256", "memory_mode": "Sram_Only"},
    "u85_256_dedicated_sram_384kb.pte": {"target": "ethos-u85-256", "memory_mode": "Dedicated_Sram_384KB"},
}


def main() -> None:
    # a script: pte_lab is importable once HERE's checkout is on sys.path (above)
    from pte_lab.examples import ethos_u_export
    from pte_lab.quiet import quiet

    import executorch.version

    report = {"executorch": executorch.version.__version__, "programs": {}}
    for name, kwargs in PROGRAMS.items():
        with quiet():
            data, vela = ethos_u_export(**kwargs)
        (HERE / name).write_bytes(data)
        report["programs"][name] = {"arguments": kwargs, "bytes": len(data), "vela": vela}
        print(f"{name}: {len(data):,} bytes; Vela: {vela}")
    (HERE / "vela.json").write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
