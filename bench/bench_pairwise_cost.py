"""What a pairwise panel costs per pair: real time, batch, early stopping, both (issue 42).

The README's pairwise panel (three simulated pairwise judges, each asked in both orders)
over the bundled pairs (`examples/ragtruth_pairs_sample.jsonl`, 30 pairs) cycled to
``--pairs`` rows, a repeated row's input marked with its copy number so that no two prompts
are alike. USD from the usage the stand-in reports as the APIs do (input, output, cache
writes and reads; batch), at the list prices of gpt-5-mini, gpt-4.1-mini (with their
cached-input prices) and claude-haiku-4-5 given to the three simulated models. Calls are
the stand-in's count of model requests (in a batch: its requests). "Consensus as full"
compares each pair's stored preference and status with the real-time run.

Run: JURYFLOW_BATCH_POLL_SECONDS=0.5 .venv/bin/python bench/bench_pairwise_cost.py [--pairs 300]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, SAMPLE, machine, prefect_env, quiet, temp_dir
from bench_cost import cost_dataset, write_panel

PAIRS = REPO / "examples" / "ragtruth_pairs_sample.jsonl"

# (judge id, provider, simulated pairwise judge, list price: input, output, cached input)
JUDGES = (
    ("steady", "anthropic", "stub-sim-pair-a0.9", (1.0, 5.0, None)),  # claude-haiku-4-5
    ("first-pick", "openai", "stub-sim-pair-a0.9-P0.3", (0.25, 2.0, 0.025)),  # gpt-5-mini
    ("coin", "openai", "stub-sim-pair-a0.6-P0.1", (0.4, 1.6, 0.1)),  # gpt-4.1-mini
)
MODES: dict[str, dict[str, Any]] = {
    "full": {},
    "batch": {"batch": True},
    "early": {"early_stop": True},
    "all": {"batch": True, "early_stop": True},
}
DECISION = "SELECT item_id, status, score FROM consensus WHERE run_id = ? ORDER BY item_id"


def run_mode(mode: str, dataset: Path, gold: Any, tmp: Path) -> dict[str, Any]:
    """One run on a stand-in of its own: no mode finds another's prompts in its cache."""
    from juryflow.flows.evaluate import evaluate
    from juryflow.planning.run_request import RunRequest
    from juryflow.standin.server import StubConfig, running_stub_server
    from juryflow.storage.store import Store

    with running_stub_server(StubConfig(gold=gold)) as stub:
        urls = (stub.anthropic_base_url, stub.openai_base_url)
        panel = write_panel(tmp / f"{mode}.yaml", *urls, "pairwise_preference", JUDGES)
        db = tmp / f"{mode}.duckdb"
        began = time.perf_counter()
        request = RunRequest(
            dataset=str(dataset), panel=str(panel), db=str(db), use_cache=False, **MODES[mode]
        )
        run_id = asyncio.run(evaluate(request))["run_id"]
        seconds = time.perf_counter() - began
        calls = stub.stats.requests()
    with Store(db).read() as con:
        row = con.execute(
            "SELECT sum(cost_usd), (SELECT count(*) FROM items WHERE run_id = $run) "
            "FROM judgments WHERE run_id = $run",
            {"run": run_id},
        ).fetchone()
        decision = con.execute(DECISION, [run_id]).fetchall()
    assert row is not None
    cost, pairs = row
    return {"usd": cost / pairs, "calls": calls, "seconds": seconds, "decision": decision}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=300)
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if any(m not in MODES for m in modes):
        print(f"--modes: known {', '.join(MODES)}", file=sys.stderr)
        return 2
    with temp_dir("juryflow-bench-pairwise-cost-") as tmp_name:
        tmp = Path(tmp_name)
        prefect_env(tmp)
        quiet()
        from prefect.testing.utilities import prefect_test_harness

        from juryflow.standin.server import load_gold

        dataset = cost_dataset(tmp / "pairs.jsonl", args.pairs, PAIRS, marked="input")
        gold = load_gold(SAMPLE)
        print(f"{machine()} · {args.pairs} pairs · 3 simulated pairwise judges, both orders")
        print()
        print("| mode | USD per pair | x full | calls | seconds | consensus as full |")
        print("|---|---|---|---|---|---|")
        results: dict[str, dict[str, Any]] = {}
        with prefect_test_harness(server_startup_timeout=180):
            for mode in ["full", *(m for m in modes if m != "full")]:
                figures = results[mode] = run_mode(mode, dataset, gold, tmp)
                full = results["full"]
                same = "yes" if figures["decision"] == full["decision"] else "NO"
                print(
                    f"| {mode} | {figures['usd']:.6f} | {figures['usd'] / full['usd']:.3f} | "
                    f"{figures['calls']:,} | {figures['seconds']:.1f} | {same} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
