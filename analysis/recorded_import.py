"""`juryflow import FILE`: judgments made elsewhere become a run of the store, so that every
analysis (agreement, disagreements, calibrate, reaggregate, view, the SQL views) reads them
as it reads a run's.

The file's rows (:mod:`juryflow.analysis.recorded_rows`) become :class:`Item` and
:class:`Judgment` records of ``provider: recorded`` judges (model: the judge's name, cost 0,
never called; a judge's samples reduced as a sampled judge's are); each item's consensus is
the panel's default rule (:func:`juryflow.maths.consensus.panel_consensus`), and the run
(``kind = 'import'``, its panel listing every judge) is written whole in one transaction.
No Prefect flow runs: no model is called.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from juryflow.analysis.recorded_rows import (
    ImportOptions,
    RecordedAnswer,
    RecordedImportError,
    RecordedItem,
    RecordedRows,
    read_recorded,
)
from juryflow.judges.anchoring import anchor_spans
from juryflow.judges.panel import RESERVED_JUDGE_IDS, PanelError, PanelSpec, parse_panel
from juryflow.maths.consensus import panel_consensus, resolve_quorum
from juryflow.maths.fitting import fit_rule
from juryflow.maths.records import GoldLabels, Item, Judgment, OutputKind, Span, Usage
from juryflow.maths.samples.reducers import DEFAULT_SAMPLE_REDUCER, reduce_samples
from juryflow.storage.datasets import RowError, dataset_fingerprint
from juryflow.storage.store import RunRecord, Store, new_run_id

RUN_KIND = "import"
"""``runs.kind`` of an imported run (beside ``evaluate`` and ``reaggregate``)."""

MAX_SAMPLES = 100
"""The most samples a judge may have per item (a panel's ``samples`` limit)."""

_NOT_IN_ID = re.compile(r"[^A-Za-z0-9_.:-]+")
_FREE = Usage(cost_usd=0.0)
"""A recorded judgment's usage: no call, nothing paid."""


class BadRows(RecordedImportError):
    """Rows that cannot be imported; none of the file was (``errors`` lists them)."""

    def __init__(self, message: str, errors: Sequence[RowError], unit: str) -> None:
        super().__init__(message)
        self.errors = list(errors)
        self.unit = unit


@dataclass(frozen=True, slots=True)
class ImportResult:
    run_id: str
    db: str
    path: str
    items: int
    judges: int
    judgments: int
    labelled: int
    skipped: tuple[RowError, ...]
    unit: str
    consensus: str
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "db": self.db,
            "file": self.path,
            "items": self.items,
            "judges": self.judges,
            "judgments": self.judgments,
            "labelled_items": self.labelled,
            "skipped_rows": [
                {self.unit: e.row_number, "item_id": e.item_id, "error": e.error}
                for e in self.skipped
            ],
            "consensus": self.consensus,
            "seconds": round(self.seconds, 3),
        }


def judge_ids(names: Sequence[str]) -> dict[str, str]:
    """Each judge's name (a column, a key of a map, a value of the judge column) → a judge
    id a panel takes (letters, digits, ``_ . : -``); raises RecordedImportError on a clash."""
    ids: dict[str, str] = {}
    taken: dict[str, str] = {}
    for name in names:
        judge_id = _NOT_IN_ID.sub("_", name).strip("_") or "judge"
        if judge_id.casefold() in RESERVED_JUDGE_IDS:
            raise RecordedImportError(
                f"judge {name!r}: {judge_id!r} names the panel's combined answer or the human "
                "labels in the analysis views; rename that judge in the file"
            )
        if judge_id in taken:
            raise RecordedImportError(
                f"judges {taken[judge_id]!r} and {name!r} both become judge id {judge_id!r} "
                "(ids take letters, digits and _ . : -); rename one of them in the file"
            )
        taken[judge_id] = name
        ids[name] = judge_id
    return ids


