"""Planned tensors in the model author's terms: the FX node, module and source line that produce them.

The chain is the one ExecuTorch's devtools use: a tensor's producing instruction (the ``producer``
column of :attr:`Method.tensors <pte_lab.model.Method.tensors>`) -> the ETRecord's debug handles for
that instruction -> the edge program's nodes carrying those handles -> their ``nn_module_stack`` and
``stack_trace``. A delegate call carries the handles of every node it swallowed: its outputs name the
node that leaves the delegated subgraph and every module it swallowed.

:func:`check_etrecord` refuses an ETRecord from another export (methods, instruction counts, delegate
calls, handles, operators) with an :class:`~pte_lab.errors.ETRecordError` that says how they differ.

Without an ETRecord, a program exported with ``ExecutorchBackendConfig(emit_stacktrace=True)`` carries a stack
trace per instruction (:attr:`RawPlan.stacktraces <pte_lab.format.RawPlan>`): :func:`attribute_stacktraces`
gives each tensor its producing instruction's innermost user frame (no node and no module: the file names
neither). ExecuTorch 1.5.1 writes them for programs without delegates only (with a delegate call its emitter
refuses ``emit_stacktrace``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from ..errors import ETRecordError
from ..format.etrecord import ETRecord, MethodRecord, NodeInfo, SourceLine, innermost_user, op_base

if TYPE_CHECKING:
    from .method import Method

__all__ = ["TensorSource", "SOURCE_COLUMNS", "attribute", "attribute_program", "attribute_stacktraces",
           "check_etrecord", "check_method"]

#: the columns an ETRecord adds to a method's tensors (and the keys it adds to the JSON tensor rows)
SOURCE_COLUMNS = ("node", "module", "module_type", "source")


@dataclass(frozen=True)
class TensorSource:
    """Where a planned tensor comes from in the model's source. Fields are None where unknown
    (an input, a constant, an instruction the ETRecord gives no handle)."""

    value: int
    instruction: int | None
    #: the FX node that writes it (for a delegate call: the swallowed node whose output leaves the delegate)
    node: str | None
    #: that node's operator (``aten.addmm.default``)
    op: str | None
    #: innermost module path (``blocks.0.fc1``; ``""`` is the root module) and class name (``Linear``)
    module: str | None
    module_type: str | None
    source: SourceLine | None
    #: every innermost ``(path, class name)`` the producing instruction came from, in graph order
    #: (one for a kernel call, the swallowed modules for a delegate call)
    modules: tuple[tuple[str, str], ...] = ()

    def column(self, name: str):
        """The value of one of :data:`SOURCE_COLUMNS` (the source line as text: ``file:line``, its code)."""
        if name == "source":
            return None if self.source is None else str(self.source)
        return getattr(self, name)


def _mismatch(method: str, what: str) -> ETRecordError:
    return ETRecordError(f"the ETRecord does not belong to this program: method {method!r}: {what}")


def check_etrecord(method_names: Iterable[str], record: ETRecord, instructions=None) -> None:
    """Refuse an ETRecord whose methods are not the program's. ``instructions(name)`` (a method's instruction
    count) lets the ETRecord leave out methods that run nothing (export_llm's ``get_max_seq_len``...: constant
    methods ExecuTorch records no graph of)."""
    ours, theirs = list(method_names), list(record.methods)
    missing = set(ours) - set(theirs)
    if instructions is not None and missing and set(theirs) <= set(ours):
        missing = {n for n in missing if instructions(n)}
    if missing or set(theirs) - set(ours):
        raise ETRecordError(f"the ETRecord does not belong to this program: it has methods "
                            f"{', '.join(theirs) or 'none'}, the program has {', '.join(ours) or 'none'}")


def check_method(method: "Method", rec: MethodRecord) -> None:
    """Refuse a method record from another export: instruction counts, delegate calls, handles, operators."""
    instructions = method.instructions
    n = len(instructions)
    if rec.handles and max(rec.handles) >= n:
        raise _mismatch(method.name, f"the ETRecord has handles for instructions up to {max(rec.handles)}, "
                                     f"the program has {n} instructions")
    ours = {i.index: i.target.removeprefix("delegate:") for i in instructions if i.kind == "DelegateCall"}
    if set(ours) != set(rec.delegates):
        raise _mismatch(method.name, f"delegate calls at instructions {sorted(rec.delegates)} in the ETRecord, "
                                     f"{sorted(ours)} in the program")
    for i, backend in rec.delegates.items():
        if backend != ours[i]:
            raise _mismatch(method.name, f"instruction {i} calls {ours[i]} in the program, "
                                         f"{backend} in the ETRecord")
    if not rec.has_graph:
        return
    lost = sorted({h for hs in rec.handles.values() for h in hs} - set(rec.by_handle))
    if lost:
        raise _mismatch(method.name, f"{len(lost)} debug handles are on no node of its edge graph "
                                     f"(first: {lost[0]})")
    kernels = [i for i in instructions if i.kind == "KernelCall" and i.index in rec.handles]
    differ = [i for i in kernels if op_base(i.target) not in {nd.op for nd in rec.nodes_of(i.index)}]
    if kernels and 2 * len(differ) > len(kernels):
        first = differ[0]
        named = sorted({nd.op for nd in rec.nodes_of(first.index)})
        raise _mismatch(method.name, f"{len(differ)} of {len(kernels)} kernel calls run another operator than "
                                     f"their handle's nodes (instruction {first.index} calls {first.target}, "
                                     f"the ETRecord's nodes run {', '.join(named) or 'nothing'})")
    _check_shapes(method, rec, kernels)


def _fits(node_shape: tuple, shape: tuple) -> bool:
    """A tensor's shape as planned agrees with its node's (a symbolic dimension agrees with any bound)."""
    return len(node_shape) == len(shape) and all(a is None or a == b for a, b in zip(node_shape, shape))


def _check_shapes(method: "Method", rec: MethodRecord, kernels) -> None:
    """Refuse an ETRecord whose node writes another shape than the program's instruction does (the same
    graph with another layer width: operators and handles agree, shapes do not)."""
    written: dict[int, list[tuple[int, ...]]] = {}
    for t in method.planned:
        if t.producer is not None and t.role != "view":
            written.setdefault(t.producer, []).append(t.shape)
    for ins in kernels:
        shapes = written.get(ins.index)
        op = op_base(ins.target)
        nodes = [nd for nd in rec.nodes_of(ins.index) if nd.op == op and nd.output_shapes]
        if not shapes or not nodes:
            continue
        if not any(_fits(o, s) for nd in nodes for o in nd.output_shapes for s in shapes):
            nd = nodes[-1]
            theirs = ", ".join("[" + ", ".join("?" if d is None else str(d) for d in o) + "]" for o in nd.output_shapes)
            raise _mismatch(method.name, f"instruction {ins.index} ({ins.target}) writes "
                                         f"{', '.join(str(list(s)) for s in shapes)}, its node {nd.name} in the "
                                         f"ETRecord writes {theirs}")


def _modules(nodes: Iterable[NodeInfo]) -> tuple[tuple[str, str], ...]:
    return tuple(dict.fromkeys((nd.module, nd.module_type) for nd in nodes if nd.module_stack))


def _exits(nodes: tuple[NodeInfo, ...], consumers: dict[str, set[str]], graph_outputs: set[str]) -> list[NodeInfo]:
    """The nodes of a swallowed subgraph whose outputs are read outside it (or are the graph's outputs)."""
    inside = {nd.name for nd in nodes}
    return [nd for nd in nodes
            if any(o in graph_outputs or consumers.get(o, set()) - inside for o in nd.outputs)]


def _source_of(instruction, rec: MethodRecord, consumers, graph_outputs) -> tuple:
    """(node, modules) for one instruction."""
    nodes = rec.nodes_of(instruction.index)
    if not nodes:
        return None, ()
    if instruction.kind == "DelegateCall":
        exits = _exits(nodes, consumers, graph_outputs)
        return (exits[0] if len(exits) == 1 else None), _modules(nodes)
    op = op_base(instruction.target)
    same = [nd for nd in nodes if nd.op == op]
    node = (same or list(nodes))[-1]
    return node, _modules([node])


def attribute(method: "Method", rec: ETRecord | MethodRecord, *, check: bool = True) -> tuple[TensorSource, ...]:
    """Every planned tensor of ``method`` (in :attr:`Method.planned` order) with its node, module and
    source line from the ETRecord. Raises :class:`~pte_lab.errors.ETRecordError` for another export's."""
    if isinstance(rec, ETRecord):
        if method.name not in rec.methods:
            raise _mismatch(method.name, f"not in the ETRecord (it has {', '.join(rec.methods) or 'no methods'})")
        rec = rec.methods[method.name]
    if check:
        check_method(method, rec)
    consumers: dict[str, set[str]] = {}
    for nd in rec.nodes:
        for name in nd.inputs:
            consumers.setdefault(name, set()).add(nd.name)
    graph_outputs = set(rec.graph_outputs)
    instructions = method.instructions

    def fields(producer: int) -> tuple:
        node, modules = _source_of(instructions[producer], rec, consumers, graph_outputs)
        if node is None:
            return None, None, None, None, None, modules
        return node.name, node.target, node.module, node.module_type, node.source, modules

    return _per_tensor(method, fields)


def _per_tensor(method: "Method", fields) -> tuple[TensorSource, ...]:
    """A :class:`TensorSource` per planned tensor, in :attr:`Method.planned` order: ``fields(instruction)`` gives
    (node, op, module, module_type, source, modules) for the tensors an instruction writes, once per instruction."""
    n = method.n_instructions
    cols = method.analysis.columns
    by_instruction: dict[int, tuple] = {}
    out = []
    for value, producer in zip(cols["value"].tolist(), cols["producer"].tolist()):
        if producer < 0 or producer >= n:
            out.append(TensorSource(value, None, None, None, None, None, None))
            continue
        if producer not in by_instruction:
            by_instruction[producer] = fields(producer)
        out.append(TensorSource(value, producer, *by_instruction[producer]))
    return tuple(out)


def attribute_program(pte, record: ETRecord) -> dict[str, tuple[TensorSource, ...]]:
    """:func:`attribute` for every method of a :class:`~pte_lab.model.Pte`, after :func:`check_etrecord`."""
    check_etrecord(pte.method_names, record, lambda n: pte.methods[n].n_instructions)
    return {name: attribute(pte.methods[name], record) for name in pte.method_names if name in record.methods}


def attribute_stacktraces(method: "Method") -> tuple[TensorSource, ...] | None:
    """Every planned tensor of ``method`` (in :attr:`Method.planned` order) with the user's source line from its
    producing instruction's stack trace; None when the file carries no stack traces."""
    traces = method.raw.stacktraces
    if traces is None:
        return None

    def fields(producer: int) -> tuple:  # no node, so no node's operator either: the instruction names its own
        line = innermost_user(traces[producer]) if producer < len(traces) else None
        return None, None, None, None, line, ()

    return _per_tensor(method, fields)
