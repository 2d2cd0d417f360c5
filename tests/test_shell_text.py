"""Names from outside (a program's path, a folder, a method's or an operator's name) written into the shell
scripts pte_lab writes: each is data wherever it lands, and running a script does what it says and nothing
else. The scripts themselves are run, with hostile names, where their toolchain is present."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import pte_lab
from pte_lab.cli import main
from pte_lab.printable import printable_text
from pte_lab.shell_text import sh_comment, sh_echo, sh_word, sh_words

#: each a way out of a quoting that does not fit its place: double quotes, single quotes, command
#: substitution (both forms), a command separator, a line break, spaces, a glob, a variable, an option
HOSTILE = ['x"; touch PWNED; echo "', "it's", "$(touch PWNED)", "`touch PWNED`", "a; touch PWNED", "a\ntouch PWNED",
           "two  spaces", "*", "$HOME", "-rf", "\\", "esc\x1b]0;title\x07", "\u00e9t\u00e9", ""]
SHELLS = [s for s in ("sh", "dash", "bash") if shutil.which(s)]


def _left(folder: Path, expected: set[str]) -> set[str]:
    """What a script made in ``folder`` beyond ``expected`` (a PWNED file anywhere below it included)."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*")} - expected


@pytest.mark.parametrize("shell", SHELLS)
def test_a_shell_reads_back_each_name_and_runs_nothing_else(tmp_path, shell):
    lines = ["set -eu"]
    for k, name in enumerate(HOSTILE):
        lines += [f"# method {sh_comment(name)}: a comment that must stay one line",
                  sh_echo(name),
                  f"printf '%s' {sh_word(name)} > out{k}",
                  f"set -- {sh_words([name, 'b'])}; [ $# -eq 2 ] || exit 9"]
    (tmp_path / "s.sh").write_text("\n".join(lines) + "\n")
    r = subprocess.run([shell, "s.sh"], cwd=tmp_path, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == "".join(printable_text(n) + "\n" for n in HOSTILE)
    assert b"\x1b" not in r.stdout  # what reaches the terminal is escaped
    for k, name in enumerate(HOSTILE):
        assert (tmp_path / f"out{k}").read_bytes() == name.encode()
    assert _left(tmp_path, {"s.sh", *(f"out{k}" for k in range(len(HOSTILE)))}) == set()


def test_comments_hold_no_line_break():
    for name in HOSTILE:
        assert "\n" not in sh_comment(name) and "\x1b" not in sh_comment(name)


#: a program's file name and the runner's folder that hold every way out at once
HOSTILE_FILE = 'x"; touch PWNED; echo ". $(touch PWNED) `touch PWNED` it\'s a\nb.pte'
HOSTILE_DIR = 'run ner"; touch PWNED; $(touch PWNED) `touch PWNED`\n\''


def _renamed(data: bytes, old: bytes, new: bytes) -> bytes:
    """The program with its method ``old`` renamed ``new`` (the same length: the flatbuffer's string in place)."""
    assert len(old) == len(new) and data.count(old) == 1
    return data.replace(old, new)


@pytest.mark.slow
def test_the_example_runner_builds_and_runs_under_hostile_names(program_path, tmp_path, capsys):
    """`pte-lab sizes FILE --example-runner DIR` with a file, a folder and a method named to break out of
    every quoting: build.sh builds the runner and nothing else happens; the runner runs the method by its
    name; the command the CLI prints for the user runs the same."""
    work = tmp_path / "work"
    work.mkdir()
    method = 'f"$(`;\n'  # seven bytes, as "forward"
    path = work / HOSTILE_FILE
    path.write_bytes(_renamed(program_path("portable").read_bytes(), b"forward", method.encode()))
    assert list(pte_lab.open(str(path)).methods) == [method]
    folder = work / HOSTILE_DIR
    assert main(["sizes", str(path), "--example-runner", str(folder)]) == 0
    printed = capsys.readouterr().out
    assert "\x1b" not in printed
    r = subprocess.run(["sh", str(folder / "build.sh")], cwd=work, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert _left(work, {HOSTILE_FILE, HOSTILE_DIR, *(f"{HOSTILE_DIR}/{n}" for n in
                                                     ("build.sh", "main.cpp", "pools.h", "runner", "runner_no_temp"))}) \
        == set()
    # the line build.sh prints ends with the command to run, quoted for a shell: it runs as printed
    run = r.stdout.split("; run: ", 1)[1].rstrip("\n")
    assert run == "./runner " + sh_word(str(path))
    r = subprocess.run(["sh", "-c", run], cwd=folder, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.stdout, r.stderr[-2000:])
    assert f"{method}: execute 2 ok" in r.stdout
    # so do the commands the CLI prints ("build: BUILD; run: RUN", each path one quoted word)
    build, run = printed.split("\nbuild: ", 1)[1].rstrip("\n").split("; run: ")
    assert build == sh_word(str(folder / "build.sh"))
    r = subprocess.run(["sh", "-c", f"sh {build} && {run}"], cwd=work, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and f"{method}: execute 2 ok" in r.stdout, (r.stdout, r.stderr[-2000:])
    assert not list(work.rglob("PWNED")) and not Path("PWNED").exists()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("arm-none-eabi-g++") is None, reason="needs Debian's gcc-arm-none-eabi")
def test_the_bare_metal_runner_compiles_under_hostile_names(program_path, tmp_path):
    """`sizes FILE --target cortex-m --example-runner DIR` under the same names: build.sh --compile-only
    compiles main.cpp for the board and nothing else happens."""
    from pte_lab.views.runtime.bare_metal_runner import BARE_METAL_FILES, write_bare_metal_runner

    work = tmp_path / "work"
    work.mkdir()
    method = 'f"$(`;\n'
    path = work / HOSTILE_FILE
    path.write_bytes(_renamed(program_path("portable").read_bytes(), b"forward", method.encode()))
    folder = work / HOSTILE_DIR
    write_bare_metal_runner(pte_lab.sizes(str(path)), pte_lab.open(str(path)), folder, "cortex-m")
    r = subprocess.run(["sh", str(folder / "build.sh"), "--compile-only"], cwd=work, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (folder / "main.o").read_bytes()[:4] == b"\x7fELF"
    assert _left(work, {HOSTILE_FILE, HOSTILE_DIR, *(f"{HOSTILE_DIR}/{n}" for n in (*BARE_METAL_FILES, "main.o"))}) \
        == set()