def _item(recorded: RecordedItem) -> Item:
    gold = None
    if recorded.label is not None or recorded.label_spans is not None:
        gold = GoldLabels(bool(recorded.label), recorded.label_spans or ())
    return Item(
        recorded.item_id,
        recorded.variables,
        gold,
        recorded.row_number,
        recorded.metadata,
    )


def _spans(answer: RecordedAnswer, text: str) -> tuple[Span, ...]:
    offsets = [s for s in answer.spans or () if isinstance(s, tuple)]
    quotes = [s for s in answer.spans or () if isinstance(s, str)]
    found = [Span(start, end, text[start:end], "recorded") for start, end in offsets]
    return (*found, *anchor_spans(text, quotes))


def _judgment(
    answer: RecordedAnswer, judge_id: str, kind: OutputKind, text: str, threshold: float
) -> Judgment:
    spans = _spans(answer, text) if kind == "spans" else ()
    score = answer.score
    if score is None:  # spans alone: flagged iff one anchors, the span prompt's rule
        score = 1.0 if any(span.anchored for span in spans) else 0.0
    return Judgment(
        item_id=answer.item_id,
        judge_id=judge_id,
        output_kind=kind,
        score=score,
        spans=spans,
        raw_output=answer.raw,
        provider="recorded",
        model=answer.judge,
        usage=_FREE,
        verdict_threshold=threshold,
    )


@dataclass(frozen=True, slots=True)
class _Panel:
    spec: PanelSpec
    ids: dict[str, str]
    kind: OutputKind
    samples: dict[str, int]


def _panel(rows: RecordedRows, options: ImportOptions, name: str) -> _Panel:
    ids = judge_ids(rows.judges)
    kind: OutputKind = "spans" if options.spans_column is not None else "score"
    counts: dict[tuple[str, str], int] = {}
    for answer in rows.answers:
        if answer.sample is not None:
            key = (answer.item_id, answer.judge)
            counts[key] = counts.get(key, 0) + 1
    samples: dict[str, int] = {}
    for (_, judge), count in counts.items():
        samples[judge] = max(samples.get(judge, 1), count)
    over = {judge: n for judge, n in samples.items() if n > MAX_SAMPLES}
    if over:
        judge, n = next(iter(over.items()))
        raise RecordedImportError(
            f"judge {judge!r} has {n} samples of one item; juryflow keeps at most "
            f"{MAX_SAMPLES} per judge and item"
        )
    judges = []
    for judge in rows.judges:
        spec: dict[str, Any] = {
            "id": ids[judge],
            "provider": "recorded",
            "model": judge,
            "output": kind,
            "verdict_threshold": options.threshold,
        }
        if samples.get(judge, 1) > 1:
            spec["samples"] = samples[judge]
            spec["sample_reducer"] = DEFAULT_SAMPLE_REDUCER[kind]
        judges.append(spec)
    if not judges:
        raise RecordedImportError(
            "no judge answered any item: every judge cell is empty (check the --positive "
            "value and the judge columns)"
        )
    data = {"name": name, "judges": judges, "quorum": options.quorum}
    try:
        panel = parse_panel(data, "the imported judges")
    except PanelError as error:
        raise RecordedImportError(str(error)) from None
    return _Panel(panel, ids, kind, samples)


def _judgments(
    rows: RecordedRows, panel: _Panel, texts: Mapping[str, str], threshold: float
) -> dict[str, list[Judgment]]:
    """Each item's judgments in panel order; a judge's samples reduced to one judgment."""
    order = {judge: k for k, judge in enumerate(rows.judges)}
    grouped: dict[tuple[str, str], list[RecordedAnswer]] = {}
    for answer in rows.answers:
        grouped.setdefault((answer.item_id, answer.judge), []).append(answer)
    by_item: dict[str, list[Judgment]] = {item_id: [] for item_id in texts}
    for (item_id, judge), answers in sorted(grouped.items(), key=lambda pair: order[pair[0][1]]):
        text = texts[item_id]
        made = [
            _judgment(a, panel.ids[judge], panel.kind, text, threshold)
            for a in sorted(answers, key=lambda a: a.sample or 0)
        ]
        if answers[0].sample is None or panel.samples.get(judge, 1) == 1:
            by_item[item_id].append(made[0])
        else:
            reducer = DEFAULT_SAMPLE_REDUCER[panel.kind]
            by_item[item_id].append(reduce_samples(made, reducer, text))
    return by_item


