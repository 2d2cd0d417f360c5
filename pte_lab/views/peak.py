"""The peak, explained in one paragraph: :func:`peak_lines` words a :class:`~pte_lab.model.peak.PeakStory`.

The one home of each cause's prose: what it is, the bytes at stake at the peak, and the export change
that recovers them.
"""

from __future__ import annotations

from ..model.backends import XNNPACK
from ..model.dtypes import short_shape
from ..model.findings.plan import FUSED_ATTENTION_CHANGE, SAFE_SOFTMAX_CHANGE
from ..model.peak import PeakCause, PeakCauseKind, PeakGroup, PeakStory
from ..printable import text_view
from ..units import count, first_few, human_bytes
from ..vocabulary import DelegateCall, Role

__all__ = ["peak_lines", "peak_head", "peak_text", "cause_line", "group_phrase"]



_ROOT = "the model itself"  # the root module's path is ""


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def _at(at: int, target: str | None, n: int, lead: str = "at ") -> str:
    """Where a peak is: ``at instruction 4 of 8 (aten::addmm.out)`` (``lead`` before an instruction), or as the
    inputs are written (-1) or the outputs read (``n``)."""
    if at == -1:
        return "as the inputs are written"
    if at >= n:
        return "as the outputs are read"
    return f"{lead}instruction {at} of {n} ({target})"


def _where(s: PeakStory) -> str:
    return _at(s.at, s.at_target, s.n_instructions)


def group_phrase(g: PeakGroup, peak: int) -> str:
    """``3 float32[1, 8, 512, 512] tensors, 8 MiB each (24 MiB, 99% of the peak), written by a -> b in attn
    (Attn)``."""
    what = (f"{count(len(g.values), f'{g.dtype}{short_shape(g.shape)} tensor')}, {human_bytes(g.nbytes)} each"
            if len(g.values) > 1 else f"one {g.dtype}{short_shape(g.shape)} tensor")
    ops = [op for op in g.ops if op not in (Role.INPUT, Role.OUTPUT, Role.MUTABLE_BUFFER)]
    role = ("state kept between calls" if Role.MUTABLE_BUFFER in g.roles else
            "a method input" if g.roles == (Role.INPUT,) else
            "method inputs among them" if Role.INPUT in g.roles or Role.INPUT_OUTPUT in g.roles else "")
    by = f", written by {' -> '.join(ops)}" if ops else ""
    mods = f" in {first_few((f'{p or _ROOT} ({t})' for p, t in g.modules), 3)}" if g.modules else ""
    return (f"{what} ({human_bytes(g.total)}, {_share(g.total, peak)} of the peak)" + (f", {role}" if role else "")
            + by + mods)


def cause_line(c: PeakCause, s: PeakStory) -> str:
    """One cause: what it is, the bytes at stake, and the change that recovers them."""
    at_stake = f"{human_bytes(c.nbytes)} ({_share(c.nbytes, s.peak_bytes)} of the peak)"
    if c.kind is PeakCauseKind.ATTENTION_SCORES:
        side = s.groups[c.groups[0]].shape[-1]
        inside = sorted({op.backend for op in c.names if isinstance(op, DelegateCall)})
        how = (f"separate kernels (its softmax inside {first_few(inside, 2)}, the planes passed between delegate "
               f"calls and planned)" if inside else "portable kernels")
        return (f"attention scores: {at_stake} in square [..., {side}, {side}] tensors around a softmax "
                f"({first_few(c.names, 4)}), an attention decomposed into {how}. They grow "
                f"with the square of the sequence length. {FUSED_ATTENTION_CHANGE[0].upper()}"
                f"{FUSED_ATTENTION_CHANGE[1:]}.")
    if c.kind is PeakCauseKind.SAFE_SOFTMAX:
        return safe_softmax_line(c, s)
    if c.kind is PeakCauseKind.DYNAMIC_BOUND:
        ins = first_few((f"input {p} {short_shape(shape)}" for p, shape in s.dynamic_inputs), 3)
        return (f"dynamic shapes at their upper bound: {at_stake} in tensors whose shape is dynamic"
                + (f" ({ins} as exported)" if ins else "") + ". ExecuTorch plans every tensor at its bound and "
                "allocates the arena whole, whatever shape you run; a smaller max in torch.export.Dim at export "
                "(export_llm: export.max_seq_length; the caches follow export.max_context_length) shrinks them.")
    if c.kind is PeakCauseKind.STATE_FP32:
        return (f"float32 state: {at_stake} kept between calls (a KV cache or mutable buffer) in float32. An "
                f"fp16 or bf16 cache halves it; an int8 cache (export_llm: model.quantize_kv_cache=true) keeps "
                f"head_dim int8 values plus a float32 scale and an int8 zero point per position and head, "
                f"(head_dim + 5) / (4 x head_dim) of it: about a third at head_dim 16, a quarter at 128.")
    if c.kind is PeakCauseKind.WEIGHT_COPIES:
        return (f"weights copied into the arena: {at_stake} written by permute_copy from weights the file "
                f"holds (a portable Linear transposes its weight at every call). Lowered to XNNPACK "
                f"(XnnpackPartitioner), the weights are packed once at load instead, on the heap.")
    if c.kind is PeakCauseKind.OUTSIDE_DELEGATE:
        # export_llm's option is XNNPACK's: said only where the method delegates to XNNPACK
        llm = (" (export_llm lowers only the quantized linears unless backend.xnnpack.extended_ops=true)"
               if XNNPACK.id in s.backends else "")
        return (f"operators outside the delegate: {at_stake} written by ExecuTorch's CPU kernels outside the "
                f"delegate calls ({first_few(c.names, 4)}; the outside_delegate finding says where each runs). "
                f"The partitioner did not take these operators{llm}; "
                f"only those fused into one delegate call with their neighbours leave the plan, into the "
                f"delegate's own workspace: a tensor passed between delegate calls stays planned.")
    raise ValueError(f"no wording for peak cause {c.kind!r}")


