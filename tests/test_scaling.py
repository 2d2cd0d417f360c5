"""Work that grows with the file, not with its square (issue 29, section 3).

Each generator in :data:`tests.crafting.SCALING` builds one class of file that once cost quadratic work: many
arenas, a long chain of backward jumps, one table named many times (an inline blob, a constant, a ``.ptd``
entry, a suite), many Ethos-U descriptors, a long offset vector, many bundled test suites. Every public path
runs on it at two sizes (``n`` and ``2n``, the file about twice as large), and the work it takes is counted
deterministically: Python lines executed (``sys.settrace`` line events, loop iterations included) and the
peak of memory traced by ``tracemalloc``. Doubling the file may at most about double either (a ratio of 2.6
leaves room for ``n log n`` and fixed costs; quadratic work shows as 4).
"""

from __future__ import annotations

import contextlib
import io
import sys
import tracemalloc

import pytest

import pte_lab
from pte_lab.cli import main as cli
from tests.crafting import SCALING, many_arenas_many_tensors

#: the most that doubling a file's size may multiply the work of one path by
MAX_RATIO = 2.6


def _work(fn) -> tuple[int, int]:
    """(Python lines executed, peak traced bytes) of ``fn()``."""
    lines = 0

    def trace(frame, event, arg):
        nonlocal lines
        if event == "line":
            lines += 1
        return trace

    tracemalloc.start()
    sys.settrace(trace)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            fn()
    finally:
        sys.settrace(None)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return lines, peak


def _paths(name: str, data: bytes, path) -> dict:
    """Every public path on one file: name -> a call."""
    path.write_bytes(data)
    f = str(path)
    kind = pte_lab.format.identify(data)

    def opened():
        return pte_lab.open(data)

    paths = {"inspect": lambda: cli(["inspect", f]), "inspect --json": lambda: cli(["inspect", "--json", f]),
             "repr": lambda: repr(opened()), "html": lambda: opened()._repr_html_()}
    if kind == "data":
        paths["table"] = lambda: opened().table()
        return paths

    def analysed():
        from benchmarks.bench_crafted import analyse

        analyse(data)

    def diffed():
        d = pte_lab.diff(data, variant)
        repr(d), str(d), d._repr_html_(), d.to_dict()
        for md in d.methods.values():
            for a in md.arenas:
                md.causes(a.mem_id)

    def layout():
        from pte_lab.model.layout import file_regions

        file_regions(opened())

    variant = data
    if name == "many arenas":  # every arena and every tensor changes
        variant = many_arenas_many_tensors(len(opened().methods["forward"].arenas), grow=4)
    paths.update({"open and analyse": analysed, "inspect --layout": lambda: cli(["inspect", "--layout", f]),
                  "diff": diffed, "cli diff": lambda: cli(["diff", f, f]), "layout": layout})
    if kind == "bundled":
        def cases():
            b = opened().bundled
            for s in b.suites:
                for i in range(s.cases):
                    b.case(s.method, i)  # what run_bundled_tests asks, case by case

        paths["bundled cases"] = cases
    return paths


@pytest.mark.parametrize("name", list(SCALING))
def test_doubling_the_file_at_most_doubles_the_work(name, tmp_path, monkeypatch):
    from pte_lab.model import occupancy

    # an arena's curve is drawn on a (time x byte segment) grid while that grid is small (a bounded cost,
    # quadratic below its cap): measure past the cap, where the work must grow with the file
    monkeypatch.setattr(occupancy, "_GRID_CELLS", 1 << 10)
    make, n = SCALING[name]
    small, large = make(n), make(2 * n)
    assert 1.6 < len(large) / len(small) < 2.4  # the file doubles too
    p_small, p_large = _paths(name, small, tmp_path / "small"), _paths(name, large, tmp_path / "large")
    slow = []
    for path in p_small:
        (l1, m1), (l2, m2) = _work(p_small[path]), _work(p_large[path])
        if l2 > MAX_RATIO * l1 or m2 > MAX_RATIO * m1:
            slow.append(f"{path}: lines {l1:,} -> {l2:,} ({l2 / l1:.2f}x), peak {m1:,} -> {m2:,} B ({m2 / m1:.2f}x)")
    assert not slow, f"{name} (n={n} -> {2 * n}, {len(small):,} -> {len(large):,} bytes): " + "; ".join(slow)


