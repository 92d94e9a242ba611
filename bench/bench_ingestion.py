"""Streamed, typed ingestion of a large dataset with bad rows at 10 %, 50 % and 99 %.

Usage: python bench/bench_ingestion.py [--rows 1000000] [--mode read|cli|both]
                                       [--chunk-size 5000] [--panel PANEL.yaml]
                                       [--kill-after SECONDS]

Generates a JSONL file of short synthetic rows (one numeric id in it, so a column no longer
has one type) with three bad rows: broken JSON at 10 %, a list where the response text
belongs at 50 %, gold ``labels`` of ``7`` at 99 %. Then:

- ``read``: ``read_items`` over the whole file in a child process: elapsed time, rows/s, the
  child's peak RSS, and the row errors with their line numbers;
- ``cli``: ``juryflow run DATASET --db TMP --chunk-size N`` (the embedded offline panel
  unless ``--panel``) in its own process group, then ``juryflow run --resume RUN``. With
  ``--kill-after S`` the first run is killed (SIGKILL, whole group: a crash) after S seconds
  and the resume finishes it; without, the resume re-reads a finished run. Printed per run:
  wall time, the juryflow process's peak RSS (VmHWM), its "N rejected rows" lines; then the
  store's row_errors and item count.

Exits 0 whether or not the targets (three row errors with the right line numbers, every
good row stored once) are met; it says which.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common
from bench_memory import status_kb, tree

JURYFLOW = Path(sys.executable).with_name("juryflow")
NEEDED = ["reference", "response"]


def bad_lines(rows: int) -> dict[int, bytes]:
    def line(fraction: float) -> int:
        return max(1, min(rows, round(rows * fraction)))

    return {
        line(0.10): b'{"id": "broken", "reference": "r", "response": ',
        line(0.50): json.dumps({"id": "listy", "reference": "r", "response": ["a", "b"]}).encode(),
        line(0.99): json.dumps(
            {"id": "labels7", "reference": "r", "response": "ok", "labels": 7}
        ).encode(),
    }


def generate(path: Path, rows: int) -> dict[int, bytes]:
    bad = bad_lines(rows)
    with path.open("wb") as out:
        for number in range(1, rows + 1):
            line = bad.get(number)
            if line is None:
                cafe = number % 97
                row: dict[str, Any] = {
                    # one number among string ids: the column is no longer of one type
                    "id": number if number == 2 else f"r{number}",
                    "reference": f"Cafe {cafe} on Main Street opens at 9 and has free WiFi.",
                    "response": f"Cafe {cafe} on Main Street opens at {9 + number % 3} and "
                    "has free WiFi.",
                }
                line = json.dumps(row).encode()
            out.write(line + b"\n")
    return bad


def read_child(dataset: str) -> None:
    """The ``read`` mode's child: stream the file, print one JSON line of figures."""
    sys.path.insert(0, str(_common.REPO))
    from juryflow.storage.datasets import RowError, read_items

    started = time.perf_counter()
    items = 0
    errors: list[tuple[int, str]] = []
    for row in read_items(dataset, NEEDED):
        if isinstance(row, RowError):
            errors.append((row.row_number, row.error))
        else:
            items += 1
    elapsed = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"items": items, "errors": errors, "elapsed": elapsed, "peak_mb": peak_mb}))


def measure_read(dataset: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--read-child", str(dataset)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run_juryflow(
    command: list[str], env: dict[str, str], kill_after: float | None
) -> dict[str, Any]:
    started = time.perf_counter()
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    peak_kb = 0
    killed = False
    output: list[bytes] = []
    assert process.stdout is not None
    os.set_blocking(process.stdout.fileno(), False)
    while process.poll() is None:
        peak_kb = max(peak_kb, status_kb(process.pid, "VmHWM") or 0)
        with contextlib.suppress(BlockingIOError, TypeError):
            chunk = process.stdout.read()
            if chunk:
                output.append(chunk)
        if kill_after is not None and time.perf_counter() - started > kill_after:
            # The whole group, Prefect's API server included: what a crash leaves behind.
            pids = tree(process.pid)
            os.killpg(process.pid, signal.SIGKILL)
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            process.wait()
            killed = True
            break
        time.sleep(0.5)
    os.set_blocking(process.stdout.fileno(), True)
    output.append(process.stdout.read() or b"")
    text = b"".join(output).decode(errors="replace")
    return {
        "wall": time.perf_counter() - started,
        "peak_mb": peak_kb / 1024,
        "returncode": process.returncode,
        "killed": killed,
        "output": text,
    }


