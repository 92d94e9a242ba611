"""Start-up: seconds from typing ``juryflow run`` to its first model call, two ways.

1. **running server**: ``prefect server start --background`` once, then every run with
   ``PREFECT_API_URL`` pointing at it (what the README recommends for repeated use);
2. **ephemeral**: no ``PREFECT_API_URL``, so each run starts (and stops) its own Prefect
   server, as a bare ``juryflow run`` does.

Each run is the real command in a subprocess: a one-item dataset, one LLM judge on the
in-process stand-in (``juryflow.standin.server`` on a thread here, 0 ms latency), a
fresh store, ``--no-cache``. "first call" is the time from ``Popen`` to the stand-in
receiving the first model request; "exit" is the time to the process ending.

Then, with the ephemeral server, a run is killed with SIGKILL right after its first call
(its stand-in answers after 30 s, so it is mid-run) and the processes it started are
counted 2 s later: none may outlive it.

Run: ``.venv/bin/python bench/bench_startup.py [--repeat 5]``. Not run by tests.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil
from _common import (
    KEY_ENV,
    REPO,
    free_port,
    machine,
    prefect_env,
    synth_dataset,
    temp_dir,
    wait_healthy,
)

from juryflow.standin.server import StubConfig, StubHandle, running_stub_server

PREFECT = str(Path(sys.executable).with_name("prefect"))
MODES: tuple[tuple[str, dict[str, str]], ...] = (
    ("running server", {"PREFECT_API_URL": "{api}"}),
    ("ephemeral", {}),
)


def write_panel(path: Path, stub: StubHandle) -> Path:
    path.write_text(
        "name: startup\njudges:\n"
        "  - {id: claude, provider: anthropic, model: stub-spans-good, prompt: data2txt_spans,"
        f' base_url: "{stub.anthropic_base_url}", api_key_env: {KEY_ENV}}}\n',
        encoding="utf-8",
    )
    return path


def start_run(env: dict[str, str], dataset: Path, panel: Path, db: Path) -> subprocess.Popen[str]:
    """``juryflow run DATASET --panel PANEL --db DB --no-cache`` in a subprocess."""
    command = [sys.executable, "-m", "juryflow", "run", str(dataset), "--panel", str(panel)]
    return subprocess.Popen(
        [*command, "--db", str(db), "--no-cache"],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def timed_run(
    env: dict[str, str], stub: StubHandle, dataset: Path, panel: Path, db: Path
) -> tuple[float, float]:
    """(seconds to the first model call, seconds to exit) of one ``juryflow run``."""
    before = stub.stats.requests()
    start = time.perf_counter()
    process = start_run(env, dataset, panel, db)
    first = float("nan")
    while process.poll() is None:
        if first != first and stub.stats.requests() > before:
            first = time.perf_counter() - start
        time.sleep(0.002)
    ended = time.perf_counter() - start
    if process.returncode != 0:
        raise RuntimeError(f"juryflow run exited {process.returncode}: {process.stderr.read()}")
    if first != first and stub.stats.requests() > before:
        first = ended  # the call and the exit fell in the same poll interval
    return first, ended


def killed_run_leftovers(env: dict[str, str], dataset: Path, panel: Path, db: Path) -> int:
    """Processes a SIGKILLed ``juryflow run`` (mid-run, ephemeral server) leaves behind."""
    config = StubConfig(latency_ms=30_000)
    with running_stub_server(config) as slow:
        process = start_run(env, dataset, write_panel(panel, slow), db)
        while slow.stats.requests() == 0 and process.poll() is None:
            time.sleep(0.01)
        started = psutil.Process(process.pid).children(recursive=True)
        process.send_signal(signal.SIGKILL)
        process.communicate()
        time.sleep(2.0)
        return sum(1 for child in started if child.is_running() and child.status() != "zombie")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    with temp_dir("juryflow-startup-") as tmp_name:
        tmp = Path(tmp_name)
        prefect_env(tmp)
        dataset = synth_dataset(tmp / "one.jsonl", 1)
        env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        results: dict[str, list[tuple[float, float]]] = {"running server": [], "ephemeral": []}
        port = free_port()
        api = f"http://127.0.0.1:{port}/api"
        server_env = {**env, "PREFECT_SERVER_API_PORT": str(port)}
        subprocess.run(
            [PREFECT, "server", "start", "--background"],
            env=server_env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        try:
            print(f"prefect server start --background: healthy after {wait_healthy(api):.1f} s")
            with running_stub_server() as stub:
                panel = write_panel(tmp / "panel.yaml", stub)
                for n in range(args.repeat):
                    for mode, extra in MODES:
                        extra = {k: v.format(api=api) for k, v in extra.items()}
                        db = tmp / f"{mode.replace(' ', '-')}-{n}.duckdb"
                        results[mode].append(timed_run({**env, **extra}, stub, dataset, panel, db))
        finally:
            subprocess.run([PREFECT, "server", "stop"], env=server_env, stdout=subprocess.DEVNULL)
        print(f"\n{args.repeat} runs each, 1 item x 1 LLM judge, stand-in at 0 ms; seconds")
        print("| Prefect API | first call (median, min-max) | exit (median) |")
        print("|---|---|---|")
        for mode, rows in results.items():
            firsts = [first for first, _ in rows]
            exits = [ended for _, ended in rows]
            print(
                f"| {mode} | {statistics.median(firsts):.2f} ({min(firsts):.2f}-{max(firsts):.2f})"
                f" | {statistics.median(exits):.2f} |"
            )
        ratio = statistics.median(f for f, _ in results["ephemeral"]) / statistics.median(
            f for f, _ in results["running server"]
        )
        print(f"ephemeral / running server, first call: {ratio:.1f}x")
        left = killed_run_leftovers(env, dataset, tmp / "slow-panel.yaml", tmp / "killed.duckdb")
        print(f"ephemeral run killed with SIGKILL mid-run: {left} of its processes left 2 s later")


if __name__ == "__main__":
    main()
