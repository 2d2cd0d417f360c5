"""External data files (``.ptd``): the named tensors a program's constants come from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..format import RawData, Source, read_data
from .dtypes import nbytes, scalar_type

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["DataFile", "NamedTensor", "open_data", "DATA_COLUMNS"]

DATA_COLUMNS = ("key", "dtype", "shape", "nbytes", "segment", "offset")


@dataclass(frozen=True)
class NamedTensor:
    """A tensor a ``.ptd`` data file stores by name (:attr:`DataFile.tensors`): its key, dtype, shape and where
    its bytes are."""
    key: str
    dtype: str | None
    shape: tuple[int, ...] | None
    #: bytes of the segment that holds it
    nbytes: int
    segment: int
    #: file offset of its bytes
    offset: int


class DataFile:
    """A ``.ptd`` file read without loading it: open one with :func:`pte_lab.open`."""

    def __init__(self, raw: RawData, path: str | None = None):
        self._raw = raw
        self.path = path
        self.file_size: int = raw.header.file_size
        self.version: int = raw.version
        #: the named tensors, one per key: where ``named_data`` lists a key again (or names one table many
        #: times), the first entry is the one ExecuTorch's data map finds, and the only one kept
        self.tensors: list[NamedTensor] = []
        #: ``named_data`` entries in the file (more than :attr:`tensors` when keys repeat)
        self.entries: int = len(raw.tensors)
        self._by_key: dict[str, NamedTensor] = {}
        done: set[int] = set()  # records already seen (entries naming one table share one)
        for t in raw.tensors:
            if id(t) in done or t.key in self._by_key:
                continue
            done.add(id(t))
            dtype = None
            if t.scalar_type is not None and t.sizes is not None:
                dtype, elsize = scalar_type(t.scalar_type, f".ptd key {t.key!r}")
                nbytes(t.sizes, elsize)  # the layout must be a real tensor
            self._by_key[t.key] = rec = NamedTensor(t.key, dtype, t.sizes, t.size, t.segment, t.offset)
            self.tensors.append(rec)

    def tensor(self, key: str) -> NamedTensor | None:
        """The named tensor ``key`` (the first entry listing it), or None."""
        return self._by_key.get(key)

    @property
    def repeated_entries(self) -> int:
        """``named_data`` entries that repeat a key listed before them (not in :attr:`tensors`)."""
        return self.entries - len(self.tensors)

    @property
    def keys(self) -> list[str]:
        return [t.key for t in self.tensors]

    @property
    def data_bytes(self) -> int:
        """Bytes of tensor data (each segment once)."""
        return sum({t.segment: t.nbytes for t in self.tensors}.values())

    def table(self) -> "pd.DataFrame":
        import pandas as pd

        return pd.DataFrame([(t.key, t.dtype, t.shape, t.nbytes, t.segment, t.offset) for t in self.tensors],
                            columns=list(DATA_COLUMNS))

    def _repr_html_(self) -> str:
        from ..views.html import data_html

        return data_html(self)

    def __repr__(self) -> str:
        from ..views.text import data_text

        return data_text(self)


def open_data(source: Source) -> DataFile:
    """Open a ``.ptd`` data file from a path, bytes or a binary file (tensor bytes are never read)."""
    raw, path = read_data(source)
    return DataFile(raw, path)
