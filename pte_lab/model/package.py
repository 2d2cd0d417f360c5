"""What a ``.ptn`` package (ExecuTorch's native program package) holds, from :mod:`pte_lab.format.ptn` records.

Per method: its inputs and outputs, each graph tensor's dtype and shape at its upper bound with its bytes there,
what each output writes back, the operators. Package-wide: the constants (each data key, the bytes stored once
for keys with identical bytes, which key each alias shares), the state kept between calls (mutable buffers,
zero-initialised at load; persistent buffers, their initial bytes stored). No memory plan is in the file:
:attr:`NativePackage.has_memory_plan` is False, and the figures here are the tensors' own bytes, never a plan's.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from ..format.ptn import (SAFETENSORS_DTYPES, InputKind, OpKind, OutputKind, RawConstantRef, RawMeta, RawPackage,
                          executorch_scalar_type, read_package)
from .dtypes import SCALAR_TYPES, nbytes

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["NativePackage", "NativeMethod", "NativeTensor", "NativeConstant", "NativeState", "NativeRole",
           "StateKind", "open_package", "NATIVE_TENSOR_COLUMNS"]

NATIVE_TENSOR_COLUMNS = ("name", "role", "dtype", "shape", "min_shape", "dynamic", "nbytes", "alias_of",
                         "producer", "writes")


class NativeRole(str, Enum):
    """What a graph tensor of a native method is."""
    #: a user input (the caller's)
    INPUT = "input"
    #: a result the method returns
    OUTPUT = "output"
    #: a graph output written back into a buffer or a user input (not returned)
    WRITE_BACK = "write_back"
    #: a constant's placeholder (its bytes in program.safetensors)
    CONSTANT = "constant"
    #: a mutable buffer's placeholder (state kept between calls)
    STATE = "state"
    #: any other value a node makes
    INTERMEDIATE = "intermediate"


class StateKind(str, Enum):
    """How a buffer kept between calls starts."""
    #: a non-persistent mutable buffer (a KV cache): no bytes stored, zeros at load
    ZEROS = "zero-initialised"
    #: a persistent buffer the graph writes: its initial bytes are in program.safetensors
    STORED = "initial bytes stored"


@dataclass(frozen=True)
class NativeTensor:
    """A graph tensor of a native method: its dtype and shape at its upper bound, its bytes there."""
    name: str
    role: NativeRole
    #: torch-style name (``float32``); None for a code the schema does not define
    dtype: str | None
    #: each dimension's upper bound (-1: unbounded)
    shape: tuple[int, ...]
    #: each dimension's lower bound
    min_shape: tuple[int, ...]
    #: any dimension a range
    dynamic: bool
    #: bytes at the upper bound; None where unbounded, packed by a quantization codec, or of an unknown dtype
    nbytes: int | None
    #: the tensor whose storage it shares (a view, or an op writing its input in place); None: fresh storage
    alias_of: str | None
    #: the operator that makes it (``aten.linear.default``); None for a placeholder
    producer: str | None
    #: for a write-back, the buffer's fqn or user input it writes
    writes: str | None = None
    #: a quantization scheme (``"affine_group"``, ``"packed:gguf:q4k"``); None: not quantized
    quant: str | None = None


@dataclass(frozen=True)
class NativeConstant:
    """A constant of the package, by data key: where its bytes are and who uses it."""
    key: str
    dtype: str | None
    shape: tuple[int, ...]
    nbytes: int | None
    #: the key whose stored bytes it shares (itself when stored under its own key); None when not stored
    owner: str | None
    #: ``parameter``, ``buffer`` or ``constant_tensor`` (the placeholder's kind)
    kind: str
    #: a persistent buffer a method writes (state, not read-only)
    mutated: bool
    methods: tuple[str, ...]

    @property
    def alias(self) -> bool:
        """Stored once under another key (byte-identical at save time)."""
        return self.owner is not None and self.owner != self.key


@dataclass(frozen=True)
class NativeState:
    """A buffer kept between calls: its identity (fqn), dtype, shape, bytes, how it starts, its methods."""
    fqn: str
    dtype: str | None
    shape: tuple[int, ...]
    nbytes: int | None
    kind: StateKind
    methods: tuple[str, ...]


def _dtype(code: int) -> tuple[str | None, int | None]:
    st = executorch_scalar_type(code)
    if st is None:
        return None, None
    return SCALAR_TYPES[st]


def _quant(meta: RawMeta) -> str | None:
    q = meta.quant
    if q is None:
        return None
    return f"packed:{q.codec}" if q.scheme == "packed" else q.scheme


def _bytes_at_bound(meta: RawMeta) -> int | None:
    name, size = _dtype(meta.dtype)
    if size is None or meta.quant is not None or any(d < 0 for d in meta.maxs):
        return None
    return nbytes(meta.maxs, size)


def _tensor(name: str, meta: RawMeta, role: NativeRole, alias_of: str | None = None, producer: str | None = None,
            writes: str | None = None) -> NativeTensor:
    return NativeTensor(name, role, _dtype(meta.dtype)[0], meta.maxs, meta.mins,
                        any(lo != hi for lo, hi in zip(meta.mins, meta.maxs)), _bytes_at_bound(meta),
                        alias_of or None, producer, writes, _quant(meta))


def _op(target: str) -> str:
    return target.removeprefix("torch.ops.")


class NativeMethod:
    """One method of a ``.ptn``: its inputs, outputs, graph tensors and operators."""

    def __init__(self, raw, state_fqns: "dict[str, NativeState]"):
        self.name: str = raw.name
        const_names = {c.name: c for c in raw.constants}
        buffer_names = {b.name: b.fqn for b in raw.mutable_buffers}
        specs = {s.name: s for s in raw.output_specs}
        made: dict[str, tuple[str, str]] = {}  # value -> (operator, alias_of)
        ops: Counter[str] = Counter()
        for n in raw.nodes:
            if n.op_kind == OpKind.CALL_FUNCTION:
                ops[_op(n.target)] += 1
                for out, alias in n.outputs:
                    made[out] = (_op(n.target), alias)
        #: operator -> calls
        self.operator_counts: dict[str, int] = dict(ops.most_common())
        self.nodes: int = len(raw.nodes)
        inputs, outputs = set(raw.inputs), set(raw.outputs)
        tensors = []
        for name, meta in raw.tensor_values.items():
            op, alias = made.get(name, (None, ""))
            spec = specs.get(name)
            writes = None
            if name in buffer_names:
                role = NativeRole.STATE
            elif name in const_names:
                role = NativeRole.STATE if const_names[name].mutated else NativeRole.CONSTANT
            elif name in inputs:
                role = NativeRole.INPUT
            elif spec is not None and spec.kind in (OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION):
                role, writes = NativeRole.WRITE_BACK, spec.target
            elif name in outputs:
                role = NativeRole.OUTPUT
            else:
                role = NativeRole.INTERMEDIATE
            tensors.append(_tensor(name, meta, role, alias, op, writes))
        for c in raw.constants:  # constants are listed with their meta on the binding, not in tensor_values
            if c.name not in raw.tensor_values:
                tensors.append(_tensor(c.name, c.meta, NativeRole.STATE if c.mutated else NativeRole.CONSTANT))
        #: every graph tensor, in the file's order (constants last where the graph lists them apart)
        self.tensors: list[NativeTensor] = tensors
        by_name = {t.name: t for t in tensors}
        missing = [n for n in (*raw.inputs, *raw.outputs) if n not in by_name]
        #: input and output names the graph gives no meta for (the schema requires one; None in the lists below)
        self.unknown_io: list[str] = missing
        #: the user inputs, in order
        self.inputs: list[NativeTensor | None] = [by_name.get(n) for n in raw.inputs]
        #: the graph's outputs, in order: results, then (by kind) the write-backs
        self.outputs: list[NativeTensor | None] = [by_name.get(n) for n in raw.outputs]
        #: the constants' data keys, by placeholder
        self.constants: dict[str, str] = {c.name: c.data_key for c in raw.constants}
        #: the state it reads and writes, by fqn
        self.state: list[str] = sorted({*buffer_names.values(), *(c.data_key for c in raw.constants if c.mutated)}
                                       & set(state_fqns))

    @property
    def dynamic(self) -> bool:
        """Whether any input's shape is a range."""
        return any(t is not None and t.dynamic for t in self.inputs)

    @property
    def fresh_bytes(self) -> int | None:
        """Bytes of the tensors the method makes in storage of their own (intermediates, results, write-backs
        that alias nothing) at their bounds, each counted once: what a runtime sharing nothing would find.
        None where one is unbounded or packed. Not a plan: the native runtime plans at load, sharing bytes
        between tensors that are not alive together."""
        total = 0
        for t in self.tensors:
            if t.role in (NativeRole.INTERMEDIATE, NativeRole.OUTPUT, NativeRole.WRITE_BACK) and t.alias_of is None:
                if t.nbytes is None:
                    return None
                total += t.nbytes
        return total

    def table(self) -> "pd.DataFrame":
        """Every graph tensor as a table (columns: ``NATIVE_TENSOR_COLUMNS``)."""
        import pandas as pd

        return pd.DataFrame([(t.name, t.role.value, t.dtype, t.shape, t.min_shape, t.dynamic, t.nbytes, t.alias_of,
                              t.producer, t.writes) for t in self.tensors], columns=list(NATIVE_TENSOR_COLUMNS))

    def __repr__(self) -> str:
        return f"NativeMethod({self.name!r}, {len(self.inputs)} inputs, {len(self.tensors)} tensors)"


