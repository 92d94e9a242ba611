"""The `reaggregate` flow: a new consensus from a run's stored judgments, no judge called.

The new run (``kind='reaggregate'``, ``parent_run_id`` = the source run) gets copies of the
source's items, judgments and judgment spans under its own run id, so that every query and
view that works on a run works on it too, and its own consensus computed with the new
quorum and consensus rule (``--consensus``, a stored ``--calibration``, or ``--min-votes``).
Rules fitted over the whole run (``dawid_skene``) are fitted here, on the run's judgments.

An early-stopped source run (``--early-stop``) has judges it never called on items its rule
had decided: its consensus is exact for its own rule and quorum only (``maths/early_stop.py``).
Under another rule or quorum the new consensus counts the judges that were called, and the
summary's ``warning`` says so.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.runtime import flow_run

from juryflow.flows.artifacts import publish_run_artifacts
from juryflow.judges.panel import PanelSpec, parse_panel
from juryflow.maths.consensus import item_consensus, resolve_quorum
from juryflow.maths.fitting import fit_rule
from juryflow.maths.records import Consensus, Judgment
from juryflow.maths.reducers import ConsensusRule, RuleError, RuleRef
from juryflow.planning.run_setup import RunPlan
from juryflow.storage.store import RunRecord, Store, new_run_id


class ReaggregateError(ValueError):
    pass


def _text_variable(run: RunRecord, store: Store) -> str:
    """The variable the source run's spans point into, decided as the run decided it."""
    panel = parse_panel(run.panel, f"run {run.run_id}")
    plan = RunPlan(
        run_id=run.run_id,
        store=store,
        panel=panel,
        dataset=Path(run.dataset or ""),
        mapping={},
        quorum=run.quorum,
        chunk_size=1,
        max_chars=1,
        use_cache=False,
        resumed=False,
    )
    return plan.text_variable


def recompute(
    judgments: list[Judgment],
    texts: dict[str, str],
    n_judges: int,
    quorum: int,
    rule: ConsensusRule,
    judge_ids: list[str],
) -> tuple[list[Consensus], ConsensusRule]:
    """Every item's consensus under ``rule``, after fitting what it fits over the run."""
    by_item: dict[str, list[Judgment]] = {item_id: [] for item_id in texts}
    for judgment in judgments:
        by_item.setdefault(judgment.item_id, []).append(judgment)
    fitted = fit_rule(rule, by_item, texts, judge_ids)
    return [
        item_consensus(
            item_id, item_judgments, n_judges, texts.get(item_id, ""), quorum, rule=fitted
        )
        for item_id, item_judgments in by_item.items()
    ], fitted


def refit_run_consensus(store: Store, run_id: str, rule: ConsensusRule) -> ConsensusRule:
    """Replace a finished run's consensus by ``rule`` fitted over all its judgments."""
    run = store.get_run(run_id)
    if run is None:
        raise ReaggregateError(f"no run {run_id!r} in {store.path}")
    return _replace_consensus(store, run_id, run, run.quorum, rule)


def _replace_consensus(
    store: Store, run_id: str, judged: RunRecord, quorum: int, rule: ConsensusRule
) -> ConsensusRule:
    """Recompute RUN_ID's consensus from its stored judgments under ``rule`` and store it;
    ``judged`` is the run whose panel and text variable the judgments came from."""
    panel = parse_panel(judged.panel, f"run {judged.run_id}")
    variable = _text_variable(judged, store)
    texts = {item.item_id: item.text(variable) for item in store.load_items(run_id)}
    consensus, fitted = recompute(
        store.load_judgments(run_id),
        texts,
        judged.n_judges,
        quorum,
        rule,
        [j.id for j in panel.judges],
    )
    store.replace_consensus(run_id, consensus, fitted.to_dict())
    return fitted


def partial_warning(
    store: Store, source: RunRecord, rule: ConsensusRule, quorum: int
) -> str | None:
    """One line when ``rule`` (or ``quorum``) is not the early-stopped ``source``'s own: its
    consensus is then over the judges the source called, not the panel's."""
    if rule.to_dict() == source.consensus and quorum == source.quorum:
        return None
    skipped = len(store.skipped_pairs(source.run_id))
    if not skipped:
        return None
    return (
        f"run {source.run_id} stopped early ({skipped} judgments skipped as decided by its "
        "own rule): this consensus counts only the judges it called; for the full panel's, "
        "run the dataset again without --early-stop"
    )


