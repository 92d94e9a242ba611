"""Accuracy of the offline detectors against human labels (RAGTruth-style JSONL).

Runs the detectors of the offline panel that fits the data on every row and prints
response-level and span-level (character overlap, micro) precision / recall / F1 for each
detector, for the panel's own consensus (its rule, through ``item_consensus``, as a run
computes it), for "at least 2 detectors", and for flagging every response whole. The panel
follows the rows' ``task_type``: Data2txt ``examples/panel.offline.yaml``, QA
``examples/panel.offline-qa.yaml``, Summary ``examples/panel.offline-summary.yaml``
(``--panel`` names another; ``--all-detectors`` scores every registered detector too).
The same table is printed again for two halves of the sources (crc32 of ``source_id``, even
or odd), so that a change that only helps one half shows up; and the time per row.

``--apart [SAMPLE]`` prints it instead for the rows of PATH that are in SAMPLE (by ``id``;
default the bundled 60-row sample, which the detectors were tuned on) and for the rest, so
that tuning shows up as a gap between the two.

Run: .venv/bin/python bench/bench_detectors.py [PATH] [--panel PANEL] [--all-detectors]
[--no-question] [--apart [SAMPLE]] [--misses N]
(PATH defaults to ../shared/data/ragtruth/data2txt_dev.jsonl, else the bundled sample;
e.g. ../shared/data/ragtruth/qa_dev.jsonl, ../shared/data/ragtruth/summary_dev.jsonl.)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import machine
from juryflow.judges.detectors.registry import detector_names, get_detector
from juryflow.judges.offline import OfflineJudge
from juryflow.judges.panel import PanelSpec, load_panel
from juryflow.maths.consensus import (
    character_votes,
    item_consensus,
    majority_runs,
    snap_to_words,
)
from juryflow.maths.gold import PRF, response_prf, span_prf
from juryflow.maths.records import Item

REPO = Path(__file__).resolve().parents[1]
DEV = REPO.parent / "shared" / "data" / "ragtruth" / "data2txt_dev.jsonl"
SAMPLE = REPO / "examples" / "ragtruth_data2txt_sample.jsonl"
PANELS = {
    "data2txt": REPO / "examples" / "panel.offline.yaml",
    "qa": REPO / "examples" / "panel.offline-qa.yaml",
    "summary": REPO / "examples" / "panel.offline-summary.yaml",
}
"""The offline panel that fits each RAGTruth ``task_type`` (lower-cased)."""

Spans = list[tuple[int, int]]


@dataclass(frozen=True)
class Row:
    id: str
    source_id: str
    reference: str
    response: str
    gold: Spans
    hallucinated: bool
    task_type: str = "data2txt"


@dataclass(frozen=True)
class Predictions:
    """One row's spans from each detector, and the time each took."""

    spans: dict[str, Spans]
    seconds: dict[str, float]


def load(path: Path, question: bool = False) -> list[Row]:
    """The rows of ``path``; with ``question``, a QA row's question is put before its
    passages in the reference (as a dataset whose reference column holds both would)."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        raw = json.loads(line)
        gold = [(int(label["start"]), int(label["end"])) for label in raw.get("labels", [])]
        rows.append(
            Row(
                id=str(raw["id"]),
                source_id=str(raw.get("source_id", raw["id"])),
                reference=(
                    f"{raw['question']}\n\n{raw['reference']}"
                    if question and raw.get("question")
                    else raw["reference"]
                ),
                response=raw["response"],
                gold=gold,
                hallucinated=bool(raw.get("hallucinated", bool(gold))),
                task_type=str(raw.get("task_type", "data2txt")).lower(),
            )
        )
    return rows


def predict(rows: Sequence[Row], names: Sequence[str]) -> list[Predictions]:
    """Each detector's spans on each row; a panel judge is scored under its detector's name."""
    detectors = {name: get_detector(name) for name in names}
    out = []
    for row in rows:
        spans, seconds = {}, {}
        for name, detector in detectors.items():
            start = time.perf_counter()
            spans[name] = detector.detect(row.reference, row.response)
            seconds[name] = time.perf_counter() - start
        out.append(Predictions(spans, seconds))
    return out


def panel_for(rows: Sequence[Row], path: Path | None) -> tuple[Path, PanelSpec]:
    """The panel file named, else the one fitting the rows' (most common) task type."""
    if path is None:
        kinds = [row.task_type for row in rows]
        path = PANELS.get(max(set(kinds), key=kinds.count) if kinds else "", PANELS["data2txt"])
    return path, load_panel(path)


