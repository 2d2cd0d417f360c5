"""The example programs exported once per machine and kept, for the tests, the notebooks and the docs.

:func:`pte_lab.examples.save` and :func:`pte_lab.examples.kept_path` export an example once and keep it under
the user's cache folder (:func:`pte_lab.cache.cache_dir`: ``$PTE_LAB_CACHE_DIR``, else
``$XDG_CACHE_HOME/pte_lab``, else ``~/.cache/pte_lab``), in ``examples/<name>/<key>/``: the program
(``<name>.pte``), what :func:`~pte_lab.examples.save` writes beside it (``external``'s ``.ptd``, ``llm``'s
ETRecord and memory trace with ``records=True``) and a manifest of their SHA-256 digests, written last.

The key (:func:`key`) is made of exactly what the export depends on, read from ``examples.py``'s syntax tree
(comments, docstrings and layout do not count):

- the builder's own code, and that of every other builder it calls (by name, transitively);
- all of ``examples.py`` that is not a builder (the helpers ``_export``, ``_modules``, ``_lower``..., the
  constants, the imports, :func:`~pte_lab.examples.save` itself), but for the ``BUILDERS`` table and
  ``__all__`` (each builder's key has its own code);
- the arguments, as canonical JSON over the builder's literal defaults (``device()`` and ``device(side=64)``
  are one program);
- the versions of torch, ExecuTorch and Python.

Editing one builder exports that builder (and those that call it) again; editing a shared helper, all of
them. An entry is written through a temporary folder renamed into place, one exporter per key across
processes (a file lock), and read back only whole: a file that is missing, cut short or changed is exported
again, never returned. The measurements' switch (``$PTE_LAB_NO_CACHE``, :mod:`pte_lab.runtime.kept`) does not
apply here: an export is no measurement. ``save(..., cache=False)`` exports afresh; :func:`clear` forgets them
all.
"""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path
from collections.abc import Callable

from .cache import cache_dir, dist_version

__all__ = ["key", "key_in", "folder", "kept", "copy_out", "clear", "summary", "unknown_example", "SOURCE"]

#: the module whose code keys the exports
SOURCE = Path(__file__).with_name("examples.py")
#: top-level names of examples.py that are not export code: the builders' table, the public names
_NOT_SHARED = ("BUILDERS", "__all__")
#: written last in an entry: its files and their digests
MANIFEST = "manifest.json"


def folder() -> Path:
    """Where the exports are kept (created when one is)."""
    return cache_dir("examples")


def unknown_example(name: str, names) -> ValueError:
    """The error for an example that ``examples.py`` does not build."""
    return ValueError(f"unknown example {name!r}; choose one of {sorted(names)}")


