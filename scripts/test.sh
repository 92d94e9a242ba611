#!/usr/bin/env bash
# Set up .venv (if needed) and run the whole test suite, lint and type checks included.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[dev]"
export PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=180
export PREFECT_HOME="${PREFECT_HOME:-$PWD/.venv/prefect-home}"
.venv/bin/ruff check .
.venv/bin/mypy
.venv/bin/python -m pytest -q
