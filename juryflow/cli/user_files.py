"""What the command line takes from the folder it runs in: ``.env`` and ``panel.yaml``.

- ``.env``: API keys and settings (``ANTHROPIC_API_KEY=...``, ``JURYFLOW_DB=...``), read with
  python-dotenv as most tools do; a variable the environment sets already wins.
- ``panel.yaml``: the panel of `juryflow run` when no ``--panel`` is given (``juryflow init``
  writes one); the run says it took it.
"""

from __future__ import annotations

from pathlib import Path

ENV_FILE = ".env"
PANEL_FILE = "panel.yaml"


def load_env_file(folder: Path | None = None) -> str | None:
    """Set the variables of ``folder/.env`` (default: the current folder) that are not set
    yet; a warning when the file is there but cannot be read, else None."""
    from dotenv import load_dotenv

    path = (folder or Path.cwd()) / ENV_FILE
    try:
        load_dotenv(path, override=False)
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        return f"{path} was not read ({reason}); fix it or remove it"
    return None


def default_panel(given: str | None, resume: str | None) -> tuple[str | None, str | None]:
    """The panel a run uses, and a line saying so when it is this folder's ``panel.yaml``.

    A resumed run keeps the panel it started with, so only a new run looks for the file."""
    if given is not None or resume is not None:
        return given, None
    if not Path(PANEL_FILE).is_file():
        return None, None
    return PANEL_FILE, f"panel {PANEL_FILE} from this folder (no --panel given)"
