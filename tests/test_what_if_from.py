"""What a static export would plan at a third value of the one parameter two exports differ in (issue 32.3):
refusals on crafted pairs, and the prediction against a real export_llm re-export."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from crafting import build_program
from filelock import FileLock

import pte_lab
import pte_lab.planning.from_two_exports as wif
from pte_lab.model.shape_fit import WhatIfError
from pte_lab.planning.from_two_exports import ExportsMismatch, pair_tensors, what_if_from


def _at(p: int, *, op: str = "aten::op", extra: bool = False, dtype: int = 6, planned_last: bool = True,
        name: str = "forward", half: bool = False, rewire: bool = False) -> bytes:
    """One crafted export at parameter ``p``: x[1, p, 4] -> y[1, p, 4] -> z[p, 4] (or z[p/2 + 1, 4] with
    ``half``), each planned in arena 1 one after another."""
    n = 16 * p
    last = [p // 2 + 1, 4] if half else [p, 4]
    values = [("tensor", 1, 0, [1, p, 4]), ("tensor", 1, n, [1, p, 4]),
              ("tensor", 1 if planned_last else None, 2 * n, last, dtype)]
    ins = [[0, 1], [0 if rewire else 1, 2]] + ([[1, 2]] if extra else [])
    return build_program(values, ins, sizes=(0, 3 * n), operators=((op, "out"),), outputs=[2], name=name)


@pytest.fixture
def pair(tmp_path):
    def write(a: bytes, b: bytes):
        pa, pb = tmp_path / "a.pte", tmp_path / "b.pte"
        pa.write_bytes(a)
        pb.write_bytes(b)
        return str(pa), str(pb)

    return write


def test_a_crafted_pair_predicts_every_tensor_at_the_third_value(pair, capsys):
    a, b = pair(_at(4), _at(8))
    w = what_if_from(a, b, values=(4, 8), at=16)
    assert [(t.value, t.shape, t.nbytes) for t in w.tensors] == [(0, (1, 16, 4), 256), (1, (1, 16, 4), 256),
                                                                 (2, (16, 4), 256)]
    assert [t.exported_nbytes for t in w.tensors] == [128, 128, 128]
    assert w.exports.values == (4, 8) and w.exports.sources == (a, b)
    assert w.lower_bound <= w.planned and w.arenas[0].exported == 384
    text = str(w)
    assert "as if exported with parameter = 16" in text and "[1, parameter, 4]" in text
    assert "export change: the parameter = 16" in text
    from pte_lab.cli import main

    assert main(["what-if", a, b, "--values", "4,8", "--at", "16", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["parameter"] == {"names": [], "at": 16, "values": [4, 8], "sources": [a, b]}
    assert [t["nbytes"] for t in doc["tensors"]] == [256, 256, 256] and "bounds" not in doc


@pytest.mark.parametrize("b, message", [
    (_at(8, op="aten::other"), r"forward: the instructions differ first at instruction 0: aten::op.out in the "
                               r"first export, aten::other.out in the second$"),
    (_at(8, extra=True), r"the first export has 2 instructions, the second 3$"),
    (_at(8, dtype=0), r"tensor v2 \(written by aten::op.out\) has dtype float32 in the first export and uint8 in "
                      r"the second"),
    (_at(8, planned_last=False), r"instruction 1 \(aten::op.out\), argument 1: tensor v2 \(written by "
                                 r"aten::op.out\) is planned in the first export, value 2 not in the second$"),
    (_at(8, rewire=True), r"instruction 1 \(aten::op.out\), argument 0: the tensors do not match one to one "
                          r"\(first export tensor v1 \(written by aten::op.out\), second tensor v0 \(input\)\)$"),
    (_at(8, name="prefill"), r"the exports do not have the same methods: 'forward' is only in the first$"),
])
def test_a_pair_that_is_not_one_model_is_refused_naming_the_first_mismatch(pair, b, message):
    a, b = pair(_at(4), b)
    with pytest.raises(ExportsMismatch, match=message):
        what_if_from(a, b, values=(4, 8), at=16)


def test_a_dim_that_is_not_whole_at_the_third_value_is_refused_naming_the_tensor(pair):
    a, b = pair(_at(4, half=True), _at(8, half=True))  # z has p/2 + 1 rows: 3 and 5
    assert what_if_from(a, b, values=(4, 8), at=16).tensors[2].shape == (9, 4)
    with pytest.raises(WhatIfError, match=r"v2 .* dim 0 is 3 at parameter = 4 and 5 at 8: at 9 that line gives "
                                          r"11/2, not a whole size"):
        what_if_from(a, b, values=(4, 8), at=9)


@pytest.mark.parametrize("values, at, message", [
    ((64, 64), 256, r"values \(64, 64\): the two exports' values must differ"),
    ((64,), 256, r"give the parameter's two values"),
    ((64, 128), 0, r"at 0: the value to predict at is more than 0"),
    ((64, 128.5), 256, r"values 128.5 is not a whole number"),
])
def test_values_are_two_distinct_ints_and_at_is_above_0(pair, values, at, message):
    a, b = pair(_at(4), _at(8))
    with pytest.raises(WhatIfError, match=message):
        what_if_from(a, b, values=values, at=at)


def test_a_second_parameter_in_the_metadata_is_refused(pair, monkeypatch):
    """export_llm's metadata methods say what each export was made with: only the parameter may differ."""
    a, b = pair(_at(4), _at(8))
    meta = ["get_max_seq_len", "get_vocab_size"]
    monkeypatch.setattr(wif, "_metadata", lambda pte: meta)
    read = {}  # file name -> what its metadata methods return
    monkeypatch.setattr(wif, "_metadata_values", lambda pte, names: read[os.path.basename(pte.path)])
    read.update({"a.pte": {"get_max_seq_len": 4, "get_vocab_size": 256},
                 "b.pte": {"get_max_seq_len": 8, "get_vocab_size": 256}})
    w = what_if_from(a, b, values=(4, 8), at=16)
    assert w.keys == ("max_seq_len",) and w.export_change() == "max_seq_len = 16"
    read["b.pte"] = {"get_max_seq_len": 8, "get_vocab_size": 512}
    with pytest.raises(ExportsMismatch, match=r"get_vocab_size returns 256 in the first export and 512 in the "
                                              r"second"):
        what_if_from(a, b, values=(4, 8), at=16)
    with pytest.raises(ExportsMismatch, match=r"get_max_seq_len returns 4 in the first export and 8 in the second, "
                                              r"not the values given \(32, 64\)"):
        what_if_from(a, b, values=(32, 64), at=128)


