"""Paths that are not regular files (a FIFO, a character device, a folder) given wherever pte_lab reads a
path: each is refused at once, unread, with one line naming the path and what it is (exit 2 in the CLI),
never a hang (a FIFO's open waits for a writer) or a read that never ends (``/dev/zero``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pte_lab.cli import main
from pte_lab.errors import NotARegularFileError
from pte_lab.format.regular_file import check_regular, open_regular

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX FIFOs")


@pytest.fixture
def specials(tmp_path):
    fifo = tmp_path / "model.pte"
    os.mkfifo(fifo)
    return {"a FIFO (named pipe)": str(fifo), "a character device": "/dev/zero", "a directory": str(tmp_path)}


def test_the_one_home_refuses_each_kind_by_name(specials, tmp_path):
    for kind, path in specials.items():
        for call in (open_regular, check_regular):
            with pytest.raises(NotARegularFileError) as e:
                call(path, "a program")
            assert str(e.value) == f"{path} is {kind}, not a program: pte_lab reads regular files only"
    regular = tmp_path / "x.bin"
    regular.write_bytes(b"abc")
    with open_regular(regular) as f:
        assert f.read() == b"abc"


#: every public entry that reads a path, each given the special file where it reads one
_API = """
import json, sys, pte_lab
good, bad = sys.argv[1], sys.argv[2]
calls = {
    "open": lambda: pte_lab.open(bad),
    "open data=": lambda: pte_lab.open(good, data=bad),
    "open etrecord=": lambda: pte_lab.open(good, etrecord=bad),
    "diff": lambda: pte_lab.diff(good, bad),
    "load": lambda: pte_lab.load(bad),
    "load data_path=": lambda: pte_lab.load(good, data_path=bad),
    "sizes": lambda: pte_lab.sizes(bad),
    "sizes data_path=": lambda: pte_lab.sizes(good, data_path=bad),
    "what_if": lambda: pte_lab.what_if(bad, {(0, 0): 2}),
}
out = {}
for name, call in calls.items():
    try:
        call()
        out[name] = "no error"
    except pte_lab.PteLabError as e:
        out[name] = [type(e).__name__, str(e)]
print(json.dumps(out))
"""


def test_every_api_path_refuses_them(specials, program_path):
    good = str(program_path("portable"))
    for kind, path in specials.items():
        r = subprocess.run([sys.executable, "-c", _API, good, path], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        for call, (error, message) in json.loads(r.stdout).items():
            assert error == "NotARegularFileError", (kind, call, error, message)
            assert message.startswith(f"{path} is {kind}, not "), (call, message)


@pytest.mark.parametrize("argv", [
    ["inspect", "{bad}"], ["inspect", "{good}", "--etrecord", "{bad}"], ["sizes", "{bad}"],
    ["sizes", "{good}", "--data", "{bad}"], ["diff", "{good}", "{bad}"], ["replan", "{bad}", "{out}"],
    ["what-if", "{bad}", "--bound", "0:0=2"]])
def test_every_cli_path_refuses_them_in_one_line(specials, program_path, tmp_path, argv):
    good = str(program_path("portable"))
    for kind, path in specials.items():
        args = [a.format(good=good, bad=path, out=tmp_path / "out.pte") for a in argv]
        r = subprocess.run([sys.executable, "-m", "pte_lab.cli", *args], capture_output=True, text=True, timeout=300)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        lines = [x for x in r.stderr.splitlines() if not x.startswith("pte-lab: [")]  # progress lines apart
        assert lines == [f"pte-lab: error: {path} is {kind}, not " + lines[0].split(", not ", 1)[1]], lines
        assert "regular files only" in lines[0]


def test_an_interpreter_that_is_a_fifo_is_refused(specials, capsys):
    with pytest.raises(SystemExit) as e:
        main(["measure", "--legacy-python", specials["a FIFO (named pipe)"]])
    assert e.value.code == 2 and "is not an executable Python interpreter" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["replan", "{good}", "{out}"], ["example", "portable", "{out}"]])
def test_a_file_to_write_that_is_not_a_regular_file_is_left_as_it_is(program_path, tmp_path, argv):
    """A FIFO, a device or a symbolic link given as the file to write: refused before any work, in one line,
    and left as it was (pte_lab writes through a file renamed into place, which would replace it)."""
    fifo, link = tmp_path / "fifo", tmp_path / "link"
    os.mkfifo(fifo)
    link.symlink_to(tmp_path / "target.pte")
    for out, kind in ((fifo, "a FIFO (named pipe)"), (link, "a symbolic link")):
        args = [a.format(good=program_path("portable"), out=out) for a in argv]
        r = subprocess.run([sys.executable, "-m", "pte_lab.cli", *args], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and f"{out} is {kind}, not a file to write" in r.stderr, (args, r.stderr)
    assert fifo.is_fifo() and link.is_symlink() and not (tmp_path / "target.pte").exists()


def test_the_api_s_replan_write_leaves_a_device_node_alone(program_path, tmp_path):
    from pte_lab import planning

    fifo = tmp_path / "out.pte"
    os.mkfifo(fifo)
    with pytest.raises(NotARegularFileError, match="is a FIFO"):
        planning.replan(str(program_path("portable"))).write(fifo)
    assert fifo.is_fifo()


def test_the_runner_s_files_inside_its_folder_are_checked_before_measuring(program_path, tmp_path, capsys):
    """`sizes --example-runner DIR` where DIR already holds a FIFO, a device or a link under a name it writes:
    refused before anything is measured or written (a FIFO hung it; a device node or a link was written into)."""
    target = tmp_path / "target.txt"
    target.write_text("mine")
    for k, make in enumerate((os.mkfifo, lambda p: os.symlink(target, p))):
        folder = tmp_path / f"runner{k}"
        folder.mkdir()
        make(folder / "pools.h")
        assert main(["sizes", str(program_path("portable")), "--example-runner", str(folder)]) == 2
        err = capsys.readouterr().err
        assert f"{folder / 'pools.h'} is " in err and "not a file to write" in err and "[" not in err  # no progress
        assert sorted(p.name for p in folder.iterdir()) == ["pools.h"]
    assert target.read_text() == "mine"


@pytest.mark.slow
def test_a_program_whose_name_is_not_utf8_is_sized(program_path, tmp_path, capsys):
    """A file name's bytes that are not UTF-8 (Python's surrogate escapes): the program is sized (the mapped
    file found in /proc/self/smaps by its bytes), and the name is shown escaped."""
    path = os.path.join(str(tmp_path), os.fsdecode(b"a\xff.pte"))
    with open(path, "wb") as f:
        f.write(program_path("portable").read_bytes())
    assert main(["sizes", path, "--runs", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("a\\udcff.pte: run-time memory per method") and "method 'forward'" in out
