"""What a panel costs per item: real-time full price, batch, prompt caching, early stopping, all.

Issue 24. Three simulated span judges (``stub-sim-spans-...``, answering from the gold labels
of the dataset the stand-in is started with) judge ``--items`` items with the seed span
prompt over real HTTP, once per mode, each run on its own store:

- ``full``: real time, the seed prompt as the user wrote it (``data2txt_spans@v1``: the
  item first, so no provider can reuse a prefix), every judge on every item;
- ``cache``: ``data2txt_spans@v2`` (the same words, instructions first): Anthropic's
  ``cache_control`` and OpenAI's automatic prefix cache;
- ``batch``: ``--batch``, the providers' batch APIs at half price;
- ``early``: ``--early-stop`` (exact: the consensus is the full panel's), audit sample 0.1;
- ``all``: the three together.

USD per item comes from the usage the stand-in reports as the APIs do (input, output,
cache writes and reads) priced by the panel's price table (list prices of three small
models given to the simulated judges; batch at the providers' 50 %). Calls are the
stand-in's own count of model requests (in a batch: its requests). The consensus of every
mode is compared with the ``full`` run's on what the rule decides (status, score, verdict,
spans); the target is ``all`` at or under 0.35 x the ``full`` cost per item, identical.

Run: .venv/bin/python bench/bench_cost.py [--items 2000] [--modes full,cache,early,batch,all]
     [--dataset ../shared/data/ragtruth/data2txt_dev.jsonl]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from juryflow.planning.run_request import RunRequest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import KEY_ENV, REPO, machine, prefect_env, quiet, temp_dir

DEV = REPO.parent / "shared" / "data" / "ragtruth" / "data2txt_dev.jsonl"
TARGET = 0.35

# (judge id, provider, simulated quality, the list price it is billed at: input, output,
# cached input per million tokens). Cheapest first is the panel's order here too.
JUDGES = (
    ("strong", "openai", "stub-sim-spans-r0.8-f0.1-j0.2-n0.1", (0.25, 2.0, 0.025)),  # gpt-5-mini
    ("medium", "openai", "stub-sim-spans-r0.6-f0.3-j0.3-n0.2", (0.4, 1.6, 0.1)),  # gpt-4.1-mini
    ("weak", "anthropic", "stub-sim-spans-r0.4-f0.5-j0.4-n0.2-o0.3-b0.05", (1.0, 5.0, None)),
)

MODES: dict[str, dict[str, Any]] = {
    "full": {"prompt": "data2txt_spans@v1"},
    "cache": {"prompt": "data2txt_spans@v2"},
    "batch": {"prompt": "data2txt_spans@v1", "batch": True},
    "early": {"prompt": "data2txt_spans@v1", "early_stop": True},
    "all": {"prompt": "data2txt_spans@v2", "batch": True, "early_stop": True},
}

DECISION = (
    "SELECT c.item_id, c.status, c.score_median, c.hallucinated, c.unlocalised, "
    "list((s.char_start, s.char_end, s.text) ORDER BY s.char_start) "
    "FILTER (WHERE s.item_id IS NOT NULL) "
    "FROM consensus c LEFT JOIN consensus_spans s USING (run_id, item_id) "
    "WHERE c.run_id = ? GROUP BY ALL ORDER BY c.item_id"
)


@dataclass(frozen=True)
class Figures:
    mode: str
    usd_per_item: float
    calls: int
    seconds: float
    cache_read: int
    input_tokens: int
    decision: list[tuple[Any, ...]]


def cost_dataset(path: Path, n: int, source: Path, marked: str = "reference") -> Path:
    """``n`` rows cycling ``source``; a repeated row's ``marked`` column gets a marker of its
    copy, so that no two prompts are alike (a provider would serve a repeated prompt from its
    cache) while its responses, which the simulated judges look their labels up by, stay."""
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line]
    with path.open("w", encoding="utf-8") as out:
        for number in range(n):
            row = dict(rows[number % len(rows)])
            copy = number // len(rows)
            row["id"] = f"{row['id']}#{number}"
            if copy:
                row[marked] = f"(copy {copy}) {row[marked]}"
            out.write(json.dumps(row) + "\n")
    return path


def write_panel(
    path: Path,
    anthropic_url: str,
    openai_url: str,
    prompt: str,
    judges: tuple[tuple[str, str, str, tuple[float, float, float | None]], ...] = JUDGES,
) -> Path:
    """The panel of ``judges`` (id, provider, simulated model, list price) on the stand-in."""
    lines = ["name: cost-bench", "prices:"]
    for _, _, model, (inp, out, cached) in judges:
        read = f", cache_read: {cached}" if cached is not None else ""
        lines.append(f"  {model}: {{input: {inp}, output: {out}{read}}}")
    lines.append("judges:")
    for judge_id, provider, model, _ in judges:
        url = anthropic_url if provider == "anthropic" else openai_url
        lines.append(
            f"  - {{id: {judge_id}, provider: {provider}, model: {model}, prompt: {prompt}, "
            f"base_url: '{url}', api_key_env: {KEY_ENV}, max_concurrency: 64}}"
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_mode(mode: str, dataset: Path, gold: Any, tmp: Path) -> Figures:
    """One run on a stand-in of its own: no mode finds another's prompts in its cache."""
    from juryflow.standin.server import StubConfig, running_stub_server

    with running_stub_server(StubConfig(gold=gold)) as stub:
        return _run_mode(mode, dataset, stub, tmp)