def test_cli_refusals_are_one_line_and_exit_2(pair, capsys):
    from pte_lab.cli import main

    a, b = pair(_at(4), _at(8, op="aten::other"))
    for argv, needle in [([a, b, "--values", "4,8", "--at", "16"], "the instructions differ first at instruction 0"),
                         ([a, b, "--values", "4", "--at", "16"], "give the parameter's two values"),
                         ([a, b, "--values", "4,x", "--at", "16"], "--values '4,x': write the two exports' values"),
                         ([a, b, "--at", "16"], "takes --values A,B and --at N"),
                         ([a], "needs --bound INPUT:AXIS=N")]:
        assert main(["what-if", *argv]) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0], (argv, err)


def test_a_value_beyond_int64_arithmetic_is_refused_never_wrapped(pair, capsys):
    """--at 2**61 once printed float32[16, 2305843009213693952] at 0 bytes: int64 wrapped. Now the figures are
    exact or refused in one line that gives the exact bytes."""
    from pte_lab.cli import main

    a, b = pair(_at(4), _at(8))
    w = what_if_from(a, b, values=(4, 8), at=2 ** 56)  # 2**60 bytes a tensor, 2**61 alive at once: exact
    assert [t.nbytes for t in w.tensors] == [2 ** 60] * 3 and w.planned == w.peak_bytes == 2 ** 61
    for at, needle in [(2 ** 61, "tensor v0 would be [1, 2,305,843,009,213,693,952, 4], "
                                 "36,893,488,147,419,103,232 bytes, at parameter = 2,305,843,009,213,693,952"),
                       (2 ** 57, "the planned tensors would be 6,917,529,027,641,081,856 bytes together"),
                       (2 ** 62, "parameter = 4,611,686,018,427,387,904 is 2**62 or more")]:
        with pytest.raises(WhatIfError, match="beyond what pte_lab"):
            what_if_from(a, b, values=(4, 8), at=at)
        assert main(["what-if", a, b, "--values", "4,8", "--at", str(at)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0], err
    with pytest.raises(WhatIfError, match=r"at 18,446,744,073,709,551,616 is beyond what int64 holds"):
        what_if_from(a, b, values=(4, 8), at=2 ** 64)
    with pytest.raises(WhatIfError, match=r"values \(a number of 16,610 bits\) is beyond what int64 holds"):
        what_if_from(a, b, values=(4, 10 ** 5000), at=16)
    assert main(["what-if", a, b, "--values", f"4,{2 ** 64}", "--at", "16"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'18446744073709551616' is beyond what int64 holds" in err[0], err
    with pytest.raises(SystemExit) as bad:  # argparse's own refusal, one line
        main(["what-if", a, b, "--values", "4,8", "--at", str(2 ** 64)])
    err = capsys.readouterr().err.strip().splitlines()
    assert bad.value.code == 2 and len(err) == 1
    assert "argument --at: '18446744073709551616' is beyond what int64 holds" in err[0], err


# ------------------------------------------------------------------ against real export_llm programs
#: the llm example (XNNPACK, float32, ExecuTorch's custom KV-cache ops; conftest's "llm_fp32" is it at 32)
SEQ = (32, 64, 128)


@pytest.fixture(scope="module")
def llm_at(program_path, program_dir):
    """The llm example exported at each max_seq_len of SEQ (32 is conftest's llm_fp32; 64 and 128 are exported
    once and cached beside it)."""
    from pte_lab import examples

    paths = {SEQ[0]: str(program_path("llm_fp32"))}
    for n in SEQ[1:]:
        path = program_dir / f"llm_fp32_seq{n}.pte"
        with FileLock(str(path) + ".lock"):
            if not path.exists():
                tmp = path.with_suffix(f".{os.getpid()}.tmp")
                examples.save("llm", str(tmp), max_seq_len=n)
                os.replace(tmp, path)
        paths[n] = str(path)
    return paths


@pytest.mark.slow
def test_llm_prediction_equals_the_reexport(llm_at, capsys):
    from pte_lab.planning.at_bound import Predictor, _peak

    v0, v1, at = SEQ
    w = what_if_from(llm_at[v0], llm_at[v1], values=(v0, v1), at=at)
    assert w.exports.names == ("max_seq_len", "max_context_len")
    # the metadata methods' values come from the file as ExecuTorch's deserializer reads them
    from pte_lab.runtime.shapes import program_scalars

    for name in ("get_max_seq_len", "get_max_context_len"):
        out = pte_lab.open(llm_at[at]).methods[name].outputs[0]
        assert out.scalar == program_scalars(llm_at[at], name)[0][out.value] == at
    real = pte_lab.open(llm_at[at]).methods["forward"]
    # the arenas ExecuTorch planned at 128
    assert [(a.mem_id, a.planned) for a in w.arenas] == [(a.mem_id, a.size) for a in real.arenas]
    # every planned tensor's shape, bytes and offset, paired by place in the instruction order
    pairs = pair_tensors(real, pte_lab.open(llm_at[v1]).methods["forward"])
    got = {t.value: (t.shape, t.nbytes, t.offset) for t in w.tensors}
    assert {t.value: got[pairs[t.value]] for t in real.planned} == {t.value: (t.shape, t.nbytes, t.offset)
                                                                    for t in real.planned}
    # each KV cache: four mutable buffers of [1, 128, 2, 16] float32
    caches = [t for t in w.tensors if t.role == "mutable_buffer"]
    assert [(t.shape, t.nbytes) for t in caches] == [((1, at, 2, 16), at * 128)] * 4
    assert sorted(t.nbytes for t in caches) == sorted(t.nbytes for t in real.planned if t.role == "mutable_buffer")
    # the peak: where and how many bytes are alive at once
    problems = Predictor(real).problems_for(np.array([t.nbytes for t in real.planned]))
    ins, _, peak = _peak(problems, real.n_instructions)
    assert (w.peak_instruction, w.peak_bytes) == (ins, peak)
    assert w.lower_bound == sum(p.lower_bound for p in problems)
    from pte_lab.cli import main

    assert main(["what-if", llm_at[v0], llm_at[v1], "--values", f"{v0},{v1}", "--at", str(at)]) == 0
    out = capsys.readouterr().out
    assert f"export change: max_seq_len = {at}, max_context_len = {at}" in out
    assert "[1, max_seq_len - 1, 64]" in out
    with pytest.raises(ExportsMismatch, match="get_max_seq_len returns 32 in the first export and 64"):
        what_if_from(llm_at[v0], llm_at[v1], values=(64, 128), at=256)


def test_the_text_names_the_second_export_not_a_bound(pair):
    """A static export has no bound: the figures beside the prediction are the second export's."""
    text = str(what_if_from(*pair(_at(4), _at(8)), values=(4, 8), at=16))
    assert "the second export (parameter = 8): 384 B" in text
    assert "export's bound" not in text and "exported: parameter" not in text


def test_a_static_export_paired_with_a_dynamic_one_says_so_first(program_path):
    with pytest.raises(ExportsMismatch, match=r"forward: the second export has a dynamic input and the first none: "
                                              r"two static exports predict a third"):
        what_if_from(str(program_path("portable")), str(program_path("dynamic")), values=(4, 8), at=16)
