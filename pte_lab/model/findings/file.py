"""The file: segments read as two kinds of data, execution plans sharing a name, constants in an external
``.ptd`` (and keys it lacks), constants in the deprecated ``constant_buffer`` table, identical blobs stored
twice."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from collections.abc import Iterable, Mapping, Sequence

from ...units import count, first_few, human_bytes
from ...vocabulary import Region
from ..layout import Layout, LayoutRow
from .base import Details, Finding, Kind, Prescription

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
class DuplicateBlobsDetails(Prescription):
    """``duplicate_blobs``: ``at_stake`` is the bytes of every copy after the first."""

    #: the layout's rows repeating an earlier blob (each names it in ``duplicate_of``), largest first (a ``Layout``)
    blobs: Sequence[LayoutRow]
    #: per repeated blob, largest waste first: (the first blob's name, its region, bytes each, copies after it)
    groups: tuple[tuple[str, str, int, int], ...] = ()

    @property
    def bytes(self) -> int:
        """Bytes that could be stored once (``at_stake``)."""
        return self.at_stake


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


#: copies are worth a finding from this share of the file's bytes, and this many bytes (a 16 B int64 scalar
#: stored twice is noise); a repeated blob is named from this share of the file, the smaller ones counted
_DUP_SHARE, _DUP_BYTES, _DUP_NAMED = 0.01, 1024, 0.001
#: what to change, by the regions of a blob and its copy
_DUP_CHANGE = {
    frozenset({Region.CONSTANT, Region.NAMED_DATA}): "a weight stored both for a delegate (named data) and for a portable "
                                           "kernel (a constant): let the partitioner take the operators that read "
                                           "it outside the delegate",
    frozenset({Region.CONSTANT}): "constant buffers with the same bytes: where they are one weight, use one parameter "
                             "in the model (tie them)",
    frozenset({Region.NAMED_DATA}): "named data with the same bytes under two keys: where they are one weight, use one "
                               "parameter in the model (tie them)",
    frozenset({Region.DELEGATE}): "delegate blobs with the same bytes: one subgraph lowered more than once; ExecuTorch "
                             "stores a blob once only when the delegate calls are identical",
}
_DUP_OTHER = "the same bytes stored twice: where they are one tensor, keep one in the model"


def duplicate_blob_findings(layout: Iterable[LayoutRow]) -> list[Finding]:
    """From the file's layout (``Pte.layout``): identical blobs stored more than once, when the copies matter
    (at least 1% of the file and 1 KiB), grouped by the blob they repeat, with what to change. Read from the
    layout's columns (records of the rows shown and of the copies only)."""
    rows = Layout.of(layout)
    nbytes, first_of = rows.bytes, rows.duplicate_of
    dup_at = sorted((i for i, d in enumerate(first_of) if d is not None), key=lambda i: -nbytes[i])
    wasted = sum(nbytes[i] for i in dup_at)
    total = sum(nbytes)
    if not dup_at or wasted < max(_DUP_BYTES, _DUP_SHARE * total):
        return []
    region = {n: r for r, n, d in zip(rows.region, rows.name, first_of) if d is None}
    by: dict[str, list[int]] = {}
    for i in dup_at:
        by.setdefault(first_of[i], []).append(i)
    groups = sorted(((first, region.get(first, ""), nbytes[at[0]], len(at), at) for first, at in by.items()),
                    key=lambda g: (-g[2] * g[3], g[0]))
    named = [g for g in groups if g[2] * g[3] >= _DUP_NAMED * total][:4] or groups[:1]
    rest = groups[len(named):]
    shown = "; ".join(f"{first} ({where}, {human_bytes(each)}) stored again as "
                      + first_few((f"{c.name} ({c.region}{', ' + c.owner if c.owner else ''})"
                                   for c in rows.rows(at[:3])), 2, more=f" and {len(at) - 2} more")
                      for first, where, each, n, at in named)
    if rest:
        shown += (f"; and {count(sum(g[3] for g in rest), 'smaller copy', 'smaller copies')} "
                  f"({human_bytes(sum(g[2] * g[3] for g in rest))})")
    changes = list(dict.fromkeys(_DUP_CHANGE.get(frozenset({where, rows.region[i]}), _DUP_OTHER)
                                 for _, where, _, _, at in named for i in at))
    change = "; ".join(changes)
    dups = rows.take(dup_at)  # the copies, largest first: a Layout (a file may hold 110,000 copies)
    return [Finding(Kind.DUPLICATE_BLOBS, None,
                    f"{count(len(dups), 'blob')} repeat{'s' if len(dups) == 1 else ''} bytes stored earlier in "
                    f"the file: {human_bytes(wasted)} ({wasted / total:.1%} of it) could be stored once: {shown}",
                    DuplicateBlobsDetails(wasted, change, dups,
                                          tuple((first, where, each, n) for first, where, each, n, _ in groups)))]
