"""Client CPU per model call: the SDK's whole call path against the lean replay, per provider.

``python bench/bench_call_path.py [--calls 2000] [--concurrency 64]`` starts the stand-in in
its own process (no latency, so only the client's work is timed) and sends the same
``data2txt_spans``-sized request ``--calls`` times per provider through
:class:`~juryflow.judges.providers.openai.OpenAIClient` and
:class:`~juryflow.judges.providers.anthropic.AnthropicClient`, first with
``JURYFLOW_SDK_CALLS=1`` (every call built by the SDK) and then as juryflow calls by default
(the SDK builds the first request, the rest replay it). It prints this process's CPU time per
call (``time.process_time``, so the stand-in's share is not in it) and the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

import _common

from juryflow.judges.providers.anthropic import AnthropicClient
from juryflow.judges.providers.base import ModelRequest, SDKClient
from juryflow.judges.providers.openai import OpenAIClient
from juryflow.judges.ratelimit import reset_limiters
from juryflow.prompts.loader import load_template

_SAMPLE = Path(_common.SAMPLE)


async def _cpu_per_call(
    client: SDKClient[object], request: ModelRequest, calls: int, conc: int
) -> float:
    gate = asyncio.Semaphore(conc)

    async def one() -> None:
        async with gate:
            await client.complete(request)  # type: ignore[attr-defined]

    await asyncio.gather(*(one() for _ in range(conc)))  # pools warm, first requests built
    began = time.process_time()
    await asyncio.gather(*(one() for _ in range(calls)))
    spent = time.process_time() - began
    await client.aclose()
    return spent / calls * 1000


def _request() -> ModelRequest:
    import json

    row = json.loads(_SAMPLE.read_text(encoding="utf-8").splitlines()[0])
    static, per_item = load_template("data2txt_spans").render_parts(
        {"reference": str(row["reference"]), "response": str(row["response"])}
    )
    return ModelRequest(
        prompt=per_item,
        output_kind="spans",
        model="stub-spans-good",
        temperature=0.0,
        max_tokens=2048,
        timeout=60.0,
        structured=True,
        static_prompt=static,
        prompt_cache_key="juryflow-bench",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    print(f"machine: {_common.machine()}")
    stub, base = _common.start_stub_process(0.0)
    request = _request()
    try:
        for name, make in (
            ("openai", lambda: OpenAIClient(_common.FAKE_KEY, base_url=base + "/v1")),
            ("anthropic", lambda: AnthropicClient(_common.FAKE_KEY, base_url=base)),
        ):
            figures = {}
            for path, sdk_calls in (("SDK's whole path", "1"), ("lean replay", "")):
                os.environ["JURYFLOW_SDK_CALLS"] = sdk_calls
                reset_limiters()
                figures[path] = asyncio.run(
                    _cpu_per_call(make(), request, args.calls, args.concurrency)
                )
            sdk, lean = figures["SDK's whole path"], figures["lean replay"]
            print(
                f"{name}: {args.calls} calls, {args.concurrency} in flight: SDK's whole path "
                f"{sdk:.3f} ms CPU/call, lean replay {lean:.3f} ms ({lean / sdk:.2f}x)"
            )
    finally:
        os.environ.pop("JURYFLOW_SDK_CALLS", None)
        stub.terminate()
        stub.wait(10)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