def store_figures(db: Path) -> dict[str, Any]:
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        runs = con.execute("SELECT run_id, status FROM runs").fetchall()
        errors = con.execute(
            "SELECT row_number, error FROM row_errors ORDER BY row_number"
        ).fetchall()
        items = con.execute("SELECT count(*), count(DISTINCT item_id) FROM items").fetchone()
        id2 = con.execute("SELECT item_id FROM items WHERE row_number = 2").fetchall()
    finally:
        con.close()
    return {"runs": runs, "errors": errors, "items": items, "id2": id2}


def show_run(label: str, run: dict[str, Any]) -> None:
    state = "killed" if run["killed"] else f"exit {run['returncode']}"
    print(f"{label}: {run['wall']:.1f} s wall ({state}); juryflow peak RSS {run['peak_mb']:.0f} MB")
    summary = [
        line.strip()
        for line in run["output"].splitlines()
        if "rejected rows" in line or line.strip().startswith("line ") or "error" in line
    ]
    for line in summary[:8]:
        print(f"    {line}")
    if run["returncode"] not in (0, None) and not run["killed"]:
        print("    output tail:\n" + run["output"][-2000:])


def measure_cli(
    dataset: Path,
    tmp: Path,
    rows: int,
    chunk_size: int,
    panel: str | None,
    kill_after: float | None,
) -> None:
    env = dict(os.environ)
    home = tmp / "prefect-home"
    home.mkdir(exist_ok=True)
    env.update(
        PREFECT_HOME=str(home),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="180",
        COLUMNS="160",
    )
    db = tmp / "ingestion.duckdb"
    command = [str(JURYFLOW), "run", str(dataset), "--db", str(db), "--chunk-size", str(chunk_size)]
    if panel:
        command += ["--panel", panel]
    first = run_juryflow(command, env, kill_after)
    show_run("first run", first)
    figures = store_figures(db)
    if not figures["runs"]:
        print("no run was recorded; nothing to resume")
        return
    run_id = figures["runs"][0][0]
    print(f"    store after it: {figures['items'][0]:,} items, run status {figures['runs'][0][1]}")
    resumed = run_juryflow(
        [str(JURYFLOW), "run", "--resume", run_id, "--db", str(db)], env, kill_after=None
    )
    show_run("resume", resumed)
    figures = store_figures(db)
    expected = sorted(bad_lines(rows))
    lines = [number for number, _ in figures["errors"]]
    count, distinct = figures["items"]
    print(f"row errors in the store: {', '.join(f'line {n:,}' for n, _ in figures['errors'])}")
    for number, error in figures["errors"]:
        print(f"    line {number:,}: {error}")
    print(
        f"items stored: {count:,} ({distinct:,} distinct; {rows - len(expected):,} expected); "
        f"item at line 2 stored as {figures['id2'][0][0] if figures['id2'] else None!r}"
    )
    met = lines == expected and count == distinct == rows - len(expected)
    print(
        f"target (3 row errors at lines {expected}, every good row once): "
        f"{'met' if met else 'MISSED'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--mode", choices=("read", "cli", "both"), default="both")
    parser.add_argument("--chunk-size", type=int, default=5000)
    parser.add_argument("--panel", default=None, help="panel file (default: offline panel)")
    parser.add_argument("--kill-after", type=float, default=None)
    parser.add_argument("--read-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.read_child:
        read_child(args.read_child)
        return
    print(f"ingestion of {args.rows:,} rows; {_common.machine()}")
    with _common.temp_dir("bench-ingestion-") as tmp_name:
        tmp = Path(tmp_name)
        dataset = tmp / "items.jsonl"
        started = time.perf_counter()
        bad = generate(dataset, args.rows)
        size_mb = dataset.stat().st_size / 1e6
        print(
            f"generated {dataset.name}: {size_mb:,.0f} MB in {time.perf_counter() - started:.1f} s;"
            f" bad rows at lines {', '.join(f'{n:,}' for n in sorted(bad))}"
        )
        if args.mode in ("read", "both"):
            read = measure_read(dataset)
            print(
                f"read_items: {read['items']:,} items + {len(read['errors'])} row errors in "
                f"{read['elapsed']:.1f} s ({args.rows / read['elapsed']:,.0f} rows/s, "
                f"{size_mb / read['elapsed']:.0f} MB/s); peak RSS {read['peak_mb']:.0f} MB"
            )
            for number, error in read["errors"]:
                print(f"    line {number:,}: {error}")
            ok = [n for n, _ in read["errors"]] == sorted(bad)
            print(f"read target (row errors at exactly the bad lines): {'met' if ok else 'MISSED'}")
        if args.mode in ("cli", "both"):
            measure_cli(dataset, tmp, args.rows, args.chunk_size, args.panel, args.kill_after)


if __name__ == "__main__":
    main()
