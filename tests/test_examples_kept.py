"""The example programs kept once per machine (pte_lab.examples_kept): keyed by what each export depends on,
reused, and never returned unless whole."""

from __future__ import annotations

import ast
import json
import os

import pytest

from pte_lab import examples, examples_kept
from pte_lab.examples_kept import key_in

SOURCE = examples_kept.SOURCE.read_text()
NAMES = sorted(examples.BUILDERS)


def _keys(source: str) -> dict[str, str]:
    return {n: key_in(source, n, {}) for n in NAMES}


def _function(source: str, name: str) -> ast.FunctionDef:
    return next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name)


def _add_line(source: str, function: str, line: str) -> str:
    """``source`` with ``line`` added at the end of ``function``'s body (the code, not a comment)."""
    node = _function(source, function)
    lines = source.splitlines(keepends=True)
    indent = " " * node.body[-1].col_offset
    end = node.body[-1].end_lineno
    return "".join(lines[:end] + [f"{indent}{line}\n"] + lines[end:])


def _changed(before: dict, after: dict) -> set[str]:
    return {n for n in before if before[n] != after[n]}


def test_editing_one_builder_changes_its_key_alone():
    before = _keys(SOURCE)
    assert len(set(before.values())) == len(NAMES)  # one key per builder
    assert _changed(before, _keys(_add_line(SOURCE, "odd", "edited = 1"))) == {"odd"}
    assert _changed(before, _keys(_add_line(SOURCE, "llm", "edited = 1"))) == {"llm"}


def test_a_builder_that_calls_another_is_keyed_by_both():
    calling = _add_line(SOURCE, "gpt", "odd()")  # gpt now calls the odd builder
    before = _keys(calling)
    assert _changed(before, _keys(_add_line(calling, "odd", "edited = 1"))) == {"odd", "gpt"}
    assert _changed(before, _keys(_add_line(calling, "gpt", "edited = 1"))) == {"gpt"}
    # a parameter named like a builder is not a call: three_methods' ``device``, llm's ``xnnpack``
    assert _changed(before, _keys(_add_line(calling, "device", "edited = 1"))) == {"device"}
    assert _changed(before, _keys(_add_line(calling, "xnnpack", "edited = 1"))) == {"xnnpack"}


@pytest.mark.parametrize("helper", ["_lower", "_modules", "_export", "_llm_weights", "save"])
def test_editing_shared_code_changes_every_key(helper):
    before = _keys(SOURCE)
    assert _changed(before, _keys(_add_line(SOURCE, helper, "edited = 1"))) == set(NAMES)


def test_a_shared_constant_changes_every_key():
    edited = SOURCE.replace('_RECORDS = ("etrecord.bin", "memory_profile.json")',
                            '_RECORDS = ("etrecord.bin", "memory_profile.json", "more")')
    assert edited != SOURCE
    assert _changed(_keys(SOURCE), _keys(edited)) == set(NAMES)


def test_words_and_a_new_builder_change_no_key():
    """Docstrings, comments and layout are not code; a new builder (its entry in BUILDERS and __all__, the
    module's docstring) exports nothing else again."""
    before = _keys(SOURCE)
    doc = ast.get_docstring(_function(SOURCE, "portable"))
    edited = SOURCE.replace(doc.splitlines()[0], "Another first line.", 1)
    edited = edited.replace("def _export(module, args, **kw):\n",
                            "def _export(module, args, **kw):  # a comment\n\n", 1)
    edited = edited.replace('"ethos_u": ethos_u,\n}', '"ethos_u": ethos_u,\n    "new_one": new_one,\n}')
    edited = edited.replace('"ethos_u_program", "key"', '"ethos_u_program", "new_one", "key"')
    edited = edited.replace('"""Example ExecuTorch programs', '"""Example ExecuTorch programs (and a new one)')
    edited += '\n\ndef new_one() -> bytes:\n    """New."""\n    return portable()\n'
    assert edited.count("new_one") == 4 and "a comment" in edited and "Another first line." in edited
    assert _keys(edited) == before
    assert key_in(edited, "new_one", {}) != before["portable"]
    assert _changed(before, {n: key_in(_add_line(edited, "portable", "edited = 1"), n, {}) for n in NAMES}) \
        == {"portable"}
    assert key_in(_add_line(edited, "portable", "edited = 1"), "new_one", {}) != key_in(edited, "new_one", {})


def test_the_arguments_and_versions_are_in_the_key(monkeypatch):
    k = examples.key("device")
    assert examples.key("device", side=64) == k  # the builder's default, said or not
    assert examples.key("device", side=64, backend="xnnpack") == k
    assert len({k, examples.key("device", side=32), examples.key("device", backend="demo"),
                examples.key("device", side=64, backend="demo", non_cpu_planning=False)}) == 4
    assert examples.key("llm", quantize="8da4w") != examples.key("llm") != examples.key("llm", records=True)
    with pytest.raises(TypeError, match="not JSON"):
        examples.key("device", side=object())
    with pytest.raises(ValueError, match="unknown example 'nope'"):
        examples.key("nope")
    monkeypatch.setattr(examples_kept, "dist_version", lambda dist: "9.9" if dist == "executorch" else "1.0")
    assert examples.key("device") != k


