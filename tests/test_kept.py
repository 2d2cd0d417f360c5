"""Measurements kept on disk (pte_lab.runtime.kept): a program sized again answers at once, says when it
was measured, and never gives a stale answer: one byte of the program changed, another pte_lab, or
``cache=False``, and it is measured afresh."""

from __future__ import annotations

import pytest

pytest.importorskip("executorch.runtime")

import pte_lab
from pte_lab.cli import main
from pte_lab.runtime import kept
from pte_lab.runtime.sizing import results


@pytest.fixture
def kept_here(tmp_path, monkeypatch):
    """Kept measurements on, in a folder of this test's."""
    monkeypatch.delenv(kept.NO_CACHE_ENV, raising=False)
    monkeypatch.setattr(kept, "folder", lambda: tmp_path / "measured")
    workers = []
    real = results.Session

    def counted(*a, **k):
        workers.append(a)
        return real(*a, **k)

    monkeypatch.setattr(results, "Session", counted)
    return workers


def _figures(s):
    return {n: (m.method_allocator, m.temp_allocator, m.planned) for n, m in s.methods.items()}


def test_asked_again_the_kept_figures_come_back_and_say_so(program_path, tmp_path, kept_here, capsys):
    path = tmp_path / "model.pte"
    path.write_bytes(program_path("portable").read_bytes())
    first = pte_lab.sizes(str(path), runs=1)
    workers = len(kept_here)
    assert first.kept is None and workers >= 1
    again = pte_lab.sizes(str(path), runs=1)
    assert len(kept_here) == workers  # no worker
    assert again.kept is not None and _figures(again) == _figures(first)
    # the same bytes under another name: its figures, its name; the CLI says where they come from
    other = tmp_path / "copy.pte"
    other.write_bytes(path.read_bytes())
    assert pte_lab.sizes(str(other), runs=1).path == str(other)
    assert main(["sizes", str(other), "--runs", "1"]) == 0
    out = capsys.readouterr().out
    assert len(kept_here) == workers and out.startswith("copy.pte: ")
    assert "(kept: measured here " in out and "--no-cache measures again" in out
    assert main(["sizes", str(other), "--runs", "1", "--no-cache"]) == 0
    assert len(kept_here) > workers and "(kept:" not in capsys.readouterr().out


def test_one_byte_changed_is_measured_afresh(program_path, tmp_path, kept_here):
    path = tmp_path / "model.pte"
    data = bytearray(program_path("portable").read_bytes())
    path.write_bytes(data)
    pte_lab.sizes(str(path), runs=1, heap_runs=1)
    data[-1] ^= 0x01  # the last byte of the constants: the same plan, other bytes
    path.write_bytes(data)
    again = pte_lab.sizes(str(path), runs=1, heap_runs=1)
    assert again.kept is None and len(kept_here) == 2


def test_another_pte_lab_is_measured_afresh(program_path, tmp_path, kept_here, monkeypatch):
    path = tmp_path / "model.pte"
    path.write_bytes(program_path("portable").read_bytes())
    pte_lab.sizes(str(path), runs=1, heap_runs=1)
    monkeypatch.setattr(kept, "code_digest", lambda: "an edited pte_lab")
    assert pte_lab.sizes(str(path), runs=1, heap_runs=1).kept is None and len(kept_here) == 2


def test_cache_false_keeps_nothing_and_clear_forgets(program_path, tmp_path, kept_here, capsys):
    path = tmp_path / "model.pte"
    path.write_bytes(program_path("portable").read_bytes())
    pte_lab.sizes(str(path), runs=1, heap_runs=1, cache=False)
    assert kept.summary() == (0, 0)
    pte_lab.sizes(str(path), runs=1, heap_runs=1)
    n, size = kept.summary()
    assert n == 1 and size > 0
    assert main(["cache"]) == 0 and capsys.readouterr().out.startswith("1 kept measurement (")
    assert main(["cache", "clear"]) == 0 and capsys.readouterr().out.startswith("forgot 1 kept measurement (")
    assert kept.summary() == (0, 0)
    assert pte_lab.sizes(str(path), runs=1, heap_runs=1).kept is None and len(kept_here) == 3


def test_an_entry_that_cannot_be_read_back_is_measured_again(program_path, tmp_path, kept_here):
    path = tmp_path / "model.pte"
    path.write_bytes(program_path("portable").read_bytes())
    pte_lab.sizes(str(path), runs=1, heap_runs=1)
    (entry,) = (tmp_path / "measured").rglob("*.pickle")
    entry.write_bytes(entry.read_bytes()[:20])  # cut short
    assert pte_lab.sizes(str(path), runs=1, heap_runs=1).kept is None and len(kept_here) == 2


def test_what_if_learns_once_and_says_so(program_path, tmp_path, kept_here, monkeypatch, capsys):
    """The shapes what-if learns from runs are kept on disk too: another process (the CLI again) asks no
    worker, says the runs were kept, and gives the same answer; --no-cache runs them again."""
    from pte_lab.planning import at_bound as planning

    started = []
    real = planning.Worker

    def counted(*a, **k):
        started.append(1)
        return real(*a, **k)

    monkeypatch.setattr(planning, "Worker", counted)
    path = tmp_path / "dynamic.pte"
    path.write_bytes(program_path("dynamic").read_bytes())
    argv = ["what-if", str(path), "--bound", "0:0", "--budget", "100KiB"]
    assert main(argv) == 0 and len(started) == 1
    first = capsys.readouterr().out
    planning._FITS.clear()  # as a new process would: only the disk remembers
    assert main(argv) == 0 and len(started) == 1
    again = capsys.readouterr().out
    assert "(kept: the runs were made here " in again and "(kept:" not in first
    assert again.splitlines()[0] == first.splitlines()[0]  # the same largest bound
    assert main([*argv, "--no-cache"]) == 0 and len(started) == 2


