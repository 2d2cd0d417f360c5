"""What the sizing runner (:mod:`pte_lab.runtime.sizing_runner`) hands back, as plain records: they cross the worker's
pipe, and a kept sizing holds them (:mod:`pte_lab.runtime.kept`), so this module imports nothing of the runner's
machinery (ctypes, the native library): a kept answer reads them without it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from ..errors import error_name

__all__ = ["RunnerResult", "Step", "StepKind", "StepUse", "PoolUse", "MethodIO", "INPUT_VALUES", "failure"]

#: what the runner sets each input to before every execute, by kind
INPUT_VALUES = {"Tensor": "zeros at the planned (upper-bound) shape",
                "other": "the value the program holds (set_input accepts no other)"}


@dataclass(frozen=True)
class MethodIO:
    """One input or output of a method as ExecuTorch's MethodMeta reads it, and what the runner set it to."""

    index: int
    #: ExecuTorch's Tag name ("Tensor", "Int", "Bool", "Double", "None", ...) and number: the runtime's names for a
    #: tensor and the scalars are the schema's (compare them with :class:`pte_lab.vocabulary.ValueKind` members)
    kind: str
    tag: int = 1
    #: ExecuTorch's ScalarType code (None: not a tensor)
    scalar_type: int | None = None
    #: the planned (upper-bound when dynamic) shape, its dim order, its bytes
    shape: tuple[int, ...] = ()
    dim_order: tuple[int, ...] = ()
    nbytes: int = 0
    #: True: the tensor lives in a planned buffer (set_input copies into it); False: the caller's memory
    planned: bool = False
    #: a non-tensor input's value as the program holds it (None: not read)
    value: int | float | bool | None = None
    #: the shape is an upper bound (a dynamic dimension may be given smaller); from the file's plan
    dynamic: bool = False

    @property
    def dtype(self) -> str | None:
        from ..model.dtypes import SCALAR_TYPES  # here: the worker that makes these never imports the model

        return None if self.scalar_type is None else SCALAR_TYPES.get(self.scalar_type, (f"scalar type {self.scalar_type}",))[0]


@dataclass(frozen=True)
class PoolUse:
    """What the method and temp pools saw: high-water mark, allocations, refusals, largest alignment."""

    method_peak: int = 0
    method_calls: int = 0
    method_failed: int = 0
    method_max_alignment: int = 0
    temp_peak: int = 0
    temp_calls: int = 0
    temp_failed: int = 0
    temp_max_alignment: int = 0
    #: the temp allocator from the first execute on (what kernels and delegates take at run time; ExecuTorch
    #: resets it after each instruction): peak, allocations, and how many found the cursor off their alignment
    temp_run_peak: int = 0
    temp_run_calls: int = 0
    temp_run_padded: int = 0


class StepKind(Enum):
    """What the sizing runner does at one step, in the order it does them."""

    LOAD_PROGRAM = "load_program"
    METHOD_META = "method_meta"
    PREPARE = "prepare"
    LOAD_METHOD = "load_method"
    SET_INPUTS = "set_inputs"
    EXECUTE = "execute"


@dataclass(frozen=True)
class Step:
    """One step of the sizing runner: its kind and, for an execute and the inputs set before it, which run
    (1: the first)."""

    kind: StepKind
    index: int = 0

    @property
    def label(self) -> str:
        """The step as messages name it: ``load_method``, ``first_execute``, ``execute 2``,
        ``set_inputs before first_execute``."""
        if self.kind is StepKind.EXECUTE:
            return "first_execute" if self.index == 1 else f"execute {self.index}"
        if self.kind is StepKind.SET_INPUTS:
            return f"set_inputs before {Step(StepKind.EXECUTE, self.index).label}"
        return self.kind.value

    def __str__(self) -> str:
        return self.label


@dataclass(frozen=True)
class StepUse:
    """What the allocation counter saw around one step (bytes; negative: given back)."""

    #: heap still held after the step
    heap: int
    #: the heap's peak during the step, above what was held before it
    heap_peak: int
    #: anonymous mappings still held after the step
    anon: int
    #: file-backed mappings still held after the step
    file_mapped: int
    #: the program file's (and .ptd's) resident bytes gained during the step (None: unknown)
    file_rss: int | None


@dataclass
class RunnerResult:
    """One method loaded and run by the sizing runner."""

    method: str
    #: bytes Method::init asks of the temp pool per kernel argument to resolve an operator there
    resolution_bytes_per_arg: int
    #: ExecuTorch's error code of the first step that failed (0: none) and that step
    error: int = 0
    step: Step | None = None
    #: (mem_id, device, bytes) of each planned buffer, as ExecuTorch's MethodMeta reads it
    planned: tuple[tuple[int, str, int], ...] = ()
    #: per step (load_program, load_method, each execute), in the order they ran: the counter's
    #: figures, None where the counter is not preloaded
    steps: dict[Step, StepUse | None] = field(default_factory=dict)
    pools: PoolUse | None = None
    #: the program file's resident bytes after the runs (None: unknown)
    file_rss: int | None = None
    #: the method's inputs and outputs as MethodMeta reads them (empty when load_method failed)
    inputs: tuple[MethodIO, ...] = ()
    outputs: tuple[MethodIO, ...] = ()
    #: the platform layer the run had: False this host's (et_pal_allocate is malloc), True a bare-metal one's
    #: (et_pal_allocate refuses every request); what was asked of it (calls, the largest request in bytes,
    #: PlatformMemoryAllocator's node and padding included) and the calls it refused
    bare_metal: bool = False
    platform_calls: int = 0
    platform_largest: int = 0
    platform_refused: int = 0

    @property
    def ok(self) -> bool:
        return self.error == 0

    def fail(self, code: int, step: Step) -> "RunnerResult":
        """Record ``code`` at ``step`` unless an earlier step already failed."""
        if code and not self.error:
            self.error, self.step = int(code), step
        return self


def failure(r: RunnerResult) -> str:
    """What ExecuTorch said to a run, and at which step."""
    return f"{error_name(r.error)} at {r.step}"
