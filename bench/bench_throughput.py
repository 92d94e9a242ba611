"""Judging throughput against the stand-in API: fraction of the ideal (target >= 90 %).

Usage: python bench/bench_throughput.py [--items 2000] [--concurrency 64] [--chunk-size 200]
           [--chunks-in-flight 4] [--latency-ms 200] [--stub-process] [--profile]

2,000 items (the bundled sample cycled, unique ids) x 3 LLM judges (one Anthropic-format and
two OpenAI-format stub models, prompt data2txt_spans, each ``max_concurrency: C``), through
the real ``evaluate`` flow with ``use_cache=False``, real SDKs over real HTTP to
``juryflow.standin.server`` answering after ``--latency-ms``.

What is measured: the *judging phase*, from the first model request leaving the client to
the last response coming back (client-side timestamps around every provider ``complete``
call; with the in-process stub the server's own first-arrival / last-answer timestamps are
printed too). Prefect's ephemeral-server start-up, run setup before the first call and the
summary / artifacts after the last are printed separately and not counted.

ideal = calls x latency / (3 x C): every call takes exactly the latency and the three
judges' limiters are kept full all the time. fraction of ideal = ideal / measured.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import sys
import threading
import time
from pathlib import Path
from typing import Any

from juryflow.planning.run_request import RunRequest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common

TARGET = 0.90


class Timeline:
    """(start, end) of every provider call, on the perf_counter clock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[float, float]] = []

    def add(self, start: float, end: float) -> None:
        with self.lock:
            self.calls.append((start, end))

    def span(self) -> tuple[float, float]:
        return min(s for s, _ in self.calls), max(e for _, e in self.calls)

    def mean_in_flight(self) -> float:
        first, last = self.span()
        return sum(e - s for s, e in self.calls) / (last - first)

    def max_in_flight(self) -> int:
        events = sorted([(s, 1) for s, _ in self.calls] + [(e, -1) for _, e in self.calls])
        level = peak = 0
        for _, step in events:
            level += step
            peak = max(peak, level)
        return peak

    def in_flight_profile(self, buckets: int) -> list[float]:
        """Mean calls in flight over ``buckets`` equal slices of the judging phase."""
        first, last = self.span()
        width = (last - first) / buckets
        busy = [0.0] * buckets
        for s, e in self.calls:
            b = int((s - first) / width)
            while b < buckets and s < e:
                edge = first + (b + 1) * width
                busy[b] += min(e, edge) - s
                s = edge
                b += 1
        return [x / width for x in busy]


def instrument(timeline: Timeline) -> None:
    """Record every provider call (one HTTP request and its parsing by the SDK)."""
    from juryflow.judges.providers.anthropic import AnthropicClient
    from juryflow.judges.providers.openai import OpenAIClient

    for cls in (AnthropicClient, OpenAIClient):
        original = cls.complete

        async def complete(self: Any, request: Any, _original: Any = original) -> Any:
            start = time.perf_counter()
            try:
                return await _original(self, request)
            finally:
                timeline.add(start, time.perf_counter())

        cls.complete = complete  # type: ignore[method-assign]


