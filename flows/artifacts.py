"""Prefect artifacts for every run: a markdown summary and a per-judge table in Prefect's UI.

Artifacts are a view of what is already in DuckDB; creating them must never fail a run, so
every error here is logged as a warning and swallowed.
"""

from __future__ import annotations

import logging
import math
import re
from typing import Any

import duckdb

from juryflow.analysis.run_figures import spent_text
from juryflow.pages.rule_labels import RunRule
from juryflow.storage.comparisons import latest_comparison
from juryflow.storage.connection import StoreError
from juryflow.storage.reads.consensus_facts import run_verdict_rules
from juryflow.storage.reads.report_queries import judge_stats
from juryflow.storage.reads.run_queries import cost_split
from juryflow.storage.store import Store

_log = logging.getLogger("juryflow.flows.artifacts")


def _logger() -> Any:
    try:
        from prefect import get_run_logger

        return get_run_logger()
    except Exception:
        return _log


def artifact_key(kind: str, suite: str) -> str:
    """Prefect keys allow lowercase letters, digits and dashes only.

    >>> artifact_key("run-summary", "RAGTruth sample:offline_default")
    'juryflow-run-summary-ragtruth-sample-offline-default'
    """
    slug = re.sub(r"[^a-z0-9]+", "-", suite.lower()).strip("-")[:60].strip("-")
    return f"juryflow-{kind}-{slug}" if slug else f"juryflow-{kind}"


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def rounded(value: Any, digits: int = 4) -> Any:
    """A float for a table artifact: ``digits`` decimals, or 3 significant digits when that
    would round a small non-zero value away; NaN and infinities become None (no JSON for
    them). Anything else is returned as it is.

    >>> rounded(0.6923076923076923), rounded(0.0000123456), rounded(float("nan")), rounded(3)
    (0.6923, 1.23e-05, None, 3)
    """
    if not isinstance(value, float):
        return value
    if not math.isfinite(value):
        return None
    if value != 0 and abs(value) < 10 ** -(digits - 1):
        return float(f"{value:.3g}")
    return round(value, digits)


def rounded_table(rows: list[dict[str, Any]], digits: int = 4) -> list[dict[str, Any]]:
    """Rows for ``create_table_artifact`` with every float rounded by :func:`rounded`."""
    return [{key: rounded(value, digits) for key, value in row.items()} for row in rows]


