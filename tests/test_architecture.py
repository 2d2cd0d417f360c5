"""The shape of the code: data flows one way, and each fact has one home.

bytes -> pte_lab.format -> pte_lab.model -> views (views, plot, widgets, cli);
runtime, planning, examples and experiments beside them. Checked on the
source with ``ast`` (every import, including those inside functions).
The one accepted way for a lower layer (the model, the runtime) to reach a
view is a display hook of its record (``__repr__``, ``__str__``,
``_repr_html_``, ``to_dict``) handing the record to its view, lazily; the
runtime's results have their views in ``pte_lab.views.runtime``.

Imports sit at the top of their module, where a reader sees the graph. An
import inside a function is kept only for a heavy optional module
(``LAZY_MODULES``: torch, executorch, matplotlib, pandas...), for a pte_lab
module that imports one of those at its top, in a display hook, in the
fronts (``FRONTS``: ``pte_lab/__init__.py`` and the CLI import the layer a
function or command drives when it runs, so ``import pte_lab`` stays light),
or with a reason in ``LAZY_ALLOWED``.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "pte_lab"

VIEWS = ("pte_lab.views", "pte_lab.plot", "pte_lab.widgets", "pte_lab.cli")
HEAVY = ("torch", "executorch", "matplotlib", "ipywidgets", "pandas")
#: display hooks: they may import a view (a result's ``plot`` draws it, as ``DataFrame.plot`` does)
REPR_HOOKS = {"__repr__", "__str__", "_repr_html_", "to_dict", "plot"}
#: third-party modules an import inside a function may name: slow to import, or installed only with an extra
#: (``import pte_lab`` loads none of them, nor numpy, which the file readers import at their top)
LAZY_MODULES = HEAVY + ("torchao", "numpy", "IPython", "PIL", "tqdm", "filelock")
#: (module, imported module) -> why it is imported inside a function although it is neither heavy nor a hook
LAZY_ALLOWED = {
    ("pte_lab.runtime.sizing.measure", "resource"): "POSIX only: the function answers None where it is missing",
    **{(m, "importlib.metadata"): "the largest import of a worker's start (14 ms of its 75), asked once a process"
       for m in ("pte_lab.cache", "pte_lab.runtime.native")},
    ("pte_lab.arguments", "inspect"): "at a checked function's first call: ``import pte_lab`` stays light",
    ("pte_lab.planning", "pte_lab.planning.teaching"): "the lessons' helpers draw: plot loads when one is asked "
                                                       "for, not with the planners the CLI's parser lists",
    ("pte_lab.runtime.worker", "pte_lab.runtime.engine"): "after stdout goes to stderr: imports print no protocol",
    ("pte_lab.runtime.worker", "pte_lab.runtime.native_engine"): "after stdout goes to stderr, and only the engine "
                                                                 "asked for: the native one never imports torch",
    ("pte_lab.runtime.sizing_runner_records", "pte_lab.model.dtypes"): "the native worker makes these records and never "
                                                                 "imports the model: the caller reads the dtype's name",
    **{("pte_lab.runtime.sizing.records", m): "Sizes.verify runs the program: a kept sizing, these records read "
                                                "back, loads none of the measuring machinery"
       for m in ("pte_lab.runtime.checked", "pte_lab.runtime.sizing.measure")},
    ("pte_lab.examples", "pte_lab.format.regular_file"): "pte-lab --help lists the examples: the format package "
                                                         "(its reader, flatbuffers) loads when a program is written",
    ("pte_lab.data.ethos_u.export", "pte_lab.examples"): "a script: pte_lab imports once its checkout is on sys.path",
    ("pte_lab.data.ethos_u.export", "pte_lab.quiet"): "a script: pte_lab imports once its checkout is on sys.path",
    # examples.py's bytes key the tests' cache of exported programs (tests/conftest.py ``_key``): moving its
    # imports would re-export every program (the LLMs take minutes); they move when it next changes
    **{("pte_lab.examples", m): "its bytes key the exported-program cache" for m in (
        "warnings", "json", "subprocess", "sys", "tempfile", "importlib.util", "contextlib", "io",
        "pte_lab.errors", "pte_lab.quiet")},
}
#: the fronts, which nothing else in pte_lab imports: a package function or a command imports the layer it drives
#: when called, so that ``import pte_lab`` and ``pte-lab --help`` or ``inspect`` load only what they use; the CLI
#: is a package of fronts, one module per command (``pte_lab.cli.*``)
FRONTS = ("pte_lab", "pte_lab.cli", "pte_lab.cli.*")
#: the "function" an import under ``if TYPE_CHECKING:`` is recorded in
TYPE_ONLY = "TYPE_CHECKING"


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
            if isinstance(child, ast.If) and getattr(child.test, "id", None) == TYPE_ONLY:
                f = TYPE_ONLY  # imports for annotations only: never executed
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


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A source file's syntax tree, parsed once for every test that walks it."""
    return ast.parse(path.read_text(), str(path))
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
    assert "pte_lab.model.analysis" in GRAPH and "pte_lab.runtime.loaded" in GRAPH
    assert any(t == "pte_lab.views.html" and f == "_repr_html_" for t, f, _ in GRAPH["pte_lab.model.method"])


