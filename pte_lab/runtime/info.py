"""``runtime_info()``: what this ExecuTorch installation can do."""

from __future__ import annotations

import importlib.metadata as md
import re
from dataclasses import dataclass, field

from ..devices import DEVICE_TYPES
from ..errors import PteLabError
from ..quiet import quiet_import
from . import native
from .memory import CudaProbe
from .native import executorch_version


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v.split("+")[0])[:3])


def honours_device_plans(version: str | None = None) -> bool:
    """Whether ``Runtime.load_program`` places planned arenas on their devices (executorch >= 1.5.0)."""
    return _version_tuple(version or executorch_version()) >= (1, 5, 0)


@dataclass
class RuntimeInfo:
    """What this ExecuTorch installation can do: versions, backends, device allocators, CUDA."""
    executorch_version: str
    torch_version: str | None
    honours_device_plans: bool
    backends: list[str]
    #: device type -> "emulated", "registered" (a real allocator) or "none"
    device_allocators: dict[str, str]
    cuda_visible: bool
    native_helper: str
    notes: list[str] = field(default_factory=list)

    def rows(self) -> list[tuple[str, str]]:
        """(what, value) pairs, as the text and HTML views show them."""
        return [
            ("executorch", self.executorch_version),
            ("torch", self.torch_version or "not installed"),
            ("loader honours device plans",
             "yes (>= 1.5.0)" if self.honours_device_plans else "no (< 1.5.0: every arena on the host)"),
            ("registered backends", ", ".join(self.backends) or "none"),
            ("device allocators", ", ".join(f"{k}: {v}" for k, v in self.device_allocators.items())),
            ("CUDA visible to torch", "yes" if self.cuda_visible else "no"),
            ("emulated-device helper", self.native_helper),
        ]

    def __repr__(self) -> str:
        from ..views.runtime.load_info_device import runtime_info_text

        return runtime_info_text(self)

    def _repr_html_(self) -> str:
        from ..views.runtime.load_info_device import runtime_info_html

        return runtime_info_html(self)


def runtime_info() -> RuntimeInfo:
    """Version, device-plan support, backends, device allocators, CUDA visibility.

    Returns
    -------
    RuntimeInfo
        What this ExecuTorch can do (its HTML and text views are a table); what it cannot find out is a note,
        not an error.

    Raises
    ------
    ImportError
        When ExecuTorch is not installed (the ``runtime`` extra).
    """
    Runtime = quiet_import("executorch.runtime").Runtime
    rt = Runtime.get()
    try:
        torch_version = md.version("torch")
    except md.PackageNotFoundError:
        torch_version = None
    notes = []
    allocators = {}
    try:
        native.library()
        helper = "built"
        for name, code in DEVICE_TYPES.items():
            if code == 0:
                continue
            if native.library().pte_lab_is_emulated(code):
                allocators[name] = "emulated (host memory)"
            elif native.library().pte_lab_has_allocator(code):
                allocators[name] = "registered"
            else:
                allocators[name] = "none"
    except PteLabError as exc:
        helper = f"unavailable: {str(exc).splitlines()[0]}"
        allocators = {"cuda": "unknown"}
        notes.append("device allocators cannot be queried without the native helper")
    return RuntimeInfo(
        executorch_version=executorch_version(),
        torch_version=torch_version,
        honours_device_plans=honours_device_plans(),
        backends=list(rt.backend_registry.registered_backend_names),
        device_allocators=allocators,
        cuda_visible=CudaProbe.available(),
        native_helper=helper,
        notes=notes,
    )