def _run_mode(mode: str, dataset: Path, stub: Any, tmp: Path) -> Figures:
    from juryflow.flows.evaluate import evaluate
    from juryflow.storage.store import Store

    settings = dict(MODES[mode])
    panel = write_panel(
        tmp / f"{mode}.yaml", stub.anthropic_base_url, stub.openai_base_url, settings.pop("prompt")
    )
    db = tmp / f"{mode}.duckdb"
    stub.stats.reset()
    began = time.perf_counter()
    summary = asyncio.run(
        evaluate(
            RunRequest(
                dataset=str(dataset),
                panel=str(panel),
                db=str(db),
                use_cache=False,
                chunk_size=500,
                **settings,
            )
        )
    )
    seconds = time.perf_counter() - began
    calls = stub.stats.requests()
    run_id = summary["run_id"]
    with Store(db).read() as con:
        row = con.execute(
            "SELECT sum(cost_usd), coalesce(sum(cache_read_tokens), 0), sum(input_tokens), "
            "(SELECT count(*) FROM items WHERE run_id = $run) "
            "FROM judgments WHERE run_id = $run",
            {"run": run_id},
        ).fetchone()
        decision = con.execute(DECISION, [run_id]).fetchall()
    assert row is not None
    cost, cache_read, input_tokens, items = row
    return Figures(mode, cost / items, calls, seconds, cache_read, input_tokens, decision)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--dataset", type=Path, default=DEV)
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown or "full" not in modes:
        print(f"--modes: known {', '.join(MODES)}; 'full' is the reference", file=sys.stderr)
        return 2
    if not args.dataset.is_file():
        print(f"no dataset at {args.dataset}; pass --dataset a RAGTruth-style JSONL with labels")
        return 2

    with temp_dir("juryflow-bench-cost-") as tmp_name:
        tmp = Path(tmp_name)
        prefect_env(tmp)
        quiet()
        from prefect.testing.utilities import prefect_test_harness

        from juryflow.standin.server import load_gold

        dataset = cost_dataset(tmp / "items.jsonl", args.items, args.dataset)
        gold = load_gold(args.dataset)
        print(f"{machine()} · {args.items} items from {args.dataset.name} · 3 simulated judges")
        print()
        print("| mode | USD per item | x full | calls | cache reads / input tokens | "
              "seconds | consensus as full |")  # fmt: skip
        print("|---|---|---|---|---|---|---|")
        results: dict[str, Figures] = {}
        with prefect_test_harness(server_startup_timeout=180):
            for mode in ["full", *(m for m in modes if m != "full")]:
                figures = run_mode(mode, dataset, gold, tmp)
                results[mode] = figures
                full = results["full"]
                same = "yes" if figures.decision == full.decision else "NO"
                share = figures.cache_read / figures.input_tokens if figures.input_tokens else 0
                print(
                    f"| {mode} | {figures.usd_per_item:.6f} | "
                    f"{figures.usd_per_item / full.usd_per_item:.3f} | {figures.calls:,} | "
                    f"{share:.1%} | {figures.seconds:.1f} | {same} |",
                    flush=True,
                )
        if "all" in results:
            ratio = results["all"].usd_per_item / results["full"].usd_per_item
            identical = results["all"].decision == results["full"].decision
            met = ratio <= TARGET and identical
            print(f"\nall together: {ratio:.3f} x full (target <= {TARGET}), "
                  f"consensus {'identical' if identical else 'DIFFERENT'}: "
                  f"{'met' if met else 'not met'}")  # fmt: skip
        if "early" in results:
            saved = 1 - results["early"].calls / results["full"].calls
            print(f"early stopping: {saved:.1%} of calls saved (target >= 20 %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
