"""Findings: what a person should know about a program before loading it. Every one is made here.

Each :class:`Kind` has one severity (:mod:`.base`); a finding that prescribes carries a
:class:`~.base.Prescription` (the bytes at stake and the change that recovers them); each rule sits beside its
wording and the record of what its findings carry, one module per subject: :mod:`.plan` (the plan and its instructions),
:mod:`.devices`, :mod:`.delegates`, :mod:`.file` and :mod:`.state` (sharing between methods).
:func:`method_findings` and :func:`program_findings` apply them in the order the views list them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import (REFUSED_BEFORE_LOADING, REFUSED_BY_RUNTIME, SEVERITIES, UNSAFE_TO_LOAD, Details, Finding, Kind,
                   Prescription, ValuesDetails)
from .delegates import (DelegateBlobFormatDetails, DelegateIODetails, DelegateScratchDetails, DelegateSplitDetails,
                        InlineDelegateDetails, SharedDelegateBlobDetails, delegate_findings, delegate_memory_findings,
                        delegate_split_findings, inline_delegate_findings,
                        outside_delegate_findings, OutsideDelegateDetails)
from .devices import DeviceAllocatorDetails, UnknownDeviceDetails, device_findings
from .file import (ConstantBufferDetails, DuplicateBlobsDetails, DuplicateMethodDetails, ExternalDataDetails,
                   ExternalDataMissingDetails, SegmentRolesDetails, data_findings, duplicate_blob_findings,
                   structure_findings)
from .plan import (ARGUMENT_KINDS, ArenaBoundDetails, AttentionScoresDetails, DynamicBoundDetails, OperandKindsDetails,
                   OperatorArgumentsDetails, PlanOverlapDetails, UncheckedOperatorsDetails, ValueDetails,
                   instruction_findings, operator_findings, plan_findings, prescription_findings)
from .state import (SharedArenasDetails, SharedState, SharedStateDetails, StateNotSharedDetails,
                    shared_arenas_message, shared_state, sharing_findings, sharing_host_methods)

if TYPE_CHECKING:  # pragma: no cover
    from ..method import Method
    from ..pte import Pte

__all__ = ["Kind", "Finding", "Details", "SEVERITIES", "method_findings", "delegate_memory_findings",
           "plan_findings", "program_findings", "shared_arenas_message", "sharing_host_methods", "shared_state",
           "SharedState", "duplicate_blob_findings", "operator_findings", "delegate_findings", "UNSAFE_TO_LOAD",
           "REFUSED_BY_RUNTIME", "REFUSED_BEFORE_LOADING", "ARGUMENT_KINDS",
           # what each kind carries
           "ValuesDetails", "ValueDetails", "PlanOverlapDetails", "OperandKindsDetails", "OperatorArgumentsDetails",
           "UncheckedOperatorsDetails", "DeviceAllocatorDetails", "UnknownDeviceDetails",
           "SharedDelegateBlobDetails", "DelegateBlobFormatDetails", "DelegateScratchDetails", "DelegateIODetails",
           "SegmentRolesDetails", "DuplicateMethodDetails", "ExternalDataDetails", "ExternalDataMissingDetails",
           "ConstantBufferDetails", "DuplicateBlobsDetails", "SharedArenasDetails", "SharedStateDetails",
           "StateNotSharedDetails", "Prescription", "ArenaBoundDetails", "DynamicBoundDetails",
           "InlineDelegateDetails", "DelegateSplitDetails", "OutsideDelegateDetails", "AttentionScoresDetails"]


def method_findings(m: "Method") -> list[Finding]:
    """Device findings, loops and unplanned I/O of a method, what its delegates declare, its plan problems,
    then what to change (with the bytes it recovers)."""
    return (device_findings(m) + instruction_findings(m) + delegate_memory_findings(m) + m.validate()
            + prescription_findings(m) + delegate_split_findings(m) + outside_delegate_findings(m))


def program_findings(p: "Pte", schemas: dict | None = None) -> list[Finding]:
    """Segments, delegate blobs, sharing between methods, external data, then every method's findings
    (with ``schemas``, each KernelCall's arguments against its operator's schema too)."""
    out = (structure_findings(p) + delegate_findings(p) + sharing_findings(p) + data_findings(p)
           + inline_delegate_findings(p))
    for m in p.methods.values():
        out.extend(m.findings(schemas))
    return out