# ------------------------------------------------------------------ kept exports
@pytest.fixture
def counted(tmp_path, monkeypatch):
    """Exports kept in a folder of this test's, and a stand-in ``portable`` builder that counts its calls."""
    monkeypatch.setenv("PTE_LAB_CACHE_DIR", str(tmp_path / "cache"))
    calls = []

    def portable(**kwargs):
        calls.append(kwargs)
        return b"program " + json.dumps(kwargs, sort_keys=True).encode()

    monkeypatch.setitem(examples.BUILDERS, "portable", portable)
    return calls


def test_a_kept_export_is_reused(counted, tmp_path):
    assert os.environ.get("PTE_LAB_NO_CACHE") == "1"  # the measurements' switch (conftest): exports stay kept
    first = examples.kept_path("portable")
    assert examples.kept_path("portable") == first and counted == [{}]
    assert first.read_bytes() == b"program {}" and str(first).startswith(str(tmp_path / "cache" / "examples"))
    for out in ("a.pte", "b.pte"):
        assert examples.save("portable", tmp_path / out) == str(tmp_path / out)
        assert (tmp_path / out).read_bytes() == b"program {}"
    assert counted == [{}]  # copied from the kept export, twice
    examples.save("portable", tmp_path / "c.pte", alloc_graph_input=False)
    assert counted == [{}, {"alloc_graph_input": False}]  # other arguments, another export
    examples.save("portable", tmp_path / "d.pte", alloc_graph_input=False)
    assert len(counted) == 2
    assert examples_kept.summary()[0] == 2


def test_save_exports_afresh_when_asked(counted, tmp_path):
    examples.save("portable", tmp_path / "a.pte", cache=False)
    examples.save("portable", tmp_path / "a.pte", cache=False)
    assert len(counted) == 2 and not examples_kept.folder().exists()  # nothing kept
    examples.save("portable", tmp_path / "a.pte")
    examples.save("portable", tmp_path / "a.pte")
    assert len(counted) == 3


@pytest.mark.parametrize("damage", ["cut short", "changed", "no manifest", "manifest cut short", "missing"])
def test_a_damaged_export_is_never_returned(counted, damage):
    path = examples.kept_path("portable")
    manifest = path.parent / examples_kept.MANIFEST
    if damage == "cut short":
        path.write_bytes(path.read_bytes()[:-3])
    elif damage == "changed":
        path.write_bytes(path.read_bytes().replace(b"program", b"PROGRAM"))
    elif damage == "no manifest":  # a writer stopped before its last step
        manifest.unlink()
    elif damage == "manifest cut short":
        manifest.write_text(manifest.read_text()[:20])
    else:
        path.unlink()
    again = examples.kept_path("portable")
    assert again == path and again.read_bytes() == b"program {}" and len(counted) == 2
    assert examples.kept_path("portable") == path and len(counted) == 2


def test_a_failed_export_keeps_nothing(counted, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("the exporter failed")

    monkeypatch.setitem(examples.BUILDERS, "portable", broken)
    with pytest.raises(RuntimeError, match="the exporter failed"):
        examples.kept_path("portable")
    entries = examples_kept.folder() / "portable"
    assert not [p for p in entries.iterdir() if p.is_dir()]  # no entry, no temporary folder left
    assert examples_kept.summary() == (0, 0)


def test_what_save_writes_beside_the_program_is_kept_and_copied_beside(tmp_path, monkeypatch):
    """``llm``'s records (``<stem>.etrecord``...) follow the program's name; a ``.ptd`` keeps its own."""
    monkeypatch.setenv("PTE_LAB_CACHE_DIR", str(tmp_path / "cache"))

    def export(path):
        stem = os.path.splitext(path)[0]
        for name, text in ((path, "program"), (stem + ".etrecord", "etrecord"), (stem + ".memory_trace.json", "{}"),
                           (os.path.join(os.path.dirname(path), "weights.ptd"), "data")):
            with open(name, "w") as f:
                f.write(text)

    kept = examples_kept.kept("llm", {"records": True}, export)
    assert kept.name == "llm.pte"
    (tmp_path / "out").mkdir()
    written = examples_kept.copy_out(kept, str(tmp_path / "out" / "model.pte"), lambda p: None)
    assert sorted(os.path.basename(p) for p in written) == [
        "model.etrecord", "model.memory_trace.json", "model.pte", "weights.ptd"]
    assert (tmp_path / "out" / "weights.ptd").read_text() == "data"
    assert examples_kept.clear()[0] == 1 and not examples_kept.folder().exists()


def test_a_path_that_is_a_link_is_refused_before_any_export(counted, tmp_path):
    from pte_lab.errors import NotARegularFileError

    (tmp_path / "target.pte").write_bytes(b"")
    (tmp_path / "link.pte").symlink_to(tmp_path / "target.pte")
    with pytest.raises(NotARegularFileError, match="symbolic link"):
        examples.save("portable", tmp_path / "link.pte")
    assert counted == []
