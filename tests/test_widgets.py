"""The explorer's state: the slider highlights exactly the live tensors; picking shows details."""

from __future__ import annotations


import pytest

pytest.importorskip("ipywidgets")

import pte_lab
from pte_lab.units import count


def _live(method, mem_id, t):
    return {x.value for x in method.planned if x.mem_id == mem_id and x.first is not None
            and x.first <= t <= x.last}


def test_slider_highlights_exactly_the_live_tensors(program_path):
    e = pte_lab.explore(program_path("transformer"))
    m = e.method
    assert e.slider.min == -1 and e.slider.max == m.n_instructions
    seen = set()
    for t in range(-1, m.n_instructions + 1, 7):
        e.slider.value = t
        assert e.highlighted == _live(m, 1, t)
        assert {v for _, v in e.live_list.options} == e.highlighted
        assert f"instruction <b>{t}</b>" in e.status.value
        seen.add(frozenset(e.highlighted))
        assert e.image.value[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(seen) > 3  # moving the slider changes what is shown
    # a saved notebook's text in place of the widget: short, and it says where the slider stands
    text = e._repr_mimebundle_()["text/plain"]
    assert text == f"<Explorer of transformer.pte: method 'forward', arena 1, instruction {e.slider.value}: " \
                   f"{count(len(e.highlighted), 'tensor')} alive>"


def test_method_and_arena_pickers_and_details(program_path):
    e = pte_lab.explore(pte_lab.open(program_path("device_demo")), method="forward2")
    assert [v for _, v in e.arena_dd.options] == [1, 2]
    e.arena_dd.value = 2
    e.slider.value = 2
    assert e.highlighted == _live(e.method, 2, 2) and e.highlighted
    v = e.live_list.options[0][1]
    before = e.image.value
    e.live_list.value = v
    assert f"Tensor v{v}" in e.details.value and "cuda:0" in e.details.value
    from shown import one_view_without_css

    assert one_view_without_css(e.details.value) and "style='text" not in e.details.value  # the entry point's CSS
    assert e.image.value != before  # the picked tensor is drawn highlighted
    e.method_dd.value = "forward"
    assert [v for _, v in e.arena_dd.options] == [1] and e.slider.max == e.method.n_instructions


def test_placement_tab_renders_on_demand(program_path):
    e = pte_lab.explore(program_path("device_demo"))
    assert not e.placement_image.value
    e.tabs.selected_index = 1
    assert e.placement_image.value[:4] == b"\x89PNG"


def test_load_and_run_in_the_background(program_path):
    e = pte_lab.explore(program_path("device"))
    e.emulate_cb.value = True
    e._on_run()
    assert e._run_thread is not None
    e._run_thread.join(timeout=300)
    out = e.run_output.value
    assert "forward2</b> ran" in out and "forward</b> ran" in out
    from shown import one_view_without_css, shown_without_css

    assert one_view_without_css(out) and "✔ forward2 ran: outputs" in shown_without_css(out)
    assert "emulated" in out and "predicted_bytes" in out


def test_alive_list_shows_whole_items_only(program_path):
    """The 'alive' list never ends in mid-number (``@ 98,``): each option is whole items, then "…"."""
    import re

    from pte_lab.model.dtypes import short_shape
    from pte_lab.units import human_bytes
    from pte_lab.widgets import LIVE_LABEL_CHARS, live_label

    e = pte_lab.explore(program_path("transformer"))
    m = e.method
    by_value = {t.value: t for t in m.planned}
    cut = 0
    for t in range(-1, m.n_instructions + 1, 5):
        e.slider.value = t
        for label, v in e.live_list.options:
            x = by_value[v]
            assert len(label) <= LIVE_LABEL_CHARS
            full = " ".join(i for i in [f"v{v}", short_shape(x.shape), human_bytes(x.nbytes), f"@ {x.offset:,}",
                                        (x.op or x.role).split(" (")[0], x.name or ""] if i)
            if label != full:
                cut += 1
                assert label.endswith(" …")
                kept = label[:-2]
                assert full.startswith(kept) and full[len(kept)] == " "  # cut between items, never inside one
            offset = re.search(r"@ ([\d,]+)", label)
            assert offset is None or offset.group(1) == f"{x.offset:,}"
    assert cut  # the transformer's labels are longer than the list is wide: some are shortened
    assert live_label(by_value[next(iter(by_value))], limit=1000).startswith("v")


def test_counts_are_singular_for_one(program_path):
    e = pte_lab.explore(program_path("portable"))
    assert "1 method &middot;" in e._header() and "1 methods" not in e._header()
