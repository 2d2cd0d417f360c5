"""The API and command-line references (issue 50): the quick build (``-D pte_lab_notebooks=0``) from a clean tree
passes with every cross-reference resolved (``nitpicky``, set in docs/conf.py, under ``-W``), the API page gives
``pte_lab.open``'s parameters and the fields of the records the functions return, and the CLI page, read from
the parser, explains every option of every command. The quick build is ``quick_site`` (tests/conftest.py),
made once per session for this file and ``test_site.py``."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html)))


def _entry(html: str, anchor: str, chars: int = 60000) -> str:
    """The text of the entry whose id is ``anchor``, up to the next documented object (at most ``chars`` of
    HTML): however long its docstring grows, its sections are in it and the next entry's are not."""
    start = html.index(f'id="{anchor}"')
    end = html.find('<dl class="py ', start)
    return _text(html[start:min(start + chars, end if end != -1 else len(html))])


def test_the_configuration_fails_on_an_unresolved_reference():
    conf = (ROOT / "docs" / "conf.py").read_text()
    assert re.search(r"^nitpicky = True$", conf, re.M)
    assert "sphinx.ext.napoleon" in conf and "sphinx.ext.intersphinx" in conf
    for name in ("python", "numpy", "pandas", "matplotlib"):  # kept inventories: no network at build time
        assert (ROOT / "docs" / "_intersphinx" / f"{name}.inv").is_file()


def test_the_api_page_gives_open_parameters_and_the_records_fields(quick_site):
    html = (quick_site / "api.html").read_text(encoding="utf-8")
    opened = _entry(html, "pte_lab.open")
    assert "Parameters" in opened and "Returns" in opened and "Raises" in opened
    for param in ("source", "data", "etrecord"):
        assert re.search(rf"\b{param} \(", opened), f"open's parameter {param} is not listed"
    loaded = _entry(html, "pte_lab.load")
    assert "path (" in loaded and "data_path (" in loaded
    assert "source (" in _entry(html, "pte_lab.what_if")
    assert "Returns" in _entry(html, "pte_lab.diff")
    for record in ("WhatIf", "BoundUnderBudget", "UsageAt"):
        assert f'id="pte_lab.planning.at_bound.{record}"' in html, f"{record} is not documented"
    assert 'id="pte_lab.widgets.Explorer"' in html and 'id="pte_lab.model.diff.Diff"' in html
    from pte_lab.planning.at_bound import WhatIf

    fields = [f for f in WhatIf.__dataclass_fields__ if not f.startswith("_")]
    documented = [f for f in fields if f'id="pte_lab.planning.at_bound.WhatIf.{f}"' in html]
    assert documented == fields, f"WhatIf's fields not on the page: {sorted(set(fields) - set(documented))}"
    # a returned type links to its record, not to nothing
    assert 'href="#pte_lab.model.diff.Diff"' in html


def test_the_cli_page_explains_every_option_from_the_parser(quick_site):
    html = (quick_site / "cli.html").read_text(encoding="utf-8")
    from pte_lab.cli import build_parser

    parser = build_parser()
    for name, sub in parser.commands.items():
        for action in sub._actions:
            if not action.option_strings or action.help == "==SUPPRESS==" or "-h" in action.option_strings:
                continue
            anchor = f"cmdoption-pte-lab-{name}-{action.option_strings[0].lstrip('-')}"
            assert f'id="{anchor}"' in html, f"pte-lab {name} {action.option_strings[0]} is not on the page"
    region = _entry(html, "cmdoption-pte-lab-sizes-region", 1500)
    assert "A RAM region of the board" in region
    budget_on = _entry(html, "cmdoption-pte-lab-diff-budget-on", 1500)
    assert "--budget-on" in budget_on and len(budget_on) > 60
    assert "--verify" in _text(html)  # two hyphens, not a typographic dash