@pytest.mark.parametrize("layer, hooks", [("pte_lab.format", set()), ("pte_lab.runtime", REPR_HOOKS)])
def test_lower_layers_never_import_views_or_the_package(layer, hooks):
    """Not at module scope, not inside a function: the runtime never imports a view. The one accepted
    pattern is a display hook (``__repr__``, ``__str__``, ``_repr_html_``, ``to_dict``) of a runtime record
    that hands the record to its view, lazily, as the model's records do."""
    bad = []
    for mod, imports in GRAPH.items():
        if not _within(mod, [layer]):
            continue
        for imported, func, names in imports:
            for t in _targets(imported, names):
                if (_within(t, VIEWS) and func not in hooks) or t == "pte_lab":
                    bad.append(f"{mod} imports {t} (in {func or 'module scope'})")
    assert not bad, "\n".join(bad)


def _edges() -> dict[str, set[str]]:
    """pte_lab module -> the pte_lab modules it imports when it runs (module scope and inside functions),
    but in the repr hooks through which lower layers reach their views (annotation-only imports under
    ``TYPE_CHECKING`` never run)."""
    out: dict[str, set[str]] = {m: set() for m in GRAPH}
    for mod, imports in GRAPH.items():
        for imported, func, names in imports:
            if func in REPR_HOOKS or func == TYPE_ONLY:
                continue
            out[mod].update(t for t in _targets(imported, names) if t in MODULES and t != mod)
    return out


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_import_graph_has_no_cycles():
    """Every import counts, those inside functions too: a back edge hidden in a function is still a cycle."""
    assert not _cycles(_edges()), _cycles(_edges())


def test_the_cycle_check_sees_a_cycle_through_a_function_level_import():
    edges = _edges()
    edges["pte_lab.runtime.native"] = edges["pte_lab.runtime.native"] | {"pte_lab.runtime.sizing.results"}
    assert any({"pte_lab.runtime.native", "pte_lab.runtime.sizing.results"} <= set(c) for c in _cycles(edges))


#: the runtime's tiers, top down: its fronts start from a checked program and reach ExecuTorch through an
#: engine (in this process or a worker; the native engine, which never imports ExecuTorch's Python package, under
#: the Python runtime's), which drives the native runner, the device and the counters
RUNTIME_TIERS = [
    {"pte_lab.runtime", "pte_lab.runtime.loaded", "pte_lab.runtime.sizing", "pte_lab.runtime.run_all"},
    {"pte_lab.runtime.sizing.results"},
    {"pte_lab.runtime.sizing.kept_sizes", "pte_lab.runtime.sizing.target"},
    {"pte_lab.runtime.sizing.records"},
    {"pte_lab.runtime.sizing.measure"},
    {"pte_lab.runtime.checked", "pte_lab.runtime.isolate", "pte_lab.runtime.worker"},
    {"pte_lab.runtime.engine"},
    {"pte_lab.runtime.native_engine"},
    {"pte_lab.runtime.sizing_runner", "pte_lab.runtime.device", "pte_lab.runtime.memory", "pte_lab.runtime.native",
     "pte_lab.runtime.operators", "pte_lab.runtime.info", "pte_lab.runtime.inputs", "pte_lab.runtime._protocol",
     "pte_lab.runtime.schemas", "pte_lab.runtime.stand_ins", "pte_lab.runtime.declared",
     "pte_lab.runtime.libraries", "pte_lab.runtime.raw", "pte_lab.runtime.abi_probe",
     "pte_lab.runtime.shapes", "pte_lab.runtime.kept", "pte_lab.runtime.recorder", "pte_lab.runtime.sizing_runner_records"},
]


def test_every_runtime_module_has_a_tier():
    tiered = set().union(*RUNTIME_TIERS)
    assert {m for m in GRAPH if _within(m, ["pte_lab.runtime"])} == tiered


def test_the_runtime_imports_only_downward():
    tier = {m: k for k, mods in enumerate(RUNTIME_TIERS) for m in mods}
    edges = _edges()
    bad = [f"{m} (tier {tier[m]}) imports {t} (tier {tier[t]})"
           for m in tier for t in edges[m] if t in tier and tier[t] < tier[m]]
    assert not bad, "\n".join(bad)


