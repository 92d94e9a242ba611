"""Orchestration CPU per judge call (target <= 1 ms).

Usage: python bench/bench_orchestration_cpu.py [--items 2000] [--concurrency 64]
           [--chunk-size 200] [--panels llm,offline,null]

The real ``evaluate`` flow judges N items x 3 judges (``use_cache=False``) in this process;
the stand-in API (``python -m juryflow.standin.server``, 0 ms latency) runs in a
SEPARATE process
so that none of its CPU is counted. Figures are this process's CPU (``time.process_time``:
user + system, every thread, DuckDB's included) per judge call, for three panels:

- ``llm``: 3 LLM judges over HTTP (Anthropic + 2 OpenAI-format stub models): everything a
  real run pays per call: prompt rendering, the official SDKs (on their aiohttp transport
  when ``aiohttp`` is installed, else httpx; one pooled client per endpoint and loop),
  parsing, span anchoring, journal, Prefect task runs, consensus, DuckDB writes;
- ``offline``: the embedded offline panel (3 real detectors): no HTTP, but the detectors'
  own regex work;
- ``null``: 3 offline judges whose detector returns nothing at once (registered by this
  bench only): what is left is our orchestration alone (task runs, judgment records,
  journal, consensus, DuckDB writes).

Each panel runs a warm-up first (imports, Prefect's ephemeral API server, SDK clients), then
a small run (N/4) and the full run (N). "per call" = CPU of the full run / its calls, fixed
per-run costs included (run setup, summary, artifacts); "marginal" = (CPU(N) - CPU(N/4)) /
(the extra calls), the cost of one more call. The Prefect API server is a subprocess: its
CPU is not in the figure and is printed separately, as is the stub's.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from juryflow.planning.run_request import RunRequest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common

TARGET_MS = 1.0
JUDGES = 3


@dataclass
class Measure:
    calls: int
    cpu: float
    wall: float
    children_cpu: float
    stub_cpu: float


class NullDetector:
    name = "noop"

    def detect(self, reference: str, response: str) -> list[tuple[int, int]]:
        return []


def register_null_detector() -> None:
    from juryflow.judges.detectors import registry

    original = registry._registry

    def with_null() -> dict[str, Any]:
        detectors = dict(original())
        detectors["noop"] = NullDetector()
        return detectors

    registry._registry = with_null  # type: ignore[assignment]


def transport() -> str:
    """The HTTP transport the SDKs use here: aiohttp when its extra is installed."""
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        return "httpx"
    return "aiohttp"


def children_cpu() -> float:
    """CPU of this process's live children (Prefect's API server), from /proc."""
    import psutil

    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
            total += times.user + times.system
        except psutil.Error:
            pass
    return total


def write_offline_panel(path: Path, detectors: tuple[str, str, str]) -> Path:
    lines = ["name: bench-offline", "judges:"]
    lines += [
        f"  - {{id: judge{n}, provider: offline, detector: {d}}}" for n, d in enumerate(detectors)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_once(
    evaluate: Any, dataset: Path, panel: Path, db: Path, chunk_size: int, stub_pid: int
) -> Measure:
    stub_before = _common.process_cpu_seconds(stub_pid)
    children_before = children_cpu()
    wall = time.perf_counter()
    cpu = time.process_time()
    summary = asyncio.run(
        evaluate(
            RunRequest(
                dataset=str(dataset),
                panel=str(panel),
                db=str(db),
                chunk_size=chunk_size,
                use_cache=False,
            )
        )
    )
    cpu = time.process_time() - cpu
    wall = time.perf_counter() - wall
    return Measure(
        calls=int(summary["judgments"]),
        cpu=cpu,
        wall=wall,
        children_cpu=children_cpu() - children_before,
        stub_cpu=_common.process_cpu_seconds(stub_pid) - stub_before,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64, help="max_concurrency per judge")
    parser.add_argument("--chunk-size", type=int, default=200)
    parser.add_argument("--panels", default="llm,offline,null")
    args = parser.parse_args()
    panels = [p.strip() for p in args.panels.split(",") if p.strip()]

    with _common.temp_dir("bench-cpu-") as tmp_name:
        tmp = Path(tmp_name)
        _common.prefect_env(tmp)
        _common.quiet()
        from juryflow.flows.evaluate import evaluate

        register_null_detector()
        small_n = max(args.items // 4, 1)
        datasets = {
            "warm": _common.synth_dataset(tmp / "warm.jsonl", 60),
            "small": _common.synth_dataset(tmp / "small.jsonl", small_n),
            "full": _common.synth_dataset(tmp / "full.jsonl", args.items),
        }
        stub, base = _common.start_stub_process(latency_ms=0.0)
        try:
            panel_files = {
                "llm": _common.write_stub_panel(
                    tmp / "llm.yaml", base, base + "/v1", args.concurrency
                ),
                "offline": write_offline_panel(
                    tmp / "offline.yaml", ("numbers", "names", "content")
                ),
                "null": write_offline_panel(tmp / "null.yaml", ("noop", "noop", "noop")),
            }
            print(
                f"setup: {args.items:,} (and {small_n:,}) items x {JUDGES} judges, stub latency "
                f"0 ms in its own process, chunk_size {args.chunk_size}, max_concurrency "
                f"{args.concurrency}/judge; {_common.machine()}"
            )
            print(
                f"counted: this process's CPU (all threads: event loop, SDKs over {transport()}, "
                "parsing, "
                "journal, Prefect client and task engine, consensus, DuckDB); not counted: "
                "the stub server and Prefect's API server (separate processes, shown apart)"
            )
            for name in panels:
                panel = panel_files[name]
                db = tmp / f"{name}.duckdb"
                run_once(evaluate, datasets["warm"], panel, db, args.chunk_size, stub.pid)
                small = run_once(evaluate, datasets["small"], panel, db, args.chunk_size, stub.pid)
                full = run_once(evaluate, datasets["full"], panel, db, args.chunk_size, stub.pid)
                per_call = full.cpu / full.calls * 1000
                marginal = (full.cpu - small.cpu) / (full.calls - small.calls) * 1000
                met = "met" if per_call <= TARGET_MS else "MISSED"
                what = "HTTP calls" if name == "llm" else "judgments"
                print(
                    f"[{name}] {full.calls:,} {what}: CPU {full.cpu:.2f} s in {full.wall:.2f} s "
                    f"wall ({full.calls / full.wall:,.0f}/s); Prefect API server "
                    f"{full.children_cpu / full.calls * 1000:.3f} ms/call, stub "
                    f"{full.stub_cpu / full.calls * 1000:.3f} ms/call (not counted)"
                )
                print(
                    f"[{name}] orchestration CPU per call: {per_call:.3f} ms "
                    f"(marginal {marginal:.3f} ms) (target <= {TARGET_MS:g} ms: {met})"
                )
        finally:
            stub.terminate()
            stub.wait(10)


if __name__ == "__main__":
    main()
