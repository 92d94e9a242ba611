"""A regression's verdict in Markdown, for a CI step summary or a pull-request comment:
what `juryflow compare` and `juryflow regression` print with ``--format markdown``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from juryflow.terminal.output import safe_text

STEP_SUMMARY = "GITHUB_STEP_SUMMARY"
"""Set by GitHub Actions to a file whose Markdown the job's summary page shows."""


def append_step_summary(markdown: str) -> None:
    """Add the verdict to the CI job's summary when the job has one (GitHub Actions), as
    promptfoo's and Braintrust's actions post theirs; nothing outside such a job."""
    target = os.environ.get(STEP_SUMMARY)
    if not target:
        return
    try:
        with Path(target).open("a", encoding="utf-8") as summary:
            summary.write(markdown + "\n")
    except OSError:
        pass  # a summary the job cannot take is no reason to fail the check


def figure_signed(value: float | None, signed: bool = True) -> str:
    return "–" if value is None else (f"{value:+.3g}" if signed else f"{value:.3g}")


def _md(value: object) -> str:
    """Data in a Markdown table cell: one line, its pipes escaped."""
    return safe_text(value, one_line=True).replace("|", "\\|")


def head_to_head_line(c: dict[str, Any]) -> str | None:
    """A pairwise panel's head-to-head of a comparison in one line (None without one)."""
    h = c.get("head_to_head")
    if not h:
        return None

    def pct(value: float | None) -> str:
        return "–" if value is None or value != value else f"{value:.0%}"

    line = (
        f"head to head (pairwise panel, both orders): the new answers' win share "
        f"{pct(h['win_share'])} (95% CI {pct(h['low'])} to {pct(h['high'])}) over "
        f"{h['items']} items; 50% is as good as the baseline"
    )
    if h.get("aa_win_share") is not None:
        line += f"; A/A run {pct(h['aa_win_share'])}"
    return line


def regression_markdown(c: dict[str, Any], title: str = "juryflow compare") -> str:
    """The verdict of a comparison (the dict of ``analysis.comparison_summary``) as a CI
    step summary or a pull-request comment shows it."""
    t = c["thresholds"]
    verdict = "regressed" if c["regressed"] else "no regression"
    p = c["p_value"]
    lines = [
        f"### {title}: {verdict}",
        "",
        f"Run `{_md(c['run_id'])}` (suite `{_md(c['suite'])}`) vs baseline "
        f"`{_md(c['baseline_run_id'])}`: {c['n_paired']} of {c['n_items']} items paired.",
        "",
        "| check | value | allowed |",
        "|---|---|---|",
        f"| mean consensus score change | {figure_signed(c['mean_delta'])} (95% CI "
        f"{figure_signed(c['ci_low'])} to {figure_signed(c['ci_high'])}) | "
        f"rise ≤ {t['max_mean_increase']:g} "
        f"(when p < {t['p_value_alpha']:g}) |",
        f"| flips to hallucinated | {c['flips_to_hallucinated']} | "
        f"≤ {t['max_flips_to_hallucinated']} |",
        f"| flips to clean | {c['flips_to_clean']} | |",
        *(
            f"| judge drift: {_md(judge)} | {figure_signed(drift)} | ±{t['max_judge_drift']:g} |"
            for judge, drift in c["judge_drift"].items()
        ),
        f"| agreement (Krippendorff α) | {figure_signed(c['agreement_before'], False)} → "
        f"{figure_signed(c['agreement_after'], False)} ({figure_signed(c['agreement_change'])}) | "
        f"fall ≤ {t['max_agreement_drop']:g} |",
        f"| paired items | {c['n_paired']} of {c['n_items']} | |",
        f"| Wilcoxon p-value | {'–' if p is None else f'{p:.3g}'} | "
        f"significant below {t['p_value_alpha']:g} |",
    ]
    head = head_to_head_line(c)
    if head is not None:
        lines += ["", _md(head[0].upper() + head[1:])]
    for title, entries in (
        ("What regressed", c["problems"]),
        ("Not checked", c["notes"]),
        ("Baseline warnings", c["baseline_warnings"]),
    ):
        if entries:
            lines += ["", f"**{title}**", "", *(f"- {_md(entry)}" for entry in entries)]
    return "\n".join(lines) + "\n"
