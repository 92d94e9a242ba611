"""Peak RSS of `juryflow run` by dataset size, offline panel (target <= 500 MB and flat).

Usage: python bench/bench_memory.py [--sizes 10000,50000,100000] [--panel PANEL.yaml]

For each size, a JSONL dataset (the bundled sample cycled, unique ids) is judged by
``juryflow run DATASET --db TMP`` (the embedded offline panel unless ``--panel``) in a
subprocess with its own PREFECT_HOME. Figures per size:

- peak RSS of the ``juryflow`` process itself: its ``VmHWM`` (the kernel's high-water mark)
  read from /proc while it runs (the last reading is taken within 0.2 s of its exit);
- ``/usr/bin/time -v``'s "Maximum resident set size": the largest single process of the
  tree, which may be Prefect's ephemeral API server subprocess rather than juryflow;
- the peak of the whole tree's summed RSS (juryflow + Prefect's server), sampled.

The target is on the juryflow process: <= 500 MB at the largest size, and flat: the
growth from the smallest to the largest size is printed per 10,000 items.
At ~10 ms of detector CPU per item, 100,000 items took ~35 minutes on a loaded 2-core machine.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common

TARGET_MB = 500.0
JURYFLOW = Path(sys.executable).with_name("juryflow")


def status_kb(pid: int, field: str) -> int | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    match = re.search(rf"^{field}:\s+(\d+) kB", text, re.MULTILINE)
    return int(match.group(1)) if match else None


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants, from /proc/*/task/*/children."""
    found = [pid]
    for parent in found:
        for children in Path(f"/proc/{parent}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                found += [int(c) for c in children.read_text().split()]
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def measure(dataset: Path, panel: str | None, tmp: Path) -> dict[str, Any]:
    env = dict(os.environ)
    home = tmp / "prefect-home"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir()
    env.update(
        PREFECT_HOME=str(home),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="180",
    )
    db = tmp / f"{dataset.stem}.duckdb"
    command = [str(JURYFLOW), "run", str(dataset), "--db", str(db)]
    if panel:
        command += ["--panel", panel]
    gnu_time = Path("/usr/bin/time")
    if gnu_time.exists():
        command = [str(gnu_time), "-v", *command]
    started = time.perf_counter()
    process = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=tmp,
    )
    own_peak = tree_peak = 0
    samples: list[tuple[float, int]] = []  # (seconds since start, juryflow VmRSS kB)
    # Under /usr/bin/time, juryflow is its child; without it, juryflow is the process itself.
    juryflow_pid: int | None = None if gnu_time.exists() else process.pid
    while process.poll() is None:
        pids = tree(process.pid)
        if juryflow_pid is None:
            juryflow_pid = next(
                (p for p in pids if p != process.pid and "bin/juryflow run" in cmdline(p)), None
            )
        if juryflow_pid is not None:
            own_peak = max(own_peak, status_kb(juryflow_pid, "VmHWM") or 0)
            samples.append((time.perf_counter() - started, status_kb(juryflow_pid, "VmRSS") or 0))
        tree_peak = max(tree_peak, sum(status_kb(p, "VmRSS") or 0 for p in pids))
        time.sleep(0.2)
    wall = time.perf_counter() - started
    stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
    if process.returncode != 0:
        raise RuntimeError(f"juryflow run failed ({process.returncode}):\n{stderr[-3000:]}")
    match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr)
    db.unlink(missing_ok=True)
    # Peak so far at each quarter of the run: a run whose memory grows with the items read
    # climbs quarter by quarter; a flat one reaches its peak early and stays there.
    quarters = [
        max((rss for t, rss in samples if t <= q * wall), default=0) / 1024
        for q in (0.25, 0.5, 0.75, 1.0)
    ]
    return {
        "quarters": quarters,
        "own_mb": own_peak / 1024,
        "time_mb": int(match.group(1)) / 1024 if match else float("nan"),
        "tree_mb": tree_peak / 1024,
        "wall": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,50000,100000")
    parser.add_argument("--panel", default=None, help="panel file (default: offline panel)")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    print(f"juryflow run, {args.panel or 'embedded offline panel'}; {_common.machine()}")
    results: dict[int, dict[str, Any]] = {}
    with _common.temp_dir("bench-memory-") as tmp_name:
        tmp = Path(tmp_name)
        for size in sizes:
            dataset = _common.synth_dataset(tmp / f"items-{size}.jsonl", size)
            result = measure(dataset, args.panel, tmp)
            results[size] = result
            print(
                f"{size:>7,} items: juryflow peak RSS {result['own_mb']:.0f} MB; "
                f"/usr/bin/time max RSS {result['time_mb']:.0f} MB; process tree peak "
                f"{result['tree_mb']:.0f} MB; {result['wall']:.0f} s "
                f"({size / result['wall']:,.0f} items/s); juryflow peak so far at 25/50/75/100 % "
                f"of the run: {' / '.join(f'{q:.0f}' for q in result['quarters'])} MB",
                flush=True,
            )
            dataset.unlink()
    largest, smallest = results[sizes[-1]], results[sizes[0]]
    met = "met" if largest["own_mb"] <= TARGET_MB else "MISSED"
    print(
        f"peak RSS at {sizes[-1]:,} items: {largest['own_mb']:.0f} MB "
        f"(target <= {TARGET_MB:.0f} MB: {met})"
    )
    if len(sizes) > 1:
        growth = (largest["own_mb"] - smallest["own_mb"]) / ((sizes[-1] - sizes[0]) / 10_000)
        change = abs(largest["own_mb"] - smallest["own_mb"])
        flat = "flat" if change <= 0.1 * smallest["own_mb"] else "NOT flat"
        print(
            f"growth {sizes[0]:,} -> {sizes[-1]:,} items: "
            f"{largest['own_mb'] - smallest['own_mb']:+.0f} MB ({growth:+.1f} MB per 10,000 "
            f"items; {flat}: within 10 % of the smallest run's peak)"
        )


if __name__ == "__main__":
    main()
