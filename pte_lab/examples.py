"""Example ExecuTorch programs, exported locally with torch.export + executorch.

Every builder returns the serialized ``.pte`` bytes; :func:`save` writes one to a
file. Nothing is downloaded: the modules are small, defined here, and seeded,
so the same call gives the same program.

Builders (``name`` for :func:`build` / :func:`save`):

``portable``        one method, portable kernels (a small MLP); ``alloc_graph_input`` /
                    ``alloc_graph_output`` False leave its I/O to the caller
``hand_sized``      six tensors and an input, small enough to plan on paper
``odd``             ``tanh(relu(x))`` of 13 float32 (52 bytes: not a multiple of ExecuTorch's
                    16-byte alignment); ``alignment`` is ``MemoryPlanningPass``'s
``xnnpack``         two methods lowered to XNNPACK (an MLP and a small attention block)
``device``          the fix's two-method program: ``forward`` on the host,
                    ``forward2`` (``x + y``) delegated to ``cuda:0`` (``side``
                    sets the planned device bytes: 3 * side * side * 4; 2048
                    gives 48 MiB); XNNPACK by default, so it runs once a device
                    allocator is registered; ``backend="demo"`` uses
                    ExecuTorch's test partitioner; ``non_cpu_planning=False``
                    keeps the CUDA tags but plans everything into host arena 1
``three_methods``   two host methods of different arena sizes and a device method
``kv_cache``        a mutable buffer updated in place every call (KV-cache style)
``dynamic``         dynamic batch dimension (planned at its upper bound)
``cond``            ``torch.cond`` control flow (JumpFalse / Move instructions)
``unplanned_io``    inputs and outputs provided by the caller
                    (``alloc_graph_input=False, alloc_graph_output=False``)
``external``        constants in an external ``.ptd`` file (``external_constants=True``);
                    :func:`save` writes the data file beside the program
``transformer``     a portable transformer stack; ``layers`` scales it
                    (``layers=60`` gives more than 3,000 planned tensors)
``gpt``             a tiny GPT (embedding, attention + MLP, lm head) lowered to XNNPACK, two
                    methods (a prompt, one token); its planned int64 token input's bytes are
                    reused by later tensors: inputs must be set before every execute
``weights``         a program whose constants weigh ``mb`` megabytes
``llm``             a small llama exported with ExecuTorch's own LLM flow (``export_llm``:
                    KV cache, random weights): custom-op caches (``llama::update_cache``)
                    or ``index_put_`` ones, XNNPACK or portable, 8da4w-quantized or not
``shared_state``    ``prefill`` and ``decode`` methods sharing one KV cache
                    (``share_mutable_buffers=True``, ``emit_mutable_buffer_names=True``)
``bundled``         a bundled program (``.bpte``, ExecuTorch's devtools): ``forward`` (an
                    MLP) and ``affine`` with ``cases`` test cases each, expected outputs
                    from eager PyTorch
``ethos_u``         a microcontroller program for an Arm Ethos-U NPU, through Arm's flow
                    (``EthosUQuantizer``, ``EthosUPartitioner``, ``EthosUCompileSpec``; Vela
                    compiles it): two int8 convolutions; ``target`` (``ethos-u55-128``,
                    ``ethos-u85-256``...), ``memory_mode`` (``Shared_Sram``, ``Sram_Only``,
                    ``Dedicated_Sram``), ``split=True`` puts a CPU ``flip`` between the
                    convolutions (two delegates on the U55), ``cortex_m=True`` turns the
                    quantize/dequantize at the edges into ``cortex_m::`` kernels as Arm's
                    own example flow does. Needs the ``arm`` extra (``pip install
                    "pte_lab[arm]"``: ``ethos-u-vela``, ``tosa-tools``)
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Callable

from . import examples_kept
from .cache import cache_dir
from .examples_kept import key

__all__ = ["build", "save", "manager", "llm_records", "BUILDERS", "device_reference", "ethos_u_export", "has_arm_flow",
           "ARM_EXTRA", "ETHOS_U_PROGRAMS", "ethos_u_program", "key", "kept_path"]

#: while :func:`manager` runs, ``_lower`` keeps each ExecutorchProgramManager it makes here
_MANAGERS: list | None = None


def _torch():
    import torch

    return torch


def _lower(programs, partitioner=None, backend_config=None, transform=None):
    """Run the standard pipeline: edge dialect, optional partitioners (and ``transform(edge)``), ExecuTorch."""
    import warnings

    from executorch.exir import (
        EdgeCompileConfig,
        ExecutorchBackendConfig,
        to_edge_transform_and_lower,
    )

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        edge = to_edge_transform_and_lower(
            programs,
            partitioner=partitioner,
            compile_config=EdgeCompileConfig(_check_ir_validity=False),
        )
        if transform is not None:
            edge = transform(edge)
        et = edge.to_executorch(backend_config or ExecutorchBackendConfig())
    if _MANAGERS is not None:
        _MANAGERS.append(et)
    return bytes(et.buffer)


def _export(module, args, **kw):
    torch = _torch()
    with torch.no_grad():
        return torch.export.export(module.eval(), args, **kw)


# --------------------------------------------------------------------- modules
def _modules():
    """Define the example modules lazily (torch is heavy)."""
    torch = _torch()
    nn = torch.nn

    class HandSized(nn.Module):
        def __init__(self, extra=False):
            super().__init__()
            self.extra = extra

        def forward(self, x):              # x: 64 float32 = 256 bytes
            a = torch.cat([x, x, x])       # 768 bytes
            b = torch.relu(a)              # 768
            c = torch.cat([x, x])          # 512
            d = torch.tanh(c)              # 512
            e = b[:128] + d                # slice (512), then add (512)
            return torch.sigmoid(e) if self.extra else e

    class Odd(nn.Module):
        def forward(self, x):              # x: 13 float32 = 52 bytes, not a multiple of 16
            return torch.tanh(torch.relu(x))

    class MLP(nn.Module):
        def __init__(self, d_in=32, d_hidden=64, d_out=16):
            super().__init__()
            self.fc1 = nn.Linear(d_in, d_hidden)
            self.fc2 = nn.Linear(d_hidden, d_hidden)
            self.fc3 = nn.Linear(d_hidden, d_out)

        def forward(self, x):
            return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))

    class Attention(nn.Module):
        def __init__(self, d=32, heads=4):
            super().__init__()
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
            self.norm = nn.LayerNorm(d)
            self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

        def forward(self, x):
            h = self.norm(x + self.attn(x, x, x, need_weights=False)[0])
            return h + self.ff(h)

    class HostMethod(nn.Module):
        def forward(self, x, y):
            return torch.relu(x @ y) + 1.0

    class DeviceMethod(nn.Module):
        # The add is what the delegate (on the device) computes.
        def forward(self, x, y):
            return x + y

    class Small(nn.Module):
        def forward(self, x):
            return x * 2.0 + 1.0

    class KVCache(nn.Module):
        def __init__(self, max_len=16, d=8):
            super().__init__()
            self.register_buffer("k_cache", torch.zeros(max_len, d))
            self.proj = nn.Linear(d, d)

        def forward(self, pos, x):
            k = self.proj(x)
            self.k_cache.index_copy_(0, pos, k)
            return self.k_cache.sum(dim=0)

    class Dynamic(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(16, 8)

        def forward(self, x):
            return torch.tanh(self.fc(x)) * 3.0

    class Cond(nn.Module):
        def forward(self, pred, x):
            def yes(x):
                return torch.sin(x) + 1.0

            def no(x):
                return torch.cos(x) * 2.0

            return torch.cond(pred, yes, no, (x,)) + x

    class Block(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.n1 = nn.LayerNorm(d)
            self.n2 = nn.LayerNorm(d)
            self.q = nn.Linear(d, d)
            self.k = nn.Linear(d, d)
            self.v = nn.Linear(d, d)
            self.o = nn.Linear(d, d)
            self.ff1 = nn.Linear(d, 4 * d)
            self.ff2 = nn.Linear(4 * d, d)
            self.heads = heads

        def forward(self, x):
            b, t, d = x.shape
            h = self.n1(x)
            q = self.q(h).view(b, t, self.heads, d // self.heads).transpose(1, 2)
            k = self.k(h).view(b, t, self.heads, d // self.heads).transpose(1, 2)
            v = self.v(h).view(b, t, self.heads, d // self.heads).transpose(1, 2)
            a = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
            y = (a @ v).transpose(1, 2).reshape(b, t, d)
            x = x + self.o(y)
            return x + self.ff2(torch.nn.functional.gelu(self.ff1(self.n2(x))))

    class Transformer(nn.Module):
        def __init__(self, layers, d=64, heads=4):
            super().__init__()
            self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))

        def forward(self, x):
            for blk in self.blocks:
                x = blk(x)
            return x

    class GPT(nn.Module):
        def __init__(self, vocab=64, d=32, heads=4, layers=1, max_len=16):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(torch.randn(max_len, d) * 0.02)
            self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
            self.norm = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)

        def forward(self, tokens):          # tokens: int64 [1, t]
            x = self.tok(tokens) + self.pos[: tokens.shape[1]]
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.norm(x))  # logits [1, t, vocab]

    class Weights(nn.Module):
        def __init__(self, mb):
            super().__init__()
            n = max(1, int(mb * 1024 * 1024 / 4 / 1024))  # rows of 1024 float32
            self.w = nn.Parameter(torch.randn(n, 1024) * 0.01)

        def forward(self, x):
            return (self.w[:4] * x).sum(dim=0)

    return dict(
        MLP=MLP, HandSized=HandSized, Odd=Odd, Attention=Attention, HostMethod=HostMethod, DeviceMethod=DeviceMethod,
        Small=Small, KVCache=KVCache, Dynamic=Dynamic, Cond=Cond, Transformer=Transformer, Weights=Weights, GPT=GPT,
    )


# -------------------------------------------------------------------- builders
def portable(alloc_graph_input: bool = True, alloc_graph_output: bool = True) -> bytes:
    """One method, portable kernels only: a three-layer MLP.

    ``alloc_graph_input`` / ``alloc_graph_output`` (ExecuTorch's
    ``MemoryPlanningPass`` options) False leave the input / output to the caller.
    """
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass

    torch = _torch()
    torch.manual_seed(0)
    m = _modules()["MLP"]()
    cfg = ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(
        alloc_graph_input=alloc_graph_input, alloc_graph_output=alloc_graph_output))
    return _lower(_export(m, (torch.randn(4, 32),)), backend_config=cfg)


def hand_sized(extra: bool = False) -> bytes:
    """Six planned tensors and an input, small enough to plan on paper (notebook 02).

    ``x`` (64 float32) -> ``cat([x, x, x])`` -> ``relu`` -> ``cat([x, x])`` ->
    ``tanh`` -> ``relu(...)[:128] + tanh(...)``; ``extra=True`` returns
    ``sigmoid`` of that (a seventh tensor). ExecuTorch's greedy plans 2,048
    bytes where 1,792 are ever alive at once.
    """
    torch = _torch()
    m = _modules()["HandSized"](extra)
    return _lower(_export(m, (torch.randn(64),)))


def odd(n: int = 13, alignment: int = 16) -> bytes:
    """``tanh(relu(x))`` of ``n`` float32: at 13, every tensor is 52 bytes, not a multiple of ExecuTorch's
    16-byte alignment. ``alignment`` is ``MemoryPlanningPass``'s (a power of two)."""
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass

    torch = _torch()
    cfg = ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(alignment=alignment))
    return _lower(_export(_modules()["Odd"](), (torch.randn(n),)), backend_config=cfg)


