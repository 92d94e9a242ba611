"""Prompt files: a judge's own template, given in a panel as ``prompt: ./path.txt``.

A file prompt follows the catalogue's slot rules (``{{ name }}`` alone on its line is a
variable; an optional ``{{-- per item --}}`` line ends the static part that is sent first
and cached), but what the catalogue declares beside a template (its output kind, the span
variable, the verdict threshold) comes from the judge entry instead. The text is read once,
when the panel is loaded, and travels with the judge from then on: remote tasks and resumed
runs judge with the very text the run started with, whatever happens to the file.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from juryflow.maths.records import VERDICT_THRESHOLD, OutputKind
from juryflow.prompts.loader import PromptError, PromptTemplate, check_split, slots_of

_CATALOGUE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(@v[0-9]+)?")
_ANY_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
MAX_PROMPT_BYTES = 1_000_000
"""A prompt is sent with every call; a file this large is a mistake, not a prompt."""


def is_prompt_file(prompt: str) -> bool:
    """A catalogue name is a bare identifier (``name`` or ``name@vN``); anything else, such
    as ``./mine.txt`` or ``prompts/mine.txt``, is a path."""
    return _CATALOGUE_NAME.fullmatch(prompt) is None


def read_prompt_file(prompt: str, base_dir: Path) -> tuple[Path, str]:
    """The absolute path of ``prompt`` (relative to ``base_dir``) and its text."""
    path = Path(prompt).expanduser()
    path = (path if path.is_absolute() else base_dir / path).resolve()
    if not path.is_file():
        raise PromptError(
            f"prompt file {path} does not exist; give a catalogue prompt or a path relative "
            "to the panel file's folder"
        )
    if path.stat().st_size > MAX_PROMPT_BYTES:
        raise PromptError(f"prompt file {path} is over {MAX_PROMPT_BYTES} bytes; shorten it")
    try:
        # Bytes decoded as they are, line ends included: the stored hash is the file's own
        # (`sha256sum` gives the same), not that of a newline-translated copy.
        return path, path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise PromptError(f"prompt file {path} is not UTF-8 text; save it as UTF-8") from None
    except OSError as error:
        raise PromptError(f"prompt file {path} cannot be read: {error.strerror}") from None


def file_template(
    path: str,
    text: str,
    output: OutputKind | None,
    span_variable: str | None = None,
    verdict_threshold: float | None = None,
) -> PromptTemplate:
    """The template of a prompt file, its declarations checked; raises PromptError."""
    where = f"prompt file {path}"
    if output is None:
        raise PromptError(
            f"{where}: declare what the judge answers with 'output: score' "
            "(a 0-1 score), 'output: spans' (hallucinated spans of the response) or "
            "'output: preference' (A, B or tie between response_a and response_b)"
        )
    slots = slots_of(text)
    if not slots:
        raise PromptError(
            f"{where} has no variable: put each one as {{{{ name }}}} alone on its own line"
        )
    inline = sorted({m.group(1) for m in _ANY_PLACEHOLDER.finditer(text)} - set(slots))
    if inline:
        # Only a placeholder alone on its line is filled in; one inside a sentence would be
        # sent to the model as written, and the judge would never see that column.
        raise PromptError(
            f"{where}: {{{{ {inline[0]} }}}} sits inside a line and would not be filled in; "
            "put it alone on its own line"
        )
    check_split(text, where)
    if output == "spans":
        span_variable = span_variable or ("response" if "response" in slots else None)
        if span_variable not in slots:
            raise PromptError(
                f"{where}: 'span_variable: {span_variable}' is not one of its variables "
                f"({', '.join(slots)}); name the variable the spans point into"
                if span_variable
                else f"{where}: a spans prompt needs 'span_variable', the variable the spans "
                f"point into (one of {', '.join(slots)})"
            )
    elif span_variable is not None:
        raise PromptError(f"{where}: 'span_variable' is for 'output: spans'; remove it")
    return PromptTemplate(
        name=Path(path).stem,
        version=0,
        text=text,
        output_kind=output,
        variables=slots,
        span_variable=span_variable,
        description=f"prompt file {path}",
        verdict_threshold=verdict_threshold if verdict_threshold is not None else VERDICT_THRESHOLD,
        path=path,
    )


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def changed_since(path: str, text: str) -> str | None:
    """Why the file at ``path`` no longer holds ``text`` (the text a run started with), or
    None when it still does."""
    try:
        now = Path(path).read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return f"prompt file {path} is gone or unreadable"
    if now == text:
        return None
    return (
        f"prompt file {path} changed since the run started "
        f"(sha256 {text_sha256(now)[:12]}, the run's {text_sha256(text)[:12]})"
    )
