"""Names from a file written into C source (the header, the example runner) stay inside their literal or
comment: a compiler reads back exactly the name's bytes, and no name starts code."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from pte_lab.views.c_text import c_comment, c_string

NAMES = ["forward", 'a"b', "x\\", "fo\x1b[2J", "\u00e9t\u00e9", "a\n#error injected", "end */ int x;", "??=",
         "tab\there"]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_a_compiler_reads_back_each_name_and_nothing_else(tmp_path):
    src = ["#include <stdio.h>", "#include <string.h>", "int main(void) {"]
    for k, name in enumerate(NAMES):
        src += [f"  // method {c_comment(repr(name))}: a comment that must stay one line",
                f"  /* method {c_comment(name)} */",
                f"  static const char s{k}[] = {c_string(name)};",
                f"  fwrite(s{k}, 1, sizeof s{k} - 1, stdout); fputc(0, stdout);"]
    src += ["  return 0;", "}"]
    (tmp_path / "names.c").write_text("\n".join(src) + "\n")
    subprocess.run(["gcc", "-std=c11", "-Werror", "-Wall", "-o", str(tmp_path / "names"), str(tmp_path / "names.c")],
                   check=True, capture_output=True)
    out = subprocess.run([str(tmp_path / "names")], check=True, capture_output=True).stdout
    assert out.split(b"\0")[:-1] == [n.encode("utf-8") for n in NAMES]


def test_comments_hold_no_line_break_or_comment_end():
    for name in NAMES:
        text = c_comment(name)
        assert "\n" not in text and "*/" not in text and "\x1b" not in text
