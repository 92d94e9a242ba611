"""The `reaggregate` flow: a new consensus from a run's stored judgments, no judge called.

The new run (``kind='reaggregate'``, ``parent_run_id`` = the source run) gets copies of the
source's items, judgments and judgment spans under its own run id, so that every query and
view that works on a run works on it too, and its own consensus computed with the new
quorum and ``min_votes``.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.runtime import flow_run

from flows.artifacts import publish_run_artifacts
from flows.run_setup import RunPlan
from judges.consensus import item_consensus, resolve_quorum
from judges.panel import parse_panel
from judges.records import Consensus, Judgment
from storage.store import RunRecord, Store, new_run_id


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


def copy_run_rows(store: Store, source_run_id: str, run_id: str) -> None:
    """Copy items, judgments and their spans of one run under another run id (one transaction)."""
    with store.write() as con:
        for table in ("items", "judgments", "judgment_spans"):
            con.execute(
                f"INSERT INTO {table} SELECT * REPLACE (?::VARCHAR AS run_id) "
                f"FROM {table} WHERE run_id = ?",
                [run_id, source_run_id],
            )


def recompute(
    judgments: list[Judgment],
    texts: dict[str, str],
    n_judges: int,
    quorum: int,
    min_votes: int | None,
) -> list[Consensus]:
    by_item: dict[str, list[Judgment]] = {item_id: [] for item_id in texts}
    for judgment in judgments:
        by_item.setdefault(judgment.item_id, []).append(judgment)
    return [
        item_consensus(item_id, item_judgments, n_judges, texts.get(item_id, ""), quorum, min_votes)
        for item_id, item_judgments in by_item.items()
    ]


@flow(name="reaggregate", log_prints=True)
async def reaggregate(
    run_id: str,
    db: str | None = None,
    quorum: int | None = None,
    min_votes: int | None = None,
    suite: str | None = None,
) -> dict[str, Any]:
    """Recompute RUN's consensus with QUORUM and MIN_VOTES into a new run; calls no judge."""
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
            },
            flow_run_id=str(flow_run.get_id() or "") or None,
            error=None,
        )
    )
    try:
        copy_run_rows(store, run_id, new_id)
        variable = _text_variable(source, store)
        texts = {item.item_id: item.text(variable) for item in store.load_items(new_id)}
        consensus = recompute(
            store.load_judgments(new_id), texts, source.n_judges, needed, min_votes
        )
        store.insert_consensus(new_id, consensus)
    except BaseException as error:
        store.finish_run(new_id, "failed", f"{type(error).__name__}: {error}")
        raise
    store.finish_run(new_id, "completed")
    logger.info(
        "run %s: consensus of %s recomputed (quorum %s, min_votes %s)",
        new_id,
        run_id,
        needed,
        min_votes if min_votes is not None else "majority",
    )
    summary = store.run_summary(new_id)
    summary.update(run_id=new_id, parent_run_id=run_id, db=str(store.path), quorum=needed)
    summary["min_votes"] = min_votes
    await publish_run_artifacts(store, new_id)
    return summary
