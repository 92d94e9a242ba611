"""Load versioned prompt templates and render them in a single pass.

Rendering is one regex substitution over the template, so a value containing ``{{x}}`` is
never expanded again, and a value cannot close the XML-style tag its slot sits in: a
closing (or opening) tag of that name inside the value is neutralised.

A template may hold the line ``{{-- per item --}}``: the text above it is the same for every
item (instructions, examples) and is sent first, marked for the providers' prompt caches;
the text below it holds the slots (see ``prompts/README.md``). A template without it is all
per item, as before, and nothing of it is marked for caching.
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

from juryflow.maths.names import did_you_mean
from juryflow.maths.records import VERDICT_THRESHOLD, OutputKind

# \r: a prompt file keeps its line ends as written (its hash is the file's), CRLF included.
OPTIONAL_DEFAULTS: dict[str, str] = {"rubric": ""}
"""The optional slots (see ``storage.datasets.OPTIONAL_VARIABLES``) and their value when
neither the item nor the template gives one."""

_SLOT_LINE = re.compile(r"^[ \t]*\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}[ \t\r]*$", re.MULTILINE)

SPLIT_LINE = "{{-- per item --}}"
"""Alone on its line, ends a template's static part (sent first and cached)."""
_SPLIT = re.compile(r"^[ \t]*\{\{--[ \t]*per item[ \t]*--\}\}[ \t\r]*(?:\n|\Z)", re.MULTILINE)


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
    defaults: tuple[tuple[str, str], ...] = ()
    """Values of the optional slots an item may lack (``rubric``): the catalogue's
    ``defaults``, else empty text."""

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

    @property
    def static_text(self) -> str:
        """The part above the ``{{-- per item --}}`` line, the same for every item; empty
        for a template without that line (everything is per item, nothing is cached)."""
        return split_template(self.text)[0]

    def enclosing_tags(self) -> dict[str, str]:
        """Slots that sit between ``<tag>`` and ``</tag>`` lines, mapped to that tag."""
        return dict(_enclosing_tags(split_template(self.text)[1]))

    def render(self, values: dict[str, str]) -> str:
        """The whole prompt as the model reads it: the static part, then the item's part
        (the split line itself is not sent)."""
        static, per_item = self.render_parts(values)
        return static + per_item

    def render_parts(self, values: dict[str, str]) -> tuple[str, str]:
        """``(static, per_item)``: the part sent first and cached, the same for every item
        (empty without a split line), and the part holding the item's values."""
        static, body = split_template(self.text)
        return static, self._fill(body, values)

    def _fill(self, body: str, values: dict[str, str]) -> str:
        values = {**OPTIONAL_DEFAULTS, **dict(self.defaults), **values}
        missing = [v for v in self.variables if v not in values]
        if missing:
            raise PromptError(
                f"prompt {self.ref} needs variable(s) {', '.join(missing)}; map them to "
                "dataset columns with --map VAR=COLUMN"
            )
        tags = _enclosing_tags(body)

        def substitute(match: re.Match[str]) -> str:
            name = match.group(1)
            value = values[name]
            tag = tags.get(name)
            if tag is not None:
                value = _neutralise_tag(value, tag)
            return value

        return _SLOT_LINE.sub(lambda m: substitute(m), body)


@functools.lru_cache(maxsize=128)
def split_template(text: str) -> tuple[str, str]:
    """``(static, per_item)`` template text around the ``{{-- per item --}}`` line: the
    static part ends with the line before it; ``("", text)`` without one."""
    match = _SPLIT.search(text)
    if match is None:
        return "", text
    return text[: match.start()], text[match.end() :]


def check_split(text: str, where: str) -> None:
    """Raise PromptError when ``text``'s split line cannot mean what it says: there is more
    than one, or a slot sits above it (that part is sent unchanged for every item)."""
    count = len(_SPLIT.findall(text))
    if count > 1:
        raise PromptError(f"{where} has {count} '{SPLIT_LINE}' lines; keep one")
    static, _ = split_template(text)
    above = slots_of(static)
    if above:
        raise PromptError(
            f"{where}: {{{{ {above[0]} }}}} sits above the '{SPLIT_LINE}' line, in the part "
            "sent unchanged for every item; move it below that line"
        )


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


def _files(entry: dict[str, Any]) -> dict[int, str]:
    """A catalogue entry's template files by version: ``versions`` when it lists several,
    else its one ``file`` at ``version``."""
    versions = entry.get("versions")
    if isinstance(versions, dict):
        return {int(v): str(f) for v, f in versions.items()}
    return {int(entry["version"]): str(entry["file"])}


def load_template(name: str) -> PromptTemplate:
    """The template called ``name``: a catalogue key (its current ``version``), or
    ``name@vN`` for version N."""
    base, _, version = name.partition("@v")
    entry = _catalog().get(base)
    if entry is None:
        names = template_names()
        raise PromptError(
            f"unknown prompt {name!r}{did_you_mean(base, names)}; known prompts: {', '.join(names)}"
        )
    files = _files(entry)
    if version and (not version.isdigit() or int(version) not in files):
        known = ", ".join(f"v{v}" for v in sorted(files))
        raise PromptError(f"prompt {base} has version(s) {known}, not v{version}")
    return _load(base, int(version) if version else int(entry["version"]))


@cache
def _load(base: str, version: int) -> PromptTemplate:
    entry = _catalog()[base]
    templates = resources.files("juryflow.prompts").joinpath("templates")
    text = templates.joinpath(_files(entry)[version]).read_text("utf-8")
    template = PromptTemplate(
        name=base,
        version=version,
        text=text,
        output_kind=entry["output"],
        variables=tuple(entry["variables"]),
        span_variable=entry.get("span_variable"),
        description=str(entry.get("description", "")),
        verdict_threshold=float(entry.get("verdict_threshold", VERDICT_THRESHOLD)),
        defaults=tuple((str(k), str(v)) for k, v in (entry.get("defaults") or {}).items()),
    )
    slots = set(slots_of(text))
    if slots != set(template.variables):
        raise PromptError(
            f"prompt {base}: catalogue declares {sorted(template.variables)} "
            f"but the template's slots are {sorted(slots)}"
        )
    check_split(text, f"prompt {template.ref}")
    return template
