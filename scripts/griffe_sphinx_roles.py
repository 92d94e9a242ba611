"""A griffe extension for the documentation site's Python API page (mkdocs.yml): the
docstrings' Sphinx roles, :func:`run` or :class:`~juryflow.api.Run`, shown as the code they
name (``run``, ``Run``) instead of as ":func: run"."""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|meth|class|mod|attr|data|exc|obj|const):`(~?)([^`]+)`")


def shown(match: re.Match[str]) -> str:
    """``name`` for :role:`~a.b.name`, ``a.b.name`` for :role:`a.b.name`."""
    short, target = match.group(1), match.group(2)
    return f"``{target.rsplit('.', 1)[-1] if short else target}``"


class SphinxRoles(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(shown, obj.docstring.value)