def xnnpack() -> bytes:
    """Two methods, both lowered to XNNPACK: ``forward`` (MLP) and ``attention``."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    torch = _torch()
    torch.manual_seed(0)
    mods = _modules()
    eps = {
        "forward": _export(mods["MLP"](), (torch.randn(4, 32),)),
        "attention": _export(mods["Attention"](), (torch.randn(1, 8, 32),)),
    }
    parts = {"forward": [XnnpackPartitioner()], "attention": [XnnpackPartitioner()]}
    return _lower(eps, partitioner=parts)


def gpt(vocab: int = 64, d: int = 32, layers: int = 1, prompt: int = 8) -> bytes:
    """A tiny GPT lowered to XNNPACK with ``to_edge_transform_and_lower``: token embedding,
    attention and MLP blocks, an lm head. Two methods: ``forward`` scores a prompt of ``prompt``
    tokens, ``next_token`` one token. The int64 token input is planned (ExecuTorch's default
    ``alloc_graph_input=True``) and the plan gives its bytes to later tensors once it is read:
    an application must set the tokens before every ``execute``.
    """
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    torch = _torch()
    torch.manual_seed(0)
    m = _modules()["GPT"](vocab, d, layers=layers, max_len=max(prompt, 1))
    eps = {
        "forward": _export(m, (torch.zeros(1, prompt, dtype=torch.long),)),
        "next_token": _export(m, (torch.zeros(1, 1, dtype=torch.long),)),
    }
    return _lower(eps, partitioner={n: [XnnpackPartitioner()] for n in eps})


def _device_partitioner(backend: str, device: str):
    from executorch.exir.backend.compile_spec_schema import CompileSpec

    if backend == "demo":
        from executorch.exir.backend.test.device_util import DeviceAwarePartitioner

        return DeviceAwarePartitioner(device)
    if backend == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        part = XnnpackPartitioner()
        # ExecuTorch's PropagateDevicePass reads this compile spec: the delegate's
        # tensors are planned on `device`, with host<->device copies around it.
        part.delegation_spec.compile_specs.append(CompileSpec("target_device", device.encode()))
        return part
    raise ValueError(f"unknown backend {backend!r}; choose 'xnnpack' or 'demo'")


def device(side: int = 64, non_cpu_planning: bool = True, device: str = "cuda:0",
           backend: str = "xnnpack") -> bytes:
    """The fix's program: ``forward`` on the host, ``forward2`` delegated to ``device``.

    ``forward`` computes ``relu(x @ y) + 1`` with portable kernels.
    ``forward2`` computes ``x + y`` in a delegate whose compile specs name
    ``device``: ExecuTorch copies both inputs to the device, the delegate writes
    its output there, and a copy brings it back. The device arena holds those
    three ``side x side`` float32 tensors: ``side=2048`` plans 48 MiB
    (50,331,648 bytes; XNNPACK adds 64 bytes of padding to every arena).

    ``backend="xnnpack"`` (default) really executes on the CPU once a device
    allocator is registered (``pte_lab.emulate_device``). ``backend="demo"``
    uses ExecuTorch's test partitioner (``DeviceAwarePartitioner``), whose
    backend the pip wheel does not register: inspect it, load it, don't run it.
    With ``non_cpu_planning=False`` the tensors keep their device tag but are
    planned into host arena 1 (what ``enable_non_cpu_memory_planning=False`` does).
    """
    from executorch.exir import ExecutorchBackendConfig

    torch = _torch()
    mods = _modules()
    x = torch.randn(side, side)
    y = torch.randn(side, side)
    eps = {
        "forward": _export(mods["HostMethod"](), (x, y)),
        "forward2": _export(mods["DeviceMethod"](), (x, y)),
    }
    parts = {"forward": [], "forward2": [_device_partitioner(backend, device)]}
    cfg = ExecutorchBackendConfig(enable_non_cpu_memory_planning=non_cpu_planning)
    return _lower(eps, partitioner=parts, backend_config=cfg)


def device_reference(side: int = 64, seed: int = 0, grid: bool = False) -> tuple[tuple, dict]:
    """Inputs for :func:`device`'s program and each method's expected output, computed eagerly.

    Returns ``((x, y), {"forward": ..., "forward2": ...})`` from the very
    modules the program is exported from, so a runtime's outputs can be
    checked against them. ``grid=True`` draws the inputs from the multiples of
    1/8 in [-2, 2] instead of a normal distribution: every product and partial
    sum the methods compute is then exact in float32 (|sum| <= 4 * side,
    representable while side <= 65536), so any kernel, in any summation order,
    returns eager PyTorch's output bit for bit.
    """
    torch = _torch()
    mods = _modules()
    g = torch.Generator().manual_seed(seed)
    if grid:
        if side > 65536:
            raise ValueError(f"grid inputs are exact up to side 65536, not {side}")
        x = torch.randint(-16, 17, (side, side), generator=g, dtype=torch.int8).float() / 8
        y = torch.randint(-16, 17, (side, side), generator=g, dtype=torch.int8).float() / 8
    else:
        x = torch.randn(side, side, generator=g)
        y = torch.randn(side, side, generator=g)
    with torch.no_grad():
        expect = {"forward": mods["HostMethod"]()(x, y), "forward2": mods["DeviceMethod"]()(x, y)}
    return (x, y), expect


def three_methods(side: int = 64, device: str = "cuda:0") -> bytes:
    """Two host methods with different arena sizes and one device method.

    ``small`` (``x * 2 + 1`` on ``side x side``), ``large`` (``relu(x @ y) + 1``
    on the same shapes, a bigger arena) and ``on_device`` (``x + y`` delegated
    to ``device`` via XNNPACK). Under ``Runtime.load_program`` the two host
    methods share arenas sized by the larger; ``on_device`` gets its own.
    """
    torch = _torch()
    mods = _modules()
    x = torch.randn(side, side)
    y = torch.randn(side, side)
    eps = {
        "small": _export(mods["Small"](), (x,)),
        "large": _export(mods["HostMethod"](), (x, y)),
        "on_device": _export(mods["DeviceMethod"](), (x, y)),
    }
    parts = {"small": [], "large": [], "on_device": [_device_partitioner("xnnpack", device)]}
    return _lower(eps, partitioner=parts)


def kv_cache() -> bytes:
    """A mutable buffer (``k_cache``) updated in place on every call."""
    torch = _torch()
    torch.manual_seed(0)
    m = _modules()["KVCache"]()
    return _lower(_export(m, (torch.tensor([3]), torch.randn(1, 8))))


def dynamic() -> bytes:
    """A dynamic batch dimension (1..32): planned at the upper bound."""
    torch = _torch()
    torch.manual_seed(0)
    m = _modules()["Dynamic"]()
    batch = torch.export.Dim("batch", min=1, max=32)
    return _lower(_export(m, (torch.randn(4, 16),), dynamic_shapes=({0: batch},)))


def cond() -> bytes:
    """``torch.cond`` control flow: the program jumps between two branches."""
    torch = _torch()
    m = _modules()["Cond"]()
    return _lower(_export(m, (torch.tensor(True), torch.randn(4, 4))))


def unplanned_io() -> bytes:
    """Inputs and outputs are not planned: the caller provides their memory."""
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass

    torch = _torch()
    torch.manual_seed(0)
    m = _modules()["MLP"]()
    cfg = ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False, alloc_graph_output=False)
    )
    return _lower(_export(m, (torch.randn(4, 32),)), backend_config=cfg)


def external() -> bytes:
    """An MLP whose weights live in an external ``.ptd`` data file.

    Returns the program bytes; use :func:`save` to also write the data file.
    """
    return _external_manager().buffer


def _external_manager():
    import warnings

    from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge_transform_and_lower

    torch = _torch()
    torch.manual_seed(0)
    m = _modules()["MLP"]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        edge = to_edge_transform_and_lower(_export(m, (torch.randn(4, 32),)),
                                           compile_config=EdgeCompileConfig(_check_ir_validity=False))
        return edge.to_executorch(ExecutorchBackendConfig(external_constants=True))


def transformer(layers: int = 4, seq: int = 16, d: int = 64, backend: str = "portable") -> bytes:
    """A transformer stack; ``layers=60`` plans over 3,000 tensors with portable kernels.

    ``backend="xnnpack"`` lowers what XNNPACK takes (linear layers, matmuls...).
    """
    torch = _torch()
    torch.manual_seed(0)
    m = _modules()["Transformer"](layers, d=d)
    parts = None
    if backend == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        parts = [XnnpackPartitioner()]
    elif backend != "portable":
        raise ValueError(f"backend must be 'portable' or 'xnnpack', not {backend!r}")
    return _lower(_export(m, (torch.randn(1, seq, d),)), partitioner=parts)


def weights(mb: float = 8.0) -> bytes:
    """A tiny method carrying ``mb`` megabytes of constant weights."""
    torch = _torch()
    torch.manual_seed(0)
    m = _modules()["Weights"](mb)
    return _lower(_export(m, (torch.randn(1024),)))


def llm(dim: int = 64, n_layers: int = 2, n_heads: int = 4, n_kv_heads: int = 2, vocab_size: int = 256,
        max_seq_len: int = 32, custom_sdpa: bool = True, xnnpack: bool = True, quantize: str | None = None,
        group_size: int = 32, records: bool = False, timeout: float = 1800,
        max_context_len: int | None = None) -> bytes:
    """A llama exported by ExecuTorch's own LLM flow, ``executorch.extension.llm.export.export_llm``.

    Seeded random weights (a checkpoint written here, see
    :func:`_llm_weights`), nothing downloaded; the defaults (2 layers of dim 64,
    grouped-query attention with 2 KV heads for 4 query heads, 256 tokens)
    export in about a minute. ``custom_sdpa=True`` updates the KV caches with
    ExecuTorch's ``llama::update_cache`` and reads them with
    ``llama::custom_sdpa`` (``use_sdpa_with_kv_cache``); ``False`` uses
    ``index_put_``. ``quantize="8da4w"`` quantizes the linear layers
    (``group_size``). The program has ``forward(tokens[1, n], input_pos[1])``
    (prefill ``n`` tokens, then decode one at a time; ``n`` is dynamic, export_llm's default
    ``model.enable_dynamic_shape``, up to ``max_seq_len - 1``), KV caches of
    ``max_context_len`` positions (default ``max_seq_len``), and metadata methods
    (``get_max_seq_len``...). ``records=True`` also has export_llm write its ETRecord
    (``debug.generate_etrecord``) and ExecuTorch's memory trace of the same program
    (``debug.profile_memory``: ``generate_memory_trace``); the program's bytes do not change,
    and :func:`save` writes both beside the program (:func:`llm_records`).
    """
    import json
    import subprocess
    import sys
    import tempfile

    params = {"dim": dim, "multiple_of": 32, "n_heads": n_heads, "n_kv_heads": n_kv_heads, "n_layers": n_layers,
              "norm_eps": 1e-05, "vocab_size": vocab_size}
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "params.json"), "w") as f:
            json.dump(params, f)
        context = max_seq_len if max_context_len is None else max_context_len
        _llm_weights(params, context, os.path.join(tmp, "weights.pth"))
        args = [
            "base.model_class=llama3", "base.params=params.json", "base.checkpoint=weights.pth",
            "model.use_kv_cache=true",
            f"model.use_sdpa_with_kv_cache={str(custom_sdpa).lower()}",
            f"backend.xnnpack.enabled={str(xnnpack).lower()}",
            f"export.max_seq_length={max_seq_len}", f"export.max_context_length={context}",
            "export.output_name=model.pte",
        ]
        if quantize:
            args += [f"quantization.qmode={quantize}", f"quantization.group_size={group_size}"]
        if records:
            args += ["debug.generate_etrecord=true", "debug.profile_memory=true"]
        r = subprocess.run([sys.executable, "-m", "executorch.extension.llm.export.export_llm", *args],
                           cwd=tmp, capture_output=True, text=True, timeout=timeout)
        out = os.path.join(tmp, "model.pte")
        if r.returncode != 0 or not os.path.exists(out):
            tail = [ln for ln in (r.stderr or r.stdout).strip().splitlines() if ln.strip()][-1:]
            raise RuntimeError(f"export_llm failed (exit {r.returncode}): {tail[0] if tail else 'no output'}")
        with open(out, "rb") as f:
            data = f.read()
        if records:  # kept by the program's bytes, so that save finds them after a build of the same program
            kept = _records_dir(data)
            kept.mkdir(parents=True, exist_ok=True)
            for name in _RECORDS:
                shutil.copyfile(os.path.join(tmp, name), kept / name)
        return data


#: what ``llm(records=True)`` keeps: export_llm's ETRecord and ExecuTorch's memory trace of the program
_RECORDS = ("etrecord.bin", "memory_profile.json")


def _records_dir(data: bytes):
    return cache_dir("llm_records", hashlib.sha256(data).hexdigest()[:16])


def llm_records(path: str | os.PathLike) -> tuple[str, str]:
    """``(etrecord, memory_trace)``: the files :func:`save` wrote beside an ``llm`` program exported with
    ``records=True`` (``model.etrecord``, ``model.memory_trace.json`` beside ``model.pte``)."""
    stem = os.path.splitext(os.fspath(path))[0]
    return stem + ".etrecord", stem + ".memory_trace.json"


def _llm_weights(params: dict, max_seq_len: int, path: str, seed: int = 0) -> None:
    """Seeded random weights for :func:`llm`, scaled as a trained model's are (std 0.02, norms 1).

    Without a checkpoint, export_llm leaves the weights of modules that have no
    ``reset_parameters`` (the RMSNorms) as uninitialised memory: outputs that
    saturate to inf and differ from export to export.
    """
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    torch = _torch()
    with torch.device("meta"):
        model = construct_transformer(ModelArgs(max_seq_len=max_seq_len, max_context_len=max_seq_len,
                                                max_batch_size=1, use_kv_cache=True, **params))
    g = torch.Generator().manual_seed(seed)
    weights = {}
    for name, p in model.named_parameters():
        if p.dim() == 1:  # RMSNorm scales
            weights[name] = torch.ones(p.shape)
        else:
            weights[name] = torch.randn(p.shape, generator=g) * 0.02
    torch.save(weights, path)


def shared_state(max_len: int = 16, d: int = 8) -> bytes:
    """``prefill`` and ``decode`` writing one KV-style cache that both methods share.

    Exported with ``MemoryPlanningPass(share_mutable_buffers=True)`` and
    ``emit_mutable_buffer_names=True``: ExecuTorch plans the cache once, in
    arena 2 of both methods at the same offset, so under
    ``Runtime.load_program`` what ``prefill`` writes, ``decode`` reads.
    """
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass

    torch = _torch()
    torch.manual_seed(0)
    m = _modules()["KVCache"](max_len, d)
    eps = {
        "prefill": _export(m, (torch.arange(4), torch.randn(4, d))),
        "decode": _export(m, (torch.tensor([4]), torch.randn(1, d))),
    }
    cfg = ExecutorchBackendConfig(
        emit_mutable_buffer_names=True,
        memory_planning_pass=MemoryPlanningPass(alloc_mutable_buffers=True, share_mutable_buffers=True))
    return _lower(eps, backend_config=cfg)


def bundled(cases: int = 3) -> bytes:
    """A bundled program: two methods and ``cases`` test cases each (inputs and eager expected outputs).

    Built with ExecuTorch's devtools (``BundledProgram`` and
    ``serialize_from_bundled_program_to_flatbuffer``), as its users build them.
    """
    import warnings

    from executorch.devtools import BundledProgram
    from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from executorch.devtools.bundled_program.serialize import serialize_from_bundled_program_to_flatbuffer
    from executorch.exir import to_edge

    torch = _torch()
    torch.manual_seed(0)
    mods = _modules()
    modules = {"forward": mods["MLP"]().eval(), "affine": mods["Small"]().eval()}
    shapes = {"forward": (4, 32), "affine": (8, 8)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eps = {n: _export(m, (torch.randn(*shapes[n]),)) for n, m in modules.items()}
        manager = to_edge(eps).to_executorch()
    suites = []
    for name, m in modules.items():
        tests = []
        for _ in range(cases):
            x = torch.randn(*shapes[name])
            with torch.no_grad():
                tests.append(MethodTestCase(inputs=[x], expected_outputs=(m(x),)))
        suites.append(MethodTestSuite(method_name=name, test_cases=tests))
    return bytes(serialize_from_bundled_program_to_flatbuffer(BundledProgram(manager, suites)))


#: what to install for the Ethos-U examples, in one line (the extra pins ExecuTorch's own ``ethos-u`` extra)
ARM_EXTRA = ("the Ethos-U examples need Arm's flow (ethos-u-vela, tosa-tools): pip install \"pte_lab[arm]\" "
             "(or executorch[ethos-u]==1.5.1)")


def has_arm_flow() -> bool:
    """Whether Arm's Ethos-U flow (Vela and the TOSA serializer ExecuTorch's Arm backend uses) is installed."""
    import importlib.util

    # find_spec("ethosu.vela") imports "ethosu" and raises when that is missing: ask for the top level first
    return all(importlib.util.find_spec(m) is not None and importlib.util.find_spec(m + sub) is not None
               for m, sub in (("ethosu", ".vela"), ("tosa_serializer", "")))


#: the lines of Vela's compile-time summary :func:`ethos_u_export` keeps, and the key each becomes
_VELA_LINES = {"Accelerator configuration": "accelerator", "System configuration": "system_config",
               "Memory mode": "memory_mode", "Total SRAM used": "sram_used", "Total DRAM used": "dram_used",
               "Total Off-chip Flash used": "off_chip_flash_used", "Total On-chip Flash used": "on_chip_flash_used"}


def _vela_summary(text: str) -> list[dict]:
    """Vela's network summaries in ``text`` (one per compiled partition): its own words and figures, the
    sizes as printed (``6.75 KiB``) and in bytes as far as its two decimals of KiB tell."""
    out: list[dict] = []
    for line in text.splitlines():
        for label, key in _VELA_LINES.items():
            if line.startswith(label):
                value = line[len(label):].strip()
                if key == "accelerator":
                    out.append({})
                if out:
                    out[-1][key] = value
    return out


def ethos_u_export(target: str = "ethos-u55-128", memory_mode: str | None = None, split: bool = False,
                   side: int = 16, cortex_m: bool = True) -> tuple[bytes, list[dict]]:
    """The ``ethos_u`` example and what Vela printed while compiling it (:func:`ethos_u`).

    Returns the program's bytes and, per delegated partition in compile order, Vela's summary
    (``accelerator``, ``system_config``, ``memory_mode``, ``sram_used``, ``dram_used``, flash used...),
    as printed: Vela counts the scratch in ``sram_used`` under ``Shared_Sram`` and ``Sram_Only``, and in
    ``dram_used`` (with the weights) under ``Dedicated_Sram``, whose ``sram_used`` is the fast scratch.
    """
    import contextlib
    import io

    if not has_arm_flow():
        from .errors import PteLabError

        raise PteLabError(ARM_EXTRA)
    torch = _torch()
    from executorch.backends.arm.ethosu import EthosUCompileSpec, EthosUPartitioner
    from executorch.backends.arm.quantizer import EthosUQuantizer, get_symmetric_quantization_config
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    nn = torch.nn

    class TwoConv(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, padding=1)
            self.c2 = nn.Conv2d(8, 8, 3, padding=1)

        def forward(self, x):
            y = torch.relu(self.c1(x))
            if split:  # not an NPU operator on the U55: the CPU runs it between two delegates
                y = torch.flip(y, [3])
            return self.c2(y)

    torch.manual_seed(0)
    model = TwoConv().eval()
    example = (torch.randn(1, 3, side, side),)
    spec = EthosUCompileSpec(target, memory_mode=memory_mode)
    quantizer = EthosUQuantizer(spec)
    quantizer.set_global(get_symmetric_quantization_config())
    with torch.no_grad():
        prepared = prepare_pt2e(torch.export.export(model, example).module(), quantizer)
        for _ in range(4):
            prepared(torch.randn(1, 3, side, side))
        exported = torch.export.export(convert_pt2e(prepared), example)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):  # Vela prints its summary per partition
        pte = _lower(exported, partitioner=[EthosUPartitioner(spec)],
                     transform=_replace_quant_nodes if cortex_m else None)
    return pte, _vela_summary(printed.getvalue())


def _replace_quant_nodes(edge):
    """What Arm's example flow (``aot_arm_compiler``) does after lowering: the quantize/dequantize left on the
    CPU become ``cortex_m::`` kernels."""
    from executorch.backends.cortex_m.passes.replace_quant_nodes_pass import ReplaceQuantNodesPass

    return edge.transform([ReplaceQuantNodesPass()])


#: Ethos-U programs exported here with Arm's flow and shipped with pte_lab, so that they open, size and teach
#: without it (made by ``pte_lab/data/ethos_u/export.py``; ``vela.json`` there keeps what Vela printed)
ETHOS_U_PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "ethos_u")


def ethos_u_program(name: str = "u55_128_shared_sram") -> str:
    """The path of a shipped Ethos-U program: ``u55_128_shared_sram``, ``u55_128_sram_only``,
    ``u55_128_shared_sram_split`` (two delegates), ``u85_256_sram_only``, ``u85_256_dedicated_sram_384kb``:
    :func:`ethos_u` for that target and memory mode, exported with ExecuTorch 1.5.1 and Vela 5.1."""
    path = os.path.join(ETHOS_U_PROGRAMS, name if name.endswith(".pte") else f"{name}.pte")
    if not os.path.isfile(path):
        have = sorted(f[:-4] for f in os.listdir(ETHOS_U_PROGRAMS) if f.endswith(".pte"))
        raise ValueError(f"no shipped Ethos-U program {name!r}; choose one of {have}")
    return path


def ethos_u(target: str = "ethos-u55-128", memory_mode: str | None = None, split: bool = False, side: int = 16,
            cortex_m: bool = True) -> bytes:
    """A microcontroller program for an Ethos-U NPU through Arm's flow: two int8 convolutions on ``side`` x
    ``side`` images, quantized with ``EthosUQuantizer``, lowered with ``EthosUPartitioner`` and compiled by
    Vela for ``target`` in ``memory_mode`` (None: the target's default, ``Shared_Sram`` on the U55,
    ``Sram_Only`` on the U85). See :func:`ethos_u_export` for what Vela prints."""
    return ethos_u_export(target, memory_mode, split, side, cortex_m)[0]


BUILDERS: dict[str, Callable[..., bytes]] = {
    "portable": portable,
    "hand_sized": hand_sized,
    "odd": odd,
    "xnnpack": xnnpack,
    "device": device,
    "three_methods": three_methods,
    "kv_cache": kv_cache,
    "dynamic": dynamic,
    "cond": cond,
    "unplanned_io": unplanned_io,
    "external": external,
    "transformer": transformer,
    "gpt": gpt,
    "weights": weights,
    "llm": llm,
    "shared_state": shared_state,
    "bundled": bundled,
    "ethos_u": ethos_u,
}


def build(name: str, **kwargs) -> bytes:
    """Export the example called ``name`` and return its ``.pte`` bytes."""
    try:
        fn = BUILDERS[name]
    except KeyError:
        raise examples_kept.unknown_example(name, BUILDERS) from None
    from .quiet import quiet

    with quiet():  # the exporter's import-time warnings are kept in pte_lab.quiet.LOG, not printed
        return fn(**kwargs)


def manager(name: str, **kwargs):
    """The ``ExecutorchProgramManager`` behind ``build(name, **kwargs)``: exir's own view of the program it
    serializes (each planned tensor's ``TensorSpec``: lifetime, mem_id, offset), for checking what pte_lab
    reads against ExecuTorch's own tools (``executorch.util.activation_memory_profiler``).

    Examples that are not lowered in one ``to_executorch`` call (``llm``, ``external``, ``bundled``) raise
    ``ValueError``.
    """
    global _MANAGERS
    _MANAGERS = []
    try:
        build(name, **kwargs)
        kept = _MANAGERS
    finally:
        _MANAGERS = None
    if len(kept) != 1:
        raise ValueError(f"example {name!r} is not made by one to_executorch call: no single manager to return")
    return kept[0]


def kept_path(name: str, **kwargs) -> Path:
    """The program ``build(name, **kwargs)`` makes, exported once on this machine and kept: its path, in
    pte_lab's cache folder (``examples/``; :mod:`pte_lab.examples_kept` says where, how it is keyed and how
    to clear it), with what :func:`save` writes beside it (``external``'s ``.ptd``, ``llm``'s records).

    Exports it the first time (one process at a time; the others wait and share it). Do not write to the
    path: copy it (:func:`save` does). Raises ``ValueError`` for an unknown example, ``TypeError`` for an
    argument that is not JSON, what the export raises, and ``OSError`` where the cache folder cannot be
    written."""
    if name not in BUILDERS:
        raise examples_kept.unknown_example(name, BUILDERS)
    return examples_kept.kept(name, kwargs, lambda path: save(name, path, cache=False, **kwargs))


def save(name: str, path: str | os.PathLike, *, python: str | os.PathLike | None = None, cache: bool = True,
         **kwargs) -> str:
    """Export the example called ``name`` and write it to ``path``; returns the path.

    For ``external``, the ``.ptd`` data file is written beside the program; for ``llm`` with
    ``records=True``, its ETRecord and ExecuTorch's memory trace (:func:`llm_records`). The export is
    kept on this machine and copied from there the next time (:func:`kept_path`), for any caller with the
    same example code, arguments, torch and ExecuTorch: the tests, the notebooks and the docs share it.
    ``cache=False`` exports afresh (and keeps nothing). ``python`` exports with another interpreter that has
    torch and executorch (the executorch 1.4.1 environment of ``pte-lab legacy-env``, say), in a fresh
    process with this pte_lab on its path: the same module, seed and options, another exporter, never kept.
    The arguments then travel as JSON (numbers, strings, booleans).

    Raises ``ValueError`` for an unknown example, :class:`~pte_lab.errors.NotARegularFileError` for a path
    that names a link, a folder or a device, and what the export raises.
    """
    path = os.fspath(path)
    if python is not None:
        return _save_with(os.fspath(python), name, path, kwargs)
    from .format.regular_file import check_writable  # here: `pte-lab --help` lists the examples, no reader

    check_writable(path, "a program to write")
    if cache and _keepable(name, kwargs):
        examples_kept.copy_out(kept_path(name, **kwargs), path, lambda p: check_writable(p, "a file to write"))
        if name == "llm" and kwargs.get("records"):  # where build() leaves them, for what reads them there
            with open(path, "rb") as f:
                kept = _records_dir(f.read())
            if not all((kept / n).exists() for n in _RECORDS):
                kept.mkdir(parents=True, exist_ok=True)
                for n, there in zip(_RECORDS, llm_records(path)):
                    shutil.copyfile(there, kept / n)
        return path
    if name == "external":
        from .quiet import quiet

        with quiet():
            manager = _external_manager()
        data = manager.buffer
        manager.write_tensor_data_to_file(os.path.dirname(os.path.abspath(path)))
    else:
        data = build(name, **kwargs)
    with open(path, "wb") as f:
        f.write(data)
    if name == "llm" and kwargs.get("records"):
        for kept, there in zip(_RECORDS, llm_records(path)):
            shutil.copyfile(_records_dir(data) / kept, there)
    return path


def _keepable(name: str, kwargs: dict) -> bool:
    """Whether ``save`` can keep this export: a known example, JSON arguments, a cache folder it can write."""
    if name not in BUILDERS:
        raise examples_kept.unknown_example(name, BUILDERS)
    try:
        examples_kept.key(name, **kwargs)
        examples_kept.folder().mkdir(parents=True, exist_ok=True)
    except (TypeError, OSError):
        return False
    return os.access(examples_kept.folder(), os.W_OK)


def _save_with(python: str, name: str, path: str, kwargs: dict) -> str:
    import json
    import subprocess

    from .errors import PteLabError

    if name not in BUILDERS:
        raise examples_kept.unknown_example(name, BUILDERS)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); from pte_lab import examples; "
            "examples.save(sys.argv[2], sys.argv[3], cache=False, **json.loads(sys.argv[4]))")
    try:
        r = subprocess.run([python, "-c", code, root, name, os.path.abspath(path), json.dumps(kwargs)],
                           capture_output=True, text=True, timeout=3600)
    except OSError as exc:
        raise PteLabError(f"cannot run {python}: {exc.strerror or exc}") from None
    if r.returncode != 0:
        tail = [ln for ln in r.stderr.strip().splitlines() if ln.strip()][-1:]
        raise PteLabError(f"exporting {name!r} with {python} failed (exit {r.returncode}): "
                          f"{tail[0] if tail else 'no output'}")
    return path