def test_a_method_that_could_not_run_is_not_kept(tmp_path, kept_here):
    """What cannot run here depends on what this install has (a backend installed later runs it): such an
    answer is given, not kept."""
    from pathlib import Path

    data = (Path(pte_lab.__file__).parent / "data" / "ethos_u" / "u55_128_shared_sram.pte").read_bytes()
    path = tmp_path / "vendor.pte"
    path.write_bytes(data.replace(b"EthosUBackend", b"VendorBackend"))
    assert "VendorBackend" in pte_lab.sizes(str(path)).skipped["forward"]
    assert kept.summary() == (0, 0)


def test_cache_counts_the_kept_exports_and_forgets_them_only_when_asked(tmp_path, kept_here, monkeypatch, capsys):
    from pte_lab import examples_kept

    monkeypatch.setenv("PTE_LAB_CACHE_DIR", str(tmp_path))
    examples_kept.kept("portable", {}, lambda path: open(path, "wb").write(b"not a real program, 32 bytes..."))
    assert main(["cache"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("1 kept example export (") and str(tmp_path / "examples") in out[1]
    assert main(["cache", "clear"]) == 0 and len(capsys.readouterr().out.splitlines()) == 1
    assert examples_kept.summary()[0] == 1  # measurements only: an export costs minutes to make again
    assert main(["cache", "clear", "--exports"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("forgot 1 kept example export (")
    assert examples_kept.summary() == (0, 0)


def test_native_builds_are_kept_per_cache_folder_listed_and_cleared_only_when_asked(tmp_path, monkeypatch, capsys):
    """A new cache folder builds pte_lab's native parts again, and says so as each starts (where it keeps them);
    `pte-lab cache` lists them with their size, `cache clear` keeps them, `cache clear --native` forgets them."""
    from pte_lab.progress import telling
    from pte_lab.runtime import native

    monkeypatch.setenv("PTE_LAB_CACHE_DIR", str(tmp_path))
    heard = []
    with telling(heard.append):
        built = native.counter_path()
        native.counter_path()  # built: nothing to say
    assert heard == [f"building pte_lab's allocation counter (seconds; once per ExecuTorch install and cache folder: "
                     f"kept in {tmp_path / 'native'})"]
    assert built.is_relative_to(tmp_path / "native") and native.builds() == (1, built.stat().st_size)
    assert main(["cache"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[2].startswith("1 kept native build (") and str(tmp_path / "native") in listed[2]
    assert "cleared only with clear --native" in listed[2]
    assert main(["cache", "clear"]) == 0 and len(capsys.readouterr().out.splitlines()) == 1  # the measurements
    assert built.exists()  # not a measurement: a build costs seconds and never goes stale
    assert main(["cache", "clear", "--native"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("forgot 1 kept native build (")
    assert not built.exists() and native.builds() == (0, 0)


def test_diff_sizes_reads_kept_sizings_and_says_so(program_path, tmp_path, kept_here, capsys):
    """`diff --sizes` announces a sizing only where it makes one; figures read back from a kept sizing (made by
    `pte-lab sizes` or by an earlier diff) are said to be kept, with when they were measured, as `sizes` says it."""
    import json

    a, b = tmp_path / "a.pte", tmp_path / "b.pte"
    a.write_bytes(program_path("portable").read_bytes())
    b.write_bytes(program_path("xnnpack").read_bytes())
    assert main(["sizes", str(a)]) == 0  # the first program sized (and kept) by `pte-lab sizes`
    capsys.readouterr()
    workers = len(kept_here)
    assert main(["diff", "--sizes", str(a), str(b)]) == 0
    out, err = capsys.readouterr()
    said = [line.split("] ", 1)[1] for line in err.splitlines() if line.startswith("pte-lab: [")]
    assert not any(s.startswith("sizing the first program") for s in said)  # kept: nothing measured
    assert f"sizing the second program ({b})" in said and len(kept_here) > workers
    assert "  (kept: the first program's figures, measured here " in out and "the second's" not in out
    assert main(["diff", "--sizes", str(a), str(b)]) == 0
    out, err = capsys.readouterr()
    assert "sizing the" not in err and "starting an isolated worker" not in err
    assert ("the first program's figures, measured here " in out and " and the second's, " in out
            and "--no-cache measures again" in out)
    assert main(["diff", "--sizes", str(a), str(b), "--json"]) == 0
    kept_at = json.loads(capsys.readouterr().out)["sizes"]["kept"]
    assert len(kept_at) == 2 and all(isinstance(t, float) for t in kept_at)
    assert main(["diff", "--sizes", "--no-cache", str(a), str(b)]) == 0
    out, err = capsys.readouterr()
    assert "(kept:" not in out and "sizing the first program" in err and "sizing the second program" in err