def _md(text: Any) -> str:
    """Markdown table cells: no pipes or newlines from the data."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def run_markdown(store: Store, run_id: str) -> str:
    run = store.get_run(run_id)
    summary = store.run_summary(run_id)
    split = cost_split(store, run_id)
    lines = [f"# juryflow run `{run_id}`", ""]
    if run is not None:
        lines += [
            f"- **kind**: {_md(run.kind)}  **status**: {_md(run.status)}",
            f"- **suite**: {_md(run.suite)}",
            f"- **panel**: {_md(run.panel_name)} ({run.n_judges} judges, quorum {run.quorum})",
            f"- **dataset**: {_md(run.dataset)}",
        ]
        if run.parent_run_id:
            lines.append(f"- **re-aggregated from**: `{_md(run.parent_run_id)}`")
    rate = summary.get("hallucination_rate")
    judges = judge_stats(store, run_id)
    with store.read() as con:
        rules = run_verdict_rules(con, run_id)
    # which rule made the verdicts, so the rate never reads as the median score's
    verdict_rule = RunRule.of(run.consensus if run else None).verdict_label(
        rules[0] if len(rules) == 1 else None
    )
    lines += [
        f"- **items**: {summary['items']} ({summary['insufficient']} below quorum, "
        f"{summary['rejected_rows']} rows rejected)",
        f"- **hallucinated (consensus verdict, {_md(verdict_rule)})**: "
        f"{_fmt(rate * 100 if rate is not None else None)} %",
        f"- **judgments**: {summary['judgments']} ({summary['unscored']} unscored, "
        f"{summary['cache_hits']} from cache)",
        f"- **mean spread between judges**: {_fmt(summary['mean_spread'])}",
        *_early_stop_lines(summary),
        # only what this run's calls cost: cached (or re-aggregated) judgments were paid before
        f"- **cost**: {spent_text(split)}, ${split['cost_reused_usd']:.4f} reused from the cache",
        *_token_lines(judges),
        "",
        "| judge | scored | unscored | mean score | hallucinated "
        "| mean abs diff vs consensus median score |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in judges:
        lines.append(
            f"| {_md(row['judge_id'])} | {row['scored']} | {row['unscored']} | "
            f"{_fmt(row['mean_score'])} | {_fmt(row['hallucinated_share'])} | "
            f"{_fmt(row['mean_abs_diff_from_consensus'])} |"
        )
    comparison = latest_comparison(store, run_id)
    if comparison is not None:
        lines += ["", *comparison_markdown(comparison)]
    return "\n".join(lines) + "\n"


def _early_stop_lines(summary: dict[str, Any]) -> list[str]:
    skipped = summary.get("skipped_decided") or 0
    if not skipped and not summary.get("audit_items"):
        return []
    return [
        f"- **early stopping**: {skipped} judge calls skipped (decided) on "
        f"{summary.get('items_decided_early') or 0} items; {summary.get('audit_items') or 0} "
        "audit items judged by every judge"
        + (
            f"; {summary['items_stopped_lossy']} items stopped on close agreement (lossy)"
            if summary.get("items_stopped_lossy")
            else ""
        )
    ]


def _token_lines(judges: list[dict[str, Any]]) -> list[str]:
    """The tokens of this run's calls, and those of the input the providers' prompt caches
    served and wrote (no mention of a cache no call reported)."""
    if all(row.get("input_tokens") is None for row in judges):
        return []
    tokens_in = sum(row.get("input_tokens") or 0 for row in judges)
    tokens_out = sum(row.get("output_tokens") or 0 for row in judges)
    line = f"- **tokens**: {tokens_in:,} in / {tokens_out:,} out"
    if any(row.get("cache_read_tokens") is not None for row in judges):
        read = sum(row.get("cache_read_tokens") or 0 for row in judges)
        written = sum(row.get("cache_write_tokens") or 0 for row in judges)
        line += f"; of the input, {read:,} served from the prompt cache, {written:,} written to it"
    return [line]


def comparison_markdown(comparison: dict[str, Any]) -> list[str]:
    verdict = "**REGRESSED**" if comparison["regressed"] else "passed"
    lines = [
        f"## Regression check vs `{_md(comparison['baseline_run_id'])}`: {verdict}",
        "",
        f"{_md(comparison['message'])}",
        "",
        f"- paired items: {comparison['n_paired']}",
        f"- mean change in the consensus median score: {_fmt(comparison['mean_delta'])} "
        f"(95% CI {_fmt(comparison['ci_low'])} to {_fmt(comparison['ci_high'])}; "
        f"Wilcoxon p={_fmt(comparison['p_value'])})",
        *_noise_floor_lines(comparison),
        f"- verdict flips: {comparison['flips_to_hallucinated']} to hallucinated, "
        f"{comparison['flips_to_clean']} to clean",
        f"- agreement (alpha): {_fmt(comparison['agreement_before'])} → "
        f"{_fmt(comparison['agreement_after'])}",
        "",
        "| judge | drift | paired |",
        "|---|---:|---:|",
    ]
    for judge in comparison["judges"]:
        lines.append(f"| {_md(judge['judge_id'])} | {_fmt(judge['drift'])} | {judge['n_paired']} |")
    return lines


def _noise_floor_lines(comparison: dict[str, Any]) -> list[str]:
    """The A/A check's noise floor the gate held the changes against (none: not run)."""
    floor = (comparison.get("thresholds") or {}).get("noise_floor")
    if not floor:
        return []
    if floor.get("mean_delta") is None:
        return [f"- noise floor: not measured (the A/A check paired {floor['aa_items']} items)"]
    drifts = ", ".join(f"{_md(j)} {_fmt(v)}" for j, v in (floor.get("judge_drift") or {}).items())
    return [
        f"- noise floor (A/A check of {floor['aa_items']} baseline items, false-alarm rate "
        f"{_fmt(floor['false_alarm_rate'])} over {floor['checks']} checks): mean rise "
        f"{_fmt(floor['mean_delta'])} for {floor['n_paired']} items, "
        f"{_fmt(floor['flips_to_hallucinated'])} flips to hallucinated, agreement fall "
        f"{_fmt(floor.get('agreement_drop'))}; judge drift {drifts or '–'}"
    ]