def choose_rule(
    store: Store,
    source: RunRecord,
    panel: PanelSpec,
    consensus: list[str] | None,
    calibration: str | None,
    min_votes: int | None,
) -> ConsensusRule:
    """The rule a re-aggregation applies: a calibration, or options over the source's rule."""
    from juryflow.planning.run_setup import RunSetupError, consensus_rule_for

    try:
        if calibration is not None:
            base = consensus_rule_for(store, panel, calibration)
        elif source.consensus:
            base = ConsensusRule.from_dict(source.consensus)
        else:
            base = panel.consensus_rule()
        rule = ConsensusRule.from_options(consensus, base) if consensus else base
        if min_votes is not None:
            rule = replace(rule, spans=RuleRef("spans", "at_least", float(min_votes)))
        if consensus or min_votes is not None:
            # A reliability fitted for the source's votes says nothing about new options.
            if rule.verdict.needs_fit:
                rule = replace(rule, verdict_fit=None)
            if rule.score.needs_fit:
                rule = replace(rule, score_fit=None)
        rule.check_judges([j.id for j in panel.judges])
        rule.check_kind(pairwise=panel.pairwise)
    except (RuleError, RunSetupError) as error:
        raise ReaggregateError(str(error)) from None
    return rule.resolve(panel.all_span_judges)


@flow(name="reaggregate", log_prints=True)
async def reaggregate(
    run_id: str,
    db: str | None = None,
    quorum: int | None = None,
    min_votes: int | None = None,
    suite: str | None = None,
    consensus: list[str] | None = None,
    calibration: str | None = None,
) -> dict[str, Any]:
    """Recompute RUN's consensus with a new rule and quorum into a new run; calls no judge."""
    logger = get_run_logger()
    store = Store(db)
    store.migrate()
    source = store.get_run(run_id)
    if source is None:
        raise ReaggregateError(f"no run {run_id!r} in {store.path}")
    if source.status != "completed":
        raise ReaggregateError(f"run {run_id} is {source.status}; only completed runs")
    needed = resolve_quorum(source.n_judges, quorum if quorum is not None else source.quorum)
    if min_votes is not None and not 1 <= min_votes <= source.n_judges:
        raise ReaggregateError(
            f"--min-votes {min_votes} does not fit a panel of {source.n_judges} judges: "
            f"it must be between 1 and {source.n_judges}"
        )
    panel = parse_panel(source.panel, f"run {run_id}")
    rule = choose_rule(store, source, panel, consensus, calibration, min_votes)
    warning = partial_warning(store, source, rule, needed)
    if warning is not None:
        logger.warning(warning)
    new_id = new_run_id()
    store.create_run(
        replace(
            source,
            run_id=new_id,
            kind="reaggregate",
            suite=suite or source.suite,
            status="running",
            started_at=datetime.now(UTC),
            finished_at=None,
            quorum=needed,
            parent_run_id=run_id,
            parameters={
                **(source.parameters or {}),
                "source_run_id": run_id,
                "quorum": needed,
                "min_votes": min_votes,
                "consensus": list(consensus or []),
                "calibration": calibration,
            },
            flow_run_id=str(flow_run.get_id() or "") or None,
            error=None,
            consensus=rule.to_dict(),
        )
    )
    try:
        store.copy_run_rows(run_id, new_id)
        fitted = _replace_consensus(store, new_id, source, needed, rule)
    except BaseException as error:
        store.finish_run(new_id, "failed", f"{type(error).__name__}: {error}")
        raise
    store.finish_run(new_id, "completed")
    from juryflow.analysis.agreement_report import record_reliability

    record_reliability(store, new_id)
    logger.info(
        "run %s: consensus of %s recomputed (quorum %s; %s)", new_id, run_id, needed, fitted
    )
    summary = store.run_summary(new_id)
    summary.update(run_id=new_id, parent_run_id=run_id, db=str(store.path), quorum=needed)
    # No judge was called: the copied judgments' cost was paid by the source run.
    reused = float(summary.get("cost_usd") or 0.0)
    summary.update(model_calls=False, cost_usd=0.0, cost_spent_usd=0.0, cost_reused_usd=reused)
    summary["min_votes"] = min_votes
    summary["consensus"] = str(fitted)
    summary["warnings"] = [warning] if warning is not None else []
    await publish_run_artifacts(store, new_id)
    return summary
