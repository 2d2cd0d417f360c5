"""The file: segments read as two kinds of data, execution plans sharing a name, constants in an external
``.ptd`` (and keys it lacks), constants in the deprecated ``constant_buffer`` table, identical blobs stored
twice."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Mapping

from ...units import count, first_few, human_bytes
from ..layout import LayoutRow, duplicate_phrase
from .base import Details, Finding, Kind

if TYPE_CHECKING:  # pragma: no cover
    from ..pte import Pte

__all__ = ["structure_findings", "data_findings", "duplicate_blob_findings", "SegmentRolesDetails",
           "DuplicateMethodDetails", "ExternalDataDetails", "ExternalDataMissingDetails", "ConstantBufferDetails",
           "DuplicateBlobsDetails"]


@dataclass(frozen=True)
class SegmentRolesDetails(Details):
    segment: int
    #: the kinds of data it is read as
    roles: tuple[str, ...]


@dataclass(frozen=True)
class DuplicateMethodDetails(Details):
    #: the execution plans sharing the name, in file order (ExecuTorch loads the first)
    plans: tuple[int, ...]


@dataclass(frozen=True)
class ExternalDataDetails(Details):
    #: the keys the program needs from the ``.ptd``
    keys: tuple[str, ...]
    #: with the ``.ptd`` given: bytes each method maps from it (None without it)
    bytes_by_method: Mapping[str, int] | None = None


@dataclass(frozen=True)
class ExternalDataMissingDetails(Details):
    missing: tuple[str, ...]


@dataclass(frozen=True)
class ConstantBufferDetails(Details):
    #: bytes of constants stored inline in the constant_buffer table
    bytes: int


@dataclass(frozen=True)
class DuplicateBlobsDetails(Details):
    #: bytes that could be stored once
    bytes: int
    #: the layout's rows repeating an earlier blob (each names it in ``duplicate_of``)
    blobs: tuple[LayoutRow, ...]


def structure_findings(p: "Pte") -> list[Finding]:
    """Segments read as two kinds of data, then execution plans sharing a name."""
    out = []
    for seg in getattr(getattr(p, "raw", None), "segments", []):
        if len(seg.roles) > 1:
            out.append(Finding(Kind.SEGMENT_ROLES, None,
                               f"segment {seg.index} is read as {' and as '.join(seg.roles)}: one table points "
                               f"into another's data, which a backend or kernel would misread",
                               SegmentRolesDetails(seg.index, tuple(seg.roles))))
    names = list(getattr(getattr(p, "raw", None), "plan_names", []))
    for name in dict.fromkeys(n for n in names if names.count(n) > 1):
        plans = tuple(i for i, n in enumerate(names) if n == name)
        out.append(Finding(Kind.DUPLICATE_METHOD, None,
                           f"{len(plans)} execution plans are named {name!r} (plans {list(plans)}): ExecuTorch loads "
                           f"the first (plan {plans[0]}); the others can never be loaded",
                           DuplicateMethodDetails(plans)))
    return out


def data_findings(p: "Pte") -> list[Finding]:
    """Constants in an external ``.ptd`` (and whether the one given has them), then inline constants."""
    out = []
    if p.expects_external_data:
        keys = tuple(p.external_keys)
        data = getattr(p, "data", None)
        if data is None:
            out.append(Finding(Kind.EXTERNAL_DATA, None,
                               f"{count(len(keys), 'constant')} {'lives' if len(keys) == 1 else 'live'} in an external .ptd file: "
                               f"pass it as data_path when loading", ExternalDataDetails(keys)))
        else:
            have = set(data.keys)
            missing = tuple(k for k in keys if k not in have)
            name = data.path or "the .ptd file"
            if missing:
                shown = first_few(map(repr, missing), 5)
                out.append(Finding(Kind.EXTERNAL_DATA_MISSING, None,
                                   f"{name} lacks {len(missing):,} of the {count(len(keys), 'key')} the program needs ({shown}): "
                                   f"loading a method that uses them fails", ExternalDataMissingDetails(missing)))
            else:
                per = p.external_bytes_by_method()
                out.append(Finding(Kind.EXTERNAL_DATA, None,
                                   f"{name} has {'the one key' if len(keys) == 1 else f'all {len(keys):,} keys'} the program needs; "
                                   + ", ".join(f"{m} maps {human_bytes(b)}" for m, b in per.items()),
                                   ExternalDataDetails(keys, per)))
    inline = getattr(p, "inline_constant_bytes", 0)
    if inline:
        out.append(Finding(Kind.CONSTANT_BUFFER_PATH, None,
                           f"{human_bytes(inline)} of constants are stored inline in the deprecated "
                           f"constant_buffer table: ExecuTorch 1.5.1's runtime refuses such a file at "
                           f"load_program (error 0x23, the constant_buffer path is disabled in its builds); "
                           f"re-export it with a current ExecuTorch", ConstantBufferDetails(inline)))
    return out


def duplicate_blob_findings(layout: Iterable[LayoutRow]) -> list[Finding]:
    """From the file's layout (``Pte.layout``): identical blobs stored more than once."""
    dups = tuple(r for r in layout if r.duplicate_of is not None)
    if not dups:
        return []
    wasted = sum(r.bytes for r in dups)
    shown = first_few((duplicate_phrase(r.name, r.region, r.bytes, r.duplicate_of) for r in dups), 4, "; ",
                      "; and {n} more")
    return [Finding(Kind.DUPLICATE_BLOBS, None,
                    f"{count(len(dups), 'blob')} repeat{'s' if len(dups) == 1 else ''} bytes stored earlier in "
                    f"the file: {human_bytes(wasted)} could be stored once ({shown})",
                    DuplicateBlobsDetails(wasted, dups))]
