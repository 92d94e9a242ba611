"""The head-to-head step of a regression: a pairwise panel judges, item by item, the
baseline's answer (A) against the new run's (B), in both orders.

Thin: the pairs are written by :mod:`juryflow.planning.head_to_head_pairs` next to the store,
judged by an ordinary ``evaluate`` run (a subflow, suite ``<suite>~head-to-head``, so never a
regression's baseline), and read back as the run's
:class:`~juryflow.analysis.preference_report.PreferenceSummary`. With the noise floor, an
A/A run judges the baseline's answers against themselves first: it must come out at 50 %,
or the comparison is biased and its verdict is not used.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect import get_run_logger

from juryflow.analysis.preference_report import PreferenceSummary, run_preference_summary
from juryflow.flows.evaluate import evaluate
from juryflow.judges.panel import load_panel
from juryflow.planning.head_to_head_pairs import pairs_file_name, write_head_to_head
from juryflow.planning.run_request import RunRequest
from juryflow.storage.store import Store

SUITE_SUFFIX = "~head-to-head"
"""The head-to-head runs' suite is the regression's with this suffix."""


@dataclass(frozen=True, slots=True)
class HeadToHeadCheck:
    run_id: str
    """The pairwise run (baseline against candidate)."""
    summary: PreferenceSummary
    aa_run_id: str | None = None
    aa: PreferenceSummary | None = None
    """The baseline against itself, with the noise floor."""


def pairs_path(store: Store, baseline_id: str, candidate_id: str) -> Path:
    """Where the pairs of two runs are written: beside the store (a lake's in the temporary
    folder), one file per comparison."""
    name = pairs_file_name(baseline_id, candidate_id)
    if isinstance(store.path, Path):
        return store.path.parent / f"{store.path.stem}.pairs" / name
    return Path(tempfile.gettempdir()) / "juryflow-pairs" / name


async def _judge_pairs(
    store: Store, request: RunRequest, baseline_id: str, candidate_id: str, panel: str, suite: str
) -> tuple[str, PreferenceSummary]:
    if not all(j.output_kind == "preference" for j in load_panel(panel).judges):
        # Before a pair is judged: a panel of other judges would pay for answers of no use.
        raise ValueError(
            f"--pairwise panel {panel} has judges that are not pairwise: give it judges whose "
            "prompt is pairwise_preference (or a prompt file with output: preference)"
        )
    path = pairs_path(store, baseline_id, candidate_id)
    write_head_to_head(store, baseline_id, candidate_id, path)
    pairs = RunRequest(
        dataset=str(path),
        panel=panel,
        db=request.db,
        suite=f"{suite}{SUITE_SUFFIX}",
        use_cache=request.use_cache,
        max_chars=request.max_chars,
        batch=request.batch,  # a nightly run's pairs go through the batch APIs too
    )
    summary: dict[str, Any] = await evaluate(pairs)
    run_id = str(summary["run_id"])
    # The run's own items (rows it refused are not among them) size the arrays.
    found = run_preference_summary(store, run_id)
    assert found is not None  # every judge is pairwise (checked above)
    return run_id, found


async def head_to_head_check(
    store: Store,
    request: RunRequest,
    baseline_id: str,
    run_id: str,
    panel: str,
    suite: str,
    aa: bool = False,
) -> HeadToHeadCheck:
    """Judge the baseline's answers against the new run's (and, with ``aa``, against
    themselves first) with the pairwise ``panel``."""
    aa_run_id = aa_summary = None
    if aa:
        aa_run_id, aa_summary = await _judge_pairs(
            store, request, baseline_id, baseline_id, panel, suite
        )
    pair_run, summary = await _judge_pairs(store, request, baseline_id, run_id, panel, suite)
    get_run_logger().info(
        "head to head: run %s judged %s's answers against %s's", pair_run, baseline_id, run_id
    )
    return HeadToHeadCheck(pair_run, summary, aa_run_id, aa_summary)