# ----------------------------------------------------------------------- the key
def _without_docstrings(node: ast.AST) -> ast.AST:
    node = copy.deepcopy(node)
    for n in ast.walk(node):
        body = getattr(n, "body", None)
        if (isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            n.body = body[1:] or [ast.Pass()]
    return node


def _code(node: ast.AST) -> str:
    """A statement's code: its syntax tree without docstrings, positions or comments."""
    return ast.dump(_without_docstrings(node), annotate_fields=False, include_attributes=False)


def _assigned(node: ast.stmt) -> set[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
        node, (ast.AnnAssign, ast.AugAssign)) else []
    return {t.id for t in targets if isinstance(t, ast.Name)}


def _free_names(func: ast.FunctionDef) -> set[str]:
    """The names ``func`` reads that it does not bind itself (its parameters, locals, imports, inner defs)."""
    read, bound = set(), set()
    for n in ast.walk(func):
        if isinstance(n, ast.Name):
            (read if isinstance(n.ctx, ast.Load) else bound).add(n.id)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is not func:
            bound.add(n.name)
    return read - bound


def _defaults(func: ast.FunctionDef) -> dict:
    """The parameters of ``func`` whose default is a literal, with it."""
    a = func.args
    pairs = list(zip(a.args[len(a.args) - len(a.defaults):], a.defaults))
    pairs += [(p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
    out = {}
    for p, d in pairs:
        try:
            out[p.arg] = ast.literal_eval(d)
        except ValueError:
            pass
    return out


@functools.lru_cache(maxsize=8)
def _parts(source: str) -> tuple[dict, dict, dict, str]:
    """``(builders, code, calls, shared)`` of ``examples.py``'s text: name -> function, function -> its code,
    function -> the builders it calls by name, and the digest of every other top-level statement."""
    tree = ast.parse(source)
    table = next((n.value for n in tree.body if "BUILDERS" in _assigned(n) and isinstance(n.value, ast.Dict)),
                 None)
    if table is None:
        raise ValueError("examples.py has no BUILDERS table")
    builders = {ast.literal_eval(k): v.id for k, v in zip(table.keys, table.values)}
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in builders.values()}
    shared = hashlib.sha256()
    for i, node in enumerate(tree.body):
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the module's docstring
        if node in funcs.values() or _assigned(node) & set(_NOT_SHARED):
            continue
        shared.update(_code(node).encode() + b"\0")
    code = {f: _code(n) for f, n in funcs.items()}
    calls = {f: sorted(_free_names(n) & set(funcs) - {f}) for f, n in funcs.items()}
    defaults = {f: _defaults(n) for f, n in funcs.items()}
    return builders, code, {"calls": calls, "defaults": defaults}, shared.hexdigest()


def _closure(function: str, calls: dict) -> list[str]:
    seen, todo = set(), [function]
    while todo:
        f = todo.pop()
        if f not in seen:
            seen.add(f)
            todo.extend(calls[f])
    return sorted(seen)


def _arguments(name: str, kwargs: dict, defaults: dict) -> str:
    merged = {**defaults, **kwargs}
    try:
        return json.dumps(merged, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        bad = next(k for k, v in merged.items() if not _is_json(v))
        raise TypeError(f"example {name!r}: argument {bad}={merged[bad]!r} is not JSON (numbers, strings, "
                        f"booleans, None, lists): it cannot key a kept export") from None


def _is_json(value) -> bool:
    try:
        json.dumps(value, allow_nan=False)
        return True
    except (TypeError, ValueError):
        return False


def key_in(source: str, name: str, kwargs: dict) -> str:
    """The key of ``build(name, **kwargs)`` as ``source`` (the text of an ``examples.py``) would export it.

    Raises ``ValueError`` for a name ``source`` does not build, ``TypeError`` for an argument that is not
    JSON."""
    builders, code, graph, shared = _parts(source)
    if name not in builders:
        raise unknown_example(name, builders)
    function = builders[name]
    doc = {
        "builder": name,
        "code": [code[f] for f in _closure(function, graph["calls"])],
        "shared": shared,
        "arguments": _arguments(name, kwargs, graph["defaults"][function]),
        "torch": dist_version("torch"),
        "executorch": dist_version("executorch"),
        "python": list(sys.version_info[:2]),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32]


def key(name: str, /, **kwargs) -> str:
    """The key of the kept export of ``examples.build(name, **kwargs)`` (see the module's docstring): the
    builder's code and that of the builders it calls, ``examples.py``'s shared code, the arguments, and the
    versions of torch, ExecuTorch and Python. Returns 32 hexadecimal digits; raises ``ValueError`` for an
    unknown example, ``TypeError`` for an argument that is not JSON."""
    return key_in(SOURCE.read_text(), name, kwargs)


# --------------------------------------------------------------------- the entries
def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def is_kept(name: str, kwargs: dict) -> bool:
    """Whether the program ``name`` with ``kwargs`` is kept whole on this machine (no export needed)."""
    try:
        return _whole(folder() / name / key(name, **kwargs), f"{name}.pte")
    except TypeError:  # an argument that is not JSON: never kept
        return False


def _whole(entry: Path, program: str) -> bool:
    """Whether ``entry`` holds its manifest and every file it lists, each with its digest."""
    try:
        files = json.loads((entry / MANIFEST).read_text())["files"]
        return program in files and all(_sha256(entry / f) == digest for f, digest in files.items())
    except (OSError, ValueError, KeyError, TypeError):
        return False


def kept(name: str, kwargs: dict, export: Callable[[str], object]) -> Path:
    """The program ``name`` with ``kwargs`` kept on this machine, made by ``export(path)`` (which writes the
    program at ``path`` and what goes with it beside it) when none is kept whole. One process exports a key
    at a time; the others wait for it and read its entry. Returns the program's path; raises what
    ``export`` raises (nothing is kept then) and ``OSError`` where the cache folder cannot be written."""
    k = key(name, **kwargs)
    entry = folder() / name / k
    program = f"{name}.pte"
    if _whole(entry, program):
        return entry / program
    from filelock import FileLock  # installed with torch, as is every exporter

    entry.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(entry) + ".lock"):
        if _whole(entry, program):  # another process kept it while this one waited
            return entry / program
        tmp = entry.parent / f".{k}.{os.getpid()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            export(str(tmp / program))
            files = {p.name: _sha256(p) for p in sorted(tmp.iterdir()) if p.is_file()}
            if program not in files:
                raise RuntimeError(f"exporting {name!r} wrote no program")
            (tmp / MANIFEST).write_text(json.dumps({
                "name": name, "arguments": kwargs, "key": k, "files": files, "exported": time.time(),
                "torch": dist_version("torch"), "executorch": dist_version("executorch")}, indent=1))
            shutil.rmtree(entry, ignore_errors=True)  # an entry that was not whole
            os.replace(tmp, entry)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return entry / program


def copy_out(program: Path, path: str, check: Callable[[str], None]) -> list[str]:
    """Copy a kept program to ``path`` and what is kept beside it beside ``path``: ``<name>.X`` as
    ``<stem of path>.X``, any other file (a ``.ptd``) under its own name. ``check(dest)`` is called on every
    destination first. Returns the paths written."""
    entry, stem = program.parent, program.stem
    base, folder_of = os.path.splitext(path)[0], os.path.dirname(os.path.abspath(path))
    plan = []
    for f in sorted(p.name for p in entry.iterdir() if p.is_file() and p.name != MANIFEST):
        if f == program.name:
            plan.append((f, path))
        elif f.startswith(stem + "."):
            plan.append((f, base + f[len(stem):]))
        else:
            plan.append((f, os.path.join(folder_of, f)))
    for _, dest in plan:
        check(dest)
    for f, dest in plan:
        shutil.copyfile(entry / f, dest)
    return [dest for _, dest in plan]


def summary() -> tuple[int, int]:
    """(exports, bytes) kept now."""
    root = folder()
    entries = list(root.glob(f"*/*/{MANIFEST}")) if root.exists() else []
    size = sum(p.stat().st_size for e in entries for p in e.parent.iterdir() if p.is_file())
    return len(entries), size


def clear() -> tuple[int, int]:
    """Forget every kept export; returns (exports, bytes) removed."""
    n, size = summary()
    shutil.rmtree(folder(), ignore_errors=True)
    return n, size
