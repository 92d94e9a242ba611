#!/usr/bin/env bash
# Set up .venv (if needed) and judge the bundled RAGTruth sample with the offline panel.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
export PREFECT_HOME="${PREFECT_HOME:-$PWD/.venv/prefect-home}"
.venv/bin/juryflow run "$@"
