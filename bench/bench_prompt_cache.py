"""Input cost per item with and without prompt caching (issue 24, point 2).

Usage: .venv/bin/python bench/bench_prompt_cache.py [--dataset FILE]
           [--models claude-sonnet-4-5,gpt-4.1-mini,gpt-5-mini]

Runs ``juryflow run`` twice on the dataset with a panel of LLM judges (one per model; names
starting ``claude`` on the Anthropic API, the others on OpenAI's with no ``base_url``, so
they get ``prompt_cache_key``, the SDK being pointed at the stand-in by OPENAI_BASE_URL),
all answering from one ``juryflow.standin.server`` that caches prefixes as the APIs do:
once with ``data2txt_spans@v1`` (the seed prompt: the item first, nothing cacheable) and
once with ``data2txt_spans`` (v2: the instructions first, cached). It prints, per judge and
for the panel, the input tokens, the share of them read from the cache, and the input cost
per item (uncached input, cache writes and cache reads at the built-in prices), read from
the stored judgments. Token counts are the stand-in's (four characters a token); the calls
are made 8 at a time per judge, and the stand-in counts a prefix as written once its first
call is answered (the APIs may write it once per call in flight before then).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import machine
from juryflow.judges.pricing import price_for
from juryflow.standin.server import StubConfig, running_stub_server
from juryflow.storage.store import Store

REPO = Path(__file__).resolve().parents[1]


def _panel(path: Path, models: list[str], prompt: str, anthropic_url: str) -> None:
    lines = ["name: cache-bench", "judges:"]
    for k, model in enumerate(models):
        where = f', base_url: "{anthropic_url}"' if model.startswith("claude") else ""
        provider = "anthropic" if model.startswith("claude") else "openai"
        lines.append(
            f"  - {{id: j{k}-{model}, provider: {provider}, model: {model}, prompt: {prompt}"
            f"{where}}}"
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _run(dataset: Path, models: list[str], prompt: str, work: Path, stub_url: str) -> Path:
    panel, db = work / f"{prompt}.yaml", work / f"{prompt.replace('@', '-')}.duckdb"
    _panel(panel, models, prompt, stub_url)
    env = {**os.environ, "OPENAI_BASE_URL": stub_url + "/v1"}
    env.setdefault("ANTHROPIC_API_KEY", "sk-bench-not-a-key")
    env.setdefault("OPENAI_API_KEY", "sk-bench-not-a-key")
    command = [sys.executable, "-m", "juryflow", "run", str(dataset), "--panel", str(panel)]
    subprocess.run([*command, "--db", str(db), "--no-cache"], env=env, check=True, cwd=REPO,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    return db


def _figures(db: Path) -> dict[str, tuple[int, int, int, int, float]]:
    """Per judge: items, input tokens, cache writes, cache reads, input USD."""
    _, rows = Store(db).query(
        "SELECT judge_id, any_value(model), count(*), sum(input_tokens), "
        "coalesce(sum(cache_write_tokens), 0), coalesce(sum(cache_read_tokens), 0) "
        "FROM judgments GROUP BY judge_id ORDER BY judge_id"
    )
    figures = {}
    for judge, model, items, tokens_in, written, read in rows:
        price = price_for(str(model))
        assert price is not None, f"no built-in price for {model}"
        usd = price.cost(int(tokens_in), 0, cache_write_tokens=written, cache_read_tokens=read)
        figures[str(judge)] = (int(items), int(tokens_in), int(written), int(read), usd)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="claude-sonnet-4-5,gpt-4.1-mini,gpt-5-mini")
    parser.add_argument("--dataset", default=str(REPO / "examples/ragtruth_data2txt_sample.jsonl"))
    args = parser.parse_args()
    print(f"machine: {machine()}")
    models = args.models.split(",")
    with tempfile.TemporaryDirectory() as tmp, running_stub_server(StubConfig()) as stub:
        results = {
            prompt: _figures(_run(Path(args.dataset), models, prompt, Path(tmp), stub.base_url))
            for prompt in ("data2txt_spans@v1", "data2txt_spans")
        }
    print(f"{'judge':<26} {'prompt':<18} {'input tok/item':>14} {'cache read':>10} "
          f"{'cache write':>11} {'input $/item':>13}")  # fmt: skip
    totals = {}
    for prompt, figures in results.items():
        total = 0.0
        for judge, (items, tokens_in, written, read, usd) in figures.items():
            total += usd / items
            print(f"{judge:<26} {prompt:<18} {tokens_in / items:>14,.0f} {read / tokens_in:>10.1%} "
                  f"{written / tokens_in:>11.1%} {usd / items:>13.6f}")  # fmt: skip
        totals[prompt] = total
    before, after = totals["data2txt_spans@v1"], totals["data2txt_spans"]
    print(f"panel input $/item: {before:.6f} without caching (v1), {after:.6f} with (v2): "
          f"{after / before:.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
