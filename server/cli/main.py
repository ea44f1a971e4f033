"""The ``promptls`` command line.

``promptls assemble FILE`` prints what the model receives for a conversation document, as
the §7 JSON contract or as a table. Exit codes: 0 assembled, 1 the document cannot be
assembled (the object is still printed, with its error diagnostics), 2 usage error.
``promptls rules`` and ``promptls rule CODE`` print the rule catalogue and one rule's docs
(rendered by ``server/rulesdoc.py``; an unknown code is a usage error).
``promptls lint [PATHS]`` checks documents for CI (``server/cli/lint/``): exit 0 clean,
1 findings at or above ``--fail-on``, 2 usage or configuration error.
``promptls diff [REV_A] [REV_B] [PATHS]`` shows what a change does to the assembled context
of every conversation (``server/cli/diff.py``): exit 1 when findings at or above ``--fail-on``
appeared.
"""

from __future__ import annotations

import gc
import io
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from server import jsonout  # (the standard library's json only)
from server.cli import formats

if TYPE_CHECKING:
    import argparse
    import datetime as dt

    from assembly.host import Analysis
    from server.precount import EarlyStart, PendingCounts

# The engine is imported by the subcommands that use it, so that `assemble` can start
# counting a large document's tokens in a forked child before the heavy imports; so is
# ``argparse`` (with ``gettext``; it imports ``shutil``, ``bz2``, ``lzma``… once a parser is
# built), which only the parent uses, after the fork.

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2

# Commands whose process ends as soon as their output is written (``run``): one analysis,
# no thread, no worker pool, no file left open but stdout and stderr.
# (``lint`` too, but not ``lint --watch``: it ends that way once its workers are joined.)
ONE_SHOT = frozenset({"assemble", "rule", "rules"})
_one_shot: list[object] = []  # under ``run``: what a one-shot command leaves to the OS


def run() -> NoReturn:
    """The ``promptls`` program: ``main``, then, after a one-shot command, the process ends
    without the interpreter's teardown.

    Tearing the interpreter down frees every object one by one and collects the modules'
    cycles, after the output is complete: 40–300 ms of a cold ``assemble`` (a 10 MB
    document's analysis alone takes 25–70 ms to free), which the operating system does at
    once when the process ends. Output and the code cache are written first; if writing
    the output fails, the interpreter ends as usual (and reports it as usual).
    """
    _one_shot.append(True)
    code = main()
    if len(_one_shot) > 1:  # a one-shot command ran
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            sys.exit(code)
        from server import codecache, settingscache

        codecache.save()
        settingscache.save()
        os._exit(code)
    sys.exit(code)


def _leave_to_exit(obj: object) -> None:
    """Under ``run``, keep ``obj`` until the process ends (its memory goes with it)."""
    if _one_shot:
        _one_shot.append(obj)


def main(argv: Sequence[str] | None = None) -> int:
    """Run a subcommand; return its exit code. Never shows a traceback: an unexpected
    exception is one ``internal error`` line on stderr and exit code 2 (``assemble`` and
    ``lint`` report it as an ``internal-error`` finding instead, and go on)."""
    _printable_output()
    argv = sys.argv[1:] if argv is None else list(argv)
    _fork_early(argv)
    stderr = sys.stderr
    if argv[:1] != ["serve"]:  # (the server's stderr is its log)
        sys.stderr = VisibleStream(stderr)  # type: ignore[assignment]
    try:
        return _main(argv)
    finally:
        sys.stderr = stderr
        for early in _EARLY.values():  # not taken by ``_assemble``: a usage error
            if early is not None and early.pending is not None:
                early.pending.close(reap=not _one_shot)
        _EARLY.clear()
        for serving in _SERVING:
            serving.close(reap=not _one_shot)
        _SERVING.clear()


