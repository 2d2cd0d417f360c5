"""Views of what ``pte_lab.load``, ``runtime_info`` and ``emulate_device`` return: a loaded program's memory
report, the installation, an emulated device."""

from __future__ import annotations

import os
from html import escape
from typing import TYPE_CHECKING

from ...units import human_bytes
from ..html import html_repr, key_values

if TYPE_CHECKING:  # pragma: no cover
    from ...runtime.device import EmulatedDevice
    from ...runtime.info import RuntimeInfo
    from ...runtime.loaded import LabProgram

__all__ = ["lab_program_html", "runtime_info_text", "runtime_info_html", "emulated_device_html"]


def lab_program_html(prog: "LabProgram") -> str:
    """The program, its loader and loaded methods, then the memory report and what its host bytes mean."""
    rep = prog.memory_report()
    iso = " (isolated worker)" if prog.isolated else ""
    loaded = ", ".join(prog.loaded_methods) or "none"
    return html_repr(f"<div><b>LabProgram</b> {escape(os.fspath(prog.path))}{iso} &middot; loader "
                     f"<code>{prog.loader}</code> &middot; methods loaded: {escape(loaded)}</div>"
                     + rep.to_html(index=False) + f"<div><i>{escape(rep.attrs['note'])}</i></div>",
                     f"{prog!r}\n{rep.to_string(index=False)}\n{rep.attrs['note']}")


def runtime_info_text(info: "RuntimeInfo") -> str:
    rows = info.rows()
    w = max(len(k) for k, _ in rows)
    lines = ["ExecuTorch runtime"] + [f"  {k.ljust(w)}  {v}" for k, v in rows]
    return "\n".join(lines + [f"  note: {n}" for n in info.notes])


def runtime_info_html(info: "RuntimeInfo") -> str:
    notes = "".join(f"<div><i>{escape(n)}</i></div>" for n in info.notes)
    return html_repr(f"<div><b>ExecuTorch runtime</b>{key_values(info.rows())}{notes}</div>",
                     runtime_info_text(info))


def emulated_device_html(device: "EmulatedDevice") -> str:
    return html_repr(f"<b>{escape(device.kind)}</b> <i>(emulated in host memory)</i>: "
                     f"{human_bytes(device.outstanding_bytes)} outstanding, {len(device.ledger())} ledger events",
                     repr(device))
