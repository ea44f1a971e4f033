"""The ``promptls`` command line.

``promptls assemble FILE`` prints what the model receives for a conversation document, as
the §7 JSON contract or as a table. Exit codes: 0 assembled, 1 the document cannot be
assembled (the object is still printed, with its error diagnostics), 2 usage error.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from server.output import assembly_json, render_text
from server.workspace import analyze

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return int(args.run(args))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="promptls",
        description="Assemble LLM conversations and prompts the way the model receives them.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser(
        "assemble",
        help="show the assembled context of a conversation document",
        description="Run the context assembly pipeline on FILE and print the result.",
    )
    p.add_argument("file", metavar="FILE", help="a *.conv.json, *.conv.jsonl or *.conv.yaml file")
    p.add_argument("--format", choices=("json", "text"), default="text")
    p.add_argument("--provider", choices=("openai", "ollama", "azure"))
    p.add_argument("--root", help="workspace root (default: the enclosing git repository)")
    p.add_argument(
        "--today",
        type=dt.date.fromisoformat,
        help="date for {{CURRENT_DATETIME}} as YYYY-MM-DD (default: today)",
    )
    p.set_defaults(run=_assemble)
    return parser


def _assemble(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not path.is_file():
        print(f"promptls: error: no such file: {args.file}", file=sys.stderr)
        return EXIT_USAGE
    root = Path(args.root) if args.root else None
    if root is not None and not root.is_dir():
        print(f"promptls: error: --root is not a directory: {args.root}", file=sys.stderr)
        return EXIT_USAGE
    overrides = {"provider": args.provider} if args.provider else None
    analysis = analyze(path, root=root, overrides=overrides, today=args.today)
    if analysis.encoding_warning:
        print(f"promptls: note: {analysis.encoding_warning}", file=sys.stderr)
    if args.format == "json":
        obj = assembly_json(analysis, display_path=args.file)
        sys.stdout.write(json.dumps(obj, ensure_ascii=False, indent=2) + "\n")
    else:
        sys.stdout.write(render_text(analysis, display_path=args.file))
    return EXIT_OK if analysis.assembly.ok else EXIT_FINDINGS


if __name__ == "__main__":
    sys.exit(main())
