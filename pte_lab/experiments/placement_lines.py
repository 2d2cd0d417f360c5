"""The before/after runner's line protocol, read in Python: a typed record per line kind.

The native runner (``runtime/native/placement_runner.cpp``) runs each loader in a child process
(``pte_lab_placement --one before|after``) that writes what it measured one record a line, as it goes;
``runtime/native/placement_lines.h`` defines the lines and their fields (the one home of both readers,
this one and the runner's own). :func:`read` turns a child's output into records; :func:`to_runtime`
gives the :class:`~pte_lab.experiments.device_placement.RuntimeResult` the runner's JSON document holds
for that child. Every record is frozen plain data (picklable: it may cross a worker's pipe).

A line that is not the protocol raises :class:`~pte_lab.errors.RunnerLinesError`, one line that names
the line and what is wrong with it.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields

from ..errors import RunnerLinesError
from .device_placement import RuntimeResult

#: the first line of a child's output: the protocol and its version
HEAD = "pte_lab.placement_lines 1"
#: a field with no value (JSON's null)
NULL = "\\N"
_UNESCAPE = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}


@dataclass(frozen=True)
class BeginLine:
    """BEGIN: a step started (a child that dies before the step's STEP died in it)."""

    step: str


@dataclass(frozen=True)
class StepLine:
    """STEP: one step of a loader, what it cost and how it ended (``error`` None: it succeeded)."""

    step: str
    error: str | None
    correct: bool | None
    seconds: float
    device_bytes: int | None
    host_bytes: int | None
    device_events: int | None
    driver_device_bytes: int | None


@dataclass(frozen=True)
class ArenaLine:
    """ARENA: one arena a loader allocated: when, for which methods, where, and why there."""

    when: str
    methods: str
    runtime_index: int
    device: str
    bytes: int
    memory: str
    why: str | None
    #: a device arena: who touches it, as the file says
    touched_by: tuple[str, ...] = ()

    @property
    def mem_id(self) -> int:
        """The file's numbering of the arena (the runtime's index + 1)."""
        return self.runtime_index + 1


@dataclass(frozen=True)
class NoteLine:
    """NOTE: something the loader's run should say."""

    text: str


@dataclass(frozen=True)
class RuntimeLine:
    """RUNTIME: what the loader's run was: how it measured, and why it could not run (``failure``)."""

    label: str
    executorch_version: str | None
    measured_by: str | None
    host_measured_by: str | None
    failure: str | None
    runner: str | None
    backend: str | None


@dataclass(frozen=True)
class EndLine:
    """END: the last line; nothing was lost."""


#: each line kind's record
KINDS: dict[str, type] = {"BEGIN": BeginLine, "STEP": StepLine, "ARENA": ArenaLine, "NOTE": NoteLine,
                          "RUNTIME": RuntimeLine, "END": EndLine}


@dataclass(frozen=True)
class ChildLines:
    """Everything one child said, in order, and whether it said it all (``ended``)."""

    records: tuple = field(default_factory=tuple)

    def of(self, kind: type) -> list:
        return [r for r in self.records if isinstance(r, kind)]

    @property
    def runtime(self) -> RuntimeLine | None:
        found = self.of(RuntimeLine)
        return found[-1] if found else None

    @property
    def ended(self) -> bool:
        return bool(self.records) and isinstance(self.records[-1], EndLine)


def _unescape(raw: str, where: str) -> str | None:
    if raw == NULL:
        return None
    out, i = [], 0
    while i < len(raw):
        c = raw[i]
        if c == "\\":
            e = raw[i + 1] if i + 1 < len(raw) else ""
            if e not in _UNESCAPE:
                raise RunnerLinesError(f"{where} has a bad escape '\\{e}'")
            out.append(_UNESCAPE[e])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _value(kind: type, name: str, text: str | None, where: str):
    """A field's text as the record's type says (``int | None``, ``bool | None``, ``float``, ``str``...)."""
    hint = {f.name: f.type for f in fields(kind)}[name]
    optional = "None" in hint
    if text is None:
        if not optional:
            raise RunnerLinesError(f"{where}: {name} is missing ({NULL})")
        return None
    if hint.startswith("int"):
        if not re.fullmatch(r"-?[0-9]+", text):
            raise RunnerLinesError(f"{where}: {name} '{text}' is not an integer")
        return int(text)
    if hint.startswith("bool"):
        if text not in ("true", "false"):
            raise RunnerLinesError(f"{where}: {name} '{text}' is not true, false or {NULL}")
        return text == "true"
    if hint == "float":
        try:
            return float(text)
        except ValueError:
            raise RunnerLinesError(f"{where}: {name} '{text}' is not a number") from None
    return text


def parse_line(line: str, number: int = 1):
    """One line (without its newline) as its record; :class:`RunnerLinesError` if it is not one."""
    kind_name, *raw = line.split("\t")
    kind = KINDS.get(kind_name)
    if kind is None:
        raise RunnerLinesError(f"line {number}: unknown record kind '{kind_name[:40]}'")
    where = f"line {number} ({kind_name})"
    values = [_unescape(r, f"{where}: field {i + 1}") for i, r in enumerate(raw)]
    names = [f.name for f in fields(kind)]
    rest = bool(names) and names[-1] == "touched_by"  # ARENA: every field after why
    fixed = names[:-1] if rest else names
    if len(raw) != len(fixed) and not (rest and len(raw) > len(fixed)):
        raise RunnerLinesError(f"{where}: {len(raw)} fields, expected {'at least ' if rest else ''}{len(fixed)}")
    args = {n: _value(kind, n, v, where) for n, v in zip(fixed, values)}
    if rest:
        extra = values[len(fixed):]
        if any(v is None for v in extra):
            raise RunnerLinesError(f"{where}: touched_by is missing ({NULL})")
        args["touched_by"] = tuple(extra)
    return kind(**args)


def read(text: str) -> ChildLines:
    """A child's output as its records; :class:`RunnerLinesError` at the first line that is not the protocol
    (no version line first, an unknown kind, a field that does not fit, a record after END, a last line
    without its newline)."""
    if not text:
        raise RunnerLinesError(f"no lines (expected '{HEAD}' first)")
    lines = text.split("\n")
    if lines[-1] != "":
        raise RunnerLinesError(f"line {len(lines)}: cut short (no newline at its end)")
    if lines[0] != HEAD:
        raise RunnerLinesError(f"line 1: expected '{HEAD}', read '{lines[0][:80]}'")
    records: list = []
    for number, line in enumerate(lines[1:-1], start=2):
        if records and isinstance(records[-1], EndLine):
            raise RunnerLinesError(f"line {number}: a record after END")
        records.append(parse_line(line, number))
    return ChildLines(tuple(records))


def to_runtime(child: ChildLines):
    """The :class:`~pte_lab.experiments.device_placement.RuntimeResult` the runner's document holds for a
    child that said everything (its steps and arenas as the document's dicts)."""
    rt = child.runtime
    if rt is None or not child.ended:
        raise RunnerLinesError("the lines end before their RUNTIME and END records")
    arenas = [{"when": a.when, "methods": a.methods, "runtime_index": a.runtime_index, "mem_id": a.mem_id,
               "device": a.device, "bytes": a.bytes, "memory": a.memory, "why": a.why,
               "touched_by": list(a.touched_by)} for a in child.of(ArenaLine)]
    return RuntimeResult(label=rt.label, python=None, executorch_version=rt.executorch_version,
                         measured_by=rt.measured_by, host_measured_by=rt.host_measured_by,
                         steps=[asdict(s) for s in child.of(StepLine)], failure=rt.failure, runner=rt.runner,
                         backend=rt.backend, arenas=arenas, notes=[n.text for n in child.of(NoteLine)])
