"""Planned tensors in the model author's terms: the FX node, module and source line that produce them.

The chain is the one ExecuTorch's devtools use: a tensor's producing instruction (the ``producer``
column of :attr:`Method.tensors <pte_lab.model.Method.tensors>`) -> the ETRecord's debug handles for
that instruction -> the edge program's nodes carrying those handles -> their ``nn_module_stack`` and
``stack_trace``. A delegate call carries the handles of every node it swallowed: its outputs name the
node that leaves the delegated subgraph and every module it swallowed.

``check_etrecord`` refuses an ETRecord from another export (methods, instruction counts, delegate
calls, handles, operators) with an :class:`~pte_lab.errors.ETRecordError` that says how they differ.

Without an ETRecord, a program exported with ``ExecutorchBackendConfig(emit_stacktrace=True)`` carries a stack
trace per instruction (:attr:`RawPlan.stacktraces <pte_lab.format.RawPlan>`): ``attribute_stacktraces``
gives each tensor its producing instruction's innermost user frame (no node and no module: the file names
neither). ExecuTorch 1.5.1 writes them for programs without delegates only (with a delegate call its emitter
refuses ``emit_stacktrace``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from collections.abc import Iterable

from ..errors import ETRecordError
from ..format.etrecord import (ETRecord, MethodRecord, NodeInfo, SourceLine, check_counts, check_methods,
                               innermost_user, mismatch)
from ..printable import printable
from ..units import first_few
from ..vocabulary import Role, InstructionKind

if TYPE_CHECKING:
    from .method import Method

__all__ = ["TensorSource", "SOURCE_COLUMNS", "attribute", "attribute_program", "attribute_stacktraces",
           "check_etrecord", "check_method", "kernel_node"]

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


#: a method's checks and attribution may visit its nodes (and their readers, and their symbolic shapes) at most
#: this many times over plus this slack: a real export's delegate calls swallow disjoint nodes (once over), a
#: crafted ETRecord that gives every delegate call the same 20,000 nodes is refused instead of walked 600 times
_REVISITS, _REVISIT_SLACK = 4, 100_000


@dataclass
class _Index:
    """A method record's nodes indexed once by debug handle (kept in the record's memo): what a lookup per
    instruction asks for costs the instruction's handles, not the nodes under them."""

    #: handle -> the operators of its nodes
    ops: dict[int, frozenset[str]]
    #: handle -> its last node; (handle, op) -> its last node running op
    last: dict[int, NodeInfo]
    last_op: dict[tuple[int, str], NodeInfo]
    #: (handle, op) -> (its nodes' static output shapes, their distinct symbolic ones, its last node with shapes)
    shaped: dict[tuple[int, str], tuple[set, list, NodeInfo]]
    #: tensor name -> the nodes reading it; the graph's outputs
    consumers: dict[str, set[str]]
    graph_outputs: frozenset[str]
    #: handle -> its nodes plus the readers of their outputs: the work of walking them
    weight: dict[int, int]
    #: what a method's walks may cost in all (:data:`_REVISITS`)
    budget: int


def _index(rec: MethodRecord) -> _Index:
    ix = rec.memo.get("attribution")
    if ix is not None:
        return ix
    consumers: dict[str, set[str]] = {}
    for nd in rec.nodes:
        for name in nd.inputs:
            consumers.setdefault(name, set()).add(nd.name)
    ops: dict[int, set[str]] = {}
    last: dict[int, NodeInfo] = {}
    last_op: dict[tuple[int, str], NodeInfo] = {}
    shaped: dict[tuple[int, str], tuple[set, list, NodeInfo]] = {}
    weight: dict[int, int] = {}
    for h, nodes in rec.by_handle.items():
        ops[h] = frozenset(nd.op for nd in nodes)
        last[h] = nodes[-1]
        w = 0
        for nd in nodes:
            last_op[h, nd.op] = nd
            w += 1 + sum(len(consumers.get(o, ())) for o in nd.outputs)
            if nd.output_shapes:
                static, symbolic, _ = shaped.get((h, nd.op)) or (set(), [], None)
                for o in nd.output_shapes:
                    if None in o:
                        if o not in symbolic:
                            symbolic.append(o)
                    else:
                        static.add(o)
                shaped[h, nd.op] = (static, symbolic, nd)
        weight[h] = w
    ix = rec.memo["attribution"] = _Index(ops, last, last_op, shaped, consumers, frozenset(rec.graph_outputs),
                                          weight, _REVISITS * (sum(weight.values()) + len(rec.nodes)) + _REVISIT_SLACK)
    return ix


