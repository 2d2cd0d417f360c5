"""Notebook and text displays."""

from __future__ import annotations

import re

import pte_lab
from pte_lab.units import human_bytes
from pte_lab.views.text import arena_picture


def test_html_is_self_contained(program_path):
    pte = pte_lab.open(program_path("device_demo"))
    for obj in (pte, pte.methods["forward2"], pte.methods["forward2"].arena(2)):
        html = obj._repr_html_()
        assert "<script" not in html.lower()
        assert not re.search(r"(src|href)\s*=\s*['\"]?https?:", html)
        assert "@import" not in html
        assert "<style>" in html and "pte-text-fallback" in html
    html = pte._repr_html_()
    assert "forward2" in html and "cuda:0" in html and "48.0 KiB" in html
    assert "type='checkbox'" in html  # collapsible sections without JavaScript
    for loader in ("corrected", "legacy", "module"):
        assert loader in html


def test_one_view_shows_with_styles_stripped(program_path, tmp_path):
    """Where ``<style>`` is stripped (a static notebook viewer), the text fallback shows and the rich HTML
    does not; with the styles, the CSS shows the rich view and hides the text (tests/test_browser.py checks
    that in Chromium). Every repr goes out through the one entry point, html_repr."""
    from pte_lab.views.html import html_repr, unreadable_html
    from shown import fallback_of, one_view_without_css, shown_without_css

    pte = pte_lab.open(program_path("device_demo"))
    m = pte.methods["forward2"]
    d = pte_lab.diff(program_path("portable"), program_path("device_demo"))
    objs = [pte, m, m.arena(2), d]
    for obj in objs:
        html = obj._repr_html_()
        assert one_view_without_css(html), type(obj).__name__
        assert fallback_of(html) == " ".join(str(obj).split())  # the fallback is the text repr
    html = unreadable_html("<Pte x.pte: unreadable>", ValueError("bad <bytes>"))
    assert shown_without_css(html) == "<Pte x.pte: unreadable> ValueError: bad <bytes>"
    # the check itself sees two views where the rich one is not hidden
    both = html_repr("<b>rich</b>", "text").replace(" style='display:none'", "")
    assert not one_view_without_css(both) and shown_without_css(both) == "textrich"


def test_text_reprs(program_path):
    pte = pte_lab.open(program_path("device_demo"))
    text = repr(pte)
    assert "forward2" in text and "cuda:0 48.0 KiB" in text
    assert "Arena(mem_id=2, runtime_index=1, device='cuda:0'" in repr(pte.methods["forward2"].arena(2))
    assert "Method 'forward2'" in repr(pte.methods["forward2"])


def test_arena_picture_rows_follow_occupancy(program_path):
    m = pte_lab.open(program_path("portable")).methods["forward"]
    pic = arena_picture(m, 1, width=32)
    rows = [line for line in pic.splitlines() if "|" in line][1:]
    assert len(rows) == m.n_instructions + 2  # in, every instruction, out
    assert rows[0].lstrip().startswith("in") and rows[-1].lstrip().startswith("out")
    # a row with nothing alive is all free
    occ = m.occupancy(1)
    for row, b in zip(rows, occ):
        cells = row.split("|")[1]
        assert (set(cells) == {"."}) == (b == 0)


def test_arena_picture_marks_the_validators_conflicts():
    """A crafted plan where v1 [16, 32) and v2 [24, 40) are both alive at instruction 1: the picture draws
    "!" over the bytes they share at that instruction only, and a legend line says what "!" means."""
    from crafting import build_program

    data = build_program([("tensor", 1, 0, 4), ("tensor", 1, 16, 4), ("tensor", 1, 24, 4), ("tensor", 1, 48, 4)],
                         [[0, 1], [1, 2], [2, 3]], sizes=(0, 64))
    m = pte_lab.open(data).methods["forward"]
    (c,) = m.conflicts
    assert (c.a, c.b) == (1, 2)
    pic = arena_picture(m, 1, width=32)  # 2 bytes a column
    rows = {line.split("|")[0].strip(): line.split("|")[1] for line in pic.splitlines() if line.count("|") == 2}
    assert rows["1"] == "........bbbb!!!!cccc............"  # bytes [24, 32): columns 12 to 15
    assert all("!" not in row for t, row in rows.items() if t != "1")  # alive together at 1 only
    (legend,) = [line for line in pic.splitlines() if line.startswith("!:")]
    assert "two tensors alive at once both hold" in legend and "1 conflict in this arena" in legend
    fine = pte_lab.open(build_program([("tensor", 1, 0, 4), ("tensor", 1, 16, 4)], [[0, 1]])).methods["forward"]
    assert fine.conflicts == [] and "!" not in arena_picture(fine, 1, width=32)


