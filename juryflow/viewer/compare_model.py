"""A regression comparison as the viewer shows it: a stored one (``comparisons`` table, as
`juryflow regression` saved it) or two runs picked on the runs page, compared by the same
:func:`juryflow.maths.regression_stats.compare` and judged against the default thresholds,
without storing anything."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from juryflow.maths.regression_stats import Comparison, Thresholds, gate
from juryflow.pages.charts import drift_svg
from juryflow.pages.regression_words import figure, noise_floor_rows
from juryflow.planning.head_to_head_pairs import pairs_file_name
from juryflow.report.self_agreement_columns import head_to_head_facts
from juryflow.storage.comparisons import compare_stored
from juryflow.storage.reads.view_queries import comparison, head_to_head_run, list_comparisons
from juryflow.storage.store import RunRecord, Store
from juryflow.viewer.run_model import comparison_href, item_href, run_href, when


@dataclass(frozen=True, slots=True)
class Flip:
    item_id: str
    href: str


@dataclass(frozen=True, slots=True)
class Drift:
    judge_id: str
    drift: str
    n_paired: int
    over: bool
    """Beyond the drift threshold (either way)."""


@dataclass(frozen=True, slots=True)
class ComparePage:
    baseline: RunRecord
    run: RunRecord
    baseline_href: str
    run_href: str
    stored_id: str | None
    """The comparison's id when it was stored by `juryflow regression`; None when made here."""
    created: str
    regressed: bool
    message: str
    figures: list[tuple[str, str]]
    to_hallucinated: list[Flip]
    to_clean: list[Flip]
    drifts: list[Drift]
    drift_chart: Markup
    threshold: float | None
    stored: list[tuple[str, str]]
    """Stored comparisons of these two runs (id, link), on the page of an unstored one."""
    head_to_head: HeadToHeadFacts | None = None
    """The two runs' answers judged side by side (`juryflow regression --pairwise`)."""


@dataclass(frozen=True, slots=True)
class HeadToHeadFacts:
    run_id: str
    """The pairwise run: the baseline's answer as A, the run's as B."""
    href: str
    facts: list[tuple[str, str]]


def _head_to_head(store: Store, baseline_id: str, run_id: str) -> HeadToHeadFacts | None:
    """The newest head-to-head of the two runs, as the pairwise run's report shows it."""
    from juryflow.analysis.preference_report import run_preference_summary

    found = head_to_head_run(store, pairs_file_name(baseline_id, run_id))
    if found is None:
        return None
    preference = run_preference_summary(store, found)
    if preference is None:
        return None
    return HeadToHeadFacts(found, run_href(found), head_to_head_facts(preference))


def _figures(record: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        ("paired items", figure(record["n_paired"])),
        ("mean change in the consensus median score", figure(record["mean_delta"])),
        ("95% bootstrap interval", f"{figure(record['ci_low'])} to {figure(record['ci_high'])}"),
        ("median change in the consensus median score", figure(record["median_delta"])),
        (
            "Wilcoxon statistic / p",
            f"{figure(record['wilcoxon_statistic'])} / {figure(record['p_value'])}",
        ),
        *noise_floor_rows((record.get("thresholds") or {}).get("noise_floor")),
        ("flips to hallucinated", figure(record["flips_to_hallucinated"])),
        ("flips to clean", figure(record["flips_to_clean"])),
        (
            "agreement on the paired items (Krippendorff α)",
            f"{figure(record['agreement_before'])} → {figure(record['agreement_after'])}",
        ),
    ]


def _record(c: Comparison, thresholds: Thresholds) -> dict[str, Any]:
    """An unstored comparison in the shape of a stored one (what ``save_comparison`` writes)."""
    verdict = gate(c, thresholds)
    s = c.score
    return {
        "comparison_id": None,
        "created_at": None,
        "n_paired": s.n_paired,
        "mean_delta": s.mean_delta,
        "median_delta": s.median_delta,
        "ci_low": s.ci_low,
        "ci_high": s.ci_high,
        "wilcoxon_statistic": s.statistic,
        "p_value": s.p_value,
        "flips_to_hallucinated": c.flips_to_hallucinated,
        "flips_to_clean": c.flips_to_clean,
        "agreement_before": c.agreement_before,
        "agreement_after": c.agreement_after,
        "regressed": verdict.regressed,
        "message": verdict.message,
        "thresholds": thresholds.as_dict(),
        "flipped_items": c.flipped_items,
        "judges": [
            {"judge_id": j.judge_id, "drift": j.drift, "n_paired": j.n_paired} for j in c.judges
        ],
    }


def _page(
    store: Store,
    baseline: RunRecord,
    run: RunRecord,
    record: dict[str, Any],
    stored: list[tuple[str, str]],
) -> ComparePage:
    threshold = (record.get("thresholds") or {}).get("max_judge_drift")
    flipped = record.get("flipped_items") or {}
    drifts = [
        Drift(
            str(j["judge_id"]),
            figure(j["drift"]),
            int(j["n_paired"]),
            threshold is not None
            and j["drift"] is not None
            and not math.isnan(j["drift"])
            and abs(j["drift"]) > threshold,
        )
        for j in record["judges"]
    ]
    return ComparePage(
        baseline=baseline,
        run=run,
        baseline_href=run_href(baseline.run_id),
        run_href=run_href(run.run_id),
        stored_id=record["comparison_id"],
        created=when(record["created_at"]),
        regressed=bool(record["regressed"]),
        message=str(record["message"]),
        figures=_figures(record),
        to_hallucinated=[
            Flip(i, item_href(run.run_id, i)) for i in flipped.get("to_hallucinated", [])
        ],
        to_clean=[Flip(i, item_href(run.run_id, i)) for i in flipped.get("to_clean", [])],
        drifts=drifts,
        drift_chart=drift_svg([(j["judge_id"], j["drift"]) for j in record["judges"]], threshold),
        threshold=threshold,
        stored=stored,
        head_to_head=_head_to_head(store, baseline.run_id, run.run_id),
    )


class MissingRun(LookupError):
    """A run the comparison names is not in the store."""


def _run(store: Store, run_id: str) -> RunRecord:
    record = store.get_run(run_id)
    if record is None:
        raise MissingRun(f"no run {run_id!r} in {store.path}; the runs page lists them")
    return record


def load_stored(store: Store, comparison_id: str) -> ComparePage | None:
    """A comparison `juryflow regression` stored, or None when there is none of that id."""
    record = comparison(store, comparison_id)
    if record is None:
        return None
    baseline, run = _run(store, record["baseline_run_id"]), _run(store, record["run_id"])
    return _page(store, baseline, run, record, [])


def load_pair(store: Store, baseline_id: str, run_id: str) -> ComparePage:
    """Run ``run_id`` compared with ``baseline_id`` now (nothing stored)."""
    baseline, run = _run(store, baseline_id), _run(store, run_id)
    result = compare_stored(store, baseline_id, run_id)
    stored = [
        (row.comparison_id, comparison_href(row.comparison_id))
        for row in list_comparisons(store, run_id)
        if row.run_id == run_id and row.baseline_run_id == baseline_id
    ]
    return _page(store, baseline, run, _record(result, Thresholds()), stored)
