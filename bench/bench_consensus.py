"""Does the panel beat its best judge? Out-of-fold figures on the RAGTruth dev sample.

For each panel (three simulated span judges of unequal quality, five simulated span judges,
three simulated score judges, all over real HTTP through the official SDKs against the
stand-in server driven by the dataset's gold labels; and the embedded offline panel) this
runs ``evaluate`` on the dataset, then ``juryflow calibrate`` (grouped 5-fold cross-validation
by source), and prints response F1 and character span F1 of:

- the calibrated rule, out of fold (never scored on the items it was fitted on),
- the panel's default rule (median / majority, or the offline panel's union),
- every single judge (all items; no answer counts as flagging nothing).

Run: ``.venv/bin/python bench/bench_consensus.py [DATASET] [--folds 5] [--seed 0]``
(default dataset: ``../shared/data/ragtruth/data2txt_dev.jsonl``). It prints figures; the
last line says whether every calibrated panel reached its best single judge on both.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("JURYFLOW_STUB_KEY", "stand-in")

DEFAULT_DATASET = ROOT.parent / "shared" / "data" / "ragtruth" / "data2txt_dev.jsonl"
PANELS = (
    ("3 span judges (sim)", ROOT / "examples" / "panel.sim-3span.yaml"),
    ("5 span judges (sim)", ROOT / "examples" / "panel.sim-5span.yaml"),
    ("3 score judges (sim)", ROOT / "examples" / "panel.sim-3score.yaml"),
    ("offline panel", None),
)
STUB_PORT = 8765  # the port the example panels name


def _fmt(prf: dict[str, float] | None) -> str:
    return "—" if prf is None else f"{100 * prf['f1']:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", nargs="?", default=str(DEFAULT_DATASET))
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    dataset = Path(args.dataset)
    if not dataset.is_file():
        print(f"no dataset at {dataset}; pass a RAGTruth-style JSONL path", file=sys.stderr)
        return 2

    from juryflow.analysis.calibrate import run_calibration
    from juryflow.flows.evaluate import evaluate
    from juryflow.standin.server import StubConfig, load_gold, running_stub_server
    from juryflow.storage.store import Store

    print(f"dataset {dataset} · {args.folds}-fold cross-validation grouped by source")
    print()
    print("| panel | predictor | coverage | response F1 | span F1 |")
    print("|---|---|---|---|---|")
    verdicts: list[str] = []
    config = StubConfig(gold=load_gold(dataset), seed=args.seed)
    with tempfile.TemporaryDirectory() as tmp, running_stub_server(config, port=STUB_PORT):
        for label, panel in PANELS:
            started = time.perf_counter()
            db = str(Path(tmp) / f"{label.split()[0]}-{len(verdicts)}.duckdb")
            summary = asyncio.run(
                evaluate(dataset=str(dataset), panel=str(panel) if panel else None, db=db)
            )
            _, record = run_calibration(
                Store(db), summary["run_id"], "bench", folds=args.folds, seed=args.seed
            )
            predictors = record.report["predictors"]
            for row in predictors:
                coverage = "" if row["coverage"] is None else f"{100 * row['coverage']:.0f} %"
                print(
                    f"| {label} | {row['name']} | {coverage} | {_fmt(row['response'])} | "
                    f"{_fmt(row['spans'])} |"
                )
            calibrated = predictors[0]
            judges = [p for p in predictors if p["kind"] == "judge"]
            best_response = max(p["response"]["f1"] for p in judges)
            ok = calibrated["response"]["f1"] >= best_response - 1e-9
            if calibrated["spans"] is not None:
                best_span = max(p["spans"]["f1"] for p in judges if p["spans"] is not None)
                ok = ok and calibrated["spans"]["f1"] >= best_span - 1e-9
            verdicts.append(f"{label}: {'beats or ties' if ok else 'BELOW'} its best judge")
            print(
                f"| {label} | rule chosen on all items: {record.report['rule']} | | | |",
                flush=True,
            )
            print(f"<!-- {label}: {time.perf_counter() - started:.1f} s -->", flush=True)
    print()
    for line in verdicts:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
