"""Does the calibrated panel beat its default rule and its best judge? Out-of-fold figures on
the RAGTruth dev samples (data-to-text, QA, summary) and on recorded verdicts of real LLM
judges with human labels (``../shared/data/realjudges/``).

For each dataset and each panel (three simulated span judges of unequal quality, five
simulated span judges, three simulated score judges, all over real HTTP through the
official SDKs against the stand-in server driven by the dataset's gold labels; and the
offline panel that fits the rows: the embedded one, or the QA or summary one) this runs
``evaluate``, then ``juryflow calibrate`` (nested cross-validation, outer folds grouped by
source), and prints response F1 and character span F1, each with its 95 % bootstrap
interval (sources resampled), of:

- the calibrated rule, out of fold (never scored on the items it was fitted on),
- the panel's default rule (median / majority, or the offline panel's union),
- every single judge (all items; no answer counts as flagging nothing).

The real judges' verdicts (14 LLMs on 4,109 lines of code feedback; F1 on "invalid") come in
through ``juryflow import`` as the README shows it, then the same ``juryflow calibrate``.

Run: ``.venv/bin/python bench/bench_consensus.py [DATASET ...] [--folds 5] [--seed 0]
[--panel 3span ...] [--real-judges PATH|'']``
(default: ``data2txt_dev``, ``qa_dev`` and ``summary_dev`` from ``../shared/data/ragtruth/``).
The last lines say, per dataset and panel, whether the calibrated rule is at least the
default rule and at least the best judge on both F1s, and by how much it trails otherwise.
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
from typing import Any

from juryflow.planning.run_request import RunRequest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("JURYFLOW_STUB_KEY", "stand-in")

SHARED = ROOT.parent / "shared" / "data" / "ragtruth"
REAL_JUDGES = ROOT.parent / "shared" / "data" / "realjudges" / "code_feedback.jsonl"
REAL_JUDGES_IMPORT = {
    "judges_map": "judges_valid",
    "label_column": "human_valid",
    "positive": "false",
    "group_column": "source_id",
    "text_column": "feedback",
    "row_ids": True,
}
"""``juryflow import``'s options for code_feedback.jsonl, as the README gives them."""
DEFAULT_DATASETS = tuple(SHARED / f"{task}_dev.jsonl" for task in ("data2txt", "qa", "summary"))
PANELS = {
    "3span": ("3 span judges (sim)", ROOT / "examples" / "panel.sim-3span.yaml"),
    "5span": ("5 span judges (sim)", ROOT / "examples" / "panel.sim-5span.yaml"),
    "3score": ("3 score judges (sim)", ROOT / "examples" / "panel.sim-3score.yaml"),
    "offline": ("offline panel", None),  # the one that fits the rows' task_type: offline_panel
}
OFFLINE_PANELS = {
    "qa": ROOT / "examples" / "panel.offline-qa.yaml",
    "summary": ROOT / "examples" / "panel.offline-summary.yaml",
}
"""The offline panel for free-text sources, by the rows' ``task_type``; data-to-text rows
(and any other) get the embedded default panel."""


def offline_panel(dataset: Path) -> Path | None:
    """The offline panel that fits ``dataset``, read from its first row's ``task_type``."""
    with dataset.open(encoding="utf-8") as rows:
        first = json.loads(next((line for line in rows if line.strip()), "{}"))
    return OFFLINE_PANELS.get(str(first.get("task_type", "")).lower())


STUB_PORT = 8765  # the port the example panels name


def _fmt(prf: dict[str, Any] | None) -> str:
    if prf is None:
        return "—"
    low, high = prf.get("f1_interval") or (prf["f1"], prf["f1"])
    return f"{100 * prf['f1']:.1f} ({100 * low:.0f}–{100 * high:.0f})"


def _f1(prf: dict[str, Any] | None) -> float | None:
    return None if prf is None else float(prf["f1"])


def _interval(value: float, interval: list[float] | None) -> str:
    if interval is None:
        return f"{100 * value:+.1f}"
    return f"{100 * value:+.1f} ({100 * interval[0]:+.1f} to {100 * interval[1]:+.1f})"


def _verdict(task: str, label: str, report: dict[str, Any]) -> tuple[bool, str]:
    """Is the calibrated rule at least the default rule and at least the best judge, on
    response F1 and on span F1? Where it trails, the line gives the difference with its
    95 % paired bootstrap interval (``juryflow calibrate``'s)."""
    predictors = report["predictors"]
    calibrated = next(p for p in predictors if p["kind"] == "calibrated")
    default = next(p for p in predictors if p["kind"] == "default")
    judges = [p for p in predictors if p["kind"] == "judge"]
    versus_judge = report["differences"][1] if len(report["differences"]) > 1 else None
    checks: dict[str, list[str]] = {"default": [], "best judge": []}
    for family, key in (("response", "response"), ("spans", "span")):
        ours = _f1(calibrated[family])
        if ours is None:
            continue
        theirs = _f1(default[family])
        if theirs is not None and ours < theirs - 1e-9:
            checks["default"].append(f"{family} F1 {100 * (ours - theirs):+.1f}")
        scored = [(p["name"], f1) for p in judges if (f1 := _f1(p[family])) is not None]
        if scored and versus_judge is not None:
            name, best = max(scored, key=lambda r: r[1])
            if ours < best - 1e-9:
                gap = _interval(ours - best, versus_judge[f"{key}_interval"])
                checks["best judge"].append(f"{family} F1 {gap} vs {name}")
    parts = [
        f"≥ {rival}" if not gaps else f"BELOW {rival}: {'; '.join(gaps)}"
        for rival, gaps in checks.items()
    ]
    return not any(checks.values()), f"{task} · {label}: " + " · ".join(parts)


