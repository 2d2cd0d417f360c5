"""compare_outputs.py PTE RUNNER_DIR QEMU_LOG

Runs the program with ExecuTorch's Python runtime on the inputs run_runner.sh's NONZERO=1 gives the board
(same shapes and dtypes as main.cpp's TensorImpls, same fill pattern as pte_lab_qemu_support.cpp), executes
twice as the runner does, and compares the outputs with those the guest printed ([qemu] outN[i]: ...).
"""
import re
import sys

import numpy as np
import torch
from executorch.runtime import Runtime

DTYPES = {6: torch.float32, 4: torch.int64, 3: torch.int32, 11: torch.bool}


def pattern(numel, k, dtype):
    i = np.arange(numel, dtype=np.int64)
    if dtype == torch.float32:
        v = (((i * 37 + 11 * k) % 101) - 50).astype(np.float32) / np.float32(50.0)
        return torch.from_numpy(v.astype(np.float32))
    if dtype in (torch.int64, torch.int32):
        return torch.from_numpy(((i + k) % 3).astype(np.int64)).to(dtype)
    if dtype == torch.bool:
        return torch.from_numpy(((i + k) & 1).astype(bool))
    raise SystemExit(f"dtype {dtype}: no pattern")


def inputs_from_main(main_cpp):
    text = open(main_cpp).read()
    ins = []
    for m in re.finditer(r"SizesType (\w+)_input_(\d+)_sizes\[\] = \{([^}]*)\};", text):
        low, k, sizes = m.group(1), int(m.group(2)), [int(x) for x in m.group(3).split(",") if x.strip()]
        impl = re.search(rf"TensorImpl {low}_input_{k}_impl\(static_cast<ScalarType>\((\d+)\), (\d+),", text)
        st, dims = int(impl.group(1)), int(impl.group(2))
        shape = sizes[:dims]
        numel = int(np.prod(shape)) if shape else 1
        ins.append((k, pattern(numel, k, DTYPES[st]).reshape(shape)))
    return [t for _, t in sorted(ins, key=lambda x: x[0])]


def board_outputs(log):
    outs = {}
    for line in open(log):
        m = re.match(r"\[qemu\] out(\d+)\[(\d+)\]:(.*)", line.strip())
        if m:
            outs.setdefault(int(m.group(1)), []).extend(float(x) for x in m.group(3).split())
    return outs


def main(pte, runner, log):
    ins = inputs_from_main(f"{runner}/main.cpp")
    method = Runtime.get().load_program(pte).load_method("forward")
    for _ in range(2):
        outs = method.execute(ins)
    board = board_outputs(log)
    worst = 0.0
    for o, t in enumerate(outs):
        ref = t.detach().reshape(-1).to(torch.float64).numpy()
        got = np.array(board.get(o, []), dtype=np.float64)
        n = min(len(ref), len(got))
        if n == 0:
            print(f"output {o}: nothing to compare (board printed {len(got)} values, python {len(ref)})")
            continue
        d = float(np.max(np.abs(ref[:n] - got[:n])))
        worst = max(worst, d)
        print(f"output {o}: shape {tuple(t.shape)}, compared {n} of {len(ref)} values, max |diff| {d:.3g}, "
              f"max |value| {float(np.max(np.abs(ref))):.3g}, python sum {float(ref.sum()):.9g}")
    print(f"max |diff| over all outputs: {worst:.3g}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
