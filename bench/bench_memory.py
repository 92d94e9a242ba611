"""Peak RSS of `juryflow run` by dataset size (target <= 500 MB for the whole tree, and flat).

Usage: python bench/bench_memory.py [--sizes 10000,50000,100000] [--panel offline|stub|PANEL.yaml]
                                    [--prefect ephemeral|server|both]

For each size, a JSONL dataset (the bundled sample cycled, unique ids) is judged by
``juryflow run DATASET --db TMP`` in a subprocess with its own PREFECT_HOME. Panels:

- ``offline`` (default): the embedded offline panel (~10 ms of detector CPU per item:
  100,000 items took ~35 minutes on a loaded 2-core machine);
- ``stub``: three LLM judges (16 concurrent calls each) on the stand-in server at 0 ms in
  its own process, with ``--no-cache``: the whole pipeline at a few hundred items per second;
- a panel file.

Prefect: ``ephemeral`` (no PREFECT_API_URL: the run starts its own API server, a child
process, so it is in the tree), ``server`` (``prefect server start --background`` once,
PREFECT_API_URL pointing at it: outside the tree, its RSS printed apart), or ``both``.

Figures per size:

- peak RSS of the ``juryflow`` process itself: its ``VmHWM`` (the kernel's high-water mark)
  read from /proc while it runs (the last reading is taken within 0.2 s of its exit);
- ``/usr/bin/time -v``'s "Maximum resident set size": the largest single process of the
  tree, which may be Prefect's ephemeral API server subprocess rather than juryflow;
- the peak of the whole tree's summed RSS (juryflow and its children: the ephemeral
  Prefect server), sampled every 0.2 s.

The target is on the whole tree: <= 500 MB at the largest size, and flat: the growth from
the smallest to the largest size is printed per 10,000 items.
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


def prefect_env(home: Path) -> dict[str, str]:
    """This process's environment with Prefect offline and quiet in its own ``home``."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    env.update(
        PREFECT_HOME=str(home),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="180",
    )
    env[_common.KEY_ENV] = _common.FAKE_KEY
    return env


def measure(
    dataset: Path,
    panel: Path | None,
    tmp: Path,
    env: dict[str, str],
    extra: list[str],
    server_pid: int | None = None,
) -> dict[str, Any]:
    """One ``juryflow run`` of ``dataset``; ``env`` has PREFECT_API_URL for a running
    server (``server_pid``, outside the tree, sampled apart)."""
    db = tmp / f"{dataset.stem}.duckdb"
    command = [str(JURYFLOW), "run", str(dataset), "--db", str(db), *extra]
    if panel:
        command += ["--panel", str(panel)]
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
    own_peak = tree_peak = server_peak = 0
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
            # juryflow and its children (not /usr/bin/time, a few MB of its own)
            rss = sum(status_kb(p, "VmRSS") or 0 for p in tree(juryflow_pid))
            tree_peak = max(tree_peak, rss)
        if server_pid is not None:
            rss = sum(status_kb(p, "VmRSS") or 0 for p in tree(server_pid))
            server_peak = max(server_peak, rss)
        time.sleep(0.2)
    wall = time.perf_counter() - started
    stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
    if process.returncode != 0:
        raise RuntimeError(f"juryflow run failed ({process.returncode}):\n{stderr[-3000:]}")
    match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr)
    db.unlink(missing_ok=True)
    shutil.rmtree(db.parent / f"{db.name}.journal", ignore_errors=True)
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
        "tree_mb": max(tree_peak, own_peak) / 1024,
        "server_mb": server_peak / 1024 if server_pid is not None else None,
        "wall": wall,
    }


def report(size: int, result: dict[str, Any]) -> str:
    server = result["server_mb"]
    outside = "" if server is None else f"; running Prefect server (outside): {server:.0f} MB"
    return (
        f"{size:>7,} items: whole tree peak {result['tree_mb']:.0f} MB; juryflow process peak "
        f"{result['own_mb']:.0f} MB; /usr/bin/time max RSS {result['time_mb']:.0f} MB"
        f"{outside}; {result['wall']:.0f} s ({size / result['wall']:,.0f} items/s); juryflow "
        "peak so far at 25/50/75/100 % of the run: "
        f"{' / '.join(f'{q:.0f}' for q in result['quarters'])} MB"
    )


def verdict(label: str, sizes: list[int], results: dict[int, dict[str, Any]]) -> None:
    largest, smallest = results[sizes[-1]], results[sizes[0]]
    met = "met" if largest["tree_mb"] <= TARGET_MB else "MISSED"
    print(
        f"{label}: whole tree peak at {sizes[-1]:,} items: {largest['tree_mb']:.0f} MB "
        f"(target <= {TARGET_MB:.0f} MB: {met}); juryflow process {largest['own_mb']:.0f} MB"
    )
    if len(sizes) > 1:
        for key, what in (("tree_mb", "whole tree"), ("own_mb", "juryflow process")):
            change = largest[key] - smallest[key]
            growth = change / ((sizes[-1] - sizes[0]) / 10_000)
            flat = "flat" if abs(change) <= 0.1 * smallest[key] else "NOT flat"
            print(
                f"{label}: {what} growth {sizes[0]:,} -> {sizes[-1]:,} items: {change:+.0f} MB "
                f"({growth:+.1f} MB per 10,000 items; {flat}: within 10 % of the smallest "
                "run's peak)"
            )


def run_sizes(
    label: str,
    sizes: list[int],
    panel: Path | None,
    tmp: Path,
    env: dict[str, str],
    extra: list[str],
    server_pid: int | None = None,
) -> None:
    results: dict[int, dict[str, Any]] = {}
    for size in sizes:
        dataset = _common.synth_dataset(tmp / f"items-{size}.jsonl", size)
        results[size] = measure(dataset, panel, tmp, env, extra, server_pid)
        print(f"{label}: {report(size, results[size])}", flush=True)
        dataset.unlink()
    verdict(label, sizes, results)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--sizes", default="10000,50000,100000")
    parser.add_argument(
        "--panel",
        default="offline",
        help="offline (the embedded panel), stub (LLM judges on the stand-in) or a panel file",
    )
    parser.add_argument("--prefect", choices=("ephemeral", "server", "both"), default="ephemeral")
    parser.add_argument(
        "--chunk-size", type=int, default=None, help="juryflow's --chunk-size (default: its own)"
    )
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(_common.temp_dir("bench-memory-")))
        panel: Path | None = None
        extra: list[str] = []
        if args.panel == "stub":
            stub, base = _common.start_stub_process(0.0)
            stack.callback(stub.wait)
            stack.callback(stub.terminate)
            panel = _common.write_stub_panel(tmp / "panel.yaml", base, base + "/v1", 16)
            extra = ["--no-cache"]
        elif args.panel != "offline":
            panel = Path(args.panel).resolve()
        if args.chunk_size is not None:
            extra += ["--chunk-size", str(args.chunk_size)]
        name = {"offline": "embedded offline panel", "stub": "3 LLM judges on the stand-in"}
        print(f"juryflow run, {name.get(args.panel, args.panel)}; {_common.machine()}", flush=True)
        if args.prefect in ("server", "both"):
            env = prefect_env(tmp / "server-home")
            api, server_pid = stack.enter_context(_common.background_prefect_server(env))
            env["PREFECT_API_URL"] = api
            run_sizes("running Prefect server", sizes, panel, tmp, env, extra, server_pid)
        if args.prefect in ("ephemeral", "both"):
            env = prefect_env(tmp / "prefect-home")
            run_sizes("ephemeral Prefect", sizes, panel, tmp, env, extra)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
