"""The JSON document of ``pte-lab inspect --json`` and :meth:`Pte.to_dict`.

Schema ``pte_lab.inspect`` version 1 (additions keep the version; a removal
or a change of meaning bumps it)::

    {
      "schema": "pte_lab.inspect", "version": 1,
      "file": {"path", "size", "flatbuffer_size", "identifier", "segment_base_offset",
               "constant_bytes", "delegate_bytes": {backend: bytes},
               "named_data_keys": [..], "expects_external_data": bool,
               "segments": [{"index", "kind", "offset", "size"}]},
      "methods": {
        name: {
          "instructions": int, "values": int,
          "inputs"/"outputs": [{"position", "value", "kind", "dtype", "shape", "nbytes",
                                "planned", "mem_id", "offset", "device"}],
          "operator_counts": {op: n},
          "delegates": [{"index", "backend", "target_device", "location", "size", "compile_specs"}],
          "arenas": [{"mem_id", "runtime_index", "size", "device", "peak_bytes", "efficiency",
                      "tensors"}],
          "tensors": [{"value", "role", "dtype", "shape", "nbytes", "mem_id", "offset",
                       "device", "first", "last", "producer", "op", "dynamic", "name"}],
          "findings": [{"severity", "kind", "message"}]
        }
      },
      "load_cost": {"corrected"|"legacy"|"module": [{"step", "method", "sharing", "mem_id",
                    "runtime_index", "device", "bytes"}]},
      "warnings": [{"severity", "kind", "method", "message"}]
    }

Conventions: ``mem_id`` is the file's arena number (0 reserved),
``runtime_index = mem_id - 1``; ``first``/``last`` follow
:mod:`pte_lab.model.lifetimes` (inputs from -1, outputs to the instruction
count); byte counts are integers.
"""

from __future__ import annotations

from dataclasses import asdict

from ..model.load_cost import LOADERS

SCHEMA = "pte_lab.inspect"
VERSION = 1


def _specs(v):
    return v if isinstance(v, str) else v.hex()


_TENSOR_FIELDS = ("value", "role", "dtype", "shape", "nbytes", "mem_id", "offset", "device",
                  "first", "last", "producer", "op", "dynamic", "name")


def method_dict(m) -> dict:
    def io(specs):
        return [{**asdict(s), "shape": list(s.shape) if s.shape is not None else None} for s in specs]

    tensors = []
    for t in m.planned:  # hot for big methods: no dataclasses.asdict (it deep-copies)
        d = dict(zip(_TENSOR_FIELDS, (t.value, t.role, t.dtype, list(t.shape), t.nbytes, t.mem_id, t.offset,
                                      t.device, t.first, t.last, t.producer, t.op, t.dynamic, t.name)))
        tensors.append(d)

    return {
        "instructions": m.n_instructions,
        "values": m.n_values,
        "inputs": io(m.inputs),
        "outputs": io(m.outputs),
        "operator_counts": m.operator_counts,
        "delegates": [
            {"index": d.index, "backend": d.backend, "target_device": d.target_device,
             "location": d.location, "size": d.size,
             "compile_specs": {k: _specs(v) for k, v in d.compile_specs.items()}}
            for d in m.delegates
        ],
        "arenas": [
            {"mem_id": a.mem_id, "runtime_index": a.runtime_index, "size": a.size, "device": a.device,
             "peak_bytes": a.peak_bytes, "efficiency": a.efficiency, "tensors": a.tensors}
            for a in m.arenas
        ],
        "tensors": tensors,
        "findings": [{"severity": f.severity, "kind": f.kind, "message": f.message} for f in m.findings()],
    }


def document(p, methods: list[str] | None = None) -> dict:
    names = list(p.methods) if methods is None else methods
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "file": {
            "path": p.path,
            "size": p.file_size,
            "flatbuffer_size": p.flatbuffer_size,
            "identifier": p.identifier,
            "segment_base_offset": p.header.segment_base_offset,
            "constant_bytes": p.constant_bytes,
            "delegate_bytes": p.delegate_bytes,
            "named_data_keys": p.named_data_keys,
            "expects_external_data": p.expects_external_data,
            "segments": [asdict(s) for s in p.segments],
        },
        "methods": {n: method_dict(p.methods[n]) for n in names},
        "load_cost": {
            loader: [{k: v for k, v in r.items() if k != "loader"} for r in p.load_cost_records(loader)]
            for loader in LOADERS
        },
        "warnings": [{"severity": w.severity, "kind": w.kind, "method": w.method, "message": w.message}
                     for w in p.warnings()],
    }
