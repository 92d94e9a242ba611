"""constraints.txt (issue 41, point 6): every distribution a fresh clone installs is pinned,
the install commands use it, and scripts/refresh-constraints.sh writes it again."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO

CONSTRAINTS = REPO / "constraints.txt"


def _name(requirement: str) -> str:
    return re.split(r"[<>=!\[ ;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _pinned(text: str) -> dict[str, str]:
    pins = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, release = line.partition("==")
            assert release, f"not pinned: {line!r}"
            pins[name.lower().replace("_", "-")] = release
    return pins


def test_every_declared_dependency_is_pinned() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["project"]
    declared = {_name(r) for r in project["dependencies"]}
    declared |= {_name(r) for extra in project["optional-dependencies"].values() for r in extra}
    pins = _pinned(CONSTRAINTS.read_text("utf-8"))
    assert declared - set(pins) == set()
    assert "juryflow" not in pins


def test_the_install_commands_use_it() -> None:
    install = (REPO / "scripts" / "install.sh").read_text("utf-8")
    assert "uv pip install" in install and "pip install -c constraints.txt -e" in install
    assert install.count("-c constraints.txt") == 3  # uv itself, then juryflow by uv or pip
    for script in ("scripts/test.sh", "scripts/run-sample.sh"):
        assert "bash scripts/install.sh" in (REPO / script).read_text("utf-8"), script


@pytest.mark.slow  # a fresh virtualenv and every distribution from the index: minutes
def test_the_refresh_script_writes_a_constraints_file(tmp_path: Path) -> None:
    output = tmp_path / "constraints.txt"
    done = subprocess.run(
        ["bash", "scripts/refresh-constraints.sh", str(output)],
        cwd=REPO, capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"wrote {output}: ")
    pins = _pinned(output.read_text("utf-8"))
    for name in ("prefect", "duckdb", "anthropic", "openai", "numpy"):
        assert name in pins
