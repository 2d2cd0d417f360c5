"""The errors pte_lab raises. Every one is a :class:`PteLabError`."""

from __future__ import annotations

__all__ = [
    "PteLabError", "PteFormatError", "NativeBuildError", "RunnerLinesError", "DeviceAllocationError",
    "BackendUnavailableError", "MemoryBudgetError", "RuntimeCrashedError", "ExecuTorchError",
    "OperatorMissingError", "NotAProgramError", "PackageError", "InputError", "ETRecordError",
    "NotFoundError", "UnknownDeviceError", "PteLabBug", "bug_line", "BUG_EXIT_CODE", "CHECK_FAILED", "TARGET_CHANGED",
    "NOT_RUN_HERE",
]


class PteLabError(Exception):
    """Base class of every error pte_lab raises on purpose: ``except pte_lab.PteLabError`` catches them all."""


class NotFoundError(PteLabError, KeyError):
    """Raised when a name asked for (a method, a test suite) is not in the file; the message lists what is."""

    def __str__(self) -> str:  # the message, not KeyError's repr of it
        return str(self.args[0]) if self.args else ""


class ArgumentTypeError(PteLabError, TypeError):
    """Raised by a public function given an argument of a kind it does not take (``pte_lab.open(path,
    etrecord=123)``): the message names the function, the argument, what it takes and what it got."""


class ArgumentValueError(PteLabError, ValueError):
    """Raised by a public function given an argument of the right kind but a value it does not take
    (``runs=0``, a loader it does not know, a method the program lacks): the message names the argument and
    what it takes."""


class UnknownDeviceError(PteLabError, ValueError):
    """Raised for a device name or type code that ExecuTorch does not define (``device7``, ``"tpu:0"``)."""


#: the exit status of ``pte-lab`` when pte_lab itself failed (a bug), apart from bad input (2)
BUG_EXIT_CODE = 3
#: ``pte-lab``'s exit status when a check failed: a verification, ``diff --fail-if-grows``'s budget exceeded
CHECK_FAILED = 1
#: ``diff --fail-if-grows``'s exit status when the deployment changed (a delegate's backend, target or memory
#: mode, bytes from flash to RAM, a method gone), unless ``--allow-target-change``; it wins over
#: :data:`CHECK_FAILED`
TARGET_CHANGED = 4
#: ``pte-lab``'s exit status when nothing failed but a method could not run on this host (its backend is not in
#: this ExecuTorch build, and pte_lab has no stand-in for it): what the file declares was printed, what only
#: running tells was not measured. Not a failed check: :data:`CHECK_FAILED` and :data:`TARGET_CHANGED` win over it
NOT_RUN_HERE = 5
#: where a bug in pte_lab is reported, and how to see its traceback
BUG_REPORT = ("please report it to pte_lab's maintainers with the file that caused it "
              "(set PTE_LAB_DEBUG=1 or pass --debug for the traceback)")