def consensus(panel: PanelSpec) -> Callable[[Row, Predictions], Spans]:
    """The panel's consensus spans, under its own rule, from its detectors' spans: the
    judgments are made by the judge a run uses (``OfflineJudge``), so this is a run's answer."""
    rule = panel.consensus_rule()
    judges = [
        (spec.id, OfflineJudge(spec.id, get_detector(str(spec.detector)))) for spec in panel.judges
    ]

    def combine(row: Row, pred: Predictions) -> Spans:
        item = Item(row.id, {"reference": row.reference, "response": row.response})
        judgments = []
        for judge_id, judge in judges:
            made = judge.judge_sync(item)
            # The detector already ran (and was timed) in ``predict``: reuse its spans.
            assert [(s.char_start, s.char_end) for s in made.spans] == pred.spans[
                str(judge.detector.name)
            ], judge_id
            judgments.append(made)
        result = item_consensus(
            row.id, judgments, len(judges), row.response, panel.quorum, rule=rule
        )
        if not result.hallucinated:
            return []
        # A verdict without spans (other rules) still counts as a flagged response.
        return [(s.char_start, s.char_end) for s in result.spans] or [(0, 0)]

    return combine


def at_least(min_votes: int) -> Callable[[Row, Predictions], Spans]:
    """Characters flagged by ``min_votes`` detectors or more, snapped to words and merged."""

    def combine(row: Row, pred: Predictions) -> Spans:
        votes = character_votes(list(pred.spans.values()), len(row.response))
        runs = majority_runs(votes, len(pred.spans), min_votes=min_votes)
        return snap_to_words(runs, row.response)

    return combine


def alone(name: str) -> Callable[[Row, Predictions], Spans]:
    """One detector's own spans."""

    def pick(_row: Row, pred: Predictions) -> Spans:
        return pred.spans[name]

    return pick


def everything(row: Row, _pred: Predictions) -> Spans:
    """The whole response: the baseline that flags every response."""
    return [(0, len(row.response))]


def systems(
    names: Sequence[str], panel: PanelSpec | None = None
) -> dict[str, Callable[[Row, Predictions], Spans]]:
    table = {name: alone(name) for name in names}
    if panel is not None:
        table[f"panel {panel.name}"] = consensus(panel)
    table["union (>= 1)"] = at_least(1)
    if len(names) > 1:
        table[">= 2 detectors"] = at_least(2)
    table["flag everything"] = everything
    return table


def scores(
    rows: Sequence[Row], preds: Sequence[Predictions], system: Callable[[Row, Predictions], Spans]
) -> tuple[PRF, PRF, int]:
    """Response PRF, span PRF and predicted characters of one system over ``rows``."""
    spans = [system(row, pred) for row, pred in zip(rows, preds, strict=True)]
    response = response_prf([bool(s) for s in spans], [row.hallucinated for row in rows])
    span = span_prf([[x for x in s if x[1] > x[0]] for s in spans], [row.gold for row in rows])
    return response, span, span.tp + span.fp


def _pct(prf: PRF) -> str:
    return f"{prf.precision:6.1%} {prf.recall:6.1%} {prf.f1:6.1%}"


def print_table(
    title: str,
    rows: Sequence[Row],
    preds: Sequence[Predictions],
    names: list[str],
    panel: PanelSpec | None = None,
) -> None:
    n_hall = sum(row.hallucinated for row in rows)
    gold_chars = sum(e - s for row in rows for s, e in row.gold)
    sources = len({row.source_id for row in rows})
    print(
        f"\n{title}: {len(rows)} rows, {sources} sources, {n_hall} hallucinated, "
        f"{gold_chars:,} gold chars"
    )
    print(f"{'system':<22} {'resp P':>6} {'resp R':>6} {'resp F1':>6} | "
          f"{'span P':>6} {'span R':>6} {'span F1':>6} | {'flagged':>7} {'chars':>7}")  # fmt: skip
    for label, system in systems(names, panel).items():
        response, span, chars = scores(rows, preds, system)
        n_flagged = response.tp + response.fp
        print(f"{label:<22} {_pct(response)}  | {_pct(span)}  | {n_flagged:7d} {chars:7,d}")


