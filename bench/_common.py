"""Helpers shared by the end-to-end benches: Prefect settings, datasets, stub panels.

Import this module before anything that imports Prefect: :func:`prefect_env` must run first.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "examples" / "ragtruth_data2txt_sample.jsonl"
KEY_ENV = "JURYFLOW_BENCH_KEY"
FAKE_KEY = "sk-bench-not-a-real-key-0123456789"

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def prefect_env(tmp: Path) -> None:
    """Offline, quiet Prefect with its own home (and ephemeral database) under ``tmp``.

    The same settings the ``juryflow`` command applies, plus a private PREFECT_HOME so that a
    bench never shares a Prefect database with another engineer's tests.
    """
    home = tmp / "prefect-home"
    home.mkdir(parents=True, exist_ok=True)
    os.environ["PREFECT_HOME"] = str(home)
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    os.environ["DO_NOT_TRACK"] = "1"
    os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "180"
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_LOGGING_SERVER_LEVEL", "CRITICAL")
    os.environ[KEY_ENV] = FAKE_KEY


def compile_checkout() -> None:
    """Byte-compile juryflow's modules, as pip does when it installs a wheel.

    Where PYTHONDONTWRITEBYTECODE is set (this machine), a process started from the
    checkout compiles every module it imports again (~0.2 s of CPU for ``juryflow run``),
    which an installed juryflow, or Inspect AI in its own virtualenv, never does.
    """
    import compileall

    package = REPO / "juryflow"
    for folder in [package, *(path for path in package.iterdir() if path.is_symlink())]:
        compileall.compile_dir(folder, quiet=1)


def quiet() -> None:
    from juryflow.flows.runtime.prefect_env import quiet_prefect_logging

    quiet_prefect_logging(verbose=False)


def synth_dataset(path: Path, n: int, source: Path = SAMPLE) -> Path:
    """``n`` rows cycling the bundled sample, each with a unique id (``<id>#<n>``)."""
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line]
    with path.open("w", encoding="utf-8") as out:
        for number, row in zip(range(n), itertools.cycle(rows), strict=False):
            out.write(json.dumps({**row, "id": f"{row['id']}#{number}"}) + "\n")
    return path


def write_stub_panel(
    path: Path,
    anthropic_url: str,
    openai_url: str,
    concurrency: int,
    prompt: str = "data2txt_spans",
) -> Path:
    """Three LLM judges on the stand-in, each on its own model (so each has its own limiter)."""
    judges = [
        ("claude", "anthropic", "stub-spans-good", anthropic_url),
        ("gpt", "openai", "stub-spans-nearmiss", openai_url),
        ("local", "openai", "stub-random", openai_url),
    ]
    lines = [f"name: bench-stub-{concurrency}", "quorum: 2", "judges:"]
    for judge_id, provider, model, url in judges:
        lines += [
            f"  - id: {judge_id}",
            f"    provider: {provider}",
            f"    model: {model}",
            f"    prompt: {prompt}",
            f'    base_url: "{url}"',
            f"    api_key_env: {KEY_ENV}",
            f"    max_concurrency: {concurrency}",
        ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def start_stub_process(latency_ms: float = 0.0) -> tuple[subprocess.Popen[bytes], str]:
    """``python -m juryflow.standin.server`` in its own process; returns it and its base URL."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "juryflow.standin.server",
            "--port",
            str(port),
            "--latency-ms",
            str(latency_ms),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert process.stdout is not None
    line = process.stdout.readline().decode()
    if "stub server on" not in line:
        process.kill()
        raise RuntimeError(f"stub server did not start: {line!r}")
    return process, f"http://127.0.0.1:{port}"


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def machine() -> str:
    """One line for beside a bench's figures: the machine, its speed, its load and the
    releases measured, so that another machine can reproduce them or say how it differs."""
    return (
        f"{os.cpu_count()} cores (nproc), {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
        f"load avg {os.getloadavg()[0]:.2f}; {cpu_speed()}; {versions()}"
    )


CPU_SPEED_LOOP = 2_000_000


def cpu_speed(repeats: int = 5) -> str:
    """The time of a fixed pure-Python loop, best of ``repeats``: one core's speed, as the
    interpreter sees it, on an idle machine or beside whatever load the line reports."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        total = 0
        for step in range(CPU_SPEED_LOOP):
            total += step * step % 7
        best = min(best, time.perf_counter() - started)
    return f"CPU speed: {CPU_SPEED_LOOP:,}-step Python loop in {best:.3f} s (best of {repeats})"


VERSIONED = ("juryflow", "prefect", "duckdb", "anthropic", "openai", "numpy", "scipy",
             "scikit-learn")  # fmt: skip


def versions() -> str:
    """The releases a figure was measured with, for another machine to reproduce it."""
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in VERSIONED:
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return f"Python {platform.python_version()}, " + ", ".join(found)


def temp_dir(prefix: str) -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix=prefix)


def now() -> float:
    return time.perf_counter()


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_healthy(api_url: str, timeout: float = 120.0) -> float:
    """Seconds until a Prefect API answers ``/health``; RuntimeError past ``timeout``."""
    import urllib.request

    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        try:
            with urllib.request.urlopen(f"{api_url}/health", timeout=2) as answer:
                if answer.status == 200:
                    return time.perf_counter() - start
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the Prefect server at {api_url} did not become healthy")


@contextlib.contextmanager
def background_prefect_server(env: dict[str, str]) -> Iterator[tuple[str, int | None]]:
    """``prefect server start --background`` on a free port, with ``env`` (its
    PREFECT_HOME: the server's database and pid file); yields its API URL and pid, and
    stops it on the way out."""
    prefect = str(Path(sys.executable).with_name("prefect"))
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    server_env = {
        **{k: v for k, v in env.items() if k != "PREFECT_API_URL"},
        "PREFECT_SERVER_API_PORT": str(port),
    }
    subprocess.run(
        [prefect, "server", "start", "--background"],
        env=server_env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_healthy(api)
        pid_file = Path(server_env["PREFECT_HOME"]) / "server.pid"
        yield api, int(pid_file.read_text()) if pid_file.exists() else None
    finally:
        subprocess.run([prefect, "server", "stop"], env=server_env, stdout=subprocess.DEVNULL)