def test_format_reads_bytes_with_nothing_above_it():
    # beside the errors, the leaves of the standard library only: device names, how a name from a file is shown
    # (a record from the file holds it shown so: pte_lab.format.etrecord), the few words a message uses, how
    # the package loads its names when first used (importlib alone), and the identifiers' enums (vocabulary)
    allowed = ("pte_lab.format", "pte_lab.errors", "pte_lab.devices", "pte_lab.printable", "pte_lab.units",
               "pte_lab.lazy_names", "pte_lab.vocabulary")
    bad = []
    for mod, imports in GRAPH.items():
        if _within(mod, ["pte_lab.format"]):
            for imported, _func, names in imports:
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
        for node in ast.walk(_tree(p)):
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
    ("Finding", "pte_lab.model.findings.base"), ("shared_arenas_message", "pte_lab.model.findings.state"),
    ("Kind", "pte_lab.model.findings.base"), ("SharedState", "pte_lab.model.findings.state"),
    ("LayoutRow", "pte_lab.model.layout"), ("MemoryMode", "pte_lab.model.ethos_u"),
    ("MEMORY_MODES", "pte_lab.model.ethos_u"), ("DelegateMemory", "pte_lab.model.ethos_u"),
    ("BlobUse", "pte_lab.model.delegates"), ("BLOB_CHECKS", "pte_lab.model.delegates"),
    ("Backend", "pte_lab.model.backends"), ("registration", "pte_lab.model.backends"),
    ("text_table", "pte_lab.views.base"), ("indented", "pte_lab.views.text"),
    ("LedgerEvent", "pte_lab.runtime.native"), ("ledger_frame", "pte_lab.runtime.device"),
    ("error_name", "pte_lab.errors"), ("PARTS", "pte_lab.runtime.sizing.records"),
    ("MemoryPart", "pte_lab.vocabulary"), ("Pool", "pte_lab.vocabulary"),
    ("PoolVerification", "pte_lab.runtime.sizing.records"), ("counts_fields", "pte_lab.runtime.native"),
    ("verdict", "pte_lab.views.runtime.sizes"), ("Checked", "pte_lab.runtime.checked"),
    ("ScalarType", "pte_lab.format.schema"), ("TensorShapeDynamism", "pte_lab.format.schema"),
    ("TensorDataLocation", "pte_lab.format.schema"), ("DataLocation", "pte_lab.format.schema"),
    ("TENSOR_ALIGNMENT", "pte_lab.format.schema"), ("runtime_index_of", "pte_lab.format.schema"),
    ("SCALAR_TYPES", "pte_lab.model.dtypes"),
    ("first_few", "pte_lab.units"), ("ARENA_ROW", "pte_lab.views.rows"), ("PLANNERS", "pte_lab.planning.algorithms"),
    ("printable", "pte_lab.printable"), ("printable_text", "pte_lab.printable"), ("bug_line", "pte_lab.errors"),
    ("PLAIN_DTYPES", "pte_lab.model.bundled"),
    ("REPLAN_TABLE", "pte_lab.planning.replan"), ("replan_text", "pte_lab.views.text"),
])
def test_each_fact_has_one_home(name, home):
    assert _definitions(name) == [home]


@functools.cache
def _tree(p: Path) -> ast.AST:
    return ast.parse(p.read_text(), str(p))


def test_executorch_version_is_read_in_one_function():
    """One function says which executorch is installed (cached; "unknown" where it is not)."""
    homes = [_module_name(p) for p in SOURCES for node in ast.walk(_tree(p))
             if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "executorch_version"]
    assert homes == ["pte_lab.runtime.native"]


def _calls(attr: str) -> set[str]:
    """Modules calling a function or method named ``attr``."""
    return {_module_name(p) for p in SOURCES for node in ast.walk(_tree(p))
            if isinstance(node, ast.Call) and attr in (getattr(node.func, "attr", None), getattr(node.func, "id", None))}


def test_a_diff_is_sized_in_one_place():
    """``pte_lab.diff(sizes=True)`` and ``pte-lab diff --sizes`` size both programs through one function."""
    assert _calls("with_sizes") == {"pte_lab.runtime.sizing.results"}
    assert {"pte_lab", "pte_lab.cli.diff"} <= _calls("sized_diff")


def _string_constants(mod_prefix: str):
    """(module, the string) for every string constant (f-strings' literal parts too) under ``mod_prefix``."""
    for p in SOURCES:
        mod = _module_name(p)
        if _within(mod, [mod_prefix]):
            for node in ast.walk(_tree(p)):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    yield mod, node.value


def test_the_temp_probe_is_decided_in_one_file_and_worded_in_one_view():
    """A temp pool one byte short is a :class:`TempProbe` (an outcome and its detail), decided in the sizing's
    results; its words ("refused: ...", "silent: ...") are written in one view and parsed nowhere."""
    worded = {mod for mod, text in _string_constants("pte_lab") if text.startswith(("refused:", "silent:"))}
    assert worded == {"pte_lab.views.runtime.sizes"}
    assert _definitions("TempShort") == ["pte_lab.runtime.sizing.records"]
    parsed = [f"{_module_name(p)}:{node.lineno}" for p in SOURCES for node in ast.walk(_tree(p))
              if isinstance(node, ast.Call) and getattr(node.func, "attr", None) in ("startswith", "endswith")
              and node.args and isinstance(node.args[0], ast.Constant)
              and node.args[0].value in ("refused", "silent", "ran", "execute", "first_execute")]
    assert not parsed, parsed


def _function(mod: str, qualname: str) -> ast.FunctionDef:
    path = ROOT / (mod.replace(".", "/") + ".py")
    if not path.exists():
        path = ROOT / mod.replace(".", "/") / "__init__.py"
    node = ast.parse(path.read_text())
    for part in qualname.split("."):
        node = next(n for n in node.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == part)
    return node


