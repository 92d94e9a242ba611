#!/usr/bin/env bash
# Set up .venv with juryflow (editable) at the versions constraints.txt pins:
#   bash scripts/install.sh [TARGET]   (TARGET: "." by default; ".[dev]" for the tests)
# uv installs them when it can be had (about 10 s for the dev extra, against about 2.5 min
# for pip on 2 cores); else pip does, with the same constraints. Its chatter goes to
# .venv/install.log, shown only if the install fails.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-.}"
python3 -m venv .venv
find_links=()
if [ -n "${PIP_FIND_LINKS:-}" ]; then find_links=(--find-links "$PIP_FIND_LINKS"); fi
if ! {
  { .venv/bin/python -m pip install -c constraints.txt uv \
      && .venv/bin/uv pip install --python .venv/bin/python "${find_links[@]}" \
           -c constraints.txt -e "$target"; } \
  || { .venv/bin/python -m pip install --upgrade pip \
      && .venv/bin/python -m pip install -c constraints.txt -e "$target"; }
} > .venv/install.log 2>&1; then
  cat .venv/install.log >&2
  echo "installing juryflow failed; the log above says why" >&2
  exit 1
fi
