"""Operators a method calls against the ones ExecuTorch's runtime registers, and who provides the rest.

ExecuTorch's pip wheel registers its portable and optimized kernels; LLM
custom operators (``llama::update_cache``, ``llama::custom_sdpa``...) and
quantized kernels (``quantized_decomposed::...``) live in libraries of the
wheel that register themselves when their Python module is imported. A
method that calls an operator nobody registered fails ``load_method`` with
``error: 0x:14`` (OperatorMissing); pte_lab checks first.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass, field

from ..call_targets import namespaces
from ..quiet import quiet_import
from ..units import count, first_few

__all__ = ["PROVIDERS", "Provision", "registered_operators", "provide", "missing_message"]

#: operator namespace -> (module of the executorch wheel that registers its kernels, what it is)
PROVIDERS = {
    "llama": ("executorch.extension.llm.custom_ops.custom_ops", "ExecuTorch's LLM custom ops"),
    "quantized_decomposed": ("executorch.kernels.quantized", "ExecuTorch's quantized kernels"),
}


@dataclass(frozen=True)
class Provision:
    """What :func:`provide` did for a method's operators: those still missing, and the libraries it
    registered for the others (module -> what it is)."""

    missing: tuple[str, ...] = ()
    loaded: dict[str, str] = field(default_factory=dict)


#: operators seen registered in this process: the registry only grows, so a method whose operators
#: are all here needs no new look-up
_SEEN: set[str] = set()
#: provider modules pte_lab imported for another reason (an operator schema look-up) that no method has
#: been told about yet: the first method calling their operators is (OperatorLibraryWarning)
_UNREPORTED: set[str] = set()


def import_provider(namespace: str) -> None:
    """Import the module providing ``namespace``'s kernels (for their schemas), remembering that pte_lab did."""
    module = PROVIDERS[namespace][0]
    if module not in sys.modules:
        importlib.import_module(module)
        _UNREPORTED.add(module)


def registered_operators() -> set[str]:
    """Every operator ExecuTorch's runtime has a kernel for, in this process."""
    portable_lib = quiet_import("executorch.extension.pybindings.portable_lib")
    _SEEN.update(portable_lib._get_operator_names())
    return set(_SEEN)


def provide(operators: list[str]) -> Provision:
    """Register the libraries that provide the missing ``operators`` (known namespaces only): what is still
    missing (sorted), and what was registered."""
    loaded = {}
    for ns in sorted(namespaces(operators) & set(PROVIDERS)):
        module, what = PROVIDERS[ns]
        if module in _UNREPORTED:  # registered earlier by pte_lab, while looking up schemas
            _UNREPORTED.discard(module)
            loaded[module] = what
    if _SEEN.issuperset(operators):
        return Provision((), loaded)
    missing = sorted(set(operators) - registered_operators())
    for ns in sorted(namespaces(missing)):
        if ns not in PROVIDERS:
            continue
        module, what = PROVIDERS[ns]
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001 - a provider that cannot load leaves its operators missing
            continue
        loaded[module] = what
    if loaded:
        missing = sorted(set(missing) - registered_operators())
    return Provision(tuple(missing), loaded)


def missing_message(method: str, missing: list[str]) -> str:
    shown = first_few(missing, 8)
    hints = []
    for ns in sorted(namespaces(missing)):
        if ns in PROVIDERS:
            hints.append(f"{ns}:: comes from {PROVIDERS[ns][1]} (import {PROVIDERS[ns][0]}), which did not load here")
    hint = "; ".join(hints) or ("load the kernel library that registers them (a custom-op .so with "
                                "torch.ops.load_library, or an ExecuTorch build that includes them) before "
                                "pte_lab.load")
    return (f"method {method!r} calls {count(len(missing), 'operator')} this ExecuTorch "
            f"runtime does not register: {shown}. {hint[0].upper() + hint[1:]}.")
