"""The JSON document of ``pte-lab inspect --json`` and :meth:`Pte.to_dict`.

Schema ``pte_lab.inspect`` version 1 (additions keep the version; a removal
or a change of meaning bumps it)::

    {
      "schema": "pte_lab.inspect", "version": 1,
      "file": {"path", "size",
               "flatbuffer_size",   # Pte.flatbuffer_size: header + tables + inline constants + inline delegate data
               "flatbuffer_size_regions": {"header", "flatbuffer", "inline constant", "inline delegate"},
                                    # bytes of each (0 where absent), summing to flatbuffer_size; "flatbuffer" is
                                    # the tables alone, the figure text views and diff call the flatbuffer
               "identifier", "segment_base_offset",
               "constant_bytes", "delegate_bytes": {backend: bytes},
               "named_data_keys": [..], "expects_external_data": bool,
               "segments": [{"index", "kind", "offset", "size"}]},
      "methods": {
        name: {
          "instructions": int, "values": int,
          "inputs"/"outputs": [{"position", "value", "kind", "dtype", "shape", "nbytes",
                                "planned", "mem_id", "offset", "device", "dynamic"}],
          "operator_counts": {op: n},
          "delegates": [{"index", "backend", "target_device", "location", "size", "compile_specs",
                         "memory"}],   # memory: null, or what an EthosUBackend blob declares (below)
          "arenas": [{"mem_id", "runtime_index", "device", "size", "peak_bytes", "efficiency",
                      "tensors", "size_over_peak"}],  # size_over_peak = Arena.size_over_peak, the diff
                                     # document's name; efficiency the same figure (version 1's name, kept);
                                     # tensors = Arena.n_tensors
          "tensors": [{"value", "role", "dtype", "shape", "nbytes", "mem_id", "offset",
                       "device", "first", "last", "producer", "op", "dynamic", "name",
                       "node", "module", "module_type", "source"}],  # the last four with an ETRecord only
          "findings": [{"severity", "kind", "message",
                        "at_stake", "change"}]  # the last two for a finding that prescribes only
        }
      },
      "load_cost": {"corrected"|"legacy"|"module": [{"step", "method", "sharing", "mem_id",
                    "runtime_index", "device", "bytes", "used_by"}]},
      "warnings": [{"severity", "kind", "method", "message", "at_stake", "change"}],  # as "findings"
      "bundled": {"version", "program_bytes", "suites": [{"method", "cases",        # .bpte only
                  "inputs"/"expected_outputs": [{"kind", "dtype", "shape", "value"}]}]},
      "data": {"path", "keys", "missing"}                                            # with --data only
    }

A delegate's ``memory`` (added in version 1; null for backends whose blobs pte_lab does not read)::

    {"target", "system_config", "memory_mode",          # from the compile specs (Vela's flags); null: not said
     "blob_offset", "command_bytes", "weight_bytes",     # bytes; null: no such block
     "scratch_bytes", "scratch_from",                    # "temp allocator" (every execute), or the program's bytes
     "parts": [{"part", "bytes", "source", "allocator", "lives"}],   # lives: where the memory mode needs it
     "inputs"/"outputs": [{"shape" (6 ints), "elem_size", "offset", "region"}],   # Vela's descriptors
     "external": [{"block", "key", "bytes"}],            # blocks stored in named data
     "problems": [..],                                   # what ExecuTorch's reader refuses, in its order
     "unread": null | why the blob was not read}

A ``.ptd`` file alone gives the document ``pte_lab.data`` version 1:
``{"schema", "version", "file": {"path", "size", "data_bytes"}, "tensors": [{"key", "dtype",
"shape", "nbytes", "segment", "offset"}]}``.

Tensor keys are :data:`pte_lab.model.TENSOR_COLUMNS`; load-cost keys are
:data:`pte_lab.model.LOAD_COST_COLUMNS` less ``loader``. Conventions: ``mem_id``
is the file's arena number (0 reserved), ``runtime_index = mem_id - 1``;
``first``/``last`` follow :mod:`pte_lab.model.lifetimes` (inputs from -1,
outputs to the instruction count); byte counts are integers.
"""

from __future__ import annotations

from dataclasses import asdict

from ..model.many_records import paused_gc
from ..model.layout import PREFIX_REGIONS, flatbuffer_regions
from ..model.load_cost import LOADERS
from .rows import (
    arena_records,
    bundled_record,
    data_tensor_records,
    delegate_records,
    finding_records,
    io_records,
    load_cost_records,
    tensor_records,
)

SCHEMA = "pte_lab.inspect"
VERSION = 1


def method_dict(m) -> dict:
    return {
        "instructions": m.n_instructions,
        "values": m.n_values,
        "inputs": io_records(m.inputs),
        "outputs": io_records(m.outputs),
        "operator_counts": m.operator_counts,
        "delegates": delegate_records(m),
        "arenas": arena_records(m),
        "tensors": tensor_records(m),
        "findings": finding_records(m.findings(), with_method=False),
    }


def document(p, methods: list[str] | None = None) -> dict:
    with paused_gc():  # a dict per planned tensor
        return _document(p, methods)


def _document(p, methods: list[str] | None) -> dict:
    names = list(p.methods) if methods is None else methods
    regions = flatbuffer_regions(p)
    doc = {
        "schema": SCHEMA,
        "version": VERSION,
        "file": {
            "path": p.path,
            "size": p.file_size,
            "flatbuffer_size": p.flatbuffer_size,
            "flatbuffer_size_regions": {k: regions.get(k, 0) for k in PREFIX_REGIONS},
            "identifier": p.identifier,
            "segment_base_offset": p.header.segment_base_offset,
            "constant_bytes": p.constant_bytes,
            "delegate_bytes": p.delegate_bytes,
            "named_data_keys": p.named_data_keys,
            "expects_external_data": p.expects_external_data,
            "segments": [asdict(s) for s in p.segments],
        },
        "methods": {n: method_dict(p.methods[n]) for n in names},
        "load_cost": {loader: load_cost_records(p.allocation_columns(loader)) for loader in LOADERS},
        "warnings": finding_records(p.warnings(), with_method=True),
    }
    if p.bundled is not None:
        doc["bundled"] = bundled_record(p.bundled)
    if p.data is not None:
        have = set(p.data.keys)
        doc["data"] = {"path": p.data.path, "keys": p.data.keys,
                       "missing": [k for k in p.external_keys if k not in have]}
    return doc


def data_document(d) -> dict:
    """The JSON document of a ``.ptd`` file (``pte_lab.data`` version 1)."""
    return {"schema": "pte_lab.data", "version": 1,
            "file": {"path": d.path, "size": d.file_size, "data_bytes": d.data_bytes,
                     "repeated_entries": d.repeated_entries},
            "tensors": data_tensor_records(d)}