def print_misses(rows: Sequence[Row], preds: Sequence[Predictions], limit: int) -> None:
    """The union's false-positive and missed spans, for reading what the detectors get wrong."""
    union = at_least(1)
    shown = 0
    for row, pred in zip(rows, preds, strict=True):
        predicted = union(row, pred)
        gold_chars = {i for s, e in row.gold for i in range(s, e)}
        pred_chars = {i for s, e in predicted for i in range(s, e)}
        fps = [row.response[s:e] for s, e in predicted if not gold_chars & set(range(s, e))]
        fns = [row.response[s:e] for s, e in row.gold if not pred_chars & set(range(s, e))]
        for kind, texts in (("FP", fps), ("FN", fns)):
            for text in texts:
                if shown >= limit:
                    return
                print(f"{kind} {row.source_id}: {text!r}")
                shown += 1


def half(source_id: str) -> str:
    """A stable, unsupervised split of the sources (no dependence on their content)."""
    return "A" if zlib.crc32(source_id.encode()) % 2 == 0 else "B"


def groups(rows: Sequence[Row], apart: Path | None) -> list[tuple[str, Callable[[Row], bool]]]:
    """The subsets of ``rows`` scored on their own: the rows of ``apart`` and the rest, else
    the two halves of the sources."""
    if apart is None:
        return [
            (
                f"half {which} (crc32(source_id) {'even' if which == 'A' else 'odd'})",
                lambda row, which=which: half(row.source_id) == which,
            )
            for which in ("A", "B")
        ]
    ids = {row.id for row in load(apart)}
    return [
        (f"in {apart.name}", lambda row: row.id in ids),
        (f"not in {apart.name}", lambda row: row.id not in ids),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEV if DEV.exists() else SAMPLE)
    parser.add_argument("--misses", type=int, default=0, help="print N union FP/FN spans")
    parser.add_argument(
        "--panel",
        type=Path,
        default=None,
        help="offline panel whose detectors and consensus are scored (default: by task_type)",
    )
    parser.add_argument(
        "--no-question",
        dest="question",
        action="store_false",
        help="leave a QA row's question out of the reference (juryflow run puts it before "
        "the passages, as the offline judge does)",
    )
    parser.add_argument(
        "--all-detectors",
        action="store_true",
        help="score every registered detector, not only the panel's",
    )
    parser.add_argument(
        "--apart",
        nargs="?",
        type=Path,
        const=SAMPLE,
        default=None,
        metavar="SAMPLE",
        help="score the rows in SAMPLE (by id; default the bundled sample) and the rest apart",
    )
    args = parser.parse_args()
    print(f"machine: {machine()}")
    rows = load(args.path, question=args.question)
    panel_path, panel = panel_for(rows, args.panel)
    in_panel = [str(spec.detector) for spec in panel.judges]
    names = detector_names() if args.all_detectors else list(dict.fromkeys(in_panel))
    started = time.perf_counter()
    preds = predict(rows, names)
    elapsed = time.perf_counter() - started
    print(f"data: {args.path} ({len(rows)} rows); panel: {panel_path} ({panel.name}: "
          f"{panel.consensus_rule()}); detectors: {', '.join(names)}")  # fmt: skip
    # "union" and ">= 2" are over the detectors listed; the panel row is the panel's rule.
    print_table("all", rows, preds, names, panel)
    for title, keep in groups(rows, args.apart):
        picked = [i for i, row in enumerate(rows) if keep(row)]
        print_table(title, [rows[i] for i in picked], [preds[i] for i in picked], names, panel)
    print(f"\ntime: {elapsed / max(len(rows), 1) * 1e3:.2f} ms per row, all detectors")
    for name in names:
        mean = sum(p.seconds[name] for p in preds) / max(len(preds), 1)
        print(f"  {name:<10} {mean * 1e3:.3f} ms per row")
    if args.misses:
        print()
        print_misses(rows, preds, args.misses)


if __name__ == "__main__":
    main()
