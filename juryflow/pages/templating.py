"""The one Jinja environment the viewer and the static report render with.

Autoescaping is on for every template, so every value from the data renders as text; a
template that needs markup gets it from a function returning :class:`markupsafe.Markup`.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from juryflow.maths.pairwise.records import PREFERENCE_WORDS

# Resolved, so that an editable install (which links each file) finds templates added since.
PACKAGE_DIR = Path(__file__).resolve().parent
TEMPLATES_DIR = PACKAGE_DIR / "templates"


@cache
def environment() -> Environment:
    made = Environment(
        loader=FileSystemLoader(TEMPLATES_DIR),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    made.globals["preference_words"] = {score: words for _, score, words in PREFERENCE_WORDS}
    return made