@pytest.mark.parametrize("mod, qualname, record", [
    ("pte_lab.runtime.engine", "Engine._measured", "StepMeasure"),
    ("pte_lab.runtime.engine", "Engine.load_program", "StepMeasure"),
    ("pte_lab.runtime.engine", "Engine.release", "StepMeasure"),
    ("pte_lab.runtime.operators", "provide", "Provision"),
    ("pte_lab.runtime.engine", "Engine.provide_operators", "Provision"),
    ("pte_lab.runtime.native_engine", "NativeEngine.provide_operators", "Provision"),
])
def test_the_runtime_hands_records_across_the_worker_boundary(mod, qualname, record):
    """What a step measured and what registering operators did cross the worker's pipe as frozen records,
    never as dicts with string keys for the caller to ``.get``."""
    fn = _function(mod, qualname)
    assert record in ast.unparse(fn.returns), f"{qualname} returns {ast.unparse(fn.returns)}"
    returned = [n.value for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None]
    assert not any(isinstance(v, ast.Dict) for v in returned), qualname
    keyed = [f"{_module_name(p)}:{node.lineno}" for p in SOURCES if _within(_module_name(p), ["pte_lab.runtime"])
             for node in ast.walk(_tree(p))
             if (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                 and node.slice.value in ("missing", "loaded"))
             or (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "get" and node.args
                 and isinstance(node.args[0], ast.Constant) and node.args[0].value in ("bytes", "how", "seconds"))]
    assert not keyed, keyed


@pytest.mark.parametrize("mod, qualname, positional", [
    ("pte_lab.runtime.sizing.measure", "Session.run", ["self", "name"]),
    ("pte_lab.runtime.sizing.measure", "Session.trial", ["self", "name"]),
    ("pte_lab.runtime.sizing.results", "_method_sizes", ["measured"]),
    ("pte_lab.runtime.sizing.results", "_heap_round", ["path", "data_path"]),
    ("pte_lab.runtime.sizing_runner", "run_method", ["path", "name"]),
    ("pte_lab.runtime.native_engine", "NativeOps.size_method", ["self", "path", "name"]),
])
def test_sizing_calls_name_their_pools(mod, qualname, positional):
    """``session.run(n, None, None, 4096, runs)`` said nothing of which pool is which: these take keywords."""
    args = _function(mod, qualname).args
    assert [a.arg for a in args.posonlyargs + args.args] == positional


def test_a_session_learns_what_the_process_allocates_once_in_one_state():
    """One attribute (:class:`~pte_lab.runtime.sizing.measure.OnceHeap`, None until measured), not three flags."""
    flags = [f"{_module_name(p)}:{node.lineno}" for p in SOURCES for node in ast.walk(_tree(p))
             if isinstance(node, ast.Attribute) and node.attr in ("once_seen", "once_tried")]
    assert not flags, flags


def test_views_of_the_model_never_import_the_runtime():
    """The runtime's results have their views in :mod:`pte_lab.views.runtime`; the rest of ``pte_lab.views`` renders
    the file's model only."""
    bad = [f"{mod} imports {t}" for mod, imports in GRAPH.items()
           if _within(mod, ["pte_lab.views"]) and not _within(mod, ["pte_lab.views.runtime"])
           for imported, _, names in imports for t in _targets(imported, names) if _within(t, ["pte_lab.runtime"])]
    assert not bad, "\n".join(bad)


def _literal_homes(is_fact) -> set[str]:
    """Modules holding a dict/list/tuple/set literal for which ``is_fact(keys-or-items)`` holds."""
    out = set()
    for p in SOURCES:
        for node in ast.walk(_tree(p)):
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
    # the parts' one home is the MemoryPart enum (pte_lab.vocabulary; test_each_fact_has_one_home): no literal list
    ("run-time parts", lambda c: {"planned arenas", "method allocator", "temp allocator"} <= c, None),
    ("counter fields", lambda c: {"heap_live", "anon_mapped"} <= c, None),
    ("planner names", lambda c: {"best_fit", "greedy", "naive"} <= c, "pte_lab.vocabulary"),
    ("arena columns", lambda c: {"mem_id", "runtime_index", "peak_bytes"} <= c, None),
])
def test_facts_are_written_once(what, is_fact, home):
    assert _literal_homes(is_fact) == ({home} if home else set()), what


def test_the_tensor_alignment_is_named_not_written_16():
    """Rounding to exir's 16 bytes uses format.TENSOR_ALIGNMENT (plot's arena padding once wrote ``// 16``)."""
    bad = [f"{_module_name(p)}:{node.lineno}" for p in SOURCES for node in ast.walk(_tree(p))
           if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.FloorDiv, ast.Mod))
           and isinstance(node.right, ast.Constant) and node.right.value == 16]
    assert not bad, bad


#: the findings package: one module per subject, each rule beside its wording and its kinds' records
FINDINGS_SUBJECTS = {"plan", "devices", "delegates", "file", "state"}


