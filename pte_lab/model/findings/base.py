"""What every finding is: a :class:`Kind` (a stable identifier with one severity), the method it is about,
its claim, and the typed details of its kind (a :class:`Details` record, made beside its rule); a finding that
prescribes carries its bytes at stake and its change apart from its claim (a :class:`~pte_lab.model.findings.base.Prescription`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from ...printable import printable_text
from ..plan_edit import PlanEdit

__all__ = ["Kind", "Finding", "Details", "ValuesDetails", "Prescription", "SEVERITIES", "UNSAFE_TO_LOAD",
           "REFUSED_BY_RUNTIME", "REFUSED_BEFORE_LOADING"]

SEVERITIES = ("info", "warning", "error")


class Kind(str, Enum):
    """A stable identifier of a finding (compares equal to its string) and its severity."""

    def __new__(cls, value: str, severity: str):
        obj = str.__new__(cls, value)
        obj._value_ = value
        obj.severity = severity
        return obj

    __str__ = str.__str__
    __format__ = str.__format__

    #: host-only methods share one set of host arenas under Runtime.load_program
    SHARED_ARENAS = ("shared_arenas", "warning")
    #: methods plan the same state (same name, arena and offset): a prefill and a decode sharing a KV cache
    SHARED_STATE = ("shared_state", "info")
    #: methods plan shared state, but a loader gives one of them private arenas: its state is its own
    STATE_NOT_SHARED = ("state_not_shared", "warning")
    #: constants live in an external .ptd file
    EXTERNAL_DATA = ("external_data", "info")
    #: the .ptd given with the program lacks keys the program needs
    EXTERNAL_DATA_MISSING = ("external_data_missing", "error")
    #: constants stored inline in the deprecated constant_buffer table: ExecuTorch 1.5.1 refuses the file
    CONSTANT_BUFFER_PATH = ("constant_buffer_path", "error")
    #: identical blobs (constants, delegate blobs, named data) stored more than once in the file
    DUPLICATE_BLOBS = ("duplicate_blobs", "warning")
    #: several execution plans share a name: ExecuTorch only ever finds the first
    DUPLICATE_METHOD = ("duplicate_method", "warning")
    #: an arena lives on a device: loading needs that device's allocator
    DEVICE_ALLOCATOR = ("device_allocator", "info")
    #: tensors tagged for a device are planned in host arenas
    DEVICE_TAG_IN_HOST_ARENA = ("device_tag_in_host_arena", "warning")
    #: host tensors are planned in device arenas
    HOST_TENSOR_IN_DEVICE_ARENA = ("host_tensor_in_device_arena", "warning")
    #: the method jumps backwards; lifetimes inside the loop are extended
    LOOPS = ("loops", "info")
    #: inputs or outputs whose memory the caller provides
    UNPLANNED_IO = ("unplanned_io", "info")
    #: two live tensors overlap in memory
    PLAN_OVERLAP = ("plan_overlap", "error")
    #: a tensor runs past the end of its arena
    OUTSIDE_ARENA = ("outside_arena", "error")
    #: a tensor names an arena the method does not have
    UNKNOWN_ARENA = ("unknown_arena", "error")
    #: an arena is tagged for a device ExecuTorch cannot name (an unknown type, a negative index)
    UNKNOWN_DEVICE = ("unknown_device", "error")
    #: a kernel writes a tensor that has no memory (not planned, not a constant, not an input or output)
    UNBACKED_TENSOR = ("unbacked_tensor", "error")
    #: one segment is read as two kinds of data (a reference retargeted into another table's data)
    SEGMENT_ROLES = ("segment_roles", "error")
    #: a control instruction names a value of the wrong kind (FreeCall of a non-tensor: the runtime aborts)
    OPERAND_KINDS = ("operand_kinds", "error")
    #: a kernel call passes a value of a kind its operator's schema does not take (the kernel aborts)
    OPERATOR_ARGUMENTS = ("operator_arguments", "error")
    #: operators whose schema pte_lab found nowhere: the kinds of their arguments are not checked
    UNCHECKED_OPERATORS = ("unchecked_operators", "info")
    #: delegates called with different arguments read one blob: one compiles another's graph
    SHARED_DELEGATE_BLOB = ("shared_delegate_blob", "error")
    #: a delegate blob does not begin the way its backend's blobs do
    DELEGATE_BLOB_FORMAT = ("delegate_blob_format", "error")
    #: a delegate takes memory outside the plan at every execute (Ethos-U: its scratch from the temp allocator)
    DELEGATE_SCRATCH = ("delegate_scratch", "info")
    #: a delegate's input/output descriptors do not match the tensors the call passes: refused at execute
    DELEGATE_IO = ("delegate_io", "error")
    # what to change, with the bytes it recovers (each carries a Prescription)
    #: an arena planned above its lower bound: a replan from the file's lifetimes recovers the difference
    ARENA_ABOVE_BOUND = ("arena_above_bound", "info")
    #: a dynamic input's upper bound drives most of an arena (every dynamic tensor is planned at its bound)
    DYNAMIC_BOUND = ("dynamic_bound", "info")
    #: delegate blobs stored inside the flatbuffer: a FileDataLoader keeps them in the heap with the program
    INLINE_DELEGATE_DATA = ("inline_delegate_data", "warning")
    #: operators left between delegate calls: one graph split into several calls, tensors crossing planned
    DELEGATE_SPLIT = ("delegate_split", "info")
    #: operators a delegated method runs outside its delegate calls, wherever they run: the bytes they plan
    OUTSIDE_DELEGATE = ("outside_delegate", "info")
    #: a decomposed attention's [L, L] score planes (and its safe softmax's) make the peak of an arena
    ATTENTION_SCORES = ("attention_scores", "info")


#: plan errors that would make ExecuTorch read or write outside its buffers: never loaded
UNSAFE_TO_LOAD = frozenset({Kind.UNKNOWN_ARENA, Kind.OUTSIDE_ARENA, Kind.UNKNOWN_DEVICE, Kind.UNBACKED_TENSOR,
                            Kind.SEGMENT_ROLES, Kind.OPERAND_KINDS})
#: findings that predict ExecuTorch's runtime will refuse the program (named with its refusal)
REFUSED_BY_RUNTIME = frozenset({Kind.CONSTANT_BUFFER_PATH})
#: findings (from operator schemas the runtime layer looks up) that pte_lab.load refuses before ExecuTorch
#: sees the method: the kernel would abort the process
REFUSED_BEFORE_LOADING = frozenset({Kind.OPERATOR_ARGUMENTS})


@dataclass(frozen=True)
class Details:
    """What a finding of one kind carries beside its message: each kind that carries data has its own record
    (a frozen dataclass defined beside the rule that makes it)."""


@dataclass(frozen=True)
class Prescription(Details):
    """What a finding that prescribes carries first: the bytes at stake and the change that recovers them
    (its wording, made beside the rule), each a field of its own beside the finding's claim: the message
    (:attr:`Finding.message`) is the claim and the change joined, never split back."""

    #: bytes the change recovers (at most: a bound, or the bytes of the tensors it concerns)
    at_stake: int
    #: the change, in words (an export option, a command, a model edit)
    change: str
    #: the same change as the planned tensors it removes, where it is one on the file's own graph (None: it is
    #: not: a smaller bound, a replan, a fused operator that writes other tensors); ``pte-lab what-if --apply``
    #: replans the method with it made
    edit: PlanEdit | None = field(default=None, kw_only=True)


@dataclass(frozen=True)
class ValuesDetails(Details):
    """The values a finding is about (tensors misplaced, unbacked, or whose memory the caller provides)."""

    values: tuple[int, ...]


@dataclass(frozen=True)
class Finding:
    """Something pte_lab found in a program (:attr:`Method.findings`, :attr:`Pte.findings`): its kind, the
    method it is about, its claim, and the kind's record (for a finding that prescribes, a
    :class:`~pte_lab.model.findings.base.Prescription`: the bytes at stake and the change, fields apart from the claim)."""
    kind: Kind
    #: the method it is about; None for the whole program
    method: str | None
    #: what the finding observes, without the change it prescribes (:attr:`change`): a summary shows this
    claim: str
    #: the kind's record (None for a kind that carries nothing but its claim)
    details: Details | None = field(default=None, compare=False)

    @property
    def message(self) -> str:
        """The whole finding in one sentence: its claim, then (for a finding that prescribes) ``"; "`` and the
        change that recovers its bytes at stake."""
        change = self.change
        return f"{self.claim}; {change}" if change else self.claim

    @property
    def at_stake(self) -> int | None:
        """Bytes the finding's change recovers (None: the finding prescribes nothing)."""
        return self.details.at_stake if isinstance(self.details, Prescription) else None

    @property
    def change(self) -> str | None:
        """What to change to recover :attr:`at_stake` (None: the finding prescribes nothing)."""
        return self.details.change if isinstance(self.details, Prescription) else None

    @property
    def edit(self) -> PlanEdit | None:
        """The change as the planned tensors it removes (None: not expressible so, or no change)."""
        return self.details.edit if isinstance(self.details, Prescription) else None

    @property
    def severity(self) -> str:
        """"info", "warning" or "error" (fixed by the kind)."""
        return self.kind.severity

    def __str__(self) -> str:
        where = f"[{self.method}] " if self.method else ""
        return printable_text(f"{self.severity}: {where}{self.message}")