def safe_softmax_line(c: PeakCause, s: PeakStory) -> str:
    """The safe softmax's planes: how many it adds, their bytes at the peak, and what the peak is without them."""
    planes = [g for g in (s.groups[k] for k in c.groups) if len(g.shape) >= 2 and g.shape[-1] == g.shape[-2]]
    per = [g for g in planes if g.dtype != "bool"]
    g = per[0] if per else s.groups[c.groups[0]]
    n_live = sum(1 for v in c.values if v in set(g.values))
    times = f" after each of its {c.times} softmaxes" if c.times > 1 else " after its softmax"
    without = ""
    if c.recovers:
        without = (f"; without them the peak falls from {human_bytes(s.peak_bytes)} by {human_bytes(c.recovers)} "
                   f"({_share(c.recovers, s.peak_bytes)}) to {human_bytes(s.peak_bytes - c.recovers)}")
        if c.recovers < c.nbytes:
            without += (f" (less than the {human_bytes(c.nbytes)} they hold: the softmax's output then lives on "
                        f"in where's place)")
        if c.after is not None:
            a = c.after
            alive = [f"{g.dtype}{short_shape(g.shape)}" + (f" x{len(g.values)}" if len(g.values) > 1 else "")
                     + (f" ({' -> '.join(g.ops)})" if g.ops else "") for g in a.groups[:3]]
            more = f" and {count(len(a.groups) - 3, 'smaller group')}" if len(a.groups) > 3 else ""
            where = _at(a.at, a.at_target, s.n_instructions, lead="")
            without += (f", and the peak {'stays' if a.at == s.at else 'moves to'} {where}"
                        f", where {', '.join(alive)}{more} are alive")
    return (f"safe softmax: the decomposition of scaled_dot_product_attention (nn.MultiheadAttention) adds "
            f"where(mask, s, full_like(s, 0)) under an eq -> logical_not -> any mask{times}: 2 more "
            f"{g.dtype}{short_shape(g.shape)} planes ({human_bytes(g.nbytes)} each) and 2 bool ones each time; "
            f"{n_live} of them alive at the peak (with the mask) hold {human_bytes(c.nbytes)} "
            f"({_share(c.nbytes, s.peak_bytes)} of the peak){without}. To remove them, {SAFE_SOFTMAX_CHANGE} "
            f"(the plan with it made, at any bound: pte-lab what-if FILE --apply attention_scores).")


@text_view
def peak_text(s: PeakStory) -> str:
    """The story as plain Python prints it: the paragraph and its causes."""
    return "\n".join(peak_lines(s))


def peak_head(s: PeakStory) -> str:
    """The paragraph: the peak, where it happens, and the groups of tensors that make it."""
    shown = s.shown[:3]
    arena = f"arena {s.mem_id} ({human_bytes(s.arena_size)}, {s.device})"
    rest = len(s.groups) - len(shown)
    return (f"Peak: {human_bytes(s.peak_bytes)} of {arena} alive {_where(s)}: "
            + "; ".join(group_phrase(g, s.peak_bytes) for g in shown)
            + (f"; and {count(rest, 'smaller group')} of tensors" if rest else "") + ".")


def peak_lines(s: PeakStory | None) -> list[str]:
    """The paragraph (first line) and one line per cause; empty without a peak."""
    if s is None:
        return []
    return [peak_head(s)] + [f"- {cause_line(c, s)}" for c in s.causes] + _overlap_lines(s)


_CAUSE_NAMES = {PeakCauseKind.ATTENTION_SCORES: "attention scores", PeakCauseKind.SAFE_SOFTMAX: "safe softmax",
                PeakCauseKind.DYNAMIC_BOUND: "dynamic shapes", PeakCauseKind.STATE_FP32: "float32 state",
                PeakCauseKind.WEIGHT_COPIES: "weights copied", PeakCauseKind.OUTSIDE_DELEGATE: "operators outside"}


def _overlap_lines(s: PeakStory) -> list[str]:
    """Causes that count the same tensors: their shares are of one peak, not to be added up."""
    pairs = s.overlaps()
    if not pairs:
        return []
    kinds = list(dict.fromkeys(k for p in pairs for k in p))
    both = {PeakCauseKind.ATTENTION_SCORES, PeakCauseKind.DYNAMIC_BOUND} <= set(kinds)
    example = " (a dynamic [L, L] score plane is a dynamic tensor and an attention score at once)" if both else ""
    return [f"- these causes overlap: {first_few((_CAUSE_NAMES[k] for k in kinds), 6)} count some of the same "
            f"tensors{example}: the same bytes, so their shares of the {human_bytes(s.peak_bytes)} peak do not add "
            f"up; each one's bytes are what its own change acts on"]