def _finding_calls():
    """(module, the Finding(...) call) for every finding pte_lab makes."""
    for p in SOURCES:
        for node in ast.walk(_tree(p)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Finding":
                yield _module_name(p), node


def test_findings_are_made_in_the_findings_package_one_subject_per_module():
    makers = {mod for mod, _ in _finding_calls()}
    assert makers == {f"pte_lab.model.findings.{s}" for s in FINDINGS_SUBJECTS}
    package = PKG / "model" / "findings"
    assert package.is_dir() and not (PKG / "model" / "findings.py").exists()
    assert {p.stem for p in package.glob("*.py")} == FINDINGS_SUBJECTS | {"__init__", "base"}


def test_each_kind_is_made_in_one_subject_and_carries_a_record_not_a_dict():
    from pte_lab.model.findings import Kind

    homes: dict[str, set[str]] = {}
    bad = []
    for mod, call in _finding_calls():
        kind = call.args[0] if call.args else next(k.value for k in call.keywords if k.arg == "kind")
        homes.setdefault(getattr(kind, "attr", "?"), set()).add(mod)
        details = call.args[3] if len(call.args) > 3 else next(
            (k.value for k in call.keywords if k.arg == "details"), None)
        if isinstance(details, (ast.Dict, ast.DictComp)) or (
                isinstance(details, ast.Call) and getattr(details.func, "id", None) == "dict"):
            bad.append(f"{mod}: a {kind.attr} finding carries a dict")
    assert not bad, "\n".join(bad)
    assert set(homes) == {k.name for k in Kind}, "every kind is made somewhere"
    assert {k: m for k, m in homes.items() if len(m) > 1} == {}


def _source_texts():
    return [*SOURCES, *sorted((ROOT / "tests").glob("*.py")), *sorted((ROOT / "notebooks").glob("*.ipynb")),
            *sorted((ROOT / "benchmarks").glob("*.py"))]


@pytest.mark.parametrize("what, pattern", [
    ("a finding's details read as a dict", r"\.details\[|\.details\.get\(|\.details\.items\("),
    ("a backend split out of a display name", r"\bblob_group\b|split\(\" blob\""),
    ("a memory mode's prose split", r"fast\.split\(|places\[\d\]|\.places\b.*\.split\("),
    ("a private text helper imported by the CLI", r"from \.views\.text import[^\n]*\b_(table|indent)\b"),
])
def test_string_protocols_stay_records(what, pattern):
    rx = re.compile(pattern)
    bad = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in _source_texts() if p.name != "test_architecture.py"
           for m in rx.finditer(p.read_text())]
    assert not bad, what + ":\n" + "\n".join(bad)


def test_layout_rows_and_memory_modes_are_records():
    """Rows of the file's layout carry their backend, memory modes where each part lives: read by name."""
    import dataclasses

    from pte_lab.model.ethos_u import MEMORY_MODES, MemoryMode
    from pte_lab.model.layout import LAYOUT_COLUMNS, LayoutRow

    # not a tuple, not iterable: a read by position or an unpacking fails wherever it is left
    assert not issubclass(LayoutRow, tuple) and not hasattr(LayoutRow, "__iter__")
    assert dataclasses.is_dataclass(LayoutRow) and not hasattr(LayoutRow, "__getitem__")
    assert [f.name for f in dataclasses.fields(LayoutRow)] == [*LAYOUT_COLUMNS, "backend"]
    assert all(isinstance(m, MemoryMode) and m.name == k for k, m in MEMORY_MODES.items())
    # only the Ethos-U memory module reads the modes' places as a tuple
    readers = {_module_name(p) for p in SOURCES for node in ast.walk(_tree(p))
               if isinstance(node, ast.Attribute) and node.attr == "places"}
    assert readers <= {"pte_lab.model.ethos_u"}, readers


def test_views_are_given_the_layout_and_findings_they_render():
    body = _function("pte_lab.views.text", "layout_text")
    called = {getattr(n.func, "id", getattr(n.func, "attr", None)) for n in ast.walk(body) if isinstance(n, ast.Call)}
    assert not [n for n in ast.walk(body) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not called & {"file_layout", "file_regions", "duplicate_blob_findings", "layout", "duplicate_blobs", "warnings"}


def test_planners_pass_records_not_string_keyed_dicts():
    tree = ast.parse((PKG / "planning" / "algorithms.py").read_text())
    keyed = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Subscript)
             and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str) and not
             (isinstance(n.value, ast.Name) and n.value.id.isupper())]  # ORDERS["largest first"]: a table
    assert not keyed, keyed
    assert not [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Dict)
                and any(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in n.keys)
                and not any(isinstance(v, ast.Lambda) or isinstance(v, ast.Name) for v in n.values)]


#: JSON read by hand in C or C++: a search for a quoted key (``find("\"" + key``), a scan for a value's end
#: (``find_first_of(",}")``) or a walk over braces (a character compared with ``'{'`` or ``'}'``). The native
#: code writes JSON; what its processes say to each other is a line protocol (native/placement_lines.h)
JSON_READING = re.compile(r"""find(?:_first_of)?\(\s*"\\"|find_first_of\(\s*",\s*}"|[=!]=\s*'[{}]'|'[{}]'\s*[=!]=""")


def _json_reading(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if JSON_READING.search(line)]


