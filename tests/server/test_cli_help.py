"""The command line documents itself: docs/cli.md's synopses and ``--help`` agree.

- Every command of ``promptls --help`` has a synopsis block in docs/cli.md (a plain fenced
  block whose first line is ``promptls COMMAND …``), and that block names exactly the long
  options ``promptls COMMAND --help`` lists, and each option's choices as ``a|b|c``.
- Every option and argument has a help text, and a default that is not obvious from it is
  named in it (the ``--format`` options say which is the default).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from server.cli.main import _parser

CLI_MD = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = _parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _synopses() -> dict[str, str]:
    """Command → its synopsis lines in docs/cli.md: the plain fenced blocks that start with
    ``promptls``, each line ``promptls COMMAND …`` with its indented continuation lines."""
    plain: list[list[str]] = []  # the bodies of the fenced blocks without an info string
    body: list[str] | None = None
    fenced = False
    for line in CLI_MD.read_text(encoding="utf-8").split("\n"):
        if line.startswith("```"):
            fenced = not fenced
            body = [] if fenced and line == "```" else None
            if body is not None:
                plain.append(body)
        elif body is not None:
            body.append(line)
    found: dict[str, str] = {}
    for lines in plain:
        if not lines or not lines[0].startswith("promptls "):
            continue
        command = ""
        for line in lines:
            m = re.match(r"promptls (\w+)", line)
            if m:
                command = m.group(1)
            elif not line.startswith(" "):
                continue
            found[command] = found.get(command, "") + line.split("#")[0] + "\n"
    return found


def _options(p: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {
        s: a
        for a in p._actions
        for s in a.option_strings
        if s.startswith("--") and s not in ("--help",)
    }


COMMANDS = sorted(_subparsers())


def test_every_command_is_documented() -> None:
    assert set(COMMANDS) <= set(_synopses()), "add a synopsis block to docs/cli.md"
    assert {"assemble", "lint", "diff", "rules", "rule", "serve"} <= set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_the_synopsis_names_every_option_and_its_choices(command: str) -> None:
    synopsis = _synopses()[command]
    options = _options(_subparsers()[command])
    documented = set(re.findall(r"(--[a-z][a-z-]*)", synopsis))
    assert documented == set(options), f"docs/cli.md synopsis of `promptls {command}`"
    for name, action in options.items():
        if action.choices:
            # `--format text|json|html`: the same choices, in any order.
            m = re.search(re.escape(name) + r" ([\w|]+)", synopsis)
            assert m is not None, name
            assert set(m.group(1).split("|")) == set(action.choices), name


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_has_help(command: str) -> None:
    p = _subparsers()[command]
    for action in p._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help, f"promptls {command}: {action.option_strings or action.dest}"
        if "--format" in action.option_strings:
            assert f"{action.default} (default)" in action.help
    if command in ("assemble", "lint", "diff"):
        assert p.description and "Exit codes: 0" in p.description


def test_a_log_level_is_taken_in_either_case() -> None:
    serve = _subparsers()["serve"]
    assert serve.parse_args(["--log-level", "debug"]).log_level == "DEBUG"
    assert serve.parse_args(["--log-level", "Info"]).log_level == "INFO"
    assert serve.parse_args([]).log_level == "WARNING"


def test_a_subcommand_parser_is_built_alone_and_is_the_same() -> None:
    # Start-up builds only the parser of the command named first (gettext and a help
    # formatter per argument for each subcommand): its usage, help and parse are those of
    # the full parser's; anything else (help, an unknown name) gets every subcommand.
    everything = _subparsers()
    for name, full in everything.items():
        alone = _parser(name)
        action = next(a for a in alone._actions if isinstance(a, argparse._SubParsersAction))
        assert list(action.choices) == [name]
        assert action.choices[name].format_help() == full.format_help()
    for first in (None, "--help", "--version", "bogus", "-h"):
        parser = _parser(first)
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        assert list(action.choices) == list(everything)
