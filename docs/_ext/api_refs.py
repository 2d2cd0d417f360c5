"""Cross-references of the API reference that name a documented object by another of its names.

pte_lab documents each object once, under the name a reader imports it by (``pte_lab.Pte``,
``pte_lab.planning.WhatIf``), while its type hints and docstrings name it where it is defined
(``pte_lab.model.Pte``, ``pte_lab.model.pte.Pte``, ``Pte`` in a module that imports it only for type
checking) or by a short alias (``pd.DataFrame``, ``Axes``). Sphinx looks a reference up by its text, so
each of those failed to resolve. Here a reference Sphinx did not find is looked up again:

1. a short alias of a library's name (:data:`ALIASES`), then the other projects' inventories (intersphinx);
2. the object it names, imported: the reference resolves to the name that object is documented under;
3. else, the one documented object whose name ends with it (``WhatIf``, ``Sizes.skipped``), if only one does.

A type named like a built-in (``bytes``, ``int``) is Python's, never an attribute of that name that some
record has (``Total.bytes``): Sphinx's search of a type hint's name would pick the attribute.

A reference none of these finds stays unresolved, and ``nitpicky`` under ``-W`` fails the build on it.
"""

from __future__ import annotations

import builtins
import importlib
import sys
from typing import Any

from sphinx import addnodes
from sphinx.ext.intersphinx import missing_reference as intersphinx_reference
from sphinx.transforms.post_transforms import SphinxPostTransform

#: the built-in types, linked to Python's documentation
BUILTIN_TYPES = frozenset(name for name, value in vars(builtins).items() if isinstance(value, type))

#: the short names the code writes for other libraries' types (``import pandas as pd``; matplotlib's types
#: imported under ``TYPE_CHECKING``), and the names their documentation gives them
ALIASES = {
    "pd.DataFrame": "pandas.DataFrame",
    "pd.Series": "pandas.Series",
    "DataFrame": "pandas.DataFrame",
    "np.ndarray": "numpy.ndarray",
    "ndarray": "numpy.ndarray",
    "Axes": "matplotlib.axes.Axes",
    "Figure": "matplotlib.figure.Figure",
    "PathLike": "os.PathLike",
}

_MISSING = object()


def _import(name: str) -> Any:
    """The object a dotted name names, or ``_MISSING``: an attribute of the longest module prefix that has it
    (``pte_lab.planning.replan`` is the function the package exports, not its module of that name), else the
    module of that name."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except Exception:  # noqa: BLE001 - not a module: a shorter prefix may be
            continue
        for part in parts[cut:]:
            obj = getattr(obj, part, _MISSING)
            if obj is _MISSING:
                break
        if obj is not _MISSING:
            return obj
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001
        return _MISSING


def _documented(env) -> tuple[dict[int, str], dict[str, list[str]]]:
    """(object id -> the name it is documented under, last part of a name -> documented names), cached."""
    key = "_pte_lab_documented"
    cached = getattr(env, key, None)
    py = env.get_domain("py")
    if cached is not None and cached[0] == len(py.objects):
        return cached[1], cached[2]
    by_id: dict[int, str] = {}
    by_tail: dict[str, list[str]] = {}
    for name, entry in py.objects.items():
        if entry.aliased:
            continue
        obj = _import(name) if entry.objtype in ("class", "exception", "function", "method", "property",
                                                "module", "data") \
            else _MISSING
        if entry.objtype == "data" and not isinstance(obj, (list, tuple, dict, set, frozenset)):
            obj = _MISSING  # a number or a string may be another name's too: only a table is its own
        # a class documented twice (re-exported) keeps the shorter, public name
        if obj is not _MISSING and (id(obj) not in by_id or len(name) < len(by_id[id(obj)])):
            by_id[id(obj)] = name
        parts = name.split(".")
        for k in range(1, min(3, len(parts))):
            by_tail.setdefault(".".join(parts[-k:]), []).append(name)
    setattr(env, key, (len(py.objects), by_id, by_tail))
    return by_id, by_tail


def _retry(app, env, node, contnode, target: str):
    """Resolve ``node`` as if it named ``target``: this project's objects, then the inventories."""
    py = env.get_domain("py")
    new = node.deepcopy()
    new["reftarget"] = target
    found = py.resolve_xref(env, node.get("refdoc", ""), app.builder, node["reftype"], target, new, contnode)
    if found is None:
        found = py.resolve_any_xref(env, node.get("refdoc", ""), app.builder, target, new, contnode)
        found = found[0][1] if len(found) == 1 else None
    if found is None:
        found = intersphinx_reference(app, env, new, contnode)
    return found


