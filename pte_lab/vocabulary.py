"""Names that cross modules and reach the command line: the one home of each list, importable without numpy.

The command-line parser offers these as choices before anything heavy is imported (``pte-lab --help`` and a
kept answer stay fast); the modules that act on them import them from here.
"""

from __future__ import annotations

from enum import Enum
from types import MappingProxyType
from collections.abc import Mapping

# what an instruction calls and what made a planned tensor: records in a module of their own (pte_lab.format
# makes DelegateSegment)
from .call_targets import CallTarget, DelegateCall, DelegateSegment, MadeBy, OperatorTarget, ViewOf

__all__ = ["PLANNER_NAMES", "BUDGET_KINDS", "INPUT_LIMIT_ENV", "DEFAULT_INPUT_LIMIT", "Word", "Role", "ValueKind",
           "InstructionKind", "SegmentKind", "FileKind", "Region", "RUNTIME_OPS", "OperatorTarget", "DelegateCall",
           "DelegateSegment", "ViewOf", "CallTarget", "MadeBy", "Pool", "MemoryPart",
           "Configuration"]


class Word(str, Enum):
    """An identifier that documents write as a word: a ``str`` enum whose member compares and hashes as its value,
    and prints, formats and reprs as it (``'view'``, never ``<Role.VIEW: 'view'>``), so every JSON and text
    document, table and dataclass repr reads as the plain string did. The base of this module's enums."""

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        return str.__format__(self, spec)

    def __repr__(self) -> str:
        return str.__repr__(self)


class Role(Word):
    """A planned tensor's role: the ``role`` of :class:`pte_lab.model.analysis.PlannedTensor` and of the
    ``tensors`` table (``pte_lab.model.roles`` says which tensor has which, and what each means).

    Its values are the words every document already writes (:class:`Word`). Compare a role with a member,
    never a literal.
    """

    INPUT = "input"
    OUTPUT = "output"
    INPUT_OUTPUT = "input_output"
    INTERMEDIATE = "intermediate"
    MUTABLE_BUFFER = "mutable_buffer"
    VIEW = "view"
    UNUSED = "unused"


class ValueKind(Word):
    """What an EValue of an execution plan holds: the ``KernelTypes`` union of ExecuTorch's ``program.fbs``,
    named as the schema names it (the ``kind`` of :class:`pte_lab.format.RawValue` and of a method's inputs and
    outputs)."""

    NONE = "None"
    NULL = "Null"
    INT = "Int"
    BOOL = "Bool"
    DOUBLE = "Double"
    TENSOR = "Tensor"
    STRING = "String"
    INT_LIST = "IntList"
    DOUBLE_LIST = "DoubleList"
    BOOL_LIST = "BoolList"
    TENSOR_LIST = "TensorList"
    OPTIONAL_TENSOR_LIST = "OptionalTensorList"


class InstructionKind(Word):
    """What an instruction of an execution plan does: the ``InstructionArguments`` union of ExecuTorch's
    ``program.fbs``, named as the schema names it (the ``kind`` of :class:`pte_lab.format.program_tables.RawInstruction` and of
    :class:`pte_lab.model.method.Instruction`). Compare a kind with a member, never a literal."""

    KERNEL_CALL = "KernelCall"
    DELEGATE_CALL = "DelegateCall"
    MOVE_CALL = "MoveCall"
    JUMP_FALSE_CALL = "JumpFalseCall"
    FREE_CALL = "FreeCall"


class SegmentKind(Word):
    """What the program uses a segment of its file for (the ``kind`` of :class:`pte_lab.format.program_tables.RawSegment` and
    :class:`pte_lab.model.pte.Segment`). A delegate's blob is a :class:`~pte_lab.call_targets.DelegateSegment` beside these, since it
    carries its backend."""

    CONSTANTS = "constants"
    NAMED_DATA = "named_data"
    MUTABLE_DATA = "mutable_data"
    UNUSED = "unused"


class FileKind(Word):
    """What a file is: from its identifier (``pte_lab.format.identify``), a program (``.pte``), a bundled
    program (``.bpte``) or a data file (``.ptd``); or a native program package (``.ptn``, a ZIP archive: told
    by what it holds, never by bytes 4..8, so ``identify`` never says it)."""

    PROGRAM = "program"
    BUNDLED = "bundled"
    DATA = "data"
    PACKAGE = "package"


class Region(Word):
    """What a span of a program file holds: the ``region`` of :class:`pte_lab.model.layout.LayoutRow` (``pte-lab
    inspect --layout``, ``Pte.file_layout()``, the diff's file rows). Its values are the words every document
    already writes (:class:`Word`); compare a region with a member, never a literal."""

    #: the flatbuffer prelude and ExecuTorch's extended header
    HEADER = "header"
    #: the program's tables (the flatbuffer less the data stored inline in it)
    FLATBUFFER = "flatbuffer"
    #: a constant stored inline in the flatbuffer (the deprecated constant_buffer table)
    INLINE_CONSTANT = "inline constant"
    #: a delegate blob stored inline in the flatbuffer
    INLINE_DELEGATE = "inline delegate"
    #: a constant buffer of the constant segment
    CONSTANT = "constant"
    #: a delegate blob in a segment of its own
    DELEGATE = "delegate"
    NAMED_DATA = "named data"
    MUTABLE_DATA = "mutable data"
    #: a segment no table reads
    UNUSED_SEGMENT = "unused segment"
    #: bytes between regions, or after the last one
    PADDING = "padding"