def test_a_ptd_entry_named_often_is_one_tensor():
    from tests.crafting import ptd_one_entry_named_often

    d = pte_lab.open(ptd_one_entry_named_often(1000))
    assert [t.key for t in d.tensors] == ["weight"] and d.entries == 1000 and d.repeated_entries == 999
    assert "999 more entries repeat a key listed before them (ExecuTorch reads the first)" in repr(d)


def test_a_blob_named_by_many_tables_is_counted_once():
    from pte_lab.model.layout import flatbuffer_regions
    from tests.crafting import one_table_named_often

    data = one_table_named_often(300)  # one 2,400-byte constant and one blob, each named by 300 tables
    p = pte_lab.open(data)
    assert p.inline_constant_bytes == 2400 and p.raw.inline_delegate_bytes == 2400
    r = flatbuffer_regions(p)
    assert sum(r.values()) == p.flatbuffer_size and r["inline constant"] == 2400  # the file's bytes, each once
    assert "1 delegate blob (2.3 KiB) is stored inline" in repr(p)


def test_a_long_jump_chain_extends_every_lifetime_over_it():
    from tests.crafting import jump_chain

    m = pte_lab.open(jump_chain(50)).methods["forward"]
    df = m.tensors.set_index("value")
    assert (df.loc[0:48, "last"] == 51).all()  # the chain's last jump, at instruction 2 + 49


def test_a_call_short_of_many_descriptors_is_one_check_per_call():
    from pte_lab.model.ethos_u import io_checks
    from tests.crafting import many_descriptors

    m = pte_lab.open(many_descriptors(200, calls=50)).methods["forward"]
    (d,) = m.delegate_memory
    checks = io_checks(m.raw, d)
    # 50 calls share one table: checked once, at the first; inputs 0 and 1 are named, 2 is the one missing
    assert [(c.instruction, c.direction, c.position) for c in checks] == [(0, "input", 0), (0, "input", 1),
                                                                           (0, "input", 2)]
    assert "the call passes 2 arguments, but Vela describes 200 inputs and 1 output" in checks[-1].refusal
    assert any(w.kind == "delegate_io" for w in m.findings())


def test_a_blob_named_by_many_tables_is_listed_for_each_and_hashed_once(monkeypatch):
    import hashlib

    from pte_lab.model import layout
    from tests.crafting import one_table_named_often

    hashed = []
    real = hashlib.sha256
    monkeypatch.setattr(layout.hashlib, "sha256", lambda b: hashed.append(len(b)) or real(b))
    rows = layout.file_regions(pte_lab.open(one_table_named_often(100, blob_bytes=4096)))
    consts = [r for r in rows if r.region == "inline constant"]
    assert len(consts) == 100 and len({r.sha256 for r in consts}) == 1
    assert consts[0].name.endswith("(+99 more)")  # constant 1 is named by 100 values
    assert hashed == [4096, 4096]  # the constant's span and the delegate blob's, once each


def test_small_constants_are_told_apart_by_their_bytes(monkeypatch):
    """The file layout finds small blobs' copies by content, all at once: each constant's digest is its own
    bytes', and a mix that takes every content for the same still gives the same rows (the bytes decide)."""
    import hashlib

    import numpy as np

    from pte_lab.model import layout
    from tests.crafting import long_offsets

    data = long_offsets(600)  # 600 one-byte constants, 251 distinct bytes
    rows = list(layout.file_regions(pte_lab.open(data)))
    consts = [r for r in rows if r.region == "constant"]
    assert len(consts) == 600 and len({r.sha256 for r in consts}) == 251
    assert all(r.sha256 == hashlib.sha256(data[r.offset:r.offset + r.bytes]).hexdigest()[:16] for r in consts)
    assert sum(r.duplicate_of is not None for r in consts) == 600 - 251
    monkeypatch.setattr(layout, "_MIX", np.zeros_like(layout._MIX))  # every row mixes alike
    assert list(layout.file_regions(pte_lab.open(data))) == rows