def resolve(app, env, node, contnode):
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip("~.")
    if target in ALIASES:
        return _retry(app, env, node, contnode, ALIASES[target])
    by_id, by_tail = _documented(env)
    candidates = [target]
    module = node.get("py:module") or ""
    for k in range(1, module.count(".") + 1):  # a name relative to a package above the module (``.replan.replan``)
        candidates.insert(0, f"{module.rsplit('.', k)[0]}.{target}")
    for scope in (module, node.get("py:class") and f"{module}.{node.get('py:class')}"):
        if scope:
            candidates.insert(0, f"{scope}.{target}")
    for name in candidates:
        obj = _import(name)
        if obj is not _MISSING and id(obj) in by_id and by_id[id(obj)] != target:
            return _retry(app, env, node, contnode, by_id[id(obj)])
    names = by_tail.get(target, [])
    if len(names) == 1:
        return _retry(app, env, node, contnode, names[0])
    return None


class BuiltinTypes(SphinxPostTransform):
    """Send a reference to a built-in type straight to Python's inventory, before this project's objects are
    searched (the search would find ``Total.bytes`` for ``bytes``)."""

    default_priority = 5  # before the references are resolved (10)

    def run(self, **kwargs) -> None:
        for node in self.document.findall(addnodes.pending_xref):
            if node.get("refdomain") == "py" and node.get("reftarget") in BUILTIN_TYPES:
                node["reftarget"] = f"python:{node['reftarget']}"


def _unquote(annotations: dict) -> None:
    for key, value in list(annotations.items()):
        if isinstance(value, str) and len(value) > 1 and value[0] == value[-1] and value[0] in "'\"":
            annotations[key] = value[1:-1]


def _evaluate(annotations: dict, namespace: dict) -> None:
    """Each annotation that is a string, evaluated alone where it can be: typing evaluates them all or none,
    and one name imported only for type checking left every field of a record a quoted string."""
    for key, value in list(annotations.items()):
        if isinstance(value, str):
            try:
                annotations[key] = eval(value, dict(namespace))  # noqa: S307 - this project's own annotations
            except Exception:  # noqa: BLE001 - a name imported for type checking only: left as written
                pass


def unquote_annotations(app, obj, bound_method):
    """``-> "list[tuple[int, str]]"`` under ``from __future__ import annotations`` is the string of a string,
    and a record's fields are strings its generated ``__init__`` cannot evaluate all at once: the reference
    shows the types, not their quotes (the code stays as it is)."""
    for target in (obj, getattr(obj, "__init__", None), getattr(obj, "fget", None)):
        if target is None:
            continue
        annotations = (vars(target).get("__annotations__") if isinstance(target, type)
                       else getattr(target, "__annotations__", None))
        if isinstance(annotations, dict):
            _unquote(annotations)
            namespace = getattr(target, "__globals__", None)
            if namespace is None:
                module = sys.modules.get(getattr(target, "__module__", None) or "")
                namespace = vars(module) if module is not None else {}
            _evaluate(annotations, namespace)


def setup(app):
    app.add_post_transform(BuiltinTypes)
    app.connect("autodoc-before-process-signature", unquote_annotations)
    app.connect("missing-reference", resolve, priority=400)  # before intersphinx's own (500)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