class Pool(Word):
    """A pool a bare-metal build gives a method, as ``Sizes.pools()``' columns and a diff's pools name it: the
    planned buffers (the file's), the method pool (the method allocator's) and the temp pool (the temp
    allocator's). :attr:`parts` says which :class:`MemoryPart` figures it is made of."""

    PLANNED_BUFFERS = "planned_buffers"
    METHOD_POOL = "method_pool"
    TEMP_POOL = "temp_pool"

    @property
    def parts(self) -> "tuple[MemoryPart, ...]":
        """The parts whose sum is this pool (the temp pool: the temp allocator beyond the delegates' scratch,
        and that scratch)."""
        return {Pool.PLANNED_BUFFERS: (MemoryPart.PLANNED_ARENAS,),
                Pool.METHOD_POOL: (MemoryPart.METHOD_ALLOCATOR,),
                Pool.TEMP_POOL: (MemoryPart.TEMP_ALLOCATOR, MemoryPart.DELEGATE_SCRATCH)}[self]


class Configuration(Word):
    """How a method's pools are given when it is sized and run (``pte_lab.runtime.sizing.CONFIGURATIONS`` says
    each in a sentence)."""

    #: a method pool and a temp pool (kernel resolution and the delegates' scratch take the temp pool)
    METHOD_TEMP = "method + temp"
    #: a method pool and no temp allocator (MemoryManager's temp_allocator nullptr, as many runners pass)
    METHOD_ALONE = "method alone"


class MemoryPart(Word):
    """A part of a method's run-time memory (the keys of ``MethodSizes.parts()``, the ``part`` of the sizes
    table and of a diff's run-time rows), in the order a stacked bar draws them. Its value is the phrase every
    document already writes (:class:`Word`); what each is and who measured it is
    ``pte_lab.runtime.sizing.PARTS``'."""

    PLANNED_ARENAS = "planned arenas"
    METHOD_ALLOCATOR = "method allocator"
    DELEGATE_SCRATCH = "delegate scratch"
    TEMP_ALLOCATOR = "temp allocator"
    HEAP_LOAD_PROGRAM = "heap kept by load_program"
    HEAP_LOAD_METHOD = "heap kept by load_method"
    HEAP_EXECUTE = "heap kept by execute"
    ANONYMOUS_MAPPINGS = "anonymous mappings"
    FILE_RESIDENT = "program file resident"

    @property
    def measured_here(self) -> bool:
        """A host-dependent measurement (the heap, mappings, resident pages: they move with the CPU, the
        allocator and the run): never budgeted, and given as the range seen over fresh runs."""
        return self in _MEASURED_HERE

    @property
    def pool(self) -> Pool | None:
        """The pool this part's figure is (the planned arenas, the method allocator); None for the others."""
        return {MemoryPart.PLANNED_ARENAS: Pool.PLANNED_BUFFERS, MemoryPart.METHOD_ALLOCATOR: Pool.METHOD_POOL}.get(self)

    @property
    def remainder_of(self) -> Pool | None:
        """The pool this part is the rest of, less another part (the temp allocator: the temp pool beyond the
        delegates' scratch), not a figure measured on its own; None for the others."""
        return Pool.TEMP_POOL if self is MemoryPart.TEMP_ALLOCATOR else None

    @property
    def abi_dependent(self) -> bool:
        """Its size depends on the ABI (the pools whose allocations hold pointers and vectors of them)."""
        return self in (MemoryPart.METHOD_ALLOCATOR, MemoryPart.TEMP_ALLOCATOR)


_MEASURED_HERE = frozenset({MemoryPart.HEAP_LOAD_PROGRAM, MemoryPart.HEAP_LOAD_METHOD, MemoryPart.HEAP_EXECUTE,
                            MemoryPart.ANONYMOUS_MAPPINGS, MemoryPart.FILE_RESIDENT})

#: the namespaces of the operators ExecuTorch's runtime itself inserts (device copies, views, prim ops), as an
#: operator target starts: no partitioner or delegate takes them
RUNTIME_OPS = ("et_copy::", "executorch_prim::")

#: the planners :func:`pte_lab.planning.replan` takes (``pte-lab replan --algorithm``): ExecuTorch's greedy and
#: three heuristics, which plan arenas of any size, then the exhaustive search (tiny arenas only);
#: :data:`pte_lab.planning.PLANNERS` maps each to its function
PLANNER_NAMES = ("greedy", "best_fit", "first_fit", "naive", "optimal")

#: what a budget can hold (``pte-lab diff --fail-if-grows PCT --budget-on KIND``), each kind -> what it checks:
#: the default holds them all
BUDGET_KINDS: Mapping[str, str] = MappingProxyType({
    "file": "the file's bytes",
    "planned": "the planned bytes (of each method compared, and their sum with several)",
    "scratch": "the scratch each delegate call declares, and the largest of a method's (its temp pool holds it)",
    "pools": "the method pool and temp pool of each method sized (with --sizes)"})

#: the environment variable that sets the most bytes pte_lab builds at sizes a file declares (bytes, or a size
#: with KiB, MiB or GiB); ``max_input_bytes=`` (the CLI's ``--max-input-bytes``) wins over it
INPUT_LIMIT_ENV = "PTE_LAB_MAX_INPUT_BYTES"
#: the most bytes pte_lab builds at sizes a file declares (one run's inputs, with what goes with them), unless
#: raised
DEFAULT_INPUT_LIMIT = 1 << 30