def test_no_native_source_reads_json_by_hand():
    native = PKG / "runtime" / "native"
    bad = [f"{p.name}: {line}" for p in sorted(native.iterdir()) if p.suffix in (".c", ".cpp", ".h")
           for line in _json_reading(p.read_text())]
    assert not bad, "\n".join(bad)


def test_the_json_check_sees_the_reader_the_line_protocol_replaced():
    old = ('  size_t at = obj.find("\\"" + key + "\\": ");\n'
           '  size_t end = obj.find_first_of(",}", at);\n'
           "  while (at < runtime.size() && runtime[at] == '{') {\n"
           "    } else if (s[i] == '}') {\n")
    assert len(_json_reading(old)) == 4


def test_nothing_points_outside_the_repository():
    texts = [p for p in SOURCES] + sorted((ROOT / "notebooks").glob("*.ipynb")) + [
        ROOT / "benchmarks" / "RESULTS.md", ROOT / "README.md"]
    pattern = re.compile(r"shared/seed|\.\./shared|/work/|shared/docs")
    bad = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in texts for m in pattern.finditer(p.read_text())]
    assert not bad, "\n".join(bad)


def _heavy_at_import() -> set[str]:
    """pte_lab modules that import a heavy module (not numpy) at their top, themselves or through another."""
    heavy = tuple(m for m in LAZY_MODULES if m != "numpy")
    found: set[str] = set()
    changed = True
    while changed:
        changed = False
        for mod, imports in GRAPH.items():
            parents = {".".join(mod.split(".")[:i]) for i in range(1, mod.count(".") + 1)}
            if mod in found:
                continue
            targets = {t for imported, func, names in imports if func is None for t in _targets(imported, names)}
            if any(_within(t, heavy) or t in found for t in targets | parents):
                found.add(mod)
                changed = True
    return found


def _is_front(mod: str) -> bool:
    return any(mod == f or (f.endswith(".*") and mod.startswith(f[:-1])) for f in FRONTS)


def test_nothing_but_a_front_imports_a_front():
    bad = [f"{mod} imports {t}" for mod, targets in _edges().items() if not _is_front(mod)
           for t in targets if _is_front(t)]
    assert not bad, "\n".join(bad)


def _hidden_imports() -> list[str]:
    heavy_here = _heavy_at_import()
    bad = []
    for mod, imports in GRAPH.items():
        for imported, func, names in imports:
            if func is None or func == TYPE_ONLY or func in REPR_HOOKS:
                continue
            targets = _targets(imported, names)
            if all(_within(t, LAZY_MODULES) or t in heavy_here or (mod, t) in LAZY_ALLOWED
                   or (_is_front(mod) and _within(t, ["pte_lab"])) for t in targets):
                continue
            bad.append(f"{mod}: {func}() imports {imported}")
    return bad


def test_imports_inside_functions_are_only_heavy_modules_or_display_hooks():
    """Anything else moves to the module's top: an import hidden in a function hides the real graph."""
    bad = _hidden_imports()
    assert not bad, "\n".join(bad)


def test_the_hidden_import_check_sees_a_light_import_in_a_function(monkeypatch):
    monkeypatch.setitem(GRAPH, "pte_lab.model.pte", GRAPH["pte_lab.model.pte"] + [("json", "load_cost", ())])
    monkeypatch.setitem(GRAPH, "pte_lab.cli", GRAPH["pte_lab.cli"] + [("pte_lab.model", "_sizes", ("open_pte",)),
                                                                      ("shutil", "_sizes", ())])
    monkeypatch.setitem(GRAPH, "pte_lab.views.text", GRAPH["pte_lab.views.text"] + [
        ("pte_lab.model", "pte_text", ("open_pte",))])
    assert _hidden_imports() == ["pte_lab.cli: _sizes() imports shutil",
                                 "pte_lab.model.pte: load_cost() imports json",
                                 "pte_lab.views.text: pte_text() imports pte_lab.model"]
    assert "pte_lab.widgets" in _heavy_at_import()  # ipywidgets at its top: importing it in a function is lazy


# ------------------------------------------------------------------ each fact's home, and names as types (issue 47)
def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_imports(graph) -> list[str]:
    """Imports of a private name (``_x``) from another pte_lab module, and of a private module (``_flat``) from
    outside its package. ruff's PLC2701 does not look inside one package: this holds pte_lab's own names."""
    bad = []
    for mod, imports in graph.items():
        for imported, _func, names in imports:
            if not _within(imported or "", ["pte_lab"]):
                continue
            if imported != mod:
                bad += [f"{mod} imports {imported}.{n}" for n in names if _private(n)]
            for t in _targets(imported, names):
                parts = t.split(".")
                k = next((i for i, p in enumerate(parts) if _private(p)), None)
                if k is not None and not _within(mod, [".".join(parts[:k])]):
                    bad.append(f"{mod} imports the private module {t}")
    return sorted(bad)


def test_no_private_name_is_imported_across_modules():
    """A name another module needs is public (no underscore) in its one home; a private module is its package's."""
    bad = _private_imports(GRAPH)
    assert not bad, "\n".join(bad)


