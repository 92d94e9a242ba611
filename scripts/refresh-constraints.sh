#!/usr/bin/env bash
# Write constraints.txt again from what pip resolves today for juryflow with every extra:
# install into a scratch virtualenv with no constraints, then freeze it. Review the diff,
# run the tests and the benches on the new versions, and commit both together.
#   bash scripts/refresh-constraints.sh [OUTPUT]   (default: constraints.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
output="${1:-constraints.txt}"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
python3 -m venv "$scratch/venv"
if ! { "$scratch/venv/bin/python" -m pip install --upgrade pip \
       && "$scratch/venv/bin/python" -m pip install uv ".[dev,lake,pandas,dask]"; } \
     > "$scratch/install.log" 2>&1; then
  cat "$scratch/install.log" >&2
  echo "installing juryflow failed; the log above says why" >&2
  exit 1
fi
{
  echo "# The versions a fresh clone installs (pip install -c constraints.txt ...): the ones every"
  echo "# figure in docs/benchmarks.md since 2026-11-29 was measured with. Written by"
  echo "# scripts/refresh-constraints.sh; Python $("$scratch/venv/bin/python" -c 'import platform; print(platform.python_version())')."
  "$scratch/venv/bin/python" -m pip freeze | grep -v -e '^juryflow[ =@]' -e '^#'
} > "$output"
echo "wrote $output: $(grep -c '==' "$output") pinned distributions"
