"""Operator schemas from torch's registry, as plain data for the model's argument check.

ExecuTorch's kernels unbox each argument of a KernelCall as its schema says
(``stack[0]->toTensor()``...): a value of another kind aborts the process.
The file does not carry schemas; torch's operator registry has them for
``aten``, for ExecuTorch's own libraries (``llama``, ``quantized_decomposed``,
``dim_order_ops``, ``executorch_prim``, ``et_copy``: registered when their
Python module is imported) and for anything registered through
``torch.library`` in this process. ``operator_schemas`` returns, per
operator, ``{"arguments": ((name, type), ...), "returns": (type, ...)}`` with
types in schema notation (``Tensor``, ``Tensor?``, ``int[]``, ``Scalar``...),
or None when no schema is known; ``pte_lab.model.findings.operator_findings``
applies the rule.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import sys
from typing import TYPE_CHECKING
from collections.abc import Iterable

from ..cache import cache_dir, dist_version
from ..errors import PteFormatError
from ..model.findings import REFUSED_BEFORE_LOADING, Kind, operator_findings
from ..progress import tell
from ..quiet import quiet
from ..call_targets import namespaces
from ..vocabulary import InstructionKind, OperatorTarget
from . import kept
from .operators import PROVIDERS, import_provider

if TYPE_CHECKING:  # pragma: no cover
    from ..model import Pte
    from ..model.findings import Finding

__all__ = ["operator_schemas", "program_schemas", "schema_findings", "refuse_argument_mismatches", "REGISTRARS"]

#: operator namespace -> the module whose import registers its schemas with torch
REGISTRARS = {
    "quantized_decomposed": "torch.ao.quantization.fx._decomposed",
    "llama": "executorch.extension.llm.custom_ops.custom_ops",
    "dim_order_ops": "executorch.exir.passes.dim_order_ops_registry",
    "executorch_prim": "executorch.exir.passes.executorch_prim_ops_registry",
    "et_copy": "executorch.exir.passes._device_copy_ops_registry",
    # the Cortex-M backend's kernels (Arm's Ethos-U programs quantize and dequantize with them around the NPU)
    "cortex_m": "executorch.backends.cortex_m.ops.operators",
}


def _type_name(t) -> str:
    """A JIT type in schema notation; ``?`` for what pte_lab does not check."""
    kind = t.kind()
    if kind == "OptionalType":
        inner = _type_name(t.getElementType())
        return "?" if inner == "?" else inner + "?"
    if kind == "ListType":
        inner = _type_name(t.getElementType())
        return "?" if inner == "?" else inner + "[]"
    return {"TensorType": "Tensor", "IntType": "int", "SymIntType": "int", "FloatType": "float",
            "BoolType": "bool", "NumberType": "Scalar", "StringType": "str"}.get(kind, "?")


def _register(namespaces: Iterable[str]) -> dict[str, str]:
    """Import the registrar of each of ``namespaces``; those that could not load for a module this install lacks:
    namespace -> that module's name (Arm's Cortex-M ops need Arm's flow, ``tosa_serializer``)."""
    lacking: dict[str, str] = {}
    for ns in namespaces:
        module = REGISTRARS.get(ns)
        if module is None:
            continue
        try:
            if PROVIDERS.get(ns, ("",))[0] == module:  # it registers ExecuTorch kernels too: load_method says so
                import_provider(ns)
            else:
                importlib.import_module(module)
        except ModuleNotFoundError as exc:  # settled until that module is installed: kept with its name
            if exc.name:
                lacking[ns] = exc.name
        except Exception:  # noqa: BLE001 - a library that cannot load leaves its operators unknown
            pass
    return lacking


def operator_schemas(operators: Iterable[str], cache: bool | None = None) -> dict[str, dict | None]:
    """``{"ns::name.overload": {"arguments": ((name, type), ...), "returns": (type, ...)} or None}``.

    Looking them up imports torch and ExecuTorch's registrars (seconds: said with ``pte_lab.progress.tell``).
    What it finds is kept per install (:func:`_kept_path`: by torch's and ExecuTorch's versions and pte_lab's
    code), so that checking a program whose operators were all seen before never imports torch: each schema
    torch knows, and each operator of ``aten`` or of ExecuTorch's own namespaces (:data:`REGISTRARS`, their
    registrar imported) that torch has none for (``executorch_prim::et_view``, which ExecuTorch's emitter writes
    for a view and no library registers a schema of). An operator of another namespace torch does not know is
    looked up each time (this process may register it: ``torch.library``). ``cache=False`` (or
    ``$PTE_LAB_NO_CACHE=1``) looks every one up."""
    operators = sorted(set(operators))
    if not kept.enabled(cache):
        tell("checking each operator's arguments against torch's schemas (importing torch: seconds)")
        return _look_up(operators)[0]
    path = _kept_path()
    known, waiting = _read_kept(path)
    if all(op in known for op in operators) and not any(_installed(waiting[op]) for op in operators if op in waiting):
        return {op: known[op] for op in operators}
    tell("checking each operator's arguments against torch's schemas (importing torch: seconds; once per set of "
         "operators, kept in the cache folder)")
    found, lacking = _look_up(operators)
    new = {op: s for op, s in found.items()
           if (op not in known or op in waiting) and (s is not None or _settled(op, lacking))}
    if new:
        _write_kept(path, {**known, **new}, {**{op: m for op, m in waiting.items() if op not in new},
                                             **{op: lacking[_namespace(op)] for op, s in new.items()
                                                if s is None and _namespace(op) in lacking}})
    return found