def bug_line(exc: BaseException) -> str:
    """The one line that says an exception is a bug in pte_lab: its type, its message's first line, where to report."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    if len(first) > 300:
        first = first[:300] + "..."
    what = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return f"internal error (a bug in pte_lab, not in your file): {what}; {BUG_REPORT}"


class PteLabBug(PteLabError, RuntimeError):
    """pte_lab itself failed (an exception it did not mean to raise): a bug, reported as one line.

    The original exception is ``__cause__`` (and ``original``).
    """

    def __init__(self, original: BaseException):
        super().__init__(bug_line(original))
        self.original = original


class PteFormatError(PteLabError, ValueError):
    """Raised when the bytes are not a valid ``.pte`` program (by ``open``, ``load``, ``diff``, the CLI).

    The message names what is wrong and where (a byte offset or a field path
    such as ``program.execution_plan[0].values[12]``).
    """


class NotAProgramError(PteFormatError):
    """Raised when the file is something else than the program expected (a ZIP archive, a ``.ptd``, an ETDump, a
    TensorFlow Lite or ONNX model...): the message says what it is and what to do instead.

    ``kind`` names what it is (a :class:`pte_lab.format.mixups.MixupKind`, which compares equal to its word: see
    :data:`pte_lab.format.mixups.MIXUPS`; ``MixupKind.UNKNOWN``, ``"unknown"``, when pte_lab does not recognise it).
    """

    def __init__(self, message: str, *, kind: str):
        super().__init__(message)
        self.kind = kind


class PackageError(PteFormatError):
    """Raised for a ``.ptn`` package (ExecuTorch's native program package) that cannot be read: not a complete
    ZIP archive, a member compressed, encrypted, outside the file, overlapping another or named with a path
    (``..``, ``/``, ``\\``), no ``program.ptg``, or a safetensors header or ``aliases.json`` that does not hold
    together. The message is one line naming the file and what is wrong."""


class NotARegularFileError(PteFormatError):
    """Raised for a path that is not a regular file (a folder, a FIFO, a device such as ``/dev/zero``, a
    socket): pte_lab reads programs, data files and ETRecords from regular files only, and refuses anything
    else before reading a byte of it (a FIFO would block, a device would never end)."""


class UnreadableFileError(PteLabError, OSError):
    """Raised for a path the system will not open for pte_lab (no permission, a name too long, a NUL byte in
    it, a socket): an ``OSError`` with its ``errno`` and ``filename``, said in one line."""

    def __str__(self) -> str:
        from .printable import printable

        if self.filename is None:
            return super().__str__()
        name = printable(self.filename)
        name = name if len(name) <= 160 else f"{name[:70]}...({len(name) - 140:,} characters)...{name[-70:]}"
        return f"{name}: {self.strerror}"


class FileMissingError(UnreadableFileError, FileNotFoundError):
    """Raised for a path where there is no file: a :class:`FileNotFoundError` (``except FileNotFoundError``
    catches it) that is also a :class:`PteLabError`."""


class ETRecordError(PteFormatError):
    """An ETRecord that cannot be read (not a ZIP, truncated, crafted) or that belongs to another program."""


class InputError(PteLabError, ValueError):
    """Raised when the inputs given to a method are not what it takes: their number, a tensor's dtype or shape, or a
    scalar's value (ExecuTorch's ``set_input`` accepts only the value a scalar was exported with).

    Found before ExecuTorch is called; ``method`` names the method and ``position`` the input (None when
    the number of inputs is wrong).
    """

    def __init__(self, message: str, *, method: str, position: int | None = None):
        super().__init__(message)
        self.method = method
        self.position = position


class NativeBuildError(PteLabError, RuntimeError):
    """Raised when pte_lab's small native helper (the emulated device) could not be built.

    Everything else in pte_lab keeps working; the message says what to install.
    """


class RunnerLinesError(PteLabError, ValueError):
    """A line of the before/after runner's child is not its line protocol (``native/placement_lines.h``):
    the message names the line and what is wrong with it."""


class DeviceAllocationError(PteLabError, RuntimeError):
    """Raised when a method's planned arena could not be allocated on its device (at ``load_method``).

    Attributes name the method, the arena (``mem_id`` as in the file and
    ``runtime_index`` as ExecuTorch prints it), the device and the bytes.
    """

    def __init__(self, message: str, *, method: str, mem_id: int | None, runtime_index: int | None,
                 device: str | None, nbytes: int | None, runtime_message: str = ""):
        super().__init__(message)
        self.method = method
        self.mem_id = mem_id
        self.runtime_index = runtime_index
        self.device = device
        self.nbytes = nbytes
        self.runtime_message = runtime_message


class BackendUnavailableError(PteLabError, RuntimeError):
    """Raised when a method delegates to a backend this ExecuTorch build does not register, or registers but cannot use
    on this machine (its own library is missing: ``is_available()`` is false). Found before ``load_method``;
    ``registered`` lists the backends usable here."""

    def __init__(self, message: str, *, method: str, backend: str, registered: list[str]):
        super().__init__(message)
        self.method = method
        self.backend = backend
        self.registered = registered


class MemoryBudgetError(PteLabError, MemoryError):
    """Raised when loading would need more memory than is free; nothing was allocated.

    Pass ``force=True`` to :func:`pte_lab.load` to try anyway.
    """

    def __init__(self, message: str, *, step: str, method: str | None, device: str, needed: int,
                 available: int):
        super().__init__(message)
        self.step = step
        self.method = method
        self.device = device
        self.needed = needed
        self.available = available


class RuntimeCrashedError(PteLabError, RuntimeError):
    """Raised when the isolated ExecuTorch worker process died (a native abort or crash).

    The caller's process is unharmed. ``signal`` names the signal (e.g.
    ``SIGSEGV``) or is None for a plain exit; ``stderr`` holds its last lines.
    """

    def __init__(self, message: str, *, signal: str | None, exit_code: int | None, stderr: list[str]):
        super().__init__(message)
        self.signal = signal
        self.exit_code = exit_code
        self.stderr = stderr


#: ExecuTorch's ``Error`` codes (``runtime/core/error.h`` of executorch 1.5.1) and their names
EXECUTORCH_ERROR_CODES = {
    0x00: "Ok", 0x01: "Internal", 0x02: "InvalidState", 0x03: "EndOfMethod", 0x04: "AlreadyLoaded",
    0x10: "NotSupported", 0x11: "NotImplemented", 0x12: "InvalidArgument", 0x13: "InvalidType",
    0x14: "OperatorMissing", 0x15: "RegistrationExceedingMaxKernels", 0x16: "RegistrationAlreadyRegistered",
    0x20: "NotFound", 0x21: "MemoryAllocationFailed", 0x22: "AccessFailed", 0x23: "InvalidProgram",
    0x24: "InvalidExternalData", 0x25: "OutOfResources", 0x30: "DelegateInvalidCompatibility",
    0x31: "DelegateMemoryAllocationFailed", 0x32: "DelegateInvalidHandle",
}

#: ExecuTorch's code for a pool or arena that is too small
MEMORY_ALLOCATION_FAILED = 0x21


def error_name(code: int) -> str:
    """ExecuTorch's error code as its users read it: ``MemoryAllocationFailed (0x21)``."""
    return f"{EXECUTORCH_ERROR_CODES.get(code, 'unknown error')} (0x{code:02x})"


