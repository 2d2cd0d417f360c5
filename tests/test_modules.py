"""Memory by module (issue 31.2): the table, the icicle, the layout coloured by module, the explorer, and the
text picture's legend (31.5), on the portable transformer and the XNNPACK GPT exported with their ETRecords."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

import pte_lab
from pte_lab import plot
from pte_lab.errors import PteLabError
from pte_lab.model.modules import INPUTS, NoModulesError, lowest_common
from pte_lab.views.text import arena_picture

torch = pytest.importorskip("torch")
pytest.importorskip("executorch")
matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")


def _export(name: str, out: Path):
    """(pte, etrecord, manager) of the transformer (portable) or the GPT (XNNPACK), as pte_lab.examples makes
    them, with an ETRecord."""
    import pte_lab.examples as ex
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    mods = ex._modules()
    torch.manual_seed(0)
    if name == "transformer":
        eps, parts = ex._export(mods["Transformer"](2, d=64), (torch.randn(1, 16, 64),)), None
    else:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        m = mods["GPT"](64, 32, layers=1, max_len=8)
        eps = {"forward": ex._export(m, (torch.zeros(1, 8, dtype=torch.long),)),
               "next_token": ex._export(m, (torch.zeros(1, 1, dtype=torch.long),))}
        parts = {n: [XnnpackPartitioner()] for n in eps}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        et = to_edge_transform_and_lower(eps, partitioner=parts, generate_etrecord=True,
                                         compile_config=EdgeCompileConfig(_check_ir_validity=False)).to_executorch()
    pte, etr = out / f"{name}.pte", out / f"{name}.etrecord"
    pte.write_bytes(et.buffer)
    et.get_etrecord().save(str(etr))
    return str(pte), str(etr), et


@pytest.fixture(scope="module")
def transformer(tmp_path_factory):
    return _export("transformer", tmp_path_factory.mktemp("transformer"))


@pytest.fixture(scope="module")
def gpt(tmp_path_factory):
    return _export("gpt", tmp_path_factory.mktemp("gpt"))


def _method(exported, name="forward"):
    pte, etr, _ = exported
    return pte_lab.open(pte, etrecord=etr).methods[name]


def test_lowest_common_module():
    assert lowest_common(["layers.0.fc1", "layers.0.fc2"]) == "layers.0"
    assert lowest_common(["layers.1", "layers.10"]) == "layers"  # parts, not characters
    assert lowest_common(["head", "tok"]) == ""
    assert lowest_common([]) is None


def test_by_module_has_every_level_and_adds_up_to_the_peak(transformer):
    m = _method(transformer)
    df = m.by_module()
    rows = df.set_index("module")
    # every level of the path, with the types the graph records
    for path, typ, depth in (("", "Transformer", 0), ("blocks", None, 1), ("blocks.0", "Block", 2),
                             ("blocks.0.ff1", "Linear", 3), ("blocks.1.n2", "LayerNorm", 3)):
        assert path in rows.index
        assert rows.loc[path, "depth"] == depth and m.modules.row(path).module_type == typ
    # the model and the rows outside it hold what the peak explains; children never more than their parent
    top = df[df.parent.isna()]
    assert set(top.module) == {"", INPUTS}
    assert int(top.peak_bytes.sum()) == m.peak.peak_bytes
    for r in m.modules.rows:
        kids = [k for k in m.modules.rows if k.parent == r.module]
        if kids:
            assert sum(k.peak_bytes for k in kids) <= r.peak_bytes
            assert sum(k.constant_bytes for k in kids) <= r.constant_bytes
    # the peak (instruction 26, blocks.0.ff1's addmm) is mostly ff1's transposed weight
    ff1 = m.modules.row("blocks.0.ff1")
    assert ff1.peak_bytes >= 64 * 1024 and ff1.peak_bytes > m.peak.peak_bytes // 2
    # an arena's most alive at once: no module more than the arena's peak, the model the whole peak
    assert m.modules.row("").max_live[0] <= m.arena(1).peak_bytes
    assert df["max_live_arena_1"].max() <= m.arena(1).peak_bytes


def test_weights_by_module_agree_with_executorchs_size_analysis_tool(transformer, gpt):
    """size_analysis_tool lists each parameter of the ETRecord's edge program with its bytes; pte_lab's
    constants (portable) and named data (XNNPACK, from the keys its blobs name) add up to them by module.
    Weights whose bytes the file stores once for several modules (LayerNorms' ones and zeros) count at the
    module holding them all, so compare the modules whose weights are their own."""
    from executorch.devtools import parse_etrecord
    from executorch.devtools.size_analysis_tool.size_analysis_tool import generate_model_size_information

    for exported, modules, where in ((transformer, ["blocks.0.ff1", "blocks.1.q", "blocks.1.ff2"], "constant_bytes"),
                                     (gpt, ["tok", "head"], None)):
        m = _method(exported)
        edge = parse_etrecord(exported[1]).edge_dialect_program
        ep = edge["forward"] if isinstance(edge, dict) else edge
        info = generate_model_size_information(ep)
        sig = ep.graph_signature
        fqn = {**sig.inputs_to_parameters, **sig.inputs_to_buffers}
        theirs: dict[str, int] = {}
        for t in info["tensor_data"]:
            path = fqn.get(t["name"], "").rpartition(".")[0]
            theirs[path] = theirs.get(path, 0) + t["num_bytes"]
        for path in modules:
            r = m.modules.row(path)
            ours = getattr(r, where) if where else r.constant_bytes + r.named_data_bytes
            assert ours == theirs[path], path
        # the whole model's weights: what the file holds (identical contents once), never more than theirs
        root = m.modules.row("")
        assert 0 < root.constant_bytes + root.named_data_bytes <= info["overview"]["total_tensor_data_size"]


def test_xnnpack_delegate_calls_give_their_outputs_weights_and_blobs_to_the_modules_they_swallowed(gpt):
    m = _method(gpt)
    block = m.modules.row("blocks.0")
    # the attention and MLP linears are inside the delegate calls of blocks.0: their weights are named data the
    # XNNPACK blobs name, and those blobs are the block's
    assert block.named_data_bytes >= 4 * 32 * 32 * 4 + 2 * 32 * 128 * 4
    assert block.delegate_bytes > 0
    assert m.modules.row("head").named_data_bytes == 64 * 32 * 4  # the lm head's weight, in named data
    assert m.modules.unplaced_named_data == 0  # every key of the program is read by a call of forward
    # every delegate output is in a module (none left to "(no module)")
    owners = m.modules.owner
    for t in m.planned:
        if t.op and t.op.startswith("delegate:") and t.role != "view" and t.nbytes:
            assert not owners[t.value].startswith("("), t
    assert int(m.by_module().query("parent.isna()").peak_bytes.sum()) == m.peak.peak_bytes


def test_modules_agree_with_executorchs_memory_trace(transformer, tmp_path):
    """generate_memory_trace (ExecuTorch's activation memory profiler) names each allocation's node and module:
    pte_lab's tensors of that node are in that module."""
    from executorch.util.activation_memory_profiler import generate_memory_trace

    _, _, et = transformer
    generate_memory_trace(et, str(tmp_path / "trace.json"))
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    m = _method(transformer)
    ours: dict[str, set] = {}
    for t in m.planned:
        src = m.source_of(t.value)
        if t.role != "view" and src is not None and src.node:
            ours.setdefault(src.node, set()).add((t.nbytes, src.module, m.modules.owner[t.value]))
    theirs = {(e["name"], e["args"]["bytes"], e["args"]["fqn"]) for e in events if e["args"]["fqn"]}
    agree = [x for x in theirs if any((b, mod, own) == (x[1], x[2], x[2]) for b, mod, own in ours.get(x[0], ()))]
    named = [x for x in theirs if x[0] in ours]
    assert len(theirs) >= 60 and len(named) >= 0.9 * len(theirs)
    assert len(agree) == len(named)


def test_without_an_etrecord_by_module_says_what_to_pass(transformer):
    m = pte_lab.open(transformer[0]).methods["forward"]
    with pytest.raises(NoModulesError, match=r"needs the program's ETRecord.*etrecord='model.etrecord'") as e:
        m.by_module()
    assert isinstance(e.value, PteLabError) and "\n" not in str(e.value)
    with pytest.raises(NoModulesError):
        plot.by_module(m)
    with pytest.raises(NoModulesError):
        plot.arena_layout(m, 1, color_by="module")


def test_icicle_draws_each_module_inside_its_parent(transformer, gpt, tmp_path):
    import matplotlib.pyplot as plt

    m = _method(transformer)
    fig, ax = plt.subplots()
    try:
        assert plot.by_module(m, ax=ax) is ax
        bars = [p for p in ax.patches]
        rows = [r for r in m.modules.rows if r.peak_bytes]
        assert len(bars) == len(rows)
        by_depth = {}
        for p in bars:
            by_depth.setdefault(round(p.get_y() + p.get_height() / 2), []).append(p)
        assert abs(by_depth[0][0].get_width() - m.peak.peak_bytes) < 1  # the model row spans the whole peak
        labels = " ".join(t.get_text() for t in ax.texts)
        assert "ff1 (Linear)" in labels and "blocks.0 (Block)" in labels
        assert "instruction 26" in ax.get_title()
        with pytest.raises(ValueError, match="value must be one of"):
            plot.by_module(m, ax=ax, value="bytes")
        fig.savefig(tmp_path / "icicle.png")
        ax.clear()
        weights = plot.by_module(_method(gpt), ax=ax, value="weight_bytes", max_depth=1)
        # labels where they fit: the module's name, its type where there is room
        assert {t.get_text().split("\n")[0].split(" (")[0] for t in weights.texts} >= {"blocks", "head", "tok"}
    finally:
        plt.close(fig)


def test_layout_coloured_by_module(gpt):
    import matplotlib.pyplot as plt

    m = _method(gpt)
    fig, ax = plt.subplots()
    try:
        plot.arena_layout(m, 1, ax=ax, color_by="module")
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert {"blocks.0", "head", "tok", INPUTS} <= set(legend)
        coll = next(c for c in ax.collections if c.get_gid() == "tensors")
        assert len({tuple(c) for c in coll.get_facecolors()}) >= 4
    finally:
        plt.close(fig)


def test_explorer_names_node_module_and_source(gpt):
    pytest.importorskip("ipywidgets")
    from pte_lab.widgets import Explorer

    pte, etr, _ = gpt
    e = Explorer(pte_lab.open(pte, etrecord=etr))
    assert "module" in e.color_dd.options
    e.slider.value = 6
    assert any(" blocks.0 " in label for label, _ in e.live_list.options)
    assert e.image.tooltip.startswith("instruction 6: delegate:XnnpackBackend") and "module blocks.0" in e.image.tooltip
    m = e.method
    alive = {v for _, v in e.live_list.options}
    v = next(t.value for t in m.planned if t.value in alive and t.op and "expand_copy" in t.op)
    e.live_list.value = v
    assert "module" in e.details.value and "node" in e.details.value and "source" in e.details.value
    assert "examples.py:" in e.live_list.tooltip
    plain = Explorer(pte_lab.open(pte))
    assert "module" not in plain.color_dd.options
    plain.slider.value = 6
    assert plain.image.tooltip is None


def test_text_picture_legend_gives_shape_and_op(transformer, gpt):
    m = pte_lab.open(transformer[0]).methods["forward"]
    legend = arena_picture(m, 1).split("legend: ")[1].split("\nat the peak")[0]
    first = m.planned and next(t for t in m.planned if t.mem_id == 1 and t.first is not None and t.nbytes)
    assert f"a=v{first.value} {first.dtype}{list(first.shape)} input" in legend
    assert "float32[64, 256] permute_copy" in legend and " addmm" in legend
    assert all(len(line) <= 84 for line in legend.splitlines())  # wrapped between entries
    g = _method(gpt)
    legend = arena_picture(g, 1).split("legend: ")[1]
    assert "native_layer_norm blocks.0.n1" in legend and "delegate:XnnpackBackend" in legend


def _export_llm(out: Path) -> tuple[str, str]:
    """The 8da4w llama of tests/conftest.py's ``llm`` program, exported by export_llm with its ETRecord
    (``debug.generate_etrecord=true``: ``etrecord.bin`` beside the model)."""
    import subprocess
    import sys

    import pte_lab.examples as ex

    params = {"dim": 64, "multiple_of": 32, "n_heads": 4, "n_kv_heads": 2, "n_layers": 2, "norm_eps": 1e-05,
              "vocab_size": 256}
    (out / "params.json").write_text(json.dumps(params))
    ex._llm_weights(params, 32, str(out / "weights.pth"))
    args = ["base.model_class=llama3", "base.params=params.json", "base.checkpoint=weights.pth",
            "model.use_kv_cache=true", "model.use_sdpa_with_kv_cache=true", "backend.xnnpack.enabled=true",
            "export.max_seq_length=32", "export.max_context_length=32", "export.output_name=model.pte",
            "quantization.qmode=8da4w", "quantization.group_size=32", "debug.generate_etrecord=true"]
    r = subprocess.run([sys.executable, "-m", "executorch.extension.llm.export.export_llm", *args], cwd=out,
                       capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, r.stderr[-2000:]
    return str(out / "model.pte"), str(out / "etrecord.bin")


def check_llm_by_module(pte: str, etr: str) -> None:
    p = pte_lab.open(pte, etrecord=etr)  # its constant methods (get_max_seq_len...) are not in the ETRecord
    m = p.methods["forward"]
    mods = m.modules
    top = [r for r in mods.rows if r.parent is None]
    assert sum(r.peak_bytes for r in top) == m.peak.peak_bytes
    # the feed-forward of the first layer makes most of the peak; every layer has its attention and KV cache
    assert max((r for r in mods.rows if r.depth == 3), key=lambda r: r.peak_bytes).module == "layers.0.feed_forward"
    for layer in ("layers.0", "layers.1"):
        assert mods.row(f"{layer}.attention").module_type == "AttentionMHA"
        # its K and V caches belong to the module owning the buffers (the graph signature's names), not to
        # custom_sdpa's module, which reads them; they are alive all the time
        state = [t.value for t in m.planned if t.role == "mutable_buffer" and mods.owner[t.value].startswith(layer)]
        assert len(state) == 2 and {mods.owner[v] for v in state} == {f"{layer}.attention.kv_cache"}
        nbytes = {t.value: t.nbytes for t in m.planned}
        assert mods.row(f"{layer}.attention.kv_cache").peak_bytes == sum(nbytes[v] for v in state) > 0
        assert mods.row(f"{layer}.attention.SDPA").peak_bytes == 0
    # the 8da4w linears' weights and scales are XNNPACK named data, every key found in a blob
    assert mods.unplaced_named_data == 0
    assert mods.row("").named_data_bytes == p.named_data_bytes
    assert mods.row("layers.0.feed_forward").named_data_bytes > 0
    assert mods.row("tok_embeddings").constant_bytes == 256 * 64 * 4  # the portable embedding's table


@pytest.mark.slow
def test_export_llm_by_module(tmp_path):
    check_llm_by_module(*_export_llm(tmp_path))
