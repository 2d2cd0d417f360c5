"""What an instruction calls, what a segment holds for a delegate, and what made a planned tensor: records.

ExecuTorch writes an operator as ``"aten::add.out"`` (its namespace, its name, its overload), and pte_lab has
always shown a delegate call as ``"delegate:<backend>"``, a delegate's segment as ``"delegate:<id>"`` and a view's
maker as ``"view of v12 (aten::add.out)"``. Each is a record here, built in one place and read by its fields
(:attr:`OperatorTarget.name`, :attr:`DelegateCall.backend`, :attr:`ViewOf.base`), never split out of its text
again.

Like :class:`pte_lab.vocabulary.Word`, each record is also the ``str`` of that text: it compares, hashes, sorts
and is written (JSON, tables, f-strings) as the plain string was, so every document reads as before and a
user's ``t.op == "aten::add.out"`` still holds. Immutable: its fields are set once, when it is made.

Standard library only (``pte_lab.format`` makes :class:`DelegateSegment`; :mod:`pte_lab.vocabulary` re-exports
them all).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Union

from .printable import printable

if TYPE_CHECKING:  # pragma: no cover
    from .vocabulary import InstructionKind

__all__ = ["OperatorTarget", "DelegateCall", "DelegateSegment", "ViewOf", "CallTarget", "MadeBy", "escaped_target", "namespaces"]


class _TextRecord(str):
    """A ``str`` of its text with fields: immutable once made (``__new__`` sets the fields, nothing else may)."""

    def _set(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _fields(self) -> tuple:
        raise NotImplementedError

    def __reduce__(self):
        return type(self), self._fields()

    def __repr__(self) -> str:  # as the plain string did (a dataclass's repr of the tensor stays as it was)
        return str.__repr__(self)


class OperatorTarget(_TextRecord):
    """An operator a kernel call runs: ``OperatorTarget("aten", "add", "out")`` is ``"aten::add.out"``.

    ``namespace`` is None where the name has no ``::``; ``overload`` None where it has no overload. The text is
    exactly the one the file (or ExecuTorch's runtime) gives: ``str(OperatorTarget.parse(s)) == s``.
    """

    namespace: str | None
    name: str
    overload: str | None

    def __new__(cls, namespace: str | None, name: str, overload: str | None = None) -> OperatorTarget:
        text = (f"{namespace}::" if namespace is not None else "") + name + (
            f".{overload}" if overload is not None else "")
        self = super().__new__(cls, text)
        self._set(namespace=namespace, name=name, overload=overload)
        return self

    def _fields(self) -> tuple:
        return self.namespace, self.name, self.overload

    @classmethod
    def from_table(cls, qualified: str, overload: str) -> OperatorTarget:
        """An entry of an execution plan's ``operators`` table: ``("aten::add", "out")``; an empty overload is
        none (``"aten::add"``)."""
        namespace, sep, name = qualified.partition("::")
        return cls(namespace if sep else None, name if sep else qualified, overload or None)

    @classmethod
    def parse(cls, text: str) -> OperatorTarget:
        """The one home of reading ExecuTorch's text of an operator (``"aten::add.out"``, as its runtime's
        registry lists them): the namespace before the first ``::``, the overload after the name's first ``.``."""
        if isinstance(text, OperatorTarget):
            return text
        namespace, sep, rest = text.partition("::")
        name, dot, overload = (rest if sep else text).partition(".")
        return cls(namespace if sep else None, name, overload if dot else None)

    @property
    def qualified(self) -> str:
        """Its namespace and name without the overload (``"aten::add"``): what torch looks a schema up by."""
        return self.name if self.namespace is None else f"{self.namespace}::{self.name}"

    def escaped(self) -> OperatorTarget:
        """The same operator, each part safe to show (``pte_lab.printable.printable``)."""
        return OperatorTarget(None if self.namespace is None else printable(self.namespace), printable(self.name),
                              None if self.overload is None else printable(self.overload))


class _Delegated(_TextRecord):
    backend: str

    def __new__(cls, backend: str):
        self = super().__new__(cls, f"delegate:{backend}")
        self._set(backend=backend)
        return self

    def _fields(self) -> tuple:
        return (self.backend,)


class DelegateCall(_Delegated):
    """A delegate call's target: the backend it hands its work to (``"delegate:XnnpackBackend"``)."""

    def escaped(self) -> DelegateCall:
        return DelegateCall(printable(self.backend))


class DelegateSegment(_Delegated):
    """What a segment holding a delegate's blob is for (a :class:`pte_lab.format.program_tables.RawSegment`'s kind beside
    the :class:`pte_lab.vocabulary.SegmentKind` members): the delegate's backend id (``"delegate:XnnpackBackend"``)."""


class ViewOf(_TextRecord):
    """What made a view: the value whose bytes it shares and, for a tensor whose role is a view, that value's
    maker (``"view of v12 (aten::add.out)"``; ``"view of v12"`` without one)."""

    base: int
    made_by: CallTarget | None

    def __new__(cls, base: int, made_by: CallTarget | None = None) -> ViewOf:
        self = super().__new__(cls, f"view of v{base}" + (f" ({made_by})" if made_by else ""))
        self._set(base=base, made_by=made_by)
        return self

    def _fields(self) -> tuple:
        return self.base, self.made_by

    @property
    def short(self) -> ViewOf:
        """The view without its base's maker (``"view of v12"``)."""
        return ViewOf(self.base)


def namespaces(operators: Iterable[str]) -> set[str]:
    """The namespaces of ``operators`` (ExecuTorch's text of each, or an :class:`OperatorTarget`): those that
    name one (``"aten"`` for ``"aten::add.out"``)."""
    return {ns for op in operators if (ns := OperatorTarget.parse(op).namespace) is not None}


#: what an instruction calls: an operator, a delegate's backend, or (control flow) its kind
CallTarget = Union[OperatorTarget, DelegateCall, "InstructionKind"]
#: what made a planned tensor (``PlannedTensor.op``): what its producing instruction calls, or for a view the
#: value it views
MadeBy = Union[OperatorTarget, DelegateCall, "InstructionKind", ViewOf]


def escaped_target(target: CallTarget) -> CallTarget:
    """``target`` safe to show: an operator's or backend's name from the file escaped; a kind is safe as it is."""
    return target.escaped() if isinstance(target, (OperatorTarget, DelegateCall)) else target
