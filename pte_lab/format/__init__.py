"""Bytes to records: the ``.pte`` header and flatbuffer, read lazily and checked (and a ``.ptn`` package's
members, :mod:`pte_lab.format.ptn`).

This layer imports neither torch nor executorch. Importing the package imports none of its modules: each
public name is loaded when first used (``pte_lab.lazy_names``), so that a module that needs one fact of the
format (``TENSOR_ALIGNMENT``, a scalar type) does not load the reader. ``read`` reads the
header and then only the flatbuffer region of the file (``program_size``
bytes); segment data (constants, delegate blobs, named data) is located and
sized but never read, so a 400 MB file costs what a 4 MB one does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_names import lazy_names

#: each public name -> the submodule that defines it
_LAZY = {
    "read": "reader", "read_data": "reader", "identify": "reader", "Source": "reader", "KINDS": "reader",
    "Header": "header",
    "RawProgram": "program_tables", "RawPlan": "program_tables", "RawTensor": "program_tables", "RawValue": "program_tables",
    "RawBundled": "bundled", "RawData": "flat_tensor", "RawPackage": "ptn", "read_package": "ptn",
    "ScalarType": "schema", "TensorShapeDynamism": "schema", "TensorDataLocation": "schema", "DataLocation": "schema",
    "TENSOR_ALIGNMENT": "schema", "mem_id_of": "schema", "runtime_index_of": "schema",
}

__all__ = [
    "read", "read_data", "identify", "Header", "RawProgram", "RawPlan", "RawTensor", "RawValue", "RawBundled",
    "RawData", "RawPackage", "read_package", "Source", "ScalarType", "TensorShapeDynamism", "TensorDataLocation", "DataLocation", "TENSOR_ALIGNMENT",
    "mem_id_of", "runtime_index_of",
]

if TYPE_CHECKING:  # pragma: no cover
    from .bundled import RawBundled
    from .flat_tensor import RawData
    from .header import Header
    from .ptn import RawPackage, read_package
    from .program_tables import RawPlan, RawProgram, RawTensor, RawValue
    from .reader import Source, identify, read, read_data
    from .schema import (TENSOR_ALIGNMENT, DataLocation, ScalarType, TensorDataLocation, TensorShapeDynamism,
                         mem_id_of, runtime_index_of)


__getattr__, __dir__ = lazy_names(__name__, _LAZY)
