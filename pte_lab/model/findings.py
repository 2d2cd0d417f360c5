"""Findings: things about a program a person should know before loading it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Finding:
    #: "info", "warning" or "error"
    severity: str
    #: a stable identifier: shared_arenas, device_allocator, device_tag_in_host_arena,
    #: host_tensor_in_device_arena, plan_overlap, outside_arena, unknown_arena, loops,
    #: external_data, unplanned_io
    kind: str
    method: str | None
    message: str
    details: dict = field(default_factory=dict, compare=False)

    def __str__(self) -> str:
        where = f"[{self.method}] " if self.method else ""
        return f"{self.severity}: {where}{self.message}"
