"""The calibrations on a run's page: what `juryflow calibrate RUN --name NAME` printed and
stored, laid out again from the stored record.

Nothing is recomputed: every figure is a field of the stored report
(:func:`juryflow.analysis.calibrate.report_dict`) or of the stored rule
(``ConsensusRule.to_dict()``), shown with the digits `juryflow calibrate` prints (F1 to
three decimals, intervals to two, changes as ``+x.x points (lo to hi)``), so a number on
the page can be found in the terminal by its text. A report stored by an older juryflow,
without what each judge adds, the cheapest subset or stacking coefficients, shows what it
has; one whose shape cannot be read is one line saying so, and the page still renders.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from juryflow.storage.store import CalibrationRecord, Store

JUDGES_ADDED_TITLE = (
    "What each judge adds: the kept rule's out-of-fold F1 with the judge minus without it "
    "(refitted without it on each training fold)"
)


# -- how numbers read (as `juryflow calibrate` prints them) ------------------------------


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    number = float(value)
    return None if math.isnan(number) else number


def f3(value: Any) -> str:
    """An F1, precision or recall: ``0.368``."""
    number = _number(value)
    return "—" if number is None else f"{number:.3f}"


def f1_interval(interval: Sequence[Any] | None) -> str:
    """A bootstrap interval of an F1: ``0.31–0.42``."""
    if not interval:
        return "—"
    return f"{float(interval[0]):.2f}–{float(interval[1]):.2f}"


def delta(value: Any, interval: Sequence[Any] | None) -> str:
    """A change of F1 in points with its interval: ``+5.6 points (+1.2 to +9.8)``."""
    number = _number(value)
    if number is None or not interval:
        return "—"
    lo, hi = float(interval[0]), float(interval[1])
    return f"{100 * number:+.1f} points ({100 * lo:+.1f} to {100 * hi:+.1f})"


def coverage(value: Any) -> str:
    number = _number(value)
    return "—" if number is None else f"{100 * number:.0f} %"


def subset_line(subsets: Mapping[str, Any]) -> str:
    """The cheapest subset of judges within noise of the best, in one line."""
    cheapest = subsets.get("cheapest")
    if cheapest is None:
        return "cheapest subset: none within noise of the best (fewer than two judges)"
    cost = (
        f"${float(cheapest['cost']):.4f} an item"
        if subsets.get("cost_unit") == "USD"
        else f"{float(cheapest['cost']):g} calls an item"
    )
    return (
        f"cheapest subset within noise of the best (F1 {float(subsets['best_f1']):.3f}): the "
        f"majority of {', '.join(map(str, cheapest['judges']))} — F1 "
        f"{float(cheapest['response_f1']):.3f} out of fold, {cost}"
    )


# -- what the page shows -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PredictorRow:
    name: str
    kind: str
    coverage: str
    precision: str
    recall: str
    f1: str
    f1_interval: str
    span_precision: str
    span_recall: str
    span_f1: str
    span_f1_interval: str


@dataclass(frozen=True, slots=True)
class WeightRow:
    judge: str
    values: list[str]
    """One per column of :attr:`Weights.columns`; "—" where that part names no weight."""


@dataclass(frozen=True, slots=True)
class Weights:
    """Each judge's weight in the kept rule, as the stored rule's text prints it."""

    columns: list[str]
    rows: list[WeightRow]
    note: str
    """The stacking fit's features and intercept, when the rule stacks."""


@dataclass(frozen=True, slots=True)
class JudgeAddedRow:
    judge: str
    response: str
    spans: str


@dataclass(frozen=True, slots=True)
class SubsetRow:
    size: str
    judges: str
    response_f1: str
    cost: str
    within_noise: str
    cheapest: bool


@dataclass(frozen=True, slots=True)
class CalibrationView:
    name: str
    rule: str
    """The stored rule as `juryflow calibrate` prints it after ``stored as calibration``."""
    facts: list[tuple[str, str]] = field(default_factory=list)
    predictors: list[PredictorRow] = field(default_factory=list)
    interval_level: str = "95 %"
    differences: list[str] = field(default_factory=list)
    weights: Weights | None = None
    judges_added: list[JudgeAddedRow] = field(default_factory=list)
    subset_line: str | None = None
    subsets: list[SubsetRow] = field(default_factory=list)
    subset_unit: str = ""
    notes: list[str] = field(default_factory=list)
    apply: str = ""
    error: str | None = None
    """Why the stored report could not be read (the rest of the view is then empty)."""


@dataclass(frozen=True, slots=True)
class CalibrationsSection:
    calibrations: list[CalibrationView]
    how_to: str
    """The command that calibrates this run, for a run that has none yet."""


def _prf_cells(prf: Mapping[str, Any] | None) -> tuple[str, str, str, str]:
    if prf is None:
        return ("—", "—", "—", "—")
    return (
        f3(prf.get("precision")),
        f3(prf.get("recall")),
        f3(prf.get("f1")),
        f1_interval(prf.get("f1_interval")),
    )


def _predictor(row: Mapping[str, Any]) -> PredictorRow:
    p, r, f1, ci = _prf_cells(row.get("response"))
    sp, sr, sf1, sci = _prf_cells(row.get("spans"))
    return PredictorRow(
        str(row["name"]), str(row.get("kind") or ""), coverage(row.get("coverage")),
        p, r, f1, ci, sp, sr, sf1, sci,
    )  # fmt: skip


