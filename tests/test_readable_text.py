"""Text a newcomer reads without Python: counts in the singular for one, and the arena picture's peak row
spelled out (each tensor's dtype, shape, bytes, offset and the op writing it), not letters only."""

from __future__ import annotations

import re


import pte_lab
from pte_lab.cli import main

PLURALS = re.compile(r"(?<![\d,.])1 (method|instruction|planned tensor|tensor|arena|key|case|test suite|input|output|"
                     r"operator|value|file|step|allocation|time|argument|constant|row)s\b")


def test_one_of_anything_is_singular(program_path, capsys):
    one_method, one_instruction = program_path("portable"), program_path("xnnpack")
    assert len(pte_lab.open(one_method).methods) == 1
    assert pte_lab.open(one_instruction).methods["forward"].n_instructions == 1  # the delegate call
    for path, said in ((one_method, "1 method"), (one_instruction, "1 instruction,")):
        pte = pte_lab.open(path)
        assert main(["inspect", str(path)]) == 0
        text = capsys.readouterr().out
        assert said in text
        for shown in (text, str(pte), pte._repr_html_(), *(repr(m) for m in pte.methods.values())):
            assert not PLURALS.search(shown), PLURALS.search(shown)


def test_the_peak_row_names_each_tensor(program_path, capsys):
    path = program_path("portable")
    m = pte_lab.open(path).methods["forward"]
    assert main(["inspect", str(path)]) == 0
    text = capsys.readouterr().out
    at = text.index("at the peak, ")
    block = text[at:].splitlines()
    occ = m.occupancy(1)
    t = int(occ.argmax()) - 1
    live = sorted((x for x in m.planned if x.mem_id == 1 and x.first is not None and x.first <= t <= x.last
                   and x.nbytes), key=lambda x: x.offset)
    assert block[0].startswith(f"at the peak, instruction {t} ({m.instructions[t].target}): {len(live)} tensors alive")
    assert block[1].split() == ["letter", "value", "dtype", "shape", "bytes", "offset", "written", "by"]
    for line, x in zip(block[3:], live):
        cells = line.split()
        assert cells[1] == f"v{x.value}" and cells[2] == x.dtype
        assert f"{list(x.shape)}" in line and f"{x.nbytes:,}" in cells and x.op in line


def test_many_delegated_methods_say_what_the_plan_leaves_out_once(program_path, capsys):
    """A program whose every method calls the same delegate (an LLM's many methods, say): the summary names
    the methods together and says the note once, not once per method."""
    import pte_lab
    from pte_lab.views.rows import delegate_heap_rows

    pte = pte_lab.open(program_path("xnnpack"))
    delegated = [n for n, m in pte.methods.items() if m.delegates]
    assert 2 <= len(delegated) <= 3
    ((names, note),) = delegate_heap_rows(pte)
    assert names == f"{', '.join(delegated)} ({len(delegated)} methods)"
    assert repr(pte).count(note) == 1


def test_a_file_name_that_is_not_utf8_is_shown_escaped():
    """A name's bytes that are not UTF-8 reach Python as lone surrogates, which no UTF-8 stream (a terminal,
    a C file) can write: shown escaped, as a control character is."""
    from pte_lab.printable import printable, printable_text

    assert printable("a\udcff.pte") == "a\\udcff.pte" and printable_text("a\udcff\nb") == "a\\udcff\nb"
    printable("a\udcff.pte").encode("utf-8")  # writable
