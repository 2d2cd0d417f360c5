"""A whole ``.pte`` program: header, segments, methods and what loaders will do."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from .computed_once import cached_property
from typing import TYPE_CHECKING
from collections.abc import Iterator

import numpy as np

from ..errors import NotFoundError, PteFormatError, PteLabError
from ..format import RawProgram, Source, TensorDataLocation, read
from ..format.etrecord import ETRecord, read_etrecord
from ..units import count
from ..vocabulary import DelegateSegment, SegmentKind
from .arrays import isin
from .many_records import paused_gc
from .bundled import Bundled
from .ethos_u import DELEGATE_COLUMNS, Blobs, DelegateMemory, describe_io
from .data_file import DataFile, open_data
from .findings import Finding, duplicate_blob_findings, program_findings
from .layout import DUPLICATES, LAYOUT_COLUMNS, Layout, file_regions
from .load_cost import INT_COLUMNS, LOAD_COST_COLUMNS, LOADERS, Allocation, PlanArenas, allocation_columns
from .attribution import check_etrecord
from .method import Method

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["Pte", "Segment", "open_pte"]


@dataclass(frozen=True)
class Segment:
    """A segment of the file (:attr:`Pte.segments`): what it holds, its file offset and its bytes."""
    index: int
    #: a :class:`~pte_lab.vocabulary.SegmentKind`, or the :class:`~pte_lab.call_targets.DelegateSegment` of the
    #: delegate whose blob it holds (``"delegate:<backend>"``)
    kind: SegmentKind | DelegateSegment
    #: absolute file offset
    offset: int
    size: int


def _first_plans(raw: RawProgram) -> dict[str, int]:
    """Method name -> its plan's index: ExecuTorch's lookup, the first plan with the name."""
    index: dict[str, int] = {}
    for i, n in enumerate(raw.plan_names):
        index.setdefault(n, i)
    return index


class _Methods(Mapping):
    """``name -> Method``; each method is decoded the first time it is asked for."""

    def __init__(self, raw: RawProgram, blobs: Blobs | None = None, etrecord: ETRecord | None = None):
        self._raw = raw
        self._blobs = blobs
        self._etrecord = etrecord
        self._index = _first_plans(raw)
        self._cache: dict[str, Method] = {}

    def __getitem__(self, name: str) -> Method:
        m = self._cache.get(name)
        if m is None:
            if name not in self._index:
                raise NotFoundError(f"no method {name!r}; the program has {list(self._index)}")
            i = self._index[name]
            with paused_gc():  # a record per value and per instruction
                record = self._etrecord.method(name) if self._etrecord is not None else None
                m = self._cache[name] = Method(self._raw.plan(i), i, self._blobs, record)
        return m

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __repr__(self) -> str:
        return f"<methods {list(self._index)}>"


class _InstructionCounts(Mapping):
    """``name -> instruction count`` of a program's methods, each plan decoded when its count is asked for: what
    :func:`~pte_lab.format.etrecord.read_etrecord` checks an ETRecord against before reading its graphs."""

    def __init__(self, raw: RawProgram):
        self._raw = raw
        self._index = _first_plans(raw)

    def __getitem__(self, name: str) -> int:
        return len(self._raw.plan(self._index[name]).instructions)

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)


class Pte:
    """A ``.pte`` file read without loading it: open one with :func:`pte_lab.open`."""

    def __init__(self, raw: RawProgram, path: str | None = None, data: DataFile | None = None,
                 etrecord: ETRecord | None = None):
        self._raw = raw
        self.path = path
        #: the ETRecord given with the program (:mod:`pte_lab.format.etrecord`): the tensors then name
        #: their FX node, module and source line; None without one
        self.etrecord: ETRecord | None = etrecord
        #: the test suites, when the program came in a bundled program (``.bpte``); else None
        self.bundled: Bundled | None = Bundled(raw.bundled, raw.container) if raw.bundled is not None else None
        #: the external data file (``.ptd``) given with the program, if any
        self.data: DataFile | None = data
        h = raw.header
        self.file_size: int = h.file_size
        self.schema_version: int = raw.version
        self.identifier: str = h.identifier
        #: the program's delegate blobs and named data, read on demand (each Vela stream once)
        self._blobs = Blobs(raw, path, data)
        self.methods: Mapping[str, Method] = _Methods(raw, self._blobs, etrecord)
        if etrecord is not None:
            check_etrecord(self.method_names, etrecord, lambda n: self.methods[n].n_instructions)
        self._allocated: dict[str, dict[str, list]] = {}
        self._layouts: dict[bool, Layout] = {}

    # ------------------------------------------------------------ file layout
    @property
    def raw(self) -> RawProgram:
        """The decoded records of the file (:mod:`pte_lab.format`)."""
        return self._raw

    @property
    def header(self):
        return self._raw.header

    @property
    def flatbuffer_size(self) -> int:
        """Bytes of the program before its segments (the extended header's ``program_size``): the header, the
        flatbuffer's tables, inline constants and inline delegate data, together. Not what the views call the
        "flatbuffer" (the tables alone): ``flatbuffer_regions`` splits this into those
        four regions (``inspect --json``'s ``flatbuffer_size_regions``), and they sum to it."""
        return self._raw.header.program_size

    @cached_property
    def segments(self) -> list[Segment]:
        return [Segment(s.index, s.kind, s.offset, s.size) for s in self._raw.segments]

    @property
    def constant_bytes(self) -> int:
        """Bytes of constant data (weights): the constant segment plus inline buffers."""
        return self._raw.constant_bytes + self._raw.inline_constant_bytes

    @property
    def inline_constant_bytes(self) -> int:
        """Bytes of constants stored inline in the flatbuffer (the deprecated ``constant_buffer`` path)."""
        return self._raw.inline_constant_bytes

    @property
    def delegate_bytes(self) -> dict[str, int]:
        """Bytes of delegate blobs (processed data) per backend id."""
        return dict(self._raw.delegate_bytes)

    def delegate_memory(self) -> list[DelegateMemory]:
        """Every method's :attr:`Method.delegate_memory`, in method order."""
        return [d for m in self.methods.values() for d in m.delegate_memory]

    @property
    def delegates(self) -> "pd.DataFrame":
        """One row per delegate of every method (:data:`~pte_lab.model.ethos_u.DELEGATE_COLUMNS`): what its
        blob declares (Ethos-U: command stream, weights, scratch, the allocator and memory the scratch comes
        from, Vela's input/output descriptors) and the first problem ExecuTorch's reader would have with it."""
        import pandas as pd

        rows = [(d.method, d.index, d.backend, d.location, d.blob_bytes, d.target, d.memory_mode, d.command_bytes,
                 d.weight_bytes, d.scratch_bytes, d.scratch_from, d.scratch_lives,
                 None if d.stream is None or d.stream.inputs is None else tuple(map(describe_io, d.stream.inputs)),
                 None if d.stream is None or d.stream.outputs is None else tuple(map(describe_io, d.stream.outputs)),
                 d.problem) for d in self.delegate_memory()]
        df = pd.DataFrame(rows, columns=list(DELEGATE_COLUMNS))
        for c in ("command_bytes", "weight_bytes", "scratch_bytes"):
            df[c] = df[c].astype("Int64")
        return df

    @property
    def named_data_bytes(self) -> int:
        return sum(s.size for s in self.segments if s.kind == SegmentKind.NAMED_DATA)

    @property
    def named_data_keys(self) -> list[str]:
        return [k for k, _ in self._raw.named_data]

    @cached_property
    def _external_uses(self) -> dict[str, list[str]]:
        """key -> the methods whose constants come from that key of an external ``.ptd`` file."""
        uses: dict[str, list[str]] = {}
        for m in self.methods.values():
            raw = m.raw
            external = [k for k, r in enumerate(raw.records)  # one look per record, however many values share it
                        if r.tensor is not None and r.tensor.location == TensorDataLocation.EXTERNAL
                        and r.tensor.mem_id is None]
            for i in np.flatnonzero(isin(raw.record_of, external)).tolist():
                users = uses.setdefault(raw.values[i].tensor.fqn or f"{m.name}:value{i}", [])
                if m.name not in users:
                    users.append(m.name)
        return uses

    @property
    def external_keys(self) -> list[str]:
        """Constant tensors whose data lives in an external ``.ptd`` file."""
        return sorted(self._external_uses)

    def external_data(self) -> "pd.DataFrame":
        """Per key the program needs from a ``.ptd``: the methods using it, and (with ``data``) its bytes.

        Columns: key, methods, present (None without a data file), nbytes.
        """
        import pandas as pd

        have = {t.key: t for t in self.data.tensors} if self.data is not None else None
        rows = [(k, tuple(users), None if have is None else k in have,
                 have[k].nbytes if have is not None and k in have else None)
                for k, users in sorted(self._external_uses.items())]
        return pd.DataFrame(rows, columns=["key", "methods", "present", "nbytes"])

    def external_bytes_by_method(self) -> dict[str, int]:
        """Bytes of the attached ``.ptd`` each method maps (keys it uses that the file has)."""
        if self.data is None:
            return {}
        sizes = {t.key: t.nbytes for t in self.data.tensors}
        out: dict[str, int] = {}
        for key, users in self._external_uses.items():
            for m in users:
                out[m] = out.get(m, 0) + sizes.get(key, 0)
        return out

    @property
    def expects_external_data(self) -> bool:
        """True when constants must come from a separate ``.ptd`` data file."""
        return bool(self.external_keys)

    @property
    def method_names(self) -> list[str]:
        return list(self.methods)

    # ------------------------------------------------------------ load costs
    @cached_property
    def _plan_arenas(self) -> list[PlanArenas]:
        """Each method's arenas, as the loaders' model takes them (made once: three loaders ask)."""
        return [PlanArenas(m.name, m.raw.buffer_sizes, m.raw.buffer_devices) for m in self.methods.values()]

    def load_cost(self, loader: str = "corrected") -> "pd.DataFrame":
        """What ``loader`` allocates for planned arenas: one row per allocation, in order.

        ``loader`` is ``"corrected"`` (executorch >= 1.5 ``Runtime.load_program``),
        ``"legacy"`` (< 1.5) or ``"module"`` (``_load_for_executorch``); see
        :mod:`pte_lab.model.load_cost`. Columns: loader, step, method (missing
        for arenas shared by several methods), sharing, mem_id, runtime_index,
        device, bytes, used_by (the methods whose plans use the arena).
        """
        import pandas as pd

        columns = self.allocation_columns(loader)
        if not columns["mem_id"]:
            return pd.DataFrame([], columns=list(LOAD_COST_COLUMNS))
        n = len(columns["mem_id"])
        with paused_gc():  # a plan may have many arenas: typed columns, no record per row
            return pd.DataFrame({k: np.array(v, dtype=np.int64) if k in INT_COLUMNS else np.fromiter(v, object, n)
                                 for k, v in columns.items()})

    def allocations(self, loader: str = "corrected") -> list[Allocation]:
        """:meth:`load_cost` as typed records (no pandas needed)."""
        return list(map(Allocation._make, zip(*self.allocation_columns(loader).values())))

    def allocation_columns(self, loader: str = "corrected") -> dict[str, list]:
        """:meth:`allocations` as one list per column of :data:`~pte_lab.model.LOAD_COST_COLUMNS` (worked out
        once per loader; the lists are the program's: do not change them)."""
        if not isinstance(loader, str) or loader not in self._allocated:
            with paused_gc():
                self._allocated[loader] = allocation_columns(self._plan_arenas, loader)
        return self._allocated[loader]

    def load_totals(self) -> dict[str, dict[str, dict[str, int]]]:
        """``{loader: {step: {device: bytes}}}`` for the three loaders."""
        out: dict = {}
        for loader in LOADERS:
            per: dict = {}
            c = self.allocation_columns(loader)
            for step, device, nbytes in zip(c["step"], c["device"], c["bytes"]):
                d = per.setdefault(step, {})
                d[device] = d.get(device, 0) + nbytes
            out[loader] = per
        return out

    def file_layout(self, hashes: bool = True) -> "pd.DataFrame":
        """Where the file's bytes go, in file order (columns: region, name, owner, offset, bytes, sha256,
        duplicate_of); ``bytes`` adds up to the file (the carried program for a ``.bpte``).

        Regions: header, flatbuffer (program tables), inline constant / inline delegate (data inside
        the flatbuffer), constant (one row per constant buffer, named by the tensors using it),
        delegate, named data, mutable data, unused segment, padding. With ``hashes`` the blobs are
        hashed (their bytes are read) and ``duplicate_of`` names the first identical one.
        """
        import pandas as pd

        layout = self.layout(hashes)
        return pd.DataFrame(list(zip(*(getattr(layout, c) for c in LAYOUT_COLUMNS))), columns=list(LAYOUT_COLUMNS))

    def layout(self, hashes: bool | str = True) -> Layout:
        """The regions of :meth:`file_layout`: a sequence of :class:`~pte_lab.model.layout.LayoutRow` records
        held as columns, worked out (and with ``hashes``, the blobs read) once."""
        rows = self._layouts.get(hashes)
        if rows is None:
            rows = self._layouts[hashes] = file_regions(self, hashes)
        return rows

    def duplicate_blobs(self) -> list[Finding]:
        """Identical blobs stored more than once (reads and hashes the blobs that another blob has the size
        of; see :meth:`file_layout`)."""
        layout = self._layouts.get(True)  # every blob hashed already: use it
        if layout is None:
            layout = self.layout(hashes=DUPLICATES)
        return duplicate_blob_findings(layout)

    # --------------------------------------------------------------- findings
    def warnings(self, schemas: dict | None = None) -> list[Finding]:
        """What a person should know before loading: sharing, devices, delegate blobs, plan problems (with
        ``schemas``, see :meth:`Method.findings`, kernel arguments against operator schemas too)."""
        return program_findings(self, schemas)

    def findings(self, schemas: dict | None = None) -> list[Finding]:
        """:meth:`warnings`, then identical blobs stored more than once where they matter (:meth:`duplicate_blobs`,
        which reads and hashes the blobs; left out when the bytes cannot be read). A finding that prescribes
        carries the bytes at stake and the change that recovers them (``f.at_stake``, ``f.change``)."""
        try:
            dups = self.duplicate_blobs()
        except (PteLabError, OSError):
            dups = []
        return self.warnings(schemas) + dups

    # ------------------------------------------------------------------ views
    def to_dict(self) -> dict:
        """The documented, versioned JSON document (see :mod:`pte_lab.views.json_doc`)."""
        from ..views.json_doc import document

        return document(self)

    def _repr_html_(self) -> str:
        from ..views.html import pte_html, unreadable_html

        try:
            return pte_html(self)
        except PteFormatError as exc:
            return unreadable_html(repr(self), exc)

    def __repr__(self) -> str:
        from ..views.text import pte_text

        try:
            return pte_text(self)
        except PteFormatError as exc:
            return f"<Pte {self.path or '<bytes>'}: {count(len(self.methods), 'method')}; unreadable: {exc}>"


def open_pte(source: Source, data: "Source | DataFile | None" = None,
             etrecord: "Source | ETRecord | None" = None) -> Pte:
    """Open a ``.pte`` from a path, bytes or a binary file, without loading it.

    Reads the header and the flatbuffer only (never segment data) and checks
    the header and every segment against the file. A bundled program
    (``.bpte``) opens as the program it carries, with its test suites in
    ``pte.bundled``. ``data`` is the program's external data file (``.ptd``):
    findings then say whether it has every key the program needs. ``etrecord`` is the ETRecord
    ExecuTorch wrote beside the program (``generate_etrecord=True``): each planned tensor then names
    the FX node, module and source line that produce it (:attr:`Method.sources`); one from another
    export is refused (:class:`~pte_lab.errors.ETRecordError`, naming how they differ). Methods are
    decoded when first used. Imports neither torch nor executorch, and unpickles nothing.

    Raises :class:`pte_lab.PteFormatError` (a ``ValueError``) for anything that
    is not a valid program.
    """
    raw, path = read(source)
    if data is not None and not isinstance(data, DataFile):
        data = open_data(data)
    if etrecord is not None and not isinstance(etrecord, ETRecord):
        etrecord = read_etrecord(etrecord, _InstructionCounts(raw))
    return Pte(raw, path, data, etrecord)