def _print_rows(task: str, label: str, report: dict[str, Any]) -> None:
    for row in report["predictors"]:
        cov = "" if row["coverage"] is None else f"{100 * row['coverage']:.0f} %"
        print(
            f"| {task} | {label} | {row['name']} | {cov} | "
            f"{_fmt(row['response'])} | {_fmt(row['spans'])} |"
        )
    print(f"| {task} | {label} | kept: {report['rule']} | | | |", flush=True)


def _real_judges(
    path: Path, tmp: Path, args: argparse.Namespace, notes: list[str]
) -> tuple[bool, str]:
    """Recorded real judges: imported (no model called), then calibrated."""
    from juryflow.analysis.calibrate import run_calibration
    from juryflow.analysis.recorded_import import import_recorded
    from juryflow.analysis.recorded_rows import ImportOptions
    from juryflow.storage.store import Store

    started = time.perf_counter()
    store = Store(tmp / "real-judges.duckdb")
    imported = import_recorded(store, path, ImportOptions(**REAL_JUDGES_IMPORT))  # type: ignore[arg-type]
    _, record = run_calibration(store, imported.run_id, "bench", folds=args.folds, seed=args.seed)
    task, label = path.stem, f"{imported.judges} real LLM judges"
    _print_rows(task, label, record.report)
    cheapest = (record.report.get("subsets") or {}).get("cheapest")
    if cheapest is not None:
        print(
            f"| {task} | {label} | cheapest subset within noise: majority of "
            f"{', '.join(cheapest['judges'])} | | {100 * cheapest['response_f1']:.1f} | |"
        )
    notes += [f"{task} · {label}: {n}" for n in record.report["notes"]]
    print(f"<!-- {task} · {label}: {time.perf_counter() - started:.1f} s -->")
    return _verdict(task, label, record.report)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("datasets", nargs="*", default=[str(p) for p in DEFAULT_DATASETS])
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--real-judges", default=str(REAL_JUDGES),
        help="recorded real judges' verdicts to import and calibrate ('' to skip)",
    )  # fmt: skip
    parser.add_argument(
        "--panel", action="append", choices=list(PANELS), dest="panels",
        help="only this panel (repeat for more; default: all four)",
    )  # fmt: skip
    args = parser.parse_args()
    datasets = [Path(d) for d in args.datasets]
    missing = [str(d) for d in datasets if not d.is_file()]
    if missing:
        print(
            f"no dataset at {', '.join(missing)}; pass RAGTruth-style JSONL paths", file=sys.stderr
        )
        return 2

    from bench._common import machine
    from juryflow.analysis.calibrate import run_calibration
    from juryflow.flows.evaluate import evaluate
    from juryflow.standin.server import StubConfig, load_gold, running_stub_server
    from juryflow.storage.store import Store

    print(machine())
    print(
        f"{args.folds}-fold cross-validation grouped by source (inner: 3 folds inside each "
        "training set); F1 in %, 95 % interval with sources resampled"
    )
    print()
    print("| dataset | panel | predictor | coverage | response F1 | span F1 |")
    print("|---|---|---|---|---|---|")
    verdicts: list[tuple[bool, str]] = []
    notes: list[str] = []
    started_all = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for dataset in datasets:
            task = dataset.stem
            config = StubConfig(gold=load_gold(dataset), seed=args.seed)
            with running_stub_server(config, port=STUB_PORT):
                for label, listed in (PANELS[key] for key in args.panels or PANELS):
                    panel = listed if listed is not None else offline_panel(dataset)
                    started = time.perf_counter()
                    db = str(Path(tmp) / f"{task}-{len(verdicts)}.duckdb")
                    summary = asyncio.run(
                        evaluate(
                            RunRequest(
                                dataset=str(dataset), panel=str(panel) if panel else None, db=db
                            )
                        )
                    )
                    _, record = run_calibration(
                        Store(db), summary["run_id"], "bench", folds=args.folds, seed=args.seed
                    )
                    _print_rows(task, label, record.report)
                    notes += [f"{task} · {label}: {n}" for n in record.report["notes"]]
                    verdicts.append(_verdict(task, label, record.report))
                    print(f"<!-- {task} · {label}: {time.perf_counter() - started:.1f} s -->")
        real = Path(args.real_judges) if args.real_judges else None
        if real is not None and real.is_file():
            verdicts.append(_real_judges(real, Path(tmp), args, notes))
    print()
    for note in notes:
        print(note)
    print()
    for _, line in verdicts:
        print(line)
    reached = sum(ok for ok, _ in verdicts)
    print(
        f"{reached} of {len(verdicts)} calibrated panels ≥ their default rule and best judge "
        f"on both F1s · {time.perf_counter() - started_all:.0f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