def test_long_method_picture_is_sampled_keeping_the_peak(program_path):
    m = pte_lab.open(program_path("transformer")).methods["forward"]
    pic = arena_picture(m, 1, max_rows=20)
    rows = [line for line in pic.splitlines() if "|" in line][1:]
    assert len(rows) <= 21
    assert human_bytes(m.arena(1).peak_bytes) in pic
    assert f"of {m.n_instructions + 2} rows shown" in pic  # a sampled picture says so
    legend = pic.split("legend: ")[1]
    assert "Z=v" in legend and "9=v" in legend  # every letter the picture uses is explained


def test_human_bytes():
    assert human_bytes(0) == "0 B"
    assert human_bytes(1023) == "1023 B"
    assert human_bytes(1536) == "1.5 KiB"
    assert human_bytes(50331648) == "48.0 MiB"


def test_human_bytes_rounds_as_the_exact_fraction_does():
    """human_bytes works in integers (it is asked for every figure of every table): the same text as the exact
    fraction rounded half to even, halves and negative sizes included."""
    import random
    from fractions import Fraction

    from pte_lab.units import _fixed

    def exact(n: int) -> str:
        for k, unit in enumerate(("KiB", "MiB", "GiB", "TiB", "PiB"), 1):
            v = Fraction(n, 1024 ** k)
            if abs(v) < 1024 or unit == "PiB":
                return f"{_fixed(v, 1 if v < 100 else 0)} {unit}"

    rng = random.Random(0)
    sizes = [rng.randrange(1024, 2 ** 70) for _ in range(3000)]
    sizes += [q * 1024 ** k // 20 + d for k in range(1, 6) for q in range(20, 41000, 37) for d in (-1, 0, 1)]  # halves
    for n in sizes + [-n for n in sizes]:
        if abs(n) >= 1024:
            assert human_bytes(n) == exact(n), n


def test_byte_figures_are_exact_however_large():
    """No float division: a figure a float cannot hold (a budget past 1e308) still prints, and exactly."""
    from pte_lab.units import tick_bytes

    assert human_bytes(10 ** 400).startswith("8881784197001252323389053344726562") and human_bytes(10 ** 400).endswith(" PiB")
    assert human_bytes(2 ** 62) == "4096 PiB"
    assert human_bytes(2 ** 53 + 1) == "8.0 PiB"
    assert tick_bytes(708_818_496_039_594) == "708,818,496,039,594 B"  # a float said 692,205,562,538.666 KiB
    assert tick_bytes(2 ** 42 + 2 ** 39) == "4.5 TiB" and tick_bytes(10 ** 30) == "931,322,574,615,478,515,625 GiB"


def test_sizes_and_counts_a_user_types_are_exact_or_refused_beyond_int64():
    import pytest

    from pte_lab.units import INT64_MAX, parse_bytes, parse_whole

    assert parse_bytes(str(INT64_MAX)) == INT64_MAX and parse_whole(str(INT64_MAX)) == INT64_MAX
    assert parse_bytes("8589934591 GiB") == 8589934591 << 30 and parse_whole("-3") == -3
    for text in (str(INT64_MAX + 1), "8589934592 GiB", "1" + "0" * 309, "9" * 5000):
        with pytest.raises(ValueError, match=r"is beyond what int64 holds \(at most 9,223,372,036,854,775,807\)$") as e:
            parse_bytes(text)
        assert len(str(e.value)) < 200  # the number is not written out whole
    for text in (str(2 ** 64), str(-(2 ** 63) - 1), "9" * 5000):
        with pytest.raises(ValueError, match=r"is beyond what int64 holds"):
            parse_whole(text)
    with pytest.raises(ValueError, match="must be at least 1, not 0"):
        parse_whole("0", least=1)


def test_byte_ticks_are_labelled_exactly():
    """A tick marks one value: 1.25 MiB is never printed '1.2 MiB' (issue 23)."""
    from pte_lab.units import tick_bytes

    mib = 1 << 20
    assert [tick_bytes(int(x * mib)) for x in (0.25, 1, 1.25, 1.75, 1.125)] == \
        ["256 KiB", "1 MiB", "1.25 MiB", "1.75 MiB", "1.125 MiB"]
    assert tick_bytes(mib + 64 * 1024) == "1,088 KiB"  # 1.0625 MiB: the next unit down, exactly
    assert tick_bytes(1280) == "1,280 B" and tick_bytes(0) == "0 B" and tick_bytes(24576) == "24 KiB"