class _Work:
    """The node visits of one method's walks, against :attr:`_Index.budget`."""

    def __init__(self, method: str, ix: _Index):
        self.method, self.left, self.limit = method, ix.budget, ix.budget

    def charge(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise ETRecordError(f"the ETRecord's method {printable(self.method)!r}: its instructions name the same "
                                f"nodes so many times over that attributing them would visit more than "
                                f"{self.limit:,} nodes ({_REVISITS}x its graph); refusing (one debug handle listed by "
                                f"many delegate calls?)")


def kernel_node(rec: MethodRecord, instruction) -> NodeInfo | None:
    """The node a kernel call (an :class:`~pte_lab.model.method.Instruction`) came from: of the nodes under its
    handles (the ETRecord's handle order, graph order under each), the last running its operator, else the last
    one; None without nodes. Costs the instruction's handles, not their nodes."""
    ix = _index(rec)
    hs = rec.handles_of(instruction.index)
    op = _kernel_op(instruction)
    for h in reversed(hs):
        nd = ix.last_op.get((h, op))
        if nd is not None:
            return nd
    for h in reversed(hs):
        nd = ix.last.get(h)
        if nd is not None:
            return nd
    return None


def check_etrecord(method_names: Iterable[str], record: ETRecord, instructions=None) -> None:
    """Refuse an ETRecord whose methods are not the program's. ``instructions(name)`` (a method's instruction
    count) lets the ETRecord leave out methods that run nothing (export_llm's ``get_max_seq_len``...: constant
    methods ExecuTorch records no graph of)."""
    check_methods(record.methods, method_names, instructions)


def _kernel_op(instruction) -> str:
    """A kernel call's operator base name as the ETRecord's records show names."""
    return printable(instruction.operator.name)


def check_method(method: "Method", rec: MethodRecord) -> None:
    """Refuse a method record from another export: instruction counts, delegate calls, handles, operators."""
    instructions = method.instructions
    n = len(instructions)
    check_counts(method.name, n, rec.handles)
    ours = {i.index: printable(i.backend) for i in instructions if i.backend is not None}
    if set(ours) != set(rec.delegates):
        raise mismatch(method.name, f"delegate calls at instructions [{first_few(sorted(rec.delegates), 12)}] in "
                                    f"the ETRecord, [{first_few(sorted(ours), 12)}] in the program")
    for i, backend in rec.delegates.items():
        if backend != ours[i]:
            raise mismatch(method.name, f"instruction {i} calls {ours[i]} in the program, "
                                        f"{backend} in the ETRecord")
    if rec.has_graph:
        lost = sorted({h for hs in rec.handles.values() for h in hs} - set(rec.by_handle))
        if lost:
            raise mismatch(method.name, f"{len(lost)} debug handles are on no node of its edge graph "
                                        f"(first: {lost[0]})")
    # an ETRecord of a smaller export of the same kind of model: its handles stop before the program's kernels do
    last = max(rec.handles, default=-1)
    past = [i.index for i in instructions if i.kind == InstructionKind.KERNEL_CALL and i.index > last]
    if past and not rec.handles:
        raise mismatch(method.name, f"the ETRecord has no debug handles for it, the program calls {len(past)} "
                                    f"kernels")
    if past:
        raise mismatch(method.name, f"the ETRecord's debug handles end at instruction {last}, the program calls "
                                    f"kernels up to instruction {past[-1]} ({len(past)} past the ETRecord's)")
    if not rec.has_graph:
        return
    ix = _index(rec)
    kernels = [(i, _kernel_op(i)) for i in instructions if i.kind == InstructionKind.KERNEL_CALL and i.index in rec.handles]
    differ = [i for i, op in kernels if not any(op in ix.ops.get(h, ()) for h in rec.handles_of(i.index))]
    if kernels and 2 * len(differ) > len(kernels):
        first = differ[0]
        named = sorted({op for h in rec.handles_of(first.index) for op in ix.ops.get(h, ())})
        raise mismatch(method.name, f"{len(differ)} of {len(kernels)} kernel calls run another operator than "
                                    f"their handle's nodes (instruction {first.index} calls "
                                    f"{printable(first.target)}, the ETRecord's nodes run "
                                    f"{first_few(named, 12) or 'nothing'})")
    _check_shapes(method, rec, kernels, _Work(method.name, ix))


def _fits(node_shape: tuple, shape: tuple) -> bool:
    """A tensor's shape as planned agrees with its node's (a symbolic dimension agrees with any bound)."""
    return len(node_shape) == len(shape) and all(a is None or a == b for a, b in zip(node_shape, shape))


def _check_shapes(method: "Method", rec: MethodRecord, kernels, work: _Work) -> None:
    """Refuse an ETRecord whose node writes another shape than the program's instruction does (the same
    graph with another layer width: operators and handles agree, shapes do not)."""
    written: dict[int, list[tuple[int, ...]]] = {}
    for t in method.planned:
        if t.producer is not None and t.role != Role.VIEW:
            written.setdefault(t.producer, []).append(t.shape)
    ix = _index(rec)
    for ins, op in kernels:
        shapes = written.get(ins.index)
        if not shapes:
            continue
        groups = [g for h in rec.handles_of(ins.index) if (g := ix.shaped.get((h, op))) is not None]
        if not groups or any(tuple(s) in g[0] for g in groups for s in shapes):
            continue
        symbolic = [o for g in groups for o in g[1]]
        work.charge(len(symbolic) * len(shapes))
        if not any(_fits(o, s) for o in symbolic for s in shapes):
            nd = groups[-1][2]
            theirs = ", ".join("[" + ", ".join("?" if d is None else str(d) for d in o) + "]" for o in nd.output_shapes)
            raise mismatch(method.name, f"instruction {ins.index} ({printable(ins.target)}) writes "
                                        f"{', '.join(str(list(s)) for s in shapes)}, its node {nd.name} in the "
                                        f"ETRecord writes {theirs}")


def _modules(nodes: Iterable[NodeInfo]) -> tuple[tuple[str, str], ...]:
    return tuple(dict.fromkeys((nd.module, nd.module_type) for nd in nodes if nd.module_stack))


def _exits(nodes: tuple[NodeInfo, ...], consumers: dict[str, set[str]], graph_outputs) -> list[NodeInfo]:
    """The nodes of a swallowed subgraph whose outputs are read outside it (or are the graph's outputs)."""
    inside = {nd.name for nd in nodes}
    return [nd for nd in nodes
            if any(o in graph_outputs or not inside.issuperset(consumers.get(o, ())) for o in nd.outputs)]


def attribute(method: "Method", rec: ETRecord | MethodRecord, *, check: bool = True) -> tuple[TensorSource, ...]:
    """Every planned tensor of ``method`` (in :attr:`Method.planned` order) with its node, module and
    source line from the ETRecord. Raises :class:`~pte_lab.errors.ETRecordError` for another export's."""
    if isinstance(rec, ETRecord):
        found = rec.method(method.name)
        if found is None:
            raise mismatch(method.name, f"not in the ETRecord (it has {first_few(rec.methods, 12) or 'no methods'})")
        rec = found
    if check:
        check_method(method, rec)
    ix = _index(rec)
    work = _Work(method.name, ix)
    instructions = method.instructions
    swallowed: dict[tuple[int, ...], tuple] = {}  # a delegate call's handles -> (node, modules)

    def fields(producer: int) -> tuple:
        ins = instructions[producer]
        if ins.kind == InstructionKind.DELEGATE_CALL:
            hs = rec.handles_of(producer)
            if hs not in swallowed:
                work.charge(sum(ix.weight.get(h, 0) for h in hs))
                nodes = rec.nodes_of(producer)
                exits = _exits(nodes, ix.consumers, ix.graph_outputs)
                swallowed[hs] = ((exits[0] if len(exits) == 1 else None), _modules(nodes))
            node, modules = swallowed[hs]
        else:
            node = kernel_node(rec, ins)
            modules = _modules([node]) if node is not None else ()
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
    """:func:`attribute` for every method of a :class:`~pte_lab.model.Pte`, after ``check_etrecord``."""
    check_etrecord(pte.method_names, record, lambda n: pte.methods[n].n_instructions)
    return {name: attribute(pte.methods[name], record) for name in pte.method_names if record.method(name) is not None}


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