def _namespace(op: str) -> str:
    return OperatorTarget.parse(op).namespace or ""


def _installed(module: str) -> bool:
    """Whether ``module`` (one a registrar lacked) can be imported now."""
    try:
        return importlib.util.find_spec(module.split(".")[0]) is not None
    except (ImportError, ValueError):
        return False


def _settled(op: str, lacking: dict[str, str]) -> bool:
    """Whether torch's having no schema for ``op`` holds for this install, whatever the process: an operator of
    ``aten`` or of a namespace of :data:`REGISTRARS` whose registrar is imported (nothing a user registers goes
    there), or whose registrar cannot load for a module this install lacks (``lacking``: kept with that module's
    name, and looked up again once it is installed)."""
    ns = _namespace(op)
    return ns == "aten" or (ns in REGISTRARS and (REGISTRARS[ns] in sys.modules or ns in lacking))


def _kept_path():
    doc = json.dumps([kept.code_digest(), dist_version("torch"), dist_version("executorch")])
    return cache_dir("schemas", hashlib.sha256(doc.encode()).hexdigest()[:20] + ".json")


def _read_kept(path) -> tuple[dict[str, dict | None], dict[str, str]]:
    """(the schemas kept at ``path``, None for an operator torch has none for; the operators whose registrar
    lacked a module, -> that module) (nothing where it cannot be read back whole)."""
    try:
        doc = json.loads(path.read_text())
        schemas: dict[str, dict | None] = {}
        waiting: dict[str, str] = {}
        for op, s in doc.items():
            if s is None or "waits_for" in s:
                schemas[op] = None
                if s is not None:
                    waiting[op] = str(s["waits_for"])
            else:
                schemas[op] = {"arguments": tuple((str(n), str(t)) for n, t in s["arguments"]),
                               "returns": tuple(str(t) for t in s["returns"])}
        return schemas, waiting
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}, {}


def _write_kept(path, schemas: dict[str, dict | None], waiting: dict[str, str]) -> None:
    doc = {op: {"waits_for": waiting[op]} if s is None and op in waiting else s for op, s in schemas.items()}
    try:  # through a temporary file renamed into place: a reader sees all of it or none
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(doc, sort_keys=True))
        os.replace(tmp, path)
    except OSError:  # a read-only cache folder: looked up again next time
        pass


def _look_up(operators: list[str]) -> tuple[dict[str, dict | None], dict[str, str]]:
    """(each operator's schema, None where torch has none; the namespaces whose registrar lacked a module, -> it)."""
    with quiet():  # torch, exir and the custom-op libraries print as they load
        import torch

        lacking = _register(namespaces(operators))
    out: dict[str, dict | None] = {}
    for op in operators:
        target = OperatorTarget.parse(op)
        overload = "" if target.overload in (None, "default") else target.overload
        try:
            found = [s for s in torch._C._jit_get_schemas_for_operator(target.qualified)
                     if s.overload_name == overload]
        except Exception:  # noqa: BLE001 - a name torch cannot parse has no schema
            found = []
        if not found:
            out[op] = None
            continue
        s = found[0]
        out[op] = {"arguments": tuple((a.name, _type_name(a.type)) for a in s.arguments),
                   "returns": tuple(_type_name(r.type) for r in s.returns)}
    return out, lacking


def program_schemas(pte: "Pte") -> dict[str, dict | None]:
    """The schemas of every operator a KernelCall of any method calls."""
    ops: set[str] = set()
    for m in pte.methods.values():
        names = m.operators
        ops.update(names[ins.target] for ins in m.raw.instructions if ins.kind == InstructionKind.KERNEL_CALL)
    return operator_schemas(ops) if ops else {}


def schema_findings(pte: "Pte", schemas: dict | None = None) -> list["Finding"]:
    """Every method's kernel arguments against its operators' schemas (argument kinds, unknown operators)."""
    schemas = program_schemas(pte) if schemas is None else schemas
    return [f for m in pte.methods.values() for f in operator_findings(m, schemas)]


def refuse_argument_mismatches(pte: "Pte") -> list["Finding"]:
    """Raise PteFormatError for a kernel argument of a kind its schema does not take (the kernel would abort
    the process); else return the schema findings (operators whose arguments could not be checked)."""
    found = schema_findings(pte)
    for f in found:
        if f.kind in REFUSED_BEFORE_LOADING:
            raise PteFormatError(f"method {f.method!r}: {f.message}")
    return [f for f in found if f.kind != Kind.OPERATOR_ARGUMENTS]