def _check_rows(rows: RecordedRows, options: ImportOptions, path: Path) -> None:
    if not rows.errors:
        return
    if options.skip_bad_rows and rows.items:
        return
    count = len(rows.errors)
    noun = f"{rows.unit}{'s' * (count != 1)}"
    if options.skip_bad_rows:
        raise BadRows(
            f"{path}: no {rows.unit} could be imported ({count} bad {noun}); nothing was",
            rows.errors,
            rows.unit,
        )
    hints = "".join(f" {hint[0].upper()}{hint[1:]}." for hint in rows.hints)
    raise BadRows(
        f"{path}: {count} bad {noun}, so nothing was imported.{hints} Fix them, or pass "
        "--skip-bad-rows to import the other rows (the bad ones are kept in row_errors)",
        rows.errors,
        rows.unit,
    )


def import_recorded(store: Store, path: Path, options: ImportOptions) -> ImportResult:
    """Import ``path`` as one completed run of ``store`` (all of it, or nothing)."""
    started = time.perf_counter()
    rows = read_recorded(path, options)
    _check_rows(rows, options, path)
    panel = _panel(rows, options, f"recorded:{path.stem}")
    items = [_item(r) for r in rows.items]
    texts = {item.item_id: item.text("response") for item in items}
    by_item = _judgments(rows, panel, texts, options.threshold)
    n_judges = len(panel.spec.judges)
    try:
        quorum = resolve_quorum(n_judges, panel.spec.effective_quorum)
    except ValueError as error:
        raise RecordedImportError(f"--quorum: {error}") from None
    ids = [spec.id for spec in panel.spec.judges]
    rule = fit_rule(panel.spec.consensus_rule(), by_item, texts, ids)
    consensus = panel_consensus(by_item, texts, n_judges, quorum, rule=rule)
    judgments = [j for item_judgments in by_item.values() for j in item_judgments]
    run = RunRecord(
        run_id=new_run_id(),
        kind=RUN_KIND,
        suite=options.suite or f"{path.stem}:recorded",
        status="running",
        started_at=datetime.now(UTC),
        finished_at=None,
        dataset=str(path.resolve()),
        panel_name=panel.spec.name,
        panel=panel.spec.public_dict(),
        prompts=[],
        quorum=quorum,
        n_judges=n_judges,
        parameters={"import": _parameters(options, panel.ids)},
        consensus=rule.to_dict(),
        dataset_fingerprint=dataset_fingerprint(path),
    )
    store.migrate()
    skipped = rows.errors if options.skip_bad_rows else []
    store.write_completed_run(run, items, judgments, consensus, skipped)
    from juryflow.analysis.agreement_report import record_reliability

    record_reliability(store, run.run_id)  # the store holds what `agreement` shows
    return ImportResult(
        run_id=run.run_id,
        db=str(store.path),
        path=str(path),
        items=len(items),
        judges=n_judges,
        judgments=len(judgments),
        labelled=sum(item.gold is not None for item in items),
        skipped=tuple(skipped),
        unit=rows.unit,
        consensus=str(rule),
        seconds=time.perf_counter() - started,
    )


def _parameters(options: ImportOptions, ids: Mapping[str, str]) -> dict[str, Any]:
    """The options as stored with the run (``runs.parameters.import``)."""
    given = {
        name: getattr(options, name)
        for name in ImportOptions.__dataclass_fields__
        if getattr(options, name) not in (None, (), False)
    }
    renamed = {name: judge_id for name, judge_id in ids.items() if name != judge_id}
    return {
        **{k: list(v) if isinstance(v, tuple) else v for k, v in given.items()},
        **({"judge_ids": renamed} if renamed else {}),
    }
