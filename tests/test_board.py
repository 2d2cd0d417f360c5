"""Figures that hold on the board, not only on this host (issue 33 parts 1-2, issue 32 part 4).

Each pool configuration is run under this host's platform layer and under a bare-metal one whose
et_pal_allocate refuses every request (as Arm's does): a method with no temp allocator takes its temp
memory from et_pal_allocate, so an Ethos-U program's NPU scratch has nowhere to come from there. The
report and the header say per configuration which target kinds it holds on, keep what holds on any
target apart from this host's figures, and give one exact total per board, checked against a budget.
Pools and totals are exact; heap figures are never checked against a band.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("executorch.runtime")

import pte_lab
from pte_lab import examples
from pte_lab.cli import main
from pte_lab.units import capacity_bytes, parse_bytes
from pte_lab.runtime.sizing import HOST_ABI
from pte_lab.views.runtime.sizes import c_header, sizes_text
from pte_lab.views.runtime.target_pools import on_target

DATA = Path(examples.ETHOS_U_PROGRAMS)
SRAM_ONLY = DATA / "u55_128_sram_only.pte"
SHARED = DATA / "u55_128_shared_sram.pte"


@pytest.fixture(scope="module")
def sram_only():
    return pte_lab.sizes(str(SRAM_ONLY), verify=True, heap_runs=1)


def _html_column(html: str, key: str, column: str) -> dict:
    """The first HTML table's ``column`` by its ``key`` column."""
    from html.parser import HTMLParser

    rows: list[list[str]] = []

    class Cells(HTMLParser):
        cell = None

        def handle_starttag(self, tag, attrs):
            if tag == "tr":
                rows.append([])
            elif tag in ("td", "th"):
                self.cell = ""

        def handle_endtag(self, tag):
            if tag in ("td", "th") and self.cell is not None:
                rows[-1].append(self.cell.strip())
                self.cell = None

        def handle_data(self, data):
            if self.cell is not None:
                self.cell += data

    Cells().feed(html.split("</table>")[0])
    head = rows[0]
    return {r[head.index(key)]: r[head.index(column)] for r in rows[1:] if r}


def _flat(text: str) -> str:
    return " ".join(text.replace("\n * ", " ").replace("\n *    ", " ").split())


def test_method_alone_is_verified_on_this_host_only_and_not_runnable_on_a_bare_metal_target(sram_only):
    m = sram_only.methods["forward"]
    assert m.delegate_scratch > 0
    alone, both = sram_only.verified_alone["forward"], sram_only.verified["forward"]
    # on this host et_pal_allocate (malloc) served the NPU's scratch beyond the pools; a bare-metal one refused it
    host, bare = alone.holds_on()["host"], alone.holds_on()["bare-metal"]
    assert host.runnable and host.platform_calls > 0 and host.platform_largest >= m.delegate_scratch
    assert not bare.runnable and bare.platform_refused >= 1 and "MemoryAllocationFailed" in bare.error
    assert "execute" in bare.error
    # with a temp pool, nothing goes to the platform layer: it holds on both
    assert all(t.runnable and t.platform_calls == 0 for t in both.holds_on().values())
    # the sizing (counting pools) says the same before any verification
    assert not m.holds_on("method alone")["bare-metal"].runnable and m.holds_on("method + temp")["bare-metal"].runnable
    text = sizes_text(sram_only)
    assert "verified on this host only: these pools load and run it" in text
    assert "not runnable on a bare-metal target: its platform layer refused 1 request to et_pal_allocate" in text
    # where the run was (here, emulating a board's platform layer) and whose pools, in words a newcomer reads
    assert ("holds on: this host and a bare-metal platform layer, emulated here (et_pal_allocate refuses every "
            f"request, as Arm's does), both with this host's pools ({HOST_ABI}); a 32-bit board's pools differ: "
            "pte-lab sizes FILE --target cortex-m") in text
    # the largest request to et_pal_allocate, explained: the scratch, PlatformMemoryAllocator's node, alignment room
    run = m.holds_on("method alone")["host"]
    node = 2 * struct.calcsize("P")
    room = run.platform_largest - node - m.delegate_scratch
    assert (f"(the largest {run.platform_largest:,} B: the delegates' scratch, {m.delegate_scratch:,} B, + {node} B "
            f"of PlatformMemoryAllocator's node (two pointers on {HOST_ABI}) + {room} B of room to align the scratch "
            f"to {room + 1} B)") in text
    # the HTML table's column: the pools hold on this ABI, not on any target; the heap on this host
    table = _html_column(sram_only._repr_html_(), "part", "holds on")
    assert table["method allocator"] == table["temp allocator beyond the delegates' scratch"] == f"this ABI ({HOST_ABI})"
    assert table["planned arenas"] == table["delegate scratch"] == "any target"
    assert table["heap kept by load_method"] == "this host"
    header = c_header(sram_only)
    assert "#define PTE_LAB_FORWARD_METHOD_ALONE_RUNS_ON_BARE_METAL 0" in header
    assert "#define PTE_LAB_FORWARD_METHOD_TEMP_RUNS_ON_BARE_METAL 1" in header
    assert "/* method alone: verified on this host only" in header
    # the cortex-m runner's header gives no method-alone pool for it, and says why
    from pte_lab.views.runtime.bare_metal_runner import target_header
    board = _flat(target_header(sram_only, pte_lab.open(str(SRAM_ONLY)), "cortex-m"))
    assert "METHOD_POOL_ALONE_BYTES" not in board and "not runnable on a heap-less cortex-m" in board
    assert "temp pool: the delegates' scratch (6,144 B)" in board


