"""Write docs/reference/cli.md from the `juryflow` command line itself.

Every command and subcommand, in the order ``juryflow --help`` lists them, with its usage
line, its help and a table of its arguments and options (names, type, help, default and
range), as ``juryflow COMMAND --help`` prints them:

    .venv/bin/python scripts/cli_reference.py           # rewrite the page
    .venv/bin/python scripts/cli_reference.py --check   # exit 1 if the page differs

tests/test_docs.py fails when the committed page is not what this writes, so the page
cannot drift from the code: change a command, then run this.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "reference" / "cli.md"

HEADER = """\
# Command line

Every `juryflow` command, as `juryflow COMMAND --help` prints it: usage, help, arguments and
options with their defaults and ranges. Every command also takes `--help`. A command that
takes a RUN accepts a unique prefix of the run id.

<!-- Written by scripts/cli_reference.py from the command line itself; tests/test_docs.py
fails when it differs. Do not edit by hand: change the command, then run
.venv/bin/python scripts/cli_reference.py -->
"""

_CODE = re.compile(r"(`[^`]*`)")
_ESCAPES = str.maketrans(
    {
        "\\": "\\\\",
        "|": "\\|",
        "*": "\\*",
        "_": "\\_",
        "[": "\\[",
        "]": "\\]",
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
    }
)


def markdown(text: str) -> str:
    """Plain text as Markdown that shows it as written: backticked parts stay code (a table
    keeps a ``|`` inside one), the rest is escaped (``*``, ``_``, ``<``, ``|`` ...)."""
    parts = _CODE.split(text)
    return "".join(
        part if index % 2 else part.translate(_ESCAPES) for index, part in enumerate(parts)
    )


def plain(text: str, command: Any) -> str:
    """What the help shows of ``text``: Rich markup read (``\\[`` is ``[``) in rich mode."""
    if getattr(command, "rich_markup_mode", None) == "rich":
        from rich.text import Text

        return Text.from_markup(text).plain
    return text


def cell(text: str) -> str:
    """A table cell: paragraphs kept apart, line breaks within one dropped."""
    paragraphs = [" ".join(p.split()) for p in text.split("\n\n") if p.strip()]
    return "<br><br>".join(markdown(p) for p in paragraphs)


def parameter_row(param: Any, ctx: Any, command: Any) -> tuple[str, str] | None:
    """(names, help) of one argument or option, as ``--help`` lists it; None if hidden."""
    record = param.get_help_record(ctx)
    if record is None or getattr(param, "hidden", False):
        return None
    names, shown = record
    raw = param.help or ""
    if not shown.startswith(raw):
        raise SystemExit(f"{command.name}: the help of {names!r} is not its text: {shown!r}")
    text = plain(raw, command)
    extra = shown[len(raw) :].strip()  # [default: ...; range], [required], [env var: ...]
    help_cell = cell(text)
    if extra:
        help_cell = f"{help_cell} {markdown(extra)}" if help_cell else markdown(extra)
    return f"`{names}`", help_cell


def section(path: str, command: Any, ctx: Any) -> list[str]:
    lines = [f"## `{path}`", ""]
    help_text = plain(command.help or "", command)
    for paragraph in help_text.split("\n\n"):
        if paragraph.strip():
            lines += [markdown(" ".join(paragraph.split())), ""]
    lines += ["```text", command.get_usage(ctx), "```", ""]
    arguments: list[tuple[str, str]] = []
    options: list[tuple[str, str]] = []
    for param in command.get_params(ctx):
        if "--help" in getattr(param, "opts", ()):
            continue
        row = parameter_row(param, ctx, command)
        if row is None:
            continue
        (arguments if param.param_type_name == "argument" else options).append(row)
    for title, rows in (("argument", arguments), ("option", options)):
        if rows:
            lines += [f"| {title} | what it is |", "|---|---|"]
            lines += [f"| {names} | {text} |" for names, text in rows]
            lines.append("")
    if command.epilog:
        lines += [markdown(plain(command.epilog, command)), ""]
    return lines


def commands(group: Any, ctx: Any, path: str) -> list[tuple[str, Any, Any]]:
    """(path, command, context) of ``group`` and everything below it, in help order."""
    found = [(path, group, ctx)]
    for name in group.list_commands(ctx) if hasattr(group, "list_commands") else []:
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        child = command.context_class(command, info_name=name, parent=ctx)
        found += commands(command, child, f"{path} {name}")
    return found


def render() -> str:
    """The page, from the command line as installed."""
    import typer.main

    from juryflow.cli import app

    group = typer.main.get_command(app)
    # a usage line on one line whatever the terminal (COLUMNS), so the page is the same anywhere
    root = group.context_class(
        group, info_name="juryflow", terminal_width=1000, max_content_width=1000
    )
    every = commands(group, root, "juryflow")
    lines = [HEADER]
    for path, command, _ in every[1:]:
        first = plain(command.help or "", command).split("\n\n")[0]
        anchor = path.replace(" ", "-")
        lines.append(f"- [`{path}`](#{anchor}): {markdown(' '.join(first.split()))}")
    lines.append("")
    for path, command, ctx in every:
        lines += section(path, command, ctx)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if argv == ["--check"]:
        if PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE.relative_to(REPO)} differs from the command line: run {__file__}")
            return 1
        return 0
    if argv:
        print("usage: python scripts/cli_reference.py [--check]", file=sys.stderr)
        return 2
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