async def publish_run_artifacts(store: Store, run_id: str) -> bool:
    """Create the run's markdown and table artifacts; False (and a warning) if that failed."""
    try:
        from prefect.artifacts import acreate_markdown_artifact, acreate_table_artifact

        # Read through one connection, and before the first await: a held connection
        # holds the process's store lock, which another coroutine would then wait on.
        with store.reading():
            run = store.get_run(run_id)
            markdown = run_markdown(store, run_id)
            table = rounded_table(judge_stats(store, run_id))
        suite = run.suite if run else run_id
        await acreate_markdown_artifact(
            markdown=markdown,
            key=artifact_key("run-summary", suite),
            description=f"juryflow run {run_id}",
        )
        await acreate_table_artifact(
            table=table,
            key=artifact_key("judges", suite),
            description=f"per-judge statistics of juryflow run {run_id}",
        )
    except Exception as error:
        _logger().warning("could not create the Prefect artifacts of run %s: %s", run_id, error)
        return False
    return True


async def publish_comparison_artifacts(store: Store, run_id: str) -> bool:
    """The regression comparison of ``run_id`` as markdown and a per-judge drift table."""
    try:
        from prefect.artifacts import acreate_markdown_artifact, acreate_table_artifact

        comparison = latest_comparison(store, run_id)
        if comparison is None:
            return False
        run = store.get_run(run_id)
        suite = run.suite if run else run_id
        await acreate_markdown_artifact(
            markdown="\n".join(comparison_markdown(comparison)) + "\n",
            key=artifact_key("regression", suite),
            description=f"juryflow run {run_id} vs {comparison['baseline_run_id']}",
        )
        await acreate_table_artifact(
            table=rounded_table(comparison["judges"]),
            key=artifact_key("drift", suite),
            description=f"per-judge drift of run {run_id} vs {comparison['baseline_run_id']}",
        )
    except Exception as error:
        _logger().warning("could not create the regression artifacts of run %s: %s", run_id, error)
        return False
    return True


async def publish_report_link(store: Store, run_id: str, path: str) -> bool:
    """Write the run's HTML report to ``path`` and link it from a Prefect link artifact.

    The link is a ``file://`` URL: the report is a file next to the store, readable by
    whoever opens the UI on that machine (the report itself is 0600)."""
    from juryflow.report.html import ReportWriteError, write_report

    try:
        written = write_report(store, run_id, path)
    except (ReportWriteError, StoreError, duckdb.Error) as error:
        _logger().warning("could not write the report of run %s: %s", run_id, error)
        return False
    try:
        from prefect.artifacts import acreate_link_artifact

        run = store.get_run(run_id)
        await acreate_link_artifact(
            link=written.resolve().as_uri(),
            link_text=f"juryflow report of run {run_id}",
            key=artifact_key("report", run.suite if run else run_id),
            description=f"HTML report of juryflow run {run_id} ({written})",
        )
    except Exception as error:  # artifacts never fail a run, whatever the API answered
        _logger().warning("could not create the report link of run %s: %s", run_id, error)
        return False
    return True