def test_the_board_total_is_exact_and_holds_no_host_figure(sram_only):
    m = sram_only.methods["forward"]
    board, host = m.totals()["bare-metal"], m.totals()["host"]
    # Sram_Only decides the NPU's port, not where the program sits: ExecuTorch's Corstone build keeps the model
    # in DRAM under it ("Model in DRAM, scratch in SRAM"), so the board's RAM total holds no program bytes
    assert board.configuration == "method + temp" and board.exact and board.runnable
    assert board.bytes == sum(b for _, _, b in m.planned) + m.method_allocator + m.temp_allocator
    assert m.program_in_ram == 0 and m.program_in_ram_why is None
    assert not any("program's bytes" in name for name, _ in board.parts)
    assert not any("heap" in name or "resident" in name for name, _ in board.parts)
    # this host's total is a Linux runner's: the pools and the heap its FileDataLoader needs
    assert host.bytes == sum(b for _, _, b in m.planned) + m.method_allocator + m.temp_allocator + m.file_heap_peak
    text = sizes_text(sram_only)
    anywhere, here = text.split("-- holds on this host only")
    assert f"total on a bare-metal target with this ABI's ({HOST_ABI}) pools (method + temp, BufferDataLoader over " \
           f"the program in flash): {board.bytes:,} B" in anywhere
    # this ABI's pools are exact for this ABI only: the board's total is --target cortex-m's
    assert f"exact for {HOST_ABI} pools; a 32-bit board's pools differ: --target cortex-m" in anywhere
    assert "heap outside the pools" not in anywhere and "heap outside the pools" in here
    assert "total on this host (method + temp" in here
    # the row beside the scratch says what it is
    assert "temp allocator beyond the delegates' scratch" in anywhere
    header = c_header(sram_only)
    assert f"#define PTE_LAB_FORWARD_TOTAL_BYTES_BARE_METAL {board.bytes}u" in header
    ours, theirs = header.split("/* ---- method")[1].split("==== holds on this host only")
    assert "TOTAL_BYTES_BARE_METAL" in ours and "HEAP_PEAK_BYTES" not in ours and "HEAP_PEAK_BYTES" in theirs
    assert "PTE_LAB_HEAP_ONCE_BYTES" in header.split("==== holds on this host only")[1]


def test_a_shared_sram_program_stays_in_flash_and_a_portable_one_runs_without_a_temp_pool(program_path):
    s = pte_lab.sizes(str(SHARED), heap_runs=1)
    m = s.methods["forward"]
    assert m.program_in_ram == 0
    assert m.totals()["bare-metal"].bytes == sum(b for _, _, b in m.planned) + m.method_allocator + m.temp_allocator
    p = pte_lab.sizes(str(program_path("portable")), verify=True, heap_runs=1)
    m = p.methods["forward"]
    alone = p.verified_alone["forward"].holds_on()
    assert all(t.runnable and t.platform_calls == 0 for t in alone.values())
    board = m.totals()["bare-metal"]
    smaller = min(("method + temp", m.method_allocator + m.temp_allocator), ("method alone", m.method_pool_alone),
                  key=lambda c: c[1])
    assert board.configuration == smaller[0]
    assert board.bytes == sum(b for _, _, b in m.planned) + smaller[1]
    assert "#define PTE_LAB_FORWARD_METHOD_ALONE_RUNS_ON_BARE_METAL 1" in c_header(p)


