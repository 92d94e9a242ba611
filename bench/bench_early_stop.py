"""Calls early stopping saves on the dev sample, exact and lossy, and what each costs in quality.

Issue 24's target: "early stopping saves >= 20 % of calls on the dev sample with three
simulated span judges, and the consensus table is identical to the full run's". Three
simulated span judges (``examples/panel.sim-3span.yaml``: strong, medium, weak, called in
that order) judge the dev rows over real HTTP, once per mode, each on its own store:

- ``full``: every judge on every item (the reference);
- ``exact``: ``early_stop: true`` (the consensus is proved the full panel's), with no audit
  sample and with the default 0.1;
- ``lossy``: ``early_stop: true`` plus ``lossy_agreement`` as ``juryflow calibrate`` chose it
  out of fold on the ``full`` run (5 folds grouped by source), with no audit sample and 0.1.

For each: the stand-in's count of model requests, the share saved, how many items' consensus
(status, score, verdict, spans) equals the full run's, and the consensus's response and span
F1 against the human labels (``juryflow agreement``'s accuracy table).

Run: .venv/bin/python bench/bench_early_stop.py [--dataset PATH]
(PATH defaults to ../shared/data/ragtruth/data2txt_dev.jsonl.)
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from juryflow.planning.run_request import RunRequest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, machine, prefect_env, quiet, temp_dir
from bench_cost import DECISION

DEV = REPO.parent / "shared" / "data" / "ragtruth" / "data2txt_dev.jsonl"
KEY_ENV = "JURYFLOW_BENCH_EARLY_KEY"
JUDGES = (
    ("strong", "anthropic", "stub-sim-spans-r0.8-f0.1-j0.2-n0.1"),
    ("medium", "openai", "stub-sim-spans-r0.6-f0.3-j0.3-n0.2"),
    ("weak", "openai", "stub-sim-spans-r0.4-f0.5-j0.4-n0.2-o0.3-b0.05"),
)


def write_panel(path: Path, stub: Any, extra: str) -> Path:
    lines = ["name: sim-3span", "judge_order: panel", "judges:"]
    for judge_id, provider, model in JUDGES:
        url = stub.anthropic_base_url if provider == "anthropic" else stub.openai_base_url
        lines.append(
            f"  - {{id: {judge_id}, provider: {provider}, model: '{model}', "
            f"prompt: data2txt_spans, base_url: '{url}', api_key_env: {KEY_ENV}}}"
        )
    path.write_text("\n".join(lines) + "\n" + extra, encoding="utf-8")
    return path


def run(dataset: Path, stub: Any, tmp: Path, name: str, extra: str) -> dict[str, Any]:
    from juryflow.analysis.agreement_report import agreement_report
    from juryflow.flows.evaluate import evaluate
    from juryflow.storage.store import Store

    panel = write_panel(tmp / f"{name}.yaml", stub, extra)
    db = tmp / f"{name}.duckdb"
    stub.stats.reset()
    summary = asyncio.run(
        evaluate(RunRequest(dataset=str(dataset), panel=str(panel), db=str(db), use_cache=False))
    )
    calls = stub.stats.requests()
    with Store(db).read() as con:
        decision = con.execute(DECISION, [summary["run_id"]]).fetchall()
    accuracy = agreement_report(Store(db), summary["run_id"]).accuracy_table().to_pylist()
    consensus = next(row for row in accuracy if row["predictor"] == "consensus")
    return {
        "db": db,
        "run_id": summary["run_id"],
        "calls": calls,
        "decision": decision,
        "response_f1": consensus["response_f1"],
        "span_f1": consensus["span_f1"],
        "lossy_items": summary.get("items_stopped_lossy") or 0,
    }


def oracle_bound(db: Path, run_id: str) -> tuple[int, int, int]:
    """Items some pair of judges decides, items the best fixed pair decides, and items.

    The most any exact early stop could leave out on this run is one call on each item that
    some pair decides: even an oracle that knew, per item, which two judges to call first
    could save no more (a single judge never fixes a strict majority of three)."""
    from itertools import combinations

    from juryflow.maths.early_stop import JudgeShape, is_decided
    from juryflow.maths.reducers import ConsensusRule
    from juryflow.storage.store import Store

    store = Store(db)
    record = store.get_run(run_id)
    assert record is not None
    rule = ConsensusRule.from_dict(record.consensus or {})
    texts = {item.item_id: item.text("response") for item in store.load_items(run_id)}
    by_item: dict[str, dict[str, Any]] = {item_id: {} for item_id in texts}
    for judgment in store.load_judgments(run_id):
        by_item[judgment.item_id][judgment.judge_id] = judgment
    judges = [judge_id for judge_id, _, _ in JUDGES]
    per_pair = dict.fromkeys(combinations(judges, 2), 0)
    some_pair = 0
    for item_id, answers in by_item.items():
        deciding = False
        threshold = next(iter(answers.values())).verdict_threshold
        for pair in per_pair:
            (third,) = (j for j in judges if j not in pair)
            called = [answers[j] for j in pair if j in answers]
            shape = JudgeShape(third, "spans", threshold)
            if is_decided(item_id, called, [shape], 3, texts[item_id], record.quorum, rule):
                per_pair[pair] += 1
                deciding = True
        some_pair += deciding
    return some_pair, max(per_pair.values()), len(by_item)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DEV)
    args = parser.parse_args()
    if not args.dataset.is_file():
        print(f"no dataset at {args.dataset}; pass --dataset a RAGTruth-style JSONL with labels")
        return 2
    import os

    os.environ[KEY_ENV] = "sk-bench-early-stop"
    with temp_dir("juryflow-bench-early-") as tmp_name:
        tmp = Path(tmp_name)
        prefect_env(tmp)
        quiet()
        from prefect.testing.utilities import prefect_test_harness

        from juryflow.analysis.calibrate import run_calibration
        from juryflow.standin.server import StubConfig, load_gold, running_stub_server
        from juryflow.storage.store import Store

        rows = sum(1 for line in args.dataset.open(encoding="utf-8") if line.strip())
        print(f"{machine()} · {rows} rows of {args.dataset.name} · 3 simulated span judges")
        with (
            prefect_test_harness(server_startup_timeout=180),
            running_stub_server(StubConfig(gold=load_gold(args.dataset))) as stub,
        ):
            full = run(args.dataset, stub, tmp, "full", "")
            some_pair, best_pair, items = oracle_bound(full["db"], full["run_id"])
            print(
                f"exact bound: the best fixed pair decides {best_pair} of {items} items "
                f"({best_pair / (3 * items):.1%} of the calls saved); some pair decides "
                f"{some_pair} ({some_pair / (3 * items):.1%}), the most any exact order, "
                "even one that knew the answers, could save"
            )
            _, record = run_calibration(Store(full["db"]), full["run_id"], "bench-lossy")
            lossy = record.report["lossy_stop"]
            agreement = lossy["agreement"]
            print(
                f"calibrate (out of fold, folds chose {lossy['fold_agreements']}): "
                f"{100 * lossy['calls_saved']:.1f} % of calls saved; response F1 "
                f"{lossy['response_full']:.1f} -> {lossy['response_lossy']:.1f}, span F1 "
                f"{lossy['span_full']:.1f} -> {lossy['span_lossy']:.1f}"
            )
            modes = [
                ("exact, audit 0", "early_stop: true\naudit_fraction: 0\n"),
                ("exact, audit 0.1", "early_stop: true\naudit_fraction: 0.1\n"),
            ]
            if agreement is not None:
                lossy_keys = f"early_stop: true\nlossy_agreement: {agreement}\n"
                modes += [
                    (f"lossy {agreement:g}, audit 0", lossy_keys + "audit_fraction: 0\n"),
                    (f"lossy {agreement:g}, audit 0.1", lossy_keys + "audit_fraction: 0.1\n"),
                ]
            print()
            print("| mode | calls | saved | items as full | lossy items | response F1 | span F1 |")
            print("|---|---|---|---|---|---|---|")
            line = "| {} | {:,} | {:.1%} | {} of {} | {} | {:.1f} | {:.1f} |"
            n = len(full["decision"])
            print(line.format("full", full["calls"], 0.0, n, n, 0,
                              100 * full["response_f1"], 100 * full["span_f1"]))  # fmt: skip
            for k, (name, extra) in enumerate(modes):
                figures = run(args.dataset, stub, tmp, f"mode{k}", extra)
                same = sum(
                    a == b for a, b in zip(figures["decision"], full["decision"], strict=True)
                )
                print(
                    line.format(
                        name, figures["calls"], 1 - figures["calls"] / full["calls"], same, n,
                        figures["lossy_items"], 100 * figures["response_f1"],
                        100 * figures["span_f1"],
                    ),
                    flush=True,
                )  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
