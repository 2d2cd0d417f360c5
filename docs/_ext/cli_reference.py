"""The command line's reference, read from its parser: ``pte_lab.cli.build_parser()`` is the one home of every
command's usage and options, and docs/cli.md writes the prose around them.

In a MyST page (the directive writes MyST: docs/cli.md is one)::

    ```{pte-lab-command} sizes
    ```

renders ``pte-lab sizes``: what it does (the help ``pte-lab --help`` lists), its usage as ``pte-lab sizes -h``
prints it, and each argument and option (Sphinx's ``option`` entries, so ``{option}`` references reach them)
with its help text, its choices and its default; the ``epilog`` a command prints after its options, if any.
An option without help text, or a command the parser lacks, is an error: the page explains every option, and
``-W`` keeps it so. ``pte-lab-command`` with no argument renders the top-level usage and the list of commands.
"""

from __future__ import annotations

import argparse
import re

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

#: the usage is wrapped at this width on every machine (argparse would read the terminal's)
WIDTH = 100


def _parser():
    from pte_lab.cli import build_parser

    return build_parser()


def _escape(text: str) -> str:
    """``text`` as Markdown that shows it as written: every ASCII punctuation mark escaped (no emphasis, code,
    links or smart dashes: ``--verify`` stays two hyphens)."""
    return re.sub(r"([!-/:-@\[-`{-~])", r"\\\1", " ".join(text.split()))


def _usage(parser: argparse.ArgumentParser) -> str:
    fmt = parser.formatter_class(prog=parser.prog, width=WIDTH)
    fmt.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return fmt.format_help().strip()


def _invocation(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """``--region NAME=SIZE``, ``-m METHOD, --method METHOD``, ``file``: as ``-h`` lists it."""
    fmt = parser.formatter_class(prog=parser.prog, width=WIDTH)
    return fmt._format_action_invocation(action)


def _details(action: argparse.Action) -> list[str]:
    """What the help text may not say: the default (the choices are in the option's name: ``{host,cortex-m}``)."""
    help_text = action.help or ""
    said = []
    default = action.default
    if (action.option_strings and default not in (None, False, argparse.SUPPRESS, [])
            and not isinstance(action, (argparse._StoreTrueAction, argparse._HelpAction))
            and "default" not in help_text):
        said.append(f"Default: `{default}`.")
    return said


class CommandDirective(SphinxDirective):
    """``pte-lab-command NAME``: one command's help, usage and options, from the parser."""

    optional_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        parser = _parser()
        if not self.arguments:
            return self._top(parser)
        name = self.arguments[0]
        commands = parser.commands
        if name not in commands:
            raise self.error(f"pte-lab has no command {name!r} (it has: {', '.join(commands)})")
        sub = commands[name]
        summary = {a.dest: a.help for a in parser._subparsers._group_actions[0]._choices_actions}.get(name)
        lines = []
        if summary:
            lines += [_escape(summary[0].upper() + summary[1:]) + ".", ""]
        if sub.description:
            lines += [_escape(sub.description), ""]
        lines += ["```text", *_usage(sub).splitlines(), "```", ""]
        lines += [f"```{{program}} {sub.prog}", "```", ""]
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
                continue  # -h, and a deprecated name kept hidden
            if not action.help:
                raise self.error(f"{sub.prog} {_invocation(sub, action)} has no help text: every option is "
                                 f"explained (pte_lab/cli/)")
            text = action.help.strip()
            lines += [f"```{{option}} {_invocation(sub, action)}",
                      _escape(text[0].upper() + text[1:]) + ("" if text.endswith(".") else "."),
                      *_details(action), "```", ""]
        if sub.epilog:
            lines += ["```text", *sub.epilog.strip().splitlines(), "```", ""]
        return self._parse(lines)

    def _top(self, parser) -> list[nodes.Node]:
        lines = ["```text", *_usage(parser).splitlines(), "```", ""]
        for action in parser._subparsers._group_actions[0]._choices_actions:
            lines += [f"`{action.dest}`", f": {_escape(action.help or '')}", ""]
        return self._parse(lines)

    def _parse(self, lines: list[str]) -> list[nodes.Node]:
        box = nodes.container(classes=["pte-lab-command"])
        self.state.nested_parse(StringList(lines, source=f"pte_lab.cli.build_parser() ({self.get_location()})"),
                                self.content_offset, box)
        return box.children


def setup(app):
    app.add_directive("pte-lab-command", CommandDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