def test_cli_budget_and_regions(capsys, monkeypatch, tmp_path):
    from pte_lab.runtime import sizing

    s = pte_lab.sizes(str(SHARED), heap_runs=1)
    monkeypatch.setattr(sizing, "sizes", lambda *a, **k: s)  # the CLI's plumbing, on one sizing
    total = s.methods["forward"].totals()["bare-metal"]
    assert main(["sizes", str(SHARED), "--budget", f"{total.bytes}"]) == 0
    out = capsys.readouterr().out
    assert f"method 'forward' on a bare-metal target with this ABI's ({HOST_ABI}) pools (method + temp): " \
           f"{total.bytes:,} B against a budget of" in out
    assert out.rstrip().endswith("fits, 0 B left")  # what the budget leaves, as the set-these block says it
    assert main(["sizes", str(SHARED), "--budget", f"{total.bytes - 1}"]) == 1
    err = capsys.readouterr().err
    assert "DOES NOT FIT (over by 1 B; the largest parts: " + total.largest()[0][0] in err
    # JSON: the totals per target kind, and the fit; the header carries the budget it was checked against
    assert main(["sizes", str(SHARED), "--json", "--budget", "1KiB"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["totals"]["forward"]["bare-metal"]["bytes"] == total.bytes
    assert doc["fits"]["forward"] == doc["fits"]["forward"] | {"budget": 1024, "fits": False, "total": total.bytes}
    assert main(["sizes", str(SHARED), "--c-header", "--budget", "1MiB"]) == 0
    header = capsys.readouterr().out
    assert "#define PTE_LAB_FORWARD_BUDGET_BYTES 1048576u" in header and "#define PTE_LAB_FORWARD_FITS 1" in header
    # regions: each part placed whole, largest first; one that fits nowhere is named
    largest = total.largest()[0]
    assert main(["sizes", str(SHARED), "--region", f"SRAM={largest[1] - 1}", "--region", f"DTCM={total.bytes}",
                 "--npu-region", "DTCM"]) == 0
    fit = capsys.readouterr().out.splitlines()[-1]
    # what each region has left, as --budget says what the budget has left (issue 45: it said only "fits"): each
    # region's size less the parts placed there, the same in the JSON
    assert main(["sizes", str(SHARED), "--json", "--region", f"SRAM={largest[1] - 1}", "--region",
                 f"DTCM={total.bytes}", "--npu-region", "DTCM"]) == 0
    doc = json.loads(capsys.readouterr().out)["fits"]["forward"]
    sizes_of = dict(total.parts)
    left = {n: size - sum(sizes_of[p] for p in doc["placed"][n]) for n, size in doc["regions"].items()}
    assert doc["left_in_regions"] == left and left["DTCM"] < total.bytes - largest[1] + 1
    assert (f": fits, {capacity_bytes(left['SRAM'])} left in SRAM, {capacity_bytes(left['DTCM'])} left in DTCM; "
            in fit)
    assert main(["sizes", str(SHARED), "--region", f"SRAM={largest[1] - 1}"]) == 1
    assert f"{largest[0]}: no region it may go in has room for it" in capsys.readouterr().err
    # --target cortex-m: the board's total with cortex-m's pools, checked the same way, in the same keys and macros
    board = on_target(s, pte_lab.open(str(SHARED)), "cortex-m").methods["forward"].totals()["bare-metal"]
    assert board.abi == "cortex-m" and board.exact and board.bytes < total.bytes
    assert board.basis == "modelled"  # its method pool and EthosUBackend's handle: one word, as the text says
    assert main(["sizes", str(SHARED), "--target", "cortex-m", "--budget", "256KiB"]) == 0
    out = capsys.readouterr().out
    # one block, "set these", one total against the budget with what is left; no "exact" beside "modelled"
    total = next(line for line in out.splitlines() if line.lstrip().startswith("total "))
    assert total.split()[1:3] == [f"{board.bytes:,}", "modelled"]
    assert f"against a budget of 262,144 B (256 KiB): fits, {262144 - board.bytes:,} B" in total
    assert not re.search(r"\bexact\b", out.split("this host (")[0])
    assert main(["sizes", str(SHARED), "--target", "cortex-m", "--region", f"SRAM={board.bytes - 1}"]) == 1
    assert "DOES NOT FIT" in capsys.readouterr().err
    assert main(["sizes", str(SHARED), "--target", "cortex-m", "--json", "--budget", "256KiB"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "pte_lab.sizes" and doc["version"] == 2 and doc["target"] == "cortex-m"
    assert doc["totals"]["forward"] == {"bare-metal": doc["totals"]["forward"]["bare-metal"]}  # no host total
    assert doc["totals"]["forward"]["bare-metal"]["bytes"] == board.bytes and doc["fits"]["forward"]["fits"]
    assert doc["methods"]["forward"]["inputs"] and doc["methods"]["forward"]["outputs"]
    assert main(["sizes", str(SHARED), "--target", "cortex-m", "--c-header", "--budget", "256KiB"]) == 0
    header = capsys.readouterr().out
    for macro in (f"PTE_LAB_FORWARD_TOTAL_BYTES_BARE_METAL {board.bytes}u", "PTE_LAB_FORWARD_BUDGET_BYTES 262144u",
                  "PTE_LAB_FORWARD_FITS 1", "PTE_LAB_FORWARD_METHOD_TEMP_RUNS_ON_BARE_METAL 1",
                  "PTE_LAB_FORWARD_INPUT_0_BYTES", 'PTE_LAB_TARGET "cortex-m"'):
        assert f"#define {macro}" in header
    assert "#if defined(__SIZEOF_POINTER__) && __SIZEOF_POINTER__ != 4" in header
    assert "#define PTE_LAB_FORWARD_TOTAL_BYTES_HOST" not in header
    # the runner of an Ethos-U program names the NPU's driver and its initialisation; a Shared_Sram program in flash
    from pte_lab.views.runtime.bare_metal_runner import bare_metal_runner

    files = bare_metal_runner(s, pte_lab.open(str(SHARED)), "cortex-m")
    assert "libethosu_core_driver.a" in files["build.sh"] and "ethosu_init()" in files["build.sh"]
    assert "static const uint8_t pte_lab_program[" in files["program.h"]
    # a header compiled for the other word size stops the build (a host header dropped onto the board)
    arm = shutil.which("arm-none-eabi-gcc")
    if arm is not None:
        for text, ok in ((header, True), (c_header(s), False)):
            (tmp_path / "h.c").write_text(text + "\nint main(void) { return 0; }\n")
            done = subprocess.run([arm, "-mcpu=cortex-m55", "-fsyntax-only", str(tmp_path / "h.c")],
                                  capture_output=True, text=True)
            assert (done.returncode == 0) == ok, done.stderr
            assert ok or "these pools are host's (8-byte pointers)" in done.stderr
    with pytest.raises(SystemExit) as bad:
        main(["sizes", str(SHARED), "--budget", "256K"])
    assert bad.value.code == 2
    assert "KiB, MiB or GiB (256KiB) or kB, MB or GB (300MB: decimal)" in capsys.readouterr().err


def test_sizes_are_read_as_users_type_them():
    assert [parse_bytes(t) for t in ("262144", "256KiB", "256 kib", "1.5MiB", "2GiB", "0")] == [
        262144, 262144, 262144, 1572864, 2 * 1024 ** 3, 0]
    # decimal units, as a data sheet or a phone's settings write them
    assert [parse_bytes(t) for t in ("300MB", "256kB", "256KB", "1.5 GB", "2gb")] == [
        300_000_000, 256_000, 256_000, 1_500_000_000, 2_000_000_000]
    for bad in ("256K", "-1", "1.0000001KiB", "", "ten", "0.0001kB"):
        with pytest.raises(ValueError):
            parse_bytes(bad)


def test_heap_parts_say_what_they_hold_where_the_backend_is_known(sram_only):
    from dataclasses import replace

    xnn = replace(sram_only, methods={"forward": replace(sram_only.methods["forward"], backends=("XnnpackBackend",))})
    here = sizes_text(xnn).split("-- holds on this host only")[1]
    assert "heap kept by load_method (of it XNNPACK's packed weights)" in here
    assert "heap kept by execute (of it XNNPACK's workspace)" in here
    assert "heap kept by load_method (of it" not in sizes_text(sram_only)


def test_a_delegate_that_allocates_itself_is_in_the_board_total_and_the_budget_sees_it(program_path, capsys):
    """XNNPACK mallocs its packed weights and workspaces outside ExecuTorch's pools: a board total of the pools
    alone said an XNNPACK program 'fits' a budget its heap alone exceeds (the outside check of issue 45)."""
    s = pte_lab.sizes(str(program_path("xnnpack")), heap_runs=1)
    m = s.methods["forward"]
    board = m.totals()["bare-metal"]
    assert m.delegates_own_heap == ("XnnpackBackend",) and not board.exact
    pools = sum(b for _, _, b in m.planned) + m.method_allocator + m.temp_allocator
    assert board.bytes == pools + m.heap_peak > pools
    fit = s.fits(budget=pools)["forward"]
    assert not fit.fits  # the pools alone would fit; with XNNPACK's heap the method does not


def test_set_these_gives_each_pool_its_basis_and_place_and_says_what_was_verified_where(sram_only):
    """The embedded engineer's block: each pool with bytes, one basis word and where it lives (the temp pool, which
    holds the NPU's scratch, in memory the NPU reaches), EthosUBackend's handle on the heap (operator new, per the
    source read), one total against the budget with what is left; --verify says it checked this host with
    stand-ins, not the board."""
    from pte_lab.model.method_pool import BACKEND_SOURCES_READ
    from pte_lab.views.runtime.target_pools import set_these, set_these_text

    pte = pte_lab.open(str(SRAM_ONLY))
    board = on_target(sram_only, pte, "cortex-m")
    block = set_these(sram_only, board, pte, "cortex-m", budget=256 * 1024)["forward"]
    rows = {r.kind: r for r in block.pools}
    temp, heap = rows["temp pool"], rows["heap"]
    assert temp.lives == "NPU-reachable RAM" and temp.scratch == sram_only.methods["forward"].delegate_scratch
    assert temp.basis == "file"  # the blob's scratch sets it
    assert rows["method pool"].basis == "modelled" and rows["planned buffer"].basis == "file"
    # 1.5.1's EthosUBackend takes its ExecutionHandle with new: 9 words of 4 B on a Cortex-M, not the method pool
    assert (heap.bytes, heap.lives, heap.heap.how) == (36, "heap", "operator new")
    assert block.total == board.methods["forward"].totals()["bare-metal"].bytes and block.basis == "modelled"
    assert block.left == 256 * 1024 - block.total and block.fits
    text = set_these_text(sram_only, board, {"forward": block}, pte, verify=True)
    target, here = text.split("\nthis host (")
    assert "memory the NPU reaches: SRAM (Sram_Only)" in target and "1 x 36 B (operator new" in target
    assert BACKEND_SOURCES_READ in target and "2026-08-22" in BACKEND_SOURCES_READ
    assert f"fits, {block.left:,} B" in target
    # the request a method with no temp allocator makes of et_pal_allocate, with the board's node (two 4 B
    # pointers), this host's run said as such
    run = sram_only.methods["forward"].holds_on("method alone")["bare-metal"]
    node = 2 * struct.calcsize("P")
    assert (f"(the largest {run.platform_largest - node + 8:,} B on the board, {run.platform_largest:,} B in this "
            f"host's run: the delegates' scratch, {temp.scratch:,} B, + 8 B of PlatformMemoryAllocator's node (two "
            f"pointers on Arm AAPCS (ILP32), Cortex-M55; {node} B on {HOST_ABI})") in target
    assert "verified on this host, with pte_lab's stand-ins for EthosUBackend" in target
    assert "not verified: the cortex-m pools above" in target
    assert "verified: nothing" in set_these_text(sram_only, board, {"forward": block}, pte, verify=False)
    # no advice for other backends or loaders on an Ethos-U program read from flash
    for foreign in ("XNNPACK", "export_llm", "FileDataLoader"):
        assert foreign not in target


def test_advice_on_an_ethos_u_program_names_no_other_backend():
    """An Ethos-U program split around CPU operators: the peak's and the finding's advice speak of Ethos-U's
    scratch, not XNNPACK's workspace or export_llm's options."""
    split = pte_lab.open(str(DATA / "u55_128_shared_sram_split.pte"))
    story = split.methods["forward"].peak
    assert story.backends == ("EthosUBackend",)
    words = repr(story) + " ".join(f.message for f in split.findings())
    assert "outside the delegate" in words and "scratch it takes from the temp allocator" in words
    for foreign in ("xnnpack", "export_llm", "on the heap"):
        assert foreign not in words.lower()


def test_a_budget_or_region_size_never_rounds_to_another_size():
    """262,104 B is 255.96 KiB: beside a budget or a region it is never said as 256 KiB (the budget it is not)."""
    from pte_lab.units import capacity_bytes

    assert capacity_bytes(262104) == "262,104 B (255.96 KiB)"
    assert capacity_bytes(262144) == "262,144 B (256 KiB)"
    assert capacity_bytes(244292) == "244,292 B (238.6 KiB)"  # 238.57: not 239
    assert capacity_bytes(102350) == "102,350 B (99.95 KiB)"  # not 100.0
    assert capacity_bytes(1000) == "1,000 B"


def test_a_heap_less_board_and_the_npu_region(capsys, monkeypatch):
    """EthosUBackend takes its handle with operator new at load_method: a board says it needs a heap; a board
    declared without one gets a static operator-new pool in its block, in place of the heap row, and one total
    that counts it; the temp pool holding the NPU's scratch goes only in a region marked as one the NPU reaches (issue 48: `--region ITCM=7KiB --region SRAM=11KiB` put it in ITCM)."""
    from pte_lab.runtime import sizing

    s = pte_lab.sizes(str(SHARED), heap_runs=1)
    monkeypatch.setattr(sizing, "sizes", lambda *a, **k: s)
    target = ["sizes", str(SHARED), "--target", "cortex-m"]
    assert main([*target, "--budget", "256KiB"]) == 0
    out = capsys.readouterr().out.split("this host (")[0]
    # fits, and says plainly what heap it fits with: 36 B (9 words) plus newlib's per-block overhead
    assert "fits" in out and "with a heap" in out
    assert "needs a heap (operator new) of at least 36 B plus the allocator's per-block overhead" in out
    assert "newlib-nano's malloc adds 8 B to each block, rounded up to 4 B: 44 B for 1 block" in out
    for board in (["--no-heap"], ["--region", "heap=0"], ["--region", "SRAM=256KiB", "--region", "heap=0"]):
        # no heap: what operator new asks is a static pool the block lists with the rest, in the one total
        assert main([*target, "--budget", "256KiB", *board]) == 0, board
        out = capsys.readouterr().out
        said = ("operator new served from a static pool of 40 B (1 block, each 8-byte aligned) in place of the heap "
                "the board lacks: the delegates ask operator new for it at load_method, and without the pool "
                "load_method fails with MemoryAllocationFailed")
        assert said in out, board
        if board == ["--no-heap"]:
            block = out.split("this host (")[0]
            assert re.search(r"\n  operator-new pool +40  modelled  RAM\n", block)
            assert "total              17,852  modelled  against a budget of 262,144 B (256 KiB): fits, " \
                f"{262144 - 17852:,} B" in block
            assert not re.search(r"\n  heap  ", block) and "DOES NOT FIT" not in out
        else:
            (fit,) = [ln for ln in out.splitlines() if ln.startswith("method 'forward' on a cortex-m board")]
            left = f"{capacity_bytes(262144 - 17852)} left" + (" in SRAM" if "SRAM=256KiB" in board else "")
            assert f": fits, {left}; " + said in fit and "17,852 B" in fit
    # regions and no budget: the block points at the placement (one verdict), not at a budget nobody gave
    assert main([*target, "--region", "SRAM=256KiB", "--npu-region", "SRAM", "--no-heap"]) == 0
    out = capsys.readouterr().out
    assert "placed in the regions SRAM 262,144 B (256 KiB): the last line says where each pool goes" in out
    assert "no budget given" not in out
    # a region named heap with room: the handle goes there and nowhere else
    assert main([*target, "--region", "SRAM=256KiB", "--region", "heap=1KiB"]) == 0
    out = capsys.readouterr().out
    assert "; heap: EthosUBackend's ExecutionHandle x1 (operator new))" in out and "heap: heap:" not in out
    # where the 36 B comes from (the ExecuTorch source read) is said once
    from pte_lab.model.method_pool import BACKEND_SOURCES_READ
    assert out.count(BACKEND_SOURCES_READ) == 1 and "as read in the same ExecuTorch source as the heap's" in out
    # a heap region is checked against what the allocator takes, not the bytes asked: 36 B in 1 block is 44 B
    # with newlib-nano's malloc (40 B with newlib's full one), so 40 B does not fit and 44 B does, saying so
    assert main([*target, "--region", "SRAM=256KiB", "--region", "heap=40"]) == 1
    err = capsys.readouterr().err
    assert "no region it may go in has room for it (heap 40 B checked against 44 B" in err
    assert "as newlib-nano's malloc takes them, the larger of newlib's two (newlib's full malloc: 40 B)" in err
    assert main([*target, "--region", "SRAM=262104", "--region", "heap=44"]) == 0
    fit = capsys.readouterr().out.splitlines()[-1]
    assert ("in the regions SRAM 262,104 B (255.96 KiB), heap 44 B: fits, 244,292 B (238.6 KiB) left in SRAM, 0 B left "
            "in heap; the heap region: heap 44 B checked") in fit
    # two regions, none marked: the temp pool is placed nowhere, with what to declare
    assert main([*target, "--region", "ITCM=7KiB", "--region", "SRAM=11KiB"]) == 1
    err = capsys.readouterr().err
    assert ("temp pool (covers the delegates' scratch, 6,912 B): it must be in memory the NPU reaches and no region "
            "is marked so: name one with --npu-region NAME") in err
    assert main([*target, "--region", "ITCM=7KiB", "--region", "SRAM=24KiB", "--npu-region", "SRAM"]) == 0
    fit = capsys.readouterr().out.splitlines()[-1]
    assert "in SRAM, marked as memory the NPU reaches" in fit
    assert "SRAM: temp pool" in fit and "ITCM: temp pool" not in fit
    # the one region given is taken to be the NPU's, and says so
    assert main([*target, "--region", "SRAM=24KiB"]) == 0
    assert "in the only RAM region given, taken to be memory the NPU reaches" in capsys.readouterr().out
    # a marked region that was not given: one line
    assert main([*target, "--region", "SRAM=24KiB", "--npu-region", "TCM"]) == 2
    assert "--npu-region TCM: not a region given with --region NAME=SIZE (SRAM)" in capsys.readouterr().err


def test_a_heap_less_board_has_one_total_in_the_text_the_json_and_the_header(capsys, monkeypatch):
    """Issue 45: with --no-heap the header's PTE_LAB_FORWARD_TOTAL_BYTES_BARE_METAL counted a 36 B heap (17,848)
    while its budget comment, the text and the JSON said 17,852 with the 40 B operator-new pool: one total, the
    heap-less board's, everywhere; the board's heap need (36 B) and the pool (40 B) are still given apart. And
    --no-heap's help says what the tool does: that pool, not "does not fit"."""
    from pte_lab.runtime import sizing

    s = pte_lab.sizes(str(SHARED), heap_runs=1)
    monkeypatch.setattr(sizing, "sizes", lambda *a, **k: s)
    target = ["sizes", str(SHARED), "--target", "cortex-m", "--budget", "256KiB"]
    for board in (["--no-heap"], ["--region", "heap=0"]):
        assert main([*target, *board, "--c-header"]) == 0
        header = capsys.readouterr().out
        assert "#define PTE_LAB_FORWARD_TOTAL_BYTES_BARE_METAL 17852u" in header, board
        total = header.split("#define PTE_LAB_FORWARD_TOTAL_BYTES_BARE_METAL")[0].rsplit("/* total on", 1)[1]
        assert "operator-new pool (a static pool: the board has no heap) 40" in _flat(total)
        assert "#define PTE_LAB_FORWARD_BOARD_HEAP_BYTES 36u" in header
        assert "#define PTE_LAB_FORWARD_OPERATOR_NEW_POOL_BYTES 40u" in header
        assert "17,852 B against a budget of 262,144 B (256 KiB): fits, 244,292 B" in _flat(header)
        assert main([*target, *board, "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["totals"]["forward"]["bare-metal"]["bytes"] == doc["fits"]["forward"]["total"] == \
            doc["set_these"]["forward"]["total"] == 17852
        # heap=0 says only that the board has none: it fits in the budget there too, as the exit status says
        assert doc["fits"]["forward"]["fits"] and "#define PTE_LAB_FORWARD_FITS 1" in header
    # a board with a heap (or none said): the heap's 36 B in the total, the same in the header and the text
    assert main([*target, "--c-header"]) == 0
    assert "#define PTE_LAB_FORWARD_TOTAL_BYTES_BARE_METAL 17848u" in capsys.readouterr().out
    assert main([*target]) == 0
    out = capsys.readouterr().out
    assert re.search(r"\n  total +17,848  modelled", out)
    # the block's heap line says what --no-heap gives, not "then it does not fit"
    assert "(--no-heap says the board has none: operator new is then served from a static pool of 40 B, counted " \
           "in the total)" in out and "then it does not fit" not in out
    with pytest.raises(SystemExit):
        main(["sizes", "--help"])
    said = " ".join(capsys.readouterr().out.split())
    no_heap = said.split("--no-heap ")[1].split(" --no-cache")[0]
    assert "served from a static operator-new pool instead, listed with the pools and counted in the total" in no_heap
    assert "a method whose backend allocates its own memory with malloc (XNNPACK) does not fit (exit 1)" in no_heap
    assert "allocate with operator new does not fit" not in no_heap


def test_the_bare_metal_runner_says_what_its_verification_proved(capsys, monkeypatch, tmp_path):
    """Issue 45: --example-runner implies --verify, and said nothing of it: one line per method says what it
    proved, as --verify says it (this host's pools; the board's only the runner checks), and a figure that is
    not tight fails the command (exit 1), as --verify does."""
    from dataclasses import replace

    from pte_lab.runtime import sizing

    s = pte_lab.sizes(str(SHARED), heap_runs=1, verify=True)
    monkeypatch.setattr(sizing, "sizes", lambda *a, **k: s)
    argv = ["sizes", str(SHARED), "--target", "cortex-m", "--no-heap", "--example-runner", str(tmp_path / "r")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("verified on this host")]
    v = s.verified["forward"]
    assert (f"verified on this host, with pte_lab's stand-ins for EthosUBackend, cortex_m::quantize_per_tensor.out, "
            f"cortex_m::dequantize_per_tensor.out: method 'forward', this host's pools ({v.method_pool:,} B method, "
            f"{v.temp_pool:,} B temp): verified: these pools load and run it; tight: one byte less is refused") in line
    assert line.endswith("the runner's cortex-m pools are not verified here: it checks them on the board, failing "
                         "with 0x21 where one is short")
    s.verified = {"forward": replace(v, tight=False, smaller_error=None)}
    assert main(argv) == 1
    assert "not tight: one byte less gave no error" in capsys.readouterr().out


def test_the_bare_metal_runner_serves_operator_new_from_a_static_pool(tmp_path):
    """main.cpp says "no heap": EthosUBackend's handle (operator new at load_method) then comes from a static
    pool of the bytes the model asks (36 B on a Cortex-M: a 40 B pool, 8-byte blocks), which it reports; a
    program whose delegates take nothing with new gets no such pool."""
    from pte_lab.views.runtime.bare_metal_runner import bare_metal_runner, write_bare_metal_runner

    s = pte_lab.sizes(str(SHARED), heap_runs=1)
    out = tmp_path / "runner"
    write_bare_metal_runner(s, pte_lab.open(str(SHARED)), out, "cortex-m")
    pools, main_cpp, build = ((out / n).read_text() for n in ("pools.h", "main.cpp", "build.sh"))
    assert "#define PTE_LAB_OPERATOR_NEW_POOL_BYTES 40u" in pools and "EthosUBackend's ExecutionHandle" in pools
    assert "void* operator new(std::size_t size, const std::nothrow_t&) noexcept" in main_cpp
    assert "no filesystem, no heap. Every pool is static, of\n// the sizes pools.h gives for this target, operator new's too" in main_cpp
    assert "operator new pool: %u B used of %u" in main_cpp
    assert "main.cpp serves it from a static pool" in build and "-DPTE_LAB_USE_HEAP" in build
    if shutil.which("arm-none-eabi-g++") is not None:
        r = subprocess.run(["sh", str(out / "build.sh"), "--compile-only"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]
        assert r.stdout.startswith("build.sh: compiled main.o") and "not linked" in r.stdout  # not a silent success
        nm = subprocess.run(["arm-none-eabi-nm", "-C", str(out / "main.o")], capture_output=True, text=True).stdout
        assert "T operator new(unsigned int, std::nothrow_t const&)" in nm and "pte_lab_new_pool" in nm
    portable = examples.kept_path("portable")
    files = bare_metal_runner(
        pte_lab.sizes(str(portable), heap_runs=1), pte_lab.open(str(portable)), "cortex-m")
    assert "OPERATOR_NEW_POOL" not in files["pools.h"] and "void* operator new" not in files["main.cpp"]


def test_the_cortex_m_header_gives_the_boards_heap_and_names_this_hosts_heap_as_its_own():
    s = pte_lab.sizes(str(SHARED), heap_runs=1)
    board = on_target(s, pte_lab.open(str(SHARED)), "cortex-m")
    header = c_header(board)
    # the board's heap need, its own macro, and the static pool that replaces it
    assert "#define PTE_LAB_FORWARD_BOARD_HEAP_BYTES 36u" in header
    assert "#define PTE_LAB_FORWARD_OPERATOR_NEW_POOL_BYTES 40u" in header
    assert "without\n * either, load_method fails with MemoryAllocationFailed" in header or \
        "without either, load_method fails" in header.replace("\n * ", " ")
    # the temp pool holding the NPU's scratch, in memory the NPU reaches
    assert "holds the NPU's scratch (6,912 B): place it in memory the NPU reaches" in header.replace("\n * ", " ")
    # this host's heap figures are named as this host's beside the board's
    assert re.search(r"#define PTE_LAB_FORWARD_HEAP_PEAK_MMAP_BYTES_HOST \d+u", header)
    assert "#define PTE_LAB_HEAP_ONCE_BYTES_HOST " in header
    assert not re.search(r"#define PTE_LAB_\w*HEAP_(PEAK|KEPT|ONCE)\w*_BYTES \d", header)
    # a board declared heap-less: the header's verdict is 0, with the fix
    no_heap = c_header(board, heap=False)
    assert "#define PTE_LAB_FORWARD_FITS 1" in no_heap and "static pool of 40 B" in no_heap.replace("\n * ", " ")
    # this host's header keeps its names and has no board heap
    host = c_header(s)
    assert re.search(r"#define PTE_LAB_FORWARD_HEAP_PEAK_MMAP_BYTES \d+u", host) and "BOARD_HEAP" not in host
