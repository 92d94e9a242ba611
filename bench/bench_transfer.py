"""A calibration made on one set of answers, applied to another: real judges' verdicts.

``../shared/data/realjudges/code_feedback.jsonl`` holds feedback written by six models on
students' programs, each line judged by 14 LLMs and a human. For each writer W this
imports the lines of the other five writers and of W as two runs (``juryflow import``, no
model called), calibrates on the first (``juryflow calibrate``: nested cross-validation),
applies the stored rule to the second (``juryflow reaggregate --calibration``: stacking
coefficients as stored, a Dawid–Skene rule refitted on W's own verdicts) and scores it
against W's human labels, beside the default rule, the judge that was best on the other
writers, and the best judge on W in hindsight. F1 on "invalid" feedback.

Run: ``.venv/bin/python bench/bench_transfer.py [--folds 5] [--seed 0]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")

SOURCE = ROOT.parent / "shared" / "data" / "realjudges" / "code_feedback.jsonl"


def _f1(store: object, run_id: str, sql: str) -> float:
    from juryflow.storage.store import Store

    assert isinstance(store, Store)
    row = store.query(sql, [run_id])[1][0]
    tp, fp, fn = (int(v or 0) for v in row)
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


CONSENSUS_COUNTS = """
SELECT count(*) FILTER (WHERE c.hallucinated AND i.gold_hallucinated),
       count(*) FILTER (WHERE c.hallucinated AND NOT i.gold_hallucinated),
       count(*) FILTER (WHERE NOT coalesce(c.hallucinated, false) AND i.gold_hallucinated)
FROM items i LEFT JOIN consensus c USING (run_id, item_id) WHERE i.run_id = ?
"""
JUDGE_COUNTS = """
SELECT j.judge_id,
       count(*) FILTER (WHERE j.score >= 0.5 AND i.gold_hallucinated),
       count(*) FILTER (WHERE j.score >= 0.5 AND NOT i.gold_hallucinated),
       (SELECT count(*) FROM items g WHERE g.run_id = i.run_id AND g.gold_hallucinated)
         - count(*) FILTER (WHERE j.score >= 0.5 AND i.gold_hallucinated)
FROM items i JOIN judgments j USING (run_id, item_id) WHERE i.run_id = ?
GROUP BY j.judge_id, i.run_id
"""


def _judge_f1s(store: object, run_id: str) -> dict[str, float]:
    from juryflow.storage.store import Store

    assert isinstance(store, Store)
    out = {}
    for judge, tp, fp, fn in store.query(JUDGE_COUNTS, [run_id])[1]:
        out[str(judge)] = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--source", default=str(SOURCE))
    args = parser.parse_args()
    source = Path(args.source)
    if not source.is_file():
        print(f"no recorded judgments at {source}", file=sys.stderr)
        return 2
    from bench._common import machine
    from juryflow.analysis.calibrate import run_calibration
    from juryflow.analysis.recorded_import import import_recorded
    from juryflow.analysis.recorded_rows import ImportOptions
    from juryflow.flows.reaggregate import reaggregate
    from juryflow.storage.store import Store

    print(machine())
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    writers = sorted({r["feedback_by"] for r in rows})
    options = ImportOptions(
        judges_map="judges_valid", label_column="human_valid", positive="false",
        group_column="source_id", text_column="feedback", row_ids=True,
    )  # fmt: skip
    print()
    print("| held-out writer | lines (invalid) | calibrated on the others, applied | default rule "
          "| the others' best judge | best judge in hindsight | rule kept |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    started = time.perf_counter()
    wins = 0
    with tempfile.TemporaryDirectory() as tmp:
        for writer in writers:
            store = Store(Path(tmp) / f"{writer}.duckdb")
            parts = {}
            for name, keep in (("train", lambda r, w=writer: r["feedback_by"] != w),
                               ("test", lambda r, w=writer: r["feedback_by"] == w)):  # fmt: skip
                path = Path(tmp) / f"{writer}-{name}.jsonl"
                path.write_text(
                    "".join(json.dumps(r) + "\n" for r in rows if keep(r)), encoding="utf-8"
                )
                parts[name] = import_recorded(store, path, options).run_id
            result, _ = run_calibration(
                store, parts["train"], "others", folds=args.folds, seed=args.seed
            )
            applied = asyncio.run(
                reaggregate(run_id=parts["test"], db=str(store.path), calibration="others")
            )
            calibrated = _f1(store, str(applied["run_id"]), CONSENSUS_COUNTS)
            default = _f1(store, parts["test"], CONSENSUS_COUNTS)
            trained = _judge_f1s(store, parts["train"])
            tested = _judge_f1s(store, parts["test"])
            best_trained = max(trained, key=lambda j: trained[j])
            hindsight = max(tested, key=lambda j: tested[j])
            invalid = sum(1 for r in rows if r["feedback_by"] == writer and not r["human_valid"])
            n = sum(1 for r in rows if r["feedback_by"] == writer)
            wins += calibrated >= max(default, tested[best_trained]) - 1e-12
            print(
                f"| {writer} | {n} ({invalid}) | **{calibrated:.3f}** | {default:.3f} | "
                f"{tested[best_trained]:.3f} ({best_trained}) | {tested[hindsight]:.3f} "
                f"({hindsight}) | {result.rule.verdict!s} |",
                flush=True,
            )
    print()
    print(
        f"calibrated ≥ the default and ≥ the others' best judge on {wins} of {len(writers)} "
        f"held-out writers · {time.perf_counter() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