def test_the_private_import_check_sees_a_private_name_and_a_private_module(monkeypatch):
    monkeypatch.setitem(GRAPH, "pte_lab.views.diff", GRAPH["pte_lab.views.diff"] + [
        ("pte_lab.views.html", None, ("_section", "html_repr"))])
    monkeypatch.setitem(GRAPH, "pte_lab.model.pte", GRAPH["pte_lab.model.pte"] + [
        ("pte_lab.format._flat", None, ("root_table",))])
    assert _private_imports(GRAPH) == ["pte_lab.model.pte imports the private module pte_lab.format._flat",
                                       "pte_lab.views.diff imports pte_lab.views.html._section"]


def _rounding_up(node: ast.AST) -> bool:
    """``-(-x // a) * a``, ``(x + a - 1) // a * a`` (either order of the product) or ``x & ~(a - 1)``: a size
    rounded up to an alignment, written by hand."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd):
        mask = node.right
        return (isinstance(mask, ast.UnaryOp) and isinstance(mask.op, ast.Invert) and isinstance(mask.operand, ast.BinOp)
                and isinstance(mask.operand.op, ast.Sub) and ast.dump(mask.operand.right) == ast.dump(ast.Constant(1)))
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)):
        return False
    for div, factor in ((node.left, node.right), (node.right, node.left)):
        if isinstance(div, ast.UnaryOp) and isinstance(div.op, ast.USub):
            div = div.operand
            if not (isinstance(div, ast.BinOp) and isinstance(div.op, ast.FloorDiv)
                    and isinstance(div.left, ast.UnaryOp) and isinstance(div.left.op, ast.USub)):
                continue
        elif not (isinstance(div, ast.BinOp) and isinstance(div.op, ast.FloorDiv)
                  and isinstance(div.left, ast.BinOp) and isinstance(div.left.op, (ast.Add, ast.Sub))):
            continue
        if isinstance(div, ast.BinOp) and isinstance(div.op, ast.FloorDiv) and ast.dump(div.right) == ast.dump(factor):
            return True
    return False


def _hand_rounding(sources) -> list[str]:
    return [f"{_module_name(p)}:{node.lineno}" for p in sources for node in ast.walk(_tree(p))
            if _rounding_up(node) and _module_name(p) != "pte_lab.units"]


def test_rounding_up_to_an_alignment_is_written_once():
    """``pte_lab.units.align_up`` rounds up to an alignment (ints and numpy arrays); it was written by hand in
    seven modules."""
    bad = _hand_rounding(SOURCES)
    assert not bad, bad


def test_the_rounding_check_sees_each_hand_written_form(tmp_path):
    forms = ["-(-n // a) * a", "a * -(-n // a)", "(n + a - 1) // a * a", "(n + (a - 1)) // a * a", "n & ~(a - 1)"]
    fine = ["-(-n // a)", "n // a * a", "(n + a - 1) // a * b", "x & ~mask"]
    for k, text in enumerate(forms + fine):
        (tmp_path / f"m{k}.py").write_text(f"x = {text}\n")
    found = {int(Path(p).stem[1:]) for p in tmp_path.glob("*.py") if any(map(_rounding_up, ast.walk(ast.parse(p.read_text()))))}
    assert found == set(range(len(forms)))


@pytest.mark.parametrize("name, home", [
    ("align_up", "pte_lab.units"), ("Role", "pte_lab.vocabulary"), ("RUNTIME_OPS", "pte_lab.vocabulary"),
    ("Mallinfo2", "pte_lab.mallinfo"), ("GRAPH_IDENTIFIERS", "pte_lab.format.xnnpack"),
])
def test_each_shared_helper_has_one_home_under_any_spelling(name, home):
    """Defined in one module, public or private (``_RUNTIME_OPS`` was written twice; ``align_up``'s overloads
    are one definition)."""
    assert set(_definitions(name) + _definitions("_" + name)) == {home}


_ROLE_WORDS = frozenset(("input", "output", "input_output", "intermediate", "mutable_buffer", "view", "unused"))


def _names_a_role(node: ast.AST) -> bool:
    """``t.role``, ``role``, ``g.roles``, ``cols["role"]``, ``role[i]``, ``(a.role, b.role)``."""
    if isinstance(node, ast.Tuple):
        return bool(node.elts) and all(map(_names_a_role, node.elts))
    if isinstance(node, ast.Subscript):
        key = node.slice
        return (isinstance(key, ast.Constant) and key.value == "role") or _names_a_role(node.value)
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
    return name in ("role", "roles")


def _role_word(node: ast.AST) -> bool:
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(map(_role_word, node.elts))
    return isinstance(node, ast.Constant) and node.value in _ROLE_WORDS


def _role_literals(sources) -> list[str]:
    bad = []
    for p in sources:
        for node in ast.walk(_tree(p)):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(map(_names_a_role, sides)) and any(map(_role_word, sides)):
                    bad.append(f"{_module_name(p)}:{node.lineno}")
    return bad


def test_roles_are_compared_with_role_members_not_words():
    """``t.role == Role.VIEW``, never ``t.role == "view"``: a misspelt word compares unequal without a sound."""
    bad = _role_literals(SOURCES)
    assert not bad, bad


def test_the_role_check_sees_a_word(tmp_path):
    forms = ['t.role != "view"', '"mutable_buffer" in g.roles', 'x.role in ("input", "input_output")',
             'c["role"] == "mutable_buffer"', '"mutable_buffer" not in (a.role, b.role)']
    fine = ['t.role != Role.VIEW', 't.kind == "view"', 'color_by == "role"']
    for k, text in enumerate(forms + fine):
        (tmp_path / f"m{k}.py").write_text(f"x = {text}\n")
    found = set()
    for p in tmp_path.glob("*.py"):
        tree = ast.parse(p.read_text())
        if any(isinstance(n, ast.Compare) and any(map(_names_a_role, [n.left, *n.comparators]))
               and any(map(_role_word, [n.left, *n.comparators])) for n in ast.walk(tree)):
            found.add(int(p.stem[1:]))
    assert found == set(range(len(forms)))


def _names_a_kind(node: ast.AST) -> bool:
    """``ins.kind``, ``exc.kind``, ``rec["kind"]``, ``kinds[i]``, ``(a.kind, b.kind)``; not numpy's
    ``a.dtype.kind`` (a one-letter type code, not one of ours)."""
    if isinstance(node, ast.Tuple):
        return bool(node.elts) and all(map(_names_a_kind, node.elts))
    if isinstance(node, ast.Subscript):
        key = node.slice
        return (isinstance(key, ast.Constant) and key.value == "kind") or _names_a_kind(node.value)
    if isinstance(node, ast.Attribute):
        return node.attr == "kinds" or (node.attr == "kind" and not (isinstance(node.value, ast.Attribute)
                                                                      and node.value.attr == "dtype"))
    return isinstance(node, ast.Name) and node.id == "kinds"


def _a_word(node: ast.AST) -> bool:
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(map(_a_word, node.elts))
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _kind_literals(tree: ast.AST) -> list[int]:
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Compare)
            and any(map(_names_a_kind, [n.left, *n.comparators])) and any(map(_a_word, [n.left, *n.comparators]))]


def test_kinds_are_compared_with_members_not_words():
    """``ins.kind == InstructionKind.KERNEL_CALL``, ``v.kind == ValueKind.TENSOR``, ``exc.kind == MixupKind.PTD``,
    never ``ins.kind == "KernelCall"``: a misspelt word compares unequal without a sound. Every ``kind`` pte_lab
    compares is a member of an enum (``pte_lab.vocabulary``, ``format.mixups.MixupKind``, ``findings.Kind``,
    ``peak.PeakCauseKind``...)."""
    bad = [f"{_module_name(p)}:{line}" for p in SOURCES for line in _kind_literals(_tree(p))]
    assert not bad, bad


def test_the_kind_check_sees_a_word():
    forms = ['ins.kind == "KernelCall"', 'i.kind in ("KernelCall", "DelegateCall")', 'exc.kind not in ("ptn", "ptg")',
             '"Tensor" != v.kind', 'r["kind"] == "ptd"', 'kinds[t.producer] == "DelegateCall"',
             '(a.kind, b.kind) == ("Tensor", "Tensor")', 'x.kind == "named_data" and y']
    fine = ['ins.kind == InstructionKind.KERNEL_CALL', 'exc.kind in (MixupKind.PTN, MixupKind.PTG)',
            'a.dtype.kind not in "iu"', 'kind_of == "x"', 't.role == "view"', 'ins.kind == other.kind']
    found = {k for k, text in enumerate(forms + fine) if _kind_literals(ast.parse(f"x = {text}\n"))}
    assert found == set(range(len(forms)))


#: where a backend's id may be written as a literal: its registration, and the format reader of its blob
BACKEND_ID_HOMES = ("pte_lab.model.backends", "pte_lab.format.")


def _backend_id_literals(tree: ast.AST, ids) -> list[int]:
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in ids]


def test_a_backend_id_is_written_only_in_its_registration():
    """``"XnnpackBackend"`` is written once, where the backend is registered (``pte_lab.model.backends``) or its
    blob is read (``pte_lab.format.xnnpack.BACKEND``); every other module asks the registration
    (``registration(b).heap``, ``XNNPACK.id``), so a new backend is one registration, not a hunt through the views."""
    from pte_lab.model.backends import BACKENDS

    ids = set(BACKENDS)
    bad = [f"{_module_name(p)}:{line}" for p in SOURCES if not _module_name(p).startswith(BACKEND_ID_HOMES)
           for line in _backend_id_literals(_tree(p), ids)]
    assert not bad, bad


def test_the_backend_id_check_sees_a_literal():
    ids = {"XnnpackBackend", "EthosUBackend"}
    forms = ['b == "XnnpackBackend"', '{"EthosUBackend": 1}', 'f(backend="XnnpackBackend")']
    fine = ['b == XNNPACK.id', '"an XnnpackBackend delegate"', 'f"{b} (EthosUBackend)"']
    found = {k for k, text in enumerate(forms + fine) if _backend_id_literals(ast.parse(f"x = {text}\n"), ids)}
    assert found == set(range(len(forms)))
