"""The shape of the code: data flows one way, and each fact has one home.

bytes -> pte_lab.format -> pte_lab.model -> views (views, plot, widgets, cli);
runtime, planning, examples and experiments beside them. Checked on the
source with ``ast`` (every import, including those inside functions).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "pte_lab"

VIEWS = ("pte_lab.views", "pte_lab.plot", "pte_lab.widgets", "pte_lab.cli")
HEAVY = ("torch", "executorch", "matplotlib", "ipywidgets", "pandas")
REPR_HOOKS = {"__repr__", "_repr_html_", "to_dict"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path):
    """(imported module, enclosing function or None, names imported) for every import in the file."""
    mod = _module_name(path)
    package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(), str(path))
    out = []

    def visit(node, func):
        for child in ast.iter_child_nodes(node):
            f = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
            if isinstance(child, ast.Import):
                out.extend((a.name, func, ()) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[: len(base) - child.level + 1]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module
                out.append((target, func, tuple(a.name for a in child.names)))
            visit(child, f)

    visit(tree, None)
    return out


SOURCES = sorted(p for p in PKG.rglob("*.py"))
GRAPH = {_module_name(p): _imports(p) for p in SOURCES}
# pte_lab's own modules, so "from pte_lab import x" can tell a submodule from a package attribute
MODULES = set(GRAPH)


def _targets(imported: str, names) -> list[str]:
    """Module names an import statement brings in (``from pkg import sub`` counts as ``pkg.sub``)."""
    subs = [f"{imported}.{n}" for n in names if f"{imported}.{n}" in MODULES]
    return subs or [imported]


def _within(mod: str, prefixes) -> bool:
    return any(mod == p or mod.startswith(p + ".") for p in prefixes)


def test_the_graph_sees_every_module():
    assert "pte_lab.model.analysis" in GRAPH and "pte_lab.runtime.program" in GRAPH
    assert any(t == "pte_lab.views.html" and f == "_repr_html_" for t, f, _ in GRAPH["pte_lab.model.method"])


@pytest.mark.parametrize("layer", ["pte_lab.format", "pte_lab.runtime"])
def test_lower_layers_never_import_views_or_the_package(layer):
    bad = []
    for mod, imports in GRAPH.items():
        if not _within(mod, [layer]):
            continue
        for imported, func, names in imports:
            for t in _targets(imported, names):
                if _within(t, VIEWS) or t == "pte_lab":
                    bad.append(f"{mod} imports {t} (in {func or 'module scope'})")
    assert not bad, "\n".join(bad)


def test_format_reads_bytes_with_nothing_above_it():
    allowed = ("pte_lab.format", "pte_lab.errors", "pte_lab.devices")
    bad = []
    for mod, imports in GRAPH.items():
        if _within(mod, ["pte_lab.format"]):
            for imported, func, names in imports:
                for t in _targets(imported, names):
                    if (t.startswith("pte_lab") and not _within(t, allowed)) or _within(t, HEAVY):
                        bad.append(f"{mod} imports {t}")
    assert not bad, "\n".join(bad)


def test_model_reaches_views_only_through_its_repr_hooks():
    bad = []
    for mod, imports in GRAPH.items():
        if not _within(mod, ["pte_lab.model"]):
            continue
        for imported, func, names in imports:
            for t in _targets(imported, names):
                if _within(t, VIEWS) and func not in REPR_HOOKS:
                    bad.append(f"{mod} imports {t} in {func or 'module scope'}")
                if t == "pte_lab" or _within(t, ("pte_lab.runtime", "pte_lab.planning", "torch", "executorch")):
                    bad.append(f"{mod} imports {t}")
    assert not bad, "\n".join(bad)


def test_no_module_imports_the_top_level_package():
    bad = [f"{mod} imports pte_lab itself" for mod, imports in GRAPH.items() if mod != "pte_lab"
           for imported, _, names in imports if imported == "pte_lab" and _targets(imported, names) == ["pte_lab"]]
    assert not bad, "\n".join(bad)


def _definitions(name: str) -> list[str]:
    out = []
    for p in SOURCES:
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
                out.append(_module_name(p))
            targets = node.targets if isinstance(node, ast.Assign) else (
                [node.target] if isinstance(node, ast.AnnAssign) else [])
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                out.append(_module_name(p))
    return out


@pytest.mark.parametrize("name, home", [
    ("human_bytes", "pte_lab.units"), ("ratio", "pte_lab.units"), ("device_name", "pte_lab.devices"),
    ("parse_device", "pte_lab.devices"), ("DEVICE_TYPES", "pte_lab.devices"), ("cache_dir", "pte_lab.cache"),
    ("TENSOR_COLUMNS", "pte_lab.model.analysis"), ("LOAD_COST_COLUMNS", "pte_lab.model.load_cost"),
    ("Finding", "pte_lab.model.findings"), ("shared_arenas_message", "pte_lab.model.findings"),
    ("LedgerEvent", "pte_lab.runtime.native"), ("ledger_frame", "pte_lab.runtime.device"),
    ("ScalarType", "pte_lab.format.schema"), ("TensorShapeDynamism", "pte_lab.format.schema"),
    ("TensorDataLocation", "pte_lab.format.schema"), ("DataLocation", "pte_lab.format.schema"),
    ("TENSOR_ALIGNMENT", "pte_lab.format.schema"), ("runtime_index_of", "pte_lab.format.schema"),
    ("SCALAR_TYPES", "pte_lab.model.dtypes"),
    ("first_few", "pte_lab.units"), ("ARENA_ROW", "pte_lab.views.rows"), ("PLANNERS", "pte_lab.planning.algorithms"),
    ("REPLAN_TABLE", "pte_lab.planning.replan"), ("replan_text", "pte_lab.views.text"),
])
def test_each_fact_has_one_home(name, home):
    assert _definitions(name) == [home]


def _literal_homes(is_fact) -> set[str]:
    """Modules holding a dict/list/tuple/set literal for which ``is_fact(keys-or-items)`` holds."""
    out = set()
    for p in SOURCES:
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Dict):
                items = node.keys + node.values
            elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
                items = node.elts
            else:
                continue
            consts = {i.value for i in items if isinstance(i, ast.Constant)}
            if is_fact(consts):
                out.add(_module_name(p))
    return out


@pytest.mark.parametrize("what, is_fact, home", [
    ("device type codes", lambda c: {"cpu", "cuda"} <= c and 1 in c, "pte_lab.devices"),
    ("loader steps", lambda c: {"load_program", "load_method", "first_execute"} <= c, "pte_lab.model.load_cost"),
    ("tensor columns", lambda c: {"producer", "dynamic", "first", "last"} <= c, None),
    ("ledger fields", lambda c: {"device_type", "alignment", "time_ns"} <= c, None),
    ("planner names", lambda c: {"best_fit", "greedy", "naive"} <= c, "pte_lab.planning.algorithms"),
    ("arena columns", lambda c: {"mem_id", "runtime_index", "peak_bytes"} <= c, None),
])
def test_facts_are_written_once(what, is_fact, home):
    assert _literal_homes(is_fact) == ({home} if home else set()), what


def test_findings_are_made_in_one_module():
    makers = set()
    for p in SOURCES:
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Finding":
                makers.add(_module_name(p))
    assert makers == {"pte_lab.model.findings"}


def test_nothing_points_outside_the_repository():
    texts = [p for p in SOURCES] + sorted((ROOT / "notebooks").glob("*.ipynb")) + [
        ROOT / "benchmarks" / "RESULTS.md", ROOT / "README.md"]
    pattern = re.compile(r"shared/seed|\.\./shared|/work/|shared/docs")
    bad = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in texts for m in pattern.finditer(p.read_text())]
    assert not bad, "\n".join(bad)
