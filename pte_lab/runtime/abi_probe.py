"""The ABI probe: the size and alignment of ExecuTorch's runtime objects for a target, from the executorch
wheel's own headers compiled (not linked, not run) by that target's compiler.

``native/abi_probe.cpp`` holds two arrays, ``pte_lab_abi_layout`` (sizeof, alignof per type) and
``pte_lab_abi_names``; :func:`probe` compiles it to an object file and reads them back out of its ELF
symbol table. What it finds for each target is kept in ``pte_lab/data/abi.json``
(:func:`pte_lab.model.method_pool.abis` reads it); :func:`write_resource` rewrites that file.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import PteLabError
from .native import executorch_dir, executorch_version

__all__ = ["TARGETS", "AbiProbeError", "ProbeTarget", "probe", "read_object", "write_resource", "compiler_for"]


class AbiProbeError(PteLabError):
    """The ABI probe could not compile, or its object file is not what it wrote."""


@dataclass(frozen=True)
class ProbeTarget:
    """A target the probe compiles for: its compiler and the flags that select its ABI."""

    compiler: str
    flags: tuple[str, ...]
    abi: str


#: target name -> how the probe is compiled for it
TARGETS = {
    "host": ProbeTarget("g++", (), "x86-64 System V (LP64)"),
    "cortex-m": ProbeTarget("arm-none-eabi-g++", ("-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard"),
                            "Arm AAPCS (ILP32), Cortex-M55"),
}

_SOURCE = Path(__file__).with_name("native") / "abi_probe.cpp"
_RESOURCE = Path(__file__).resolve().parents[1] / "data" / "abi.json"


def compiler_for(target: str) -> str | None:
    """The path of ``target``'s compiler, None where it is not installed."""
    return shutil.which(TARGETS[target].compiler)


def _symbols(elf: bytes) -> dict[str, bytes]:
    """The bytes of every defined data symbol of a relocatable ELF object (32- or 64-bit, little-endian)."""
    if elf[:4] != b"\x7fELF" or elf[5] != 1:
        raise AbiProbeError("the probe's object file is not a little-endian ELF file")
    wide = elf[4] == 2
    if wide:
        shoff, = struct.unpack_from("<Q", elf, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", elf, 0x3A)
        sh = "<IIQQQQIIQQ"
        sym, symsize = "<IBBHQQ", 24
    else:
        shoff, = struct.unpack_from("<I", elf, 0x20)
        shentsize, shnum = struct.unpack_from("<HH", elf, 0x2E)
        sh = "<IIIIIIIIII"
        sym, symsize = "<IIIBBH", 16
    sections = [struct.unpack_from(sh, elf, shoff + i * shentsize) for i in range(shnum)]
    out: dict[str, bytes] = {}
    for s in sections:
        if s[1] != 2:  # SHT_SYMTAB
            continue
        strtab = sections[s[6]]
        names = elf[strtab[4]:strtab[4] + strtab[5]]
        for k in range(s[5] // symsize):
            f = struct.unpack_from(sym, elf, s[4] + k * symsize)
            if wide:
                name, _, _, shndx, value, size = f
            else:
                name, value, size, _, _, shndx = f
            if size == 0 or not 0 < shndx < len(sections):
                continue
            data = sections[shndx]
            start = data[4] + value  # a relocatable object's symbol value is its offset in the section
            out[names[name:names.index(b"\0", name)].decode()] = elf[start:start + size]
    return out


def read_object(elf: bytes) -> dict[str, tuple[int, int]]:
    """type name -> (sizeof, alignof), as the probe's object file states them."""
    syms = _symbols(elf)
    try:
        layout, names = syms["pte_lab_abi_layout"], syms["pte_lab_abi_names"]
    except KeyError as e:
        raise AbiProbeError(f"the probe's object file has no {e.args[0]}") from None
    words = struct.unpack(f"<{len(layout) // 4}I", layout)
    labels = names.rstrip(b"\0").split(b"\0")
    if len(labels) * 2 != len(words):
        raise AbiProbeError(f"the probe's object file names {len(labels)} types for {len(words)} figures")
    return {n.decode(): (words[2 * i], words[2 * i + 1]) for i, n in enumerate(labels)}


def probe(target: str) -> dict[str, tuple[int, int]]:
    """Compile the probe for ``target`` against this interpreter's executorch headers and read it back."""
    t = TARGETS[target]
    cc = compiler_for(target)
    if cc is None:
        raise AbiProbeError(f"{t.compiler} is not installed: the ABI probe for {target} needs it")
    include = executorch_dir() / "include"
    with tempfile.TemporaryDirectory(prefix="pte_lab_abi_") as tmp:
        obj = Path(tmp) / "abi_probe.o"
        cmd = [cc, "-std=c++17", "-O1", "-c", *t.flags, "-DC10_USING_CUSTOM_GENERATED_MACROS", f"-I{include}",
               f"-I{include / 'executorch/runtime/core/portable_type/c10'}", str(_SOURCE), "-o", str(obj)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            last = (r.stderr.strip().splitlines() or ["no message"])[-1]
            raise AbiProbeError(f"the ABI probe did not compile for {target}: {last}")
        return read_object(obj.read_bytes())


def write_resource(path: Path = _RESOURCE) -> dict:
    """Probe every target and write what was found to ``path`` (pte_lab/data/abi.json)."""
    doc = {"executorch": executorch_version(), "source": "pte_lab/runtime/native/abi_probe.cpp",
           "targets": {name: {"abi": t.abi, "compiler": t.compiler, "flags": list(t.flags),
                              "types": {k: list(v) for k, v in probe(name).items()}}
                       for name, t in TARGETS.items()}}
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return doc
