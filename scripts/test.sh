#!/usr/bin/env bash
# Set up .venv (if needed), then ruff, mypy, the layer contracts, the documentation site and
# every test but the long ones marked `slow`: what CI runs. `bash scripts/test.sh --slow`
# runs those alone (pytest's options may follow it).
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-}"
case "$mode" in
  "") selection=(-m "not slow") ;;
  --slow) selection=(-m slow); shift ;;
  *) echo "usage: bash scripts/test.sh [--slow [PYTEST_OPTION ...]]  (--slow: only the long" \
       "end-to-end tests, which CI leaves out)" >&2
     exit 2 ;;
esac
bash scripts/install.sh ".[dev]"
# Byte-compile the checkout once (the symlinked folders too): where PYTHONDONTWRITEBYTECODE
# is set, as in many containers, every `juryflow` process the tests start would otherwise
# compile its modules again (~0.2 s of CPU each).
.venv/bin/python -m compileall -q juryflow $(find juryflow -maxdepth 1 -type l) > /dev/null
export PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=180
export PREFECT_HOME="${PREFECT_HOME:-$PWD/.venv/prefect-home}"
if [ -z "$mode" ]; then
  .venv/bin/ruff check .
  .venv/bin/mypy
  # the layers of ARCHITECTURE.md: an import that breaks one fails here
  .venv/bin/lint-imports
  # the documentation site: a broken link, a missing page or a bad reference fails here
  # (its output only then); built outside the checkout
  site_dir="$(mktemp -d)"
  if ! NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir "$site_dir" \
       > "$site_dir.log" 2>&1; then
    cat "$site_dir.log" >&2
    echo "mkdocs build --strict failed; the log above says why" >&2
    rm -rf "$site_dir" "$site_dir.log"
    exit 1
  fi
  rm -rf "$site_dir" "$site_dir.log"
fi
# Three test processes on two cores: most tests wait on a server, a stand-in or a child
# process rather than compute. Each has its own Prefect server for the `juryflow` processes
# its tests start (tests/conftest.py). The slowest tests are listed, for whoever makes the
# suite faster.
# pytest keeps the test modules it rewrites for their assertions only where bytecode may be
# written: with PYTHONDONTWRITEBYTECODE set, every test process rewrote all of them again
# (~15 s of CPU each).
env -u PYTHONDONTWRITEBYTECODE \
  .venv/bin/python -m pytest -q -n 3 --dist loadfile --durations=25 "${selection[@]}" "$@"
