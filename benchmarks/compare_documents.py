"""Does a change keep what users see? Compare two revisions of pte_lab on the same programs.

For every program, each revision (run in its own fresh interpreter, with that
revision's source first on ``sys.path``) produces: the ``pte-lab inspect --json``
document, the text reprs (program, each method, each arena, the arena pictures)
and the notebook HTML (with its random section ids normalised). The script
prints one row per program and exits 1 if anything differs.

    .venv/bin/python benchmarks/compare_documents.py --base HEAD~3
    .venv/bin/python benchmarks/compare_documents.py --base main --programs DIR

``--base`` is any git revision (checked out into a temporary worktree); the
other side is this working tree. ``--expect 'OLD=>NEW'`` (a regular
expression and its replacement, repeatable) states an intended change: it is
applied to the base's text and HTML before comparing, so only unintended
differences remain. Programs are the repository's examples,
exported once into ``benchmarks/out/programs`` (or every ``*.pte`` in
``--programs``).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: example name -> builder kwargs (the test suite's set, plus a larger transformer)
EXAMPLES = {
    "portable": {}, "xnnpack": {}, "device": {"side": 64}, "device_demo": {"side": 64, "backend": "demo"},
    "device_hostplanned": {"side": 64, "backend": "demo", "non_cpu_planning": False},
    "three_methods": {"side": 64}, "kv_cache": {}, "dynamic": {}, "cond": {}, "unplanned_io": {},
    "external": {}, "transformer": {"layers": 2}, "weights": {"mb": 1.0},
}

# Runs inside each revision's interpreter: only public, long-standing entry points.
_DUMP = r"""
import json, re, sys
from pte_lab.model import open_pte
from pte_lab.views.json_doc import document
from pte_lab.views.text import arena_picture

out = {}
for path in sys.argv[2:]:
    pte = open_pte(path)
    rec = {"json": json.loads(json.dumps(document(pte))), "text": repr(pte),
           "html": re.sub(r"pte-[0-9a-f]{12}", "pte-ID", pte._repr_html_())}
    for name, m in pte.methods.items():
        rec[f"text {name}"] = repr(m)
        for a in m.arenas:
            rec[f"text {name} arena {a.mem_id}"] = repr(a)
            rec[f"picture {name} {a.mem_id}"] = arena_picture(m, a.mem_id, width=48, max_rows=30)
    out[path] = rec
json.dump(out, open(sys.argv[1], "w"))
"""


def _programs(folder: Path | None) -> list[Path]:
    if folder is not None:
        return sorted(p.resolve() for p in folder.glob("*.pte"))
    out = ROOT / "benchmarks" / "out" / "programs"
    out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT))
    from pte_lab import examples

    paths = []
    for name, kwargs in EXAMPLES.items():
        p = out / f"{name}.pte"
        if not p.exists():
            print(f"exporting {name} ...", flush=True)
            p.write_bytes(examples.build(name.split("_")[0] if name.startswith("device") else name, **kwargs))
        paths.append(p)
    return paths


def _dump(tree: Path, programs: list[Path], out: Path) -> dict:
    env_path = str(tree)
    code = f"import sys; sys.path.insert(0, {env_path!r}); " + "exec(compile(" + repr(_DUMP) + ", 'dump', 'exec'))"
    r = subprocess.run([sys.executable, "-c", code, str(out), *map(str, programs)],
                       capture_output=True, text=True, cwd=tempfile.gettempdir())
    if r.returncode != 0:
        raise SystemExit(f"revision at {tree} failed:\n{r.stderr[-3000:]}")
    return json.loads(out.read_text())


def _first_difference(a, b, where="") -> str:
    if type(a) is not type(b):
        return f"{where}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                return f"{where}/{k}: only in {'after' if k not in a else 'before'}"
            d = _first_difference(a[k], b[k], f"{where}/{k}")
            if d:
                return d
        return ""
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{where}: {len(a)} vs {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            d = _first_difference(x, y, f"{where}[{i}]")
            if d:
                return d
        return ""
    if isinstance(a, str) and a != b:
        for i, (x, y) in enumerate(zip(a.splitlines(), b.splitlines())):
            if x != y:
                return f"{where} line {i}: {x!r} vs {y!r}"
        return f"{where}: {len(a)} vs {len(b)} characters"
    return "" if a == b else f"{where}: {a!r} vs {b!r}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="git revision to compare the working tree with")
    ap.add_argument("--programs", type=Path, help="a folder of .pte files (default: the examples)")
    ap.add_argument("--only", nargs="*", default=("json", "text", "picture", "html"),
                    help="which outputs to compare (json text picture html)")
    ap.add_argument("--expect", action="append", default=[], metavar="OLD=>NEW",
                    help="an intended change, applied to the base's text and HTML (regex => replacement)")
    args = ap.parse_args(argv)
    rules = [tuple(e.split("=>", 1)) for e in args.expect]
    programs = _programs(args.programs)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), args.base],
                       check=True, capture_output=True)
        try:
            before = _dump(base, programs, Path(tmp) / "before.json")
            after = _dump(ROOT, programs, Path(tmp) / "after.json")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], capture_output=True)
    same_all = True
    print(f"{'program':24s} " + " ".join(f"{k:>8s}" for k in args.only) + "  first difference")
    for path in map(str, programs):
        a, b = before[path], after[path]
        for k in a:
            if k.split(" ")[0] in ("text", "html"):
                for old, new in rules:
                    a[k] = re.sub(old, new, a[k])
        cells, first = [], ""
        for kind in args.only:
            keys = sorted(k for k in set(a) | set(b) if k.split(" ")[0] == kind)
            diff = next((d for d in (_first_difference(a.get(k), b.get(k), k) for k in keys) if d), "")
            cells.append("same" if not diff else "DIFFERS")
            first = first or diff
        same_all &= not first
        print(f"{Path(path).stem:24s} " + " ".join(f"{c:>8s}" for c in cells) + f"  {first[:160]}")
    print("\nall outputs identical" if same_all else "\nsome outputs differ")
    return 0 if same_all else 1


if __name__ == "__main__":
    sys.exit(main())
