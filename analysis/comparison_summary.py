"""A comparison of two runs as the regression check reports it: its figures, the gate's
verdict and the baseline's warnings, in one dict. The regression flow stores it (and adds
the stored comparison's id); `juryflow compare` prints it unstored; both read it here."""

from __future__ import annotations

import math
from typing import Any

from juryflow.analysis.regression_baseline import baseline_warnings
from juryflow.maths.regression_stats import Comparison, HeadToHead, Thresholds, gate
from juryflow.storage.comparisons import judged_item_count
from juryflow.storage.store import Store


def comparison_summary(
    store: Store,
    comparison: Comparison,
    run_id: str,
    baseline_run_id: str,
    thresholds: Thresholds,
    head_to_head: HeadToHead | None = None,
) -> dict[str, Any]:
    """``comparison`` (``run_id`` against ``baseline_run_id``) judged by ``thresholds`` (and
    a pairwise panel's ``head_to_head``), its NaNs as None; ``comparison_id`` is None until
    the caller stores it."""
    verdict = gate(comparison, thresholds, head_to_head)
    run, baseline = store.get_run(run_id), store.get_run(baseline_run_id)
    assert run is not None and baseline is not None  # both resolved before
    n_items = judged_item_count(store, run_id)
    score = comparison.score

    def num(value: float) -> float | None:
        return None if math.isnan(value) else value

    return {
        "comparison_id": None,
        "run_id": run_id,
        "suite": run.suite,
        "baseline_run_id": baseline_run_id,
        "regressed": verdict.regressed,
        "problems": verdict.problems,
        "notes": verdict.notes,
        "message": verdict.message,
        "n_paired": score.n_paired,
        "n_items": n_items,
        "baseline_warnings": baseline_warnings(run, baseline, n_items, score.n_paired),
        "mean_delta": num(score.mean_delta),
        "p_value": num(score.p_value),
        "ci_low": num(score.ci_low),
        "ci_high": num(score.ci_high),
        "flips_to_hallucinated": comparison.flips_to_hallucinated,
        "flips_to_clean": comparison.flips_to_clean,
        "flipped_items": comparison.flipped_items,
        "judge_drift": {j.judge_id: num(j.drift) for j in comparison.judges},
        "agreement_before": num(comparison.agreement_before),
        "agreement_after": num(comparison.agreement_after),
        "agreement_change": num(comparison.agreement_change),
        "thresholds": thresholds.as_dict(),
        "noise_floor": (
            None if thresholds.noise_floor is None else thresholds.noise_floor.as_dict()
        ),
        "head_to_head": None if head_to_head is None else head_to_head.as_dict(),
    }
