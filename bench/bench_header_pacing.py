"""429s with and without pacing by the providers' rate-limit headers (issue 24, point 4).

One LLM judge (the seed score prompt, max_tokens 2048, ``max_concurrency`` 8, up to 8
attempts) judges ``--items`` items through each SDK against the stand-in, which keeps a
budget per model (``--rpm`` requests and/or ``--tpm`` tokens per ``--window`` seconds) and
answers 429 beyond it. For each provider and budget it prints the 429s the stand-in
answered, the judgments left unscored (retries exhausted) and the wall time, with
``JURYFLOW_HEADER_PACING`` off and on. The wall times depend on the machine; the counts
are what the comparison is about.

Run: .venv/bin/python bench/bench_header_pacing.py [--items 200] [--window 1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import machine
from juryflow.judges.factory import build_judge
from juryflow.judges.llm_judge import LLMJudge
from juryflow.judges.panel import JudgeSpec
from juryflow.judges.ratelimit import HEADER_PACING_ENV, reset_limiters
from juryflow.maths.records import Item
from juryflow.standin.server import StubConfig, StubHandle, running_stub_server

KEY_ENV = "JURYFLOW_BENCH_KEY"


async def judge_all(stub: StubHandle, provider: str, items: list[Item]) -> tuple[int, float]:
    spec = JudgeSpec(
        id=f"bench-{provider}",
        provider=provider,  # type: ignore[arg-type]
        model="stub-score-0.3",
        prompt="hallucination_score",
        base_url=stub.anthropic_base_url if provider == "anthropic" else stub.openai_base_url,
        api_key_env=KEY_ENV,
        timeout=60.0,
        max_attempts=8,
        max_concurrency=8,
    )
    judge = build_judge(spec)
    assert isinstance(judge, LLMJudge)
    began = time.perf_counter()
    try:
        judgments = await asyncio.gather(*(judge.judge(item) for item in items))
    finally:
        await judge.aclose()
    return sum(not j.scored for j in judgments), time.perf_counter() - began


def measure(config: StubConfig, provider: str, pacing: bool, items: list[Item]) -> str:
    os.environ[HEADER_PACING_ENV] = "1" if pacing else "0"
    reset_limiters()
    with running_stub_server(config) as stub:
        unscored, seconds = asyncio.run(judge_all(stub, provider, items))
        outcomes = stub.stats.snapshot()["by_outcome"]
    return (
        f"{provider:9} pacing {'on ' if pacing else 'off'}  429s {outcomes.get('429', 0):5}  "
        f"calls {sum(outcomes.values()):5}  unscored {unscored:4}  {seconds:6.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--window", type=float, default=1.0, help="seconds per budget")
    parser.add_argument("--rpm", type=float, default=20.0, help="requests per window")
    parser.add_argument("--tpm", type=float, default=40_000.0, help="tokens per window")
    parser.add_argument("--latency-ms", type=float, default=50.0)
    print(f"machine: {machine()}")
    args = parser.parse_args()
    os.environ.setdefault(KEY_ENV, "sk-bench")
    items = [
        Item(f"i{n}", {"input": f"question {n}", "output": f"answer {n}"})
        for n in range(args.items)
    ]
    budgets = {
        f"{args.rpm:g} requests / {args.window:g} s": {"rpm_limit": args.rpm},
        f"{args.tpm:g} tokens / {args.window:g} s": {"tpm_limit": args.tpm},
    }
    print(f"{args.items} items, max_concurrency 8, stand-in latency {args.latency_ms:g} ms")
    for name, limits in budgets.items():
        print(f"budget: {name}")
        for provider in ("anthropic", "openai"):
            for pacing in (False, True):
                config = StubConfig(
                    latency_ms=args.latency_ms,
                    rate_window=args.window,
                    **limits,  # type: ignore[arg-type]
                )
                print("  " + measure(config, provider, pacing, items), flush=True)


if __name__ == "__main__":
    main()
