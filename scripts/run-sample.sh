#!/usr/bin/env bash
# Set up .venv (if needed) and judge the bundled RAGTruth sample with the offline panel.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
# pip's own chatter goes to a log, shown only if the install fails.
if ! { .venv/bin/python -m pip install --upgrade pip \
       && .venv/bin/python -m pip install -c constraints.txt -e .; } > .venv/install.log 2>&1; then
  cat .venv/install.log >&2
  echo "installing juryflow failed; the log above says why" >&2
  exit 1
fi
export PREFECT_HOME="${PREFECT_HOME:-$PWD/.venv/prefect-home}"
.venv/bin/juryflow run "$@"
