"""The user's cache folder: what one run learns of an endpoint, for the next run to use.

``$JURYFLOW_CACHE_DIR``, else ``$XDG_CACHE_HOME/juryflow``, else ``~/.cache/juryflow``.
Each file is one JSON object with a ``format`` number; a file of another format, or one
that cannot be read, counts as empty (the run learns again), and a file that cannot be
written is left as it is (a read-only home costs only what the cache would have saved).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

CACHE_DIR_ENV = "JURYFLOW_CACHE_DIR"


def cache_dir() -> Path:
    chosen = os.environ.get(CACHE_DIR_ENV)
    if chosen:
        return Path(chosen)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "juryflow"


def read_cache_file(name: str, format_: int) -> dict[str, Any]:
    """The object in ``name``, or {} when there is none of this format."""
    try:
        data = json.loads((cache_dir() / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and data.get("format") == format_ else {}


def write_cache_file(name: str, format_: int, data: dict[str, Any]) -> None:
    """Replace ``name`` with ``data`` (and its format), whole: a run reading it meanwhile
    sees the old file or the new one."""
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            "w", dir=folder, prefix=".juryflow-", suffix=".json", delete=False, encoding="utf-8"
        ) as out:
            json.dump({**data, "format": format_}, out)
        os.replace(out.name, folder / name)
    except OSError:
        return
