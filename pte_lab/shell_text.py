"""Text from outside, safe inside a POSIX shell script: the one home of quoting for the scripts pte_lab writes.

A program's writer chose its names (methods, backends, operators), and a user chose the file's path: none of
them may become shell code in a ``build.sh`` or ``run.sh``. Each lands in one of three places, each with its
own rule:

- a word of a command (:func:`sh_word`): single-quoted, the only quoting in which no character is special;
- a ``#`` comment (:func:`sh_comment`): one line, its control characters escaped, so that a newline in a
  name cannot end the comment and start a command;
- a line the script prints (:func:`sh_echo`): ``printf '%s\\n'`` of one single-quoted word, never text
  inside double quotes (where ``$()``, backticks and ``"`` act) and never ``echo`` (whose backslashes some
  shells interpret); what reaches the terminal is escaped as the CLI's text is (line breaks kept, so that a
  printed command holding a path with a line break still runs as printed).

Pure Python, standard library only.
"""

from __future__ import annotations

import shlex

from .printable import printable, printable_text

__all__ = ["sh_comment", "sh_echo", "sh_word", "sh_words"]


def sh_word(text) -> str:
    """``text`` as one shell word that the shell reads back byte for byte (single-quoted where needed)."""
    return shlex.quote(str(text))


def sh_words(texts) -> str:
    """Several words, each quoted by :func:`sh_word`, joined by spaces."""
    return " ".join(sh_word(t) for t in texts)


def sh_comment(text) -> str:
    """Text safe after ``#``: one line, control characters escaped (``\\n`` stays two characters)."""
    return printable(text)


def sh_echo(text) -> str:
    """A command that prints ``text`` (terminal-safe) and nothing else, whatever it holds."""
    return f"printf '%s\\n' {sh_word(printable_text(str(text)))}"
