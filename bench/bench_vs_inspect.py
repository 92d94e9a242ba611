"""juryflow vs Inspect AI: the same judging job on the same stand-in, in one run, with ratios.

Usage: .venv/bin/python bench/bench_vs_inspect.py [--items 2000] [--concurrency 64]
           [--latency-ms 200] [--prefect both|server|ephemeral] [--inspect-venv .venv-inspect]

The job: ``--items`` rows (the bundled sample cycled, unique ids) x 3 judges, one model call
each, over real HTTP to ONE ``juryflow.standin.server`` process answering after
``--latency-ms`` (its own process, so neither tool's CPU counts it), ``--concurrency`` calls
in flight per judge (ideal judging phase = calls x latency / (3 x concurrency)).

- juryflow: the real command, ``python -m juryflow run DATASET --panel PANEL --db TMP
  --no-cache``, panel = ``_common.write_stub_panel`` (stub-spans-good on the Anthropic API,
  stub-spans-nearmiss and stub-random on the OpenAI API); once against a Prefect server
  started with ``prefect server start --background`` (``PREFECT_API_URL``; that server is
  not in the measured tree, as the stand-in is not) and once with the ephemeral server a
  bare ``juryflow run`` starts itself (in the tree).
- Inspect AI: ``bench/inspect_job.py`` (one ``eval()`` of one task over the same three
  model names; read its docstring for the settings) in its own virtualenv (made by hand, see
  bench/README.md; never a juryflow dependency), on the same prompts, rendered here by
  juryflow's template, ``max_connections`` = concurrency per model.

Measured for each run's whole process tree (the command and all its descendants):
wall (start to exit), first model call (seconds from start until the stand-in counts a
request), judging phase (from the stand-in's first request to its last answer, read from
its ``GET /_stats`` every 10 ms), CPU (user + system: ``wait4`` of the root, which includes
every descendant it reaped, or the per-process sum polled every 50 ms if larger, which
covers descendants it did not reap) and peak RSS (the sum over the tree, polled every 50 ms).
juryflow's modules are byte-compiled first (``_common.compile_checkout``), as an installed
package's are, so that no run compiles them where PYTHONDONTWRITEBYTECODE is set.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common

INSPECT_TASK = Path(__file__).resolve().with_name("inspect_job.py")
MODELS = (
    ("anthropic", "stub-spans-good"),
    ("openai", "stub-spans-nearmiss"),
    ("openai", "stub-random"),
)
JUDGES = len(MODELS)
TARGET_IDEAL = 0.90
TARGET_CPU_MS = 1.5
TARGET_RATIO = 8.0
TARGET_FIRST_CALL = 3.0
PROFILE_SLICES = 25
PREVIOUS_RELEASE = (
    "the release before issue 27 (its own measurement of this job, running Prefect server): "
    "judging phase 12.7-15.8 s, 39-49 % of ideal; CPU 2.3-2.8 ms/call, tree and Prefect "
    "server; first call 3.6-4.9 s"
)


@dataclass(frozen=True)
class Measure:
    label: str
    wall: float
    first_call: float
    phase: float
    calls: int
    answered: dict[str, int]
    cpu: float
    cpu_reaped: float
    """wait4's user + system: the root and every descendant it waited for."""
    cpu_polled: float
    """The sum of each process's last polled user + system (misses the last <= 50 ms)."""
    peak_rss: int
    max_in_flight: int
    phase_cpu: float
    """Tree CPU during the judging phase (polled)."""
    machine_busy: float
    """CPU seconds the whole machine spent during the run (all cores, all processes)."""
    server_cpu: float
    """CPU of the background Prefect server during the run (outside the tree; 0 if none)."""
    in_flight: tuple[float, ...] = ()
    """Mean calls in flight at the stand-in in each of PROFILE_SLICES equal slices of the
    judging phase (polled from its counters)."""

    def ideal_fraction(self, ideal: float) -> float:
        return ideal / self.phase

    @property
    def throughput(self) -> float:
        return self.calls / self.phase

    @property
    def cpu_ms_per_call(self) -> float:
        return 1000.0 * self.cpu / self.calls

    @property
    def cpu_with_server_ms_per_call(self) -> float:
        """The tree and the background Prefect server it talks to: issue 27's CPU target."""
        return 1000.0 * (self.cpu + self.server_cpu) / self.calls


