"""pte_lab: the lab bench for ExecuTorch memory in Jupyter.

>>> import pte_lab
>>> pte = pte_lab.open("model.pte")        # reads the header and flatbuffer only
>>> pte.methods["forward"].arenas          # sizes, devices, peak, size/peak
>>> pte.methods["forward"].tensors         # one row per planned tensor
>>> pte.load_cost("corrected")             # what Runtime.load_program allocates, when
>>> pte_lab.sizes("model.pte")             # every byte each method needs at run time, measured
>>> pte_lab.diff("old.pte", "new.pte")     # what changed in memory between two exports

``import pte_lab`` is light: submodules (and pandas, matplotlib, torch,
executorch) are imported only when used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .arguments import BOOL, NAMES, PATH_OR_BYTES, PROGRAM, SOURCE, TWO_NAMES, arguments, either, instance, optional
from .errors import (
    ArgumentTypeError,
    ArgumentValueError,
    BackendUnavailableError,
    DeviceAllocationError,
    ExecuTorchError,
    FileMissingError,
    InputError,
    MemoryBudgetError,
    NativeBuildError,
    NotAProgramError,
    NotARegularFileError,
    NotFoundError,
    OperatorMissingError,
    PackageError,
    PteFormatError,
    PteLabBug,
    PteLabError,
    RuntimeCrashedError,
    UnknownDeviceError,
    UnreadableFileError,
)

__version__ = "0.1.0"

__all__ = [
    "open", "load", "sizes", "diff", "explore", "what_if", "largest_bound", "usage_at", "what_if_from", "DataFile", "emulate_device", "runtime_info", "Pte", "Method", "Arena", "LabProgram", "LabMethod",
    "PteLabError", "PteFormatError", "DeviceAllocationError", "BackendUnavailableError", "MemoryBudgetError",
    "RuntimeCrashedError", "NativeBuildError", "ExecuTorchError", "OperatorMissingError", "NotAProgramError", "PackageError", "InputError",
    "NotFoundError", "UnknownDeviceError", "PteLabBug", "ArgumentTypeError", "ArgumentValueError",
    "FileMissingError", "UnreadableFileError", "NotARegularFileError",
    "__version__",
]

_LAZY = {
    "Pte": ("pte_lab.model", "Pte"),
    "DataFile": ("pte_lab.model", "DataFile"),
    "Method": ("pte_lab.model", "Method"),
    "Arena": ("pte_lab.model", "Arena"),
    "Finding": ("pte_lab.model", "Finding"),
    "Diff": ("pte_lab.model.diff", "Diff"),
    "load": ("pte_lab.runtime", "load"),
    "sizes": ("pte_lab.runtime", "sizes"),
    "emulate_device": ("pte_lab.runtime", "emulate_device"),
    "runtime_info": ("pte_lab.runtime", "runtime_info"),
    "LabProgram": ("pte_lab.runtime", "LabProgram"),
    "LabMethod": ("pte_lab.runtime", "LabMethod"),
    "explore": ("pte_lab.widgets", "explore"),
    "what_if": ("pte_lab.planning.at_bound", "what_if"),
    "largest_bound": ("pte_lab.planning.at_bound", "largest_bound"),
    "usage_at": ("pte_lab.planning.at_bound", "usage_at"),
    "what_if_from": ("pte_lab.planning.from_two_exports", "what_if_from"),
}
_SUBMODULES = {"format", "model", "views", "examples", "cli", "runtime", "plot", "widgets", "planning",
               "experiments", "units", "devices"}

if TYPE_CHECKING:  # pragma: no cover
    from .model import Arena, Method, Pte


@arguments(source=SOURCE,
           data=optional(either(SOURCE, instance("pte_lab.model.data_file", "DataFile", "a .ptd opened by pte_lab.open"))),
           etrecord=optional(either(PATH_OR_BYTES, instance("pte_lab.format.etrecord", "ETRecord", "an ETRecord"))))
def open(source, data=None, *, etrecord=None):  # the natural name, like io.open
    """Open a ``.pte``, a bundled ``.bpte``, a ``.ptd`` data file or a ``.ptn`` package (path, bytes or binary file).

    Nothing is loaded: only the tables are read. A program opens as a
    :class:`~pte_lab.model.Pte` (a ``.bpte`` as the program it carries, its test
    suites in ``pte.bundled``); ``data`` is the program's external ``.ptd``; ``etrecord`` the
    ETRecord ExecuTorch wrote beside it (path or bytes), so that each planned tensor names its FX
    node, module and source line (``Method.sources``, and columns of ``Method.tensors``).
    A ``.ptd`` alone opens as a :class:`~pte_lab.model.DataFile`; a ``.ptn`` (ExecuTorch 1.5.1's native program
    package, ``to_native(...).save``, or the ``program.ptg`` inside one) as a :class:`~pte_lab.model.NativePackage`:
    its methods, each graph tensor at its upper bound, its constants and state (it holds no memory plan).

    Parameters
    ----------
    source : str or os.PathLike or bytes or typing.BinaryIO
        The file: a path, its bytes, or a binary file open for reading (read from where it stands).
    data : str or os.PathLike or bytes or typing.BinaryIO or pte_lab.DataFile, optional
        The program's external ``.ptd`` (its named data), as a source or already opened; a program only.
    etrecord : str or os.PathLike or bytes or pte_lab.format.etrecord.ETRecord, optional
        The ETRecord exported with the program (``generate_etrecord=True``); nothing in it is unpickled.

    Returns
    -------
    pte_lab.Pte or pte_lab.DataFile or pte_lab.model.NativePackage
        The program (a :class:`~pte_lab.model.Pte`), the data file (a :class:`~pte_lab.model.DataFile`) when
        ``source`` is a ``.ptd``, or the package (a :class:`~pte_lab.model.NativePackage`) when it is a ``.ptn``.

    Raises
    ------
    PteFormatError
        For a file that is not a program or data file (:class:`NotAProgramError` for another kind of file,
        which it names), or one whose tables do not hold together; :class:`PackageError` for a ``.ptn`` that
        cannot be read (truncated, compressed or crafted members).
    ValueError
        For ``data`` or ``etrecord`` given with a ``.ptd`` or ``.ptn`` source.

    Examples
    --------
    ``pte_lab.open("model.pte").methods["forward"].arenas``
    """
    from .format import identify
    from .format.mixups import MixupKind
    from .model import open_data, open_package, open_pte
    from .vocabulary import FileKind

    seekable = hasattr(source, "read") and hasattr(source, "seek")
    start = source.tell() if seekable else 0
    kind = identify(source) if seekable else FileKind.PROGRAM
    if seekable:
        source.seek(start)
    if kind == FileKind.PROGRAM:  # read as a program (one open of the file); a .ptd or .ptn refused there is told apart
        try:
            return open_pte(source, data=data, etrecord=etrecord)
        except NotAProgramError as exc:
            if exc.kind in (MixupKind.PTN, MixupKind.PTG):
                kind = FileKind.PACKAGE
            elif exc.kind == MixupKind.PTD and identify(source) == FileKind.DATA:
                kind = FileKind.DATA
            else:
                raise
        if seekable:
            source.seek(start)
    what = {FileKind.DATA: "a .ptd file", FileKind.PACKAGE: "a .ptn package (ExecuTorch's native program package)"}[kind]
    if data is not None:
        raise ValueError(f"data= goes with a program (.pte/.bpte); this source is itself {what}")
    if etrecord is not None:
        raise ValueError(f"etrecord= goes with a program (.pte/.bpte); this source is itself {what}")
    return open_data(source) if kind == FileKind.DATA else open_package(source)


@arguments(a=PROGRAM, b=PROGRAM, sizes=BOOL, methods=optional(NAMES), labels=optional(TWO_NAMES))
def diff(a, b, *, sizes: bool = False, methods=None, labels: tuple[str, str] | None = None, progress=None):
    """What changed in memory from program ``a`` to program ``b``: a :class:`~pte_lab.model.diff.Diff`.

    Per method (matched by name): arenas, peak live, size/peak, planned bytes, instructions, tensors, state,
    and the planned tensors matched across the two (``pte_lab.model.diff.match_tensors``: what changed, what
    could not be matched); the file's regions and duplicate blobs; what each loader allocates.

    Parameters
    ----------
    a, b : str or os.PathLike or bytes or typing.BinaryIO or pte_lab.Pte
        The two programs: ``.pte`` or ``.bpte`` files (paths, bytes, binary files) or opened
        :class:`~pte_lab.model.Pte` objects.
    sizes : bool
        Also size both programs with :func:`pte_lab.sizes` (loads and runs every method in a worker: seconds;
        files on disk only) and set the parts side by side.
    methods : list of str, optional
        Limits the per-method part to those names.
    labels : tuple of str, optional
        Names the two sides (default: their paths).
    progress : bool or collections.abc.Callable, optional
        With ``sizes=True``: None (silent), True (a bar) or a callable taking one line per step
        (:mod:`pte_lab.progress`).

    Returns
    -------
    pte_lab.model.diff.Diff
        The comparison: ``methods``, ``regions``, ``load_cost``, ``budget(pct)``, ``to_dict()``.

    Raises
    ------
    PteFormatError
        For a file that is not a program.
    PteLabError
        For a name in ``methods`` that neither has, a ``.ptd`` given as a program, and with ``sizes=True``
        bytes rather than paths, or what :func:`pte_lab.sizes` raises.

    Examples
    --------
    ``pte_lab.diff("old.pte", "new.pte").budget(5)``
    """
    from .model import NativePackage, Pte
    from .model.diff import diff_programs

    sides = []
    for x in (a, b):
        p = x if isinstance(x, Pte) else open(x)
        if isinstance(p, NativePackage):  # no plan to compare: said as where any command needs one
            from .format.mixups import MIXUPS, MixupKind

            raise MIXUPS[MixupKind.PTN].error()
        if not isinstance(p, Pte):
            raise PteLabError(f"{p.path or 'that source'} is a .ptd data file: diff compares programs "
                              f"(.pte, .bpte)")
        sides.append(p)
    if sizes and any(p.path is None for p in sides):
        raise PteLabError("sizes=True sizes the programs by loading their files: give paths, not bytes")
    d = diff_programs(*sides, methods=methods, labels=labels)
    if sizes:
        from .runtime.sizing import sized_diff

        d = sized_diff(d, *sides, progress=progress)
    return d


def __getattr__(name: str):
    if name in _LAZY:
        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(mod), attr)
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'pte_lab' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | _SUBMODULES)