def server_timeline(stats: Any) -> Timeline:
    """Patch an in-process StubStats so that it timestamps each model call too."""
    timeline = Timeline()
    starts: dict[int, list[float]] = {}
    original_start, original_finish = stats._start, stats._finish

    def _start(path: str, model: str | None) -> int:
        starts.setdefault(threading.get_ident(), []).append(time.perf_counter())
        return int(original_start(path, model))

    def _finish(outcome: str) -> None:
        # The stub answers in arrival order per model only approximately; pair by FIFO
        # (the span and the mean in flight do not depend on the pairing).
        pending = starts.get(threading.get_ident(), [])
        timeline.add(pending.pop(0) if pending else time.perf_counter(), time.perf_counter())
        original_finish(outcome)

    stats._start, stats._finish = _start, _finish
    return timeline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64, help="max_concurrency per judge")
    parser.add_argument("--chunk-size", type=int, default=200)
    parser.add_argument("--chunks-in-flight", type=int, default=4)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument(
        "--stub-process",
        action="store_true",
        help="run the stand-in in its own process (default: a thread of this one, as tests do)",
    )
    parser.add_argument("--profile", action="store_true", help="cProfile the flow, print top 25")
    parser.add_argument("--buckets", type=int, default=20, help="slices of the in-flight profile")
    args = parser.parse_args()

    with _common.temp_dir("bench-throughput-") as tmp_name:
        tmp = Path(tmp_name)
        _common.prefect_env(tmp)
        _common.quiet()
        from juryflow.flows.evaluate import evaluate
        from juryflow.standin.server import StubConfig, running_stub_server

        dataset = _common.synth_dataset(tmp / "items.jsonl", args.items)
        client_timeline = Timeline()
        instrument(client_timeline)
        server: Timeline | None = None

        stub_process = None
        if args.stub_process:
            stub_process, base = _common.start_stub_process(args.latency_ms)
            context: Any = None
            anthropic_url, openai_url = base, base + "/v1"
        else:
            context = running_stub_server(StubConfig(latency_ms=args.latency_ms))
            handle = context.__enter__()
            server = server_timeline(handle.server.stats)
            anthropic_url, openai_url = handle.anthropic_base_url, handle.openai_base_url
        try:
            panel = _common.write_stub_panel(
                tmp / "panel.yaml", anthropic_url, openai_url, args.concurrency
            )
            profiler = cProfile.Profile() if args.profile else None
            started = time.perf_counter()
            cpu_started = time.process_time()
            if profiler:
                profiler.enable()
            summary = asyncio.run(
                evaluate(
                    RunRequest(
                        dataset=str(dataset),
                        panel=str(panel),
                        db=str(tmp / "bench.duckdb"),
                        chunk_size=args.chunk_size,
                        use_cache=False,
                    ),
                    chunks_in_flight=args.chunks_in_flight,
                )
            )
            if profiler:
                profiler.disable()
            ended = time.perf_counter()
            cpu = time.process_time() - cpu_started
            stub_stats = None if context is None else handle.stats.snapshot()
        finally:
            if context is not None:
                context.__exit__(None, None, None)
            if stub_process is not None:
                stub_process.terminate()
                stub_process.wait(10)

    judges = 3
    calls = len(client_timeline.calls)
    expected = args.items * judges
    assert summary["judgments"] == expected, summary
    assert calls == expected, f"{calls} calls, expected {expected} (retries?)"
    first, last = client_timeline.span()
    phase = last - first
    concurrency = judges * args.concurrency
    ideal = calls * args.latency_ms / 1000.0 / concurrency
    fraction = ideal / phase
    met = "met" if fraction >= TARGET else "MISSED"
    observed_max = client_timeline.max_in_flight()

    print(
        f"setup: {args.items:,} items x {judges} judges = {calls:,} calls, stub latency "
        f"{args.latency_ms:g} ms ({'own process' if args.stub_process else 'in-process thread'}),"
        f" max_concurrency {args.concurrency}/judge -> {concurrency} total, chunk_size "
        f"{args.chunk_size}, chunks_in_flight {args.chunks_in_flight}; {_common.machine()}"
    )
    print(
        f"flow wall: {ended - started:.2f} s = before first call {first - started:.2f} s "
        f"(Prefect start-up, run setup) + judging phase {phase:.2f} s "
        f"+ after last call {ended - last:.2f} s (last chunk's consensus, summary, artifacts)"
    )
    print(f"flow process CPU: {cpu:.2f} s over {ended - started:.2f} s wall")
    if server is not None and server.calls:
        s_first, s_last = server.span()
        print(
            f"stub side: first request in {s_first - first:+.3f} s after the client's first "
            f"call (SDK lazy imports, connection set-up), judging phase seen by the stub "
            f"{s_last - s_first:.2f} s -> {ideal / (s_last - s_first):.1%} of ideal"
        )
    if stub_stats is not None:
        print(f"stub max_in_flight: {stub_stats['max_in_flight']} (allowed {concurrency})")
    print(
        f"client max in flight: {observed_max} (allowed {concurrency}); mean in flight over "
        f"the phase {client_timeline.mean_in_flight():.1f} "
        f"({client_timeline.mean_in_flight() / concurrency:.0%} of allowed)"
    )
    durations = sorted(e - s for s, e in client_timeline.calls)
    p50 = durations[len(durations) // 2] * 1000
    p99 = durations[min(len(durations) - 1, int(len(durations) * 0.99))] * 1000
    print(
        f"call duration (client side, latency {args.latency_ms:g} ms): median {p50:.0f} ms, "
        f"p99 {p99:.0f} ms, max {durations[-1] * 1000:.0f} ms"
    )
    profile = client_timeline.in_flight_profile(args.buckets)
    print(
        f"in flight per {phase / args.buckets:.2f} s slice: "
        + " ".join(f"{x:.0f}" for x in profile)
    )
    print(
        f"ideal = {calls:,} x {args.latency_ms / 1000:g} s / {concurrency} = {ideal:.2f} s; "
        f"measured judging phase {phase:.2f} s"
    )
    print(f"fraction of ideal: {fraction:.1%} (target >= {TARGET:.0%}: {met})")
    if profiler is not None:
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out).sort_stats("tottime")
        stats.print_stats(25)
        print(out.getvalue())


if __name__ == "__main__":
    main()
