"""Seconds to a first result (issue 43, point 1): `juryflow run --limit 5` on the bundled
sample, timed from the command's start to its exit, twice in a row, with each command's
own private Prefect server (``JURYFLOW_SERVER=ephemeral``, the old way) and with the one
background server the commands share (``JURYFLOW_SERVER=background``: the first command
starts it, the second finds it running).

Each mode gets a fresh PREFECT_HOME and no PREFECT_API_URL; the background server is
stopped at the end. Targets (issue 43): the second command ≤ 5 s, the first ≤ 20 s, on an
idle 2-core machine.

    .venv/bin/python bench/bench_first_result.py [--repeat N] [--juryflow PATH]

``--juryflow`` times another installation's command, e.g. the one a new user has after
``bash scripts/install.sh`` (no pandas: DuckDB imports pandas, when it is installed, at a
process's first bound parameter, about 0.4 s; the dev install has it for the tests). The
commands run as in a user's shell: Python writes its bytecode caches (this sandbox sets
PYTHONDONTWRITEBYTECODE, which would compile every juryflow module at every command).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import machine, temp_dir

JURYFLOW = str(Path(sys.executable).with_name("juryflow"))


def _has_pandas(juryflow: str) -> bool:
    python = Path(juryflow).with_name("python")
    found = subprocess.run(
        [str(python), "-c", "import importlib.util as u; print(u.find_spec('pandas') is not None)"],
        capture_output=True,
        text=True,
        check=False,
    )
    return found.stdout.strip() == "True"


def _command(juryflow: str, env: dict[str, str], db: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [juryflow, "run", "--limit", "5", "--db", str(db)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"juryflow run failed ({done.returncode}): {done.stderr[-800:]}")
    return seconds


def _pair(juryflow: str, mode: str, tmp: Path) -> tuple[float, float]:
    dropped = ("PREFECT_API_URL", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(PREFECT_HOME=str(tmp / f"home-{mode}"), JURYFLOW_SERVER=mode)
    try:
        first = _command(juryflow, env, tmp / f"{mode}-1.duckdb")
        return first, _command(juryflow, env, tmp / f"{mode}-2.duckdb")
    finally:
        subprocess.run([juryflow, "server", "stop"], env=env, capture_output=True, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--juryflow", default=JURYFLOW, help="the juryflow command to time")
    args = parser.parse_args()
    print(machine())
    print(f"command: {args.juryflow} (pandas installed beside it: {_has_pandas(args.juryflow)})")
    results: dict[str, list[tuple[float, float]]] = {"ephemeral": [], "background": []}
    with temp_dir("jf-first-") as name:
        for k in range(args.repeat):
            for mode in results:
                tmp = Path(name) / f"r{k}"
                tmp.mkdir(exist_ok=True)
                results[mode].append(_pair(args.juryflow, mode, tmp))
    print("| Prefect server | first command, median (min-max) | second command | target |")
    print("|---|---|---|---|")
    for mode, pairs in results.items():
        cells = []
        for which in (0, 1):
            values = [p[which] for p in pairs]
            cells.append(f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})")
        target = "first ≤ 20 s, second ≤ 5 s" if mode == "background" else ""
        print(f"| {mode} | {cells[0]} | {cells[1]} | {target} |")


if __name__ == "__main__":
    main()