_KIND_NAMES: dict[int, str] = {InputKind.PARAMETER: "parameter", InputKind.BUFFER: "buffer", InputKind.CONSTANT_TENSOR: "constant_tensor",
               InputKind.USER_INPUT: "user_input"}


class NativePackage:
    """A ``.ptn`` package read without loading it (open one with :func:`pte_lab.open`): its methods, constants
    and state. The file holds no memory plan: the native runtime plans when it loads one."""

    #: a .ptn carries no memory plan (the native runtime plans at load)
    has_memory_plan = False

    def __init__(self, raw: RawPackage, path: str | None = None):
        self._raw = raw
        self.path = path
        self.file_size: int = raw.file_size
        #: the native program's schema version (``program.ptg``'s ``version``)
        self.version: str = raw.program.version
        #: the archive's members: (name, bytes), in the file's order (empty for a bare program.ptg)
        self.members: list[tuple[str, int]] = [(m.name, m.size) for m in raw.members]
        #: a bare program.ptg: the constants' bytes and aliases are not in this file
        self.graph_only: bool = raw.graph_only
        stored = {s.key: s for s in raw.stored or ()}
        users: dict[str, list[str]] = {}
        refs: dict[str, RawConstantRef] = {}
        for m in raw.program.methods:
            for c in m.constants:
                users.setdefault(c.data_key, []).append(m.name)
                refs.setdefault(c.data_key, c)
        constants = []
        for key, c in refs.items():
            owner = raw.aliases.get(key, key)
            st = stored.get(owner)
            dtype: str | None
            size: int | None
            if st is not None and st.dtype in SAFETENSORS_DTYPES:
                dtype, _ = SCALAR_TYPES[SAFETENSORS_DTYPES[st.dtype]]
                shape, size = st.shape, st.nbytes
            else:
                dtype, shape = _dtype(c.meta.dtype)[0], c.meta.maxs
                size = st.nbytes if st else _bytes_at_bound(c.meta)  # not stored: as its meta says
            constants.append(NativeConstant(key, dtype, shape, size, owner if st is not None else None,
                                            _KIND_NAMES.get(c.kind, str(c.kind)), c.mutated,
                                            tuple(dict.fromkeys(users[key]))))
        #: each data key the methods reference, in the order they first do
        self.constants: list[NativeConstant] = constants
        #: data keys a method references that the package does not store (a package that will not load)
        self.missing: list[str] = [] if raw.graph_only else [c.key for c in constants if c.owner is None]
        #: keys stored that no method references
        self.unreferenced: list[str] = sorted(set(stored) - {c.owner for c in constants})
        #: bytes program.safetensors stores (each owner once); None for a bare program.ptg
        self.stored_bytes: int | None = None if raw.graph_only else sum(s.nbytes for s in raw.stored or ())
        states: dict[str, NativeState] = {}
        for m in raw.program.methods:
            meta = m.tensor_values
            for b in m.mutable_buffers:
                t = meta.get(b.name)
                prev = states.get(b.fqn)
                methods = (*(prev.methods if prev else ()), m.name)
                states[b.fqn] = NativeState(b.fqn, _dtype(t.dtype)[0] if t else None, t.maxs if t else (),
                                            _bytes_at_bound(t) if t else None, StateKind.ZEROS,
                                            tuple(dict.fromkeys(methods)))
        for k in constants:
            if k.mutated:
                states[k.key] = NativeState(k.key, k.dtype, k.shape, k.nbytes, StateKind.STORED, k.methods)
        #: the buffers kept between calls, by fqn
        self.state: list[NativeState] = list(states.values())
        #: the methods, by name
        self.methods: dict[str, NativeMethod] = {m.name: NativeMethod(m, states) for m in raw.program.methods}

    @property
    def referenced_bytes(self) -> int | None:
        """Bytes of every constant key the methods reference, each key counted (aliases included): what storing
        each key apart would take. None where a key's bytes are unknown."""
        if any(c.nbytes is None for c in self.constants):
            return None
        return sum(c.nbytes for c in self.constants)  # type: ignore[misc]

    @property
    def aliases(self) -> dict[str, str]:
        """Duplicate data key -> the key whose stored bytes it shares (``aliases.json``)."""
        return dict(self._raw.aliases)

    @property
    def zero_state_bytes(self) -> int | None:
        """Bytes of the zero-initialised state (mutable buffers: KV caches) the runtime allocates at load."""
        sizes = [s.nbytes for s in self.state if s.kind is StateKind.ZEROS]
        return None if None in sizes else sum(sizes)  # type: ignore[arg-type]

    def constants_table(self) -> "pd.DataFrame":
        import pandas as pd

        return pd.DataFrame([(c.key, c.dtype, c.shape, c.nbytes, c.owner, c.kind, c.mutated, c.methods)
                             for c in self.constants],
                            columns=["key", "dtype", "shape", "nbytes", "owner", "kind", "mutated", "methods"])

    def to_dict(self) -> dict:
        """The ``pte_lab.package`` JSON document (``pte-lab inspect FILE.ptn --json``)."""
        from ..views.package import package_document

        return package_document(self)

    def _repr_html_(self) -> str:
        from ..views.package import package_html

        return package_html(self)

    def __repr__(self) -> str:
        from ..views.package import package_text

        return package_text(self)


def open_package(source) -> NativePackage:
    """Open a ``.ptn`` package (or a bare ``program.ptg``) from a path, bytes or a seekable binary file; the
    constants' bytes are never read. Raises :class:`~pte_lab.errors.PackageError` for one that cannot be read."""
    raw = read_package(source)
    path = os.fspath(source) if isinstance(source, (str, os.PathLike)) else getattr(source, "name", None)
    return NativePackage(raw, path if isinstance(path, str) else None)