class StubWatch:
    """The stand-in's counters read over HTTP: when it saw the first request and last answer."""

    def __init__(self, base: str, interval: float = 0.01) -> None:
        self.base = base
        self.interval = interval
        self.first: float | None = None
        self.last_answer: float | None = None
        self.snapshot: dict[str, object] = {}
        self.series: list[tuple[float, int]] = []
        """(perf_counter, calls in flight at the stand-in) at every poll."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def stats(self) -> dict[str, object]:
        with urllib.request.urlopen(f"{self.base}/_stats", timeout=5) as answer:
            data: dict[str, object] = json.loads(answer.read())
            return data

    def reset(self) -> None:
        request = urllib.request.Request(f"{self.base}/_reset", data=b"", method="POST")
        with urllib.request.urlopen(request, timeout=5):
            pass

    def start(self) -> None:
        self.reset()
        self._thread.start()

    def stop(self) -> dict[str, object]:
        self._stop.set()
        self._thread.join()
        self._observe(time.perf_counter())  # the answers after the last poll
        return self.snapshot

    def _observe(self, now: float) -> None:
        snapshot = self.stats()
        answered = sum(dict(snapshot["by_outcome"]).values())  # type: ignore[call-overload]
        if self.first is None and int(snapshot["total"]) > 0:  # type: ignore[call-overload]
            self.first = now
        done_before = sum(dict(self.snapshot.get("by_outcome", {})).values())  # type: ignore[call-overload]
        if answered > done_before:
            self.last_answer = now
        self.snapshot = snapshot
        self.series.append((now, int(snapshot["in_flight"])))  # type: ignore[call-overload]

    def in_flight_profile(self, slices: int) -> tuple[float, ...]:
        """Mean calls in flight in each of ``slices`` equal slices of the judging phase:
        where the pipeline is not kept full (a ramp, a chunk boundary, the tail)."""
        if self.first is None or self.last_answer is None:
            return ()
        width = (self.last_answer - self.first) / slices
        sums, counts = [0.0] * slices, [0] * slices
        for moment, in_flight in self.series:
            index = int((moment - self.first) / width) if width > 0 else 0
            if 0 <= index < slices:
                sums[index] += in_flight
                counts[index] += 1
        return tuple(s / c if c else 0.0 for s, c in zip(sums, counts, strict=True))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._observe(time.perf_counter())
            time.sleep(self.interval)


class TreeSampler:
    """CPU and RSS of a process and all its descendants, polled."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.root = pid
        self.interval = interval
        self.cpu_by_process: dict[tuple[int, float], float] = {}
        self.peak_rss = 0
        self.series: list[tuple[float, float]] = []
        """(perf_counter, tree CPU so far) at every poll."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def cpu(self) -> float:
        return sum(self.cpu_by_process.values())

    def _sample(self) -> None:
        try:
            root = psutil.Process(self.root)
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            return
        rss = 0
        for process in tree:
            try:
                with process.oneshot():
                    times = process.cpu_times()
                    rss += process.memory_info().rss
                    key = (process.pid, process.create_time())
            except psutil.Error:
                continue  # exited between the listing and the read
            self.cpu_by_process[key] = times.user + times.system
        self.peak_rss = max(self.peak_rss, rss)
        self.series.append((time.perf_counter(), self.cpu))

    def cpu_between(self, start: float, end: float) -> float:
        """Tree CPU between two instants (to the poll before each: within 50 ms)."""

        def at(moment: float) -> float:
            return max((cpu for t, cpu in self.series if t <= moment), default=0.0)

        return at(end) - at(start)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            time.sleep(self.interval)


def tree_cpu(pid: int | None) -> float:
    """User + system CPU so far of a live process and its live descendants (0 without one)."""
    if pid is None:
        return 0.0
    total = 0.0
    try:
        root = psutil.Process(pid)
        for process in [root, *root.children(recursive=True)]:
            times = process.cpu_times()
            total += times.user + times.system
    except psutil.Error:
        pass
    return total


def measure(
    label: str,
    command: list[str],
    env: dict[str, str],
    cwd: Path,
    base: str,
    log: Path,
    server_pid: int | None = None,
) -> Measure:
    """Run ``command`` to completion, measuring its process tree and the stand-in's view.

    ``server_pid``: a server outside the tree that the command uses (the background Prefect
    server), whose CPU during the run is reported separately.
    """
    watch = StubWatch(base)
    watch.start()
    server_before = tree_cpu(server_pid)
    busy_before = machine_busy()
    with log.open("wb") as output:
        started = time.perf_counter()
        process = subprocess.Popen(command, env=env, cwd=cwd, stdout=output, stderr=output)
        sampler = TreeSampler(process.pid)
        # wait4, not wait: its rusage covers the root and every descendant it reaped.
        _, status, usage = os.wait4(process.pid, 0)
        ended = time.perf_counter()
        process.returncode = os.waitstatus_to_exitcode(status)
    busy = machine_busy() - busy_before
    server_cpu = tree_cpu(server_pid) - server_before
    sampler.stop()
    snapshot = watch.stop()
    if process.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"{label} exited {process.returncode}; its output ends:\n{tail}")
    if watch.first is None or watch.last_answer is None:
        raise SystemExit(f"{label} made no model call; see {log}")
    answered: dict[str, int] = dict(snapshot["by_outcome"])  # type: ignore[call-overload]
    return Measure(
        label=label,
        wall=ended - started,
        first_call=watch.first - started,
        phase=watch.last_answer - watch.first,
        calls=int(snapshot["total"]),  # type: ignore[call-overload]
        answered=answered,
        cpu=max(usage.ru_utime + usage.ru_stime, sampler.cpu),
        cpu_reaped=usage.ru_utime + usage.ru_stime,
        cpu_polled=sampler.cpu,
        peak_rss=sampler.peak_rss,
        max_in_flight=int(snapshot["max_in_flight"]),  # type: ignore[call-overload]
        phase_cpu=sampler.cpu_between(watch.first, watch.last_answer),
        machine_busy=busy,
        server_cpu=server_cpu,
        in_flight=watch.in_flight_profile(PROFILE_SLICES),
    )


def machine_busy() -> float:
    times = psutil.cpu_times()
    return float(sum(times) - times.idle - getattr(times, "iowait", 0.0))


def inspect_prompts(dataset: Path, out: Path) -> Path:
    """The prompts juryflow sends for ``data2txt_spans``, one Inspect sample per item."""
    from juryflow.maths.records import Item
    from juryflow.prompts.loader import load_template
    from juryflow.storage.datasets import read_items

    template = load_template("data2txt_spans")
    with out.open("w", encoding="utf-8") as sink:
        for item in read_items(dataset, template.variables):
            if not isinstance(item, Item):
                raise SystemExit(f"bench dataset row error: {item}")
            prompt = template.render(item.variables)
            sink.write(json.dumps({"id": item.item_id, "input": prompt}) + "\n")
    return out


def row(m: Measure, ideal: float) -> str:
    return (
        f"| {m.label} | {m.wall:.2f} s | {m.phase:.2f} s, {m.ideal_fraction(ideal):.1%} "
        f"| {m.cpu_ms_per_call:.2f} ms ({m.cpu:.1f} s) | {m.peak_rss / 2**20:.0f} MiB "
        f"| {m.first_call:.2f} s | {m.throughput:.0f} | {m.max_in_flight} |"
    )


def load_text() -> str:
    return "load avg 1/5/15 min " + " / ".join(f"{x:.2f}" for x in os.getloadavg())


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64, help="calls in flight per judge")
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--prefect", choices=("both", "server", "ephemeral"), default="both")
    parser.add_argument("--inspect-venv", type=Path, default=_common.REPO / ".venv-inspect")
    parser.add_argument(
        "--workers",
        default="1,2",
        help="juryflow's --workers, comma-separated: one running-server row per value",
    )
    parser.add_argument("--no-inspect", action="store_true", help="juryflow's rows only")
    parser.add_argument(
        "--chunk-size", type=int, default=None, help="juryflow's --chunk-size (default: its own)"
    )
    parser.add_argument(
        "--sdk-path",
        action="store_true",
        help="also the first --workers value on the SDK's whole call path "
        "(JURYFLOW_SDK_CALLS=1: the call path of the release before the lean one)",
    )
    args = parser.parse_args()
    worker_counts = [n.strip() for n in args.workers.split(",")]
    if not all(n == "auto" or n.isdigit() for n in worker_counts):
        raise SystemExit("--workers takes numbers or 'auto', comma-separated")
    if not args.no_inspect and not (args.inspect_venv / "bin" / "inspect").exists():
        venv = args.inspect_venv
        raise SystemExit(
            f"no Inspect AI in {venv}; create it: python3 -m venv {venv} && "
            f"{venv}/bin/pip install inspect-ai==0.3.285 anthropic openai"
        )

    print(f"machine: {_common.machine()}; {load_text()} before")
    _common.compile_checkout()
    results: list[Measure] = []
    with _common.temp_dir("bench-vs-inspect-") as tmp_name:
        tmp = Path(tmp_name)
        _common.prefect_env(tmp)
        dataset = _common.synth_dataset(tmp / "items.jsonl", args.items)
        prompts = inspect_prompts(dataset, tmp / "prompts.jsonl")
        stub, base = _common.start_stub_process(args.latency_ms)
        panel = _common.write_stub_panel(tmp / "panel.yaml", base, base + "/v1", args.concurrency)
        env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        env["JURYFLOW_CACHE_DIR"] = str(tmp / "request-cache")
        juryflow = [sys.executable, "-m", "juryflow", "run", str(dataset), "--panel", str(panel)]
        if args.chunk_size is not None:
            juryflow += ["--chunk-size", str(args.chunk_size)]
        try:
            if args.prefect in ("both", "server"):
                with _common.background_prefect_server(env) as (api, server_pid):
                    server_env = {**env, "PREFECT_API_URL": api}
                    rows = [(workers, "lean") for workers in worker_counts]
                    if args.sdk_path:
                        rows.insert(0, (worker_counts[0], "sdk"))
                    for workers, kind in rows:
                        suffix = "" if kind == "lean" else f"-{kind}"
                        db = tmp / f"server-{workers}{suffix}.duckdb"
                        command = [
                            *juryflow,
                            "--db",
                            str(db),
                            "--no-cache",
                            "--workers",
                            str(workers),
                        ]
                        label = f"juryflow --workers {workers} (running Prefect server)"
                        row_env = dict(server_env)
                        if kind == "sdk":
                            label = f"juryflow --workers {workers}, SDK call path (server)"
                            row_env["JURYFLOW_SDK_CALLS"] = "1"
                        results.append(
                            measure(
                                label,
                                command,
                                row_env,
                                _common.REPO,
                                base,
                                tmp / f"juryflow-server-{workers}{suffix}.log",
                                server_pid,
                            )
                        )
            if args.prefect in ("both", "ephemeral"):
                workers = worker_counts[-1]
                db = tmp / "ephemeral.duckdb"
                command = [*juryflow, "--db", str(db), "--no-cache", "--workers", str(workers)]
                results.append(
                    measure(
                        f"juryflow --workers {workers} (ephemeral Prefect)",
                        command,
                        env,
                        _common.REPO,
                        base,
                        tmp / "juryflow-ephemeral.log",
                    )
                )
            if not args.no_inspect:
                inspect_env = {
                    **env,
                    "ANTHROPIC_API_KEY": _common.FAKE_KEY,
                    "OPENAI_API_KEY": _common.FAKE_KEY,
                    "ANTHROPIC_BASE_URL": base,
                    "OPENAI_BASE_URL": base + "/v1",
                }
                inspect_command = [
                    str(args.inspect_venv / "bin" / "python"),
                    str(INSPECT_TASK),
                    str(prompts),
                    "--log-dir",
                    str(tmp / "inspect-logs"),
                    "--max-connections",
                    str(args.concurrency),
                ]
                # From the temp dir, so no project .env file changes Inspect's settings.
                results.append(
                    measure(
                        f"Inspect AI {inspect_version(args.inspect_venv)}",
                        inspect_command,
                        inspect_env,
                        tmp,
                        base,
                        tmp / "inspect.log",
                    )
                )
        finally:
            stub.terminate()
            stub.wait(10)
    report(results, args)


def inspect_version(venv: Path) -> str:
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import inspect_ai; print(inspect_ai.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def report(results: list[Measure], args: argparse.Namespace) -> None:
    expected = args.items * JUDGES
    concurrency = JUDGES * args.concurrency
    ideal = expected * args.latency_ms / 1000.0 / concurrency
    print(
        f"\njob: {args.items:,} items x {JUDGES} judges = {expected:,} calls, stand-in (own "
        f"process) at {args.latency_ms:g} ms, {args.concurrency} in flight per judge; ideal "
        f"judging phase {expected:,} x {args.latency_ms / 1000:g} s / {concurrency} = "
        f"{ideal:.2f} s; {load_text()} after\n"
    )
    print(
        "| run | wall | judging phase, % of ideal | CPU per call (whole process tree) "
        "| peak RSS (whole process tree) | first model call | calls/s in phase "
        "| max in flight |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for m in results:
        print(row(m, ideal))
    print()
    for m in results:
        print(
            f"- {m.label}: CPU {m.cpu_reaped:.1f} s by wait4, {m.cpu_polled:.1f} s polled, "
            f"{m.phase_cpu:.1f} s in the judging phase = {1000 * m.phase_cpu / m.calls:.2f} "
            f"ms/call ({m.phase_cpu / m.phase:.2f} cores); "
            + (
                f"background Prefect server (outside the tree) {m.server_cpu:.1f} s "
                f"= {1000 * m.server_cpu / m.calls:.2f} ms/call; "
                if m.server_cpu
                else ""
            )
            + f"answers {m.answered}; the rest of the machine (stand-in, this script, other "
            f"users) used {(m.machine_busy - m.cpu) / m.wall:.2f} of {os.cpu_count()} cores "
            "meanwhile"
        )
        if m.in_flight:
            print(
                f"  - {m.label}: calls in flight at the stand-in, mean of each "
                f"{m.phase / len(m.in_flight):.2f} s slice of the phase: "
                + " ".join(f"{n:.0f}" for n in m.in_flight)
            )
        if m.calls != expected:
            print(f"note: {m.label} made {m.calls} requests for {expected} calls ({m.answered})")
    print(f"\nbeside: {PREVIOUS_RELEASE}")
    if args.no_inspect:
        for m in results:
            print(
                f"- {m.label}: judging phase {m.ideal_fraction(ideal):.1%} of ideal (>= 90 %: "
                f"{verdict(m.ideal_fraction(ideal) >= TARGET_IDEAL)}), CPU "
                f"{m.cpu_ms_per_call:.2f} ms/call ({m.cpu_with_server_ms_per_call:.2f} with the "
                f"Prefect server, <= {TARGET_CPU_MS} ms: "
                f"{verdict(m.cpu_with_server_ms_per_call <= TARGET_CPU_MS)}), first call "
                f"{m.first_call:.2f} s (<= 3 s: {verdict(m.first_call <= TARGET_FIRST_CALL)})"
            )
        return
    inspect = results[-1]
    print("\nratios, juryflow / Inspect AI (throughput: higher is better; the rest: lower):")
    for m in results[:-1]:
        print(
            f"- {m.label} / {inspect.label}: judging-phase throughput "
            f"{m.throughput / inspect.throughput:.2f}x, CPU per call "
            f"{m.cpu_ms_per_call / inspect.cpu_ms_per_call:.2f}x, peak RSS "
            f"{m.peak_rss / inspect.peak_rss:.2f}x, wall {m.wall / inspect.wall:.2f}x, "
            f"first call {m.first_call / inspect.first_call:.2f}x"
        )
    print("\ntargets:")
    for m in results[:-1]:
        print(
            f"- {m.label}: judging phase {m.ideal_fraction(ideal):.1%} of ideal (>= 90 %: "
            f"{verdict(m.ideal_fraction(ideal) >= TARGET_IDEAL)}); CPU "
            f"{m.cpu_with_server_ms_per_call:.2f} ms/call, tree and Prefect server (<= "
            f"{TARGET_CPU_MS} ms: {verdict(m.cpu_with_server_ms_per_call <= TARGET_CPU_MS)}); "
            f"{m.throughput / inspect.throughput:.2f}x Inspect's throughput (>= 8x: "
            f"{verdict(m.throughput / inspect.throughput >= TARGET_RATIO)})"
            + (
                f"; first call {m.first_call:.2f} s (<= 3 s against a running server: "
                f"{verdict(m.first_call <= TARGET_FIRST_CALL)})"
                if "running" in m.label
                else ""
            )
        )


if __name__ == "__main__":
    main()