def _main(argv: list[str]) -> int:
    parser = _parser(argv[0] if argv else None)
    args, extra = parser.parse_known_args(argv)
    if extra:
        # An unknown flag after the subcommand is that subcommand's usage error.
        sub = _SUBPARSERS.get(args.command) if args.command else None
        (sub or parser).error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if args.command != "assemble":  # which forks its counting child first (``_assemble``)
        _engine_caches(args.command)
    # A one-shot command builds what it needs once and ends: the cyclic collector would
    # only walk the engine's import (a tenth of its time) and the parse's millions of
    # objects, again and again as they age (0.3 s of CPU at 10 MB), to find the few dozen
    # cycles one analysis leaves.
    collecting = args.command in ONE_SHOT and gc.isenabled()
    if args.command in ONE_SHOT:
        _leave_to_exit(args)
        gc.disable()
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        from assembly.diagnostics import from_exception

        print(f"promptls: error: {from_exception(exc).message}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        # Under ``run`` the process ends next, without teardown: the collector stays off.
        # Turned on again, it would collect at the next allocation every object made since
        # it was turned off (the whole analysis: 20 ms at 1 MB, 40-110 ms at 10 MB, in
        # ``run`` between the output and the exit).
        if collecting and not _one_shot:
            gc.enable()


# ``assemble FILE``'s counting child, forked by ``main`` before the command line is parsed
# (building the parser costs 5 ms, while the child is the longer path at 1 MB), by FILE.
_EARLY: dict[str, EarlyStart | None] = {}
# ``assemble``'s options that take a value (argparse takes any unambiguous prefix too).
_VALUE_OPTIONS = ("--format", "--provider", "--root", "--today", "--record")


# ``lint``'s counting child (``precount.serve_early``), stopped when the command ends.
_SERVING: list[PendingCounts] = []
# ``lint``'s options that take a value, and those after which no child is forked early.
_LINT_VALUE_OPTIONS = ("--format", "--select", "--ignore", "--fail-on", "--root")
_LINT_NO_EARLY = ("--jobs", "--watch", "--help")
# ``lint`` of at most this many documents, named on the command line or found in the
# folders it names, gets a counting child before the engine is imported: fewer than lint's
# ``MIN_PARALLEL_FILES``, so that no worker process is forked (a worker would load the
# encoding itself: ``tokenizers.count_elsewhere`` serves only the process that forked it).
MAX_EARLY_LINT_FILES = 8


def _fork_early(argv: list[str]) -> None:
    """For ``assemble FILE``: read FILE and fork its counting child (``precount``) now.
    For ``lint`` of a few files (a pre-commit hook's, an editor's on save): fork a child
    that loads the encoding and counts for this process (``_serve_early``).

    FILE is the first argument that is neither an option nor an option's value; if the
    parsed command line names another file (or none, or another command), ``_assemble``
    does not take this child and ``main`` stops it.
    """
    if argv[:1] == ["lint"]:
        _serve_early(argv[1:])
        return
    if argv[:1] != ["assemble"]:
        return
    files, _ = _arguments(argv[1:], _VALUE_OPTIONS)
    name = files[0] if files else None
    if name is None or name.lower().endswith(".prompt.md"):
        return
    from server import precount  # the standard library only

    _EARLY[name] = precount.start_early(Path(name), on_demand=True)


def _arguments(args: list[str], value_options: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """A subcommand's positional arguments and its options' names (without ``=value``), as
    argparse reads them before parsing: the argument after an option that takes a value
    (``value_options``, or any unambiguous prefix of one) is its value, and everything
    after ``--`` is positional."""
    positional: list[str] = []
    options: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg == "--":
            positional.extend(rest)
            break
        if not arg.startswith("-") or arg == "-":
            positional.append(arg)
            continue
        name, eq, _ = arg.partition("=")
        options.append(name)
        if not eq and len(name) > 2 and any(o.startswith(name) for o in value_options):
            next(rest, None)  # its value
    return positional, options


def _serve_early(args: list[str]) -> None:
    """Fork ``lint``'s counting child (``precount.serve_early``) when the command line names
    at most ``MAX_EARLY_LINT_FILES`` documents, named or in the folders it names (``.`` by
    default; ``folders.documents_below``), smaller together than a document that gets a counting
    child of its own (``precount.MIN_DOCUMENT_CHARS``), and asks for no worker processes,
    no watching and no help. Anything else (a larger folder, an option it does not know):
    no child, and the encoding is loaded in this process as usual."""
    paths, options = _arguments(args, _LINT_VALUE_OPTIONS)
    for name in options:
        if name.startswith("-j") or name == "-h" or any(o.startswith(name) for o in _LINT_NO_EARLY):
            return
        if not any(o.startswith(name) for o in _LINT_VALUE_OPTIONS):
            return  # not an option of ``lint``'s: its usage error comes next
    if len(paths) > MAX_EARLY_LINT_FILES:
        return
    import stat

    from server import precount  # the standard library only
    from server.cli import folders  # so is this

    n = total = 0
    paths = paths or ["."]
    for path in paths:
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            return
        if stat.S_ISDIR(st.st_mode):
            found = folders.documents_below(path, MAX_EARLY_LINT_FILES - n)
            if found is None:
                return
            n, total = n + found[0], total + found[1]
        elif stat.S_ISREG(st.st_mode):
            n, total = n + 1, total + st.st_size
        else:
            return
        if n > MAX_EARLY_LINT_FILES or total >= precount.MIN_DOCUMENT_CHARS:
            return
    if not n:
        return  # a folder with nothing to lint
    pending = precount.serve_early()
    if pending is not None:
        _SERVING.append(pending)


def _engine_caches(command: str) -> None:
    """Install what makes importing the engine cheaper (before the engine is imported)."""
    # Every subcommand imports part of the engine, whose ~160 dataclass definitions would
    # compile their methods again on every run (a third of the engine's import time).
    from server import codecache

    codecache.install()
    if command not in ("rule", "rules"):  # those read no settings
        # Settings values checked by earlier runs need no pydantic (40-80 ms of start-up).
        # (Imported once the cache is in: it imports ``assembly.settings``, whose
        # dataclasses and patterns would otherwise be compiled afresh on every run.)
        from server import settingscache

        settingscache.install()


class VisibleStream:
    """A text stream that writes with control characters made visible
    (``server.terminal.visible``): the command's messages on stderr name files of the
    tree being linted and arguments, which may hold escape sequences (a symbolic link
    called ``x\x1b]0;owned\x07.conv.json`` retitled the terminal in "skipped …" notes)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        from server.terminal import visible

        return int(self.stream.write(visible(text)))

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty, encoding…
        return getattr(self.stream, name)


def _printable_output() -> None:
    """Whatever a document holds, what we print is valid in the output's encoding.

    Lone surrogates (and, on a non-UTF-8 terminal, unencodable characters) are written as
    backslash escapes instead of raising, or of leaking raw bytes as ``surrogateescape``
    would.
    """
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")


def _date(value: str) -> dt.date:
    import argparse
    import datetime as dt  # imported once the command line is parsed (after ``_fork_early``)

    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid date {value!r}: expected a calendar date as YYYY-MM-DD"
        ) from None


def _fromisoformat() -> Any:
    """``datetime.date.fromisoformat`` (``diff --today``'s type), imported when the parser
    is built."""
    import datetime as dt

    return dt.date.fromisoformat


def _record(value: str) -> int:
    import argparse

    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"invalid record {value!r}: expected a number ≥ 1")
    return int(value)


_SUBPARSERS: dict[str, argparse.ArgumentParser] = {}


def _parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: with ``command`` (a subcommand's name, the first argument),
    that subcommand's alone, which is all its parsing, usage and help need (each
    subcommand's parser asks gettext for its messages and makes a help formatter per
    argument: 3-10 ms of every start-up for all of them); else every subcommand, for the
    top-level help and an unknown name."""
    import argparse
    import functools

    # While the parser is built, argparse makes a help formatter for each argument added,
    # only to check its metavar; asking the terminal's width there imports ``shutil``
    # (with ``bz2`` and ``lzma``: 3-5 ms), which a command that prints no help does not
    # otherwise need. They are told a width, never read; help and usage, laid out once
    # the parser is built, ask the terminal as usual.
    told = functools.partial(argparse.HelpFormatter, width=80)
    parser = argparse.ArgumentParser(
        prog="promptls",
        description="Assemble LLM conversations and prompts the way the model receives them.",
        formatter_class=told,
    )
    parser.add_argument(
        "--version", action=_version_action(), help="show the version of promptls and exit"
    )
    sub = parser.add_subparsers(
        dest="command",
        metavar="COMMAND",
        parser_class=functools.partial(argparse.ArgumentParser, formatter_class=told),
    )
    for name, add in _COMMANDS.items():
        if command is None or command not in _COMMANDS or name == command:
            add(sub)
    for built in (parser, *sub.choices.values()):
        built.formatter_class = argparse.HelpFormatter
    _SUBPARSERS.update(sub.choices)
    return parser


def _add_assemble(sub: Any) -> None:
    p = sub.add_parser(
        "assemble",
        help="show the assembled context of a conversation document",
        description="Run the context assembly pipeline on FILE and print the result. Exit "
        "codes: 0 assembled, 1 the conversation cannot be assembled, 2 usage error.",
    )
    p.add_argument(
        "file",
        metavar="FILE",
        help="a conversation: *.conv.json, *.conv.jsonl, *.conv.yaml|yml, a log or a dataset",
    )
    p.add_argument(
        "--format",
        choices=("json", "text", "html"),
        default="text",
        help="text (default): a table; json: the stable JSON contract; html: a "
        "self-contained page with the window bar and the message table",
    )
    p.add_argument(
        "--provider",
        choices=("openai", "ollama", "azure", "anthropic"),
        help="the format of the assembled messages (default: the `provider` setting, openai)",
    )
    p.add_argument(
        "--root",
        metavar="DIR",
        help="workspace root (default: the enclosing git repository, else the file's folder)",
    )
    p.add_argument(
        "--today",
        type=_date,
        help="date for {{CURRENT_DATETIME}} as YYYY-MM-DD (default: today)",
    )
    p.add_argument(
        "--record",
        type=_record,
        metavar="N",
        help="in a dataset (JSON Lines, one conversation per line): assemble the N-th one",
    )
    p.add_argument(
        "--summary-request",
        action="store_true",
        help="with --format json: include the summarization request of the compression plan",
    )
    p.set_defaults(run=_assemble)


def _add_lint(sub: Any) -> None:
    p = sub.add_parser(
        "lint",
        help="check documents and folders for problems (for CI)",
        description="Check conversations and prompt templates under PATHS (default: the "
        "current folder) and report the findings. Exit codes: 0 clean, 1 findings at or "
        "above --fail-on, 2 usage or configuration error.",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="files and folders (default: .)")
    p.add_argument(
        "--format",
        choices=formats.FORMATS,
        default="text",
        help="text (default): findings with source excerpts; json; sarif (code scanning); "
        "github (Actions annotations); gitlab (Code Quality)",
    )
    p.add_argument("--select", metavar="CODES", help="comma-separated rule codes to run")
    p.add_argument("--ignore", metavar="CODES", help="comma-separated rule codes to skip")
    p.add_argument(
        "--fail-on",
        choices=formats.FAIL_ON,
        default="error",
        help="exit 1 when a finding is at least this severe (default: error)",
    )
    p.add_argument("--watch", action="store_true", help="re-lint when files change")
    p.add_argument(
        "--root",
        metavar="DIR",
        help="workspace root (default: the enclosing git repository, else each file's folder)",
    )
    p.add_argument(
        "--jobs",
        "-j",
        type=int,
        metavar="N",
        help="worker processes (default: one per core for 16 files or more)",
    )
    p.set_defaults(run=_lint)


def _add_diff(sub: Any) -> None:
    p = sub.add_parser(
        "diff",
        help="what a change does to the assembled context of every conversation",
        description="Compare the assembled context of every conversation between two git "
        "revisions (default: the merge-base of HEAD with the default branch, against the "
        "work tree), or of two files with --files. Exit codes: 0 no new finding at or above "
        "--fail-on, 1 new findings, 2 usage or git error.",
    )
    p.add_argument(
        "args",
        nargs="*",
        metavar="[REV_A] [REV_B] [PATH]",
        help="up to two revisions, then files or folders to limit the diff to (a template "
        "selects the conversations that use it); `--` before paths that look like revisions",
    )
    p.add_argument("--files", nargs=2, metavar=("A", "B"), help="compare two conversation files")
    p.add_argument(
        "--format",
        choices=("text", "json", "markdown", "github"),
        default="text",
        help="text (default); json; markdown (a pull request comment); github (annotations "
        "and the job summary)",
    )
    p.add_argument(
        "--fail-on",
        choices=formats.FAIL_ON,
        default="error",
        help="exit 1 when a finding at least this severe appeared (default: error)",
    )
    p.add_argument(
        "--today",
        type=_fromisoformat(),
        help="date for {{CURRENT_DATETIME}} on both sides as YYYY-MM-DD (default: today)",
    )
    p.set_defaults(run=_diff)


def _add_rules(sub: Any) -> None:
    p = sub.add_parser(
        "rules",
        help="list every rule: code, default severity, fixable, summary",
        description="Print the rule catalogue (RULES.md has every rule's documentation).",
    )
    p.add_argument(
        "--format", choices=("text", "json"), default="text", help="text (default) or json"
    )
    p.set_defaults(run=_rules)


def _add_rule(sub: Any) -> None:
    p = sub.add_parser(
        "rule",
        help="show a rule's documentation",
        description="Print the documentation of the rule CODE (e.g. budget-overrun).",
    )
    p.add_argument("code", metavar="CODE", help="a rule code, as listed by `promptls rules`")
    p.set_defaults(run=_rule)


def _add_serve(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help="run the language server (stdio by default)",
        description="Run the promptls language server.",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--stdio", action="store_true", help="talk over stdin/stdout (default)")
    where.add_argument(
        "--tcp", metavar="HOST:PORT", help="listen on TCP, loopback only (e.g. 127.0.0.1:2087)"
    )
    where.add_argument("--ws", metavar="HOST:PORT", help="listen on a WebSocket, loopback only")
    p.add_argument(
        "--allow-origin",
        metavar="ORIGIN",
        action="append",
        default=[],
        help="with --ws: accept browser connections from this origin (e.g. "
        "http://localhost:3000; repeatable). Browser origins are refused by default",
    )
    p.add_argument(
        "--log-level",
        default="WARNING",
        type=str.upper,  # ``debug`` as well as ``DEBUG``
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="the least severe log record written, in either case (default: WARNING)",
    )
    p.add_argument("--log-file", metavar="PATH", help="write the log there instead of stderr")
    p.set_defaults(run=_serve)


_COMMANDS: dict[str, Callable[[Any], None]] = {
    "assemble": _add_assemble,
    "lint": _add_lint,
    "diff": _add_diff,
    "rules": _add_rules,
    "rule": _add_rule,
    "serve": _add_serve,
}


def _version_action() -> type[argparse.Action]:
    """``--version``: the package's version (``server.__version__``, which the package
    metadata is built from: no metadata lookup, which would import ``email``…)."""
    import argparse

    class VersionAction(argparse.Action):
        def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
            super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)  # type: ignore[arg-type]

        def __call__(
            self, parser: argparse.ArgumentParser, *args: object, **kwargs: object
        ) -> None:
            from server import __version__

            sys.stdout.write(f"promptls {__version__}\n")
            parser.exit()

    return VersionAction


def _serve(args: argparse.Namespace) -> int:
    import logging

    if args.tcp or args.ws or args.allow_origin:
        # Refused before the server (pygls, the engine) is imported: ``transport``'s
        # checks import nothing heavy.
        from server.lsp import transport

        try:
            if args.allow_origin and not args.ws:
                raise transport.TransportError("--allow-origin applies to --ws only")
            host, port = transport.parse_address(args.tcp or args.ws)
            origins = transport.check_origins(args.allow_origin)
        except transport.TransportError as e:
            print(f"promptls: error: {e}", file=sys.stderr)
            return EXIT_USAGE
    from server import pages

    logging.basicConfig(
        level=args.log_level,
        filename=args.log_file,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from server import codecache, settingscache

    codecache.install_attrs()  # lsprotocol's classes (``attrs``): a third of the import
    with pages.without_openssl():  # never used, 7 MB resident (``server.pages``)
        from server.lsp.handlers import build_server

        server = build_server()
        # A document's settings values are checked by the pydantic settings model, which
        # is imported only on a miss of the verdicts earlier runs kept (``settingscache``).
        # With none kept (a first run), a miss is certain: the server imports the model
        # now, while the editor starts, not inside the first open (40-80 ms). Otherwise it
        # does not: pydantic and the model hold 8-10 MB for the server's whole life, 7 % of
        # its memory with a 10 MB document open, to spare one open 40-80 ms on a value no
        # earlier run checked.
        if not settingscache.holds_verdicts():
            import assembly.settings_model  # noqa: F401
        else:
            # What pydantic's import would load OpenSSL through (``secrets`` → ``hmac``),
            # imported here without it, so that a late import of the model does not.
            import secrets  # noqa: F401

    pages.let_go_of_import_leftovers()  # lsprotocol's classes are built by now
    if args.tcp:
        return transport.serve_tcp(server, host, port)
    if args.ws:
        return transport.serve_ws(server, host, port, origins)
    server.start_io()
    return EXIT_OK


def _assemble(args: argparse.Namespace) -> int:
    from server import files  # the standard library only

    if args.summary_request and args.format != "json":
        # Only the JSON has a place for it: said, not silently ignored.
        print("promptls: error: --summary-request applies to --format json", file=sys.stderr)
        return EXIT_USAGE
    path = Path(args.file)
    try:
        files.check_regular(path, limit=None)  # the size is checked when it is read
    except files.FileProblem as problem:
        what = "no such file" if problem.reason == "no such file" else "cannot read"
        detail = "" if what == problem.reason else f": {problem.reason}"
        print(f"promptls: error: {what}: {args.file}{detail}", file=sys.stderr)
        return EXIT_USAGE
    root = Path(args.root) if args.root else None
    if root is not None and not root.is_dir():
        print(f"promptls: error: --root is not a directory: {args.root}", file=sys.stderr)
        return EXIT_USAGE
    if path.name.lower().endswith(".prompt.md"):
        print(
            f"promptls: error: {args.file} is a prompt template, not a conversation: name it "
            "as `system_prompt` in a conversation and assemble that, or check the template "
            "with `promptls lint`",
            file=sys.stderr,
        )
        return EXIT_USAGE
    overrides = {"provider": args.provider} if args.provider else None
    # A large document is counted meanwhile, by a child forked before anything heavy is
    # imported here (this process's own imports then run beside the child's work): at
    # 1 MB the child, which loads the encoding, is the longer of the two. ``main`` forked
    # it already, unless it could not tell FILE from the command line.
    if args.file in _EARLY:
        early = _EARLY.pop(args.file)
    else:
        from server import precount  # the standard library only

        early = precount.start_early(path, on_demand=True)
    _engine_caches(args.command)

    from server.output import assembly_json, render_text
    from server.workspace import analyze

    try:
        analysis = analyze(
            path,
            text=early.text if early else None,
            root=root,
            overrides=overrides,
            today=args.today,
            pending=early.pending if early else None,
        )
        if analysis.records or args.record is not None:
            out = ""  # a dataset, or a usage error: below
        elif args.format == "json":
            obj = assembly_json(
                analysis, display_path=args.file, summary_request=args.summary_request
            )
            out = jsonout.dumps(obj) + "\n"
        elif args.format == "html":
            from server.htmlview import render_html

            out = render_html(analysis, display_path=args.file)
        else:
            out = render_text(analysis, display_path=args.file)
    except Exception as exc:  # a bug in promptls: an internal-error finding, exit 1
        return _assemble_failed(args, exc)
    finally:
        if early is not None and early.pending is not None:
            # A child still counting on request: done (under ``run`` this process ends
            # next, and the system reaps it: no wait while its memory is freed).
            early.pending.close(reap=not _one_shot)
    _leave_to_exit(analysis)
    if analysis.encoding_warning:
        print(f"promptls: note: {analysis.encoding_warning}", file=sys.stderr)
    if analysis.records:
        return _assemble_dataset(args, analysis)
    if args.record is not None:
        print(
            f"promptls: error: --record: {args.file} is one conversation, not a dataset "
            "(JSON Lines with one conversation per line)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    sys.stdout.write(out)
    return EXIT_OK if analysis.assembly.ok else EXIT_FINDINGS


def _assemble_dataset(args: argparse.Namespace, analysis: Analysis) -> int:
    """A dataset: one record (``--record N``), or every record as JSON Lines."""
    from assembly.text import LineIndex, plural
    from server.output import assembly_json, record_line, render_text

    n = len(analysis.records)
    if args.record is not None:
        if args.record > n:
            print(
                f"promptls: error: --record {args.record}: {args.file} has "
                f"{plural(n, 'conversation')}",
                file=sys.stderr,
            )
            return EXIT_USAGE
        picked = [analysis.records[args.record - 1]]
    elif args.format == "json":
        picked = list(analysis.records)
    else:
        print(
            f"promptls: error: {args.file} is a dataset of {n} conversations, one per line: "
            "pick one with --record N, or print them all with --format json (JSON Lines)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    index = LineIndex(str(analysis.text), few=True)  # the records' lines, in order
    for record in picked:
        number = analysis.record_number(record)
        line = record_line(index, record)
        where = f"{args.file} (record {number}, line {line})"
        if args.format == "json":
            obj = {
                "record": number,
                "line": line,
                **assembly_json(
                    record,
                    display_path=args.file,
                    summary_request=args.summary_request,
                    document=analysis.text,
                ),
            }
            # One record: as ``assemble`` writes a conversation; else a line each.
            line = (
                jsonout.dumps(obj)
                if args.record is not None
                else json.dumps(obj, ensure_ascii=False)
            )
            sys.stdout.write(line.translate(_LINE_BREAKS_ESCAPED) + "\n")
        elif args.format == "html":
            from server.htmlview import render_html

            page = render_html(record, display_path=where, document=analysis.text)
            sys.stdout.write(page)
        else:
            out = render_text(record, display_path=args.file, title=where, document=analysis.text)
            sys.stdout.write(out)
    return EXIT_OK if all(r.assembly.ok for r in picked) else EXIT_FINDINGS


# In JSON Lines, the characters other than "\n" that some readers split lines at
# (Python's ``str.splitlines``: U+0085, U+2028, U+2029), escaped: the same JSON value.
_LINE_BREAKS_ESCAPED = {c: f"\\u{c:04x}" for c in (0x85, 0x2028, 0x2029)}


def _assemble_failed(args: argparse.Namespace, exc: Exception) -> int:
    """Print the ``internal-error`` finding the way ``assemble`` prints findings."""
    from assembly.diagnostics import from_exception
    from server.output import head_diagnostic_json

    d = from_exception(exc, during="assembling")
    if args.format == "json":
        obj = {"file": args.file, "diagnostics": [head_diagnostic_json(d, file=args.file)]}
        sys.stdout.write(jsonout.dumps(obj) + "\n")
    else:
        line = f"{args.file}:1:1: error[internal-error] {d.message}\n"
        if args.format == "html":
            import html

            line = f"<!doctype html>\n<title>promptls</title>\n<pre>{html.escape(line)}</pre>\n"
        sys.stdout.write(line)
    return EXIT_FINDINGS


def _lint(args: argparse.Namespace) -> int:
    from server.cli import lint

    try:
        code = lint.run(args)
    except lint.LintError as exc:
        print(f"promptls: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not args.watch:
        # Its worker processes are shut down and joined by now: like a one-shot command,
        # the process ends without the interpreter's teardown (``run``).
        _leave_to_exit(args)
    return code


def _diff(args: argparse.Namespace) -> int:
    from server.cli import diff

    try:
        return diff.run(args)
    except diff.DiffError as exc:
        print(f"promptls: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _rules(args: argparse.Namespace) -> int:
    from server.rulesdoc import render_rules_table, rules_json

    if args.format == "json":
        sys.stdout.write(jsonout.dumps(rules_json()) + "\n")
    else:
        sys.stdout.write(render_rules_table())
    return EXIT_OK


def _rule(args: argparse.Namespace) -> int:
    from server.rulesdoc import find_rule, render_rule_doc, suggest_codes

    rule = find_rule(args.code)
    if rule is None:
        close = suggest_codes(args.code)
        hint = f"; did you mean {' or '.join(f'`{c}`' for c in close)}?" if close else ""
        print(f"promptls: error: unknown rule `{args.code}`{hint}", file=sys.stderr)
        print("promptls: note: `promptls rules` lists every rule", file=sys.stderr)
        return EXIT_USAGE
    sys.stdout.write(render_rule_doc(rule))
    return EXIT_OK


if __name__ == "__main__":
    run()
