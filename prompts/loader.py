"""Load versioned prompt templates and render them in a single pass.

Rendering is one regex substitution over the template, so a value containing ``{{x}}`` is
never expanded again, and a value cannot close the XML-style tag its slot sits in: a
closing (or opening) tag of that name inside the value is neutralised.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any

import yaml

from juryflow.maths.records import VERDICT_THRESHOLD, OutputKind

# \r: a prompt file keeps its line ends as written (its hash is the file's), CRLF included.
_SLOT_LINE = re.compile(r"^[ \t]*\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}[ \t\r]*$", re.MULTILINE)


class PromptError(ValueError):
    """A template is unknown, malformed, or rendered without one of its variables."""


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    name: str
    version: int
    text: str
    output_kind: OutputKind
    variables: tuple[str, ...]
    span_variable: str | None
    description: str = ""
    verdict_threshold: float = VERDICT_THRESHOLD
    """A score at or above this is a 'hallucinated' verdict (declared in the catalogue)."""
    path: str | None = None
    """The prompt file this template was read from; None for a catalogue template."""

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def ref(self) -> str:
        """How runs and reports name a template: ``name@v<version>`` from the catalogue,
        ``file:<stem>@<hash prefix>`` from a prompt file (its text is its version)."""
        if self.path is not None:
            return f"file:{self.name}@{self.sha256[:12]}"
        return f"{self.name}@v{self.version}"

    def record(self) -> dict[str, object]:
        """The template as a run lists it (``runs.prompts``)."""
        if self.path is not None:
            return {"name": self.ref, "file": self.path, "sha256": self.sha256}
        return {"name": self.name, "version": self.version, "sha256": self.sha256}

    def enclosing_tags(self) -> dict[str, str]:
        """Slots that sit between ``<tag>`` and ``</tag>`` lines, mapped to that tag."""
        return dict(_enclosing_tags(self.text))

    def render(self, values: dict[str, str]) -> str:
        missing = [v for v in self.variables if v not in values]
        if missing:
            raise PromptError(
                f"prompt {self.ref} needs variable(s) {', '.join(missing)}; map them to "
                "dataset columns with --map VAR=COLUMN"
            )
        tags = _enclosing_tags(self.text)

        def substitute(match: re.Match[str]) -> str:
            name = match.group(1)
            value = values[name]
            tag = tags.get(name)
            if tag is not None:
                value = _neutralise_tag(value, tag)
            return value

        return _SLOT_LINE.sub(lambda m: substitute(m), self.text)


@functools.lru_cache(maxsize=128)
def _enclosing_tags(text: str) -> Mapping[str, str]:
    """Per template text, once: every call renders through it (read-only: shared)."""
    tags: dict[str, str] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        match = _SLOT_LINE.match(line)
        if not match or i == 0 or i + 1 >= len(lines):
            continue
        opening = re.fullmatch(r"\s*<([A-Za-z_][\w-]*)>\s*", lines[i - 1])
        closing = re.fullmatch(r"\s*</([A-Za-z_][\w-]*)>\s*", lines[i + 1])
        if opening and closing and opening.group(1) == closing.group(1):
            tags[match.group(1)] = opening.group(1)
    return MappingProxyType(tags)


def slots_of(text: str) -> tuple[str, ...]:
    """The variables of a template: its ``{{ name }}`` slots, in order of first appearance."""
    return tuple(dict.fromkeys(_SLOT_LINE.findall(text)))


def _neutralise_tag(value: str, tag: str) -> str:
    # The escaped form reads the same to a model but no longer closes the delimiter.
    pattern = re.compile(rf"<(/?)\s*{re.escape(tag)}\s*>", re.IGNORECASE)
    return pattern.sub(lambda m: f"&lt;{m.group(1)}{tag}&gt;", value)


@cache
def _catalog() -> dict[str, Any]:
    raw = resources.files("juryflow.prompts").joinpath("catalog.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(raw)
    templates = data.get("templates") if isinstance(data, dict) else None
    if not isinstance(templates, dict):
        raise PromptError("prompts/catalog.yaml has no 'templates' mapping")
    return templates


def template_names() -> list[str]:
    return sorted(_catalog())


def load_template(name: str) -> PromptTemplate:
    """The template called ``name`` (a catalogue key, optionally ``name@vN``)."""
    base, _, version = name.partition("@v")
    entry = _catalog().get(base)
    if entry is None:
        raise PromptError(f"unknown prompt {name!r}; known prompts: {', '.join(template_names())}")
    if version and version != str(entry["version"]):
        raise PromptError(f"prompt {base} has version {entry['version']}, not {version}")
    return _load(base)


@cache
def _load(base: str) -> PromptTemplate:
    entry = _catalog()[base]
    templates = resources.files("juryflow.prompts").joinpath("templates")
    text = templates.joinpath(entry["file"]).read_text("utf-8")
    template = PromptTemplate(
        name=base,
        version=int(entry["version"]),
        text=text,
        output_kind=entry["output"],
        variables=tuple(entry["variables"]),
        span_variable=entry.get("span_variable"),
        description=str(entry.get("description", "")),
        verdict_threshold=float(entry.get("verdict_threshold", VERDICT_THRESHOLD)),
    )
    slots = set(slots_of(text))
    if slots != set(template.variables):
        raise PromptError(
            f"prompt {base}: catalogue declares {sorted(template.variables)} "
            f"but the template's slots are {sorted(slots)}"
        )
    return template
