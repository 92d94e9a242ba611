#!/usr/bin/env bash
# Set up .venv (if needed) and judge the bundled RAGTruth sample with the offline panel.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
export PREFECT_HOME="${PREFECT_HOME:-$PWD/.venv/prefect-home}"
.venv/bin/juryflow run "$@"