def _weights(rule: Mapping[str, Any]) -> Weights | None:
    """The kept rule's per-judge weights: stacking coefficients (``{:.2f}``, as the rule's
    text prints them), verdict and score weights and span weights (``{:g}``)."""
    stack = rule.get("stack")
    parts: list[tuple[str, Mapping[str, Any], str]] = []
    note = ""
    if isinstance(stack, Mapping):
        features = str(stack.get("features", "verdicts"))
        parts.append((f"stacking coefficient ({features})", stack.get("coefficients") or {}, ".2f"))
        note = (
            f"stacked on {features}: intercept {float(stack.get('intercept', 0.0)):.2f}; "
            "a positive coefficient pulls the verdict towards flagged"
        )
    if rule.get("weights"):
        parts.append(("weight", rule["weights"], "g"))
    if rule.get("span_weights"):
        parts.append(("span weight", rule["span_weights"], "g"))
    if not parts:
        return None
    judges: list[str] = []
    for _, values, _ in parts:
        judges += [str(j) for j in values if str(j) not in judges]
    rows = [
        WeightRow(
            judge,
            [
                "—" if values.get(judge) is None else format(float(values[judge]), spec)
                for _, values, spec in parts
            ],
        )
        for judge in judges
    ]
    return Weights([label for label, _, _ in parts], rows, note)


def _is(row: Mapping[str, Any], other: Mapping[str, Any] | None) -> bool:
    return other is not None and [row["size"], list(row["judges"])] == [
        other.get("size"),
        list(other.get("judges") or []),
    ]


def _subsets(subsets: Mapping[str, Any]) -> list[SubsetRow]:
    cheapest = subsets.get("cheapest")
    usd = subsets.get("cost_unit") == "USD"
    return [
        SubsetRow(
            str(s["size"]),
            ", ".join(map(str, s["judges"])),
            f3(s["response_f1"]),
            f"{float(s['cost']):.4f}" if usd else f"{float(s['cost']):g}",
            "yes" if s.get("within_noise") else "no",
            _is(s, cheapest),
        )
        for s in subsets.get("by_size") or []
    ]


def _facts(record: CalibrationRecord, report: Mapping[str, Any]) -> list[tuple[str, str]]:
    facts = [("stored", f"{record.created_at:%Y-%m-%d %H:%M}")]
    if "items" in report:
        by = report.get("group_column") or record.group_column or "item"
        facts.append(
            (
                "labelled items",
                f"{report['items']} in {report.get('groups', '—')} groups (by {by})",
            )
        )
    facts.append(("folds", f"{report.get('folds', record.folds)} (seed {record.seed})"))
    if "gold_source" in report:
        facts.append(("human labels from", str(report["gold_source"])))
    if report.get("fold_choices"):
        facts.append(("each fold chose", " | ".join(map(str, report["fold_choices"]))))
    if "choice_on_all_items" in report:
        facts.append(("chosen on all labelled items", str(report["choice_on_all_items"])))
    if "kept_default" in report:
        kept = (
            "the panel's default rule (the procedure's choice did not beat it out of fold)"
            if report["kept_default"]
            else "the procedure's choice (it beat the panel's default rule out of fold)"
        )
        facts.append(("kept", kept))
    return facts


def _view(record: CalibrationRecord, rule_text: str) -> CalibrationView:
    report = record.report if isinstance(record.report, Mapping) else {}
    added = sorted(report.get("judges_added") or [], key=lambda v: -float(v["response"]))
    subsets = report.get("subsets")
    level = report.get("interval_level")
    return CalibrationView(
        name=record.name,
        rule=str(report.get("rule") or rule_text),
        facts=_facts(record, report),
        predictors=[_predictor(row) for row in report.get("predictors") or []],
        interval_level="95 %" if level is None else f"{100 * float(level):.0f} %",
        differences=[
            f"calibrated − {d['versus']}: response F1 "
            f"{delta(d.get('response'), d.get('response_interval'))}; span F1 "
            f"{delta(d.get('spans'), d.get('span_interval'))}"
            for d in report.get("differences") or []
        ],
        weights=_weights(record.rule) if isinstance(record.rule, Mapping) else None,
        judges_added=[
            JudgeAddedRow(
                str(v["judge"]),
                delta(v.get("response"), v.get("response_interval")),
                delta(v.get("spans"), v.get("span_interval")),
            )
            for v in added
        ],
        subset_line=subset_line(subsets) if isinstance(subsets, Mapping) else None,
        subsets=_subsets(subsets) if isinstance(subsets, Mapping) else [],
        subset_unit=(
            "USD an item"
            if isinstance(subsets, Mapping) and subsets.get("cost_unit") == "USD"
            else "calls an item"
        ),
        notes=[str(n) for n in report.get("notes") or []],
        apply=(
            f"juryflow reaggregate {shlex.quote(record.run_id)} --calibration "
            f"{shlex.quote(record.name)}"
        ),
    )


def calibration_view(record: CalibrationRecord, rule_text: str) -> CalibrationView:
    """One stored calibration as the page shows it; ``rule_text`` is the stored rule's text,
    shown where the report has none."""
    try:
        return _view(record, rule_text)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as error:
        return CalibrationView(
            name=record.name,
            rule=rule_text,
            error=(
                f"its stored report cannot be read ({type(error).__name__}: {error}); "
                f"calibrate again: juryflow calibrate {shlex.quote(record.run_id)} "
                f"--name {shlex.quote(record.name)}"
            ),
        )


def calibrations_section(
    store: Store, run_id: str, rule_text: Callable[[dict[str, Any] | None], str]
) -> CalibrationsSection:
    """The calibrations fitted on ``run_id``, newest first; ``rule_text`` turns a stored rule
    dict into its text (``run_model.rule_text``)."""
    views = [calibration_view(r, rule_text(r.rule)) for r in store.calibrations_of(run_id)]
    how_to = (
        f"juryflow calibrate {shlex.quote(run_id)} --db {shlex.quote(str(store.path))} --name NAME"
    )
    return CalibrationsSection(views, how_to)
