"""The bias probes on a run's page and in its HTML report: `juryflow agreement --bias`'s
table, in the same words.

Every figure is a field of :class:`juryflow.analysis.bias_report.BiasReport`, shown with the
CLI's own formatting (:mod:`juryflow.pages.bias_words`), so an effect on the page can be
found in the terminal by its text. The report is computed when the page is requested, and
only for a run with human labels: the probes are measured against them, and a run without
them gets one line saying so, at no cost.

What the page adds to the CLI's table is words, never numbers: a probe that no judge could
be measured on for one reason (the items name no writer, say) is one line instead of a row
per judge, and a judge without a position probe is named with why.
"""

from __future__ import annotations

from dataclasses import dataclass

from juryflow.analysis.agreement_report import AgreementReport
from juryflow.analysis.bias_report import BiasProbe, BiasReport, bias_report
from juryflow.pages.bias_words import bias_notes, bias_title, interval, signed, stands_out
from juryflow.storage.store import Store

NO_LABELS = (
    "This run has no human labels: the bias probes measure each judge against them, so "
    "none is computed here (juryflow agreement --bias measures length and "
    "self-preference without that control)."
)


@dataclass(frozen=True, slots=True)
class ProbeRow:
    judge_id: str
    probe: str
    effect: str
    interval: str
    n: str
    """Items counted; blank when none."""
    note: str
    stands_out: bool
    """The interval excludes 0 (bold, as in the terminal)."""


@dataclass(frozen=True, slots=True)
class BiasSection:
    title: str
    rows: list[ProbeRow]
    unmeasured: list[str]
    """One line per probe that could not be measured, and why."""
    notes: list[str]
    reason: str | None = None
    """Why nothing is shown (a run without human labels); None when the probes are."""


def _row(probe: BiasProbe) -> ProbeRow:
    e = probe.effect
    return ProbeRow(
        probe.judge_id,
        probe.probe,
        signed(e.value),
        interval(e),
        str(e.n) if e.n else "",
        probe.note,
        stands_out(e),
    )


def _not_measured_by_anyone(report: BiasReport) -> dict[str, str]:
    """Probes no judge was measured on, all for the same reason: probe -> that reason."""
    reasons: dict[str, set[str]] = {}
    measured: set[str] = set()
    for p in report.probes:
        if p.effect.measured:
            measured.add(p.probe)
        else:
            reasons.setdefault(p.probe, set()).add(p.note)
    return {
        probe: next(iter(notes))
        for probe, notes in reasons.items()
        if probe not in measured and len(notes) == 1
    }


def _position_lines(report: BiasReport, agreement: AgreementReport) -> list[str]:
    """Why a judge has no position probe (the report leaves those rows out)."""
    kinds = {s.judge_id: s.output_kind for s in agreement.judge_summaries}
    probed = {p.judge_id for p in report.probes if p.probe == "position"}
    span_judges = [j for j in agreement.judges if kinds.get(j) == "spans"]
    others = [j for j in agreement.judges if kinds.get(j) != "spans"]
    if not agreement.judges:
        return []  # no judgment stored yet: nothing to explain
    if not span_judges:
        return ["position: no span judge in this panel (it compares flagged and gold spans)"]
    lines = []
    if not probed:
        lines.append("position: no human span labels in this run, so no span judge is probed")
    if others:
        lines.append(f"position: for span judges only, not {', '.join(others)}")
    return lines


def bias_section(store: Store, agreement: AgreementReport) -> BiasSection:
    """The run's bias probes, by the gold source of ``agreement`` (the page's report)."""
    if not agreement.has_gold:
        return BiasSection("Bias probes against the labels", [], [], [], NO_LABELS)
    report = bias_report(store, agreement.run_id, gold=agreement.gold_source)
    collapsed = _not_measured_by_anyone(report)
    return BiasSection(
        title=bias_title(report),
        rows=[_row(p) for p in report.probes if p.probe not in collapsed],
        unmeasured=[f"{probe}: {note}" for probe, note in collapsed.items()]
        + _position_lines(report, agreement),
        notes=bias_notes(report),
    )
