"""The `regression` flow: judge the suite again, compare with a baseline run, fail if worse.

1. run the panel (the `evaluate` flow, as a subflow);
2. pick the baseline: the last successful run of the same suite (``baseline="last"``: the
   newest completed run that no comparison found regressed) or a pinned run id;
3. compare the two runs item by item (:mod:`juryflow.maths.regression_stats`) and store the
   comparison in DuckDB (``comparisons``, ``comparison_judges``);
4. end the flow run **Failed** with a message naming what regressed when a threshold is
   crossed, so that a Prefect automation on "flow run failed" can alert. Either way the
   message also notes a check that could not be applied (a suite too small for the
   Wilcoxon test to ever reach significance passes the mean-increase gate by default).
   The summary says how many items paired with the baseline, and warns when few did or
   when the baseline's panel, consensus rule or calibration differ
   (:mod:`juryflow.analysis.regression_baseline`).

With ``noise_floor``, an A/A check (:mod:`juryflow.flows.noise_check`) first re-judges a
seeded sample of the baseline's items with its own panel, cache off; the judges' noise it
measures (:mod:`juryflow.maths.noise.noise_floor`) is the floor the gate's checks must
clear, stored with the comparison in its ``thresholds``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from prefect import flow, get_run_logger
from prefect.states import Completed, Failed, State

from juryflow.analysis.comparison_summary import comparison_summary
from juryflow.analysis.preference_report import gate_figures
from juryflow.flows.artifacts import publish_comparison_artifacts, publish_report_link
from juryflow.flows.evaluate import evaluate
from juryflow.flows.head_to_head import HeadToHeadCheck, head_to_head_check
from juryflow.flows.noise_check import NoiseCheck, noise_check
from juryflow.maths.noise.noise_floor import noise_floor as measure_floor
from juryflow.maths.regression_stats import (
    Thresholds,
)
from juryflow.planning.run_request import RunRequest
from juryflow.storage.comparisons import (
    compare_stored,
    last_good_run,
    save_comparison,
)
from juryflow.storage.store import Store


class BaselineError(ValueError):
    pass


class RegressionDetected(RuntimeError):
    """Raised by ``await regression(...)`` (without ``return_state``) when the run regressed;
    ``result`` is what a passing run returns (the comparison, its baseline and warnings)."""

    def __init__(self, message: str, result: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.result = result or {}


def resolve_baseline(store: Store, baseline: str, suite: str, run_id: str) -> str | None:
    """The baseline run id, or None when ``"last"`` finds no earlier successful run."""
    if baseline in ("last", ""):
        return last_good_run(store, suite, exclude_run_id=run_id)
    record = store.get_run(baseline)
    if record is None:
        raise BaselineError(f"baseline {baseline!r}: no such run in {store.path}")
    if record.status != "completed":
        raise BaselineError(f"baseline {baseline!r} is {record.status}, not completed")
    if baseline == run_id:
        raise BaselineError("a run cannot be its own baseline")
    return baseline


def compare_runs(
    store: Store,
    run_id: str,
    baseline_run_id: str,
    thresholds: Thresholds,
    noise: NoiseCheck | None = None,
    head_to_head: HeadToHeadCheck | None = None,
) -> dict[str, Any]:
    """Compare ``run_id`` with ``baseline_run_id``, store the comparison, return its summary.

    ``noise``: an A/A check of the baseline; its floor, for this comparison's number of
    paired items, joins the thresholds (and is stored with them)."""
    comparison = compare_stored(store, baseline_run_id, run_id)
    if noise is not None:
        floor = measure_floor(
            noise.sample,
            comparison.score.n_paired,
            {j.judge_id: j.n_paired for j in comparison.judges},
            thresholds.false_alarm_rate,
        )
        thresholds = replace(thresholds, noise_floor=floor)
    figures = None if head_to_head is None else gate_figures(head_to_head.summary, head_to_head.aa)
    summary = comparison_summary(store, comparison, run_id, baseline_run_id, thresholds, figures)
    summary["comparison_id"] = save_comparison(
        store,
        run_id,
        baseline_run_id,
        comparison,
        thresholds,
        summary["problems"],
        summary["message"],
    )
    summary["noise_run_id"] = None if noise is None else noise.run_id
    summary["head_to_head_run_id"] = None if head_to_head is None else head_to_head.run_id
    return summary


@flow(name="regression", log_prints=True)
async def regression(
    request: RunRequest | None = None,
    baseline: str = "last",
    max_mean_increase: float | None = 0.05,
    max_flips_to_hallucinated: int | None = 3,
    max_judge_drift: float | None = 0.1,
    max_agreement_drop: float | None = 0.1,
    p_value_alpha: float = 0.05,
    report: str | None = None,
    noise_floor: bool = False,
    noise_sample: int = 50,
    noise_seed: int = 0,
    false_alarm_rate: float = 0.05,
    pairwise: str | None = None,
) -> State[dict[str, Any]]:
    """Judge the request's dataset with its panel (a new run: the request is
    :class:`RunRequest`, as `evaluate` takes it), compare with the BASELINE run; Failed
    when it regressed.

    ``baseline`` is ``"last"`` (the newest completed run of the same suite that did not
    regress) or a run id. Each ``max_*`` threshold can be disabled with ``None``.
    ``report``: a path for the new run's HTML report, linked from a Prefect link artifact
    (a report that cannot be written is a warning, never a failed check).
    The request's ``batch``: the LLM judges through their providers' batch APIs at half
    the price: what a scheduled run, which nobody waits for, should use.
    ``noise_floor``: first re-judge ``noise_sample`` of the baseline's items (drawn with
    ``noise_seed``) with its own panel, cache off (an A/A check), and flag only changes
    beyond the judges' noise, at ``false_alarm_rate`` for the gate as a whole.
    ``pairwise``: a pairwise panel also judges each baseline answer against the new one,
    in both orders, A/A first with ``noise_floor`` (:mod:`.head_to_head`).
    """
    logger = get_run_logger()
    request = request or RunRequest()
    if request.resume is not None:
        raise ValueError("a regression judges a new run: drop resume (or --resume)")
    thresholds = Thresholds(
        max_mean_increase=max_mean_increase,
        max_flips_to_hallucinated=max_flips_to_hallucinated,
        max_judge_drift=max_judge_drift,
        max_agreement_drop=max_agreement_drop,
        p_value_alpha=p_value_alpha,
        false_alarm_rate=false_alarm_rate,
    )
    if noise_floor and noise_sample < 1:
        raise ValueError(f"noise_sample {noise_sample}: give 1 or more items to re-judge")
    store = Store(request.db)
    store.migrate()
    if baseline not in ("last", "") and store.get_run(baseline) is None:
        # Fail before paying for a run that cannot be compared with anything.
        raise BaselineError(f"baseline {baseline!r}: no such run in {store.path}")
    summary: dict[str, Any] = await evaluate(request)
    run_id = str(summary["run_id"])
    run = store.get_run(run_id)
    assert run is not None
    baseline_id = resolve_baseline(store, baseline, run.suite, run_id)
    if baseline_id is None:
        message = f"no earlier successful run of suite {run.suite!r}: {run_id} is the baseline"
        logger.info(message)
        result = {**summary, "suite": run.suite, "comparison": None, "message": message}
        if report:
            await publish_report_link(store, run_id, report)
        return Completed(message=message, data=result)
    noise = None
    if noise_floor:
        noise = await noise_check(store, request, baseline_id, sample=noise_sample, seed=noise_seed)
        logger.info(
            "A/A check: run %s re-judged %d of baseline %s's items (%d paired)",
            noise.run_id,
            noise_sample,
            baseline_id,
            noise.sample.n_items,
        )
    head = None
    if pairwise:
        head = await head_to_head_check(
            store, request, baseline_id, run_id, pairwise, run.suite, noise_floor
        )
    outcome = compare_runs(store, run_id, baseline_id, thresholds, noise, head)
    await publish_comparison_artifacts(store, run_id)
    if report:
        # After the comparison is stored, so the report shows the regression deltas.
        await publish_report_link(store, run_id, report)
    result = {**summary, "suite": run.suite, "comparison": outcome, "message": outcome["message"]}
    logger.info(
        "run %s vs baseline %s: %d of %d items paired: %s",
        run_id,
        baseline_id,
        outcome["n_paired"],
        outcome["n_items"],
        outcome["message"],
    )
    for warning in outcome["baseline_warnings"]:
        # INFO: the command line, which quiets Prefect's INFO, prints them once itself
        logger.info("warning: %s", warning)
    if outcome["regressed"]:
        # The exception as data: calling the flow raises it, and the state's message is
        # exactly what regressed (the comparison itself is in DuckDB).
        failed = RegressionDetected(outcome["message"], result)
        return Failed(message=outcome["message"], data=failed)
    return Completed(message=outcome["message"], data=result)