class ExecuTorchError(PteLabError, RuntimeError):
    """ExecuTorch's runtime refused or failed a step (loading the program or a method, executing).

    The same in-process and with ``isolate=True``: ``step`` is the step
    ("load_program", "load_method", "execute"...), ``method`` the method (None
    for the program), ``code`` and ``code_name`` ExecuTorch's error code and
    its name (``0x14``, ``"OperatorMissing"``) when the runtime gave one,
    ``runtime_type`` and ``runtime_message`` what the runtime raised, verbatim,
    and ``native_output`` the last lines ExecuTorch wrote to stderr.
    """

    def __init__(self, message: str, *, step: str, method: str | None, runtime_type: str, runtime_message: str,
                 code: int | None = None):
        super().__init__(message)
        self.step = step
        self.method = method
        self.runtime_type = runtime_type
        self.runtime_message = runtime_message
        self.code = code
        self.code_name = EXECUTORCH_ERROR_CODES.get(code) if code is not None else None
        #: ExecuTorch's last native output lines (its diagnostics, kept out of the notebook until now)
        self.native_output: list[str] = []


class OperatorMissingError(PteLabError, RuntimeError):
    """Raised when a method calls operators this ExecuTorch runtime does not register (found before loading it).

    ``operators`` lists them; the message says which library provides them
    where pte_lab knows one.
    """

    def __init__(self, message: str, *, method: str, operators: list[str]):
        super().__init__(message)
        self.method = method
        self.operators = operators


class DeclaredSizeError(MemoryBudgetError):
    """Raised before pte_lab builds something at a size a file declares (a method's inputs at their shapes, the
    sizing runner's input buffers, ETDump's debug buffer) when its bytes are over the limit: the most pte_lab
    builds at a declared size (``PTE_LAB_MAX_INPUT_BYTES``, ``max_input_bytes=``, ``--max-input-bytes``), or the
    memory free on this machine. Nothing was built; the message gives the declared bytes, exactly.

    ``needed`` is those bytes, ``available`` the limit they were compared with, ``limit_source`` where it comes
    from (``"max_input_bytes"``, ``"PTE_LAB_MAX_INPUT_BYTES"``, ``"default"`` or ``"free memory"``); ``step``
    says what was to be built.
    """

    def __init__(self, message: str, *, step: str, method: str | None, needed: int, available: int,
                 limit_source: str):
        super().__init__(message, step=step, method=method, device="cpu", needed=needed, available=available)
        self.limit_source = limit_source


__all__ += ["DeclaredSizeError"]
